// Package vm executes plans: it opens a plan and its weights on the plan's target and
// drives steps over batches of sequences.
//
// The target's runtime owns everything that lives where the kernels run — the weights in
// their storage formats, the arena, every sequence's state — and the VM only says, each
// step, which sequences advance by which tokens and which logits rows it wants back
// (package targets, runtime.go). The VM keeps the bookkeeping that does not depend on
// the target: sequence lengths, validation of every request against the plan, the
// scheduler (engine.go), sampling randoms and grammar masks.
package vm

import (
	"fmt"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm/sampling"
)

// Machine is an opened plan, ready to run steps.
type Machine struct {
	Plan *plan.Plan
	rt   targets.Runtime
	// tokenMap is the Engram token map (V4.1), kept on the host for the eval cases.
	tokenMap []int32
	maxPos   int // the longest sequence: the model's, or targets.Options.MaxContext
	// per-step scratch, reused
	stepNo   uint64
	in       targets.StepIn
	out      targets.StepOut
	maskRows [][]uint64
	wantRows []bool
	// the async scheduler's pipeline (targets.Pipeline), made on first use; pipeErr,
	// once a pipelined step failed, keeps later steps on the synchronous path
	pipe     targets.Pipelined
	pipeErr  error
	pending  int // steps enqueued and not yet waited for
	lastRows int // logits rows of the last enqueued step (-1: the last step was not enqueued)
}

// Load opens a plan on its target with the given weights (manifest order, storage
// formats). The target's runtime owns the weights' memory afterwards.
func Load(p *plan.Plan, w Weights, opts ...targets.Options) (*Machine, error) {
	t, err := targets.Lookup(p.Target)
	if err != nil {
		return nil, err
	}
	exec, ok := t.(targets.Executor)
	if !ok {
		return nil, fmt.Errorf("plan targets %s, which is %s on this machine, not executed: divm run needs a plan for a target that executes here (compile with --target cpu)", t.Name(), t.Mode())
	}
	return LoadOn(p, w, exec, opts...)
}

// LoadOn is Load on a given executor (a test's emulated device, say) instead of the
// plan's registered target.
func LoadOn(p *plan.Plan, w Weights, exec targets.Executor, opts ...targets.Options) (*Machine, error) {
	if len(w) != len(p.Weights) {
		return nil, fmt.Errorf("%d weights for a manifest of %d", len(w), len(p.Weights))
	}
	m := &Machine{Plan: p, maxPos: p.Model.MaxPositions}
	for i := range p.Weights {
		if p.Weights[i].Init.Kind == plan.InitTokenMap {
			m.tokenMap = w[i].I32
		}
	}
	var o targets.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.MaxContext > 0 {
		m.maxPos = min(m.maxPos, o.MaxContext)
	}
	rt, err := exec.Open(p, w, o)
	if err != nil {
		return nil, err
	}
	return open(p, rt, m)
}

func open(p *plan.Plan, rt targets.Runtime, m *Machine) (*Machine, error) {
	for _, ph := range []string{plan.PhasePrefill, plan.PhaseDecode} {
		if !rt.HasPhase(ph) {
			rt.Close()
			return nil, fmt.Errorf("plan has no %s program", ph)
		}
	}
	m.Plan, m.rt = p, rt
	if m.maxPos == 0 {
		m.maxPos = p.Model.MaxPositions
	}
	return m, nil
}

// MaxPositions is the longest sequence the machine holds: the model's
// max_position_embeddings, or less when it was opened with targets.Options.MaxContext.
func (m *Machine) MaxPositions() int { return m.maxPos }

// Describe says where the plan runs, when the target's runtime says (a device runtime:
// the device, its kernels' build or cache, its memory); "" otherwise.
func (m *Machine) Describe() string {
	if d, ok := m.rt.(interface{ Describe() string }); ok {
		return d.Describe()
	}
	return ""
}

// Close releases what the target's runtime holds.
func (m *Machine) Close() error {
	if m.rt == nil {
		return nil
	}
	err := m.rt.Close()
	m.rt = nil
	return err
}

// Sequence is one sequence's decode state on a machine.
type Sequence struct {
	state  targets.State
	len    int
	broken error
	stamp  uint64 // the step that last carried it, to refuse a sequence twice in one step
}

// NewSequence starts an empty sequence.
func (m *Machine) NewSequence() (*Sequence, error) {
	st, err := m.rt.NewState()
	if err != nil {
		return nil, err
	}
	return &Sequence{state: st}, nil
}

