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
