package cuda_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

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
// instruction's results (cuda.SetEpilogueWithHook), an 80-token prefill and two decode
// steps of tiny-v41-dev2 in both numerics modes give every instruction's results of
// the roundings-alone run (DEEPINFER_CUDA_EPILOGUE=0) bit for bit, except a fused
// producer's, which must be its rounding's values (the producer stores them, and the
// rounding launches nothing): every intermediate value, not only what reaches the
// logits.
func TestEpilogueInstructionsSame(t *testing.T) {
	defer cuda.SetEpilogueWithHook(true)()
	// (tiny-v41-dev2 alone: both fixtures' logits are TestLaunchCutsSameValues')
	for _, m := range v41Fixtures[:1] {
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

// TestLaunchCutsSameValues: the launches cut after run 30 — V4.1's bf16 roundings
// stored by their producers (DEEPINFER_CUDA_EPILOGUE), the RMSNorm in one launch
// (DEEPINFER_CUDA_NORM_ONE), the experts' bookkeeping in one (DEEPINFER_CUDA_MOE_PLAN),
// V4.1's router and mix folds inside the route and the split (DEEPINFER_CUDA_ROUTE_FOLD,
// DEEPINFER_CUDA_MIX_FOLD) — and the one-to-four-row FP8 products with their bytes
// staged in shared memory (DEEPINFER_CUDA_GEMV_STAGED) and the wgmma products with their
// weight bytes two steps ahead (DEEPINFER_CUDA_WG_AHEAD=all), each on wherever it
// applies (the defaults take some only for the step sizes run 31 measured them faster,
// or not at all), give the logits of the kernels they replace (every switch 0) bit for
// bit: an 80-token prefill and two decode steps of tiny-v4-dev and both V4.1 fixtures in
// the fast mode. On the emulated device (where the staged products run fast_gemv_fp8's
// emulated branch: their device code is checked in TestGemvDeviceCodeOnHostFibers) the
// launches are counted: every fast_gemv_fp8 and _fp8_q launch a staged one, every
// fast_gemm_wg_fp8 launch (V4.1) a fast_gemm_wg_fp8a; one mhc_fake_quant fewer for each
// rounding fused in each step's program; every norm part launch a one-launch norm and no
// apply left; every moe_count a moe_plan and no moe_count_sum, moe_group or
// fast_moe_active left; no moe_fast_gate41_sum or mhc_fast_mix41_sum left, the route and
// the split as often; every other kernel as often. Each kernel's device code is checked
// on host fibers (TestLaunchCutsOnHostFibers) and the fused roundings instruction by
// instruction (TestEpilogueInstructionsSame).
func TestLaunchCutsSameValues(t *testing.T) {
	// (EnvGemvOne=0 with the switches off: the staged products replace fast_gemv_fp8's)
	switches := []string{cuda.EnvEpilogue, cuda.EnvNormOne, cuda.EnvMoEPlan, cuda.EnvRouteFold, cuda.EnvMixFold, cuda.EnvGemvStaged, cuda.EnvWGAhead, cuda.EnvGemvOne}
	// each change everywhere it applies (the defaults take some of them only where run 31
	// measured them faster, or not at all)
	on := map[string]string{cuda.EnvNormOne: "1", cuda.EnvRouteFold: "1", cuda.EnvMixFold: "1", cuda.EnvGemvStaged: "1", cuda.EnvWGAhead: "all"}
	models := append([]struct{ name, dir string }{{"tiny-v4-dev", "../../testdata/tiny-v4-dev"}}, v41Fixtures...)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			opt := targets.Options{Numerics: targets.NumericsFast}
			for _, e := range switches {
				t.Setenv(e, "0")
			}
			a, ka, na := prefillAndDecodeIn(t, p, ws, 80, opt, nil)
			for _, e := range switches {
				t.Setenv(e, on[e])
			}
			b, kb, nb := prefillAndDecodeIn(t, p, ws, 80, opt, nil)
			if len(a) != 82 || len(b) != 82 {
				t.Fatalf("%d and %d logits rows, want 82", len(a), len(b))
			}
			sameLogits(t, a, b, "with the replaced kernels", "with every change on")
			v41 := m.name != "tiny-v4-dev"
			if na != 0 || (nb == 0) == v41 {
				t.Fatalf("decode roundings fused: %d with the switches off, %d with them on; want 0, and some on V4.1 only", na, nb)
			}
			if ka == nil {
				return
			}
			named := map[string]bool{}
			check := func(msg string, kernels ...string) {
				for _, k := range kernels {
					named[k] = true
				}
				if msg != "" {
					t.Error(msg)
				}
			}
			if v41 {
				pre := prefillEpilogues(t, p, ws, targets.NumericsFast)
				msg := ""
				if want := pre + 2*nb; ka["mhc_fake_quant"]-kb["mhc_fake_quant"] != want {
					msg = fmt.Sprintf("mhc_fake_quant ran %d times alone and %d fused; want %d fewer (%d in the prefill, %d in each decode step)",
						ka["mhc_fake_quant"], kb["mhc_fake_quant"], want, pre, nb)
				}
				check(msg, "mhc_fake_quant")
				for _, f := range [][3]string{{"moe_fast_gate41_sum", "moe_route_v41"}, {"mhc_fast_mix41_sum", "mhc_mix41_split"}} {
					msg := ""
					if ka[f[0]] == 0 || kb[f[0]] != 0 || ka[f[1]] != kb[f[1]] {
						msg = fmt.Sprintf("%s ran %d and %d times, %s %d and %d; want some then none, and %s as often", f[0], ka[f[0]], kb[f[0]], f[1], ka[f[1]], kb[f[1]], f[1])
					}
					check(msg, f[0], f[1])
				}
			}
			norm := "mhc_fast_norm"
			if v41 {
				norm = "mhc_fast_norm41"
			}
			msg := moved(ka, kb, norm+"_part", norm+"_one")
			if kb[norm+"_apply"] != 0 {
				msg += fmt.Sprintf("%s_apply ran %d times with the changes on; want 0. ", norm, kb[norm+"_apply"])
			}
			check(msg, norm+"_part", norm+"_one", norm+"_apply")
			msg = ""
			if v41 && ka["fast_gemv_fp8_q"] == 0 {
				msg = "no one-row FP8 product ran with the switches off. "
			}
			for _, k := range []string{"fast_gemv_fp8", "fast_gemv_fp8_q"} {
				st := "fast_gemv_fp8s" + strings.TrimPrefix(k, "fast_gemv_fp8")
				if kb[k] != 0 || ka[st] != 0 || kb[st] != ka[k] {
					msg += fmt.Sprintf("%s ran %d / %d times, %s %d / %d (switches off / default); want every launch moved. ", k, ka[k], kb[k], st, ka[st], kb[st])
				}
			}
			check(msg, "fast_gemv_fp8", "fast_gemv_fp8_q", "fast_gemv_fp8s", "fast_gemv_fp8s_q")
			msg = ""
			if v41 {
				msg = moved(ka, kb, "fast_gemm_wg_fp8", "fast_gemm_wg_fp8a")
			}
			check(msg, "fast_gemm_wg_fp8", "fast_gemm_wg_fp8a")
			msg = moved(ka, kb, "moe_count", "moe_plan")
			for _, k := range []string{"moe_count_sum", "moe_group", "fast_moe_active"} {
				if ka[k] == 0 || kb[k] != 0 {
					msg += fmt.Sprintf("%s ran %d times with the switches off and %d with them on; want some and 0. ", k, ka[k], kb[k])
				}
			}
			check(msg, "moe_count", "moe_plan", "moe_count_sum", "moe_group", "fast_moe_active")
			for k, n := range ka {
				if !named[k] && kb[k] != n {
					t.Errorf("%s ran %d times with the switches off and %d with them on; want the same", k, n, kb[k])
				}
			}
			for k, n := range kb {
				if !named[k] && ka[k] == 0 {
					t.Errorf("%s ran %d times with the switches on and never with them off", k, n)
				}
			}
		})
	}
}

