package cuda_test

import (
	"testing"

	"deepinfer/targets/cuda"
)

// TestFusedAttentionSameValues: V4.1's tensor-core attention as one launch block per
// (row, 32 heads) (csa_tc_fused) gives the three launches' logits bit for bit
// (csa_tc_logits, csa_attn_softmax, csa_tc_out: the same operations on the same
// operands), through an 80-token prefill and two decode steps of both V4.1 fixtures in
// the fast mode: with DEEPINFER_CUDA_ATT_FUSED=0 (never fused), unset (the default:
// fused from 128 launch blocks, moved to 64 here, so the prefill's 80 rows and not
// the one-row decode steps) and 1 (fused at every step; and with
// DEEPINFER_CUDA_ATT_FUSED_FORM=2 and 3 the second form, csa_tc_fused2, and it in 16
// warps, csa_tc_fused3), each launch where the setting puts it. On the
// emulated device csa_tc_fused runs the split kernels' emulated code, so there this
// checks the binder (arguments, scratch, the launch's shared memory and grid, the
// choice by step size); the device branch is checked on host fibers
// (TestFusedAttentionOnHostFibers) and, on a GPU, by this test.
func TestFusedAttentionSameValues(t *testing.T) {
	const n = 80
	defer cuda.SetFusedMinBlocks(64)()
	split := []string{"csa_tc_logits", "csa_tc_logits_n", "csa_attn_softmax", "csa_tc_out", "csa_tc_out_n", "csa_tc_out_na"}
	count := func(k map[string]int) (s int) {
		for _, name := range split {
			s += k[name]
		}
		return s
	}
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvAttFused, "0", "1", n)
			sameLogits(t, a, b, "on the split kernels", "on csa_tc_fused")
			t.Setenv(cuda.EnvAttFused, "")
			c, kc := prefillAndDecode(t, p, ws, n)
			sameLogits(t, a, c, "on the split kernels", "by the default rule")
			// the second form (csa_tc_fused2) and it in 16 warps (csa_tc_fused3) at every step
			t.Setenv(cuda.EnvAttFused, "1")
			kd := map[string]map[string]int{}
			for _, form := range []string{"2", "3"} {
				t.Setenv(cuda.EnvAttFusedForm, form)
				d, k := prefillAndDecode(t, p, ws, n)
				sameLogits(t, a, d, "on the split kernels", "on csa_tc_fused"+form)
				kd[form] = k
			}
			t.Setenv(cuda.EnvAttFusedForm, "")
			if ka == nil {
				return // (a GPU: no launch counts)
			}
			for form, k := range kd {
				if name := "csa_tc_fused" + form; k[name] != kb["csa_tc_fused"] || k["csa_tc_fused"] != 0 {
					t.Errorf("form %s: %s ran %d times, csa_tc_fused %d; want %d and 0", form, name, k[name], k["csa_tc_fused"], kb["csa_tc_fused"])
				}
			}
			if ka["csa_tc_fused"] != 0 || count(ka) == 0 {
				t.Errorf("=0: csa_tc_fused ran %d times, the split kernels %d; want 0 and some", ka["csa_tc_fused"], count(ka))
			}
			if kb["csa_tc_fused"] == 0 || count(kb) != 0 {
				t.Errorf("=1: csa_tc_fused ran %d times, the split kernels %d; want some and 0", kb["csa_tc_fused"], count(kb))
			}
			// the default: the prefill (80 rows, one group of heads) fused, the decode steps
			// (one row) not: a third of the fused launches and two thirds of the split ones
			if 3*kc["csa_tc_fused"] != kb["csa_tc_fused"] || 3*count(kc) != 2*count(ka) {
				t.Errorf("default: csa_tc_fused ran %d times (=1: %d), the split kernels %d (=0: %d); want the prefill's alone fused",
					kc["csa_tc_fused"], kb["csa_tc_fused"], count(kc), count(ka))
			}
			for _, k := range []map[string]int{kb, kc} {
				if k["csa_attn_kdec"] != ka["csa_attn_kdec"] || k["csa_attn_kdec"] == 0 {
					t.Errorf("csa_attn_kdec ran %d / %d times; want the same, not 0", ka["csa_attn_kdec"], k["csa_attn_kdec"])
				}
			}
		})
	}
}
