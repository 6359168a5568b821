package targets

// Fusion is a rule a target contributes to the fusion pass: a chain of ops, each the
// only consumer of the previous one's result, that the target runs as one kernel.
type Fusion struct {
	Ops    []string // producer first
	Kernel string
	Doc    string
}

// Fuser is a target with fusion rules.
type Fuser interface {
	Fusions() []Fusion
}

// Fusions implements Fuser for described targets.
func (d *Described) Fusions() []Fusion { return d.FusionRules }

// DeepSeekFusions are the chains DeepSeek's own kernels (TileKernels, FlashMLA, DeepGEMM)
// run as one kernel on SM90 and SM100 — labels are this project's: the mHC pre-mix
// collapse with the RMSNorm after it, the per-head RMSNorm with the RoPE after it (q and
// K=V), and the routed+shared sum with the mHC post-mix.
var DeepSeekFusions = []Fusion{
	{Ops: []string{"hc_collapse", "rmsnorm"}, Kernel: "tilekernels.mhc_pre_norm", Doc: "collapse the streams and normalize in one pass"},
	{Ops: []string{"rmsnorm", "rope"}, Kernel: "tilekernels.norm_rope", Doc: "per-head RMSNorm with RoPE on the rope slice"},
	{Ops: []string{"add", "hc_expand"}, Kernel: "tilekernels.mhc_post_add", Doc: "sum the routed and shared experts inside the mHC post-mix"},
}

// DeepSeekCatalog returns the kernel catalog of DeepSeek's libraries on NVIDIA GPUs
// (TileKernels, DeepGEMM, FlashMLA, DeepSelect, DeepEP, NCCL) for prefill, with the
// given entries replaced or added: a fresh map per call.
func DeepSeekCatalog(with map[string]string) map[string]string {
	c := map[string]string{
		"embed":            "tilekernels.embedding",
		"hc_init":          "tilekernels.mhc_init",
		"hc_mix":           "tilekernels.mhc_mix_sinkhorn",
		"hc_collapse":      "tilekernels.mhc_pre",
		"hc_expand":        "tilekernels.mhc_post",
		"hc_head":          "tilekernels.mhc_head",
		"rmsnorm":          "tilekernels.rmsnorm",
		"linear":           "deepgemm.fp8_gemm_nt",
		"grouped_linear":   "deepgemm.fp8_gemm_nt_grouped",
		"rope":             "tilekernels.rope",
		"compress":         "tilekernels.kv_compress",
		"index_topk":       "deepselect.indexer_topk",
		"window_attention": "flashmla.sparse_prefill",
		"sparse_attention": "flashmla.sparse_prefill",
		"moe_route":        "tilekernels.moe_gate_topk",
		"moe_experts":      "deepgemm.m_grouped_fp8_gemm_nt_contiguous",
		"swiglu":           "tilekernels.swiglu",
		"add":              "tilekernels.add",
		"lm_head":          "deepgemm.bf16_gemm_nt",
		"moe_dispatch":     "deepep.dispatch",
		"moe_combine":      "deepep.combine",
		"sample":           "tilekernels.sampling",
		"cp_gather":        "nccl.all_gather",
		// DeepSeek-V4.1: quantization and GEMMs in the checkpoint's formats, CSA2, Engram, DSpark
		"fake_quant":           "tilekernels.act_quant",
		"qlinear":              "deepgemm.fp8_gemm_nt",
		"hc_select":            "tilekernels.mhc_pre",
		"hc_mean":              "tilekernels.mhc_mean",
		"concat":               "tilekernels.concat",
		"tail_rows":            "tilekernels.gather_rows",
		"tail_index":           "tilekernels.gather_rows",
		"engram_hash":          "tilekernels.engram_hash",
		"engram_lookup":        "tilekernels.engram_gather",
		"engram_mix":           "tilekernels.engram_gate",
		"csa_compress":         "tilekernels.kv_compress",
		"csa_index":            "deepselect.indexer_topk",
		"csa_index_candidates": "deepselect.indexer_topk_blocks",
		"csa_attention":        "flashmla.sparse_prefill",
		"dspark_push":          "tilekernels.kv_store",
		"dspark_attention":     "flashmla.sparse_decode",
		"dspark_head":          "tilekernels.dspark_head",
	}
	for k, v := range with {
		c[k] = v
	}
	return c
}

// DeepSeekDecodeCatalog returns the decode-phase replacements of DeepSeekCatalog
// (FlashMLA's decode kernels, DeepEP's low-latency mode), with the given entries
// replaced or added.
func DeepSeekDecodeCatalog(with map[string]string) map[string]string {
	c := map[string]string{
		"window_attention": "flashmla.sparse_decode",
		"sparse_attention": "flashmla.sparse_decode",
		"csa_attention":    "flashmla.sparse_decode",
		"moe_experts":      "deepgemm.m_grouped_fp8_gemm_nt_masked",
		"moe_dispatch":     "deepep.low_latency_dispatch",
		"moe_combine":      "deepep.low_latency_combine",
	}
	for k, v := range with {
		c[k] = v
	}
	return c
}