// TestFoldAndNormChoices: what the defaults run where run 31 measured the changes by
// step size or kernel (tiny-v41-dev, an 80-token prefill and two decode steps, fast mode,
// on the emulated device): the prefill's FP8 products on fast_gemm_wg_fp8a, the decode
// steps' one-row ones on fast_gemv1p_fp8_q (the form with stages ahead, since run 32); V4.1's mixes folded inside mhc_mix41_split in the prefill (80 rows)
// and by mhc_fast_mix41_sum in each one-row decode step (with
// DEEPINFER_CUDA_MIX_FOLD=1 never by the sum, =0 always); the router's fold always
// moe_fast_gate41_sum's; every RMSNorm (the fixture's rows are all short) as one launch
// (the rule for long rows: TestNormOneRule). The values are the same either way
// (TestLaunchCutsSameValues).
func TestFoldAndNormChoices(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	opt := targets.Options{Numerics: targets.NumericsFast}
	counts := func(env string) map[string]int {
		t.Setenv(cuda.EnvMixFold, env)
		_, k, _ := prefillAndDecodeIn(t, p, ws, 80, opt, nil)
		return k
	}
	def, all, none := counts(""), counts("1"), counts("0")
	if def == nil {
		t.Skip("launch counts come from the emulated device")
	}
	sum, split := "mhc_fast_mix41_sum", "mhc_mix41_split"
	if all[sum] != 0 || none[sum] != none[split] || def[sum] == 0 || def[sum] >= none[sum] {
		t.Errorf("%s ran %d / %d / %d times (=1 / default / =0) for %d splits; want none, the decode steps' only, and one a split",
			sum, all[sum], def[sum], none[sum], none[split])
	}
	// the prefill's and the decode steps' mixes are as many a step: the decode steps'
	// sums are two thirds of all
	if 3*def[sum] != 2*none[sum] {
		t.Errorf("by default %d of %d mix sums ran; want the two decode steps' (two thirds)", def[sum], none[sum])
	}
	if def["moe_fast_gate41_sum"] == 0 || def["moe_route_v41"] == 0 {
		t.Errorf("by default moe_fast_gate41_sum ran %d times, moe_route_v41 %d; want the router folded by the sum", def["moe_fast_gate41_sum"], def["moe_route_v41"])
	}
	if def["fast_gemm_wg_fp8a"] == 0 || def["fast_gemm_wg_fp8"] != 0 || def["fast_gemv1p_fp8_q"] == 0 || def["fast_gemv_fp8_q"]+def["fast_gemv_fp8s_q"] != 0 {
		t.Errorf("by default fast_gemm_wg_fp8a / _fp8 ran %d / %d times, fast_gemv1p_fp8_q / fast_gemv_fp8_q / _fp8s_q %d / %d / %d; want the two-steps-ahead wgmma form and the one-row form with stages ahead",
			def["fast_gemm_wg_fp8a"], def["fast_gemm_wg_fp8"], def["fast_gemv1p_fp8_q"], def["fast_gemv_fp8_q"], def["fast_gemv_fp8s_q"])
	}
	// (the fixture's rows are all short: every norm one launch, as TestNormOneRule's rule
	// says for rows of at most 2,048 values)
	if def["mhc_fast_norm41_part"] != 0 || def["mhc_fast_norm41_apply"] != 0 || def["mhc_fast_norm41_one"] == 0 {
		t.Errorf("by default mhc_fast_norm41_part / _apply / _one ran %d / %d / %d times; want the short rows' norms in one launch",
			def["mhc_fast_norm41_part"], def["mhc_fast_norm41_apply"], def["mhc_fast_norm41_one"])
	}
}

