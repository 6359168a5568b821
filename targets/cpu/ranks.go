package cpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/quant"
	"deepinfer/targets"
)

// Expert parallelism with attention data parallelism, in one process. A plan compiled
// with a deploy spec whose roles have ep = dp = n > 1 opens as n ranks (rankGroup), each
// a host runtime of its own: its arena, its sequences (a sequence lives on one rank,
// whose attention alone sees it) and only the routed experts of its expert slots — the
// plan's placement, EPLB replicas included. A step runs every rank's program at once on
// its own goroutine, each over its own sequences (a rank with none runs with no
// tokens). moe_dispatch sends each (token, routing slot) to a rank holding a replica
// of its expert, moe_experts runs the rank's experts on what it received, moe_combine
// sends the outputs back, and each token sums them in the single-rank kernel's order:
// the exchanges are real (comm.go), and a token's result is the same bits as on one
// rank. Context-parallel gathers (cp > 1) are not executed.

// planRanks is the number of in-process ranks a plan asks for: 1 without a deployment
// or with ep 1; the roles' common ep otherwise.
func planRanks(p *plan.Plan) (int, error) {
	if p.Deployment == nil {
		return 1, nil
	}
	n := 0
	for _, r := range p.Deployment.Roles {
		if r.CP > 1 {
			return 0, fmt.Errorf("role %s: context parallelism (cp %d) is not executed by the cpu target", r.Name, r.CP)
		}
		ranks := max(r.EP, 1)
		if r.DP != ranks && ranks > 1 {
			return 0, fmt.Errorf("role %s: the cpu target runs ep = dp ranks in one process; this role has dp %d, ep %d", r.Name, r.DP, r.EP)
		}
		if n != 0 && ranks != n {
			return 0, fmt.Errorf("the cpu target runs both roles on the same in-process ranks; they ask for %d and %d", n, ranks)
		}
		n = ranks
	}
	return max(n, 1), nil
}

// rankOps are the instructions a rank prepares itself.
var rankOps = map[string]bool{"moe_dispatch": true, "moe_experts": true, "moe_combine": true}

// rankCtx is one rank of a group: its index, the communicator, and the MoE exchange in
// flight between a layer's dispatch, experts and combine.
type rankCtx struct {
	index, count int
	comm         *comm
	roles        map[string]*plan.Role // by phase (the draft runs on the decode ranks)
	ex           exchange
}

// exchange is one MoE layer's traffic on this rank.
type exchange struct {
	recv []msg // what each rank dispatched here
	out  []msg // the outputs to send back, per rank
}

// moeRoute is where a layer's experts live: the ranks holding each logical expert.
type moeRoute struct {
	slots   int     // expert slots per rank
	holders [][]int // holders[e]: the ranks whose slots hold expert e, one entry per replica
	local   []bool  // local[e]: this rank holds expert e
}

// dest is the rank token key's expert e goes to: its replicas taken in turn.
func (m *moeRoute) dest(e, key int) int {
	h := m.holders[e]
	return h[key%len(h)]
}

// route builds the layer's route for this rank from the role's placement (phy2log per
// layer); a layer the planner did not place (the DSpark stages' MoE) takes the
// identity layout, slot s holding expert s mod experts.
func (rk *rankCtx) route(phase string, layer, experts, slotsPerRank int) (*moeRoute, error) {
	role := rk.roles[phase]
	if role == nil {
		return nil, fmt.Errorf("no deployment role runs phase %s", phase)
	}
	phy2log := make([]int, slotsPerRank*rk.count)
	for s := range phy2log {
		phy2log[s] = s % experts
	}
	for _, lp := range role.Placement {
		if layer >= 0 && lp.Layer == layer {
			if len(lp.Phy2Log) != len(phy2log) {
				return nil, fmt.Errorf("%s layer %d: placement of %d slots, %d ranks × %d slots expected", phase, layer, len(lp.Phy2Log), rk.count, slotsPerRank)
			}
			copy(phy2log, lp.Phy2Log)
		}
	}
	m := &moeRoute{slots: slotsPerRank, holders: make([][]int, experts), local: make([]bool, experts)}
	for s, e := range phy2log {
		if e < 0 || e >= experts {
			return nil, fmt.Errorf("layer %d: slot %d holds expert %d of %d", layer, s, e, experts)
		}
		m.holders[e] = append(m.holders[e], s/slotsPerRank)
		if s/slotsPerRank == rk.index {
			m.local[e] = true
		}
	}
	for e, h := range m.holders {
		if len(h) == 0 {
			return nil, fmt.Errorf("layer %d: no slot holds expert %d", layer, e)
		}
	}
	return m, nil
}

