package compiler

import (
	"fmt"
	"math"
	"strings"

	"deepinfer/ir"
	"deepinfer/passes"
	"deepinfer/plan"
)

// PhaseDraft is DSpark's draft step: after a decode step, every sequence's block of
// dspark_block_size rows (the sampled anchor, then noise tokens) runs the stages and
// the head. Its parameters are those of the other phases; T is the block rows of all
// sequences, positions are the block's (the anchor at the position after the last
// decoded token), logit_rows and sample_params are unused (drafts are greedy). It
// returns logits f32[T,V], draft ids i32[T] and confidences f32[T].
const PhaseDraft = plan.PhaseDraft

// EngramTokenMap names the derived i32[V] weight holding the Engram compressed id of
// every token id. It is not in the checkpoint: divm builds it from tokenizer.json.
const EngramTokenMap = "engram.token_map"

// Module attributes of a V4.1 module that passes read.
const (
	// AttrReplayFirstLayer is the first layer after the last KV source: prefill may run
	// it and the layers after it on each sequence's last rows only (passes/swa_replay.go).
	AttrReplayFirstLayer = passes.AttrReplayFirstLayer
	// AttrWindow is the sliding window (the smallest keep that leaves decode state whole).
	AttrWindow = passes.AttrWindow
)

// softmaxBlock is the key block of the reference's sparse attention kernel: an online
// softmax over blocks of 64 keys, probabilities rounded to bf16 per block.
const softmaxBlock = 64

// actBlock is the MXFP8 activation group (one power-of-two scale per 32 values).
const actBlock = 32

// lowerV41 builds the IR of a deepseek_v41 model, following DeepSeek's reference
// inference/model.py (HF revision dba1be0a): Transformer.forward for prefill and
// decode (plus the DSpark window writes of forward_spec), and forward_spec's draft
// block for the draft phase. Weight names are the checkpoint's (no "model." prefix).
func lowerV41(c *ModelConfig) (*ir.Module, error) {
	v := c.V41
	m := ir.NewModule(c.ModelType)
	ratios := make([]int64, len(v.Layers))
	for i, l := range v.Layers {
		ratios[i] = int64(l.Ratio)
	}
	m.Attrs = ir.Attrs{
		"config_hash": c.Hash, "vocab": int64(c.VocabSize), "hidden": int64(c.Hidden),
		"compress_ratios": ratios, "bos": int64(c.BOS), "eos": int64(c.EOS),
		"max_positions": int64(c.MaxPositions), "mtp_layers": int64(c.NumMTP),
		AttrWindow: int64(c.SlidingWindow),
	}
	if last := v.LastKVSource(); last >= 0 && last+1 < c.NumLayers {
		m.Attrs[AttrReplayFirstLayer] = int64(last + 1)
	}
	for _, phase := range []string{PhasePrefill, PhaseDecode} {
		l := &lowering41{c: c, v: v, b: m.NewFunc(phase)}
		l.mainModel()
	}
	if c.NumMTP > 0 && v.DSparkBlock > 0 {
		l := &lowering41{c: c, v: v, b: m.NewFunc(PhaseDraft)}
		l.draft()
	}
	return m, nil
}

type lowering41 struct {
	c        *ModelConfig
	v        *V41Config
	b        *ir.Builder
	tok, pos *ir.Value
	rows     *ir.Value
	sample   *ir.Value
	// per step, what sources hand down the stack
	kvState   map[int]*ir.Value // KV source layer → its compressor's state
	published *ir.Value         // the last index source's top-k
	cand      *ir.Value         // the candidate source's blocks
}

