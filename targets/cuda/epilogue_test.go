package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// TestEpilogueSameValues: V4.1's bf16 roundings stored by their producers (RMSNorm,
// rotary embedding, mHC expansion and collapse, residual add; ops_fuse.go) give the
// logits of the roundings run alone (DEEPINFER_CUDA_EPILOGUE=0) bit for bit, in both
// numerics modes: an 80-token prefill and two decode steps of both V4.1 fixtures. On
// the emulated device the launches are counted: mhc_fake_quant runs exactly once less
// for each rounding fused in each step's program, and every other kernel as often.
func TestEpilogueSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		for _, numerics := range []string{targets.NumericsFast, targets.NumericsExact} {
			t.Run(m.name+"/"+numerics, func(t *testing.T) {
				p, ws := cuda.CompileDir(t, m.dir)
				t.Setenv(cuda.EnvEpilogue, "0")
				a, ka, na := prefillAndDecodeIn(t, p, ws, 80, targets.Options{Numerics: numerics}, nil)
				t.Setenv(cuda.EnvEpilogue, "")
				b, kb, nb := prefillAndDecodeIn(t, p, ws, 80, targets.Options{Numerics: numerics}, nil)
				if len(a) != 82 || len(b) != 82 {
					t.Fatalf("%d and %d logits rows, want 82", len(a), len(b))
				}
				sameLogits(t, a, b, "with the roundings alone", "with them in their producers")
				if na != 0 || nb == 0 {
					t.Fatalf("decode roundings fused: %d with %s=0, %d by default; want 0 and some", na, cuda.EnvEpilogue, nb)
				}
				t.Logf("%d bf16 roundings of the decode program fused", nb)
				if ka == nil {
					return
				}
				pre := prefillEpilogues(t, p, ws, numerics)
				if want := pre + 2*nb; ka["mhc_fake_quant"]-kb["mhc_fake_quant"] != want {
					t.Errorf("mhc_fake_quant ran %d times alone and %d fused; want %d fewer (%d in the prefill, %d in each decode step)",
						ka["mhc_fake_quant"], kb["mhc_fake_quant"], want, pre, nb)
				}
				for k, n := range ka {
					if k != "mhc_fake_quant" && kb[k] != n {
						t.Errorf("%s ran %d times alone and %d fused; want the same", k, n, kb[k])
					}
				}
			})
		}
	}
}

// prefillEpilogues is how many roundings the prefill program's producers store.
func prefillEpilogues(t *testing.T, p *plan.Plan, ws []targets.Weight, numerics string) int {
	t.Helper()
	r, err := devExec{}.Open(p, ws, targets.Options{Numerics: numerics, MaxTokens: 96})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return r.(*cuda.Runtime).Epilogues(plan.PhasePrefill)
}

// TestEpilogueInstructionsSame: with the fusion on while a Hook reads every
// instruction's results (cuda.SetEpilogueWithHook), the same steps as
// TestEpilogueSameValues give every instruction's results of the roundings-alone run
// bit for bit, except a fused producer's, which must be its rounding's values (the
// producer stores them, and the rounding launches nothing). This reaches values the
// logits do not show (a query's unrotated channels, which attention rounds to bf16
// again).
func TestEpilogueInstructionsSame(t *testing.T) {
	defer cuda.SetEpilogueWithHook(true)()
	for _, m := range v41Fixtures {
		for _, numerics := range []string{targets.NumericsFast, targets.NumericsExact} {
			t.Run(m.name+"/"+numerics, func(t *testing.T) {
				p, ws := cuda.CompileDir(t, m.dir)
				t.Setenv(cuda.EnvEpilogue, "0")
				a, _ := hookedRun(t, p, ws, numerics)
				t.Setenv(cuda.EnvEpilogue, "")
				b, prods := hookedRun(t, p, ws, numerics)
				if len(a) != len(b) || len(a) == 0 {
					t.Fatalf("%d and %d results recorded", len(a), len(b))
				}
				fused := 0
				for k, va := range a {
					var step, index, j int
					var phase string
					if _, err := fmt.Sscanf(k, "%d %s %d %d", &step, &phase, &index, &j); err != nil {
						t.Fatal(err)
					}
					want := va
					if f, ok := prods[phase][index]; ok {
						// the producer's result is its rounding's
						want = a[fmt.Sprintf("%d %s %d %d", step, phase, f, 0)]
						fused++
					}
					if i, d := firstDiff(b[k], want); i >= 0 {
						t.Fatalf("step %d, %s instruction %d, result %d, value %d: %s with the fusion, want %s", step, phase, index, j, i, d[0], d[1])
					}
				}
				if fused == 0 {
					t.Fatal("no producer stored a rounding")
				}
				t.Logf("%d results compared, %d of them fused producers'", len(a), fused)
			})
		}
	}
}

// hookedRun runs prefillAndDecodeIn's steps with a Hook recording every instruction's
// results (float32 and int32 values as bits), keyed "step phase index result", and
// returns them with each program's fused producers (cuda.EpilogueProducers).
func hookedRun(t *testing.T, p *plan.Plan, ws []targets.Weight, numerics string) (map[string][]uint32, map[string]map[int]int) {
	t.Helper()
	vals := map[string][]uint32{}
	var rt *cuda.Runtime
	step := 0
	hook := func(phase string, index int, in *plan.Instr, run func() error) error {
		if err := run(); err != nil {
			return err
		}
		n := 0
		for j := range in.Results {
			if in.Results[j].Kind == plan.OpNone {
				continue
			}
			f, ints, err := rt.Result(phase, index, j)
			if err != nil {
				return err
			}
			bits := make([]uint32, 0, len(f)+len(ints))
			for _, v := range f {
				bits = append(bits, math.Float32bits(v))
			}
			for _, v := range ints {
				bits = append(bits, uint32(v))
			}
			vals[fmt.Sprintf("%d %s %d %d", step, phase, index, n)] = bits
			n++
		}
		return nil
	}
	prods := map[string]map[int]int{}
	prefillAndDecodeIn(t, p, ws, 80, targets.Options{Numerics: numerics, Hook: hook}, func(r *cuda.Runtime, s int) {
		rt, step = r, s
		for _, ph := range []string{plan.PhasePrefill, plan.PhaseDecode} {
			prods[ph] = cuda.EpilogueProducers(r, ph)
		}
	})
	return vals, prods
}