// expertsInstr reads a moe_experts instruction: its layer (from its first expert
// weight's name), expert count and slots per rank.
func expertsInstr(p *plan.Plan, in *plan.Instr) (layer, experts, slots int, err error) {
	experts, slots = attrInt(in.Attrs, "experts"), attrInt(in.Attrs, "local_slots")
	if experts < 1 || slots < 1 || len(in.Args) < 3+3*experts || in.Args[3].Kind != plan.OpWeight {
		return 0, 0, 0, fmt.Errorf("moe_experts: %d experts, %d slots per rank and %d operands do not describe a sharded layer", experts, slots, len(in.Args))
	}
	return plan.LayerOf(p.Weights[in.Args[3].Index].Name), experts, slots, nil
}

// kernel prepares instruction i of prog, a rank's collective or experts instruction.
func (rk *rankCtx) kernel(p *plan.Plan, prog *plan.Program, idx int, argT []ir.Type) (Kernel, error) {
	in := &prog.Instrs[idx]
	if n := attrInt(in.Attrs, "ranks"); n != rk.count {
		return nil, fmt.Errorf("%s spans %d ranks; this group has %d", in.Op, n, rk.count)
	}
	// a layer's dispatch, experts and combine are one exchange: the experts instruction
	// is the next moe_experts after a dispatch, the previous one before a combine
	var ein *plan.Instr
	switch in.Op {
	case "moe_experts":
		ein = in
	case "moe_dispatch":
		for i := idx + 1; i < len(prog.Instrs) && ein == nil; i++ {
			if prog.Instrs[i].Op == "moe_experts" {
				ein = &prog.Instrs[i]
			}
		}
	case "moe_combine":
		for i := idx - 1; i >= 0 && ein == nil; i-- {
			if prog.Instrs[i].Op == "moe_experts" {
				ein = &prog.Instrs[i]
			}
		}
	}
	if ein == nil {
		return nil, fmt.Errorf("%s has no moe_experts instruction to exchange with", in.Op)
	}
	layer, experts, slots, err := expertsInstr(p, ein)
	if err != nil {
		return nil, err
	}
	route, err := rk.route(prog.Phase, layer, experts, slots)
	if err != nil {
		return nil, err
	}
	ek, err := newMoEExpertsAny(ein.ArgTypes, nil, ein.Attrs)
	if err != nil {
		return nil, err
	}
	re, ok := ek.(routedExperts)
	if !ok {
		return nil, fmt.Errorf("moe_experts: kernel %T cannot run expert-parallel", ek)
	}
	base := rankKernel{rk: rk, route: route, ex: re, experts: experts, dim: int(ein.ArgTypes[0].Last())}
	switch in.Op {
	case "moe_dispatch":
		if len(argT) != 3 {
			return nil, fmt.Errorf("moe_dispatch: %d operands; it takes x, the routing weights and the expert ids", len(argT))
		}
		return &dispatchKernel{base}, nil
	case "moe_experts":
		return &rankExpertsKernel{rankKernel: base}, nil
	default:
		return &combineKernel{rankKernel: base}, nil
	}
}

type rankKernel struct {
	rk      *rankCtx
	route   *moeRoute
	ex      routedExperts
	experts int
	dim     int
}

// dispatchKernel is moe_dispatch(x, weights, ids): every (token, slot) goes to a rank
// holding its expert, as the expert's input row in the wire format, with its routing
// weight. Its result is x (the IR types the collective as an identity on the sending
// rank's view).
type dispatchKernel struct{ rankKernel }

