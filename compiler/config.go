package compiler

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
)

// AttnKind is the attention type of one layer (MODEL.md §1).
type AttnKind int

const (
	// AttnSliding is window-only attention (compress ratio 0).
	AttnSliding AttnKind = iota
	// AttnCSA is compressed sparse attention: overlapping compressor plus lightning indexer.
	AttnCSA
	// AttnHCA is heavily compressed attention: non-overlapping compressor, no indexer.
	AttnHCA
)

func (k AttnKind) String() string {
	switch k {
	case AttnSliding:
		return "sliding_attention"
	case AttnCSA:
		return "compressed_sparse_attention"
	case AttnHCA:
		return "heavily_compressed_attention"
	}
	return fmt.Sprintf("AttnKind(%d)", int(k))
}

// MLPKind is the MoE type of one layer.
type MLPKind int

const (
	// MLPMoE routes with the learned gate's top-k.
	MLPMoE MLPKind = iota
	// MLPHashMoE routes with the frozen tid2eid table.
	MLPHashMoE
)

func (k MLPKind) String() string {
	if k == MLPHashMoE {
		return "hash_moe"
	}
	return "moe"
}

// LayerSpec is the structure of one decoder layer.
type LayerSpec struct {
	Attn          AttnKind
	CompressRatio int // 0 for sliding layers
	MLP           MLPKind
}

// Yarn holds YaRN rope-scaling parameters (applied to compressed layers only).
type Yarn struct {
	Factor        float64
	OriginalMax   int
	BetaFast      float64
	BetaSlow      float64
	AttnFactor    float64
	TruncateRange bool
}

// Quant describes the checkpoint's quantization_config.
type Quant struct {
	Method      string
	Fmt         string
	ScaleFmt    string
	Block       [2]int
	ExpertDType string
}

// ModelConfig is a validated deepseek_v4 config.json.
type ModelConfig struct {
	ModelType string
	Path      string // file it came from ("" for the embedded default)

	VocabSize       int
	Hidden          int
	NumLayers       int
	NumHeads        int
	NumKVHeads      int
	HeadDim         int
	RopeDim         int
	QLoraRank       int
	OLoraRank       int
	OGroups         int
	MoEInter        int
	NRouted         int
	NShared         int
	TopK            int
	ScoringFunc     string
	NormTopK        bool
	RoutedScale     float64
	SwigluLimit     float64
	RMSEps          float64
	HCEps           float64
	HCMult          int
	HCSinkhornIters int
	SlidingWindow   int
	IndexHeads      int
	IndexHeadDim    int
	IndexTopK       int
	RopeTheta       float64
	CompressTheta   float64
	CompressYarn    *Yarn
	MaxPositions    int
	TieEmbeddings   bool
	BOS, EOS        int
	NumMTP          int
	Layers          []LayerSpec
	Quant           *Quant
	// V41 holds what only deepseek_v41 has (CED/CSA2 roles, Engram, DSpark, vision);
	// nil for deepseek_v4.
	V41 *V41Config

	// Hash is the sha256 of the canonical (key-sorted) JSON the config was read from.
	Hash string
}

// ConfigError is a user error in config.json; it names the file and the field.
type ConfigError struct {
	File  string
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s: field %s: %s", e.File, e.Field, e.Msg)
}

// LoadConfig reads and validates a model directory's config.json.
func LoadConfig(dir string) (*ModelConfig, error) {
	path := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ParseConfig(data, path)
}

// maxConfigBytes bounds what ParseConfig accepts: real configs are a few KiB.
const maxConfigBytes = 4 << 20

