package sim

import (
	"fmt"
	"math"
	"strings"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets/cost"
)

// A stepShape is what the price of one rank's step depends on.
type stepShape struct {
	T   int     // tokens in the step on this rank
	R   int     // logit rows
	K   int     // rows kept by SWA bounded replay (Σ min(n_i, keep)); 0 means T
	S   int     // logit rows sampled at a temperature (the rest greedy); at most R
	Ctx float64 // mean position of the step's tokens (keys visible to a query ≈ this)
}

// kernelCall is one priced call of a step.
type kernelCall struct {
	Kernel string  // the plan's kernel name
	Op     string  // the IR op
	Layer  int     // -1 when not a layer op
	US     float64 // predicted
	Comm   bool    // a collective (overlappable with compute under two-batch overlap)
	Bound  cost.Bound
	FLOPs  float64
	Bytes  float64
	// the model's terms behind US: per-call floor, memory and compute time
	FloorUS, MemoryUS, ComputeUS float64
	Scan                         float64 // entries in view (cost.Kernel.Scan)
	Heap                         float64 // heap-select replacements a row (cost.Kernel.Heap)
}

// stepPrice is a priced step.
type stepPrice struct {
	ComputeUS, CommUS float64
	Calls             []kernelCall
	MoELayers         int
}

// pricer prices a role program's steps with a cost model. A step's price is split into
// the calls whose cost depends on the tokens alone (cached per token count) and those
// that also depend on how far into their sequences the tokens are (attention and the
// indexer, cached per token count and context bucket).
type pricer struct {
	m          *cost.Model
	p          *plan.Plan
	prog       *plan.Program
	imbalance  float64       // max/mean expert load over ranks
	layer      []int         // per instruction: the model layer it belongs to (-1: embedding or head)
	groupSize  map[int64]int // fusion group → its elementwise members
	static     map[[4]int]*stepPrice
	dynamic    map[[3]int]*stepPrice
	activation int // bytes per activation element on the device
	keep       int // SWA bounded replay's rows kept per sequence (0: the program has no cut)
	tableRanks int // ranks a sharded Engram table is split over
	commMode   string
}

func newPricer(m *cost.Model, p *plan.Plan, prog *plan.Program, role *plan.Role) *pricer {
	imb := 1.0
	if role.Balancedness > 0 {
		imb = 1 / role.Balancedness
	}
	pr := &pricer{m: m, p: p, prog: prog, imbalance: imb, static: map[[4]int]*stepPrice{},
		dynamic: map[[3]int]*stepPrice{}, activation: 2, tableRanks: max(1, role.EP), commMode: "normal"}
	pr.groupSize = map[int64]int{}
	for i := range prog.Instrs {
		in := &prog.Instrs[i]
		if g, ok := in.Attrs.Int("fusion"); ok && fusedAway(in) && !free(in) {
			pr.groupSize[g]++
		}
		switch in.Op {
		case "tail_rows":
			pr.keep = attrI(in, "keep")
		case "moe_dispatch":
			pr.commMode, _ = in.Attrs.Str("mode")
		}
	}
	cur := -1
	for i := range prog.Instrs {
		in := &prog.Instrs[i]
		l, found := -2, false
		for _, o := range in.Args {
			if w := pr.weight(o); w != nil {
				if n, ok := layerIndex(w.Name); ok {
					l, found = n, true
				} else if !found {
					l = -1
				}
				break
			}
		}
		if l != -2 {
			cur = l
		}
		pr.layer = append(pr.layer, cur)
	}
	return pr
}

// layerIndex reads N from a weight name holding "layers.N.".
func layerIndex(name string) (int, bool) {
	i := strings.Index(name, "layers.")
	if i < 0 {
		return 0, false
	}
	n := 0
	j := i + len("layers.")
	for ; j < len(name) && name[j] >= '0' && name[j] <= '9'; j++ {
		n = n*10 + int(name[j]-'0')
	}
	return n, j > i+len("layers.")
}

