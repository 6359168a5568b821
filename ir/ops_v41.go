package ir

import "fmt"

// Ops of DeepSeek-V4.1 (MODEL.md §2). V4.1 keeps V4's generic math (embed, hc_mix,
// rmsnorm, rope, moe_route, moe_experts, lm_head) and adds:
//
//   - the reference's numerics as ops of their own: fake_quant (round a tensor through
//     bf16, MXFP8 or FP4 and back) and qlinear (a GEMM whose activations are quantized
//     as the checkpoint's weight format needs, with a bf16 or f32 result);
//   - the single-pass mHC helpers hc_select and hc_mean;
//   - CSA2: csa_compress (a KV source's compressor, its compressed cache and index keys),
//     csa_index / csa_index_candidates (the two-level indexer), csa_attention (window +
//     selected compressed entries, online softmax in blocks);
//   - Engram: engram_hash, engram_lookup, engram_mix;
//   - DSpark: dspark_push (write the drafter's window rings), dspark_attention and
//     dspark_head (the draft block, the Markov head and the confidences);
//   - tail_rows / tail_index, which the SWA bounded-replay pass inserts: a step's rows
//     reduced to each sequence's last `keep` rows (symbolic dim K).
//
// Weights are typed f32 here as everywhere (the cpu target computes on dequantized
// values); their checkpoint format is the weight's Storage.

// SymKept is the symbolic row count after the SWA bounded-replay cut: each sequence's
// last `keep` rows of the step (K = Σ min(n_i, keep)).
const SymKept = "K"

// FakeQuantFormats are fake_quant's formats. bf16 rounds each value; the others round
// groups of `group` values through a block format (see package quant).
var FakeQuantFormats = []string{"bf16", "mxfp8", "fp4_ue8m0", "fp4_e4m3"}

// tensorRows checks t is dt with a symbolic leading dim and constant others, rank ≥ 2.
func tensorRows(t Type, dt DType, what string) error {
	if t.DType != dt || t.Rank() < 2 || t.Shape[0].Sym == "" {
		return fmt.Errorf("%s: want %s[T,...], have %s", what, dt, t)
	}
	for _, d := range t.Shape[1:] {
		if d.Sym != "" {
			return fmt.Errorf("%s: only the leading dim may be symbolic, have %s", what, t)
		}
	}
	return nil
}

func stateArg(t Type, what string) error {
	if t.DType != State {
		return fmt.Errorf("%s must be a state value, have %s", what, t)
	}
	return nil
}

func strAttr(a Attrs, k string) string { s, _ := a.Str(k); return s }

func oneOf(v string, set ...string) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

var v41AttnAttrs = []AttrSpec{{"layer", AInt, true}, {"heads", AInt, true}, {"head_dim", AInt, true},
	{"window", AInt, true}, {"scale", AFloat, true}, {"block", AInt, true}, {"keep", AInt, false}}

func v41AttnCheck(a []Type, at Attrs) error {
	h, d := intAttr(at, "heads"), intAttr(at, "head_dim")
	if err := rows(a[0], F32, 2, "q"); err != nil {
		return err
	}
	if h <= 0 || d <= 0 || a[0].Last() != h*d {
		return fmt.Errorf("q %s does not hold %d heads of %d", a[0], h, d)
	}
	if !a[1].Equal(T(F32, a[0].Shape[0], int(d))) {
		return fmt.Errorf("kv: want f32[%s,%d], have %s", a[0].Shape[0], d, a[1])
	}
	if !a[2].Equal(T(I32, a[0].Shape[0])) {
		return fmt.Errorf("pos: want i32[%s], have %s", a[0].Shape[0], a[2])
	}
	if intAttr(at, "window") < 1 || intAttr(at, "block") < 1 {
		return fmt.Errorf("window and block must be positive")
	}
	return vector(a[3], h, "sink")
}

