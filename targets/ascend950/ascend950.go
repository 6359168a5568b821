// Package ascend950 describes Huawei Ascend 950DT for planning.
//
// No Ascend 950 exists on this machine: the numbers are published peaks (MODEL.md §3),
// not measurements, and plans for this target are compiled and inspected, never
// executed here. The catalog names the CANN operator each op maps to (this project's
// labels for them).
package ascend950

import "deepinfer/targets"

// Target is the ascend950 description.
var Target = &targets.Described{
	TargetName: "ascend950",
	HW: targets.Hardware{
		Device:          "Huawei Ascend 950DT",
		DenseTFLOPS:     map[string]float64{"fp8": 1000, "fp4": 2000},
		HBMGiB:          144 * 1e9 / (1 << 30),
		HBMTBps:         4,
		ScaleUpTBps:     2,
		ScaleUpDomain:   8192,
		Source:          "vendor-published peaks (MODEL.md §3); not measured",
		ActivationBytes: 2,
	},
	Catalog: map[string]string{
		"embed":            "aclnn.Embedding",
		"hc_init":          "aclnn.Repeat",
		"hc_mix":           "custom.MhcMixSinkhorn",
		"hc_collapse":      "custom.MhcPre",
		"hc_expand":        "custom.MhcPost",
		"hc_head":          "custom.MhcHead",
		"rmsnorm":          "aclnn.RmsNorm",
		"linear":           "aclnn.QuantMatmul",
		"grouped_linear":   "aclnn.GroupedMatmul",
		"rope":             "aclnn.RotaryPositionEmbedding",
		"compress":         "custom.KvCompress",
		"index_topk":       "custom.LightningIndexerTopK",
		"window_attention": "aclnn.FusedInferAttentionScore",
		"sparse_attention": "custom.SparseFlashAttention",
		"moe_route":        "aclnn.MoeGatingTopK",
		"moe_experts":      "aclnn.GroupedMatmulSwigluQuant",
		"swiglu":           "aclnn.Swiglu",
		"add":              "aclnn.Add",
		"lm_head":          "aclnn.Matmul",
		"moe_dispatch":     "aclnn.MoeDistributeDispatch",
		"moe_combine":      "aclnn.MoeDistributeCombine",
		"sample":           "aclnn.TopKTopPSample",
		"cp_gather":        "hccl.AllGather",
		// DeepSeek-V4.1 (ir/ops_v41.go)
		"fake_quant":           "aclnn.DynamicMxQuant",
		"qlinear":              "aclnn.QuantMatmul",
		"hc_select":            "aclnn.Slice",
		"hc_mean":              "aclnn.Mean",
		"concat":               "aclnn.Cat",
		"engram_hash":          "custom.EngramHash",
		"engram_lookup":        "custom.EngramGather",
		"engram_mix":           "custom.EngramGate",
		"csa_compress":         "custom.KvCompress",
		"csa_index":            "custom.LightningIndexerTopK",
		"csa_index_candidates": "custom.LightningIndexerTopKBlocks",
		"csa_attention":        "custom.SparseFlashAttention",
		"dspark_push":          "aclnn.ScatterUpdate",
		"dspark_attention":     "custom.SparseFlashAttention",
		"dspark_head":          "custom.DSparkHead",
		"tail_rows":            "aclnn.Gather",
		"tail_index":           "aclnn.Gather",
	},
}

func init() { targets.Register(Target) }