// ctxDependent reports whether an op's cost depends on the context length.
func ctxDependent(op string) bool {
	switch op {
	case "window_attention", "sparse_attention", "index_topk", "csa_attention", "csa_index", "csa_index_candidates":
		return true
	}
	return false
}

// kept is the rows SWA bounded replay keeps of a step whose sequences bring n_i rows each:
// Σ min(n_i, keep), or every row when the program has no cut.
func (pr *pricer) kept(chunks []int) int {
	k := 0
	for _, n := range chunks {
		if pr.keep > 0 {
			n = min(n, pr.keep)
		}
		k += n
	}
	return k
}

// ctxBucket rounds a context length to about 2% so that the cache stays small.
func ctxBucket(ctx float64) int {
	if ctx < 64 {
		return int(ctx)
	}
	return int(math.Exp(math.Round(math.Log(ctx)*50) / 50))
}

// gemmDType names the GEMM dtype of a weight's storage format.
func gemmDType(storage string) string {
	switch {
	case strings.HasPrefix(storage, "fp8"):
		return "fp8e4m3"
	case strings.HasPrefix(storage, "fp4"):
		return "fp4"
	}
	return "bf16"
}

func (pr *pricer) weight(o plan.Operand) *plan.Weight {
	if o.Kind != plan.OpWeight {
		return nil
	}
	return &pr.p.Weights[o.Index]
}

// price returns a step's two parts: the token-only calls and the context-dependent ones.
func (pr *pricer) price(s stepShape) (static, dynamic *stepPrice, err error) {
	s.Ctx = float64(ctxBucket(s.Ctx))
	if s.K == 0 {
		s.K = s.T
	}
	sk, dk := [4]int{s.T, s.R, s.K, s.S}, [3]int{s.T, s.K, int(s.Ctx)}
	static, dynamic = pr.static[sk], pr.dynamic[dk]
	if static == nil {
		if static, err = pr.priceSome(s, false); err != nil {
			return nil, nil, err
		}
		pr.static[sk] = static
	}
	if dynamic == nil {
		if dynamic, err = pr.priceSome(s, true); err != nil {
			return nil, nil, err
		}
		pr.dynamic[dk] = dynamic
	}
	return static, dynamic, nil
}

func (pr *pricer) priceSome(s stepShape, dyn bool) (*stepPrice, error) {
	sp := &stepPrice{}
	type pending struct {
		bytes int64
		seen  int
	}
	groups := map[int64]*pending{}
	for i := range pr.prog.Instrs {
		in := &pr.prog.Instrs[i]
		if ctxDependent(in.Op) != dyn {
			continue
		}
		var calls []kernelCall
		var err error
		if free(in) {
			continue
		}
		if g, ok := in.Attrs.Int("fusion"); ok && fusedAway(in) {
			// a fused chain's elementwise links move only the chain's own inputs and
			// output: priced once, as one kernel, when its last link is reached
			p := groups[g]
			if p == nil {
				p = &pending{}
				groups[g] = p
				p.bytes += int64(pr.elems(in.ArgTypes[:1], s) * pr.activation)
			}
			p.seen++
			if p.seen < pr.groupSize[g] {
				continue
			}
			p.bytes += int64(pr.elems(in.ResultTypes, s) * pr.activation)
			var c kernelCall
			c, err = pr.predict(in, cost.Kernel{Op: "elementwise", DType: "bf16", M: int(p.bytes) / pr.activation, Bytes: p.bytes})
			calls = []kernelCall{c}
		} else {
			calls, err = pr.instr(in, s)
		}
		if err != nil {
			return nil, fmt.Errorf("instr %d (%s): %w", i, in.Op, err)
		}
		for j := range calls {
			calls[j].Layer = pr.layer[i]
		}
		for _, c := range calls {
			if c.Comm {
				sp.CommUS += c.US
			} else {
				sp.ComputeUS += c.US
			}
		}
		sp.Calls = append(sp.Calls, calls...)
		if in.Op == "moe_experts" {
			sp.MoELayers++
		}
	}
	return sp, nil
}