// storageV41 is the checkpoint format of a V4.1 weight (ir/storage.go): dense
// projections FP8 e4m3 in 32×32 blocks with UE8M0 scales, routed experts FP4 with a
// UE8M0 scale per 32, the Engram tables FP8 with a UE8M0 scale per 32 values of a row;
// norms, the output LoRA, the router, the indexer's weights_proj and wk, the compressor
// projections, embeddings, head, Markov head, confidence head and Engram q/k weights
// BF16 (the reference promotes some of them to fp32 at load: the compressor above
// ratio 1, the heads); mHC parameters, sinks and router biases F32.
func storageV41(c *ModelConfig, name string) string {
	has := func(s string) bool { return strings.Contains(name, s) }
	fp8 := "fp8_b32_ue8m0"
	if c.Quant == nil || c.Quant.Method != "fp8" {
		fp8 = "bf16"
	}
	switch {
	case name == EngramTokenMap:
		return ""
	case has("hc_attn_"), has("hc_ffn_"), has("attn_sink"), strings.HasSuffix(name, "gate.bias"), strings.HasSuffix(name, "gate.bias_vl"),
		// the reference keeps its output heads in float32 (the fixtures' checkpoints)
		name == "head.weight", has("markov_head.head."), has("confidence_head."):
		return "f32"
	case has(".engram.embed."):
		if fp8 == "bf16" {
			return fp8
		}
		return "fp8_g32_ue8m0"
	case has(".experts.") && !has("shared_experts"):
		if c.Quant != nil && c.Quant.ExpertDType == "fp4" {
			return "fp4_g32_ue8m0"
		}
		return fp8
	case strings.HasSuffix(name, "norm.weight"), has(".wo_a."), has("weights_proj"), has(".indexer.wk."),
		has(".compressor."), strings.HasSuffix(name, "gate.weight"), name == "embed.weight",
		has("markov_head."), has(".engram.q_weight"), has(".engram.k_weight"):
		return "bf16"
	}
	return fp8
}

func (l *lowering41) w(name string, dt ir.DType, dims ...int) *ir.Value {
	args := make([]any, len(dims))
	for i, d := range dims {
		args[i] = d
	}
	v := l.b.M.Weight(name, ir.T(dt, args...))
	v.Storage = storageV41(l.c, name)
	return v
}

func (l *lowering41) f32(name string, dims ...int) *ir.Value { return l.w(name, ir.F32, dims...) }

func (l *lowering41) op(op string, a ir.Attrs, args ...*ir.Value) *ir.Value {
	return l.b.Op1(op, a, args...)
}

// bf16 rounds x to bfloat16, where the reference holds a tensor in its default dtype.
func (l *lowering41) bf16(x *ir.Value) *ir.Value {
	return l.op("fake_quant", ir.Attrs{"format": "bf16"}, x)
}

// linear is the reference's linear(): MXFP8 activations for an FP8/FP4 weight, bf16
// inputs for a bf16 weight (F.linear in bf16), fp32 for an fp32 weight; a bf16 result
// unless the weight (and so the GEMM) is fp32.
func (l *lowering41) linear(x, w *ir.Value) *ir.Value {
	a := ir.Attrs{"act": "bf16", "out": "bf16"}
	switch w.Storage {
	case "fp8_b32_ue8m0", "fp4_g32_ue8m0":
		a = ir.Attrs{"act": "mxfp8", "out": "bf16", "block": int64(actBlock)}
	}
	return l.op("qlinear", a, x, w)
}

// linearF32 is F.linear with an fp32 weight held fp32 at run time.
func (l *lowering41) linearF32(x, w *ir.Value) *ir.Value {
	return l.op("qlinear", ir.Attrs{"act": "f32", "out": "f32"}, x, w)
}

// norm is the reference's RMSNorm: fp32 statistics, the bf16 weight, a bf16 result.
func (l *lowering41) norm(x *ir.Value, name string, dim int) *ir.Value {
	return l.bf16(l.op("rmsnorm", ir.Attrs{"eps": l.c.RMSEps, "numerics": "v41"}, x, l.f32(name, dim)))
}

// ropeAttrs: compressed layers rotate at compress_rope_theta with YaRN, window-only
// layers (and the DSpark stages) at rope_theta without.
// ropeAttrs are the rotary attributes of a V4.1 layer: V4's, computed in fp32 as the
// reference's precompute_freqs_cis and apply_rotary_emb do (rope_fp32).
func (l *lowering41) ropeAttrs(compressed bool, headDim int) ir.Attrs {
	a := ropeAttrsOf(l.c, compressed, headDim)
	a["rope_fp32"] = true
	return a
}

func (l *lowering41) rope(x *ir.Value, a ir.Attrs, inverse bool) *ir.Value {
	if inverse {
		a = a.Clone()
		a["inverse"] = true
	}
	return l.bf16(l.op("rope", a, x, l.pos))
}

