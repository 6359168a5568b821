package ir

import "fmt"

// AttrKind is the kind of an attribute value.
type AttrKind uint8

// Attribute kinds.
const (
	AInt AttrKind = iota
	AFloat
	AStr
	ABool
	AInts
)

func (k AttrKind) String() string {
	return [...]string{"int", "float", "string", "bool", "int list"}[k]
}

// AttrSpec declares one attribute of an op.
type AttrSpec struct {
	Name     string
	Kind     AttrKind
	Required bool
}

// Effect says whether an op touches per-sequence state.
type Effect uint8

// Effects.
const (
	Pure Effect = iota
	// Stateful ops read or write the per-sequence state of the layer named by their
	// "layer" attribute; they are never removed or reordered across each other.
	Stateful
)

// OpInfo declares an op: its operand arity, result count, attributes, effects,
// and the type rule that gives result types from operand types.
type OpInfo struct {
	Name    string
	MinArgs int
	MaxArgs int // -1: variadic
	Results int
	Attrs   []AttrSpec
	Effect  Effect
	Doc     string
	// Infer checks operand types and attributes and returns the result types.
	Infer func(args []Type, a Attrs) ([]Type, error)
}

// Attributes every op may carry once passes have run.
var passAttrs = []AttrSpec{{"kernel", AStr, false}, {"slots", AInts, false}}

var opTable = map[string]*OpInfo{}

// Lookup returns the declaration of op, or nil.
func Lookup(op string) *OpInfo { return opTable[op] }

// Ops lists every declared op name.
func Ops() []string {
	out := make([]string, 0, len(opTable))
	for k := range opTable {
		out = append(out, k)
	}
	return out
}

func declare(o *OpInfo) {
	if _, dup := opTable[o.Name]; dup {
		panic("ir: op declared twice: " + o.Name)
	}
	opTable[o.Name] = o
}

func fail(format string, args ...any) ([]Type, error) { return nil, fmt.Errorf(format, args...) }

func one(t Type) ([]Type, error) { return []Type{t}, nil }

// rows checks that t is dt[T, n...] with the leading dim symbolic (tokens or rows).
func rows(t Type, dt DType, rank int, what string) error {
	if t.DType != dt || t.Rank() != rank {
		return fmt.Errorf("%s: want %s of rank %d, have %s", what, dt, rank, t)
	}
	if t.Shape[0].Sym == "" {
		return fmt.Errorf("%s: leading dim must be symbolic, have %s", what, t)
	}
	for _, d := range t.Shape[1:] {
		if d.Sym != "" {
			return fmt.Errorf("%s: only the leading dim may be symbolic, have %s", what, t)
		}
	}
	return nil
}

func matrix(t Type, what string) (int64, int64, error) {
	if t.Rank() != 2 || t.Shape[0].Sym != "" || t.Shape[1].Sym != "" {
		return 0, 0, fmt.Errorf("%s: want a constant 2-D weight, have %s", what, t)
	}
	return t.Shape[0].N, t.Shape[1].N, nil
}

// linearShape checks x is f32[T,in] and w (named what) a constant [out,in] weight that
// takes it, and returns out.
func linearShape(x, w Type, what string) (int64, error) {
	if err := rows(x, F32, 2, "x"); err != nil {
		return 0, err
	}
	o, i, err := matrix(w, what)
	if err != nil {
		return 0, err
	}
	if i != x.Last() {
		return 0, fmt.Errorf("%s %s does not take x %s", what, w, x)
	}
	return o, nil
}

func vector(t Type, n int64, what string) error {
	if t.Rank() != 1 || t.Shape[0].Sym != "" || (n >= 0 && t.Shape[0].N != n) {
		return fmt.Errorf("%s: want f32[%d], have %s", what, n, t)
	}
	return nil
}

func intAttr(a Attrs, k string) int64 { v, _ := a.Int(k); return v }

func sameTokens(a, b Type, what string) error {
	if a.Shape[0] != b.Shape[0] {
		return fmt.Errorf("%s: token dims differ: %s vs %s", what, a, b)
	}
	return nil
}

var ropeAttrs = []AttrSpec{
	{"rope_dim", AInt, true}, {"theta", AFloat, true},
	{"yarn_factor", AFloat, false}, {"yarn_original", AInt, false},
	{"yarn_beta_fast", AFloat, false}, {"yarn_beta_slow", AFloat, false}, {"attn_factor", AFloat, false},
	{"rope_fp32", ABool, false},
}