func attrI(in *plan.Instr, k string) int { v, _ := in.Attrs.Int(k); return int(v) }

func (pr *pricer) predict(in *plan.Instr, k cost.Kernel) (kernelCall, error) {
	return pr.predictAs(in, in.Kernel, k)
}

// predictAs is predict with the call priced and reported under class.
func (pr *pricer) predictAs(in *plan.Instr, class string, k cost.Kernel) (kernelCall, error) {
	// a device without a rate for the weights' dtype runs them widened (FP4 experts
	// on Hopper are dequantized to FP8 on the fly)
	if k.DType == "fp4" && pr.m.Rates.TFLOPS["fp4"] == 0 {
		k.DType = "fp8e4m3"
	}
	if k.DType == "fp8e4m3" && pr.m.Rates.TFLOPS["fp8"] == 0 {
		k.DType = "bf16"
	}
	k.Class = class
	us, b, err := pr.m.Predict(k)
	if err != nil {
		return kernelCall{}, err
	}
	return kernelCall{Kernel: class, Op: in.Op, Layer: attrI(in, "layer"), US: us, Bound: b.Bound, FLOPs: b.FLOPs, Bytes: b.Bytes,
		FloorUS: b.LatencyUS, MemoryUS: b.MemoryUS, ComputeUS: b.ComputeUS, Scan: k.Scan, Heap: k.Heap}, nil
}

// heapReplacements is cost.Kernel.Heap for a top-k of k over n entries: libstdc++'s
// heap select (the cpu's torch.topk, and the cuda target's csa_topk_blk, where k·64 ≤ n)
// replaces the heap's root about k·ln(n/k) times for scores in no order; 0 where the
// selection partitions (introselect).
func heapReplacements(k, n int) float64 {
	if k < 1 || k*64 > n {
		return 0
	}
	return float64(k) * math.Log(float64(n)/float64(k))
}

// rowsOf is the leading dim of an operand type for this step.
func rowsOf(t ir.Type, s stepShape) int {
	if len(t.Shape) == 0 {
		return 1
	}
	switch t.Shape[0].Sym {
	case ir.SymTokens:
		return s.T
	case ir.SymRows:
		return s.R
	case ir.SymKept:
		return s.K
	}
	return int(t.Shape[0].N)
}

func colsOf(t ir.Type) int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= int(d.N)
	}
	return n
}

// fusedAway reports whether an instruction, inside a fusion group, costs no memory
// traffic of its own (a memory-bound epilogue or prologue).
func fusedAway(in *plan.Instr) bool {
	switch in.Op {
	case "rmsnorm", "rope", "hc_collapse", "hc_expand", "hc_init", "add", "swiglu", "fake_quant":
		return true
	}
	return false
}

// free reports instructions no device kernel runs: a bf16 fake_quant is the reference's
// rounding of an activation to bf16, which on the device is the dtype its producer
// already writes.
func free(in *plan.Instr) bool {
	f, _ := in.Attrs.Str("format")
	return in.Op == "fake_quant" && f == "bf16"
}

// elems counts the elements of the step-shaped tensors among ts.
func (pr *pricer) elems(ts []ir.Type, s stepShape) int {
	n := 0
	for _, t := range ts {
		if t.DType != ir.State && len(t.Shape) > 0 && t.Shape[0].Sym != "" {
			n += rowsOf(t, s) * colsOf(t)
		}
	}
	return n
}