// ParseConfig validates config.json bytes. file names the source in errors.
func ParseConfig(data []byte, file string) (*ModelConfig, error) {
	if len(data) > maxConfigBytes {
		return nil, &ConfigError{File: file, Msg: fmt.Sprintf("%d bytes is larger than the %d-byte limit for a config", len(data), maxConfigBytes)}
	}
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, &ConfigError{File: file, Msg: "not a JSON object: " + err.Error()}
	}
	if raw == nil {
		return nil, &ConfigError{File: file, Msg: "not a JSON object"}
	}
	r := &reader{file: file, raw: raw}
	mt := r.str("model_type", "")
	if r.err != nil {
		return nil, r.err
	}
	switch mt {
	case "deepseek_v4":
	case "":
		return nil, &ConfigError{File: file, Field: "model_type", Msg: "missing"}
	case "deepseek_v41":
		return parseV41(raw, file) // config_v41.go
	default:
		return nil, &ConfigError{File: file, Field: "model_type", Msg: fmt.Sprintf("%q is not a DeepSeek-V4 model (want \"deepseek_v4\" or \"deepseek_v41\")", mt)}
	}
	c := &ModelConfig{ModelType: mt, Path: file}
	if err := readCommon(r, c, file, v4Defaults); err != nil {
		return nil, err
	}
	if c.NumKVHeads != 1 {
		return nil, r.fail("num_key_value_heads", fmt.Sprintf("%d: DeepSeek-V4 attention is shared-KV MQA with exactly one KV head", c.NumKVHeads))
	}
	switch c.ScoringFunc {
	case "sqrtsoftplus", "sigmoid", "softmax":
	default:
		return nil, r.fail("scoring_func", fmt.Sprintf("%q is not one of sqrtsoftplus, sigmoid, softmax", c.ScoringFunc))
	}
	if c.TopK > c.NRouted {
		return nil, r.fail("num_experts_per_tok", fmt.Sprintf("%d is more than n_routed_experts (%d)", c.TopK, c.NRouted))
	}
	if c.NumHeads%c.OGroups != 0 {
		return nil, r.fail("o_groups", fmt.Sprintf("%d does not divide num_attention_heads (%d)", c.OGroups, c.NumHeads))
	}
	if c.RMSEps < 0 || c.HCEps < 0 {
		return nil, r.fail("rms_norm_eps", "epsilons must not be negative")
	}
	c.RopeDim = r.ropeDim(c.HeadDim)
	if r.err != nil {
		return nil, r.err
	}
	c.Layers = r.layers(c.NumLayers)
	if r.err != nil {
		return nil, r.err
	}
	c.CompressYarn = r.yarn()
	c.Quant = r.quant()
	if r.err != nil {
		return nil, r.err
	}
	if c.Quant != nil && c.Quant.ExpertDType == "" {
		c.Quant.ExpertDType = r.str("expert_dtype", "") // V4-Flash states it at the top level
	}
	if c.IndexHeadDim < c.RopeDim {
		return nil, r.fail("index_head_dim", fmt.Sprintf("%d is smaller than the rope dim %d", c.IndexHeadDim, c.RopeDim))
	}
	c.Hash = canonicalHash(raw)
	return c, nil
}

// canonicalHash hashes the config with sorted keys so formatting does not change it.
func canonicalHash(raw map[string]json.RawMessage) string {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		var buf bytes.Buffer
		if err := json.Compact(&buf, raw[k]); err != nil {
			buf.Write(raw[k])
		}
		fmt.Fprintf(h, "%q:%s;", k, buf.Bytes())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// reader extracts typed fields and keeps the first error.
type reader struct {
	file string
	raw  map[string]json.RawMessage
	err  error
}

func (r *reader) fail(field, msg string) error {
	if r.err == nil {
		r.err = &ConfigError{File: r.file, Field: field, Msg: msg}
	}
	return r.err
}

func (r *reader) get(field string, v any) bool {
	m, ok := r.raw[field]
	if !ok || string(m) == "null" {
		return false
	}
	if _, isNum := v.(*json.Number); isNum && !isJSONNumber(m) {
		r.fail(field, "wrong type: want a number, have "+string(m))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(m))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		r.fail(field, "wrong type: "+err.Error())
		return false
	}
	return true
}

func (r *reader) intField(field string, def int, min int) int {
	var n json.Number
	if !r.get(field, &n) {
		return def
	}
	v, err := n.Int64()
	if err != nil {
		// Accept integral floats such as 4.0.
		f, ferr := n.Float64()
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<40 {
			r.fail(field, fmt.Sprintf("%s is not an integer", n))
			return def
		}
		v = int64(f)
	}
	if v < int64(min) || v > 1<<40 {
		r.fail(field, fmt.Sprintf("%d is out of range (must be ≥ %d)", v, min))
		return def
	}
	return int(v)
}

func (r *reader) posInt(field string, def int) int    { return r.intField(field, def, 1) }
func (r *reader) nonNegInt(field string, def int) int { return r.intField(field, def, 0) }

func (r *reader) float(field string, def float64) float64 {
	var n json.Number
	if !r.get(field, &n) {
		return def
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		r.fail(field, fmt.Sprintf("%s is not a finite number", n))
		return def
	}
	return f
}

