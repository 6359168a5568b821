// Package vm executes plans: it loads a plan and its weights, prepares one kernel per
// instruction on the plan's target, and runs steps over batches of sequences.
//
// The interpreter is a loop of kernel calls over typed buffers; the only thing that
// changes between steps is the token count T (and the logit row count R), so each step
// re-slices the arena and the operand headers and calls the kernels in order. A single
// hook wraps every call for tracing and profiling; when it is nil the loop calls the
// kernels directly.
package vm

import (
	"fmt"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm/kvcache"
	"deepinfer/vm/sampling"
)

// Hook wraps one kernel call. It must call run exactly once and return its error.
type Hook func(phase string, index int, in *plan.Instr, run func() error) error

// Machine is a loaded plan, ready to run steps.
type Machine struct {
	Plan    *plan.Plan
	exec    targets.Executor
	weights Weights
	progs   map[string]*program
	// Hook, when set, wraps every kernel call.
	Hook Hook
	// per-step scratch, reused
	stepNo   uint64
	rowBuf   []int32
	paramBuf []float32
	maskBuf  []int32
	step     targets.Step
}

type operandRef struct {
	kind  uint8
	index int
	typ   ir.Type
}

type call struct {
	in            *plan.Instr
	k             targets.Kernel
	argRefs       []operandRef
	resRefs       []operandRef
	args, results []targets.Tensor
}

// paramUse is an operand that holds a program parameter, refreshed every step.
type paramUse struct {
	t     *targets.Tensor
	index int
}

type program struct {
	bound     bool
	boundDims [3]int // T, R, K of the last bind
	paramUses []paramUse
	p         *plan.Program
	calls     []call
	slotF32   [][]float32
	slotI32   [][]int32
	params    []targets.Tensor
	tokens    int // param indices
	pos       int
	rows      int
	sample    int
	mask      int // -1 when the program takes no grammar masks
	// keep is the SWA bounded-replay tail (the tail_rows keep), 0 without one: the
	// symbolic dim K is then Σ min(rows of a sequence, keep).
	keep int
}

// Load prepares a plan on its target with the given weights.
func Load(p *plan.Plan, w Weights) (*Machine, error) {
	t, err := targets.Lookup(p.Target)
	if err != nil {
		return nil, err
	}
	exec, ok := t.(targets.Executor)
	if !ok {
		return nil, fmt.Errorf("plan targets %s, which is %s on this machine, not executed: divm run needs a cpu plan (compile with --target cpu)", t.Name(), t.Mode())
	}
	if len(w) != len(p.Weights) {
		return nil, fmt.Errorf("%d weights for a manifest of %d", len(w), len(p.Weights))
	}
	for i := range p.Weights {
		pw, t := &p.Weights[i], &w[i]
		n := int(pw.Elems())
		if (pw.DType == ir.F32 && len(t.F32) != n) || (pw.DType == ir.I32 && len(t.I32) != n) {
			return nil, fmt.Errorf("weight %q: %d values loaded, the manifest needs %d", pw.Name, max(len(t.F32), len(t.I32)), n)
		}
	}
	m := &Machine{Plan: p, exec: exec, weights: w, progs: map[string]*program{}}
	for i := range p.Programs {
		pr, err := m.prepare(&p.Programs[i])
		if err != nil {
			return nil, err
		}
		m.progs[pr.p.Phase] = pr
	}
	for _, ph := range []string{"prefill", "decode"} {
		if m.progs[ph] == nil {
			return nil, fmt.Errorf("plan has no %s program", ph)
		}
	}
	return m, nil
}

