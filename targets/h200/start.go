package h200

import "deepinfer/targets/cost"

// Start holds the physical priors the fit starts from (and is pulled weakly toward):
// datasheet-level guesses, not measurements. Fitted (params.go) is the result.
var Start = cost.Params{
	Fit:               "priors (not fitted)",
	ComputeEff:        map[string]float64{"bf16": 0.75, "fp8": 0.65},
	StreamEff:         0.75,
	TileKnee:          64,
	GEMMFloorUS:       4,
	Smooth:            3,
	GroupedComputeEff: 0.9,
	GroupedStreamEff:  0.65,
	EltwiseEff:        0.7,
	CopyEff:           0.87,
	EltwiseFloorUS:    2.5,
	FlashMemEff:       3000.0 / 3350, // FlashMLA on H800: 3000 GB/s of 3.35 TB/s
	FlashComputeEff:   660 / 989.4,   // FlashMLA on H800: 660 TFLOPS of 989 bf16
	HostUS: map[string]float64{
		"gemm/bf16": 9, "gemm/fp8": 8, "mqa_decode_attention": 50,
		"rmsnorm_unfused": 27, "copy": 4.5, "default": 4.5,
	},
	HostLagUS:   1,
	HostOverlap: 4,
}
