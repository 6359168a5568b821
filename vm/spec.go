package vm

import (
	"fmt"
	"math"
	"strconv"
	"sync"

	"deepinfer/vm/sampling"
)

// Speculation configures DSpark speculative decoding in the engine. After every step
// that leaves a request decoding, the drafter proposes the tokens after its newest one;
// the next step feeds that token and the first γ drafts as one group of decode rows
// (each computed exactly as a one-row decode step computes it), and the request keeps
// the longest prefix the target agrees with plus one token of the target's own.
// Greedy requests keep exactly the tokens of plain decoding; sampled ones keep the
// target's distribution (sampling.Verify). What the rejected rows wrote to the
// sequence's state is undone (targets.SavableState), so the state after a group is the
// state plain decoding would have.
type Speculation struct {
	// MaxDraft caps γ, the drafts verified per group (DEEPINFER_USE_NEXTN_DECODE,
	// default 5); it is also capped by the drafter's block. 0 turns speculation off.
	MaxDraft int
	// Varlen chooses each request's γ per step from its drafts' confidences
	// (DEEPINFER_ENABLE_MTP_VARLEN=1): the longest prefix whose predicted survival,
	// Π σ(confidence), stays at or above Threshold. Off: γ = MaxDraft.
	Varlen bool
	// Threshold is varlen's cut (DEEPINFER_MTP_CONFIDENCE_THRESHOLD, default 0.5).
	Threshold float64
	// Exact makes sampled requests accept a draft only when it is the token plain
	// sampling draws at its position (the same row, parameters and uniform), so their
	// output is plain decoding's seed for seed; otherwise they use rejection sampling,
	// which accepts more often and keeps only the distribution. Batch-invariant mode
	// sets it.
	Exact bool
	// Override, when set, replaces the drafter's proposal for a request (tests drive
	// the verifier with known continuations): it gets the request, its generated
	// tokens so far (the last one is the group's first row) and the drafter's tokens,
	// and returns the drafts to verify (at most γ are used). Sampled requests then
	// treat the drafter's distribution as a point mass on each override.
	Override func(r *Request, generated, drafted []int32) []int32
	// OnGroup, when set, is called after each verify group has been committed and the
	// sequence's state rolled back and rebuilt (tests compare it with plain decoding's).
	OnGroup func(r *Request, drafted, accepted int, s *Sequence)
}

// SpeculationFromEnv reads DEEPINFER_USE_NEXTN_DECODE, DEEPINFER_ENABLE_MTP_VARLEN and
// DEEPINFER_MTP_CONFIDENCE_THRESHOLD. It returns nil when speculation is off
// (DEEPINFER_USE_NEXTN_DECODE=0).
func SpeculationFromEnv(getenv func(string) string) (*Speculation, error) {
	s := &Speculation{MaxDraft: 5, Threshold: 0.5}
	if v := getenv("DEEPINFER_USE_NEXTN_DECODE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 32 {
			return nil, fmt.Errorf("DEEPINFER_USE_NEXTN_DECODE=%q: want a draft length in [0, 32]", v)
		}
		s.MaxDraft = n
	}
	switch v := getenv("DEEPINFER_ENABLE_MTP_VARLEN"); v {
	case "", "0", "false":
	case "1", "true":
		s.Varlen = true
	default:
		return nil, fmt.Errorf("DEEPINFER_ENABLE_MTP_VARLEN=%q: want 0 or 1", v)
	}
	if v := getenv("DEEPINFER_MTP_CONFIDENCE_THRESHOLD"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return nil, fmt.Errorf("DEEPINFER_MTP_CONFIDENCE_THRESHOLD=%q: want a probability in [0, 1]", v)
		}
		s.Threshold = f
	}
	if s.MaxDraft == 0 {
		return nil, nil
	}
	return s, nil
}

// draftLength is γ for one proposal: cap, or with varlen the longest prefix whose
// predicted survival stays at or above the threshold.
func (s *Speculation) draftLength(conf []float32, cap int) int {
	cap = min(cap, len(conf))
	if !s.Varlen {
		return max(cap, 0)
	}
	surv := 1.0
	for j := 0; j < cap; j++ {
		surv *= 1 / (1 + math.Exp(-float64(conf[j])))
		if surv < s.Threshold {
			return j
		}
	}
	return max(cap, 0)
}