// Release frees the sequence's state on the target; the sequence must not be used again.
func (s *Sequence) Release() {
	if s.state != nil {
		s.state.Release()
		s.state = nil
	}
	s.broken = fmt.Errorf("sequence was released")
}

// Len is the number of tokens the sequence holds.
func (s *Sequence) Len() int { return s.len }

// Chunk is one sequence's part of a step: new tokens; whether to return logits (of every
// new token with AllLogits, else of the last with WantLogits); and how to sample the
// token that follows the last one.
type Chunk struct {
	Seq        *Sequence
	Tokens     []int32
	AllLogits  bool
	WantLogits bool
	Sample     sampling.Params
	// Mask, when set, restricts the sampled token to the ids whose bits are set (a
	// grammar's mask: ⌈V/64⌉ words, bit i%64 of word i/64).
	Mask []uint64
	// Decode marks generated tokens: every row is computed as a one-row decode step
	// would compute it (targets.SeqIn.Decode) — a decode step's token, or a speculative
	// verify group.
	Decode bool
	// AllRows samples after every token, not only the last (Output.Tokens), with
	// Sample's parameters; WantLogits then returns every row's logits.
	AllRows bool
}

// rows is the number of logits rows the chunk asks for.
func (c *Chunk) rows() int {
	if c.AllLogits || c.AllRows {
		return len(c.Tokens)
	}
	return 1
}

// Output is what a step returns for one chunk.
type Output struct {
	Token  int32       // sampled after the chunk's last token
	Tokens []int32     // with AllRows, sampled after each token
	Logits [][]float32 // rows requested by the chunk (nil when none)
}

// Forward runs one step over the chunks, with the decode program when every chunk is a
// single token and the prefill program otherwise. It returns, per chunk, the sampled
// next token and the logits it asked for; the runtime copies back only those. If the
// step fails, its sequences are left broken: their state is partly updated, so later
// steps on them fail too.
func (m *Machine) Forward(chunks []Chunk) ([]Output, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	if m.pending > 0 {
		return nil, fmt.Errorf("forward: %d enqueued steps have not been waited for", m.pending)
	}
	m.lastRows = -1
	if err := m.pack(chunks, false); err != nil {
		return nil, err
	}
	in, out := &m.in, &m.out
	if err := m.rt.Step(in, out); err != nil {
		for _, c := range chunks {
			c.Seq.broken = err
		}
		return nil, err
	}
	return m.unpack(chunks, in.Phase, len(in.Rows), in.Want != nil, out, true)
}

// pack lays the chunks out in m.in. With prev, a token may be targets.FromPrevious(j)
// for a logits row j of the step enqueued just before.
func (m *Machine) pack(chunks []Chunk, prev bool) error {
	V := m.Plan.Model.Vocab
	phase := plan.PhaseDecode
	m.stepNo++
	in := &m.in
	in.Seqs, in.Tokens, in.Rows, in.Sample = in.Seqs[:0], in.Tokens[:0], in.Rows[:0], in.Sample[:0]
	masked, want := false, false
	for i, c := range chunks {
		if c.Seq == nil || len(c.Tokens) == 0 {
			return fmt.Errorf("chunk %d: no sequence or no tokens", i)
		}
		if c.Seq.broken != nil {
			return fmt.Errorf("chunk %d: sequence is unusable after an earlier failure: %w", i, c.Seq.broken)
		}
		if c.Seq.stamp == m.stepNo {
			return fmt.Errorf("chunk %d: a sequence appears twice in one step", i)
		}
		c.Seq.stamp = m.stepNo
		if end := c.Seq.Len() + len(c.Tokens); end > m.maxPos {
			return fmt.Errorf("chunk %d: sequence would reach %d tokens, past the %d positions the machine was opened for", i, end, m.maxPos)
		}
		for j, t := range c.Tokens {
			if r, ok := targets.PreviousRow(t); ok && prev {
				if r >= m.lastRows {
					return fmt.Errorf("chunk %d: token %d at index %d stands for row %d of the previous step, which has %d rows", i, t, j, r, max(m.lastRows, 0))
				}
				continue
			}
			if t < 0 || int(t) >= V {
				return fmt.Errorf("chunk %d: token %d at index %d is outside the vocabulary [0,%d)", i, t, j, V)
			}
		}
		if c.Mask != nil {
			if len(c.Mask) != (V+63)/64 {
				return fmt.Errorf("chunk %d: a mask of %d words for a vocabulary of %d", i, len(c.Mask), V)
			}
			masked = true
		}
		n := len(c.Tokens)
		if n > 1 && !c.Decode {
			phase = plan.PhasePrefill
		}
		want = want || c.AllLogits || c.WantLogits
		T := len(in.Tokens)
		in.Seqs = append(in.Seqs, targets.SeqIn{State: c.Seq.state, N: n, Pos: c.Seq.Len(), Decode: c.Decode})
		in.Tokens = append(in.Tokens, c.Tokens...)
		first := n - 1
		if c.AllLogits || c.AllRows {
			first = 0
		}
		sp := c.Sample
		for j := first; j < n; j++ {
			in.Rows = append(in.Rows, int32(T+j))
			in.Sample = append(in.Sample, float32(sp.Temperature), float32(sp.TopP), float32(sp.TopK), float32(sp.U))
		}
	}
	in.Masks, in.Want = nil, nil
	if masked || want {
		// per-row masks and logits flags, only when some chunk asks
		masks, wants := m.maskRows[:0], m.wantRows[:0]
		for _, c := range chunks {
			n := c.rows()
			for k := 0; k < n; k++ {
				var mk []uint64
				if k == n-1 {
					mk = c.Mask
				}
				masks = append(masks, mk)
				wants = append(wants, c.AllLogits || c.WantLogits)
			}
		}
		m.maskRows, m.wantRows = masks, wants
		if masked {
			in.Masks = masks
		}
		if want {
			in.Want = wants
		}
	}
	in.Phase = phase
	return nil
}

