package cpu

import (
	"fmt"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cpu/kvstate"
)

// The cpu target's runtime: weights widened to float32 in Go memory, one arena of Go
// slices per program sized for the step's T, R and K, sequence states in Go slices
// (package kvstate), and the kernel calls made in order on the calling goroutine (each
// kernel spreads its own work over the cores).

// Open implements targets.Executor. A plan sharded over expert-parallel ranks runs
// as that many ranks in this process (ranks.go).
func (t Target) Open(p *plan.Plan, ws []targets.Weight, o targets.Options) (targets.Runtime, error) {
	if o.UniformRoute {
		return nil, fmt.Errorf("the cpu target routes tokens by the model's router only (uniform routing is a device benchmark setting)")
	}
	if len(ws) != len(p.Weights) {
		return nil, fmt.Errorf("%d weights for a manifest of %d", len(ws), len(p.Weights))
	}
	if n, err := planRanks(p); err != nil {
		return nil, err
	} else if n > 1 {
		return openRanks(t, p, ws, o, n)
	}
	return openHost(t, p, ws, o, nil, nil)
}

// openHost opens one rank: every weight but those in skip (another rank's experts),
// with rank's context for the collectives (nil: a single rank).
func openHost(t Target, p *plan.Plan, ws []targets.Weight, o targets.Options, rank *rankCtx, skip map[int]bool) (*hostRuntime, error) {
	rt := &hostRuntime{p: p, hook: o.Hook, invariant: o.Invariant, weights: make([]Tensor, len(ws)), progs: map[string]*program{}, rank: rank}
	for i := range p.Weights {
		if skip[i] {
			continue
		}
		pw, w := &p.Weights[i], &ws[i]
		n := int(pw.Elems())
		var err error
		rt.weights[i].Shape = w.Shape
		switch pw.DType {
		case ir.I32:
			rt.weights[i].I32 = w.I32
		default:
			rt.weights[i].F32, err = w.Float32()
		}
		if err != nil {
			return nil, err
		}
		if len(rt.weights[i].F32)+len(rt.weights[i].I32) != n {
			return nil, fmt.Errorf("weight %q: %d values loaded, the manifest needs %d", pw.Name, len(rt.weights[i].F32)+len(rt.weights[i].I32), n)
		}
	}
	if err := rt.prepareAll(t.Prepare); err != nil {
		return nil, err
	}
	return rt, nil
}

// OpenAny opens a plan compiled for any target with this target's kernels, chosen by
// each instruction's op and phase: the reference a device runtime is checked against,
// instruction by instruction, on the device's own plan.
func OpenAny(p *plan.Plan, ws []targets.Weight, o targets.Options) (targets.Runtime, error) {
	if p.Target == "cpu" {
		return Target{}.Open(p, ws, o)
	}
	cp := *p
	cp.Programs = make([]plan.Program, len(p.Programs))
	for i, pr := range p.Programs {
		cp.Programs[i] = pr
		cp.Programs[i].Instrs = append([]plan.Instr(nil), pr.Instrs...)
		for j := range cp.Programs[i].Instrs {
			in := &cp.Programs[i].Instrs[j]
			k, ok := Target{}.Kernel(in.Op, pr.Phase)
			if !ok {
				return nil, fmt.Errorf("cpu: no kernel for op %s", in.Op)
			}
			in.Kernel = k
		}
	}
	return Target{}.Open(&cp, ws, o)
}

// Arg copies argument j (counting present operands) of instruction index of phase as
// it is now (from a Hook, before run: the values the instruction will read).
func (rt *hostRuntime) Arg(phase string, index, j int) ([]float32, []int32, error) {
	pr := rt.progs[phase]
	if pr == nil || index < 0 || index >= len(pr.calls) || j < 0 || j >= len(pr.calls[index].args) {
		return nil, nil, fmt.Errorf("no argument %d of %s instr %d", j, phase, index)
	}
	t := pr.calls[index].args[j]
	return append([]float32(nil), t.F32...), append([]int32(nil), t.I32...), nil
}