func (r *reader) str(field, def string) string {
	var s string
	if !r.get(field, &s) {
		return def
	}
	return s
}

func (r *reader) boolean(field string, def bool) bool {
	var b bool
	if !r.get(field, &b) {
		return def
	}
	return b
}

// ropeDim resolves the rotary dims: qk_rope_head_dim, else partial_rotary_factor·head_dim.
func (r *reader) ropeDim(headDim int) int {
	if _, ok := r.raw["qk_rope_head_dim"]; ok {
		d := r.posInt("qk_rope_head_dim", 64)
		if d > headDim || d%2 != 0 {
			r.fail("qk_rope_head_dim", fmt.Sprintf("%d must be even and at most head_dim (%d)", d, headDim))
		}
		return d
	}
	f := r.float("partial_rotary_factor", 64.0/512.0)
	d := int(float64(headDim) * f)
	if d <= 0 || d > headDim || d%2 != 0 {
		r.fail("partial_rotary_factor", fmt.Sprintf("%g gives %d rotary dims for head_dim %d; want an even count in (0, head_dim]", f, d, headDim))
	}
	return d
}

var attnKinds = map[string]AttnKind{
	"sliding_attention":            AttnSliding,
	"compressed_sparse_attention":  AttnCSA,
	"heavily_compressed_attention": AttnHCA,
}

// layers reads the per-layer schedule in either the transformers form
// (layer_types, mlp_layer_types, compress_rates) or the released-checkpoint form
// (compress_ratios, num_hash_layers). Entries past num_hidden_layers belong to MTP.
func (r *reader) layers(n int) []LayerSpec {
	out := make([]LayerSpec, n)
	rates := map[AttnKind]int{AttnCSA: 4, AttnHCA: 128}
	var cr map[string]json.Number
	if r.get("compress_rates", &cr) {
		for name, v := range cr {
			k, ok := attnKinds[name]
			if !ok || k == AttnSliding {
				r.fail("compress_rates."+name, "unknown compressed layer type")
				return nil
			}
			x, err := v.Int64()
			if err != nil || x < 1 || x > 1<<20 {
				r.fail("compress_rates."+name, fmt.Sprintf("%s is not a positive integer", v))
				return nil
			}
			rates[k] = int(x)
		}
	}
	var types []string
	var ratios []json.Number
	switch {
	case r.get("layer_types", &types):
		if len(types) < n {
			r.fail("layer_types", fmt.Sprintf("has %d entries for %d layers", len(types), n))
			return nil
		}
		for i := 0; i < n; i++ {
			k, ok := attnKinds[types[i]]
			if !ok {
				r.fail(fmt.Sprintf("layer_types[%d]", i), fmt.Sprintf("unknown layer type %q (want sliding_attention, compressed_sparse_attention or heavily_compressed_attention)", types[i]))
				return nil
			}
			out[i].Attn = k
			if k != AttnSliding {
				out[i].CompressRatio = rates[k]
			}
		}
	case r.get("compress_ratios", &ratios):
		if len(ratios) < n {
			r.fail("compress_ratios", fmt.Sprintf("has %d entries for %d layers", len(ratios), n))
			return nil
		}
		for i := 0; i < n; i++ {
			x, err := ratios[i].Int64()
			field := fmt.Sprintf("compress_ratios[%d]", i)
			if err != nil {
				r.fail(field, fmt.Sprintf("%s is not an integer", ratios[i]))
				return nil
			}
			switch {
			case x == 0:
				out[i].Attn = AttnSliding
			case x == 4:
				out[i].Attn, out[i].CompressRatio = AttnCSA, 4
			case x == 128:
				out[i].Attn, out[i].CompressRatio = AttnHCA, 128
			default:
				r.fail(field, fmt.Sprintf("unknown layer type: compress ratio %d (DeepSeek-V4 uses 0 sliding, 4 CSA, 128 HCA)", x))
				return nil
			}
		}
	default:
		r.fail("layer_types", "missing: need layer_types or compress_ratios")
		return nil
	}
	var mlp []string
	if r.get("mlp_layer_types", &mlp) {
		if len(mlp) < n {
			r.fail("mlp_layer_types", fmt.Sprintf("has %d entries for %d layers", len(mlp), n))
			return nil
		}
		for i := 0; i < n; i++ {
			switch mlp[i] {
			case "moe":
				out[i].MLP = MLPMoE
			case "hash_moe":
				out[i].MLP = MLPHashMoE
			default:
				r.fail(fmt.Sprintf("mlp_layer_types[%d]", i), fmt.Sprintf("unknown MLP layer type %q (want moe or hash_moe)", mlp[i]))
				return nil
			}
		}
	} else {
		h := r.nonNegInt("num_hash_layers", 3)
		if h > n {
			r.fail("num_hash_layers", fmt.Sprintf("%d is more than num_hidden_layers (%d)", h, n))
			return nil
		}
		for i := 0; i < h; i++ {
			out[i].MLP = MLPHashMoE
		}
	}
	return out
}