func (k *dispatchKernel) Run(s *Step, a, r []Tensor) error {
	x, wts, ids := a[0].F32, a[1].F32, a[2].I32
	t, topk, d := a[0].Rows(), a[2].Shape[1], k.dim
	win, _ := k.ex.wire()
	rb := win.rowBytes(d)
	send := make([]msg, k.rk.count)
	row, xin := make([]float32, d), make([]float32, d)
	packed := make([]byte, rb)
	for tok := 0; tok < t; tok++ {
		copy(row, x[tok*d:(tok+1)*d])
		k.ex.input(row, xin)
		win.pack(xin, packed)
		for j := 0; j < topk; j++ {
			e := int(ids[tok*topk+j])
			if e < 0 || e >= k.experts {
				return k.fail(fmt.Errorf("router chose expert %d of %d", e, k.experts))
			}
			dst := k.route.dest(e, tok*topk+j)
			m := &send[dst]
			m.pairs = append(m.pairs, pair{tok: int32(tok), slot: int32(j), expert: int32(e), w: wts[tok*topk+j]})
			m.payload = append(m.payload, packed...)
		}
	}
	recv, err := k.rk.comm.allToAll("moe_dispatch", k.rk.index, send)
	if err != nil {
		return err
	}
	k.rk.ex = exchange{recv: recv}
	copy(r[0].F32, x)
	return nil
}

// fail aborts the group (the other ranks are, or will be, waiting in a collective).
func (k *rankKernel) fail(err error) error {
	k.rk.comm.abort(err)
	return err
}

// rankExpertsKernel is moe_experts on one rank: the rank's experts on the rows
// dispatched to it, by expert, in the single-rank kernel's arithmetic; the outputs wait
// for moe_combine. Its own result is unused.
type rankExpertsKernel struct {
	rankKernel
}

func (k *rankExpertsKernel) Run(s *Step, a, r []Tensor) error {
	d := k.dim
	win, wout := k.ex.wire()
	rbIn, rbOut := win.rowBytes(d), wout.rowBytes(d)
	type ref struct{ src, i int }
	byExpert := make([][]ref, k.experts)
	for src, m := range k.rk.ex.recv {
		if len(m.payload) != len(m.pairs)*rbIn {
			return k.fail(fmt.Errorf("rank %d dispatched %d rows in %d bytes", src, len(m.pairs), len(m.payload)))
		}
		for i, p := range m.pairs {
			if !k.route.local[p.expert] {
				return k.fail(fmt.Errorf("rank %d sent a row for expert %d, which rank %d does not hold", src, p.expert, k.rk.index))
			}
			byExpert[p.expert] = append(byExpert[p.expert], ref{src, i})
		}
	}
	out := make([]msg, k.rk.count)
	for src, m := range k.rk.ex.recv {
		out[src] = msg{pairs: m.pairs, payload: make([]byte, len(m.pairs)*rbOut)}
	}
	var errs errOnce
	var active []int
	for e, refs := range byExpert {
		if len(refs) > 0 {
			active = append(active, e)
		}
	}
	parallelFor(len(active), d*d, func(lo, hi int) {
		var xin, w, y []float32
		var sc expertScratch
		for _, e := range active[lo:hi] {
			refs := byExpert[e]
			n := len(refs)
			xin, w, y = grow(xin, n*d), grow(w, n), grow(y, n*d)
			for i, rf := range refs {
				m := &k.rk.ex.recv[rf.src]
				win.unpack(m.payload[rf.i*rbIn:(rf.i+1)*rbIn], xin[i*d:(i+1)*d])
				w[i] = m.pairs[rf.i].w
			}
			if len(a[3+e].F32) == 0 {
				errs.set(fmt.Errorf("expert %d's weights are not loaded on rank %d", e, k.rk.index))
				return
			}
			k.ex.rows(a, e, xin, w, n, &sc, y)
			for i, rf := range refs {
				wout.pack(y[i*d:(i+1)*d], out[rf.src].payload[rf.i*rbOut:(rf.i+1)*rbOut])
			}
		}
	})
	if err := errs.get(); err != nil {
		return k.fail(err)
	}
	k.rk.ex.out = out
	return nil
}

