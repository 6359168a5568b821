package grammars

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Matcher tracks one generation against a compiled Grammar. It is not safe for
// concurrent use; create one per sequence (they are cheap) and share the Grammar.
//
// The sampler calls FillMask into a []uint64 bitset of Vocab().MaskWords() words,
// samples an allowed token and calls Accept. Rollback undoes accepted tokens (for
// speculative decoding); ForcedTokens returns the continuation when the grammar
// leaves only one (jump-forward).
type Matcher struct {
	g      *Grammar
	frames []frame
	fidx   map[uint64]int32
	tops   []int32 // current kernel frames
	hist   []histEntry
	text   []byte // accepted bytes (kept when the grammar has a semantic check)
	done   bool   // EOS accepted
	sc     walkScratch

	// JSON Schema grammars: the keys of open objects, so that none repeats (dupkeys.go)
	track   bool
	keys    keyScan
	keysTmp keyScan

	mark    []uint32
	markGen uint32
	work    []int32
	closed  []int32
	next    []int32
}

type frame struct {
	state  int32 // state ref
	parent int32 // frame index, -1 at the bottom
}

type histEntry struct {
	tops    []int32
	textLen int
	done    bool
}

// NewMatcher starts a matcher at the beginning of the grammar.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{g: g, fidx: map[uint64]int32{}, track: g.kind == "json-schema"}
	m.Reset()
	return m
}

// Reset returns the matcher to the start of the grammar.
func (m *Matcher) Reset() {
	m.frames = m.frames[:0]
	clear(m.fidx)
	m.hist = m.hist[:0]
	m.text = m.text[:0]
	m.done = false
	m.keys.reset()
	st := m.g.symStart(m.g.root)
	m.tops = []int32{m.newFrame(st, -1)}
}

// Grammar returns the compiled grammar.
func (m *Matcher) Grammar() *Grammar { return m.g }

func (m *Matcher) newFrame(state, parent int32) int32 {
	k := uint64(uint32(state))<<32 | uint64(uint32(parent))
	if i, ok := m.fidx[k]; ok {
		return i
	}
	i := int32(len(m.frames))
	m.frames = append(m.frames, frame{state, parent})
	m.fidx[k] = i
	return i
}

func (m *Matcher) nextGen() {
	m.markGen++
	if m.markGen == 0 {
		clear(m.mark)
		m.markGen = 1
	}
	if len(m.mark) < len(m.frames) {
		m.mark = append(m.mark, make([]uint32, len(m.frames)-len(m.mark)+64)...)
	}
}

// closure expands kernel frames along calls and returns. complete reports that the
// bottom frame can return (the document is complete).
func (m *Matcher) closure(tops []int32) (closed []int32, complete bool, err error) {
	g := m.g
	m.nextGen()
	m.work = append(m.work[:0], tops...)
	closed = m.closed[:0]
	for len(m.work) > 0 {
		f := m.work[len(m.work)-1]
		m.work = m.work[:len(m.work)-1]
		if int(f) >= len(m.mark) {
			m.mark = append(m.mark, make([]uint32, int(f)-len(m.mark)+64)...)
		}
		if m.mark[f] == m.markGen {
			continue
		}
		m.mark[f] = m.markGen
		closed = append(closed, f)
		if len(closed) > g.opts.maxStacks() {
			return closed, complete, &LimitError{What: "parallel parses", Limit: g.opts.maxStacks()}
		}
		fr := m.frames[f]
		a, s := g.autOf(fr.state)
		ds := a.state(s)
		aid := fr.state >> refAutShift
		for ci := range ds.calls {
			ret := a.callRet(s, ci)
			if ret < 0 {
				continue
			}
			callee := g.symStart(ds.calls[ci].sym)
			if callee < 0 {
				continue
			}
			parent := fr.parent
			if !a.state(ret).finalOnly {
				parent = m.newFrame(aid<<refAutShift|ret, fr.parent)
			}
			m.work = append(m.work, m.newFrame(callee, parent))
		}
		if ds.accept {
			if fr.parent < 0 {
				complete = true
			} else {
				m.work = append(m.work, fr.parent)
			}
		}
	}
	m.closed = closed
	return closed, complete, nil
}