// yarn reads YaRN parameters for the compressed layers from rope_scaling (released form) or
// rope_parameters.compress (transformers form). Sliding layers never use YaRN.
func (r *reader) yarn() *Yarn {
	var params map[string]json.Number
	var nested map[string]json.RawMessage
	if r.get("rope_parameters", &nested) {
		if c, ok := nested["compress"]; ok {
			var m map[string]any
			if err := json.Unmarshal(c, &m); err != nil {
				r.fail("rope_parameters.compress", "not an object")
				return nil
			}
			if t, _ := m["rope_type"].(string); t != "yarn" {
				if t != "" && t != "default" {
					r.fail("rope_parameters.compress.rope_type", fmt.Sprintf("%q is not supported (default or yarn)", t))
				}
				return nil
			}
			params = map[string]json.Number{}
			for k, v := range m {
				if f, ok := v.(float64); ok {
					params[k] = json.Number(fmt.Sprint(f))
				}
			}
		}
	}
	if params == nil {
		var rs map[string]any
		if !r.get("rope_scaling", &rs) {
			return nil
		}
		t, _ := rs["type"].(string)
		if t2, _ := rs["rope_type"].(string); t2 != "" {
			t = t2
		}
		if t != "yarn" {
			if t != "" && t != "default" {
				r.fail("rope_scaling.type", fmt.Sprintf("%q is not supported (default or yarn)", t))
			}
			return nil
		}
		params = map[string]json.Number{}
		for k, v := range rs {
			if n, ok := v.(json.Number); ok {
				params[k] = n
			}
		}
	}
	num := func(k string, def float64) float64 {
		if v, ok := params[k]; ok {
			f, err := v.Float64()
			if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
				return f
			}
			r.fail("rope_scaling."+k, "not a finite number")
		}
		return def
	}
	y := &Yarn{
		Factor:        num("factor", 1),
		BetaFast:      num("beta_fast", 32),
		BetaSlow:      num("beta_slow", 1),
		AttnFactor:    num("attention_factor", 1),
		OriginalMax:   int(num("original_max_position_embeddings", 0)),
		TruncateRange: true,
	}
	if y.Factor <= 0 || y.OriginalMax <= 0 || y.BetaFast <= 0 || y.BetaSlow <= 0 {
		r.fail("rope_scaling", "yarn needs a positive factor, beta_fast, beta_slow and original_max_position_embeddings")
		return nil
	}
	return y
}

func (r *reader) quant() *Quant {
	var q map[string]any
	if !r.get("quantization_config", &q) {
		return nil
	}
	out := &Quant{}
	out.Method, _ = q["quant_method"].(string)
	out.Fmt, _ = q["fmt"].(string)
	out.ScaleFmt, _ = q["scale_fmt"].(string)
	out.ExpertDType, _ = q["expert_dtype"].(string)
	if bs, ok := q["weight_block_size"].([]any); ok {
		if len(bs) != 2 {
			r.fail("quantization_config.weight_block_size", "want two integers")
			return nil
		}
		for i, v := range bs {
			n, ok := v.(json.Number)
			x, err := n.Int64()
			if !ok || err != nil || x < 1 || x > 1<<16 {
				r.fail("quantization_config.weight_block_size", "want two positive integers")
				return nil
			}
			out.Block[i] = int(x)
		}
	}
	if out.Method != "" && out.Method != "fp8" {
		r.fail("quantization_config.quant_method", fmt.Sprintf("%q is not supported (fp8)", out.Method))
		return nil
	}
	return out
}

func isJSONNumber(m json.RawMessage) bool {
	m = bytes.TrimSpace(m)
	return len(m) > 0 && (m[0] == '-' || (m[0] >= '0' && m[0] <= '9'))
}