// combineKernel is moe_combine(out, ids): the outputs go back to the ranks that
// dispatched them, and each token sums its slots in the single-rank kernel's order.
type combineKernel struct {
	rankKernel
	slotOut []float32
}

func (k *combineKernel) Run(s *Step, a, r []Tensor) error {
	ids := a[1].I32
	t, topk, d := a[1].Rows(), a[1].Shape[1], k.dim
	_, wout := k.ex.wire()
	rb := wout.rowBytes(d)
	back, err := k.rk.comm.allToAll("moe_combine", k.rk.index, k.rk.ex.out)
	if err != nil {
		return err
	}
	k.rk.ex = exchange{}
	k.slotOut = grow(k.slotOut, t*topk*d)
	got := make([]bool, t*topk)
	for src, m := range back {
		for i, p := range m.pairs {
			slot := int(p.tok)*topk + int(p.slot)
			if p.tok < 0 || int(p.tok) >= t || p.slot < 0 || int(p.slot) >= topk || got[slot] {
				return k.fail(fmt.Errorf("rank %d returned token %d slot %d, which this rank did not send or already has", src, p.tok, p.slot))
			}
			got[slot] = true
			wout.unpack(m.payload[i*rb:(i+1)*rb], k.slotOut[slot*d:(slot+1)*d])
		}
	}
	if i := slices.Index(got, false); i >= 0 {
		return k.fail(fmt.Errorf("token %d slot %d came back from no rank", i/topk, i%topk))
	}
	k.ex.reduce(r[0].F32, k.slotOut, ids, t, topk)
	return nil
}

// wireFmt is how expert rows travel between ranks.
type wireFmt int

const (
	wireF32   wireFmt = iota
	wireBF16          // values already rounded to bf16: the upper half of their bits
	wireMXFP8         // values already MXFP8: E4M3 codes and a UE8M0 scale per 32
)

func (w wireFmt) rowBytes(d int) int {
	switch w {
	case wireBF16:
		return 2 * d
	case wireMXFP8:
		return quant.MXFP8.RowBytes(d, 32)
	}
	return 4 * d
}

func (w wireFmt) pack(row []float32, dst []byte) {
	switch w {
	case wireBF16:
		for i, v := range row {
			binary.LittleEndian.PutUint16(dst[2*i:], uint16(math.Float32bits(v)>>16))
		}
	case wireMXFP8:
		quant.MXFP8.Pack(row, 32, dst)
	default:
		for i, v := range row {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	}
}

func (w wireFmt) unpack(src []byte, dst []float32) {
	switch w {
	case wireBF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
		}
	case wireMXFP8:
		quant.MXFP8.Unpack(src, 32, dst)
	default:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	}
}

// rankGroup is the in-process ranks' runtime: one targets.Runtime to the VM.
type rankGroup struct {
	p     *plan.Plan
	ranks []*hostRuntime
	comm  *comm
	mu    sync.Mutex
	load  []int // live sequences per rank
}

// openRanks opens n ranks of plan p, each with only its own experts' weights.
func openRanks(t Target, p *plan.Plan, ws []targets.Weight, o targets.Options, n int) (targets.Runtime, error) {
	g := &rankGroup{p: p, comm: newComm(n), load: make([]int, n)}
	roles := map[string]*plan.Role{}
	for i := range p.Deployment.Roles {
		r := &p.Deployment.Roles[i]
		roles[r.Name] = r
	}
	if roles["decode"] != nil {
		roles[plan.PhaseDraft] = roles["decode"]
	}
	for r := 0; r < n; r++ {
		rk := &rankCtx{index: r, count: n, comm: g.comm, roles: roles}
		skip, err := rk.foreignExperts(p)
		if err != nil {
			return nil, err
		}
		rt, err := openHost(t, p, ws, o, rk, skip)
		if err != nil {
			return nil, fmt.Errorf("rank %d: %w", r, err)
		}
		g.ranks = append(g.ranks, rt)
	}
	return g, nil
}