// instr maps one plan instruction to the kernels it costs.
func (pr *pricer) instr(in *plan.Instr, s stepShape) ([]kernelCall, error) {
	one := func(k cost.Kernel) ([]kernelCall, error) {
		c, err := pr.predict(in, k)
		return []kernelCall{c}, err
	}
	// the elements an elementwise pass moves: its step-shaped operands and its results
	elementwiseElems := func() int {
		var elems int
		for _, t := range in.ArgTypes {
			if t.DType != ir.State && len(t.Shape) > 0 && t.Shape[0].Sym != "" {
				elems += rowsOf(t, s) * colsOf(t)
			}
		}
		for _, t := range in.ResultTypes {
			if t.DType != ir.State && len(t.Shape) > 0 {
				elems += rowsOf(t, s) * colsOf(t)
			}
		}
		return elems
	}
	elementwise := func() ([]kernelCall, error) {
		elems := elementwiseElems()
		return one(cost.Kernel{Op: "elementwise", DType: "bf16", M: elems, Bytes: int64(elems * pr.activation)})
	}
	// T: the rows of the instruction's first operand (the step's tokens, or the rows
	// SWA bounded replay kept)
	T := s.T
	if len(in.ArgTypes) > 0 {
		T = rowsOf(in.ArgTypes[0], s)
	}
	gemm := func(x ir.Type, w *plan.Weight, n int) (kernelCall, error) {
		return pr.predict(in, cost.Kernel{Op: "gemm", DType: gemmDType(w.Storage), M: rowsOf(x, s), N: n, K: int(w.Shape[1])})
	}
	switch in.Op {
	case "linear", "qlinear":
		// qlinear's activation quantization (MXFP8 for an FP8 or FP4 weight) runs in its
		// producer's epilogue on the device, as DeepSeek's fused kernels do
		w := pr.weight(in.Args[1])
		c, err := gemm(in.ArgTypes[0], w, int(w.Shape[0]))
		return []kernelCall{c}, err
	case "lm_head":
		w := pr.weight(in.Args[2])
		return one(cost.Kernel{Op: "gemm", DType: gemmDType(w.Storage), M: s.R, N: int(w.Shape[0]), K: int(w.Shape[1])})
	case "grouped_linear":
		w := pr.weight(in.Args[1])
		g := attrI(in, "groups")
		return one(cost.Kernel{Op: "grouped_gemm", DType: gemmDType(w.Storage), M: T, N: int(w.Shape[0]) / g, K: int(w.Shape[1]), Groups: g})
	case "rmsnorm":
		return one(cost.Kernel{Op: "rmsnorm", DType: "bf16", M: T * colsOf(in.ArgTypes[0]) / max(1, int(in.ArgTypes[0].Last())), N: int(in.ArgTypes[0].Last())})
	case "hc_mix", "hc_head", "moe_route":
		w := pr.weight(in.Args[1])
		return one(cost.Kernel{Op: "gemm", DType: "bf16", M: T, N: int(w.Shape[0]), K: int(w.Shape[1])})
	case "moe_experts":
		slots := attrI(in, "local_slots")
		if slots == 0 {
			slots = attrI(in, "experts")
		}
		topk := int(in.ArgTypes[2].Last())
		// every rank's tokens reach the experts' ranks: with dp = ep a rank receives
		// T·topk rows on average, more on the most loaded rank
		rows := float64(T*topk) * pr.imbalance
		// a step reads only the experts its rows pick: of `slots` experts chosen
		// uniformly, rows picks touch slots·(1 − (1 − 1/slots)^rows) on average
		groups := slots
		if touched := math.Ceil(float64(slots) * (1 - math.Pow(1-1/float64(slots), rows))); touched < float64(slots) {
			groups = max(1, int(touched))
		}
		perSlot := int(math.Ceil(rows / float64(groups)))
		w1 := pr.weight(in.Args[3])
		inter, hidden := int(w1.Shape[0]), int(w1.Shape[1])
		dt := gemmDType(w1.Storage)
		up, err := pr.predict(in, cost.Kernel{Op: "grouped_gemm", DType: dt, M: perSlot, N: 2 * inter, K: hidden, Groups: groups})
		if err != nil {
			return nil, err
		}
		down, err := pr.predict(in, cost.Kernel{Op: "grouped_gemm", DType: dt, M: perSlot, N: hidden, K: inter, Groups: groups})
		return []kernelCall{up, down}, err
	case "sample":
		if s.S > 0 {
			return pr.sampled(in, s, int64(elementwiseElems()*pr.activation))
		}
		return elementwise()
	case "rope":
		// in place, on the rope_dim slice of each head only
		x := in.ArgTypes[0]
		hd, rd := attrI(in, "head_dim"), attrI(in, "rope_dim")
		if hd <= 0 || rd <= 0 || int(x.Last())%hd != 0 {
			return elementwise()
		}
		elems := rowsOf(x, s) * colsOf(x) / hd * rd * 2
		return one(cost.Kernel{Op: "elementwise", DType: "bf16", M: elems, Bytes: int64(elems * pr.activation)})
	case "dspark_attention":
		// a draft block attends to the stage's window ring and the block itself
		heads, dim, window := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "window")
		return one(cost.Kernel{Op: "flash_mqa_decode", DType: "bf16", M: T, N: window + attrI(in, "block"), K: dim, Groups: heads})
	case "dspark_head":
		// the vocabulary head over every draft row (the Markov bias is a gather)
		w := pr.weight(in.Args[3])
		return one(cost.Kernel{Op: "gemm", DType: gemmDType(w.Storage), M: T, N: int(w.Shape[0]), K: int(w.Shape[1])})
	case "window_attention", "sparse_attention", "csa_attention":
		heads, dim, window := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "window")
		keys := math.Min(s.Ctx+1, float64(window))
		var scan float64
		if ratio := float64(attrI(in, "ratio")); ratio > 0 && in.Op != "window_attention" {
			visible := s.Ctx / ratio
			scan = visible             // every compressed entry in view of a row, attended or not
			if len(in.ArgTypes) == 6 { // the indexer's top-k
				visible = math.Min(visible, float64(in.ArgTypes[5].Last()))
			}
			keys += visible
		}
		return one(cost.Kernel{Op: "flash_mqa_decode", DType: "bf16", M: T, N: max(1, int(keys)), K: dim, Groups: heads, Scan: scan})
	case "index_topk":
		heads, dim, ratio := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "ratio")
		entries := max(1, int(s.Ctx)/ratio)
		return one(cost.Kernel{Op: "gemm", DType: "fp8e4m3", M: T * heads, N: entries, K: dim, Scan: float64(entries)})
	case "csa_index", "csa_index_candidates":
		// V4.1's index keys are FP4; with candidate blocks only their keys are scored
		heads, dim, ratio := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "ratio")
		entries := max(1, int(s.Ctx)/ratio)
		// the selection runs over every entry of a row (candidate blocks mask the rest)
		heap := heapReplacements(attrI(in, "topk"), entries)
		if len(in.ArgTypes) == 5 {
			entries = min(entries, attrI(in, "cand_blocks")*attrI(in, "cand_block_size"))
		}
		return one(cost.Kernel{Op: "gemm", DType: "fp4", M: T * heads, N: entries, K: dim, Scan: float64(entries), Heap: heap})
	case "compress":
		wkv := pr.weight(in.Args[2])
		c, err := gemm(in.ArgTypes[0], wkv, 2*int(wkv.Shape[0]))
		return []kernelCall{c}, err
	case "csa_compress":
		// the KV (and gate) projections of the source's rows, then its index keys
		var calls []kernelCall
		for _, a := range in.Args[2:] {
			w := pr.weight(a)
			if w == nil || len(w.Shape) != 2 {
				continue
			}
			x := in.ArgTypes[0]
			if int(w.Shape[1]) != int(x.Last()) { // wk reads the pooled entry
				x = ir.T(ir.F32, x.Shape[0], int(w.Shape[1]))
			}
			c, err := gemm(x, w, int(w.Shape[0]))
			if err != nil {
				return nil, err
			}
			calls = append(calls, c)
		}
		return calls, nil
	case "engram_lookup":
		// the table is split by rows over the role's ranks: each row is fetched from the
		// rank holding it (an all-to-all), then gathered
		out := in.ResultTypes[0]
		bytes := int64(rowsOf(out, s) * colsOf(out) * pr.activation)
		calls, err := elementwise()
		if err != nil || pr.tableRanks <= 1 {
			return calls, err
		}
		us, b, err := pr.m.PredictComm("all_to_all", bytes, pr.tableRanks, pr.commMode)
		if err != nil {
			return nil, err
		}
		return append(calls, kernelCall{Kernel: in.Kernel, Op: in.Op, US: us, Comm: true, Bound: b.Bound, Bytes: b.Bytes}), nil
	case "moe_dispatch", "moe_combine", "cp_gather":
		kind := map[string]string{"moe_dispatch": "dispatch", "moe_combine": "combine", "cp_gather": "all_gather"}[in.Op]
		bpt, _ := in.Attrs.Int("bytes_per_token")
		mode, _ := in.Attrs.Str("mode")
		ranks := attrI(in, "ranks")
		us, b, err := pr.m.PredictComm(kind, bpt*int64(T), ranks, mode)
		if err != nil {
			return nil, err
		}
		return []kernelCall{{Kernel: in.Kernel, Op: in.Op, Layer: -1, US: us, Comm: true, Bound: b.Bound, Bytes: b.Bytes}}, nil
	}
	if !elementwiseOps[in.Op] {
		return nil, fmt.Errorf("the simulator has no cost mapping for op %s", in.Op)
	}
	return elementwise()
}