// step advances closed frames by one byte.
func (m *Matcher) step(closed []int32, b byte, out []int32) []int32 {
	out = out[:0]
	m.nextGen()
	for _, f := range closed {
		fr := m.frames[f]
		a, s := m.g.autOf(fr.state)
		t := a.step(s, b)
		if t < 0 {
			continue
		}
		nf := m.newFrame(fr.state&^refStateMask|t>>pfShift, fr.parent)
		if int(nf) >= len(m.mark) {
			m.mark = append(m.mark, make([]uint32, int(nf)-len(m.mark)+64)...)
		}
		if m.mark[nf] == m.markGen {
			continue
		}
		m.mark[nf] = m.markGen
		out = append(out, nf)
	}
	return out
}

// RejectError says why a token was rejected.
type RejectError struct {
	Token  int32
	Offset int // byte offset within the token, -1 when the token as a whole is refused
	Reason string
}

func (e *RejectError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("token %d rejected at byte %d: %s", e.Token, e.Offset, e.Reason)
	}
	return fmt.Sprintf("token %d rejected: %s", e.Token, e.Reason)
}

// Accept advances the matcher by one token. It returns a *RejectError (and leaves the
// matcher unchanged) when the grammar does not allow the token here.
func (m *Matcher) Accept(tok int32) error {
	g := m.g
	v := g.vocab
	if err := g.err(); err != nil {
		return err
	}
	if m.done {
		return &RejectError{tok, -1, "the matcher has already accepted EOS"}
	}
	if tok == v.eos && tok >= 0 {
		if !m.IsAccepting() {
			return &RejectError{tok, -1, "EOS before the grammar is complete"}
		}
		m.push()
		m.done = true
		return nil
	}
	if tok < 0 || int(tok) >= v.NumTokens() {
		return &RejectError{tok, -1, "id outside the vocabulary"}
	}
	if v.IsSpecial(tok) {
		return &RejectError{tok, -1, "special token not allowed by the grammar"}
	}
	bs := v.TokenBytes(tok)
	if len(bs) == 0 {
		return &RejectError{tok, -1, "token has no bytes"}
	}
	tops, err := m.advance(m.tops, bs)
	if err != nil {
		if re, ok := err.(*RejectError); ok {
			re.Token = tok
		}
		return err
	}
	// the state after the token must be able to go on, or end with a valid document
	closed, complete, err := m.closure(tops)
	if err != nil {
		return err
	}
	if m.track && m.keys.wouldRepeat(bs, &m.keysTmp) {
		return &RejectError{tok, -1, "the token repeats a key of its object"}
	}

	alive := false
	for _, f := range closed {
		a, s := g.autOf(m.frames[f].state)
		if a.state(s).cont {
			alive = true
			break
		}
	}
	if !alive {
		if !complete {
			return &RejectError{tok, len(bs), "no continuation after this token"}
		}
		if g.check != nil && g.checkOn.Load() {
			doc := append(append([]byte(nil), m.text...), bs...)
			if err := g.runCheck(doc); err != nil {
				return &RejectError{tok, len(bs), "the completed document fails the schema: " + err.Error()}
			}
		}
	}
	// (after the closure above is used: this walk reuses its buffers)
	if m.track && m.keyOnlyRepeats(bs) {
		return &RejectError{tok, -1, "the token leaves a key that can only repeat a key of its object"}
	}
	m.push()
	m.tops = tops
	if g.check != nil || m.track {
		m.text = append(m.text, bs...)
	}
	if m.track {
		m.keys.feed(bs)
	}
	return nil
}

func (m *Matcher) push() {
	m.hist = append(m.hist, histEntry{tops: m.tops, textLen: len(m.text), done: m.done})
}

// advance runs bytes from kernel frames; it returns the new kernel or a RejectError.
func (m *Matcher) advance(tops []int32, bs []byte) ([]int32, error) {
	cur := tops
	for i, b := range bs {
		closed, _, err := m.closure(cur)
		if err != nil {
			return nil, err
		}
		nx := m.step(closed, b, nil)
		if len(nx) == 0 {
			return nil, &RejectError{-1, i, m.expected(closed, b)}
		}
		cur = nx
	}
	return cur, nil
}