// unpack checks a step's output and splits it by chunk; the chunks' sequences advance.
func (m *Machine) unpack(chunks []Chunk, phase string, R int, want bool, out *targets.StepOut, advance bool) ([]Output, error) {
	if len(out.Tokens) != R || (want && len(out.Logits) != R) {
		err := fmt.Errorf("%s step returned %d tokens and %d logits rows for %d rows", phase, len(out.Tokens), len(out.Logits), R)
		for _, c := range chunks {
			c.Seq.broken = err
		}
		return nil, err
	}
	res := make([]Output, len(chunks))
	r := 0
	for i, c := range chunks {
		if advance {
			c.Seq.len += len(c.Tokens)
		}
		n := c.rows()
		res[i].Token = out.Tokens[r+n-1]
		if c.AllRows {
			res[i].Tokens = append([]int32(nil), out.Tokens[r:r+n]...)
		}
		if c.AllLogits || c.WantLogits {
			res[i].Logits = append([][]float32(nil), out.Logits[r:r+n]...)
		}
		r += n
	}
	return res, nil
}

// Pending is a step enqueued on the machine's pipeline (Enqueue) and not yet waited for.
type Pending struct {
	m      *Machine
	p      targets.Pending
	chunks []Chunk
	phase  string
	rows   int
	want   bool
	done   bool
}

// Pipelined reports whether the machine can enqueue steps (Enqueue): false after a
// pipelined step failed (later steps then run through Forward).
func (m *Machine) Pipelined() bool { return m.pipeErr == nil }

// Overlaps reports whether enqueued steps run while the host goes on (a runtime with its
// own device queue); the cpu target runs each step inside Enqueue.
func (m *Machine) Overlaps() bool {
	_, ok := m.rt.(targets.Pipelined)
	return ok
}

// Enqueue starts a step over the chunks on the runtime's pipeline
// (targets.Pipeline) and returns before its tokens are back. A chunk token may be
// targets.FromPrevious(j): the token sampled for logits row j of the step enqueued just
// before this one (still pending or not). The chunks' sequences advance at once, so the
// next step can be enqueued behind this one; at most two steps are pending, and they are
// waited for in order. The chunks (not their tokens) must stay unchanged until Wait. A
// failed step breaks its sequences and the pipeline: later steps must use Forward.
func (m *Machine) Enqueue(chunks []Chunk) (*Pending, error) {
	if len(chunks) == 0 {
		return nil, fmt.Errorf("enqueue: no chunks")
	}
	if m.pipeErr != nil {
		return nil, fmt.Errorf("enqueue: the pipeline failed earlier: %w", m.pipeErr)
	}
	if m.pending >= 2 {
		return nil, fmt.Errorf("enqueue: two steps are already pending")
	}
	if m.pipe == nil {
		m.pipe = targets.Pipeline(m.rt)
	}
	if err := m.pack(chunks, true); err != nil {
		return nil, err
	}
	in := &m.in
	tp, err := m.pipe.Enqueue(in)
	if err != nil {
		err = fmt.Errorf("enqueue %s step: %w", in.Phase, err)
		m.pipeErr = err
		for _, c := range chunks {
			c.Seq.broken = err
		}
		return nil, err
	}
	m.pending++
	m.lastRows = len(in.Rows)
	for _, c := range chunks {
		c.Seq.len += len(c.Tokens)
	}
	return &Pending{m: m, p: tp, chunks: chunks, phase: in.Phase, rows: len(in.Rows), want: in.Want != nil}, nil
}

