package ascend950

import (
	"maps"

	"deepinfer/targets/cost"
	"deepinfer/targets/h200"
)

// CostModel is the ascend950 cost model: Ascend 950DT's published peaks (Target.HW)
// with the efficiencies fitted on the H200 carried over unchanged. Nothing here was
// measured on an Ascend: every prediction is a transfer, and the model's name says so.
//
// The transfer is rougher than sm100's: a different vendor's cores, compiler and
// libraries. Assumptions, each also listed in Rates.Assumptions:
//   - no BF16 rate is published in our sources: BF16 is taken as half the FP8 rate;
//   - the AI-core count is not published here, so there is no wave quantization
//     (ComputeUnits 0): compute scales continuously with the work;
//   - the CANN kernels reach the same fractions of peak as the H200's library kernels;
//   - communication uses the Hopper DeepEP efficiencies on the 2 TB/s scale-up links;
//     the SuperPoD's 8,192-chip domain keeps any EP size inside the scale-up fabric.
func CostModel() *cost.Model {
	hw := Target.HW
	rates := maps.Clone(hw.DenseTFLOPS)
	if _, ok := rates["bf16"]; !ok {
		rates["bf16"] = rates["fp8"] / 2
	}
	r := cost.Rates{
		Device:        hw.Device,
		TFLOPS:        rates,
		HBMTBps:       hw.HBMTBps,
		ComputeUnits:  0,
		ScaleUpTBps:   hw.ScaleUpTBps,
		ScaleUpDomain: hw.ScaleUpDomain,
		Assumptions: []string{
			"efficiencies transferred from the h200 fit, not measured on Ascend 950",
			"BF16 rate assumed half the published FP8 rate (not published in our sources)",
			"AI-core count unknown: no wave quantization",
			"FP4 GEMM efficiency = FP8's",
			"communication efficiencies: DeepEP on Hopper, transferred",
		},
	}
	p := h200.Transferred()
	return cost.NewModel("ascend950", h200.Version+" transferred from h200", r, p, cost.HopperDeepEP())
}

func init() { cost.Register("ascend950", CostModel) }
