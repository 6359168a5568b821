package ascend950

import "deepinfer/targets"

// Fusions are the chains the CANN operators run as one (labels are this project's):
// aclnnAddRmsNorm-style normalization after the mHC collapse, and RMSNorm with RoPE.
var Fusions = []targets.Fusion{
	{Ops: []string{"hc_collapse", "rmsnorm"}, Kernel: "custom.MhcPreRmsNorm", Doc: "collapse the streams and normalize in one pass"},
	{Ops: []string{"rmsnorm", "rope"}, Kernel: "custom.RmsNormRope", Doc: "per-head RMSNorm with RoPE on the rope slice"},
	{Ops: []string{"add", "hc_expand"}, Kernel: "custom.MhcPostAdd", Doc: "sum the routed and shared experts inside the mHC post-mix"},
}

func init() { Target.FusionRules = Fusions }
