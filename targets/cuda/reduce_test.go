package cuda

import (
	"testing"

	dic "deepinfer/compiler"
	"deepinfer/targets"
	"deepinfer/vm"
)

// TestFastModeSplitsReductions: the binders pick the split reductions (mhc.cu's
// mhc_fast_* kernels) in the fast numerics mode and the serial kernels in the exact
// mode, for every phase of the fixture's plan. What the split kernels compute is
// checked against the cpu target by TestFastInstructionsNearCPU.
func TestFastModeSplitsReductions(t *testing.T) {
	cases := []struct {
		model      string
		fast, slow []string // kernels only the fast mode launches, and only the exact mode
	}{
		{"tiny-v4-dev",
			[]string{"mhc_fast_mix_part", "mhc_fast_mix_sum", "mhc_fast_norm_part", "mhc_fast_norm_apply"},
			[]string{"mhc_mix_dot", "rmsnorm"}},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			dir := "../../testdata/" + c.model
			out, err := dic.Compile(dic.Options{ModelDir: dir, Target: "h200"})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := vm.LoadWeights(out.Plan, dir)
			if err != nil {
				t.Fatal(err)
			}
			withCache(t)
			for _, mode := range []string{targets.NumericsExact, targets.NumericsFast} {
				rt, err := open(newFakeDriver(1<<30), &countingCompiler{}, out.Plan, ws, targets.Options{MaxTokens: 16, Numerics: mode})
				if err != nil {
					t.Fatal(err)
				}
				used := map[string]bool{}
				for _, pr := range rt.progs {
					for _, cl := range pr.calls {
						for _, l := range cl.launches {
							used[l.kernel] = true
						}
					}
				}
				rt.Close()
				want, never := c.fast, c.slow
				if mode == targets.NumericsExact {
					want, never = c.slow, c.fast
				}
				for _, k := range want {
					if !used[k] {
						t.Errorf("%s numerics: no launch of %s", mode, k)
					}
				}
				for _, k := range never {
					if used[k] {
						t.Errorf("%s numerics: %s launched", mode, k)
					}
				}
			}
		})
	}
}