// TestSharedQuantSameValues: the qlinears the compiler marks quant_shared (V4.1's
// attn.wkv after attn.wq_a, the shared expert's w3 after its w1, attn.indexer.wq_b after
// attn.wq_b) read their predecessor's quantized activations instead of quantizing them
// again, and give the logits of quantizing each time (DEEPINFER_CUDA_SHARE_QUANT=0) bit
// for bit: an 80-token prefill and two decode steps of both V4.1 fixtures in both
// numerics modes (and in the fast one with the quantization and the split as two
// launches). Every marked instruction of both programs shares; on the emulated
// device the quantizing kernel (fast_quant_split in the fast mode, dense_quant in the
// exact one and with two launches) runs once fewer for each share in each step, every
// other kernel as often.
func TestSharedQuantSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		p, ws := cuda.CompileDir(t, m.dir)
		marked := map[string]int{}
		for _, pg := range p.Programs {
			for _, in := range pg.Instrs {
				if s, _ := in.Attrs.Bool("quant_shared"); s {
					marked[pg.Phase]++
				}
			}
		}
		// three a layer with an indexer, two without (the exact pairs: passes'
		// TestShareQuantV41); the same in both programs
		if marked[plan.PhasePrefill] < 2*len(p.Model.Layers) || marked[plan.PhaseDecode] != marked[plan.PhasePrefill] {
			t.Fatalf("%s: %v instructions marked quant_shared for %d layers; want at least two a layer, as many in both programs", m.name, marked, len(p.Model.Layers))
		}
		for _, mode := range []string{targets.NumericsFast, targets.NumericsExact, "fast, two launches"} {
			t.Run(m.name+"/"+mode, func(t *testing.T) {
				numerics := mode
				if mode == "fast, two launches" {
					// the quantization and the split as two launches (dense_quant, then
					// fast_split from its buffer)
					numerics = targets.NumericsFast
					t.Setenv(cuda.EnvQuantSplit, "0")
				}
				opt := targets.Options{Numerics: numerics}
				t.Setenv(cuda.EnvShareQuant, "0")
				shares := map[string]int{}
				count := func(rt *cuda.Runtime, step int) {
					if step == 0 {
						for _, ph := range []string{plan.PhasePrefill, plan.PhaseDecode} {
							shares[ph] = rt.QuantShares(ph)
						}
					}
				}
				a, ka, _ := prefillAndDecodeIn(t, p, ws, 80, opt, count)
				if shares[plan.PhasePrefill] != 0 || shares[plan.PhaseDecode] != 0 {
					t.Fatalf("%v shares with %s=0", shares, cuda.EnvShareQuant)
				}
				t.Setenv(cuda.EnvShareQuant, "")
				b, kb, _ := prefillAndDecodeIn(t, p, ws, 80, opt, count)
				sameLogits(t, a, b, "quantizing each time", "sharing")
				for _, ph := range []string{plan.PhasePrefill, plan.PhaseDecode} {
					if shares[ph] != marked[ph] {
						t.Errorf("%s: %d of %d marked instructions share", ph, shares[ph], marked[ph])
					}
				}
				if ka == nil {
					return
				}
				quant := "fast_quant_split"
				if mode != targets.NumericsFast {
					quant = "dense_quant"
				}
				if want := shares[plan.PhasePrefill] + 2*shares[plan.PhaseDecode]; ka[quant]-kb[quant] != want {
					t.Errorf("%s ran %d times alone and %d sharing; want %d fewer", quant, ka[quant], kb[quant], want)
				}
				for k, n := range ka {
					if k != quant && kb[k] != n {
						t.Errorf("%s ran %d times alone and %d sharing; want the same", k, n, kb[k])
					}
				}
				t.Logf("%v shares; %s %d → %d launches", shares, quant, ka[quant], kb[quant])
			})
		}
	}
}