// expected describes what the grammar allows instead of byte b.
func (m *Matcher) expected(closed []int32, b byte) string {
	var live byteSet
	for _, f := range closed {
		a, s := m.g.autOf(m.frames[f].state)
		l := a.liveBytes(s)
		for i := range live {
			live[i] |= l[i]
		}
	}
	return fmt.Sprintf("byte %s not allowed here; expected %s", strconv.QuoteRune(rune(b)), describeSet(&live))
}

func describeSet(s *byteSet) string {
	if s.empty() {
		return "the end of the document"
	}
	var parts []string
	for c := 0; c < 256; c++ {
		if !s.has(byte(c)) {
			continue
		}
		e := c
		for e+1 < 256 && s.has(byte(e+1)) {
			e++
		}
		q := func(x int) string {
			if x < 0x80 {
				return strconv.QuoteRune(rune(x))
			}
			return fmt.Sprintf("0x%02x", x)
		}
		if e > c {
			parts = append(parts, q(c)+"-"+q(e))
		} else {
			parts = append(parts, q(c))
		}
		c = e
		if len(parts) > 12 {
			parts = append(parts, "...")
			break
		}
	}
	return strings.Join(parts, " ")
}

// Rollback undoes the last n accepted tokens.
func (m *Matcher) Rollback(n int) error {
	if n < 0 || n > len(m.hist) {
		return fmt.Errorf("grammars: cannot roll back %d tokens (%d accepted)", n, len(m.hist))
	}
	if n == 0 {
		return nil
	}
	h := m.hist[len(m.hist)-n]
	m.tops = h.tops
	m.text = m.text[:h.textLen]
	m.done = h.done
	m.hist = m.hist[:len(m.hist)-n]
	if m.track {
		m.keys.reset()
		m.keys.feed(m.text)
	}
	return nil
}

// NumAccepted is the number of tokens accepted (and not rolled back).
func (m *Matcher) NumAccepted() int { return len(m.hist) }

// IsAccepting reports whether the input so far is a complete match (EOS allowed).
func (m *Matcher) IsAccepting() bool {
	if m.done {
		return false
	}
	_, complete, err := m.closure(m.tops)
	if err != nil || !complete {
		return false
	}
	if m.g.runCheck(m.text) != nil {
		return false
	}
	return true
}

// IsTerminated reports whether EOS has been accepted.
func (m *Matcher) IsTerminated() bool { return m.done }

// MaskTimeoutError is a mask that ran past Options.MaxMaskTime while building the
// grammar's lazily grown parts (automaton states, schema rules, walks). The mask is
// left empty; what was built is kept, so calling FillMask again continues the work.
type MaskTimeoutError struct {
	Limit, Spent time.Duration
}

func (e *MaskTimeoutError) Error() string {
	return fmt.Sprintf("grammars: mask time budget exceeded (%s, spent %s); the work is kept, FillMask again continues it", e.Limit, e.Spent.Round(time.Microsecond))
}

// ErrMaskSize is returned by FillMask for a mask of the wrong size.
var ErrMaskSize = errors.New("grammars: mask has the wrong number of words")