func (m *Machine) prepare(p *plan.Program) (*program, error) {
	pr := &program{p: p, tokens: -1, pos: -1, rows: -1, sample: -1, mask: -1}
	for i, pa := range p.Params {
		switch pa.Name {
		case "tokens":
			pr.tokens = i
		case "positions":
			pr.pos = i
		case "logit_rows":
			pr.rows = i
		case "sample_params":
			pr.sample = i
		case "sample_mask":
			pr.mask = i
		default:
			return nil, fmt.Errorf("program %s: unknown parameter %q", p.Phase, pa.Name)
		}
	}
	if pr.tokens < 0 || pr.pos < 0 || pr.rows < 0 || pr.sample < 0 {
		return nil, fmt.Errorf("program %s: needs tokens, positions, logit_rows and sample_params parameters", p.Phase)
	}
	if len(p.Returns) != 2 && p.Phase != phaseDraft { // the DSpark draft program: v41_draft.go
		return nil, fmt.Errorf("program %s: returns %d values; want logits and sampled tokens", p.Phase, len(p.Returns))
	}
	pr.params = make([]targets.Tensor, len(p.Params))
	pr.slotF32 = make([][]float32, len(p.Slots))
	pr.slotI32 = make([][]int32, len(p.Slots))
	for i := range p.Instrs {
		in := &p.Instrs[i]
		var argT, resT []ir.Type
		c := call{in: in}
		for j, o := range in.Args {
			if o.Kind != plan.OpNone {
				c.argRefs = append(c.argRefs, operandRef{o.Kind, o.Index, in.ArgTypes[j]})
				argT = append(argT, in.ArgTypes[j])
			}
		}
		for j, o := range in.Results {
			if o.Kind != plan.OpNone {
				c.resRefs = append(c.resRefs, operandRef{o.Kind, o.Index, in.ResultTypes[j]})
				resT = append(resT, in.ResultTypes[j])
			}
		}
		if in.Op == "tail_rows" {
			if v, ok := in.Attrs.Int("keep"); ok {
				pr.keep = int(v)
			}
		}
		k, err := m.exec.Prepare(in.Kernel, argT, resT, in.Attrs)
		if err != nil {
			return nil, fmt.Errorf("program %s instr %d (%s): %w", p.Phase, i, in.Op, err)
		}
		c.k = k
		c.args = make([]targets.Tensor, len(c.argRefs))
		c.results = make([]targets.Tensor, len(c.resRefs))
		for j, r := range c.argRefs {
			if r.kind == plan.OpWeight {
				c.args[j] = m.weights[r.index]
			}
		}
		pr.calls = append(pr.calls, c)
	}
	return pr, nil
}

// concrete resolves a type's shape for this step.
func concrete(t ir.Type, T, R, K int, dst []int) []int {
	dst = dst[:0]
	for _, d := range t.Shape {
		switch d.Sym {
		case "":
			dst = append(dst, int(d.N))
		case ir.SymTokens:
			dst = append(dst, T)
		case ir.SymRows:
			dst = append(dst, R)
		case ir.SymKept:
			dst = append(dst, K)
		}
	}
	return dst
}

