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
	static     map[[2]int]*stepPrice
	dynamic    map[[2]int]*stepPrice
	activation int // bytes per activation element on the device
}

func newPricer(m *cost.Model, p *plan.Plan, prog *plan.Program, balancedness float64) *pricer {
	imb := 1.0
	if balancedness > 0 {
		imb = 1 / balancedness
	}
	pr := &pricer{m: m, p: p, prog: prog, imbalance: imb, static: map[[2]int]*stepPrice{},
		dynamic: map[[2]int]*stepPrice{}, activation: 2}
	pr.groupSize = map[int64]int{}
	for i := range prog.Instrs {
		if g, ok := prog.Instrs[i].Attrs.Int("fusion"); ok && fusedAway(prog.Instrs[i].Op) {
			pr.groupSize[g]++
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
	return op == "window_attention" || op == "sparse_attention" || op == "index_topk"
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
	sk, dk := [2]int{s.T, s.R}, [2]int{s.T, int(s.Ctx)}
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
		if g, ok := in.Attrs.Int("fusion"); ok && fusedAway(in.Op) {
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
	// a device without a rate for the weights' dtype runs them widened (FP4 experts
	// on Hopper are dequantized to FP8 on the fly)
	if k.DType == "fp4" && pr.m.Rates.TFLOPS["fp4"] == 0 {
		k.DType = "fp8e4m3"
	}
	if k.DType == "fp8e4m3" && pr.m.Rates.TFLOPS["fp8"] == 0 {
		k.DType = "bf16"
	}
	us, b, err := pr.m.Predict(k)
	if err != nil {
		return kernelCall{}, err
	}
	return kernelCall{Kernel: in.Kernel, Op: in.Op, Layer: attrI(in, "layer"), US: us, Bound: b.Bound, FLOPs: b.FLOPs, Bytes: b.Bytes}, nil
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

// fusedAway reports whether an op, inside a fusion group, costs no memory traffic of its
// own (a memory-bound epilogue or prologue).
func fusedAway(op string) bool {
	switch op {
	case "rmsnorm", "rope", "hc_collapse", "hc_expand", "hc_init", "add", "swiglu":
		return true
	}
	return false
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
	elementwise := func() ([]kernelCall, error) {
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
		return one(cost.Kernel{Op: "elementwise", DType: "bf16", M: elems, Bytes: int64(elems * pr.activation)})
	}
	T := s.T
	switch in.Op {
	case "linear":
		w := pr.weight(in.Args[1])
		return one(cost.Kernel{Op: "gemm", DType: gemmDType(w.Storage), M: rowsOf(in.ArgTypes[0], s), N: int(w.Shape[0]), K: int(w.Shape[1])})
	case "lm_head":
		w := pr.weight(in.Args[2])
		return one(cost.Kernel{Op: "gemm", DType: gemmDType(w.Storage), M: s.R, N: int(w.Shape[0]), K: int(w.Shape[1])})
	case "grouped_linear":
		w := pr.weight(in.Args[1])
		g := attrI(in, "groups")
		return one(cost.Kernel{Op: "grouped_gemm", DType: gemmDType(w.Storage), M: T, N: int(w.Shape[0]) / g, K: int(w.Shape[1]), Groups: g})
	case "rmsnorm":
		return one(cost.Kernel{Op: "rmsnorm", DType: "bf16", M: T * colsOf(in.ArgTypes[0]) / max(1, int(in.ArgTypes[0].Last())), N: int(in.ArgTypes[0].Last())})
	case "hc_mix", "hc_head":
		w := pr.weight(in.Args[1])
		calls, err := one(cost.Kernel{Op: "gemm", DType: "bf16", M: T, N: int(w.Shape[0]), K: int(w.Shape[1])})
		return calls, err
	case "moe_route":
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
		perSlot := int(math.Ceil(rows / float64(slots)))
		w1 := pr.weight(in.Args[3])
		inter, hidden := int(w1.Shape[0]), int(w1.Shape[1])
		dt := gemmDType(w1.Storage)
		up, err := pr.predict(in, cost.Kernel{Op: "grouped_gemm", DType: dt, M: perSlot, N: 2 * inter, K: hidden, Groups: slots})
		if err != nil {
			return nil, err
		}
		down, err := pr.predict(in, cost.Kernel{Op: "grouped_gemm", DType: dt, M: perSlot, N: hidden, K: inter, Groups: slots})
		return []kernelCall{up, down}, err
	case "window_attention", "sparse_attention":
		heads, dim, window := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "window")
		keys := math.Min(s.Ctx+1, float64(window))
		if in.Op == "sparse_attention" {
			ratio := float64(attrI(in, "ratio"))
			visible := s.Ctx / ratio
			if len(in.ArgTypes) == 6 { // CSA: the indexer's top-k
				visible = math.Min(visible, float64(in.ArgTypes[5].Last()))
			}
			keys += visible
		}
		return one(cost.Kernel{Op: "flash_mqa_decode", DType: "bf16", M: T, N: max(1, int(keys)), K: dim, Groups: heads})
	case "index_topk":
		heads, dim, ratio := attrI(in, "heads"), attrI(in, "head_dim"), attrI(in, "ratio")
		entries := max(1, int(s.Ctx)/ratio)
		return one(cost.Kernel{Op: "gemm", DType: "fp8e4m3", M: T * heads, N: entries, K: dim})
	case "compress":
		wkv := pr.weight(in.Args[2])
		g, err := pr.predict(in, cost.Kernel{Op: "gemm", DType: gemmDType(wkv.Storage), M: T, N: 2 * int(wkv.Shape[0]), K: int(wkv.Shape[1])})
		if err != nil {
			return nil, err
		}
		return []kernelCall{g}, nil
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
	return elementwise()
}