func init() {
	declare(&OpInfo{Name: "fake_quant", MinArgs: 1, MaxArgs: 1, Results: 1,
		Attrs: []AttrSpec{{"format", AStr, true}, {"group", AInt, false}},
		Doc:   "round x[T,...] through a number format and back: bf16 (each value), or mxfp8 / fp4_ue8m0 / fp4_e4m3 in groups of `group` values along the last dim",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := tensorRows(a[0], F32, "x"); err != nil {
				return nil, err
			}
			f := strAttr(at, "format")
			if !oneOf(f, FakeQuantFormats...) {
				return fail("unknown format %q (want one of %v)", f, FakeQuantFormats)
			}
			if f != "bf16" {
				g := intAttr(at, "group")
				if g <= 0 || a[0].Last()%g != 0 {
					return fail("group %d does not divide %s", g, a[0])
				}
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "qlinear", MinArgs: 2, MaxArgs: 2, Results: 1,
		Attrs: []AttrSpec{{"act", AStr, true}, {"out", AStr, true}, {"block", AInt, false}, {"keep", AInt, false}},
		Doc: "y = x·Wᵀ as the V4.1 reference computes it: qlinear(x[T,in], W[out,in]); act mxfp8 quantizes bf16(x) per `block` values " +
			"(an FP8 or FP4 weight), bf16 rounds x (a bf16 weight), f32 keeps it; out bf16 rounds the result",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			o, i, err := matrix(a[1], "W")
			if err != nil {
				return nil, err
			}
			if i != a[0].Last() {
				return fail("W %s does not take x %s", a[1], a[0])
			}
			act := strAttr(at, "act")
			if !oneOf(act, "mxfp8", "bf16", "f32") || !oneOf(strAttr(at, "out"), "bf16", "f32") {
				return fail("act %q / out %q: want act mxfp8|bf16|f32, out bf16|f32", act, strAttr(at, "out"))
			}
			if act == "mxfp8" {
				if b := intAttr(at, "block"); b <= 0 || i%b != 0 {
					return fail("activation block %d does not divide %d", b, i)
				}
			}
			return one(T(F32, a[0].Shape[0], Dim{N: o}))
		}})
	declare(&OpInfo{Name: "hc_select", MinArgs: 1, MaxArgs: 1, Results: 1,
		Attrs: []AttrSpec{{"index", AInt, true}},
		Doc:   "one residual stream: hc_select(streams[T,n,D]) -> streams[:, index] (the identity pre-mix of V4.1's first sublayer)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			if i := intAttr(at, "index"); i < 0 || i >= a[0].Shape[1].N {
				return fail("index %d is not a stream of %s", i, a[0])
			}
			return one(T(F32, a[0].Shape[0], a[0].Shape[2]))
		}})
	declare(&OpInfo{Name: "hc_mean", MinArgs: 1, MaxArgs: 1, Results: 1,
		Doc: "bf16 mean of the residual streams: hc_mean(streams[T,n,D]) -> [T,D] (what DSpark reads of its target layers)",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			return one(T(F32, a[0].Shape[0], a[0].Shape[2]))
		}})
	declare(&OpInfo{Name: "concat", MinArgs: 1, MaxArgs: -1, Results: 1,
		Doc: "concatenate along the last dim: concat(x_i[T,n_i]...) -> [T, Σ n_i]",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			var n int64
			for i, t := range a {
				if err := rows(t, F32, 2, fmt.Sprintf("operand %d", i)); err != nil {
					return nil, err
				}
				if err := sameTokens(a[0], t, "concat"); err != nil {
					return nil, err
				}
				n += t.Last()
			}
			return one(T(F32, a[0].Shape[0], Dim{N: n}))
		}})
	declare(&OpInfo{Name: "engram_hash", MinArgs: 2, MaxArgs: 2, Results: 1, Effect: Stateful,
		Attrs: []AttrSpec{{"layer", AInt, true}, {"layers", AInts, true}, {"max_ngram", AInt, true}, {"heads", AInt, true},
			{"pad_token", AInt, true}, {"primes", AInts, true}, {"multipliers", AInts, true}, {"compressed_vocab", AInt, true}},
		Doc: "Engram n-gram hashes: engram_hash(tokens i32[T], token_map i32[V]) -> i32[T, L·(max_ngram-1)·heads], the table rows of every " +
			"Engram layer for each position; reads and extends each sequence's n-gram history (layer names the first Engram layer)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], I32, 1, "tokens"); err != nil {
				return nil, err
			}
			if a[1].DType != I32 || a[1].Rank() != 1 || a[1].Shape[0].Sym != "" {
				return fail("token_map: want i32[V], have %s", a[1])
			}
			layers, _ := at.Ints("layers")
			n, h := intAttr(at, "max_ngram"), intAttr(at, "heads")
			primes, _ := at.Ints("primes")
			mult, _ := at.Ints("multipliers")
			l := int64(len(layers))
			if l == 0 || n < 2 || h < 1 || int64(len(primes)) != l*(n-1)*h || int64(len(mult)) != l*n {
				return fail("%d layers, max_ngram %d, %d heads do not match %d primes and %d multipliers", l, n, h, len(primes), len(mult))
			}
			if p := intAttr(at, "pad_token"); p < 0 || p >= a[1].Shape[0].N {
				return fail("pad token %d is outside the token map", p)
			}
			return one(T(I32, a[0].Shape[0], int(l*(n-1)*h)))
		}})
	declare(&OpInfo{Name: "engram_lookup", MinArgs: 2, MaxArgs: 2, Results: 1,
		Attrs: []AttrSpec{{"index", AInt, true}, {"cols", AInt, true}},
		Doc:   "Engram table rows: engram_lookup(hashes i32[T, L·cols], table[rows, d]) -> [T, cols·d], the cols rows of Engram layer `index`",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], I32, 2, "hashes"); err != nil {
				return nil, err
			}
			_, d, err := matrix(a[1], "table")
			if err != nil {
				return nil, err
			}
			i, c := intAttr(at, "index"), intAttr(at, "cols")
			if c <= 0 || i < 0 || (i+1)*c > a[0].Last() {
				return fail("layer index %d with %d columns does not fit hashes %s", i, c, a[0])
			}
			return one(T(F32, a[0].Shape[0], int(c*d)))
		}})
	declare(&OpInfo{Name: "engram_mix", MinArgs: 4, MaxArgs: 4, Results: 1,
		Attrs: []AttrSpec{{"eps", AFloat, true}},
		Doc: "Engram gate: engram_mix(streams[T,n,D], kv[T,(n+1)D], q_weight[n,D], k_weight[n,D]) -> bf16(streams + σ(ssqrt(dot))·value): " +
			"one key per stream and a shared value; the gate is the RMS-normalized stream·key product, signed square root, sigmoid",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 3, "streams"); err != nil {
				return nil, err
			}
			t, n, d := a[0].Shape[0], a[0].Shape[1].N, a[0].Shape[2].N
			if !a[1].Equal(T(F32, t, int((n+1)*d))) {
				return fail("kv: want f32[%s,%d], have %s", t, (n+1)*d, a[1])
			}
			for i, name := range []string{"q_weight", "k_weight"} {
				if r, c, err := matrix(a[2+i], name); err != nil || r != n || c != d {
					return fail("%s: want [%d,%d], have %s", name, n, d, a[2+i])
				}
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "csa_compress", MinArgs: 4, MaxArgs: 7, Results: 1, Effect: Stateful,
		Attrs: append([]AttrSpec{{"layer", AInt, true}, {"ratio", AInt, true}, {"head_dim", AInt, true},
			{"index_head_dim", AInt, true}, {"eps", AFloat, true}}, ropeAttrs...),
		Doc: "CSA2 KV source: csa_compress(x[T,D], pos, wkv[d,D], [wgate[d,D]], norm[d], [wk[di,d], k_norm[di]]) pools every closed group of " +
			"`ratio` tokens (softmax-gated; ratio 1 projects each token), normalizes it, derives its FP4 index key when index_head_dim > 0, " +
			"and appends the RoPE'd FP4 entry to the layer's compressed cache, which every consumer layer reads",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "x"); err != nil {
				return nil, err
			}
			if !a[1].Equal(T(I32, a[0].Shape[0])) {
				return fail("pos: want i32[%s], have %s", a[0].Shape[0], a[1])
			}
			r, d, di := intAttr(at, "ratio"), intAttr(at, "head_dim"), intAttr(at, "index_head_dim")
			want := 4 // x, pos, wkv, norm
			if r > 1 {
				want++
			}
			if di > 0 {
				want += 2
			}
			if r < 1 || d < 1 || di < 0 || len(a) != want {
				return fail("ratio %d, head_dim %d, index_head_dim %d take %d operands, have %d", r, d, di, want, len(a))
			}
			D := a[0].Last()
			k := 2
			for _, name := range []string{"wkv", "wgate"} {
				if name == "wgate" && r == 1 {
					continue
				}
				if o, in, err := matrix(a[k], name); err != nil || o != d || in != D {
					return fail("%s: want [%d,%d], have %s", name, d, D, a[k])
				}
				k++
			}
			if err := vector(a[k], d, "norm"); err != nil {
				return nil, err
			}
			if di > 0 {
				if o, in, err := matrix(a[k+1], "wk"); err != nil || o != di || in != d {
					return fail("wk: want [%d,%d], have %s", di, d, a[k+1])
				}
				if err := vector(a[k+2], di, "k_norm"); err != nil {
					return nil, err
				}
			}
			return one(StateType)
		}})
	indexAttrs := []AttrSpec{{"layer", AInt, true}, {"source", AInt, true}, {"ratio", AInt, true}, {"topk", AInt, true},
		{"heads", AInt, true}, {"head_dim", AInt, true}, {"scale", AFloat, true},
		{"cand_blocks", AInt, false}, {"cand_block_size", AInt, false}, {"keep", AInt, false}}
	indexCheck := func(a []Type, at Attrs) error {
		h, d := intAttr(at, "heads"), intAttr(at, "head_dim")
		if err := rows(a[0], F32, 2, "q"); err != nil {
			return err
		}
		if h <= 0 || a[0].Last() != h*d {
			return fmt.Errorf("q %s does not hold %d heads of %d", a[0], h, d)
		}
		t := a[0].Shape[0]
		if !a[1].Equal(T(F32, t, int(h))) {
			return fmt.Errorf("w: want f32[%s,%d], have %s", t, h, a[1])
		}
		if !a[2].Equal(T(I32, t)) {
			return fmt.Errorf("pos: want i32[%s], have %s", t, a[2])
		}
		if intAttr(at, "ratio") < 1 || intAttr(at, "topk") < 1 {
			return fmt.Errorf("ratio and topk must be positive")
		}
		return stateArg(a[3], "operand 4 (the KV source's state)")
	}
	declare(&OpInfo{Name: "csa_index", MinArgs: 4, MaxArgs: 5, Results: 1, Effect: Stateful,
		Attrs: indexAttrs,
		Doc: "CSA2 indexer: csa_index(q[T,H·d], w[T,H], pos, state[, cand i32[T,B]]) scores the source's visible index keys as " +
			"Σ_h bf16(w_h·scale)·ReLU(q_h·k) in bf16 and keeps the top k in position order (-1 pads); with cand, only keys inside the " +
			"candidate blocks compete",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := indexCheck(a, at); err != nil {
				return nil, err
			}
			if len(a) == 5 {
				b := intAttr(at, "cand_blocks")
				if b < 1 || intAttr(at, "cand_block_size") < 1 || !a[4].Equal(T(I32, a[0].Shape[0], int(b))) {
					return fail("cand: want i32[%s,%d] with a positive cand_block_size, have %s", a[0].Shape[0], b, a[4])
				}
			}
			return one(T(I32, a[0].Shape[0], int(intAttr(at, "topk"))))
		}})
	declare(&OpInfo{Name: "csa_index_candidates", MinArgs: 4, MaxArgs: 4, Results: 2, Effect: Stateful,
		Attrs: indexAttrs,
		Doc: "the candidate source's indexer: as csa_index, and also publishes the top cand_blocks blocks of cand_block_size keys " +
			"(the newest, partly filled block always kept) -> idx i32[T,topk], cand i32[T,cand_blocks] (-1 pads)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := indexCheck(a, at); err != nil {
				return nil, err
			}
			b := intAttr(at, "cand_blocks")
			if b < 1 || intAttr(at, "cand_block_size") < 1 {
				return fail("cand_blocks and cand_block_size must be positive")
			}
			t := a[0].Shape[0]
			return []Type{T(I32, t, int(intAttr(at, "topk"))), T(I32, t, int(b))}, nil
		}})
	declare(&OpInfo{Name: "csa_attention", MinArgs: 4, MaxArgs: 6, Results: 1, Effect: Stateful,
		Attrs: append([]AttrSpec{{"ratio", AInt, true}, {"source", AInt, true}}, v41AttnAttrs...),
		Doc: "V4.1 shared-KV MQA with sinks: csa_attention(q, kv, pos, sink[, state, idx]) over the window (the layer's FP8 ring plus this " +
			"step's rows, which it then appends) and, when ratio > 0, the source layer's compressed entries idx selects; " +
			"an online softmax over blocks of `block` keys with bf16 probabilities, a bf16 result",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := v41AttnCheck(a, at); err != nil {
				return nil, err
			}
			r := intAttr(at, "ratio")
			switch {
			case r == 0 && len(a) == 4:
			case r > 0 && len(a) == 6:
				if err := stateArg(a[4], "operand 5 (the KV source's state)"); err != nil {
					return nil, err
				}
				if err := rows(a[5], I32, 2, "idx"); err != nil {
					return nil, err
				}
				if err := sameTokens(a[0], a[5], "idx"); err != nil {
					return nil, err
				}
			default:
				return fail("ratio %d takes %d operands, have %d", r, map[bool]int{true: 4, false: 6}[r == 0], len(a))
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "dspark_push", MinArgs: 2, MaxArgs: 2, Results: 1, Effect: Stateful,
		Attrs: []AttrSpec{{"layer", AInt, true}, {"keep", AInt, false}},
		Doc:   "write K=V rows of the main model's hidden (kv[T,d], pos) into a DSpark stage's window ring",
		Infer: func(a []Type, _ Attrs) ([]Type, error) {
			if err := rows(a[0], F32, 2, "kv"); err != nil {
				return nil, err
			}
			if !a[1].Equal(T(I32, a[0].Shape[0])) {
				return fail("pos: want i32[%s], have %s", a[0].Shape[0], a[1])
			}
			return one(StateType)
		}})
	declare(&OpInfo{Name: "dspark_attention", MinArgs: 4, MaxArgs: 4, Results: 1, Effect: Stateful,
		Attrs: v41AttnAttrs,
		Doc: "DSpark draft attention: dspark_attention(q, kv, pos, sink) — every row of a sequence's draft block attends to the stage's " +
			"window ring and to the whole block (not causal within it); reads state, writes none",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := v41AttnCheck(a, at); err != nil {
				return nil, err
			}
			return one(a[0])
		}})
	declare(&OpInfo{Name: "dspark_head", MinArgs: 7, MaxArgs: 7, Results: 3,
		Attrs: []AttrSpec{{"block", AInt, true}, {"xbf16", ABool, false}},
		Doc: "DSpark head over draft blocks of `block` rows: dspark_head(hn[T,D], x[T,D], tokens i32[T], head[V,D], markov_embed[V,r], " +
			"markov_head[V,r], conf[1,D+r]) -> logits f32[T,V] (head·hn plus the Markov bias of the previous token), draft ids i32[T] " +
			"(greedy, chained through the block), confidences f32[T] (raw logits); " +
			"xbf16: hn holds bf16 values (a promise a target may use, e.g. to leave out products with its zero residual)",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			for i, name := range []string{"hn", "x"} {
				if err := rows(a[i], F32, 2, name); err != nil {
					return nil, err
				}
			}
			t, D := a[0].Shape[0], a[0].Last()
			if !a[1].Equal(a[0]) || !a[2].Equal(T(I32, t)) {
				return fail("x %s and tokens %s must match hn %s", a[1], a[2], a[0])
			}
			v, d, err := matrix(a[3], "head")
			if err != nil || d != D {
				return fail("head: want [V,%d], have %s", D, a[3])
			}
			mv, r, err := matrix(a[4], "markov_embed")
			if err != nil || mv != v || !a[5].Equal(a[4]) {
				return fail("markov_embed %s / markov_head %s: want [%d,r]", a[4], a[5], v)
			}
			if o, c, err := matrix(a[6], "conf"); err != nil || o != 1 || c != D+r {
				return fail("conf: want [1,%d], have %s", D+r, a[6])
			}
			if intAttr(at, "block") < 1 {
				return fail("block must be positive")
			}
			return []Type{T(F32, t, int(v)), T(I32, t), T(F32, t)}, nil
		}})
	declare(&OpInfo{Name: "tail_rows", MinArgs: 1, MaxArgs: 1, Results: 1,
		Attrs: []AttrSpec{{"keep", AInt, true}},
		Doc:   "SWA bounded replay: tail_rows(x[T,...]) -> x[K,...], each sequence's last min(n, keep) rows of the step",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if a[0].DType == State || a[0].Rank() < 1 || a[0].Shape[0].Sym != SymTokens {
				return fail("x: want a tensor with leading dim T, have %s", a[0])
			}
			if intAttr(at, "keep") < 1 {
				return fail("keep must be positive")
			}
			t := Type{DType: a[0].DType, Shape: append(Shape{S(SymKept)}, a[0].Shape[1:]...)}
			return one(t)
		}})
	declare(&OpInfo{Name: "tail_index", MinArgs: 1, MaxArgs: 1, Results: 1,
		Attrs: []AttrSpec{{"keep", AInt, true}},
		Doc:   "SWA bounded replay: renumber step rows (i32[R], indices into T) as rows of the kept tail (indices into K); a dropped row is an error",
		Infer: func(a []Type, at Attrs) ([]Type, error) {
			if err := rows(a[0], I32, 1, "rows"); err != nil {
				return nil, err
			}
			if intAttr(at, "keep") < 1 {
				return fail("keep must be positive")
			}
			return one(a[0])
		}})
}