func elems(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bind points every non-weight operand at its buffer for a step of T tokens and R rows.
func (pr *program) bind(T, R, K int) {
	if pr.bound && pr.boundDims == [3]int{T, R, K} {
		// same shapes as the last step: only the parameters' buffers are new
		for _, u := range pr.paramUses {
			*u.t = pr.params[u.index]
		}
		return
	}
	pr.bound, pr.boundDims = true, [3]int{T, R, K}
	pr.paramUses = pr.paramUses[:0]
	for i, s := range pr.p.Slots {
		n := elems(concrete(s, T, R, K, nil))
		switch s.DType {
		case ir.F32:
			if cap(pr.slotF32[i]) < n {
				pr.slotF32[i] = make([]float32, n, n+n/2)
			}
			pr.slotF32[i] = pr.slotF32[i][:n]
		case ir.I32:
			if cap(pr.slotI32[i]) < n {
				pr.slotI32[i] = make([]int32, n, n+n/2)
			}
			pr.slotI32[i] = pr.slotI32[i][:n]
		}
	}
	view := func(r operandRef, t *targets.Tensor) {
		t.Shape = concrete(r.typ, T, R, K, t.Shape)
		n := elems(t.Shape)
		switch r.kind {
		case plan.OpSlot:
			if r.typ.DType == ir.F32 {
				t.F32 = pr.slotF32[r.index][:n]
			} else {
				t.I32 = pr.slotI32[r.index][:n]
			}
		case plan.OpParam:
			*t = pr.params[r.index]
			pr.paramUses = append(pr.paramUses, paramUse{t, r.index})
		}
	}
	for ci := range pr.calls {
		c := &pr.calls[ci]
		for j, r := range c.argRefs {
			if r.kind != plan.OpWeight {
				view(r, &c.args[j])
			}
		}
		for j, r := range c.resRefs {
			view(r, &c.results[j])
		}
	}
}

// Sequence is one sequence's decode state on a machine.
type Sequence struct {
	state  *kvcache.Seq
	broken error
	stamp  uint64 // the step that last carried it, to refuse a sequence twice in one step
}

// NewSequence starts an empty sequence.
func (m *Machine) NewSequence() *Sequence {
	return &Sequence{state: kvcache.New(&m.Plan.KV)}
}

// Len is the number of tokens the sequence holds.
func (s *Sequence) Len() int { return s.state.Len }

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
}

// Output is what a step returns for one chunk.
type Output struct {
	Token  int32       // sampled after the chunk's last token
	Logits [][]float32 // rows requested by the chunk (nil when none)
}

// Forward runs one step over the chunks, with the decode program when every chunk is a
// single token and the prefill program otherwise. It returns, per chunk, the sampled
// next token and the logits it asked for. Logits stay in the arena unless asked for. If
// a kernel fails, the sequences of the step are left broken: their state is partly
// updated, so later steps on them fail too.
func (m *Machine) Forward(chunks []Chunk) ([]Output, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	V := m.Plan.Model.Vocab
	T, R := 0, 0
	phase := "decode"
	m.stepNo++
	for i, c := range chunks {
		if c.Seq == nil || len(c.Tokens) == 0 {
			return nil, fmt.Errorf("chunk %d: no sequence or no tokens", i)
		}
		if c.Seq.broken != nil {
			return nil, fmt.Errorf("chunk %d: sequence is unusable after an earlier failure: %w", i, c.Seq.broken)
		}
		if c.Seq.stamp == m.stepNo {
			return nil, fmt.Errorf("chunk %d: a sequence appears twice in one step", i)
		}
		c.Seq.stamp = m.stepNo
		if end := c.Seq.Len() + len(c.Tokens); end > m.Plan.Model.MaxPositions {
			return nil, fmt.Errorf("chunk %d: sequence would reach %d tokens, past the model's %d positions", i, end, m.Plan.Model.MaxPositions)
		}
		for j, t := range c.Tokens {
			if t < 0 || int(t) >= V {
				return nil, fmt.Errorf("chunk %d: token %d at index %d is outside the vocabulary [0,%d)", i, t, j, V)
			}
		}
		if len(c.Tokens) > 1 {
			phase = "prefill"
		}
		T += len(c.Tokens)
		if c.AllLogits {
			R += len(c.Tokens)
		} else {
			R++
		}
	}
	pr := m.progs[phase]
	st := &m.step
	st.T, st.R = T, R
	st.Seqs = st.Seqs[:0]
	st.Tokens = st.Tokens[:0]
	st.Positions = st.Positions[:0]
	rows := m.rowBuf[:0]
	params := m.paramBuf[:0]
	for _, c := range chunks {
		row := len(st.Tokens)
		st.Seqs = append(st.Seqs, targets.Seq{Row: row, N: len(c.Tokens), Pos: c.Seq.Len(), State: c.Seq.state})
		for j, t := range c.Tokens {
			st.Tokens = append(st.Tokens, t)
			st.Positions = append(st.Positions, int32(c.Seq.Len()+j))
			if c.AllLogits || j == len(c.Tokens)-1 {
				rows = append(rows, int32(row+j))
				sp := c.Sample
				params = append(params, float32(sp.Temperature), float32(sp.TopP), float32(sp.TopK), float32(sp.U))
			}
		}
	}
	pr.params[pr.tokens] = targets.Tensor{I32: st.Tokens, Shape: []int{T}}
	pr.params[pr.pos] = targets.Tensor{I32: st.Positions, Shape: []int{T}}
	m.rowBuf, m.paramBuf = rows, params
	pr.params[pr.rows] = targets.Tensor{I32: rows, Shape: []int{R}}
	pr.params[pr.sample] = targets.Tensor{F32: params, Shape: []int{R, 4}}
	if pr.mask >= 0 {
		if err := m.fillMasks(pr, chunks, R); err != nil {
			return nil, err
		}
	} else {
		for i, c := range chunks {
			if c.Mask != nil {
				return nil, fmt.Errorf("chunk %d: this plan's %s program cannot apply grammar masks", i, phase)
			}
		}
	}
	pr.bind(T, R, pr.kept(chunks))
	if err := m.run(pr, st); err != nil {
		for _, c := range chunks {
			c.Seq.broken = err
		}
		return nil, err
	}
	for _, c := range chunks {
		c.Seq.state.Len += len(c.Tokens)
	}
	logits := pr.slotF32[pr.p.Returns[0].Index][:R*V]
	sampled := pr.slotI32[pr.p.Returns[1].Index][:R]
	out := make([]Output, len(chunks))
	r := 0
	for i, c := range chunks {
		n := 1
		if c.AllLogits {
			n = len(c.Tokens)
		}
		out[i].Token = sampled[r+n-1]
		if c.AllLogits || c.WantLogits {
			for k := 0; k < n; k++ {
				out[i].Logits = append(out[i].Logits, append([]float32(nil), logits[(r+k)*V:(r+k+1)*V]...))
			}
		}
		r += n
	}
	return out, nil
}

