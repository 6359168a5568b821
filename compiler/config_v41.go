package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"deepinfer/engram"
)

// V4.1's text_config (MODEL.md §2). compress_ratios names, per layer (the backbone's,
// then the DSpark stages'), the compressed cache the layer reads: 0 window only, 2 a
// 2:1 pooled cache, 1 one entry per token. Only kv_source_layer_ids own a compressor
// and a cache; a compressed layer reads the latest source at or below it. Only
// index_source_layer_ids run an indexer; the others reuse the top-k their latest index
// source published. The candidate source also publishes the top blocks of index keys,
// inside which every later index source chooses.

// Layer roles of a V4.1 backbone layer, as dic inspect prints them.
const (
	RoleWindow  = "window"  // compress ratio 0: sliding window only
	RoleFull    = "full"    // KV source: compressor, compressed cache, index keys, indexer
	RoleReuse   = "reuse"   // reads its source's cache with the last published top-k
	RoleReindex = "reindex" // runs its own indexer over its source's index keys
	RoleDSpark  = "dspark"  // a DSpark draft stage (mtp.*)
)

// V41Layer is one backbone layer's place in CED/CSA2.
type V41Layer struct {
	Ratio       int // compressed cache it reads (0: none)
	KVSource    int // layer owning that cache (-1 when Ratio is 0)
	IndexSource int // layer whose top-k it uses (itself for index sources; -1 when Ratio is 0)
	// CandidateSource publishes candidate blocks; UsesCandidates chooses inside them.
	CandidateSource, UsesCandidates bool
	Engram                          int  // index into EngramLayers, -1 without Engram
	DSparkTarget                    bool // DSpark reads the streams entering this layer
}

// OwnsKV reports whether layer i is a KV source.
func (l V41Layer) OwnsKV(i int) bool { return l.Ratio > 0 && l.KVSource == i }

// Indexer reports whether layer i runs an indexer.
func (l V41Layer) Indexer(i int) bool { return l.Ratio > 0 && l.IndexSource == i }

// Role names layer i's role.
func (l V41Layer) Role(i int) string {
	switch {
	case l.Ratio == 0:
		return RoleWindow
	case l.OwnsKV(i):
		return RoleFull
	case l.Indexer(i):
		return RoleReindex
	}
	return RoleReuse
}

// Vision is the vision tower's config. DeepInfer (Go) loads its shapes but does not
// serve image inputs yet.
type Vision struct {
	Layers, Hidden, Heads, Intermediate, PatchSize, DownsampleRatio, MaxImageTokens, MinPixels int
}

// V41Config is what deepseek_v41 adds to ModelConfig.
type V41Config struct {
	Layers       []V41Layer // backbone layers
	StageRatios  []int      // compress_ratios of the DSpark stages (all 0)
	KVSources    []int
	IndexSources []int
	// CandidateSource is -1 when candidate pre-filtering is off.
	CandidateSource, CandidateBlocks, CandidateBlockSize int

	EngramLayers        []int
	EngramNumEmbeddings []int64
	EngramMaxNgram      int
	EngramVocab         int64
	EngramHeads         int
	EngramHeadDim       int
	EngramPad           int
	EngramCompressed    int64
	Engram              *engram.Layout // nil without Engram layers

	DSparkBlock, DSparkNoise, DSparkMarkovRank int
	DSparkTargets                              []int
	DSparkExperts, DSparkTopK                  int // routed experts and top-k of the stages

	ImageTokenID int
	Vision       *Vision // nil without vision_config
}

// LastKVSource is the highest KV source layer (-1 without one): prefill may run the
// layers after it on each request's tail rows only (SWA bounded replay).
func (v *V41Config) LastKVSource() int {
	if len(v.KVSources) == 0 {
		return -1
	}
	return slices.Max(v.KVSources)
}