// Result copies result j of instruction index of phase as the last step left it (from
// a Hook, right after run, for a value the program overwrites later).
func (rt *hostRuntime) Result(phase string, index, j int) ([]float32, []int32, error) {
	pr := rt.progs[phase]
	if pr == nil || index < 0 || index >= len(pr.calls) || j < 0 || j >= len(pr.calls[index].results) {
		return nil, nil, fmt.Errorf("no result %d of %s instr %d", j, phase, index)
	}
	t := pr.calls[index].results[j]
	return append([]float32(nil), t.F32...), append([]int32(nil), t.I32...), nil
}

// OpenProbe opens a plan of any target with kernels that do nothing, no weights and no
// sequence state, so that a step costs only what the VM and this runtime do around the
// kernels (divm overhead).
func OpenProbe(p *plan.Plan) (targets.Runtime, error) {
	light := *p
	light.KV.Layers = nil
	light.KV.EngramContext = 0
	rt := &hostRuntime{p: &light, weights: make([]Tensor, len(p.Weights)), progs: map[string]*program{}}
	err := rt.prepareAll(func(string, []ir.Type, []ir.Type, ir.Attrs) (Kernel, error) { return nullKernel{}, nil })
	return rt, err
}

type nullKernel struct{}

func (nullKernel) Run(*Step, []Tensor, []Tensor) error { return nil }

type hostRuntime struct {
	p       *plan.Plan
	hook    targets.Hook
	weights []Tensor
	progs   map[string]*program
	// invariant: batch-invariant mode (targets.Options.Invariant)
	invariant bool
	// rank: this runtime's rank in an in-process group (nil: the only rank)
	rank *rankCtx
	// per-step scratch, reused
	step    Step
	maskBuf []int32
	census  targets.Census
}

// SetExpertCensus implements targets.ExpertCensus.
func (rt *hostRuntime) SetExpertCensus(on bool) { rt.census.On = on }

// TakeExpertCensus implements targets.ExpertCensus.
func (rt *hostRuntime) TakeExpertCensus() (map[int]targets.ExpertTally, int) { return rt.census.Take() }

// countExperts adds instruction c's expert ids to the census when it routes slots to
// experts (its third operand the slots' expert ids).
func (rt *hostRuntime) countExperts(i int, c *call) {
	if E, _ := c.in.Attrs.Int("experts"); c.in.Op == "moe_experts" && len(c.args) >= 3 && E > 0 {
		rt.census.Add(i, c.args[2].I32, int(E))
	}
}

type state struct{ seq *kvstate.Seq }

func (*state) Release() {}

// Save implements targets.SavableState.
func (s *state) Save() (func() error, error) {
	sv := s.seq.Save()
	return func() error { sv.Restore(); return nil }, nil
}

// Digest implements targets.SavableState.
func (s *state) Digest() [32]byte { return s.seq.Digest() }

func (rt *hostRuntime) NewState() (targets.State, error) { return &state{kvstate.New(&rt.p.KV)}, nil }

func (rt *hostRuntime) HasPhase(phase string) bool { return rt.progs[phase] != nil }

func (rt *hostRuntime) Close() error {
	rt.progs, rt.weights = nil, nil
	return nil
}

type operandRef struct {
	kind  uint8
	index int
	typ   ir.Type
}

type call struct {
	in            *plan.Instr
	k             Kernel
	argRefs       []operandRef
	resRefs       []operandRef
	args, results []Tensor
}

// paramUse is an operand that holds a program parameter, refreshed every step.
type paramUse struct {
	t     *Tensor
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
	params    []Tensor
	tokens    int // param indices
	pos       int
	rows      int
	sample    int
	mask      int // -1 when the program takes no grammar masks
	// keep is the SWA bounded-replay tail (the tail_rows keep), 0 without one: the
	// symbolic dim K is then Σ min(rows of a sequence, keep).
	keep int
}

type prepareFunc func(kernel string, args, results []ir.Type, attrs ir.Attrs) (Kernel, error)