// FillMask writes the allowed tokens of the current state into mask (one bit per id,
// Vocab().MaskWords() words). Ids past the tokenizer and special tokens are 0; EOS is
// 1 only when the matcher is accepting.
func (m *Matcher) FillMask(mask []uint64) error {
	g := m.g
	if len(mask) != g.vocab.MaskWords() {
		return ErrMaskSize
	}
	clear(mask)
	if err := g.err(); err != nil {
		return err
	}
	if m.done {
		return nil
	}
	t := g.vocab.getTrie()
	sc := &m.sc
	start := time.Now()
	sc.stopAt, sc.nslow, sc.over, sc.past = start.Add(g.opts.maxMaskTime()), 0, false, false
	defer func() { sc.stopAt, sc.over, sc.past = time.Time{}, false, false }()
	for _, f := range m.tops {
		fr := m.frames[f]
		a, s := g.autOf(fr.state)
		var pops []int32
		var owner *walkRes
		parent := fr.parent
		if a.abstractable {
			ar := g.abstractWalk(a, s, sc)
			flt := g.stringFilter(a, s, ar, sc)
			ar.orNeed(mask, flt.R)
			ar.orEnds(mask, &flt)
			pass := func(i int) bool { return flt.pass(ar, i) }
			if len(ar.pops) == 0 {
				continue
			}
			if parent < 0 {
				m.bottomComplete(ar.pops, pass, mask, t)
				continue
			}
			ix := ar.idx.Load()
			if ix == nil {
				ar.idx.CompareAndSwap(nil, buildPopIndex(ar.pops, t, g.vocab.MaskWords()))
				ix = ar.idx.Load()
			}
			pf := m.frames[parent]
			pops = g.levelIndexed(ar.pops, ix, pass, flt.all, pf.state, mask, sc)
			parent = pf.parent
		} else {
			res := g.level1(fr.state, sc)
			res.orInto(mask)
			pops, owner = res.pops, res
		}
		for len(pops) > 0 {
			if parent < 0 {
				m.bottomComplete(pops, nil, mask, t)
				break
			}
			pf := m.frames[parent]
			res := g.levelNext(pops, owner, pf.state, sc)
			res.orInto(mask)
			pops, owner = res.pops, res
			parent = pf.parent
		}
	}
	if sc.over {
		clear(mask)
		return &MaskTimeoutError{Limit: g.opts.maxMaskTime(), Spent: time.Since(start)}
	}
	for _, d := range t.dups {
		if mask[d[0]>>6]&(1<<(uint(d[0])&63)) != 0 {
			mask[d[1]>>6] |= 1 << (uint(d[1]) & 63)
		}
	}
	if m.track {
		m.clearRepeats(mask)
	}
	if eos := g.vocab.eos; eos >= 0 && m.IsAccepting() {
		mask[eos>>6] |= 1 << (uint(eos) & 63)
	}
	return g.err()
}

// bottomComplete allows the tokens that end exactly where the document completes.
func (m *Matcher) bottomComplete(pops []int32, pass func(int) bool, mask []uint64, t *trie) {
	for i, n := range pops {
		tok := t.tok[n]
		if tok < 0 || pass != nil && !pass(i) {
			continue
		}
		if m.g.check != nil && m.g.checkOn.Load() {
			m.sc.path = t.pathBytes(n, m.sc.path)
			doc := append(append([]byte(nil), m.text...), m.sc.path...)
			if m.g.runCheck(doc) != nil {
				continue
			}
		}
		mask[tok>>6] |= 1 << (uint(tok) & 63)
	}
}

// ForcedBytes returns the bytes the grammar forces next: while exactly one byte can
// follow and the input cannot end here, that byte.
func (m *Matcher) ForcedBytes() []byte {
	if m.done || m.g.err() != nil {
		return nil
	}
	var out []byte
	cur := m.tops
	for len(out) < 4096 {
		closed, complete, err := m.closure(cur)
		if err != nil || complete {
			break
		}
		var live byteSet
		for _, f := range closed {
			a, s := m.g.autOf(m.frames[f].state)
			l := a.liveBytes(s)
			for i := range live {
				live[i] |= l[i]
			}
		}
		if live.count() != 1 {
			break
		}
		var b byte
		for c := 0; c < 256; c++ {
			if live.has(byte(c)) {
				b = byte(c)
				break
			}
		}
		nx := m.step(closed, b, nil)
		if len(nx) == 0 {
			break
		}
		out = append(out, b)
		cur = nx
	}
	return out
}

// ForcedTokens returns tokens that spell a prefix of ForcedBytes, chosen greedily
// (longest token first). A final token that a longer vocabulary token could extend
// past the forced bytes is left out, so the model can still pick the merged token.
// A caller that wants the tokenizer's canonical split can tokenize ForcedBytes.
func (m *Matcher) ForcedTokens() []int32 {
	fb := m.ForcedBytes()
	t := m.g.vocab.getTrie()
	var out []int32
	for p := 0; p < len(fb); {
		best, bestLen, extends := t.longestToken(fb[p:])
		if best < 0 || (p+bestLen == len(fb) && extends) {
			break
		}
		out = append(out, best)
		p += bestLen
	}
	return out
}