func init() {
	declare(&OpInfo{Name: "embed", MinArgs: 2, MaxArgs: 2, Results: 1,
		Doc: "rows of the embedding table: embed(tokens i32[T], table[V,D]) -> f32[T,D]",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], I32, 1, "tokens"); err != nil {
				return nil, err
			}
			_, d, err := matrix(a[1], "table")
			if err != nil {
				return nil, err
			}
			return one(T(F32, a[0].Shape[0], Dim{N: d}))
		}})
	declare(&OpInfo{Name: "hc_init", MinArgs: 1, MaxArgs: 1, Results: 1,
		Attrs: []AttrSpec{{"mult", AInt, true}},
		Doc:   "mHC: copy x[T,D] into mult residual streams [T,mult,D]",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			n := intAttr(at, "mult")
			if n < 1 {
				return fail("mult must be positive")
			}
			return one(T(F32, a[0].Shape[0], Dim{N: n}, a[0].Shape[1]))
		}})
	declare(&OpInfo{Name: "hc_mix", MinArgs: 4, MaxArgs: 4, Results: 3,
		Attrs: []AttrSpec{{"norm_eps", AFloat, true}, {"eps", AFloat, true}, {"iters", AInt, true},
			{"numerics", AStr, false}, {"keep", AInt, false}},
		Doc: "mHC mixes: hc_mix(streams[T,n,D], fn[(2+n)n,nD], base[(2+n)n], scale[3]) -> pre[T,n], post[T,n], comb[T,n,n] (Sinkhorn-projected); " +
			"numerics \"v41\" in the V4.1 reference's fp32 order (keep: the rows are each sequence's replay tail)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			n, d := a[0].Shape[1].N, a[0].Shape[2].N
			r, c, err := matrix(a[1], "fn")
			if err != nil {
				return nil, err
			}
			if r != (2+n)*n || c != n*d {
				return fail("fn: want [%d,%d], have %s", (2+n)*n, n*d, a[1])
			}
			if err := vector(a[2], (2+n)*n, "base"); err != nil {
				return nil, err
			}
			if err := vector(a[3], 3, "scale"); err != nil {
				return nil, err
			}
			t := a[0].Shape[0]
			return []Type{T(F32, t, Dim{N: n}), T(F32, t, Dim{N: n}), T(F32, t, Dim{N: n}, Dim{N: n})}, nil
		}})
	declare(&OpInfo{Name: "hc_collapse", MinArgs: 2, MaxArgs: 2, Results: 1,
		Doc: "mHC pre: hc_collapse(streams[T,n,D], pre[T,n]) -> Σ_j pre_j·stream_j [T,D]",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			if !a[1].Equal(T(F32, a[0].Shape[0], a[0].Shape[1])) {
				return fail("pre: want f32[%s,%s], have %s", a[0].Shape[0], a[0].Shape[1], a[1])
			}
			return one(T(F32, a[0].Shape[0], a[0].Shape[2]))
		}})
	declare(&OpInfo{Name: "hc_expand", MinArgs: 4, MaxArgs: 4, Results: 1,
		Attrs: []AttrSpec{{"numerics", AStr, false}},
		Doc:   "mHC post+comb: hc_expand(streams[T,n,D], out[T,D], post[T,n], comb[T,n,n]) -> post⊗out + combᵀ·streams (numerics \"v41\": combᵀ·streams summed first, in fp32)",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			t, n, d := a[0].Shape[0], a[0].Shape[1], a[0].Shape[2]
			if !a[1].Equal(T(F32, t, d)) || !a[2].Equal(T(F32, t, n)) || !a[3].Equal(T(F32, t, n, n)) {
				return fail("operands do not match streams %s: out %s, post %s, comb %s", a[0], a[1], a[2], a[3])
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "hc_head", MinArgs: 4, MaxArgs: 4, Results: 1,
		Attrs: []AttrSpec{{"norm_eps", AFloat, true}, {"eps", AFloat, true}},
		Doc:   "final mHC collapse: hc_head(streams[T,n,D], fn[n,nD], base[n], scale[1]) -> [T,D]",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			n, d := a[0].Shape[1].N, a[0].Shape[2].N
			if r, c, err := matrix(a[1], "fn"); err != nil || r != n || c != n*d {
				return fail("fn: want [%d,%d], have %s", n, n*d, a[1])
			}
			if err := vector(a[2], n, "base"); err != nil {
				return nil, err
			}
			if err := vector(a[3], 1, "scale"); err != nil {
				return nil, err
			}
			return one(T(F32, a[0].Shape[0], a[0].Shape[2]))
		}})
	declare(&OpInfo{Name: "rmsnorm", MinArgs: 1, MaxArgs: 2, Results: 1,
		Attrs: []AttrSpec{{"eps", AFloat, true}, {"group", AInt, false}, {"numerics", AStr, false}},
		Doc:   "RMSNorm over chunks of `group` elements (default: the last dim), weighted when a weight is given (numerics \"v41\": fp32 statistics in the V4.1 reference's order)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			g := a[0].Last()
			if v, ok := at.Int("group"); ok {
				if v <= 0 || g%v != 0 {
					return fail("group %d does not divide %d", v, g)
				}
				g = v
			}
			if len(a) == 2 {
				if err := vector(a[1], g, "weight"); err != nil {
					return nil, err
				}
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "linear", MinArgs: 2, MaxArgs: 2, Results: 1,
		Doc: "y = x·Wᵀ: linear(x[T,in], W[out,in]) -> [T,out]",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			o, err := linearShape(a[0], a[1], "W")
			if err != nil {
				return nil, err
			}
			return one(T(F32, a[0].Shape[0], Dim{N: o}))
		}})
	declare(&OpInfo{Name: "grouped_linear", MinArgs: 2, MaxArgs: 2, Results: 1,
		Attrs: []AttrSpec{{"groups", AInt, true}, {"numerics", AStr, false}, {"keep", AInt, false}, {"xbf16", ABool, false}},
		Doc: "block-diagonal projection: group g of x[T,G·in] times rows g·out..(g+1)·out of W[G·out,in]; " +
			"xbf16: x holds bf16 values (a promise a target may use, e.g. to leave out products with its zero residual)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			g := intAttr(at, "groups")
			o, i, err := matrix(a[1], "W")
			if err != nil {
				return nil, err
			}
			if g <= 0 || o%g != 0 || i*g != a[0].Last() {
				return fail("W %s with %d groups does not take x %s", a[1], g, a[0])
			}
			return one(T(F32, a[0].Shape[0], Dim{N: o}))
		}})
	declare(&OpInfo{Name: "rope", MinArgs: 2, MaxArgs: 2, Results: 1,
		Attrs: append([]AttrSpec{{"head_dim", AInt, true}, {"inverse", ABool, false}}, ropeAttrs...),
		Doc:   "interleaved RoPE on the trailing rope_dim channels of each head_dim chunk of x[T,H·D], at positions pos i32[T]; inverse rotates by -θ",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			if err := rows(a[1], I32, 1, "pos"); err != nil {
				return nil, err
			}
			if err := sameTokens(a[0], a[1], "rope"); err != nil {
				return nil, err
			}
			hd, rd := intAttr(at, "head_dim"), intAttr(at, "rope_dim")
			if hd <= 0 || a[0].Last()%hd != 0 || rd <= 0 || rd > hd || rd%2 != 0 {
				return fail("head_dim %d / rope_dim %d do not fit %s", hd, rd, a[0])
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "compress", MinArgs: 6, MaxArgs: 6, Results: 1, Effect: Stateful,
		Attrs: append([]AttrSpec{{"layer", AInt, true}, {"cache", AInt, true}, {"ratio", AInt, true},
			{"head_dim", AInt, true}, {"overlap", ABool, true}, {"eps", AFloat, true}}, ropeAttrs...),
		Doc: "KV compressor (HCA, or CSA with overlap): compress(x[T,Dm], pos, wkv, wgate, ape, norm) appends one entry per closed window of `ratio` tokens to the layer's cache `cache` (0 attention, 1 indexer)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			if err := rows(a[1], I32, 1, "pos"); err != nil {
				return nil, err
			}
			d, r := intAttr(at, "head_dim"), intAttr(at, "ratio")
			w := d
			if ov, _ := at.Bool("overlap"); ov {
				w = 2 * d
			}
			for i, name := range []string{"wkv", "wgate"} {
				o, in, err := matrix(a[2+i], name)
				if err != nil {
					return nil, err
				}
				if o != w || in != a[0].Last() {
					return fail("%s: want [%d,%d], have %s", name, w, a[0].Last(), a[2+i])
				}
			}
			if rr, c, err := matrix(a[4], "ape"); err != nil || rr != r || c != w {
				return fail("ape: want [%d,%d], have %s", r, w, a[4])
			}
			if err := vector(a[5], d, "norm"); err != nil {
				return nil, err
			}
			return one(StateType)
		}})
	declare(&OpInfo{Name: "index_topk", MinArgs: 4, MaxArgs: 4, Results: 1, Effect: Stateful,
		Attrs: []AttrSpec{{"layer", AInt, true}, {"ratio", AInt, true}, {"topk", AInt, true}, {"heads", AInt, true},
			{"head_dim", AInt, true}, {"scale", AFloat, true}},
		Doc: "lightning indexer: index_topk(q[T,H·d], w[T,H], pos, state) scores Σ_h w_h·ReLU(q_h·k_s)·scale over the causally visible indexer entries and keeps the top k (-1 pads)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			h, d, k := intAttr(at, "heads"), intAttr(at, "head_dim"), intAttr(at, "topk")
			if err := rows(a[0], F32, 2, "q"); err != nil {
				return nil, err
			}
			if a[0].Last() != h*d || k <= 0 {
				return fail("q %s does not hold %d heads of %d", a[0], h, d)
			}
			if !a[1].Equal(T(F32, a[0].Shape[0], int(h))) {
				return fail("w: want f32[%s,%d], have %s", a[0].Shape[0], h, a[1])
			}
			if a[3].DType != State {
				return fail("operand 4 must be the indexer's state, have %s", a[3])
			}
			return one(T(I32, a[0].Shape[0], int(k)))
		}})
	attnAttrs := []AttrSpec{{"layer", AInt, true}, {"heads", AInt, true}, {"head_dim", AInt, true},
		{"window", AInt, true}, {"scale", AFloat, true}}
	attnCheck := func(a []Type, at Attrs) error {
		h, d := intAttr(at, "heads"), intAttr(at, "head_dim")
		if err := rows(a[0], F32, 2, "q"); err != nil {
			return err
		}
		if a[0].Last() != h*d {
			return fmt.Errorf("q %s does not hold %d heads of %d", a[0], h, d)
		}
		if !a[1].Equal(T(F32, a[0].Shape[0], int(d))) {
			return fmt.Errorf("kv: want f32[%s,%d], have %s", a[0].Shape[0], d, a[1])
		}
		if err := rows(a[2], I32, 1, "pos"); err != nil {
			return err
		}
		return vector(a[3], h, "sink")
	}
	declare(&OpInfo{Name: "window_attention", MinArgs: 4, MaxArgs: 4, Results: 1, Effect: Stateful,
		Attrs: attnAttrs,
		Doc:   "shared-KV MQA over the last `window` tokens with a per-head sink logit: window_attention(q, kv, pos, sink); appends kv to the layer's window ring",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := attnCheck(a, at); err != nil {
				return nil, err
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "sparse_attention", MinArgs: 5, MaxArgs: 6, Results: 1, Effect: Stateful,
		Attrs: append([]AttrSpec{{"ratio", AInt, true}}, attnAttrs...),
		Doc:   "window attention plus the causally visible compressed entries (all of them, or the indexer's top-k when idx is given): sparse_attention(q, kv, pos, sink, state[, idx])",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := attnCheck(a, at); err != nil {
				return nil, err
			}
			if a[4].DType != State {
				return fail("operand 5 must be the compressor's state, have %s", a[4])
			}
			if len(a) == 6 {
				if err := rows(a[5], I32, 2, "idx"); err != nil {
					return nil, err
				}
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "moe_route", MinArgs: 2, MaxArgs: 4, Results: 2,
		Attrs: []AttrSpec{{"mode", AStr, true}, {"scoring", AStr, true}, {"topk", AInt, true},
			{"scale", AFloat, true}, {"norm", ABool, true}, {"numerics", AStr, false}, {"keep", AInt, false}},
		Doc: "router: mode topk: moe_route(x, gate[E,D][, bias[E]]); mode hash: moe_route(x, gate, tokens, tid2eid[V,k]) -> weights f32[T,k], experts i32[T,k]; " +
			"numerics \"v41\" scores, selects and weights in float32 as the V4.1 reference does",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			e, d, err := matrix(a[1], "gate")
			if err != nil {
				return nil, err
			}
			if d != a[0].Last() {
				return fail("gate %s does not take x %s", a[1], a[0])
			}
			k := intAttr(at, "topk")
			if k <= 0 || k > e {
				return fail("topk %d out of range for %d experts", k, e)
			}
			switch m, _ := at.Str("mode"); m {
			case "topk":
				if len(a) == 3 {
					if err := vector(a[2], e, "bias"); err != nil {
						return nil, err
					}
				} else if len(a) != 2 {
					return fail("mode topk takes x, gate and an optional bias")
				}
			case "hash":
				if len(a) != 4 {
					return fail("mode hash takes x, gate, tokens, tid2eid")
				}
				if err := rows(a[2], I32, 1, "tokens"); err != nil {
					return nil, err
				}
				if _, kk, err := matrix(a[3], "tid2eid"); err != nil || kk != k || a[3].DType != I32 {
					return fail("tid2eid: want i32[V,%d], have %s", k, a[3])
				}
			default:
				return fail("unknown mode %q", m)
			}
			switch s, _ := at.Str("scoring"); s {
			case "sqrtsoftplus", "sigmoid", "softmax":
			default:
				return fail("unknown scoring %q", s)
			}
			t := a[0].Shape[0]
			return []Type{T(F32, t, int(k)), T(I32, t, int(k))}, nil
		}})
	declare(&OpInfo{Name: "moe_experts", MinArgs: 6, MaxArgs: -1, Results: 1,
		Attrs: []AttrSpec{{"experts", AInt, true}, {"limit", AFloat, true}, {"ranks", AInt, false}, {"local_slots", AInt, false},
			{"numerics", AStr, false}},
		Doc: "routed experts (with ranks > 1, each rank runs local_slots expert replicas chosen by the plan's expert map): moe_experts(x, weights, ids, w1[E]..., w2[E]..., w3[E]...) -> Σ_k weight_k · w2·(silu(clamp(w1·x))·clamp(w3·x)); " +
			"numerics \"v41\" computes as the V4.1 reference does (MXFP8 activations, bf16 results, the weight applied before w2, experts summed in id order)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			e := intAttr(at, "experts")
			if e <= 0 || int64(len(a)) != 3+3*e {
				return fail("want x, weights, ids and 3×%d expert weights, have %d operands", e, len(a))
			}
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			if err := rows(a[1], F32, 2, "weights"); err != nil {
				return nil, err
			}
			if err := rows(a[2], I32, 2, "ids"); err != nil {
				return nil, err
			}
			d := a[0].Last()
			inter, in, err := matrix(a[3], "w1")
			if err != nil || in != d {
				return fail("w1: want [I,%d], have %s", d, a[3])
			}
			for i := int64(0); i < e; i++ {
				if !a[3+i].Equal(a[3]) || !a[3+2*e+i].Equal(a[3]) || !a[3+e+i].Equal(T(a[3].DType, int(d), int(inter))) {
					return fail("expert %d weights do not match expert 0", i)
				}
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "swiglu", MinArgs: 2, MaxArgs: 2, Results: 1,
		Attrs: []AttrSpec{{"limit", AFloat, false}},
		Doc:   "clamped SwiGLU: silu(min(gate, limit)) · clamp(up, -limit, limit)",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "gate"); err != nil {
				return nil, err
			}
			if !a[0].Equal(a[1]) {
				return fail("gate %s and up %s differ", a[0], a[1])
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "add", MinArgs: 2, MaxArgs: 2, Results: 1,
		Doc: "elementwise sum of two same-typed tensors",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if a[0].DType != F32 || !a[0].Equal(a[1]) {
				return fail("operands differ: %s vs %s", a[0], a[1])
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "lm_head", MinArgs: 3, MaxArgs: 3, Results: 1,
		Doc: "logits for selected rows: lm_head(h[T,D], rows i32[R], W[V,D]) -> f32[R,V]; " +
			"xbf16: h holds bf16 values (a promise a target may use, e.g. to leave out products with its zero residual)",
		Attrs: []AttrSpec{{"xbf16", ABool, false}},
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "h"); err != nil {
				return nil, err
			}
			if err := rows(a[1], I32, 1, "rows"); err != nil {
				return nil, err
			}
			v, d, err := matrix(a[2], "W")
			if err != nil || d != a[0].Last() {
				return fail("W: want [V,%d], have %s", a[0].Last(), a[2])
			}
			return one(T(F32, a[1].Shape[0], int(v)))
		}})
}
