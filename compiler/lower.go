package compiler

import (
	"fmt"
	"math"
	"strings"

	"deepinfer/ir"
)

// Phases lowered for every model. Both take the same parameters:
// tokens i32[T], positions i32[T], logit_rows i32[R], sample_params f32[R,4] and
// sample_mask (grammar masks), and return logits f32[R,V] and one sampled token per
// row, i32[R].
// prefill takes any number of new tokens per sequence on top of its cache (chunked
// prefill); decode takes exactly one token per sequence, which lets the target pick
// single-query kernels.
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
)

// Lower builds the IR module of a deepseek_v4 model: one function per phase.
// Weight names are the checkpoint names transformers writes (MODEL.md §1).
func Lower(c *ModelConfig) (*ir.Module, error) {
	if c.V41 != nil {
		return lowerV41(c) // lower_v41.go
	}
	m := ir.NewModule(c.ModelType)
	attn := make([]int64, len(c.Layers))
	ratio := make([]int64, len(c.Layers))
	mlp := make([]int64, len(c.Layers))
	for i, l := range c.Layers {
		attn[i], ratio[i], mlp[i] = int64(l.Attn), int64(l.CompressRatio), int64(l.MLP)
	}
	m.Attrs = ir.Attrs{
		"config_hash": c.Hash, "vocab": int64(c.VocabSize), "hidden": int64(c.Hidden),
		"attn_kinds": attn, "compress_ratios": ratio, "mlp_kinds": mlp,
		"bos": int64(c.BOS), "eos": int64(c.EOS), "max_positions": int64(c.MaxPositions),
		"mtp_layers": int64(c.NumMTP),
	}
	for _, phase := range []string{PhasePrefill, PhaseDecode} {
		if err := lowerPhase(m, c, phase); err != nil {
			return nil, err
		}
	}
	return m, nil
}

type lowering struct {
	c   *ModelConfig
	b   *ir.Builder
	pos *ir.Value
	tok *ir.Value
}

func (l *lowering) w(name string, dt ir.DType, dims ...int) *ir.Value {
	args := make([]any, len(dims))
	for i, d := range dims {
		args[i] = d
	}
	v := l.b.M.Weight(name, ir.T(dt, args...))
	v.Storage = storageV4(l.c, name)
	return v
}

// storageV4 gives the checkpoint format of a V4 weight. Without a quantization config
// the checkpoint holds the runtime type. With FP8 (the released V4-Flash): the dense
// projections are FP8 in 128×128 blocks, routed experts FP4 when expert_dtype says so;
// the compressor and indexer projections, the output LoRA, the router and the
// embeddings stay BF16 (transformers keeps them out of FP8), norms BF16, and the mHC
// parameters, sinks, biases and position biases F32.
func storageV4(c *ModelConfig, name string) string {
	q := c.Quant
	if q == nil || q.Method != "fp8" {
		return ""
	}
	has := func(s string) bool { return strings.Contains(name, s) }
	switch {
	case strings.HasSuffix(name, "tid2eid"):
		return "i64"
	case has("hc_"), has("attn_sink"), has("gate.bias"), strings.HasSuffix(name, ".ape"):
		return "f32"
	case has("norm.weight"), has("compressor."), has("weights_proj"), has("wo_a"), has("gate.weight"),
		has("embed_tokens"), name == "head.weight":
		return "bf16"
	case has(".experts.") && q.ExpertDType == "fp4":
		return "fp4_g32_ue8m0"
	}
	if q.ScaleFmt == "ue8m0" {
		return "fp8_b128_ue8m0"
	}
	return "fp8_b128_f32"
}

func (l *lowering) f32(name string, dims ...int) *ir.Value { return l.w(name, ir.F32, dims...) }

func lowerPhase(m *ir.Module, c *ModelConfig, phase string) error {
	b := m.NewFunc(phase)
	l := &lowering{c: c, b: b}
	l.tok = b.Param("tokens", ir.T(ir.I32, ir.SymTokens))
	l.pos = b.Param("positions", ir.T(ir.I32, ir.SymTokens))
	rowsIn := b.Param("logit_rows", ir.T(ir.I32, ir.SymRows))
	sampleIn := b.Param("sample_params", ir.T(ir.F32, ir.SymRows, 4))
	maskIn := b.Param("sample_mask", ir.T(ir.I32, ir.SymRows, int(ir.MaskCols(int64(c.VocabSize)))))

	emb := l.f32("model.embed_tokens.weight", c.VocabSize, c.Hidden)
	x := b.Op1("embed", nil, l.tok, emb)
	streams := b.Op1("hc_init", ir.Attrs{"mult": int64(c.HCMult)}, x)
	for i := range c.Layers {
		streams = l.layer(i, streams)
	}
	n := c.HCMult
	h := b.Op1("hc_head", ir.Attrs{"norm_eps": c.RMSEps, "eps": c.HCEps}, streams,
		l.f32("model.hc_head.hc_fn", n, n*c.Hidden), l.f32("model.hc_head.hc_base", n), l.f32("model.hc_head.hc_scale", 1))
	h = b.Op1("rmsnorm", ir.Attrs{"eps": c.RMSEps}, h, l.f32("model.norm.weight", c.Hidden))
	head := "head.weight"
	if c.TieEmbeddings {
		head = "model.embed_tokens.weight"
	}
	logits := b.Op1("lm_head", nil, h, rowsIn, l.f32(head, c.VocabSize, c.Hidden))
	b.Return(logits, b.Op1("sample", nil, logits, sampleIn, maskIn))
	return nil
}

