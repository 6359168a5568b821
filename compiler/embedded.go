package compiler

import (
	"math"
	"strings"

	"deepinfer/plan"
)

// EmbeddedSeed seeds the embedded default model's weights.
const EmbeddedSeed = 20261130

// embeddedConfig is the built-in tiny DeepSeek-V4: every layer type (sliding, CSA, HCA)
// and both routers (hash and top-k), sized to run anywhere in milliseconds. Its vocab is
// the byte-level tokenizer's: ids 0-255 are bytes, 256 is BOS and 257 is EOS.
const embeddedConfig = `{
  "architectures": ["DeepseekV4ForCausalLM"],
  "model_type": "deepseek_v4",
  "vocab_size": 258, "bos_token_id": 256, "eos_token_id": 257,
  "hidden_size": 128, "num_hidden_layers": 4,
  "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "qk_rope_head_dim": 16,
  "q_lora_rank": 64, "o_lora_rank": 32, "o_groups": 2,
  "n_routed_experts": 8, "n_shared_experts": 1, "num_experts_per_tok": 2, "moe_intermediate_size": 64,
  "scoring_func": "sqrtsoftplus", "norm_topk_prob": true, "routed_scaling_factor": 1.5, "swiglu_limit": 10.0,
  "rms_norm_eps": 1e-6, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
  "sliding_window": 16, "index_n_heads": 2, "index_head_dim": 32, "index_topk": 8,
  "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "max_position_embeddings": 65536,
  "layer_types": ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention", "compressed_sparse_attention"],
  "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 16},
  "mlp_layer_types": ["hash_moe", "moe", "moe", "moe"],
  "num_nextn_predict_layers": 0, "tie_word_embeddings": false
}`

// EmbeddedConfig returns the embedded default model's config.
func EmbeddedConfig() *ModelConfig {
	c, err := ParseConfig([]byte(embeddedConfig), "embedded default config")
	if err != nil {
		panic("embedded config: " + err.Error())
	}
	c.Path = ""
	return c
}

// DefaultInit says how a synthetic weight is generated (the embedded default's seeded
// weights and `dic synth`'s checkpoints): norms start at one, biases and position biases
// at zero, mHC scales at one, matrices with std 1/√fan-in, hash tables as distinct
// random experts.
func DefaultInit(name string, shape []int64) plan.Init {
	switch {
	case strings.HasSuffix(name, "norm.weight"), strings.HasSuffix(name, "_scale"), strings.HasSuffix(name, "hc_scale"):
		return plan.Init{Kind: "const", Mean: 1}
	case strings.HasSuffix(name, "_base"), strings.HasSuffix(name, "hc_base"), strings.HasSuffix(name, ".ape"),
		strings.HasSuffix(name, "gate.bias"):
		return plan.Init{Kind: "const", Mean: 0}
	case strings.HasSuffix(name, "tid2eid"):
		return plan.Init{Kind: "expert_table"}
	case strings.HasSuffix(name, "attn_sink"):
		return plan.Init{Kind: "normal", Std: 0.5}
	case strings.HasSuffix(name, "embed_tokens.weight"):
		return plan.Init{Kind: "normal", Std: 1}
	}
	fanIn := shape[len(shape)-1]
	return plan.Init{Kind: "normal", Std: 1 / math.Sqrt(float64(fanIn))}
}