// foreignExperts is the set of weights this rank does not load: routed experts that
// no slot of the rank holds, in any phase.
func (rk *rankCtx) foreignExperts(p *plan.Plan) (map[int]bool, error) {
	candidate, needed := map[int]bool{}, map[int]bool{}
	for pi := range p.Programs {
		pr := &p.Programs[pi]
		for ii := range pr.Instrs {
			in := &pr.Instrs[ii]
			for _, a := range in.Args {
				if a.Kind == plan.OpWeight && in.Op != "moe_experts" {
					needed[a.Index] = true
				}
			}
			if in.Op != "moe_experts" {
				continue
			}
			layer, experts, slots, err := expertsInstr(p, in)
			if err != nil {
				return nil, err
			}
			route, err := rk.route(pr.Phase, layer, experts, slots)
			if err != nil {
				return nil, err
			}
			for j, a := range in.Args {
				if a.Kind != plan.OpWeight {
					continue
				}
				if e := (j - 3) % experts; j >= 3 && j < 3+3*experts && !route.local[e] {
					candidate[a.Index] = true
				} else {
					needed[a.Index] = true
				}
			}
		}
	}
	for i := range needed {
		delete(candidate, i)
	}
	return candidate, nil
}

// Ranks implements targets.Ranked.
func (g *rankGroup) Ranks() int { return len(g.ranks) }

// RankWeightBytes implements targets.Ranked: the float32 values each rank loaded.
func (g *rankGroup) RankWeightBytes() []int64 {
	out := make([]int64, len(g.ranks))
	for i, h := range g.ranks {
		for _, w := range h.weights {
			out[i] += 4 * int64(len(w.F32)+len(w.I32))
		}
	}
	return out
}

// CommStats implements targets.Ranked.
func (g *rankGroup) CommStats() map[string]targets.CommBytes { return g.comm.snapshot() }

// rankState is a sequence's state on its rank.
type rankState struct {
	g    *rankGroup
	rank int
	st   *state
	done bool
}

func (s *rankState) Release() {
	s.g.mu.Lock()
	if !s.done {
		s.done = true
		s.g.load[s.rank]--
	}
	s.g.mu.Unlock()
}

// Save implements targets.SavableState.
func (s *rankState) Save() (func() error, error) { return s.st.Save() }

// Digest implements targets.SavableState.
func (s *rankState) Digest() [32]byte { return s.st.Digest() }

// NewState implements targets.Runtime: the sequence goes to the rank with the fewest
// (the lowest such rank on ties), whose attention alone will see it.
func (g *rankGroup) NewState() (targets.State, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := 0
	for i, n := range g.load {
		if n < g.load[r] {
			r = i
		}
	}
	st, err := g.ranks[r].NewState()
	if err != nil {
		return nil, err
	}
	g.load[r]++
	return &rankState{g: g, rank: r, st: st.(*state)}, nil
}

func (g *rankGroup) HasPhase(phase string) bool { return g.ranks[0].HasPhase(phase) }

