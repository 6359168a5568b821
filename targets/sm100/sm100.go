// Package sm100 describes NVIDIA Blackwell (B200, SM100) for planning.
//
// Nobody on this team has an SM100 GPU: the numbers below are the vendor's published
// peaks (MODEL.md §3), not measurements. Plans for this target are compiled, inspected
// and simulated here; on a machine with a CUDA device, divm runs them with the cuda
// runtime (targets/cuda: the same kernels, built for sm_100a on Blackwell; we have
// compiled them for sm_100a, never run them on one). The catalog names the library each op maps to in
// DeepSeek's stack (DeepGEMM, FlashMLA, DeepEP, TileKernels, DeepSelect); the names are
// this project's labels for those kernels.
package sm100

import (
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// Blackwell is the sm100 description, executed by the cuda runtime where a GPU is.
type Blackwell struct{ targets.Described }

// Mode implements targets.Target.
func (*Blackwell) Mode() targets.Mode { return targets.Device }

// Open implements targets.Executor: the plan on this machine's CUDA device.
func (*Blackwell) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	return cuda.Open(p, w, o)
}

// Target is the sm100 description.
var Target = &Blackwell{Described: targets.Described{
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
	Catalog:       targets.DeepSeekCatalog(map[string]string{"moe_experts": "deepgemm.m_grouped_fp4_gemm"}),
	DecodeCatalog: targets.DeepSeekDecodeCatalog(map[string]string{"moe_experts": "deepgemm.m_grouped_fp4_gemm_masked"}),
}}

func init() { targets.Register(Target) }
