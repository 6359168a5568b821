package sm100

import (
	"deepinfer/targets/cost"
	"deepinfer/targets/h200"
)

// CostModel is the sm100 cost model: B200's published peaks (Target.HW) with the
// efficiencies fitted on the H200 carried over unchanged. Nothing here was measured on
// an SM100: every prediction is a transfer, and the model's name says so.
//
// What carries over, and why it is a reasonable first guess: fractions of peak (the
// GEMM compute and stream efficiencies, the memory-bound kernels' bandwidth fractions),
// the tile-intensity knee and the tilings (DeepGEMM and CUTLASS keep 128-row tiles on
// SM100), and the kernel and host floors (launch and dispatch cost little different
// from one generation to the next). FP4 GEMMs take the FP8 efficiency. The one SM100
// communication anchor, DeepEP V2 at EP8 over NVLink5 (~726 GB/s of 900 GB/s one
// direction), replaces the Hopper scale-up efficiency; the rest of the DeepEP
// parameters are Hopper's.
func CostModel() *cost.Model {
	hw := Target.HW
	r := cost.Rates{
		Device:        hw.Device,
		TFLOPS:        hw.DenseTFLOPS,
		HBMTBps:       hw.HBMTBps,
		ComputeUnits:  hw.ComputeUnits,
		ScaleUpTBps:   hw.ScaleUpTBps,
		ScaleUpDomain: hw.ScaleUpDomain,
		ScaleOutGBps:  100,
		Assumptions: []string{
			"efficiencies transferred from the h200 fit, not measured on SM100",
			"FP4 GEMM efficiency = FP8's",
			"scale-out: one 800 Gb/s RDMA NIC per GPU (~100 GB/s)",
		},
	}
	p := h200.Transferred()
	c := cost.HopperDeepEP()
	c.ScaleUpEff = 726.0 / 900 // DeepEP V2, SM100 EP8 NVLink (MODEL.md §3)
	c.Source += "; SM100 scale-up efficiency from DeepEP V2 EP8 ~726 GB/s"
	return cost.NewModel("sm100", h200.Version+" transferred from h200", r, p, c)
}

func init() { cost.Register("sm100", CostModel) }