// Wait blocks until the step has run and returns, per chunk, what Forward would have.
func (p *Pending) Wait() ([]Output, error) {
	if p.done {
		return nil, fmt.Errorf("wait: this step was already waited for")
	}
	p.done = true
	m := p.m
	m.pending--
	out := &m.out
	*out = targets.StepOut{Tokens: out.Tokens[:0]}
	if err := p.p.Wait(out); err != nil {
		err = fmt.Errorf("%s step: %w", p.phase, err)
		if m.pipeErr == nil {
			m.pipeErr = err
		}
		for _, c := range p.chunks {
			c.Seq.broken = err
		}
		return nil, err
	}
	res, err := m.unpack(p.chunks, p.phase, p.rows, p.want, out, false)
	if err != nil && m.pipeErr == nil {
		m.pipeErr = err
	}
	return res, err
}

// Save records the sequence's state and length for a rollback (speculative decoding):
// the returned function puts both back (a failed restore leaves the sequence broken).
// It fails on a runtime whose states cannot be saved.
func (s *Sequence) Save() (func() error, error) {
	if s.broken != nil {
		return nil, s.broken
	}
	sv, ok := s.state.(targets.SavableState)
	if !ok {
		return nil, fmt.Errorf("this target's sequence state cannot be rolled back")
	}
	restore, err := sv.Save()
	if err != nil {
		return nil, err
	}
	n := s.len
	return func() error {
		if err := restore(); err != nil {
			s.broken = fmt.Errorf("rolling back the state: %w", err)
			return s.broken
		}
		s.len = n
		return nil
	}, nil
}

// Digest hashes the sequence's state (targets.SavableState.Digest): equal digests,
// equal state bit for bit.
func (s *Sequence) Digest() ([32]byte, error) {
	sv, ok := s.state.(targets.SavableState)
	if !ok {
		return [32]byte{}, fmt.Errorf("this target's sequence state has no digest")
	}
	return sv.Digest(), nil
}

// Ranks is the number of expert-parallel ranks the plan runs on (1 unless the runtime
// runs several: targets.Ranked).
func (m *Machine) Ranks() int {
	if r, ok := m.rt.(targets.Ranked); ok {
		return r.Ranks()
	}
	return 1
}

// RankWeightBytes is what each rank holds in weights (nil for a single-rank runtime).
func (m *Machine) RankWeightBytes() []int64 {
	if r, ok := m.rt.(targets.Ranked); ok {
		return r.RankWeightBytes()
	}
	return nil
}

// CommStats is what the ranks' collectives moved so far, by op (nil for one rank).
func (m *Machine) CommStats() map[string]targets.CommBytes {
	if r, ok := m.rt.(targets.Ranked); ok {
		return r.CommStats()
	}
	return nil
}

// Profiler is the runtime's instruction profiler, nil when its target has none.
func (m *Machine) Profiler() targets.Profiler {
	p, _ := m.rt.(targets.Profiler)
	return p
}

// ExpertCensus is the runtime's expert census, nil when its target has none.
func (m *Machine) ExpertCensus() targets.ExpertCensus {
	c, _ := m.rt.(targets.ExpertCensus)
	return c
}

// DeviceBench is the runtime's device measurements, nil on a target without a device.
func (m *Machine) DeviceBench() targets.DeviceBench {
	d, _ := m.rt.(targets.DeviceBench)
	return d
}

// CopySequence makes dst a copy of src: the same tokens and the same state, copied on
// the device. It needs a runtime that copies states (DeviceBench).
func (m *Machine) CopySequence(dst, src *Sequence) error {
	d := m.DeviceBench()
	if d == nil {
		return fmt.Errorf("this target does not copy sequence states")
	}
	if src.broken != nil || dst.broken != nil {
		return fmt.Errorf("copy sequence: a broken sequence")
	}
	if err := d.CopyState(dst.state, src.state); err != nil {
		return err
	}
	dst.len = src.len
	return nil
}

// Timeline is the runtime's device timeline (a trace's device spans), nil on a target
// that records none (the cpu target).
func (m *Machine) Timeline() targets.Timeline {
	t, _ := m.rt.(targets.Timeline)
	return t
}
