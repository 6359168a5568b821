// Package h200 is the calibration target: the NVIDIA H200 (SM90) this team can borrow.
//
// It is the one target whose cost model is fitted to measurements: kernels timed with
// torch on an H200 (testdata/cost/h200_kernels_dev.csv) fix the efficiency parameters
// in params.go, and shapes measured on our H200 that the fit never saw
// (testdata/cost/h200_kernels_heldout*.csv) check it. The sm100 and ascend950 models
// borrow these efficiencies (docs/cost-model.md). Plans for h200 are compiled and
// simulated anywhere, and executed by the cuda runtime (targets/cuda) on a machine
// with a CUDA device.
//
// The catalog names the Hopper builds of DeepSeek's kernels. Hopper has no FP4 tensor
// cores, so FP4 experts run through the FP8 grouped GEMM (weights upcast on load).
package h200

import (
	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cost"
	"deepinfer/targets/cuda"
)

// Target is the h200 description.
var Target = &Hopper{Described: targets.Described{
	TargetName: "h200",
	HW: targets.Hardware{
		Device:         "NVIDIA H200 SXM (SM90)",
		DenseTFLOPS:    map[string]float64{"bf16": 989.4, "fp8": 1978.9},
		HBMGiB:         141 * 1e9 / (1 << 30),
		HBMTBps:        4.8,
		ScaleUpTBps:    0.9,
		ScaleUpDomain:  8,
		ComputeUnits:   132,
		Source:         "vendor-published peaks (MODEL.md §3); efficiencies fitted to H200 measurements (testdata/cost)",
		MeasuredOnHand: true,
	},
	Catalog:       targets.DeepSeekCatalog(nil),
	DecodeCatalog: targets.DeepSeekDecodeCatalog(nil),
}}

// Hopper is a Described target whose catalog falls back to a generic label,
// "sm90.<op>", for IR ops that have no Hopper library kernel named yet (new V4.1 ops
// arrive faster than their kernels): this target exists to be measured and simulated,
// and its cost model prices ops by shape, not by kernel name.
type Hopper struct{ targets.Described }

// Mode implements targets.Target.
func (*Hopper) Mode() targets.Mode { return targets.Device }

// Open implements targets.Executor: the plan on this machine's CUDA device.
func (*Hopper) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	return cuda.Open(p, w, o)
}

// Kernel implements targets.Target.
func (h *Hopper) Kernel(op, phase string) (string, bool) {
	if k, ok := h.Described.Kernel(op, phase); ok {
		return k, true
	}
	if ir.Lookup(op) != nil {
		return "sm90." + op, true
	}
	return "", false
}

// Version names the cost model's equations (bump it when they change) for h200 and the
// targets that borrow its efficiencies.
const Version = "roofline-v1"

// Rates are the published numbers the h200 cost model scales down.
func Rates() cost.Rates {
	hw := Target.HW
	return cost.Rates{
		Device:        hw.Device,
		TFLOPS:        hw.DenseTFLOPS,
		HBMTBps:       hw.HBMTBps,
		ComputeUnits:  hw.ComputeUnits,
		ScaleUpTBps:   hw.ScaleUpTBps,
		ScaleUpDomain: hw.ScaleUpDomain,
		ScaleOutGBps:  50,
		Assumptions: []string{
			"scale-out: one 400 Gb/s RDMA NIC per GPU (~50 GB/s), as in DeepEP's H800 tests",
			"communication efficiencies from DeepEP's H800 numbers (same Hopper kernels), not measured on H200",
		},
	}
}

// Model returns the calibrated h200 cost model; it predicts eager times (the dev
// table's method) until WithLaunch(cost.Device) asks for device time.
func Model() *cost.Model {
	return cost.NewModel("h200", Version, Rates(), Fitted, cost.HopperDeepEP())
}

func init() {
	targets.Register(Target)
	cost.Register("h200", Model)
}

// Transferred returns the fitted efficiencies for another device to borrow: a copy of
// Fitted, labelled as not measured there, with FP4 GEMMs at FP8's efficiency when the
// fit has no FP4 of its own.
func Transferred() cost.Params {
	p := Fitted.Clone()
	p.Fit = "efficiencies from the h200 fit; not measured on this device"
	if _, ok := p.ComputeEff["fp4"]; !ok {
		p.ComputeEff["fp4"] = p.ComputeEff["fp8"]
	}
	return p
}
