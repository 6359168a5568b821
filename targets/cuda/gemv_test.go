package cuda_test

import (
	"math"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// TestGemvSteps: the fast products of decode steps of at most four rows run on the CUDA
// cores (fast_gemv_fp8 and _fp8_q by default, FP8 weights only; DEEPINFER_CUDA_GEMV=all
// also fast_gemv_f32 and _bf16; =0 keeps the split and the warp tiles): on V4
// (tiny-v4-dev, and V4-Flash's formats: FP8 block weights, bf16 and float32 ones) and on
// both V4.1 fixtures, a 40-token prefill's logits are the same bit for bit every way (no
// product there has four rows or fewer) and the two decode steps' logits are near the
// tiles' — another summation order, each product exact in float32 either way — within
// 2e-5 of the row's largest logit. On the emulated device the decode steps' one-row
// products moved off the tiles with =all (no one-row tile runs, nor more fast_sum
// launches than with the tiles), only the FP8 ones by default, none with =0.
func TestGemvSteps(t *testing.T) {
	const n = 40
	models := append(v4Models(t), v41Fixtures...)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvGemv, "0", "all", n)
			t.Setenv(cuda.EnvGemv, "")
			c, kc := prefillAndDecode(t, p, ws, n)
			for _, o := range []struct {
				name string
				l    [][]float32
			}{{"=all", b}, {"by default", c}} {
				sameLogits(t, a[:n], o.l[:n], "prefill with the tiles ("+cuda.EnvGemv+"=0)", "prefill "+o.name)
				worst := 0.0
				for i := n; i < n+2; i++ {
					big, d := 0.0, 0.0
					for j := range a[i] {
						big = math.Max(big, math.Abs(float64(a[i][j])))
						d = math.Max(d, math.Abs(float64(a[i][j])-float64(o.l[i][j])))
					}
					worst = math.Max(worst, d/math.Max(big, 1e-30))
				}
				t.Logf("decode logits %s: worst difference %.3g of the row's largest", o.name, worst)
				if worst > 2e-5 {
					t.Errorf("decode logits %s %.3g apart (relative to the row's largest), want within 2e-5", o.name, worst)
				}
			}
			if ka == nil {
				return
			}
			gemv := func(k map[string]int, prefix string) (n int) {
				for name, c := range k {
					if strings.HasPrefix(name, prefix) {
						n += c
					}
				}
				return n
			}
			// one-row tiles: the prefill has none (its products have n rows), so every
			// launch of them with =all would be a decode step's
			m1 := func(k map[string]int) int {
				return k["fast_gemm_m1"] + k["fast_gemm_m1_f32"] + k["fast_gemm_m1_fp8_only"] + k["fast_gemm_m1_fp8_b4"]
			}
			// (fast_gemv: the products of one to four rows, fast_gemv_*, and the FP8 forms
			// written for one row, fast_gemv1p_* by default)
			if gemv(ka, "fast_gemv") != 0 || gemv(kb, "fast_gemv") == 0 || m1(ka) == 0 || m1(kb) != 0 || kb["fast_sum"] > ka["fast_sum"] {
				t.Errorf("with %s=0: %d fast_gemv* launches, %d one-row tiles, %d fast_sum; with =all %d, %d, %d: want the decode steps' one-row products on fast_gemv*",
					cuda.EnvGemv, gemv(ka, "fast_gemv"), m1(ka), ka["fast_sum"], gemv(kb, "fast_gemv"), m1(kb), kb["fast_sum"])
			}
			fp8s := func(k map[string]int) int { return gemv(k, "fast_gemv_fp8") + gemv(k, "fast_gemv1p_fp8") }
			if fp8 := fp8s(kb); gemv(kc, "fast_gemv") != fp8 || fp8s(kc) != fp8 || m1(kc) != m1(ka)-fp8 {
				t.Errorf("by default %d fast_gemv* launches (%d FP8) and %d one-row tiles; want the %d FP8 ones of =all and the other %d tiles",
					gemv(kc, "fast_gemv"), fp8s(kc), m1(kc), fp8, m1(ka)-fp8)
			}
		})
	}
}

