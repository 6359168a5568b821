package cuda_test

import (
	"testing"

	"deepinfer/targets/cuda"
)

// TestFusedAttentionSameValues: V4.1's tensor-core attention as one launch block per
// (row, 32 heads) (csa_tc_fused3, the default form) gives the three launches' logits
// bit for bit (csa_tc_logits, csa_attn_softmax, csa_tc_out: the same operations on the same
// operands), through an 80-token prefill and two decode steps of both V4.1 fixtures in
// the fast mode: with DEEPINFER_CUDA_ATT_FUSED=0 (never fused), unset (the default:
// fused from 128 launch blocks, moved to 64 here, so the prefill's 80 rows and not
// the one-row decode steps) and 1 (fused at every step; and with
// DEEPINFER_CUDA_ATT_FUSED_FORM=1 and 2 the other forms, csa_tc_fused and
// csa_tc_fused2), each launch where the setting puts it. On the
// emulated device the fused kernels run the split kernels' emulated code, so there this
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
			const def = "csa_tc_fused3" // the default form
			sameLogits(t, a, b, "on the split kernels", "on "+def)
			t.Setenv(cuda.EnvAttFused, "")
			c, kc := prefillAndDecode(t, p, ws, n)
			sameLogits(t, a, c, "on the split kernels", "by the default rule")
			// the other forms (csa_tc_fused, csa_tc_fused2) at every step
			t.Setenv(cuda.EnvAttFused, "1")
			kd := map[string]map[string]int{}
			forms := map[string]string{"1": "csa_tc_fused", "2": "csa_tc_fused2"}
			for form, name := range forms {
				t.Setenv(cuda.EnvAttFusedForm, form)
				d, k := prefillAndDecode(t, p, ws, n)
				sameLogits(t, a, d, "on the split kernels", "on "+name)
				kd[form] = k
			}
			t.Setenv(cuda.EnvAttFusedForm, "")
			if ka == nil {
				return // (a GPU: no launch counts)
			}
			for form, k := range kd {
				if name := forms[form]; k[name] != kb[def] || k[def] != 0 {
					t.Errorf("form %s: %s ran %d times, %s %d; want %d and 0", form, name, k[name], def, k[def], kb[def])
				}
			}
			if ka[def] != 0 || count(ka) == 0 {
				t.Errorf("=0: %s ran %d times, the split kernels %d; want 0 and some", def, ka[def], count(ka))
			}
			if kb[def] == 0 || count(kb) != 0 || kb["csa_tc_fused"]+kb["csa_tc_fused2"] != 0 {
				t.Errorf("=1: %s ran %d times, the other forms %d, the split kernels %d; want some, 0 and 0", def, kb[def],
					kb["csa_tc_fused"]+kb["csa_tc_fused2"], count(kb))
			}
			// the default: the prefill (80 rows, one group of heads) fused, the decode steps
			// (one row) not: a third of the fused launches and two thirds of the split ones
			if 3*kc[def] != kb[def] || 3*count(kc) != 2*count(ka) {
				t.Errorf("default: %s ran %d times (=1: %d), the split kernels %d (=0: %d); want the prefill's alone fused",
					def, kc[def], kb[def], count(kc), count(ka))
			}
			for _, k := range []map[string]int{kb, kc} {
				if k["csa_attn_kdec"] != ka["csa_attn_kdec"] || k["csa_attn_kdec"] == 0 {
					t.Errorf("csa_attn_kdec ran %d / %d times; want the same, not 0", ka["csa_attn_kdec"], k["csa_attn_kdec"])
				}
			}
		})
	}
}