func (g *rankGroup) Close() error {
	var errs []error
	for _, r := range g.ranks {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// Step implements targets.Runtime: the batch split by rank, every rank's program run
// at once, the outputs put back in the batch's order.
func (g *rankGroup) Step(in *targets.StepIn, out *targets.StepOut) error {
	n := len(g.ranks)
	ins := make([]targets.StepIn, n)
	type where struct{ rank, row int }
	rowAt := make([]where, 0, len(in.Tokens)) // token row → (rank, its row there)
	for r := range ins {
		ins[r].Phase = in.Phase
	}
	off := 0
	for i, s := range in.Seqs {
		rs, ok := s.State.(*rankState)
		if !ok || rs.g != g || rs.done {
			return fmt.Errorf("sequence %d: not a live state of this runtime", i)
		}
		if off+s.N > len(in.Tokens) {
			return fmt.Errorf("sequences of more than the step's %d tokens", len(in.Tokens))
		}
		ri := &ins[rs.rank]
		for j := 0; j < s.N; j++ {
			rowAt = append(rowAt, where{rs.rank, len(ri.Tokens) + j})
		}
		ri.Tokens = append(ri.Tokens, in.Tokens[off:off+s.N]...)
		ri.Seqs = append(ri.Seqs, targets.SeqIn{State: rs.st, N: s.N, Pos: s.Pos, Decode: s.Decode})
		off += s.N
	}
	if off != len(in.Tokens) {
		return fmt.Errorf("sequences of %d tokens, %d tokens given", off, len(in.Tokens))
	}
	if len(in.Sample) != 4*len(in.Rows) || (in.Masks != nil && len(in.Masks) != len(in.Rows)) || (in.Want != nil && len(in.Want) != len(in.Rows)) {
		return fmt.Errorf("step of %d logits rows with %d sampling values, %d masks and %d logits flags", len(in.Rows), len(in.Sample), len(in.Masks), len(in.Want))
	}
	outAt := make([]where, len(in.Rows)) // logits row → (rank, its logits row there)
	for i, row := range in.Rows {
		if row < 0 || int(row) >= len(rowAt) {
			return fmt.Errorf("logits row %d is outside the step's %d tokens", row, len(rowAt))
		}
		w := rowAt[row]
		ri := &ins[w.rank]
		outAt[i] = where{w.rank, len(ri.Rows)}
		ri.Rows = append(ri.Rows, int32(w.row))
		ri.Sample = append(ri.Sample, in.Sample[4*i:4*i+4]...)
		if in.Masks != nil {
			ri.Masks = append(ri.Masks, in.Masks[i])
		}
		if in.Want != nil {
			ri.Want = append(ri.Want, in.Want[i])
		}
	}
	for r := range ins {
		// a rank's flags are all-or-nothing like the caller's
		if in.Masks != nil && len(ins[r].Masks) == 0 {
			ins[r].Masks = nil
		}
		if in.Want != nil && len(ins[r].Want) == 0 {
			ins[r].Want = nil
		}
		if ins[r].Sample == nil {
			ins[r].Sample = []float32{}
		}
	}
	outs := make([]targets.StepOut, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range g.ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[r] = g.ranks[r].Step(&ins[r], &outs[r]); errs[r] != nil {
				g.comm.abort(errs[r])
			}
		}()
	}
	wg.Wait()
	if errors.Join(errs...) != nil {
		g.comm.reset() // every rank has returned: the next step may run
	}
	for r, err := range errs {
		var ab *abortedError
		if err != nil && !errors.As(err, &ab) {
			return fmt.Errorf("rank %d: %w", r, err) // the failure itself, not its echoes
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	out.Tokens, out.Logits, out.Drafts, out.Confidences = out.Tokens[:0], out.Logits[:0], out.Drafts[:0], out.Confidences[:0]
	for _, w := range outAt {
		o := &outs[w.rank]
		if in.Phase == plan.PhaseDraft {
			out.Drafts = append(out.Drafts, o.Drafts[w.row])
			out.Confidences = append(out.Confidences, o.Confidences[w.row])
		} else {
			out.Tokens = append(out.Tokens, o.Tokens[w.row])
		}
		if in.Want != nil {
			out.Logits = append(out.Logits, o.Logits[w.row])
		}
	}
	return nil
}

// Describe says how the plan runs (divm prints it at start-up).
func (g *rankGroup) Describe() string {
	var lo, hi int64
	for i, b := range g.RankWeightBytes() {
		if i == 0 || b < lo {
			lo = b
		}
		hi = max(hi, b)
	}
	return fmt.Sprintf("cpu: %d in-process ranks (attention dp %d, experts ep %d), %.1f–%.1f MiB of weights per rank as float32", len(g.ranks), len(g.ranks), len(g.ranks), float64(lo)/(1<<20), float64(hi)/(1<<20))
}