// ropeAttrs gives the rotary attributes of a V4 layer: those of ropeAttrsOf, plus YaRN's
// attention factor on compressed layers.
func (l *lowering) ropeAttrs(compressed bool, headDim int) ir.Attrs {
	a := ropeAttrsOf(l.c, compressed, headDim)
	if y := l.c.CompressYarn; compressed && y != nil {
		a["attn_factor"] = y.AttnFactor
	}
	return a
}

// ropeAttrsOf gives a layer's rotary attributes: sliding (window-only) layers rotate at
// rope_theta, compressed layers at compress_rope_theta with YaRN when configured.
func ropeAttrsOf(c *ModelConfig, compressed bool, headDim int) ir.Attrs {
	a := ir.Attrs{"head_dim": int64(headDim), "rope_dim": int64(c.RopeDim), "theta": c.RopeTheta}
	if compressed {
		a["theta"] = c.CompressTheta
		if y := c.CompressYarn; y != nil {
			a["yarn_factor"] = y.Factor
			a["yarn_original"] = int64(y.OriginalMax)
			a["yarn_beta_fast"] = y.BetaFast
			a["yarn_beta_slow"] = y.BetaSlow
		}
	}
	return a
}

func (l *lowering) hcMix(prefix string, streams *ir.Value) (pre, post, comb *ir.Value) {
	c, n := l.c, l.c.HCMult
	r := l.b.Op("hc_mix", ir.Attrs{"norm_eps": c.RMSEps, "eps": c.HCEps, "iters": int64(c.HCSinkhornIters)}, streams,
		l.f32(prefix+"_fn", (2+n)*n, n*c.Hidden), l.f32(prefix+"_base", (2+n)*n), l.f32(prefix+"_scale", 3))
	return r[0], r[1], r[2]
}

func (l *lowering) layer(i int, streams *ir.Value) *ir.Value {
	c, b := l.c, l.b
	p := fmt.Sprintf("model.layers.%d.", i)

	pre, post, comb := l.hcMix(p+"hc_attn", streams)
	h := b.Op1("hc_collapse", nil, streams, pre)
	h = b.Op1("rmsnorm", ir.Attrs{"eps": c.RMSEps}, h, l.f32(p+"attn_norm.weight", c.Hidden))
	a := l.attention(i, p+"attn.", h)
	streams = b.Op1("hc_expand", nil, streams, a, post, comb)

	pre, post, comb = l.hcMix(p+"hc_ffn", streams)
	h = b.Op1("hc_collapse", nil, streams, pre)
	h = b.Op1("rmsnorm", ir.Attrs{"eps": c.RMSEps}, h, l.f32(p+"ffn_norm.weight", c.Hidden))
	f := l.moe(i, p+"ffn.", h)
	return b.Op1("hc_expand", nil, streams, f, post, comb)
}

func (l *lowering) attention(i int, p string, h *ir.Value) *ir.Value {
	c, b := l.c, l.b
	spec := c.Layers[i]
	H, D := c.NumHeads, c.HeadDim
	compressed := spec.Attn != AttnSliding
	rope := l.ropeAttrs(compressed, D)
	eps := ir.Attrs{"eps": c.RMSEps}

	qr := b.Op1("linear", nil, h, l.f32(p+"wq_a.weight", c.QLoraRank, c.Hidden))
	qr = b.Op1("rmsnorm", eps, qr, l.f32(p+"q_norm.weight", c.QLoraRank))
	q := b.Op1("linear", nil, qr, l.f32(p+"wq_b.weight", H*D, c.QLoraRank))
	q = b.Op1("rmsnorm", ir.Attrs{"eps": c.RMSEps, "group": int64(D)}, q)
	q = b.Op1("rope", rope, q, l.pos)
	kv := b.Op1("linear", nil, h, l.f32(p+"wkv.weight", D, c.Hidden))
	kv = b.Op1("rmsnorm", eps, kv, l.f32(p+"norm.weight", D))
	kv = b.Op1("rope", rope, kv, l.pos)
	sink := l.f32(p+"attn_sink", H)
	attn := ir.Attrs{"layer": int64(i), "heads": int64(H), "head_dim": int64(D),
		"window": int64(c.SlidingWindow), "scale": 1 / math.Sqrt(float64(D))}

	var o *ir.Value
	switch spec.Attn {
	case AttnSliding:
		o = b.Op1("window_attention", attn, q, kv, l.pos, sink)
	default:
		overlap := spec.Attn == AttnCSA
		st := l.compressor(i, 0, p+"compressor.", h, D, spec.CompressRatio, overlap)
		args := []*ir.Value{q, kv, l.pos, sink, st}
		if spec.Attn == AttnCSA {
			args = append(args, l.indexer(i, p+"indexer.", h, qr))
		}
		attn["ratio"] = int64(spec.CompressRatio)
		o = b.Op1("sparse_attention", attn, args...)
	}
	inv := rope.Clone()
	inv["inverse"] = true
	o = b.Op1("rope", inv, o, l.pos)
	G := c.OGroups
	o = b.Op1("grouped_linear", ir.Attrs{"groups": int64(G)}, o, l.f32(p+"wo_a.weight", G*c.OLoraRank, H*D/G))
	return b.Op1("linear", nil, o, l.f32(p+"wo_b.weight", c.Hidden, G*c.OLoraRank))
}