// commonDefaults are the defaults of the fields V4 and V4.1 configs share that differ
// between the two models.
type commonDefaults struct {
	hidden, layers, qLoraRank, moeInter, routed, indexHeads int
	rmsEps                                                  float64
}

var (
	v4Defaults  = commonDefaults{hidden: 4096, layers: 43, qLoraRank: 1024, moeInter: 2048, routed: 256, indexHeads: 64, rmsEps: 1e-6}
	v41Defaults = commonDefaults{hidden: 5120, layers: 40, qLoraRank: 1280, moeInter: 2304, routed: 384, indexHeads: 32, rmsEps: 1e-20}
)

// readCommon reads the fields V4 and V4.1 configs share and bounds them.
func readCommon(r *reader, c *ModelConfig, file string, d commonDefaults) error {
	c.VocabSize = r.posInt("vocab_size", 129280)
	c.Hidden = r.posInt("hidden_size", d.hidden)
	c.NumLayers = r.posInt("num_hidden_layers", d.layers)
	c.NumHeads = r.posInt("num_attention_heads", 64)
	c.NumKVHeads = r.posInt("num_key_value_heads", 1)
	c.HeadDim = r.posInt("head_dim", 512)
	c.QLoraRank = r.posInt("q_lora_rank", d.qLoraRank)
	c.OLoraRank = r.posInt("o_lora_rank", 1024)
	c.OGroups = r.posInt("o_groups", 8)
	c.MoEInter = r.posInt("moe_intermediate_size", d.moeInter)
	c.NRouted = r.posInt("n_routed_experts", d.routed)
	c.NShared = r.nonNegInt("n_shared_experts", 1)
	c.TopK = r.posInt("num_experts_per_tok", 6)
	c.ScoringFunc = r.str("scoring_func", "sqrtsoftplus")
	c.NormTopK = r.boolean("norm_topk_prob", true)
	c.RoutedScale = r.float("routed_scaling_factor", 1.5)
	c.SwigluLimit = r.float("swiglu_limit", 10)
	c.RMSEps = r.float("rms_norm_eps", d.rmsEps)
	c.HCEps = r.float("hc_eps", 1e-6)
	c.HCMult = r.posInt("hc_mult", 4)
	c.HCSinkhornIters = r.posInt("hc_sinkhorn_iters", 20)
	c.SlidingWindow = r.posInt("sliding_window", 128)
	c.IndexHeads = r.posInt("index_n_heads", d.indexHeads)
	c.IndexHeadDim = r.posInt("index_head_dim", 128)
	c.IndexTopK = r.posInt("index_topk", 512)
	c.RopeTheta = r.float("rope_theta", 10000)
	c.CompressTheta = r.float("compress_rope_theta", 160000)
	c.MaxPositions = r.posInt("max_position_embeddings", 1048576)
	c.TieEmbeddings = r.boolean("tie_word_embeddings", false)
	c.BOS = r.nonNegInt("bos_token_id", 0)
	c.EOS = r.nonNegInt("eos_token_id", 1)
	c.NumMTP = r.nonNegInt("num_nextn_predict_layers", 0)
	if r.err != nil {
		return r.err
	}
	if c.VocabSize > 1<<24 || c.Hidden > 1<<16 || c.NumLayers > 4096 || c.NRouted > 1<<16 || c.HeadDim > 1<<14 || c.NumMTP > 64 {
		return &ConfigError{File: file, Msg: "dimensions are beyond what any DeepSeek-V4 model uses (vocab ≤ 2^24, hidden ≤ 65536, layers ≤ 4096, experts ≤ 65536, head_dim ≤ 16384, MTP stages ≤ 64)"}
	}
	for name, v := range map[string]int{"num_attention_heads": c.NumHeads, "q_lora_rank": c.QLoraRank,
		"o_lora_rank": c.OLoraRank, "o_groups": c.OGroups, "moe_intermediate_size": c.MoEInter,
		"num_experts_per_tok": c.TopK, "n_shared_experts": c.NShared, "hc_mult": c.HCMult,
		"hc_sinkhorn_iters": c.HCSinkhornIters, "sliding_window": c.SlidingWindow, "index_n_heads": c.IndexHeads,
		"index_head_dim": c.IndexHeadDim, "index_topk": c.IndexTopK} {
		if v > 1<<20 {
			return r.fail(name, fmt.Sprintf("%d is beyond any DeepSeek-V4 model (limit 2^20)", v))
		}
	}
	return nil
}