// parseV41 reads a deepseek_v41 config.json: the model's fields are under text_config,
// quantization_config at the top level, an optional vision_config beside it.
func parseV41(top map[string]json.RawMessage, file string) (*ModelConfig, error) {
	tr := &reader{file: file, raw: top}
	var text map[string]json.RawMessage
	if !getObject(tr, "text_config", &text) {
		if tr.err != nil {
			return nil, tr.err
		}
		return nil, &ConfigError{File: file, Field: "text_config", Msg: "missing: deepseek_v41 keeps its model fields in text_config"}
	}
	r := &reader{file: file, raw: text}
	c, err := readV41Text(r, file)
	if err != nil {
		if ce, ok := err.(*ConfigError); ok && ce.Field != "" {
			ce.Field = "text_config." + ce.Field
		}
		return nil, err
	}
	c.ModelType = "deepseek_v41"
	c.Quant = tr.quant()
	c.V41.ImageTokenID = tr.nonNegInt("image_token_id", 129264)
	if tr.err != nil {
		return nil, tr.err
	}
	if c.Quant != nil && c.Quant.ExpertDType == "" {
		c.Quant.ExpertDType = tr.str("expert_dtype", "")
	}
	var vis map[string]json.RawMessage
	if getObject(tr, "vision_config", &vis) {
		vr := &reader{file: file, raw: vis}
		c.V41.Vision = &Vision{
			Layers: vr.nonNegInt("num_hidden_layers", 0), Hidden: vr.posInt("hidden_size", 1024),
			Heads: vr.posInt("num_attention_heads", 16), Intermediate: vr.posInt("intermediate_size", 2816),
			PatchSize: vr.posInt("patch_size", 14), DownsampleRatio: vr.posInt("downsample_ratio", 3),
			MaxImageTokens: vr.posInt("max_image_tokens", 1024), MinPixels: vr.posInt("min_pixels", 544*544),
		}
		if vr.err != nil {
			if ce, ok := vr.err.(*ConfigError); ok && ce.Field != "" {
				ce.Field = "vision_config." + ce.Field
			}
			return nil, vr.err
		}
	}
	if tr.err != nil {
		return nil, tr.err
	}
	c.Hash = canonicalHash(top)
	return c, nil
}

