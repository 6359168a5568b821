package grammars

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// CheckStep is one token of a checked instance.
type CheckStep struct {
	Index  int
	Token  int32
	Bytes  []byte
	Offset int // bytes before the token
	Err    error
}

// CheckResult explains how a grammar treats a token sequence (dic grammar check).
type CheckResult struct {
	Steps      []CheckStep
	OK         bool // every token accepted and the end is accepting
	RejectedAt int  // index of the first rejected token, -1 if none
	Accepting  bool // after the accepted tokens
	Prefix     []byte
	Allowed    []int32 // tokens the mask allowed at the rejection (a sample)
	NumAllowed int
	Forced     []byte // bytes the grammar forces at the rejection point
	EOSAllowed bool
	vocab      *Vocab
}

// Check walks toks through a fresh matcher of g, computing the mask before each token
// as a sampler would, and stops at the first token the grammar refuses.
func Check(g *Grammar, toks []int32) *CheckResult {
	v := g.Vocab()
	m := g.NewMatcher()
	r := &CheckResult{RejectedAt: -1, vocab: v}
	mask := make([]uint64, v.MaskWords())
	off := 0
	for i, tk := range toks {
		st := CheckStep{Index: i, Token: tk, Bytes: v.TokenBytes(tk), Offset: off}
		if err := m.FillMask(mask); err != nil {
			st.Err = err
		} else if tk < 0 || int(tk) >= v.Width() || mask[tk>>6]&(1<<(uint(tk)&63)) == 0 {
			// the mask refuses it; Accept says why
			if err := m.Accept(tk); err != nil {
				st.Err = err
			} else {
				_ = m.Rollback(1)
				st.Err = errors.New("not in the mask (but Accept takes it: engine inconsistency)")
			}
		} else if err := m.Accept(tk); err != nil {
			st.Err = fmt.Errorf("in the mask but refused: %w (engine inconsistency)", err)
		}
		r.Steps = append(r.Steps, st)
		if st.Err != nil {
			r.RejectedAt = i
			r.Forced = m.ForcedBytes()
			for id := 0; id < v.Width(); id++ {
				if mask[id>>6]&(1<<(uint(id)&63)) != 0 {
					r.NumAllowed++
					if len(r.Allowed) < 12 {
						r.Allowed = append(r.Allowed, int32(id))
					}
				}
			}
			break
		}
		off += len(st.Bytes)
		r.Prefix = append(r.Prefix, st.Bytes...)
	}
	r.Accepting = m.IsAccepting()
	r.EOSAllowed = r.Accepting
	r.OK = r.RejectedAt < 0 && r.Accepting
	return r
}

func (r *CheckResult) tokText(id int32) string {
	if id == r.vocab.EOS() {
		return "<EOS>"
	}
	return strconv.Quote(string(r.vocab.TokenBytes(id)))
}

// Print writes the result.
func (r *CheckResult) Print(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "instance: %d tokens\n", len(r.Steps))
	for _, st := range r.Steps {
		if st.Err == nil && !verbose {
			continue
		}
		status := "ok"
		if st.Err != nil {
			status = "REJECTED: " + st.Err.Error()
		}
		fmt.Fprintf(w, "  token %4d  id %6d  %-24s %s\n", st.Index, st.Token, strconv.Quote(string(st.Bytes)), status)
	}
	if r.RejectedAt >= 0 {
		p := string(r.Prefix)
		if len(p) > 200 {
			p = "..." + p[len(p)-200:]
		}
		fmt.Fprintf(w, "first rejected token: #%d after %d bytes\n  accepted so far: %s\n", r.RejectedAt, len(r.Prefix), strconv.Quote(p))
		var al []string
		for _, id := range r.Allowed {
			al = append(al, r.tokText(id))
		}
		more := ""
		if r.NumAllowed > len(r.Allowed) {
			more = ", ..."
		}
		fmt.Fprintf(w, "  the grammar allowed %d tokens here: %s%s\n", r.NumAllowed, strings.Join(al, " "), more)
		if len(r.Forced) > 0 {
			fmt.Fprintf(w, "  and forces the bytes %s next\n", strconv.Quote(string(r.Forced)))
		}
		return
	}
	if r.Accepting {
		fmt.Fprintln(w, "accepted: every token is allowed and the grammar is complete (EOS allowed)")
	} else {
		fmt.Fprintln(w, "every token is allowed but the grammar is not complete (EOS not allowed): the instance is a prefix")
	}
}