// compressor lowers one KV compressor (MODEL.md §1, "Compressors"): cache 0 is the
// attention's, cache 1 the lightning indexer's.
func (l *lowering) compressor(layer, cache int, p string, h *ir.Value, dim, ratio int, overlap bool) *ir.Value {
	c := l.c
	w := dim
	if overlap {
		w = 2 * dim
	}
	a := l.ropeAttrs(true, dim)
	delete(a, "head_dim")
	extra := ir.Attrs{"layer": int64(layer), "cache": int64(cache), "ratio": int64(ratio),
		"head_dim": int64(dim), "overlap": overlap, "eps": c.RMSEps}
	for k, v := range extra {
		a[k] = v
	}
	return l.b.Op1("compress", a, h, l.pos,
		l.f32(p+"wkv.weight", w, c.Hidden), l.f32(p+"wgate.weight", w, c.Hidden),
		l.f32(p+"ape", ratio, w), l.f32(p+"norm.weight", dim))
}

// indexer lowers CSA's lightning indexer: its own overlapping compressor at
// index_head_dim, queries from the q-LoRA residual, and per-head weights from h.
func (l *lowering) indexer(layer int, p string, h, qr *ir.Value) *ir.Value {
	c, b := l.c, l.b
	Hi, Di := c.IndexHeads, c.IndexHeadDim
	st := l.compressor(layer, 1, p+"compressor.", h, Di, c.Layers[layer].CompressRatio, true)
	q := b.Op1("linear", nil, qr, l.f32(p+"wq_b.weight", Hi*Di, c.QLoraRank))
	q = b.Op1("rope", l.ropeAttrs(true, Di), q, l.pos)
	w := b.Op1("linear", nil, h, l.f32(p+"weights_proj.weight", Hi, c.Hidden))
	return b.Op1("index_topk", ir.Attrs{"layer": int64(layer), "ratio": int64(c.Layers[layer].CompressRatio),
		"topk": int64(c.IndexTopK), "heads": int64(Hi), "head_dim": int64(Di),
		"scale": 1 / math.Sqrt(float64(Di)) / math.Sqrt(float64(Hi))}, q, w, l.pos, st)
}

func (l *lowering) moe(i int, p string, h *ir.Value) *ir.Value {
	c, b := l.c, l.b
	E, I, D := c.NRouted, c.MoEInter, c.Hidden
	route := ir.Attrs{"scoring": c.ScoringFunc, "topk": int64(c.TopK), "scale": c.RoutedScale, "norm": c.NormTopK}
	gate := l.f32(p+"gate.weight", E, D)
	var r []*ir.Value
	if c.Layers[i].MLP == MLPHashMoE {
		route["mode"] = "hash"
		r = b.Op("moe_route", route, h, gate, l.tok, l.w(p+"gate.tid2eid", ir.I32, c.VocabSize, c.TopK))
	} else {
		route["mode"] = "topk"
		r = b.Op("moe_route", route, h, gate, l.f32(p+"gate.bias", E))
	}
	args := []*ir.Value{h, r[0], r[1]}
	for _, wn := range []string{"w1", "w2", "w3"} {
		for e := 0; e < E; e++ {
			name := fmt.Sprintf("%sexperts.%d.%s.weight", p, e, wn)
			if wn == "w2" {
				args = append(args, l.f32(name, D, I))
			} else {
				args = append(args, l.f32(name, I, D))
			}
		}
	}
	out := b.Op1("moe_experts", ir.Attrs{"experts": int64(E), "limit": c.SwigluLimit}, args...)
	if c.NShared > 0 {
		SI := I * c.NShared
		g := b.Op1("linear", nil, h, l.f32(p+"shared_experts.w1.weight", SI, D))
		u := b.Op1("linear", nil, h, l.f32(p+"shared_experts.w3.weight", SI, D))
		s := b.Op1("swiglu", ir.Attrs{"limit": c.SwigluLimit}, g, u)
		s = b.Op1("linear", nil, s, l.f32(p+"shared_experts.w2.weight", D, SI))
		out = b.Op1("add", nil, out, s)
	}
	return out
}
