package cuda_test

import (
	"testing"

	"deepinfer/targets/cuda"
)

// TestNormBlocksSameValues: V4.1's fast RMSNorm sums each cascade lane's level-0 blocks
// in parallel (mhc_fast_norm41_blk, _fold) or a work item a lane
// (mhc_fast_norm41_part): the same sums, so a prefill and two decode steps give the same
// logits bit for bit with DEEPINFER_CUDA_NORM_BLOCKS=0, =1 and by default, on both V4.1
// fixtures (whose norms are of one block a lane: by default the part kernel; the rule
// is TestNorm41BlocksRule's); on the emulated device the launches show each ran only
// its own kernels.
func TestNormBlocksSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvNormBlocks, "0", "1", 40)
			sameLogits(t, a, b, cuda.EnvNormBlocks+"=0", cuda.EnvNormBlocks+"=1")
			t.Setenv(cuda.EnvNormBlocks, "")
			c, _ := prefillAndDecode(t, p, ws, 40)
			sameLogits(t, a, c, cuda.EnvNormBlocks+"=0", "by default")
			if ka == nil {
				return
			}
			if ka["mhc_fast_norm41_part"] == 0 || ka["mhc_fast_norm41_blk"] != 0 || kb["mhc_fast_norm41_part"] != 0 ||
				kb["mhc_fast_norm41_blk"] == 0 || kb["mhc_fast_norm41_fold"] != kb["mhc_fast_norm41_blk"] {
				t.Errorf("launches: part %d / %d, blk %d / %d, fold %d / %d (=0 / =1)", ka["mhc_fast_norm41_part"], kb["mhc_fast_norm41_part"],
					ka["mhc_fast_norm41_blk"], kb["mhc_fast_norm41_blk"], ka["mhc_fast_norm41_fold"], kb["mhc_fast_norm41_fold"])
			}
		})
	}
}