func (l *lowering41) params() {
	b := l.b
	l.tok = b.Param("tokens", ir.T(ir.I32, ir.SymTokens))
	l.pos = b.Param("positions", ir.T(ir.I32, ir.SymTokens))
	l.rows = b.Param("logit_rows", ir.T(ir.I32, ir.SymRows))
	l.sample = b.Param("sample_params", ir.T(ir.F32, ir.SymRows, 4))
}

func (l *lowering41) hcMix(prefix string, streams *ir.Value) (pre, post, comb *ir.Value) {
	c, n := l.c, l.c.HCMult
	r := l.b.Op("hc_mix", ir.Attrs{"norm_eps": c.RMSEps, "eps": c.HCEps, "iters": int64(c.HCSinkhornIters), "numerics": "v41"}, streams,
		l.f32(prefix+"_fn", (2+n)*n, n*c.Hidden), l.f32(prefix+"_base", (2+n)*n), l.f32(prefix+"_scale", 3))
	return r[0], r[1], r[2]
}

// collapse is hc_pre: the streams weighted by a pre-mix, or stream 0 for the identity
// pre-mix the first sublayer of a pass starts from.
func (l *lowering41) collapse(streams, pre *ir.Value) *ir.Value {
	if pre == nil {
		return l.op("hc_select", ir.Attrs{"index": int64(0)}, streams)
	}
	return l.bf16(l.op("hc_collapse", nil, streams, pre))
}

func (l *lowering41) expand(streams, out, post, comb *ir.Value) *ir.Value {
	return l.bf16(l.op("hc_expand", ir.Attrs{"numerics": "v41"}, streams, out, post, comb))
}

// block is Block.forward: the attention collapses with the previous sublayer's pre-mix
// (premix; nil for the identity), the FFN with this attention's. It returns the new
// streams and the FFN's pre-mix for the next block.
func (l *lowering41) block(p string, streams, premix *ir.Value, attn func(h *ir.Value) *ir.Value, experts, topk int) (*ir.Value, *ir.Value) {
	c := l.c
	attnPre, attnPost, attnComb := l.hcMix(p+"hc_attn", streams)
	h := l.norm(l.collapse(streams, premix), p+"attn_norm.weight", c.Hidden)
	streams = l.expand(streams, attn(h), attnPost, attnComb)
	ffnPre, ffnPost, ffnComb := l.hcMix(p+"hc_ffn", streams)
	h = l.norm(l.collapse(streams, attnPre), p+"ffn_norm.weight", c.Hidden)
	streams = l.expand(streams, l.moe(p+"ffn.", h, experts, topk), ffnPost, ffnComb)
	return streams, ffnPre
}

// mainModel lowers Transformer.forward for prefill or decode: embed, Engram, the
// blocks, the last FFN's collapse, norm and head; then the DSpark stages' window writes
// of the main model's hidden state (forward_spec's prefill seeding, and the per-step
// write forward_spec does first in decode).
func (l *lowering41) mainModel() {
	c, v, b := l.c, l.v, l.b
	l.params()
	l.kvState = map[int]*ir.Value{}
	x := l.op("embed", nil, l.tok, l.f32("embed.weight", c.VocabSize, c.Hidden))
	streams := l.op("hc_init", ir.Attrs{"mult": int64(c.HCMult)}, x)
	var hashes *ir.Value
	if lay := v.Engram; lay != nil {
		var primes, mult []int64
		for i := range lay.Layers {
			primes = append(primes, lay.Primes[i]...)
			mult = append(mult, lay.Mult[i]...)
		}
		layers := make([]int64, len(lay.Layers))
		for i, id := range lay.Layers {
			layers[i] = int64(id)
		}
		hashes = l.op("engram_hash", ir.Attrs{"layer": layers[0], "layers": layers, "max_ngram": int64(lay.MaxNgram),
			"heads": int64(lay.Heads), "pad_token": int64(v.EngramPad), "primes": primes, "multipliers": mult,
			"compressed_vocab": v.EngramCompressed},
			l.tok, l.w(EngramTokenMap, ir.I32, c.VocabSize))
	}
	var caps []*ir.Value
	var premix *ir.Value
	for i := range v.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		if e := v.Layers[i].Engram; e >= 0 {
			streams = l.engram(p+"engram.", e, streams, hashes)
		}
		if v.Layers[i].DSparkTarget {
			caps = append(caps, l.op("hc_mean", nil, streams))
		}
		streams, premix = l.block(p, streams, premix, func(h *ir.Value) *ir.Value { return l.attention(i, p+"attn.", h) },
			c.NRouted, c.TopK)
	}
	h := l.norm(l.collapse(streams, premix), "norm.weight", c.Hidden)
	// h is l.norm's bf16 rounding: the head may take it as bf16 values
	logits := l.op("lm_head", ir.Attrs{"xbf16": true}, h, l.rows, l.f32("head.weight", c.VocabSize, c.Hidden))
	if c.NumMTP > 0 && v.DSparkBlock > 0 && len(caps) > 0 {
		l.dsparkWrite(caps)
	}
	b.Return(logits, l.op("sample", nil, logits, l.sample))
}