// TestDraftStepWholeBlocks: a DSpark draft step whose rows are not whole blocks fails
// with the drafter's error (503, raised by dspark_head_logits) in both numerics modes —
// in the fast mode, where the logits come from the fast product, the kernel still runs
// for that check — and a step of whole blocks succeeds.
func TestDraftStepWholeBlocks(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	B := p.Model.DSpark.Block
	for _, mode := range []string{targets.NumericsExact, targets.NumericsFast} {
		t.Run(mode, func(t *testing.T) {
			r, err := devExec{}.Open(p, ws, targets.Options{Numerics: mode, MaxTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			st, err := r.NewState()
			if err != nil {
				t.Fatal(err)
			}
			step := func(phase string, toks []int32, pos int) error {
				in := targets.StepIn{Phase: phase, Tokens: toks, Seqs: []targets.SeqIn{{State: st, N: len(toks), Pos: pos}}}
				for j := range toks {
					in.Rows = append(in.Rows, int32(j))
					in.Sample = append(in.Sample, 0, 0, 0, 0)
				}
				var o targets.StepOut
				return r.Step(&in, &o)
			}
			if err := step(plan.PhasePrefill, []int32{3, 5, 7, 9}, 0); err != nil {
				t.Fatal(err)
			}
			draft := func(n int) []int32 {
				d := make([]int32, n)
				for j := range d {
					d[j] = int32(p.Model.DSpark.Noise)
				}
				d[0] = 11
				return d
			}
			if err := step(plan.PhaseDraft, draft(B-1), 4); err == nil || !strings.Contains(err.Error(), "whole DSpark blocks") {
				t.Errorf("a draft step of %d rows (block %d): %v, want the whole-block error", B-1, B, err)
			}
			if err := step(plan.PhaseDraft, draft(B), 4); err != nil {
				t.Errorf("a draft step of one whole block: %v", err)
			}
		})
	}
}

// TestOptInFormsSameValues: the forms that only load differently (opt-in until run 32;
// =p and the attention's the defaults since) give the logits of the kernels they replace
// (each switch 0) bit for bit (a 24-token prefill and two decode steps of
// tiny-v4-dev in V4-Flash's formats, FP8 block weights, and of both V4.1 fixtures, fast
// mode): the one-row steps' FP8 products on the forms written for one activation row
// (DEEPINFER_CUDA_GEMV_ONE=1: fast_gemv1_fp8 and _fp8_q; =b: fast_gemv1b_*, bounded to
// six launch blocks a multiprocessor; =p: fast_gemv1p_*, two-piece stages a stage ahead)
// against fast_gemv_fp8 and _fp8_q, and V4.1's
// narrow tensor-core attention output with its key steps loaded four at a time
// (DEEPINFER_CUDA_ATT_AHEAD=1: csa_tc_out_na) against csa_tc_out_n. On the emulated
// device the launches are counted: every launch of the replaced kernels moved (each
// form's kernels ran in some model: the attention's in V4.1's), every other kernel as
// often. The emulated device runs each form's emulated branch, the replaced kernel's, so
// there the values part checks only that the forms are routed whole; their device code
// is checked on host fibers (TestGemvDeviceCodeOnHostFibers) or simulated lanes
// (TestFastProductsOnSimulatedLanes), and on a GPU this test compares the kernels.
func TestOptInFormsSameValues(t *testing.T) {
	const n = 24 // (the prefill only fills the cache: its products take the tiles)
	forms := []struct {
		env, value string
		moves      map[string]string // replaced kernel → its form
	}{
		{cuda.EnvGemvOne, "1", map[string]string{"fast_gemv_fp8": "fast_gemv1_fp8", "fast_gemv_fp8_q": "fast_gemv1_fp8_q"}},
		{cuda.EnvGemvOne, "b", map[string]string{"fast_gemv_fp8": "fast_gemv1b_fp8", "fast_gemv_fp8_q": "fast_gemv1b_fp8_q"}},
		{cuda.EnvGemvOne, "p", map[string]string{"fast_gemv_fp8": "fast_gemv1p_fp8", "fast_gemv_fp8_q": "fast_gemv1p_fp8_q"}},
		{cuda.EnvAttAhead, "1", map[string]string{"csa_tc_out_n": "csa_tc_out_na"}},
	}
	moved := make([]int, len(forms))
	counted := false
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			opt := targets.Options{Numerics: targets.NumericsFast}
			for _, f := range forms {
				t.Setenv(f.env, "0")
			}
			a, ka, _ := prefillAndDecodeIn(t, p, ws, n, opt, nil)
			for i, f := range forms {
				t.Setenv(f.env, f.value)
				b, kb, _ := prefillAndDecodeIn(t, p, ws, n, opt, nil)
				t.Setenv(f.env, "0")
				if len(a) != n+2 || len(b) != n+2 {
					t.Fatalf("%d and %d logits rows, want %d", len(a), len(b), n+2)
				}
				sameLogits(t, a, b, "on the replaced kernels (=0)", "with "+f.env+"="+f.value)
				if ka == nil {
					continue
				}
				counted = true
				named := map[string]bool{}
				for from, to := range f.moves {
					named[from], named[to] = true, true
					moved[i] += ka[from]
					if ka[to] != 0 || kb[from] != 0 || kb[to] != ka[from] {
						t.Errorf("%s=%s: %s / %s ran %d / %d times unset and %d / %d set; want every launch moved", f.env, f.value, from, to, ka[from], ka[to], kb[from], kb[to])
					}
				}
				for k, c := range ka {
					if !named[k] && kb[k] != c {
						t.Errorf("%s=%s: %s ran %d times unset and %d set; want the same", f.env, f.value, k, c, kb[k])
					}
				}
			}
		})
	}
	for i, f := range forms {
		if counted && moved[i] == 0 {
			t.Errorf("%s=%s: none of %v ran in any model", f.env, f.value, f.moves)
		}
	}
}