// SpecStats are the engine's speculation counters.
type SpecStats struct {
	Groups     int64   `json:"groups"`      // verify groups (one request's drafts in one step)
	Drafted    int64   `json:"drafted"`     // drafts verified
	Accepted   int64   `json:"accepted"`    // drafts accepted
	Committed  int64   `json:"committed"`   // tokens the groups committed (accepted drafts plus one each)
	Hist       []int64 `json:"histogram"`   // Hist[k]: groups that accepted exactly k drafts
	VerifyRows int64   `json:"verify_rows"` // rows the verify groups ran
	ReplayRows int64   `json:"replay_rows"` // rows run again to rebuild state after a partial acceptance
	DraftRows  int64   `json:"draft_rows"`  // rows the drafter ran
	DraftSteps int64   `json:"draft_steps"`
}

// TokensPerGroup is the tokens a verify group commits on average.
func (s SpecStats) TokensPerGroup() float64 {
	if s.Groups == 0 {
		return 0
	}
	return float64(s.Committed) / float64(s.Groups)
}

// RowsPerToken is the target rows run (verify plus replay) per committed token: plain
// decoding's is 1.
func (s SpecStats) RowsPerToken() float64 {
	if s.Committed == 0 {
		return 0
	}
	return float64(s.VerifyRows+s.ReplayRows) / float64(s.Committed)
}

// Acceptance is the accepted-length distribution, P(k drafts accepted), k = 0..γmax:
// the form a simulator workload takes.
func (s SpecStats) Acceptance() []float64 {
	if s.Groups == 0 {
		return nil
	}
	out := make([]float64, len(s.Hist))
	for k, n := range s.Hist {
		out[k] = float64(n) / float64(s.Groups)
	}
	return out
}

type specCounters struct {
	mu sync.Mutex
	s  SpecStats
}

func (c *specCounters) add(f func(*SpecStats)) {
	c.mu.Lock()
	f(&c.s)
	c.mu.Unlock()
}

// SpecStats reads the engine's speculation counters (safe while it runs).
func (e *Engine) SpecStats() SpecStats {
	e.spec.mu.Lock()
	defer e.spec.mu.Unlock()
	s := e.spec.s
	s.Hist = append([]int64(nil), s.Hist...)
	return s
}

// proposal is a request's drafts for its next verify group.
type proposal struct {
	drafts []int32
	probs  [][]float64 // sampled requests: the distribution each draft was drawn from
}

// verify takes a verify group's output: it commits the accepted drafts and the token
// after them, rolls the state back when a draft was rejected, and returns whether the
// request is finished and how many of the group's rows must run again to rebuild the
// state (len(c.Tokens) when nothing is to run).
func (e *Engine) verify(a *active, c Chunk, o Output) (bool, int) {
	r := a.req
	drafts := c.Tokens[1:]
	n := len(drafts)
	var k int
	var committed []int32
	switch {
	case r.Sampling.Temperature == 0:
		for k < n && drafts[k] == o.Tokens[k] {
			k++
		}
		committed = o.Tokens[:k+1]
	case e.Spec.Exact:
		// each row's token drawn as plain sampling draws it at that index
		p := sampling.Params{Temperature: r.Sampling.Temperature, TopP: r.Sampling.TopP, TopK: r.Sampling.TopK}
		var sc sampling.Scratch
		base := len(a.res.Tokens)
		for i := 0; i <= n; i++ {
			p.U = sampling.Uniform(r.Sampling.Seed, base+i, sampling.StreamSample)
			tok := int32(sampling.Row(o.Logits[i], p, nil, &sc))
			committed = append(committed, tok)
			if i == n || drafts[i] != tok {
				break
			}
			k++
		}
	default:
		p := sampling.Params{Temperature: r.Sampling.Temperature, TopP: r.Sampling.TopP, TopK: r.Sampling.TopK}
		var sc sampling.Scratch
		target := make([][]float64, n+1)
		for i := range target {
			target[i] = sampling.Probs(o.Logits[i], p, make([]float64, len(o.Logits[i])), &sc)
		}
		base, seed := len(a.res.Tokens), r.Sampling.Seed
		u := func(i, stream int) float64 { return sampling.Uniform(seed, base+i, stream) }
		k, committed = sampling.Verify(target, a.prop.probs[:n], drafts, u, make([]float64, len(o.Logits[0])))
	}
	a.prop = nil
	a.drafted, a.accepted = n, k
	e.spec.add(func(s *SpecStats) {
		s.Groups++
		s.Drafted += int64(n)
		s.Accepted += int64(k)
		s.Committed += int64(k + 1)
		s.VerifyRows += int64(n + 1)
		for len(s.Hist) <= k {
			s.Hist = append(s.Hist, 0)
		}
		s.Hist[k]++
	})
	restore := a.restore
	a.restore = nil
	for j, tok := range committed {
		var row []float32
		if o.Logits != nil {
			row = o.Logits[j]
			if r.KeepLogits {
				a.res.Logits = append(a.res.Logits, row)
			}
		}
		if a.commit(tok, row) {
			return true, len(c.Tokens)
		}
	}
	if k == n {
		return false, len(c.Tokens)
	}
	if err := restore(); err != nil {
		a.res.Err = fmt.Errorf("speculation: %w", err)
		return true, len(c.Tokens)
	}
	a.stats.heldTokens.Add(-int64(n + 1))
	return false, k + 1
}