// engram adds layer e's n-gram memory to the streams (Engram.forward).
func (l *lowering41) engram(p string, e int, streams, hashes *ir.Value) *ir.Value {
	c, v := l.c, l.v
	cols := v.Engram.Cols()
	emb := l.op("engram_lookup", ir.Attrs{"index": int64(e), "cols": int64(cols)}, hashes,
		l.f32(p+"embed.weight", int(v.EngramNumEmbeddings[e]), v.EngramHeadDim))
	n := c.HCMult
	kv := l.linear(emb, l.f32(p+"wkv.weight", c.Hidden*(n+1), cols*v.EngramHeadDim))
	return l.op("engram_mix", ir.Attrs{"eps": c.RMSEps}, streams, kv, l.f32(p+"q_weight", n, c.Hidden), l.f32(p+"k_weight", n, c.Hidden))
}

// qLoRA is the shared query path: qr = q_norm(wq_a·h), q = RoPE(wq_b·qr).
func (l *lowering41) qLoRA(p string, h *ir.Value, rope ir.Attrs) (qr, q *ir.Value) {
	c := l.c
	qr = l.norm(l.linear(h, l.f32(p+"wq_a.weight", c.QLoraRank, c.Hidden)), p+"q_norm.weight", c.QLoraRank)
	q = l.linear(qr, l.f32(p+"wq_b.weight", c.NumHeads*c.HeadDim, c.QLoraRank))
	return qr, l.rope(q, rope, false)
}

// windowKV is K=V of this step's rows: kv_norm(wkv·h), RoPE'd, MXFP8 fake-quantized.
func (l *lowering41) windowKV(p string, h *ir.Value, rope ir.Attrs) *ir.Value {
	c := l.c
	kv := l.norm(l.linear(h, l.f32(p+"wkv.weight", c.HeadDim, c.Hidden)), p+"kv_norm.weight", c.HeadDim)
	kv = l.rope(kv, rope, false)
	return l.op("fake_quant", ir.Attrs{"format": "mxfp8", "group": int64(actBlock)}, kv)
}

// output is the inverse RoPE at the query position and the grouped output projection.
func (l *lowering41) output(p string, o *ir.Value, rope ir.Attrs) *ir.Value {
	c := l.c
	o = l.rope(o, rope, true)
	G := c.OGroups
	// (its input is rope's bf16 rounding: xbf16)
	o = l.bf16(l.op("grouped_linear", ir.Attrs{"groups": int64(G), "numerics": "v41", "xbf16": true}, o, l.f32(p+"wo_a.weight", G*c.OLoraRank, c.NumHeads*c.HeadDim/G)))
	return l.linear(o, l.f32(p+"wo_b.weight", c.Hidden, G*c.OLoraRank))
}

// attention is Attention.forward of backbone layer i in its CSA2 role.
func (l *lowering41) attention(i int, p string, h *ir.Value) *ir.Value {
	c, v := l.c, l.v
	spec := v.Layers[i]
	H, D := c.NumHeads, c.HeadDim
	rope := l.ropeAttrs(spec.Ratio > 0, D)
	qr, q := l.qLoRA(p, h, rope)
	kv := l.windowKV(p, h, rope)
	sink := l.f32(p+"attn_sink", H)
	a := ir.Attrs{"layer": int64(i), "heads": int64(H), "head_dim": int64(D), "window": int64(c.SlidingWindow),
		"scale": 1 / math.Sqrt(float64(D)), "block": int64(softmaxBlock), "ratio": int64(spec.Ratio), "source": int64(-1)}
	var o *ir.Value
	if spec.Ratio == 0 {
		o = l.op("csa_attention", a, q, kv, l.pos, sink)
	} else {
		if spec.OwnsKV(i) {
			l.kvState[i] = l.compressor(i, p, h)
		}
		st := l.kvState[spec.KVSource]
		if spec.Indexer(i) {
			l.published = l.indexer(i, p+"indexer.", h, qr, st)
		}
		a["source"] = int64(spec.KVSource)
		o = l.op("csa_attention", a, q, kv, l.pos, sink, st, l.published)
	}
	return l.output(p, o, rope)
}