func (rt *hostRuntime) prepareAll(prep prepareFunc) error {
	for i := range rt.p.Programs {
		pr, err := rt.prepare(&rt.p.Programs[i], prep)
		if err != nil {
			return err
		}
		rt.progs[pr.p.Phase] = pr
	}
	for _, ph := range []string{"prefill", "decode"} {
		if rt.progs[ph] == nil {
			return fmt.Errorf("plan has no %s program", ph)
		}
	}
	return nil
}

func (rt *hostRuntime) prepare(p *plan.Program, prep prepareFunc) (*program, error) {
	ix, err := p.Layout()
	if err != nil {
		return nil, err
	}
	pr := &program{p: p, tokens: ix.Tokens, pos: ix.Positions, rows: ix.Rows, sample: ix.Sample, mask: ix.Mask}
	pr.params = make([]Tensor, len(p.Params))
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
		var k Kernel
		var err error
		if rt.rank != nil && rankOps[in.Op] {
			k, err = rt.rank.kernel(rt.p, p, i, argT)
		} else {
			k, err = prep(in.Kernel, argT, resT, in.Attrs)
		}
		if err != nil {
			return nil, fmt.Errorf("program %s instr %d (%s): %w", p.Phase, i, in.Op, err)
		}
		c.k = k
		c.args = make([]Tensor, len(c.argRefs))
		c.results = make([]Tensor, len(c.resRefs))
		for j, r := range c.argRefs {
			if r.kind == plan.OpWeight {
				c.args[j] = rt.weights[r.index]
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
	view := func(r operandRef, t *Tensor) {
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

// Step implements targets.Runtime.
func (rt *hostRuntime) Step(in *targets.StepIn, out *targets.StepOut) error {
	pr := rt.progs[in.Phase]
	if pr == nil {
		return fmt.Errorf("plan has no %s program", in.Phase)
	}
	T, R := len(in.Tokens), len(in.Rows)
	if len(in.Sample) != 4*R || (in.Masks != nil && len(in.Masks) != R) || (in.Want != nil && len(in.Want) != R) {
		return fmt.Errorf("step of %d logits rows with %d sampling values, %d masks and %d logits flags", R, len(in.Sample), len(in.Masks), len(in.Want))
	}
	st := &rt.step
	st.T, st.R = T, R
	st.Seqs, st.Positions = st.Seqs[:0], st.Positions[:0]
	K, row := 0, 0
	for i, s := range in.Seqs {
		cs, ok := s.State.(*state)
		if !ok || cs.seq == nil {
			return fmt.Errorf("sequence %d: not a live state of this runtime", i)
		}
		// a one-row step after position 0 is a decode row unless the VM says what it is
		// (batch-invariant mode never guesses: a one-row prompt chunk stays a prompt row)
		decode := s.Decode || (!rt.invariant && s.N == 1 && s.Pos > 0)
		st.Seqs = append(st.Seqs, Seq{Row: row, N: s.N, Pos: s.Pos, State: cs.seq, Decode: decode, RowOrders: decode || rt.invariant, Invariant: rt.invariant})
		for j := 0; j < s.N; j++ {
			st.Positions = append(st.Positions, int32(s.Pos+j))
		}
		row += s.N
		if pr.keep > 0 {
			K += min(s.N, pr.keep)
		} else {
			K += s.N
		}
	}
	if row != T {
		return fmt.Errorf("sequences of %d tokens, %d tokens given", row, T)
	}
	for _, r := range in.Rows {
		if r < 0 || int(r) >= T {
			return fmt.Errorf("logits row %d is outside the step's %d tokens", r, T)
		}
	}
	st.Tokens = in.Tokens
	pr.params[pr.tokens] = Tensor{I32: in.Tokens, Shape: []int{T}}
	pr.params[pr.pos] = Tensor{I32: st.Positions, Shape: []int{T}}
	pr.params[pr.rows] = Tensor{I32: in.Rows, Shape: []int{R}}
	pr.params[pr.sample] = Tensor{F32: in.Sample, Shape: []int{R, 4}}
	if pr.mask >= 0 {
		if err := rt.fillMasks(pr, R, in.Masks); err != nil {
			return err
		}
	} else if in.Masks != nil {
		for i, m := range in.Masks {
			if m != nil {
				return fmt.Errorf("row %d: this plan's %s program cannot apply grammar masks", i, in.Phase)
			}
		}
	}
	pr.bind(T, R, K)
	if err := rt.run(pr, st); err != nil {
		return err
	}
	V := rt.p.Model.Vocab
	out.Logits = out.Logits[:0]
	if in.Want != nil {
		logits := pr.slotF32[pr.p.Returns[0].Index]
		for i, w := range in.Want {
			var row []float32
			if w {
				row = append([]float32(nil), logits[i*V:(i+1)*V]...)
			}
			out.Logits = append(out.Logits, row)
		}
	}
	if in.Phase == plan.PhaseDraft {
		out.Tokens = out.Tokens[:0]
		out.Drafts = append(out.Drafts[:0], pr.slotI32[pr.p.Returns[1].Index][:R]...)
		out.Confidences = append(out.Confidences[:0], pr.slotF32[pr.p.Returns[2].Index][:R]...)
		return nil
	}
	out.Tokens = append(out.Tokens[:0], pr.slotI32[pr.p.Returns[1].Index][:R]...)
	for _, s := range st.Seqs {
		s.State.Len += s.N
	}
	return nil
}

func (rt *hostRuntime) run(pr *program, st *Step) error {
	if rt.rank != nil && st.T == 0 {
		// a rank with no sequences this step only serves its experts: it takes part in
		// every exchange and runs its experts on what the other ranks send
		for i := range pr.calls {
			c := &pr.calls[i]
			if !rankOps[c.in.Op] {
				continue
			}
			if err := c.k.Run(st, c.args, c.results); err != nil {
				return fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Kernel, err)
			}
		}
		return nil
	}
	census := rt.census.On && pr.p.Phase == plan.PhaseDecode
	if rt.hook == nil && !census {
		for i := range pr.calls {
			c := &pr.calls[i]
			if err := c.k.Run(st, c.args, c.results); err != nil {
				return fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Kernel, err)
			}
		}
		return nil
	}
	if census {
		rt.census.Step()
	}
	for i := range pr.calls {
		c := &pr.calls[i]
		run := func() error { return c.k.Run(st, c.args, c.results) }
		var err error
		if rt.hook != nil {
			err = rt.hook(pr.p.Phase, i, c.in, run)
		} else {
			err = run()
		}
		if err != nil {
			return fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Kernel, err)
		}
		if census {
			rt.countExperts(i, c)
		}
	}
	return nil
}

// fillMasks writes the mask parameter: per logits row a flag word, then the row's mask
// as int32 halves. Only flags are rewritten for unmasked rows, so a step without masks
// costs O(R).
func (rt *hostRuntime) fillMasks(pr *program, R int, masks [][]uint64) error {
	cols := int(ir.MaskCols(int64(rt.p.Model.Vocab)))
	if cap(rt.maskBuf) < R*cols {
		rt.maskBuf = make([]int32, R*cols, 2*R*cols)
	}
	buf := rt.maskBuf[:R*cols]
	for i := 0; i < R; i++ {
		row := buf[i*cols : (i+1)*cols]
		row[0] = 0
		if masks == nil || masks[i] == nil {
			continue
		}
		m := masks[i]
		if len(m)*2 != cols-1 {
			return fmt.Errorf("row %d: a mask of %d words for a vocabulary of %d", i, len(m), rt.p.Model.Vocab)
		}
		row[0] = 1
		for j, w := range m {
			row[1+2*j], row[2+2*j] = int32(uint32(w)), int32(uint32(w>>32))
		}
	}
	pr.params[pr.mask] = Tensor{I32: buf, Shape: []int{R, cols}}
	return nil
}