func getObject(r *reader, field string, v *map[string]json.RawMessage) bool {
	m, ok := r.raw[field]
	if !ok || string(m) == "null" {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil || *v == nil {
		r.fail(field, "want a JSON object")
		return false
	}
	return true
}

func (r *reader) ints(field string, lo, hi int) []int {
	var ns []json.Number
	if !r.get(field, &ns) {
		return nil
	}
	out := make([]int, len(ns))
	for i, n := range ns {
		v, err := n.Int64()
		if err != nil || v < int64(lo) || v > int64(hi) {
			r.fail(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%s is not an integer in [%d, %d]", n, lo, hi))
			return nil
		}
		out[i] = int(v)
	}
	return out
}

func readV41Text(r *reader, file string) (*ModelConfig, error) {
	c := &ModelConfig{Path: file, V41: &V41Config{}}
	v := c.V41
	if err := readCommon(r, c, file, v41Defaults); err != nil {
		return nil, err
	}
	switch {
	case c.NumKVHeads != 1:
		return nil, r.fail("num_key_value_heads", fmt.Sprintf("%d: V4.1 attention is shared-KV MQA with exactly one KV head", c.NumKVHeads))
	case c.ScoringFunc != "sqrtsoftplus" && c.ScoringFunc != "sigmoid" && c.ScoringFunc != "softmax":
		return nil, r.fail("scoring_func", fmt.Sprintf("%q is not one of sqrtsoftplus, sigmoid, softmax", c.ScoringFunc))
	case c.TopK > c.NRouted:
		return nil, r.fail("num_experts_per_tok", fmt.Sprintf("%d is more than n_routed_experts (%d)", c.TopK, c.NRouted))
	case c.NumHeads%c.OGroups != 0:
		return nil, r.fail("o_groups", fmt.Sprintf("%d does not divide num_attention_heads (%d)", c.OGroups, c.NumHeads))
	case c.NShared != 1:
		return nil, r.fail("n_shared_experts", fmt.Sprintf("%d: the V4.1 reference has exactly one shared expert", c.NShared))
	case c.RMSEps < 0 || c.HCEps < 0:
		return nil, r.fail("rms_norm_eps", "epsilons must not be negative")
	case c.TieEmbeddings:
		return nil, r.fail("tie_word_embeddings", "V4.1 has a separate head")
	}
	c.RopeDim = r.ropeDim(c.HeadDim)
	c.CompressYarn = r.yarn()
	if r.err != nil {
		return nil, r.err
	}
	// the activation quantization and FP8/FP4 blocks work in groups of 32
	for name, x := range map[string]int{"hidden_size": c.Hidden, "head_dim": c.HeadDim, "q_lora_rank": c.QLoraRank,
		"moe_intermediate_size": c.MoEInter, "index_head_dim": c.IndexHeadDim, "o_lora_rank": c.OLoraRank} {
		if x%32 != 0 {
			return nil, r.fail(name, fmt.Sprintf("%d is not a multiple of 32 (the FP8/FP4 block)", x))
		}
	}
	if c.IndexHeadDim < c.RopeDim {
		return nil, r.fail("index_head_dim", fmt.Sprintf("%d is smaller than the rope dim %d", c.IndexHeadDim, c.RopeDim))
	}
	n := c.NumLayers
	ratios := r.ints("compress_ratios", 0, 1<<20)
	if r.err != nil {
		return nil, r.err
	}
	if len(ratios) != n+c.NumMTP {
		return nil, r.fail("compress_ratios", fmt.Sprintf("has %d entries; %d layers plus %d DSpark stages need %d", len(ratios), n, c.NumMTP, n+c.NumMTP))
	}
	for i, x := range ratios[n:] {
		if x != 0 {
			return nil, r.fail(fmt.Sprintf("compress_ratios[%d]", n+i), fmt.Sprintf("%d: DSpark stages attend over their window only (ratio 0)", x))
		}
	}
	v.StageRatios = ratios[n:]
	v.KVSources = r.ints("kv_source_layer_ids", 0, n-1)
	v.IndexSources = r.ints("index_source_layer_ids", 0, n-1)
	v.CandidateSource = r.intField("candidate_source_layer_id", -1, -1)
	v.CandidateBlocks = r.nonNegInt("candidate_topk_blocks", 0)
	v.CandidateBlockSize = r.nonNegInt("candidate_block_size", 0)
	if r.err != nil {
		return nil, r.err
	}
	if err := v.resolveLayers(r, ratios[:n]); err != nil {
		return nil, err
	}
	c.Layers = make([]LayerSpec, n)
	for i, l := range v.Layers {
		c.Layers[i] = LayerSpec{Attn: AttnSliding, CompressRatio: l.Ratio, MLP: MLPMoE}
		if l.Ratio > 0 {
			c.Layers[i].Attn = AttnCSA
		}
	}
	if err := v.readEngram(r, n, c.VocabSize); err != nil {
		return nil, err
	}
	if err := v.readDSpark(r, c); err != nil {
		return nil, err
	}
	return c, r.err
}

// resolveLayers assigns each layer its KV source, index source and candidate role, and
// checks that the sharing the config asks for is one the reference can run.
func (v *V41Config) resolveLayers(r *reader, ratios []int) error {
	n := len(ratios)
	isKV, isIdx := map[int]bool{}, map[int]bool{}
	for i, s := range v.KVSources {
		if isKV[s] {
			return r.fail(fmt.Sprintf("kv_source_layer_ids[%d]", i), fmt.Sprintf("layer %d listed twice", s))
		}
		if ratios[s] == 0 {
			return r.fail(fmt.Sprintf("kv_source_layer_ids[%d]", i), fmt.Sprintf("layer %d has compress ratio 0 and keeps no compressed cache", s))
		}
		isKV[s] = true
	}
	for i, s := range v.IndexSources {
		if isIdx[s] {
			return r.fail(fmt.Sprintf("index_source_layer_ids[%d]", i), fmt.Sprintf("layer %d listed twice", s))
		}
		if ratios[s] == 0 {
			return r.fail(fmt.Sprintf("index_source_layer_ids[%d]", i), fmt.Sprintf("layer %d has compress ratio 0: nothing to index", s))
		}
		isIdx[s] = true
	}
	v.Layers = make([]V41Layer, n)
	kv, idx := -1, -1
	for i, ratio := range ratios {
		if ratio > 1<<16 {
			return r.fail(fmt.Sprintf("compress_ratios[%d]", i), fmt.Sprintf("%d is beyond any V4.1 model", ratio))
		}
		if isKV[i] {
			kv = i
		}
		if isIdx[i] {
			idx = i
		}
		l := V41Layer{Ratio: ratio, KVSource: -1, IndexSource: -1, Engram: -1}
		if ratio > 0 {
			field := fmt.Sprintf("compress_ratios[%d]", i)
			switch {
			case kv < 0:
				return r.fail(field, fmt.Sprintf("layer %d reads a compressed cache but no KV source is at or below it", i))
			case ratios[kv] != ratio:
				return r.fail(field, fmt.Sprintf("layer %d has ratio %d but its KV source %d has ratio %d", i, ratio, kv, ratios[kv]))
			case idx < kv:
				return r.fail(field, fmt.Sprintf("layer %d reads KV source %d but the latest index source at or below it (%d) indexes an older cache", i, kv, idx))
			case idx != kv && !isIdx[kv]:
				return r.fail(field, fmt.Sprintf("layer %d's indexer needs the index keys of KV source %d, which is not an index source", i, kv))
			}
			l.KVSource, l.IndexSource = kv, idx
		}
		v.Layers[i] = l
	}
	c := v.CandidateSource
	if c < 0 {
		return nil
	}
	if c >= n || !isIdx[c] {
		return r.fail("candidate_source_layer_id", fmt.Sprintf("%d is not an index source", c))
	}
	if v.CandidateBlocks < 1 || v.CandidateBlockSize < 1 {
		return r.fail("candidate_topk_blocks", "candidate pre-filtering needs positive candidate_topk_blocks and candidate_block_size")
	}
	v.Layers[c].CandidateSource = true
	for _, s := range v.IndexSources {
		if s > c {
			if v.Layers[s].KVSource != v.Layers[c].KVSource {
				return r.fail("candidate_source_layer_id", fmt.Sprintf("index source %d reads KV source %d, not the candidate source's %d", s, v.Layers[s].KVSource, v.Layers[c].KVSource))
			}
			v.Layers[s].UsesCandidates = true
		}
	}
	return nil
}

func (v *V41Config) readEngram(r *reader, n, vocab int) error {
	v.EngramLayers = r.ints("engram_layer_ids", 0, n-1)
	if r.err != nil || len(v.EngramLayers) == 0 {
		return r.err
	}
	var nums []json.Number
	r.get("engram_num_embeddings", &nums)
	v.EngramMaxNgram = r.posInt("engram_max_ngram_size", 4)
	v.EngramVocab = int64(r.posInt("engram_vocab_size", 16000000))
	v.EngramHeads = r.posInt("engram_n_heads", 8)
	v.EngramHeadDim = r.posInt("engram_head_dim", 256)
	v.EngramPad = r.nonNegInt("engram_pad_token_id", 2)
	v.EngramCompressed = int64(r.posInt("engram_compressed_vocab_size", 99092))
	if r.err != nil {
		return r.err
	}
	if len(nums) != len(v.EngramLayers) {
		return r.fail("engram_num_embeddings", fmt.Sprintf("has %d entries for %d Engram layers", len(nums), len(v.EngramLayers)))
	}
	for i, x := range nums {
		e, err := x.Int64()
		if err != nil || e < 1 || e > 1<<31-1 {
			return r.fail(fmt.Sprintf("engram_num_embeddings[%d]", i), fmt.Sprintf("%s is not a row count in [1, 2^31)", x))
		}
		v.EngramNumEmbeddings = append(v.EngramNumEmbeddings, e)
	}
	if v.EngramHeadDim%32 != 0 {
		return r.fail("engram_head_dim", fmt.Sprintf("%d is not a multiple of 32 (the FP8 group)", v.EngramHeadDim))
	}
	if v.EngramPad >= vocab {
		return r.fail("engram_pad_token_id", fmt.Sprintf("%d is outside the vocabulary", v.EngramPad))
	}
	lay, err := engram.NewLayout(v.EngramLayers, v.EngramMaxNgram, v.EngramHeads, v.EngramVocab, v.EngramCompressed)
	if err != nil {
		return r.fail("engram_layer_ids", err.Error())
	}
	for i := range v.EngramLayers {
		if rows := lay.Rows(i); rows > v.EngramNumEmbeddings[i] {
			return r.fail(fmt.Sprintf("engram_num_embeddings[%d]", i), fmt.Sprintf("%d rows, but the hash buckets need %d", v.EngramNumEmbeddings[i], rows))
		}
		v.Layers[v.EngramLayers[i]].Engram = i
	}
	v.Engram = lay
	return nil
}

func (v *V41Config) readDSpark(r *reader, c *ModelConfig) error {
	v.DSparkBlock = r.nonNegInt("dspark_block_size", 0)
	if c.NumMTP == 0 || v.DSparkBlock == 0 {
		if c.NumMTP > 0 {
			return r.fail("dspark_block_size", "num_nextn_predict_layers > 0 needs a DSpark block size")
		}
		return r.err
	}
	v.DSparkNoise = r.nonNegInt("dspark_noise_token_id", 0)
	v.DSparkMarkovRank = r.posInt("dspark_markov_rank", 256)
	v.DSparkTargets = r.ints("dspark_target_layer_ids", 0, c.NumLayers-1)
	v.DSparkExperts = r.nonNegInt("dspark_n_routed_experts", 0)
	v.DSparkTopK = r.nonNegInt("dspark_num_experts_per_tok", 0)
	if r.err != nil {
		return r.err
	}
	if v.DSparkExperts == 0 { // the reference falls back to the backbone's counts
		v.DSparkExperts = c.NRouted
	}
	if v.DSparkTopK == 0 {
		v.DSparkTopK = c.TopK
	}
	switch {
	case len(v.DSparkTargets) == 0:
		return r.fail("dspark_target_layer_ids", "DSpark needs target layers")
	case v.DSparkNoise >= c.VocabSize:
		return r.fail("dspark_noise_token_id", fmt.Sprintf("%d is outside the vocabulary", v.DSparkNoise))
	case v.DSparkTopK > v.DSparkExperts:
		return r.fail("dspark_num_experts_per_tok", fmt.Sprintf("%d is more than the stages' %d experts", v.DSparkTopK, v.DSparkExperts))
	case v.DSparkBlock > 64:
		return r.fail("dspark_block_size", fmt.Sprintf("%d is beyond any DSpark drafter (limit 64)", v.DSparkBlock))
	}
	for _, t := range v.DSparkTargets {
		v.Layers[t].DSparkTarget = true
	}
	return nil
}