// compressor lowers a KV source's Compressor (and, for an index source, the index-key
// half of its Indexer, which reads the compressor's latent before RoPE).
func (l *lowering41) compressor(i int, p string, h *ir.Value) *ir.Value {
	c, spec := l.c, l.v.Layers[i]
	D, Di := c.HeadDim, 0
	a := l.ropeAttrs(true, D)
	delete(a, "head_dim")
	a["layer"], a["ratio"], a["head_dim"], a["eps"] = int64(i), int64(spec.Ratio), int64(D), c.RMSEps
	cp := p + "compressor."
	args := []*ir.Value{h, l.pos, l.f32(cp+"wkv.weight", D, c.Hidden)}
	if spec.Ratio > 1 {
		args = append(args, l.f32(cp+"wgate.weight", D, c.Hidden))
	}
	args = append(args, l.f32(cp+"norm.weight", D))
	if spec.Indexer(i) {
		Di = c.IndexHeadDim
		ip := p + "indexer."
		args = append(args, l.f32(ip+"wk.weight", Di, D), l.f32(ip+"k_norm.weight", Di))
	}
	a["index_head_dim"] = int64(Di)
	return l.op("csa_compress", a, args...)
}

// indexer lowers Indexer.forward's query half: q from the q-LoRA residual (RoPE'd,
// FP4), per-head weights from h; the two-level selection inside csa_index*.
func (l *lowering41) indexer(i int, p string, h, qr, st *ir.Value) *ir.Value {
	c, v := l.c, l.v
	spec := v.Layers[i]
	Hi, Di := c.IndexHeads, c.IndexHeadDim
	q := l.linear(qr, l.f32(p+"wq_b.weight", Hi*Di, c.QLoraRank))
	q = l.rope(q, l.ropeAttrs(true, Di), false)
	q = l.op("fake_quant", ir.Attrs{"format": "fp4_ue8m0", "group": int64(actBlock)}, q)
	w := l.linear(h, l.f32(p+"weights_proj.weight", Hi, c.Hidden))
	a := ir.Attrs{"layer": int64(i), "source": int64(spec.KVSource), "ratio": int64(spec.Ratio), "topk": int64(c.IndexTopK),
		"heads": int64(Hi), "head_dim": int64(Di), "scale": 1 / math.Sqrt(float64(Di)) / math.Sqrt(float64(Hi))}
	switch {
	case spec.CandidateSource:
		a["cand_blocks"], a["cand_block_size"] = int64(v.CandidateBlocks), int64(v.CandidateBlockSize)
		r := l.b.Op("csa_index_candidates", a, q, w, l.pos, st)
		l.cand = r[1]
		return r[0]
	case spec.UsesCandidates && l.cand != nil:
		a["cand_blocks"], a["cand_block_size"] = int64(v.CandidateBlocks), int64(v.CandidateBlockSize)
		return l.op("csa_index", a, q, w, l.pos, st, l.cand)
	}
	return l.op("csa_index", a, q, w, l.pos, st)
}

// moe is MoE.forward: sqrtsoftplus routing with the correction bias, routed experts
// in the reference's numerics, plus the shared expert.
func (l *lowering41) moe(p string, h *ir.Value, experts, topk int) *ir.Value {
	c := l.c
	I, D := c.MoEInter, c.Hidden
	route := ir.Attrs{"mode": "topk", "scoring": c.ScoringFunc, "topk": int64(topk), "scale": c.RoutedScale,
		"norm": c.NormTopK && topk > 1, "numerics": "v41"}
	r := l.b.Op("moe_route", route, h, l.f32(p+"gate.weight", experts, D), l.f32(p+"gate.bias", experts))
	args := []*ir.Value{h, r[0], r[1]}
	for _, wn := range []string{"w1", "w2", "w3"} {
		for e := 0; e < experts; e++ {
			name := fmt.Sprintf("%sexperts.%d.%s.weight", p, e, wn)
			if wn == "w2" {
				args = append(args, l.f32(name, D, I))
			} else {
				args = append(args, l.f32(name, I, D))
			}
		}
	}
	routed := l.op("moe_experts", ir.Attrs{"experts": int64(experts), "limit": c.SwigluLimit, "numerics": "v41"}, args...)
	sp := p + "shared_experts."
	g := l.linear(h, l.f32(sp+"w1.weight", I, D))
	u := l.linear(h, l.f32(sp+"w3.weight", I, D))
	s := l.op("swiglu", ir.Attrs{"limit": c.SwigluLimit}, g, u)
	s = l.linear(s, l.f32(sp+"w2.weight", D, I))
	return l.bf16(l.op("add", nil, routed, s))
}