// SampledClass is the class a sampler's calls are priced, reported and calibrated
// under when some of its rows are sampled at a temperature: a greedy row is one pass
// over its logits, a sampled row a launch block's several passes (vm/sampling.Row's
// maximum, relative probabilities, cut and draw), a different kernel in cost.
func SampledClass(kernel string) string { return kernel + sampledSuffix }

// IsSampledClass reports whether class is a SampledClass.
func IsSampledClass(class string) bool { return strings.HasSuffix(class, sampledSuffix) }

const sampledSuffix = " (sampled)"

// sampledPasses are the float32 passes the cuda target's sampler makes over a sampled
// row (basic.cu sample_blk): the maximum, the relative probabilities written and their
// sum, three levels of the cut's radix descent, and the draw's walk.
const sampledPasses = 7

// sampled prices a sampler call of s.S sampled rows (greedy: the bytes of the call with
// every row greedy): those bytes plus sampledPasses float32 passes over
// each sampled row, and as Kernel.Scan the entries one multiprocessor walks in turn: a
// row is one launch block, so rows beyond the device's multiprocessors wait for a second
// wave. The roofline prices the bytes alone; a class calibration (SampledClass) charges
// for the waves.
func (pr *pricer) sampled(in *plan.Instr, s stepShape, greedy int64) ([]kernelCall, error) {
	if len(in.ArgTypes) == 0 || len(in.ArgTypes[0].Shape) < 2 {
		return nil, fmt.Errorf("sample: the logits operand has no vocabulary dimension")
	}
	vocab := int(in.ArgTypes[0].Last())
	rows := min(s.S, s.R)
	waves := rows
	if cu := pr.m.Rates.ComputeUnits; cu > 0 {
		waves = (rows + cu - 1) / cu
	}
	bytes := greedy + int64(rows)*int64(vocab)*4*sampledPasses
	c, err := pr.predictAs(in, SampledClass(in.Kernel), cost.Kernel{Op: "elementwise", DType: "bf16", M: int(bytes) / pr.activation,
		Bytes: bytes, Scan: float64(waves) * float64(vocab)})
	return []kernelCall{c}, err
}

// elementwiseOps are priced as one memory-bound pass over their step-shaped operands
// and results: gathers, pointwise math, small per-row reductions, the sampler.
var elementwiseOps = map[string]bool{
	"embed": true, "hc_init": true, "hc_collapse": true, "hc_expand": true, "hc_select": true, "hc_mean": true,
	"rope": true, "swiglu": true, "add": true, "concat": true, "fake_quant": true, "sample": true,
	"engram_hash": true, "engram_mix": true, "dspark_push": true, "tail_rows": true, "tail_index": true,
}