func (m *Machine) run(pr *program, st *targets.Step) error {
	if m.Hook == nil {
		for i := range pr.calls {
			c := &pr.calls[i]
			if err := c.k.Run(st, c.args, c.results); err != nil {
				return fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Kernel, err)
			}
		}
		return nil
	}
	for i := range pr.calls {
		c := &pr.calls[i]
		err := m.Hook(pr.p.Phase, i, c.in, func() error { return c.k.Run(st, c.args, c.results) })
		if err != nil {
			return fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Kernel, err)
		}
	}
	return nil
}

// fillMasks writes the mask parameter: per logits row a flag word, then the chunk's mask
// as int32 halves. Only flags are rewritten for unmasked rows, so a step without masks
// costs O(R).
func (m *Machine) fillMasks(pr *program, chunks []Chunk, R int) error {
	cols := int(ir.MaskCols(int64(m.Plan.Model.Vocab)))
	if cap(m.maskBuf) < R*cols {
		m.maskBuf = make([]int32, R*cols, 2*R*cols)
	}
	buf := m.maskBuf[:R*cols]
	r := 0
	for i, c := range chunks {
		n := 1
		if c.AllLogits {
			n = len(c.Tokens)
		}
		for k := 0; k < n; k++ {
			row := buf[(r+k)*cols : (r+k+1)*cols]
			row[0] = 0
			if c.Mask != nil && k == n-1 {
				if len(c.Mask)*2 != cols-1 {
					return fmt.Errorf("chunk %d: a mask of %d words for a vocabulary of %d", i, len(c.Mask), m.Plan.Model.Vocab)
				}
				row[0] = 1
				for j, w := range c.Mask {
					row[1+2*j], row[2+2*j] = int32(uint32(w)), int32(uint32(w>>32))
				}
			}
		}
		r += n
	}
	pr.params[pr.mask] = targets.Tensor{I32: buf, Shape: []int{R, cols}}
	return nil
}