// propose runs the drafter for every speculating request that is decoding and keeps
// each one's drafts for its next step.
func (e *Engine) propose(running []*active) {
	if e.Spec == nil || !e.M.CanDraft() {
		return
	}
	B, P, V := e.M.Plan.Model.DSpark.Block, e.M.MaxPositions(), e.M.Plan.Model.Vocab
	var seqs []*Sequence
	var anchors []int32
	var who []*active
	var caps []int
	var want []bool
	for _, a := range running {
		a.prop = nil
		if !a.spec || a.done || a.fed < len(a.req.Prompt) {
			continue
		}
		capN := min(e.Spec.MaxDraft, B, a.req.MaxTokens-len(a.res.Tokens)-1, P-a.seq.Len()-1)
		if capN < 1 || a.seq.Len()+B > P {
			continue
		}
		seqs, anchors, who, caps = append(seqs, a.seq), append(anchors, a.pending), append(who, a), append(caps, capN)
		// the drafter's logits rows only for the requests that draw their drafts from them
		want = append(want, a.req.Sampling.Temperature > 0 && e.Spec.Override == nil)
	}
	if len(who) == 0 {
		return
	}
	drafts, err := e.M.DraftWant(seqs, anchors, want)
	e.spec.add(func(s *SpecStats) { s.DraftSteps++; s.DraftRows += int64(len(who) * B) })
	if err != nil {
		for _, a := range who {
			a.res.Err, a.done = fmt.Errorf("DSpark draft: %w", err), true
		}
		return
	}
	var sc sampling.Scratch
	for i, a := range who {
		d, r := drafts[i], a.req
		toks := append([]int32(nil), d.Tokens[1:]...)
		g := e.Spec.draftLength(d.Confidence, caps[i])
		if e.Spec.Override != nil {
			toks = e.Spec.Override(r, a.res.Tokens, toks)
			g = min(len(toks), caps[i])
		}
		if g == 0 {
			continue
		}
		p := &proposal{drafts: toks[:g]}
		if r.Sampling.Temperature > 0 {
			sp := sampling.Params{Temperature: r.Sampling.Temperature, TopP: r.Sampling.TopP, TopK: r.Sampling.TopK}
			base := len(a.res.Tokens)
			for j := 0; j < g; j++ {
				q := make([]float64, V)
				if e.Spec.Override != nil {
					q[p.drafts[j]] = 1
				} else {
					sampling.Probs(d.Logits[j], sp, q, &sc)
					p.drafts[j] = int32(sampling.Draw(q, sampling.Uniform(r.Sampling.Seed, base+j, sampling.StreamDraft)))
				}
				p.probs = append(p.probs, q)
			}
		}
		a.prop = p
	}
}
