// Package sm100 describes NVIDIA Blackwell (B200, SM100) for planning.
//
// Nobody on this team has an SM100 GPU: the numbers below are the vendor's published
// peaks (MODEL.md §3), not measurements, and plans for this target are compiled and
// inspected, never executed here. The catalog names the library each op maps to in
// DeepSeek's stack (DeepGEMM, FlashMLA, DeepEP, TileKernels, DeepSelect); the names are
// this project's labels for those kernels.
package sm100

import "deepinfer/targets"

// Target is the sm100 description.
var Target = &targets.Described{
	TargetName: "sm100",
	HW: targets.Hardware{
		Device:          "NVIDIA B200 (SM100)",
		DenseTFLOPS:     map[string]float64{"bf16": 2250, "fp8": 4500, "fp4": 9000},
		HBMGiB:          192 * 1e9 / (1 << 30),
		HBMTBps:         8,
		ScaleUpTBps:     1.8,
		ScaleUpDomain:   72,
		ComputeUnits:    148,
		Source:          "vendor-published peaks (MODEL.md §3); not measured",
		ActivationBytes: 2,
	},
	Catalog: map[string]string{
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
		"moe_experts":      "deepgemm.m_grouped_fp4_gemm",
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
	},
	DecodeCatalog: map[string]string{
		"window_attention": "flashmla.sparse_decode",
		"sparse_attention": "flashmla.sparse_decode",
		"csa_attention":    "flashmla.sparse_decode",
		"moe_experts":      "deepgemm.m_grouped_fp4_gemm_masked",
		"moe_dispatch":     "deepep.low_latency_dispatch",
		"moe_combine":      "deepep.low_latency_combine",
	},
}

func init() { targets.Register(Target) }