// stage is DSpark stage s's layer index in the KV layout (after the backbone).
func (l *lowering41) stage(s int) int { return l.c.NumLayers + s }

// dsparkWrite projects the main model's hidden state (the stream means entering the
// target layers) to main_x and writes each stage's K=V of it into the stage's window
// ring (DSparkAttention with main_x, as prefill seeds and every decode step writes).
func (l *lowering41) dsparkWrite(caps []*ir.Value) {
	c := l.c
	mh := caps[0]
	if len(caps) > 1 {
		mh = l.op("concat", nil, caps...)
	}
	mx := l.linear(mh, l.f32("mtp.0.main_proj.weight", c.Hidden, c.Hidden*len(caps)))
	mx = l.norm(mx, "mtp.0.main_norm.weight", c.Hidden)
	for s := 0; s < c.NumMTP; s++ {
		p := fmt.Sprintf("mtp.%d.attn.", s)
		kv := l.windowKV(p, mx, l.ropeAttrs(false, c.HeadDim))
		l.op("dspark_push", ir.Attrs{"layer": int64(l.stage(s))}, kv, l.pos)
	}
}

// draft lowers forward_spec's decode path over the draft block.
func (l *lowering41) draft() {
	c, v, b := l.c, l.v, l.b
	l.params()
	x := l.op("embed", nil, l.tok, l.f32("embed.weight", c.VocabSize, c.Hidden))
	streams := l.op("hc_init", ir.Attrs{"mult": int64(c.HCMult)}, x)
	var premix *ir.Value
	for s := 0; s < c.NumMTP; s++ {
		p := fmt.Sprintf("mtp.%d.", s)
		layer := l.stage(s)
		streams, premix = l.block(p, streams, premix, func(h *ir.Value) *ir.Value {
			return l.dsparkAttention(layer, p+"attn.", h)
		}, v.DSparkExperts, v.DSparkTopK)
	}
	last := fmt.Sprintf("mtp.%d.", c.NumMTP-1)
	xc := l.collapse(streams, premix)
	hn := l.norm(xc, last+"norm.weight", c.Hidden)
	r := v.DSparkMarkovRank
	// hn is l.norm's bf16 rounding, as the target head's input: the head may take it as
	// bf16 values
	out := b.Op("dspark_head", ir.Attrs{"block": int64(v.DSparkBlock), "xbf16": true}, hn, xc, l.tok,
		l.f32("head.weight", c.VocabSize, c.Hidden),
		l.f32(last+"markov_head.embed.weight", c.VocabSize, r), l.f32(last+"markov_head.head.weight", c.VocabSize, r),
		l.f32(last+"confidence_head.proj.weight", 1, c.Hidden+r))
	b.Return(out...)
}

// dsparkAttention is DSparkAttention.forward's decode path for the draft block.
func (l *lowering41) dsparkAttention(layer int, p string, h *ir.Value) *ir.Value {
	c := l.c
	rope := l.ropeAttrs(false, c.HeadDim)
	_, q := l.qLoRA(p, h, rope)
	kv := l.windowKV(p, h, rope)
	o := l.op("dspark_attention", ir.Attrs{"layer": int64(layer), "heads": int64(c.NumHeads), "head_dim": int64(c.HeadDim),
		"window": int64(c.SlidingWindow), "scale": 1 / math.Sqrt(float64(c.HeadDim)), "block": int64(softmaxBlock)},
		q, kv, l.pos, l.f32(p+"attn_sink", c.NumHeads))
	return l.output(p, o, rope)
}