// firstDiff is the first index where a and b differ (as float32 values) and both
// values, or -1.
func firstDiff(a, b []uint32) (int, [2]string) {
	if len(a) != len(b) {
		return 0, [2]string{fmt.Sprintf("%d values", len(a)), fmt.Sprintf("%d", len(b))}
	}
	for i := range a {
		if a[i] != b[i] {
			return i, [2]string{fmt.Sprint(math.Float32frombits(a[i])), fmt.Sprint(math.Float32frombits(b[i]))}
		}
	}
	return -1, [2]string{}
}

// TestNormOneSameValues: the fast RMSNorm as one launch (V4.1's mhc_fast_norm41_one,
// V4's mhc_fast_norm_one, a launch block a chunk) gives the logits of its two launches
// (the part kernel, then the apply kernel; DEEPINFER_CUDA_NORM_ONE=0) bit for bit on
// tiny-v4-dev and both V4.1 fixtures, and on the emulated device every part launch
// became a one-launch norm and no apply is left. TestNormOneOnHostFibers checks the
// kernels' device code.
func TestNormOneSameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"tiny-v4-dev", "../../testdata/tiny-v4-dev"}}, v41Fixtures...)
	sameAcross(t, models, cuda.EnvNormOne, "0", "", 80, "in two launches", "in one",
		func(ka, kb map[string]int) string {
			k := "mhc_fast_norm" // V4's
			if ka["mhc_fast_norm41_part"] > 0 {
				k = "mhc_fast_norm41"
			}
			s := moved(ka, kb, k+"_part", k+"_one")
			if kb[k+"_apply"] != 0 {
				s += fmt.Sprintf("%s_apply ran %d times in one launch's run; want 0. ", k, kb[k+"_apply"])
			}
			return s
		})
}

// TestMoEPlanSameValues: the routed experts' counts, positions, lists and active experts
// in one launch (moe_plan) give the logits of the four launches it replaces
// (DEEPINFER_CUDA_MOE_PLAN=0) bit for bit on both V4.1 fixtures, and on the emulated
// device every moe_count launch became a moe_plan launch and no moe_count_sum,
// moe_group or fast_moe_active is left (every step of the 80-token prefill and the
// decode steps has at most 512 slots). TestMoEPlanOnHostFibers checks the kernel's
// device code; the instruction checks run it in both numerics modes.
func TestMoEPlanSameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvMoEPlan, "0", "", 80, "in four launches", "in one",
		func(ka, kb map[string]int) string {
			s := moved(ka, kb, "moe_count", "moe_plan")
			for _, k := range []string{"moe_count_sum", "moe_group", "fast_moe_active"} {
				if ka[k] == 0 || kb[k] != 0 {
					s += fmt.Sprintf("%s ran %d times in four launches' run and %d in one's; want some and 0. ", k, ka[k], kb[k])
				}
			}
			return s
		})
}

// TestRouteFoldSameValues: V4.1's fast router logits folded from their lanes by the
// route kernel itself (moe_route_v41 with fold) give the logits of a fold launch of
// their own (moe_fast_gate41_sum; DEEPINFER_CUDA_ROUTE_FOLD=0) bit for bit on both V4.1
// fixtures, and on the emulated device no moe_fast_gate41_sum is left and the route
// runs as often. TestRouteFoldOnHostFibers checks the device code.
func TestRouteFoldSameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvRouteFold, "0", "", 80, "folded in a launch of their own", "folded by the route",
		func(ka, kb map[string]int) string {
			if ka["moe_fast_gate41_sum"] == 0 || kb["moe_fast_gate41_sum"] != 0 || ka["moe_route_v41"] != kb["moe_route_v41"] {
				return fmt.Sprintf("moe_fast_gate41_sum ran %d and %d times, moe_route_v41 %d and %d; want some then none, and the route as often",
					ka["moe_fast_gate41_sum"], kb["moe_fast_gate41_sum"], ka["moe_route_v41"], kb["moe_route_v41"])
			}
			return ""
		})
}

// TestMixFoldSameValues: V4.1's fast mHC mixes and RMS scale folded from their lanes by
// the split kernel itself (mhc_mix41_split with fold) give the logits of a fold launch
// of their own (mhc_fast_mix41_sum; DEEPINFER_CUDA_MIX_FOLD=0) bit for bit on both V4.1
// fixtures, and on the emulated device no mhc_fast_mix41_sum is left and the split runs
// as often. TestMixFoldOnHostFibers checks the device code.
func TestMixFoldSameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvMixFold, "0", "", 80, "folded in a launch of their own", "folded by the split",
		func(ka, kb map[string]int) string {
			if ka["mhc_fast_mix41_sum"] == 0 || kb["mhc_fast_mix41_sum"] != 0 || ka["mhc_mix41_split"] != kb["mhc_mix41_split"] {
				return fmt.Sprintf("mhc_fast_mix41_sum ran %d and %d times, mhc_mix41_split %d and %d; want some then none, and the split as often",
					ka["mhc_fast_mix41_sum"], kb["mhc_fast_mix41_sum"], ka["mhc_mix41_split"], kb["mhc_mix41_split"])
			}
			return ""
		})
}
