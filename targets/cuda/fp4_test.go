package cuda_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// TestFP4ExpertTilesMatchGeneric: the FP4 experts' tiles (tensorcore_fp4.cu) against
// the generic fast tiles (tensorcore.cu, DEEPINFER_CUDA_FP4_TILES=0) on models with FP4
// experts: one prefill of 80 tokens (so that some expert serves more than the 16 slots
// a block stages at once: 80 tokens × k slots over E experts averages 20 or more) and
// two decode steps, every row's logits compared (on the emulated device, or the GPU with
// -device gpu). Both compute the same exact bf16
// products in float32, summed in different orders. The FP4 run must launch only the
// FP4 tiles and the generic run only the generic ones.
func TestFP4ExpertTilesMatchGeneric(t *testing.T) {
	for _, m := range []struct{ name, dir string }{
		{"tiny-v41-dev2", "../../testdata/tiny-v41-dev2"}, {"tiny-v41-dev", "../../testdata/tiny-v41-dev"},
		{"v4-flash-formats", quantizedV4(t)},
	} {
		model := m.dir
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, model)
			t.Setenv(cuda.EnvFP4Pipe, "")
			run := func(fp4 bool) ([][]float32, map[string]int) {
				if !fp4 {
					t.Setenv(cuda.EnvFP4Tiles, "0")
				} else {
					t.Setenv(cuda.EnvFP4Tiles, "")
				}
				return prefillAndDecode(t, p, ws, 80)
			}
			a, ka := run(true)
			b, kb := run(false)
			// (the default FP4 tiles: the register ones; TestFP4PipelineMatchesRegisters
			// checks the pipelined ones against them; V4.1's splits in the FP4 tiles' order
			// are fast_quant_split's, TestQuantSplitSameValues)
			// (V4.1's bf16 activations: the tiles compiled for them, _rega)
			fp4Kernels := []string{"fast_moe_up_fp4_rega", "fast_moe_down_fp4_rega"}
			if m.name == "v4-flash-formats" {
				fp4Kernels = []string{"fast_moe_up_fp4_reg8", "fast_moe_down_fp4_reg8", "fast_split_fp4"}
			}
			for _, k := range fp4Kernels {
				if ka == nil {
					break // the GPU: no launch counts
				}
				if ka[k] == 0 || kb[k] != 0 {
					t.Errorf("%s ran %d times with the FP4 tiles, %d without; want > 0 and 0", k, ka[k], kb[k])
				}
			}
			for _, k := range []string{"fast_moe_up", "fast_moe_down"} {
				if ka == nil {
					break
				}
				if ka[k] != 0 || kb[k] == 0 {
					t.Errorf("%s ran %d times with the FP4 tiles, %d without; want 0 and > 0", k, ka[k], kb[k])
				}
			}
			if len(a) != len(b) || len(a) != 82 {
				t.Fatalf("%d and %d logits rows, want 82", len(a), len(b))
			}
			worst := 0.0
			for i := range a {
				worst = max(worst, relErr(a[i], b[i]))
			}
			t.Logf("logits of 82 rows: FP4 tiles against the generic tiles, worst relative difference %.3g", worst)
			// (worst on the emulated device: 9.0e-6, the V4-Flash-format model)
			if worst > 1.5e-5 {
				t.Errorf("worst relative difference %.3g, want ≤ 1.5e-5", worst)
			}
		})
	}
}

// TestFP4PipelineMatchesRegisters: the pipelined FP4 tiles (fast_moe_up_fp4,
// fast_moe_down_fp4: weights copied into shared memory steps ahead) against the ones
// that load a step ahead into registers (_reg, the default; DEEPINFER_CUDA_FP4_PIPE=1
// selects the pipeline): every output
// is the same chain of mma, so the logits must agree bit for bit. The models cover the
// tails: tiny-v41-dev2's reductions of 192 and 96 values (not multiples of 128), its 96
// and 192 weight rows (partial row blocks, whole warps past N) and scale rows of 6 and
// 3 bytes (unaligned scale words); the 80-token prefill gives experts more than 16
// slots (slot passes after the first, where the copies restart). The emulated device
// runs one reference loop for both kernels, so there this checks that the switch picks
// the kernels; with -device gpu it checks the device code.
func TestFP4PipelineMatchesRegisters(t *testing.T) {
	for _, m := range []struct{ name, dir string }{
		{"tiny-v41-dev2", "../../testdata/tiny-v41-dev2"}, {"tiny-v41-dev", "../../testdata/tiny-v41-dev"},
		{"v4-flash-formats", quantizedV4(t)},
	} {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			t.Setenv(cuda.EnvFP4Tiles, "")
			t.Setenv(cuda.EnvFP4Pipe, "1")
			a, ka := prefillAndDecode(t, p, ws, 80)
			t.Setenv(cuda.EnvFP4Pipe, "")
			b, kb := prefillAndDecode(t, p, ws, 80)
			reg := "_rega" // V4.1's bf16 activations
			if m.name == "v4-flash-formats" {
				reg = "_reg8"
			}
			if ka != nil {
				for _, k := range []string{"fast_moe_up_fp4", "fast_moe_down_fp4"} {
					if ka[k] == 0 || ka[k+reg] != 0 || kb[k] != 0 || kb[k+reg] != ka[k] {
						t.Errorf("%s ran %d times and %s%s %d times with %s=1, %d and %d by default; want n > 0 and 0, 0 and n",
							k, ka[k], k, reg, ka[k+reg], cuda.EnvFP4Pipe, kb[k], kb[k+reg])
					}
				}
			}
			if len(a) != 82 || len(b) != 82 {
				t.Fatalf("%d and %d logits rows, want 82", len(a), len(b))
			}
			sameLogits(t, a, b, "pipelined ("+cuda.EnvFP4Pipe+"=1)", "with the register tiles")
		})
	}
}

// prefillAndDecode opens p on the device (emulated, or the GPU with -device gpu) in the
// fast numerics mode, prefills one prompt of n tokens in one step and decodes two
// tokens, keeping every row's logits (n + 2 rows). It returns them and, on the
// emulated device, how many times each kernel ran (nil on the GPU).
func prefillAndDecode(t *testing.T, p *plan.Plan, ws []targets.Weight, n int) ([][]float32, map[string]int) {
	t.Helper()
	l, k, _ := prefillAndDecodeIn(t, p, ws, n, targets.Options{Numerics: targets.NumericsFast}, nil)
	return l, k
}

// prefillAndDecodeIn is prefillAndDecode with the given options (MaxTokens set here);
// it also returns the bf16 roundings of the decode program its producers store
// (ops_fuse.go). opened, when not nil, sees the runtime before the first step, and is
// called again with step set before each.
func prefillAndDecodeIn(t *testing.T, p *plan.Plan, ws []targets.Weight, n int, o targets.Options, opened func(rt *cuda.Runtime, step int)) ([][]float32, map[string]int, int) {
	t.Helper()
	o.MaxTokens = n + 16
	r, err := devExec{}.Open(p, ws, o)
	if err != nil {
		t.Fatal(err)
	}
	rt := r.(*cuda.Runtime)
	defer rt.Close()
	st, err := rt.NewState()
	if err != nil {
		t.Fatal(err)
	}
	V := p.Model.Vocab
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32((i*977 + 13) % V)
	}
	var logits [][]float32
	pos := 0
	for step := 0; step < 3; step++ {
		if opened != nil {
			opened(rt, step)
		}
		in := targets.StepIn{Phase: plan.PhaseDecode, Tokens: toks, Seqs: []targets.SeqIn{{State: st, N: len(toks), Pos: pos}}}
		if len(toks) > 1 {
			in.Phase = plan.PhasePrefill
		}
		for r := range toks {
			in.Rows = append(in.Rows, int32(r))
			in.Sample = append(in.Sample, 0, 0, 0, 0)
			in.Want = append(in.Want, true)
		}
		var o targets.StepOut
		if err := rt.Step(&in, &o); err != nil {
			t.Fatal(err)
		}
		logits = append(logits, o.Logits...)
		pos += len(toks)
		toks = []int32{o.Tokens[len(o.Tokens)-1]}
	}
	if *device == "gpu" {
		return logits, nil, rt.Epilogues(plan.PhaseDecode)
	}
	return logits, cuda.KernelRuns(rt), rt.Epilogues(plan.PhaseDecode)
}

// TestFastBlockProductsMatchTiles: products of more than 32 rows run on fast_gemm_blk
// (a launch block sharing 128 rows' halves) and must give fast_gemm_m4's values bit
// for bit (DEEPINFER_CUDA_BLOCK_GEMM=0), since every output is the same chain of mma:
// a 160-token prefill (two blocks of rows, the second partial) and two decode steps,
// every logits row compared exactly, on tiny-v4-dev (float32 weights: the _f32 entry)
// and the V4-Flash-format model (FP8 128-blocks and bf16).
func TestFastBlockProductsMatchTiles(t *testing.T) {
	for _, m := range v4Models(t) {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			// the block products on fast_gemm_blk, not their wgmma forms (near rather
			// than equal: TestWGRNearBlk, TestWGRLogits)
			t.Setenv(cuda.EnvWGBF16, "0")
			t.Setenv(cuda.EnvWGFP8R, "0")
			t.Setenv(cuda.EnvBlockGemm, "")
			a, ka := prefillAndDecode(t, p, ws, 160)
			t.Setenv(cuda.EnvBlockGemm, "0")
			b, kb := prefillAndDecode(t, p, ws, 160)
			if ka != nil {
				blocks := func(k map[string]int) int {
					return k["fast_gemm_blk"] + k["fast_gemm_blk_f32"] + k["fast_gemm_stage_f32"] + k["fast_gemm_stage_f32_b2"]
				}
				if blocks(ka) == 0 || blocks(kb) != 0 {
					t.Errorf("the block products ran %d times, and %d times with %s=0; want > 0 and 0", blocks(ka),
						blocks(kb), cuda.EnvBlockGemm)
				}
			}
			if len(a) != 162 || len(b) != 162 {
				t.Fatalf("%d and %d logits rows, want 162", len(a), len(b))
			}
			sameLogits(t, a, b, "with the block products", "without")
		})
	}
}

// TestStageF32MatchesBlock: products of float32 weights with more than 32 rows run on
// fast_gemm_blk_f32 or on the staged forms (the weights staged in shared memory, split
// where they are multiplied): by default the two-block staged form from 128 rows and
// fast_gemm_blk_f32 below, with DEEPINFER_CUDA_STAGE_F32 "0" fast_gemm_blk_f32, "1" and
// "2" a staged form always. All must give the same values as each other and as
// fast_gemm_m4_f32's (DEEPINFER_CUDA_BLOCK_GEMM=0) bit for bit: a prefill of n tokens
// and two decode steps on tiny-v4-dev (float32 weights), every logits row compared
// exactly, at n = 160 (two blocks of rows, the second partial; the default's staged
// side) and n = 100 (its fast_gemm_blk_f32 side).
func TestStageF32MatchesBlock(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v4-dev")
	kernels := []string{"fast_gemm_stage_f32", "fast_gemm_blk_f32", "fast_gemm_stage_f32_b2"}
	for _, n := range []int{160, 100} {
		def := "fast_gemm_stage_f32_b2"
		if n < 128 {
			def = "fast_gemm_blk_f32"
		}
		runs := []struct {
			env, val, kernel string
		}{{cuda.EnvStageF32, "1", "fast_gemm_stage_f32"}, {cuda.EnvStageF32, "", def}, {cuda.EnvStageF32, "0", "fast_gemm_blk_f32"},
			{cuda.EnvStageF32, "2", "fast_gemm_stage_f32_b2"}, {cuda.EnvBlockGemm, "0", "fast_gemm_m4_f32"}}
		var first [][]float32
		for i, r := range runs {
			t.Setenv(cuda.EnvStageF32, "")
			t.Setenv(cuda.EnvBlockGemm, "")
			t.Setenv(r.env, r.val)
			got, k := prefillAndDecode(t, p, ws, n)
			if len(got) != n+2 {
				t.Fatalf("n %d, %s=%q: %d logits rows, want %d", n, r.env, r.val, len(got), n+2)
			}
			if k != nil {
				others := 0
				for _, o := range kernels {
					if o != r.kernel {
						others += k[o]
					}
				}
				if k[r.kernel] == 0 || others != 0 {
					t.Errorf("n %d, %s=%q: %s ran %d times, the other block kernels %d; want > 0 and 0", n, r.env, r.val,
						r.kernel, k[r.kernel], others)
				}
			}
			if i == 0 {
				first = got
				continue
			}
			sameLogits(t, first, got, "with fast_gemm_stage_f32", "with "+r.kernel)
		}
	}
}

// TestFastWideProductsMatchBlock: V4.1's products of bf16 activations with more than 32
// rows run on fast_gemm_wide (a launch block sharing 64 widened weight rows and 128 rows
// of x) and must give fast_gemm_blk's values (DEEPINFER_CUDA_WIDE_GEMM=0) and
// fast_gemm_m4's (DEEPINFER_CUDA_BLOCK_GEMM=0) bit for bit: a 110-token prefill (the
// fixtures hold 128 positions: one block of rows, its last warp's last tile partial;
// TestFastProductsOnSimulatedLanes has blocks past the first) and two decode steps,
// every logits row compared exactly, on both V4.1 fixtures.
func TestFastWideProductsMatchBlock(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			// the LM head and the FP8 products on the mma.sync kernels in all three runs
			// (their wgmma forms, near rather than equal, have TestHeadWGNearStaged and
			// TestWideWGNearWide)
			t.Setenv(cuda.EnvHeadWG, "0")
			t.Setenv(cuda.EnvWideWG, "0")
			t.Setenv(cuda.EnvWideGemm, "")
			a, ka := prefillAndDecode(t, p, ws, 110)
			t.Setenv(cuda.EnvWideGemm, "0")
			b, kb := prefillAndDecode(t, p, ws, 110)
			t.Setenv(cuda.EnvWideGemm, "")
			t.Setenv(cuda.EnvBlockGemm, "0")
			c, kc := prefillAndDecode(t, p, ws, 110)
			if ka != nil {
				if ka["fast_gemm_wide"] == 0 || kb["fast_gemm_wide"] != 0 || kb["fast_gemm_blk"] == 0 || kc["fast_gemm_wide"]+kc["fast_gemm_blk"] != 0 {
					t.Errorf("fast_gemm_wide ran %d / %d / %d times and fast_gemm_blk %d / %d / %d (default, %s=0, %s=0); want wide, then blk, then neither",
						ka["fast_gemm_wide"], kb["fast_gemm_wide"], kc["fast_gemm_wide"], ka["fast_gemm_blk"], kb["fast_gemm_blk"], kc["fast_gemm_blk"],
						cuda.EnvWideGemm, cuda.EnvBlockGemm)
				}
			}
			if len(a) != 112 || len(b) != 112 || len(c) != 112 {
				t.Fatalf("%d, %d and %d logits rows, want 112", len(a), len(b), len(c))
			}
			sameLogits(t, a, b, "with the wide products", "with fast_gemm_blk")
			sameLogits(t, a, c, "with the wide products", "with fast_gemm_m4")
		})
	}
}

// TestXExactSameValues: V4.1's products whose activations are bf16 values (qlinear's
// bf16 and MXFP8 activations, the experts' MXFP8 x and hidden rows) leave out the mma
// of the activations' lo halves, which are zero; the logits must be those of the whole
// chain (DEEPINFER_CUDA_XEXACT=0) bit for bit, over an 80-token prefill (the block and
// four-tile products) and two decode steps (one-tile products). With -device gpu this
// checks the real mma: adding a zero product leaves the accumulator as it is.
func TestXExactSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			// the LM head and the wide FP8 products on the mma.sync kernels both times
			// (their wgmma forms run only on bf16-valued activations, so only with xexact
			// on)
			t.Setenv(cuda.EnvHeadWG, "0")
			t.Setenv(cuda.EnvWideWG, "0")
			a, _, b, _ := offAndOn(t, p, ws, cuda.EnvXExact, 80)
			sameLogits(t, a, b, "with the lo mma ("+cuda.EnvXExact+"=0)", "without")
		})
	}
}

// TestWideWGNearWide: by default the FP8 products of V4.1's prefills (bf16 activations,
// more than 32 rows, one group) run fast_gemm_wg_fp8a (wgmma on the GPU: the tensor
// cores' order inside a 16-value step), with DEEPINFER_CUDA_WIDE_WG=0 fast_gemm_wide
// (the mma.sync chain); a 110-token prefill on both V4.1 fixtures gives logits rows
// within 2e-6 of each other relative to the row's largest magnitude (the emulated
// device and the H200, run 24, both measured 0 — the activations' quantization absorbs
// the products' differences —; 2e-6 is TestHeadWGNearStaged's gate; the products' own
// distance is TestWGFP8NearWide's), and on the emulated device the launch
// choice is checked (wgmma for the products of rows of K values, fast_gemm_wide for the
// rest, none in batch-invariant mode: TestDeviceBatchInvariance). The grouped bf16
// products stay on fast_gemm_wide both times (DEEPINFER_CUDA_WG_BF16W=0): their wgmma
// order may move a key across the indexer's top-k (TestWGBF16WNearCPU checks them).
func TestWideWGNearWide(t *testing.T) {
	t.Setenv(cuda.EnvWGBF16W, "0")
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			const n = 110
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvWideWG, "0", "", n)
			wg := func(k map[string]int) int {
				return k["fast_gemm_wg_fp8"] + k["fast_gemm_wg_fp8a"] + k["fast_gemm_wg_fp8n"]
			}
			if ka != nil && (wg(ka) != 0 || wg(kb) == 0 || wg(kb)+kb["fast_gemm_wide"] != ka["fast_gemm_wide"]) {
				t.Errorf("fast_gemm_wg_fp8[a] ran %d / %d times and fast_gemm_wide %d / %d (%s=0 / default); want 0, some, and as many wide products in all",
					wg(ka), wg(kb), ka["fast_gemm_wide"], kb["fast_gemm_wide"], cuda.EnvWideWG)
			}
			worst, _ := logitsApart(a, b, n)
			t.Logf("worst difference %.3g of the row's largest logit", worst)
			if worst > 2e-6 {
				t.Errorf("prefill logits %.3g apart (relative to the row's largest), want within 2e-6", worst)
			}
		})
	}
}

// logitsApart: the largest difference of the first n rows' logits in a and b, relative
// to the row's largest magnitude in a, and how many logits differ.
func logitsApart(a, b [][]float32, n int) (worst float64, differ int) {
	for i := range n {
		big, d := 0.0, 0.0
		for j := range a[i] {
			big = math.Max(big, math.Abs(float64(a[i][j])))
			e := math.Abs(float64(a[i][j]) - float64(b[i][j]))
			d = math.Max(d, e)
			if e > 0 {
				differ++
			}
		}
		if r := d / math.Max(big, 1e-30); r > worst {
			worst = r
		}
	}
	return worst, differ
}

// TestWGBF16WNearCPU: by default the wide products of bf16 weights and bf16 activations
// (V4.1's wo_a, in groups; each group's weight rows a multiple of 64, K of 64) run
// fast_gemm_wg_bf16w, with DEEPINFER_CUDA_WG_BF16W=0 fast_gemm_wide (the emulated device
// counts the launches moved in a 110-token prefill), and the grouped products of both
// V4.1 fixtures, fed the cpu target's inputs through a prefill of 100 + 6 tokens (where
// the wide kernels run), stay within 5e-7 of the cpu target's values (about twice the
// emulated device's 2.3e-7 with the switch, 1.8e-7 without; an H100 3.24e-7 in run
// 39b; the other instructions are logged, not gated). (Not
// the logits of two whole runs: another order of the same sums may move a key across the
// indexer's top-k, which changes the attention after it by far more than the products'
// own distance — on tiny-v41-dev2, 0.47 of the row's largest logit on the emulated device.)
func TestWGBF16WNearCPU(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			_, ka, _, kb := offAndOn(t, p, ws, cuda.EnvWGBF16W, 110)
			if ka != nil {
				if msg := someMoved(ka, kb, "fast_gemm_wide", "fast_gemm_wg_bf16w"); msg != "" {
					t.Error(msg)
				}
			}
			t.Setenv(cuda.EnvWGBF16W, "")
			cfg := checkConfig{numerics: targets.NumericsFast, tol: 5e-7, force: true, prompt: 100, gate: []string{"grouped_linear"}}
			if worst := checkInstructions(t, filepath.Base(m.dir), cfg); worst == 0 {
				t.Fatal("every instruction equal to the cpu target's: the fast products did not run")
			}
		})
	}
}

// TestWGN64NearWG: by default the wide FP8 products of at most 64 rows (a 50-token
// prefill of both V4.1 fixtures, then two decode steps) run fast_gemm_wg_fp8n (blocks of
// 64 x rows, wgmma m64n64k16), with DEEPINFER_CUDA_WG_N64=0 fast_gemm_wg_fp8a, every
// launch moved (the emulated device counts them), and the logits are the same bit for
// bit (the emulated kernels are one loop; on the GPU m64n64k16 sums each output in
// m64n128k16's order: an H100 in run 39 gave every logit equal).
func TestWGN64NearWG(t *testing.T) {
	const n = 50
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := offAndOn(t, p, ws, cuda.EnvWGN64, n)
			if ka != nil {
				if msg := moved(ka, kb, "fast_gemm_wg_fp8a", "fast_gemm_wg_fp8n"); msg != "" {
					t.Error(msg)
				}
			}
			if worst, differ := logitsApart(a, b, n+2); differ != 0 {
				t.Errorf("%d logits differ (worst %.3g of the row's largest); want the same bits", differ, worst)
			}
		})
	}
}

// TestHeadWGPairSameValues: with DEEPINFER_CUDA_HEAD_WG=pair V4.1's LM head (a 110-token
// prefill's rows) runs fast_gemm_wg_f32p3w (fast_gemm_wg_f32p with a ring of three x
// buffers and two warpgroups a launch block) instead of fast_gemm_wg_f32p, every launch
// moved, and the logits of both V4.1 fixtures are the default's bit for bit (the same
// products in the same order: on the GPU the device code of both, run 40 on an H100; on
// the emulated device the launch choice; the device code on the host's lanes, copies
// landing as late as a wait allows and as early as issued:
// TestFastProductsOnSimulatedLanes).
func TestHeadWGPairSameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvHeadWG, "", "pair", 110, "fast_gemm_wg_f32p (the default)", "fast_gemm_wg_f32p3w ("+cuda.EnvHeadWG+"=pair)",
		func(ka, kb map[string]int) string { return moved(ka, kb, "fast_gemm_wg_f32p", "fast_gemm_wg_f32p3w") })
}

// TestWGProductFormsSameValues: the opt-in forms of the wide products (a 110-token
// prefill's, more than 64 rows) each run in place of the default's kernel, every launch
// moved, and give the logits of both V4.1 fixtures bit for bit (the same products in the
// same order: on the GPU the device code of both; on the emulated device the launch
// choice; the device code on the host's lanes: TestFastProductsOnSimulatedLanes):
//   - DEEPINFER_CUDA_WG_FP8=a2: fast_gemm_wg_fp8a2 (two warpgroups a launch block
//     sharing the x rows) for fast_gemm_wg_fp8a;
//   - DEEPINFER_CUDA_WG_FP8=p: fast_gemm_wg_fp8p (a producer warpgroup widening into a
//     ring two consumer warpgroups multiply from) for fast_gemm_wg_fp8a;
//   - DEEPINFER_CUDA_WG_BF16W=4: fast_gemm_wg_bf16w4 (the same code under a bound of
//     four blocks a multiprocessor) for fast_gemm_wg_bf16w (V4.1's grouped wo_a);
//   - DEEPINFER_CUDA_WG_BF16W=p: fast_gemm_wg_bf16wp (fast_gemm_wg_fp8p's blocks, the
//     producer copying the bf16 weight rows) for fast_gemm_wg_bf16w.
func TestWGProductFormsSameValues(t *testing.T) {
	for _, c := range []struct {
		env, value, from, to string
		moves                func(ka, kb map[string]int, from, to string) string
	}{
		{cuda.EnvWGFP8, "a2", "fast_gemm_wg_fp8a", "fast_gemm_wg_fp8a2", moved},
		{cuda.EnvWGFP8, "p", "fast_gemm_wg_fp8a", "fast_gemm_wg_fp8p", moved},
		{cuda.EnvWGBF16W, "4", "fast_gemm_wg_bf16w", "fast_gemm_wg_bf16w4", moved},
		// (the fixtures' products whose groups are not multiples of 128 weight rows keep
		// fast_gemm_wg_bf16w)
		{cuda.EnvWGBF16W, "p", "fast_gemm_wg_bf16w", "fast_gemm_wg_bf16wp", someMoved},
	} {
		t.Run(c.to, func(t *testing.T) {
			sameAcross(t, v41Fixtures, c.env, "", c.value, 110, c.from+" (the default)", c.to+" ("+c.env+"="+c.value+")",
				func(ka, kb map[string]int) string { return c.moves(ka, kb, c.from, c.to) })
		})
	}
}

// TestHeadWGPipeSameValues: by default V4.1's LM head runs fast_gemm_wg_f32p (two sets
// of A fragments, the next step's split while a step's products run), with
// DEEPINFER_CUDA_HEAD_WG=1 fast_gemm_wg_f32, the same products in the same order: the
// logits of a 110-token prefill and two decode steps are the same bit for bit on both
// V4.1 fixtures (on the GPU, the device code of both; on the emulated device, the launch
// choice; the device code on the host's lanes: TestFastProductsOnSimulatedLanes).
func TestHeadWGPipeSameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvHeadWG, "1", "", 110, "fast_gemm_wg_f32 ("+cuda.EnvHeadWG+"=1)", "fast_gemm_wg_f32p (the default)",
		func(ka, kb map[string]int) string { return someMoved(ka, kb, "fast_gemm_wg_f32", "fast_gemm_wg_f32p") })
}

// v41Fixtures are the two V4.1 fixtures the whole-step comparisons run on.
var v41Fixtures = []struct{ name, dir string }{
	{"tiny-v41-dev2", "../../testdata/tiny-v41-dev2"}, {"tiny-v41-dev", "../../testdata/tiny-v41-dev"},
}

// offAndOn is twoRuns with env "0", then unset (the default).
func offAndOn(t *testing.T, p *plan.Plan, ws []targets.Weight, env string, n int) (a [][]float32, ka map[string]int, b [][]float32, kb map[string]int) {
	t.Helper()
	return twoRuns(t, p, ws, env, "0", "", n)
}

// twoRuns runs prefillAndDecode of n tokens with env set to first, then to second: both
// runs' logits (n + 2 rows each, checked) and kernel counts.
func twoRuns(t *testing.T, p *plan.Plan, ws []targets.Weight, env, first, second string, n int) (a [][]float32, ka map[string]int, b [][]float32, kb map[string]int) {
	t.Helper()
	t.Setenv(env, first)
	a, ka = prefillAndDecode(t, p, ws, n)
	t.Setenv(env, second)
	b, kb = prefillAndDecode(t, p, ws, n)
	if len(a) != n+2 || len(b) != n+2 {
		t.Fatalf("%d and %d logits rows, want %d", len(a), len(b), n+2)
	}
	return a, ka, b, kb
}

// sameLogits requires two runs' logits to be the same bit for bit.
func sameLogits(t *testing.T, a, b [][]float32, as, bs string) {
	t.Helper()
	for i := range a {
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				t.Fatalf("row %d, logit %d: %g %s, %g %s", i, j, a[i][j], as, b[i][j], bs)
			}
		}
	}
}

// TestQuantSplitSameValues: V4.1's activation quantization and its split into bf16
// halves run as one launch (fast_quant_split: qlinear's products and the experts' x and
// hid) and must give the two launches' values (dense_quant then fast_split or
// fast_split_fp4; DEEPINFER_CUDA_QUANT_SPLIT=0) bit for bit: an 80-token prefill and
// two decode steps on both V4.1 fixtures, with the FP4 expert tiles (their pair order)
// and without (DEEPINFER_CUDA_FP4_TILES=0: fast_split's order), every logits row
// compared exactly; on the emulated device the launches are counted too.
func TestQuantSplitSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		for _, tiles := range []string{"", "0"} {
			t.Run(m.name+"/fp4-tiles="+tiles, func(t *testing.T) {
				p, ws := cuda.CompileDir(t, m.dir)
				t.Setenv(cuda.EnvFP4Tiles, tiles)
				a, ka, b, kb := offAndOn(t, p, ws, cuda.EnvQuantSplit, 80)
				if ka != nil {
					split := "fast_split_fp4"
					if tiles == "0" {
						split = "fast_split"
					}
					// unfused: every quantization a dense_quant; fused: none, and no split
					// of the experts' order left
					if ka["fast_quant_split"] != 0 || ka["dense_quant"] == 0 || kb["dense_quant"] != 0 ||
						kb["fast_quant_split"] != ka["dense_quant"] || ka[split] == 0 || (tiles == "" && kb[split] != 0) {
						t.Errorf("launches: fast_quant_split %d / %d, dense_quant %d / %d, %s %d / %d (two launches / one)",
							ka["fast_quant_split"], kb["fast_quant_split"], ka["dense_quant"], kb["dense_quant"], split, ka[split], kb[split])
					}
				}
				sameLogits(t, a, b, "with dense_quant and the split ("+cuda.EnvQuantSplit+"=0)", "with fast_quant_split")
			})
		}
	}
}

// TestFP4XESameValues: by default the FP4 register tiles of V4.1's bf16 activations
// run compiled for them with their halves copied a stage ahead (fast_moe_*_fp4_rega);
// with DEEPINFER_CUDA_FP4_XE=0 they run the general ones (_reg8), with =x the default
// of runs 22 to 34 (_regx), and the logits are the same bit for bit.
func TestFP4XESameValues(t *testing.T) {
	for _, c := range []struct{ value, to string }{{"0", "_reg8"}, {"x", "_regx"}} {
		t.Run(c.value, func(t *testing.T) { sameWithVariant(t, cuda.EnvFP4XE, c.value, "_rega", c.to) })
	}
}

// TestFP4R8SameValues: the V4-Flash-format model's FP4 register tiles run as _reg8 by
// default (rows g+8 found from rows g) and as _reg with DEEPINFER_CUDA_FP4_R8=0; the
// logits are the same bit for bit.
// With =a they run as _reg8a (the halves copied two steps ahead), the same logits too.
func TestFP4R8SameValues(t *testing.T) {
	for _, c := range []struct{ value, to string }{{"0", "_reg"}, {"a", "_reg8a"}} {
		t.Run(c.value, func(t *testing.T) {
			sameAcross(t, []struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, cuda.EnvFP4R8, "", c.value, 80,
				"fast_moe_*_fp4_reg8 (the default)", "fast_moe_*_fp4"+c.to+" ("+cuda.EnvFP4R8+"="+c.value+")",
				func(ka, kb map[string]int) string {
					return moved(ka, kb, "fast_moe_up_fp4_reg8", "fast_moe_up_fp4"+c.to) + moved(ka, kb, "fast_moe_down_fp4_reg8", "fast_moe_down_fp4"+c.to)
				})
		})
	}
}

// TestFP4Reg8aByStepSize: by default V4's FP4 register tiles run as _reg8a for steps of
// (128, 512] tokens and as _reg8 otherwise (reg8aRows; moved to (60, 512] here so that the
// 80-token prefill takes _reg8a and the one-row decode steps _reg8), with the logits of
// DEEPINFER_CUDA_FP4_R8=1 (_reg8 at every size) bit for bit.
func TestFP4Reg8aByStepSize(t *testing.T) {
	defer cuda.SetReg8aRows(60, 512)()
	sameAcross(t, []struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, cuda.EnvFP4R8, "1", "", 80,
		"fast_moe_*_fp4_reg8 (=1)", "the default (_reg8a for the prefill)",
		func(ka, kb map[string]int) string {
			msg := someMoved(ka, kb, "fast_moe_up_fp4_reg8", "fast_moe_up_fp4_reg8a") + someMoved(ka, kb, "fast_moe_down_fp4_reg8", "fast_moe_down_fp4_reg8a")
			if kb["fast_moe_up_fp4_reg8"] == 0 {
				msg += "the decode steps left _reg8. "
			}
			return msg
		})
}

// sameWithVariant runs an 80-token prefill and two decode steps of both V4.1 fixtures
// by default and with env=value, which must run the FP4 tiles the default runs on the
// kernels named from (fast_moe_*_fp4 + from) on those named to instead, as often
// (counted where the device counts launches), and give the same logits bit for bit.
func sameWithVariant(t *testing.T, env, value, from, to string) {
	sameAcross(t, v41Fixtures, env, "", value, 80, "fast_moe_*_fp4"+from, "fast_moe_*_fp4"+to+" ("+env+"="+value+")",
		func(ka, kb map[string]int) string {
			return moved(ka, kb, "fast_moe_up_fp4"+from, "fast_moe_up_fp4"+to) + moved(ka, kb, "fast_moe_down_fp4"+from, "fast_moe_down_fp4"+to)
		})
}

// someMoved is "" when some of kernel from's launches in the first of two runs (ka)
// are kernel to's in the second (kb) and the rest stay, launch for launch; else what
// differs.
func someMoved(ka, kb map[string]int, from, to string) string {
	if ka[to] != 0 || kb[to] == 0 || kb[from]+kb[to] != ka[from] {
		return fmt.Sprintf("%s / %s ran %d / %d times in the first run and %d / %d in the second; want some launches moved. ",
			from, to, ka[from], ka[to], kb[from], kb[to])
	}
	return ""
}

// moved is "" when every launch of kernel from in the first of two runs (ka) is a
// launch of kernel to in the second (kb), and there are some; else what differs.
func moved(ka, kb map[string]int, from, to string) string {
	if ka[from] == 0 || ka[to] != 0 || kb[from] != 0 || kb[to] != ka[from] {
		return fmt.Sprintf("%s / %s ran %d / %d times in the first run and %d / %d in the second; want every launch moved. ",
			from, to, ka[from], ka[to], kb[from], kb[to])
	}
	return ""
}

// sameAcross runs an n-token prefill and two decode steps of each model with env=first,
// then env=second (twoRuns; "" unsets it): the logits must be the same bit for bit
// (as and bs name the two runs), and where the device counts launches, counts(first's,
// second's) must return "" (else what is wrong).
func sameAcross(t *testing.T, models []struct{ name, dir string }, env, first, second string, n int, as, bs string,
	counts func(ka, kb map[string]int) string) {
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := twoRuns(t, p, ws, env, first, second, n)
			sameLogits(t, a, b, as, bs)
			if ka != nil {
				if msg := counts(ka, kb); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// TestFP4WideSameValues: by default the FP4 tiles of steps with many slots an expert (an
// 80-token prefill of the V4.1 fixtures: 160 slots over 4 experts) run 64 slots a pass
// (fast_moe_*_fp4_wide) and the decode steps keep the register tiles; the logits are
// DEEPINFER_CUDA_FP4_WIDE=0's (the register tiles everywhere) bit for bit (on the GPU,
// the device branch; its chains on host fibers: TestFP4DeviceCodeOnHostFibers).
func TestFP4WideSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvFP4Wide, "0", "", 80)
			if ka != nil {
				for _, k := range []string{"fast_moe_up_fp4", "fast_moe_down_fp4"} {
					// the prefill's layers on the wide tiles, the decode steps' on the register ones
					if ka[k+"_wide"] != 0 || kb[k+"_wide"] == 0 || kb[k+"_rega"] == 0 || ka[k+"_rega"] <= kb[k+"_rega"] {
						t.Errorf("%s: wide %d / %d, register %d / %d launches (%s=0 / default)", k, ka[k+"_wide"], kb[k+"_wide"],
							ka[k+"_rega"], kb[k+"_rega"], cuda.EnvFP4Wide)
					}
				}
			}
			sameLogits(t, a, b, "with the register tiles ("+cuda.EnvFP4Wide+"=0)", "with the wide tiles")
		})
	}
}

// TestFP4WideLSameValues: V4's float32 activations take the wide tiles' form for them
// (fast_moe_*_fp4_widel: 32 slots a pass, both halves) in steps with many slots an
// expert (a 160-token prefill of V4 in V4-Flash's formats: 320 slots over 8 experts, two
// passes of each), where DEEPINFER_CUDA_FP4_WIDE=0 runs the register tiles (_reg8a at
// that step size), and the decode steps keep _reg8; the logits are the same bit for bit
// (on the GPU, the device branch; its chains on host fibers: TestFP4DeviceCodeOnHostFibers).
func TestFP4WideLSameValues(t *testing.T) {
	sameAcross(t, []struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, cuda.EnvFP4Wide, "0", "", 160,
		"the register tiles ("+cuda.EnvFP4Wide+"=0)", "the wide tiles (fast_moe_*_fp4_widel)",
		func(ka, kb map[string]int) string {
			msg := ""
			for _, k := range []string{"fast_moe_up_fp4", "fast_moe_down_fp4"} {
				msg += moved(ka, kb, k+"_reg8a", k+"_widel")
				if ka[k+"_reg8"] == 0 || ka[k+"_reg8"] != kb[k+"_reg8"] {
					msg += fmt.Sprintf("%s_reg8 (the decode steps) ran %d / %d times; want the same, not 0. ", k, ka[k+"_reg8"], kb[k+"_reg8"])
				}
			}
			return msg
		})
}

// TestHeadWGNearStaged: by default the LM head of V4.1's prefills (float32 weights, bf16
// activations, more than 32 logits rows) runs fast_gemm_wg_f32p (wgmma on the GPU: the
// tensor cores' order inside a 16-value step, not the mma.sync chain), and with
// DEEPINFER_CUDA_HEAD_WG=0 the mma.sync kernels; the logits are near each other: the same split operands summed
// in another order, so every logit within 2e-6 of the row's largest magnitude (about
// twice the worst seen: emulated 9.6e-7, the H200 in runs 23b and 24 5.1e-7; a float32 sum's
// worst case over K = the hidden size, K·2^-24, is 1.5e-5), and not all equal on the
// GPU (the kernel ran); batch-invariant mode keeps the mma.sync kernels (TestDeviceBatchInvariance); a 110-token prefill on both V4.1 fixtures (the decode steps
// after it may sample other tokens, so only the prefill's rows are compared). On the
// emulated device the kernel's serial loop and the launch choice are checked.
func TestHeadWGNearStaged(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			const n = 110
			const bound = 2e-6
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvHeadWG, "0", "", n)
			if len(a) != n+2 || len(b) != n+2 {
				t.Fatalf("%d and %d logits rows, want %d", len(a), len(b), n+2)
			}
			if ka != nil && (ka["fast_gemm_wg_f32p"] != 0 || kb["fast_gemm_wg_f32p"] == 0) {
				t.Errorf("fast_gemm_wg_f32p ran %d times with %s=0 and %d by default; want 0 and some", ka["fast_gemm_wg_f32p"],
					cuda.EnvHeadWG, kb["fast_gemm_wg_f32p"])
			}
			worst, differ := 0.0, 0
			for i := range n {
				big := 0.0
				for _, v := range a[i] {
					big = math.Max(big, math.Abs(float64(v)))
				}
				for j := range a[i] {
					d := math.Abs(float64(a[i][j]) - float64(b[i][j]))
					if d > 0 {
						differ++
					}
					if r := d / math.Max(big, 1e-30); r > worst {
						worst = r
					}
					if d > big*bound {
						t.Fatalf("row %d, logit %d: %g with %s=0, %g by default (row's largest magnitude %g)", i, j, a[i][j],
							cuda.EnvHeadWG, b[i][j], big)
					}
				}
			}
			t.Logf("worst difference %.3g of the row's largest logit; %d logits differ", worst, differ)
			if ka == nil && differ == 0 {
				t.Error("every logit equal to the mma.sync kernels' on the GPU: the wgmma kernel did not run")
			}
		})
	}
}

// TestWGRLogits: by default the products of bf16 or FP8 weights with more than 32 rows
// of activations in two halves (V4's LM head and FP8 linear layers in V4-Flash's
// formats; one group, rows of K values) run fast_gemm_wg_bf16 and fast_gemm_wg_fp8r
// (wgmma on the GPU: the tensor cores' order inside a 16-value step), with
// DEEPINFER_CUDA_WG_BF16=0 and DEEPINFER_CUDA_WG_FP8R=0 fast_gemm_blk (the mma.sync
// chain); a 110-token prefill on tiny-v4-dev in V4-Flash's formats gives logits within
// 3e-5 of each other relative to the row's largest magnitude (twice the emulated
// device's 1.4e-5 and the H200's 1.52e-5 in run 25b: the same operands summed in
// another order, in the LM head and the products before it, whose differences the
// layers carry; the products' own distance is TestWGRNearBlk's), and on the emulated
// device the launch choice is checked (both kernels by default, together as many
// launches as fast_gemm_blk's without them, the FP8 one's activations split by
// fast_split_wg; none in batch-invariant mode: TestDeviceBatchInvariance).
func TestWGRLogits(t *testing.T) {
	p, ws := cuda.CompileDir(t, quantizedV4(t))
	const n = 110
	t.Setenv(cuda.EnvWGFP8R, "0")
	t.Setenv(cuda.EnvWGBF16, "0")
	a, ka := prefillAndDecode(t, p, ws, n)
	t.Setenv(cuda.EnvWGFP8R, "")
	t.Setenv(cuda.EnvWGBF16, "")
	b, kb := prefillAndDecode(t, p, ws, n)
	if len(a) != n+2 || len(b) != n+2 {
		t.Fatalf("%d and %d logits rows, want %d", len(a), len(b), n+2)
	}
	bf, f8 := "fast_gemm_wg_bf16", "fast_gemm_wg_fp8r"
	if ka != nil && (ka[bf]+ka[f8] != 0 || kb[bf] == 0 || kb[f8] == 0 || kb[bf]+kb[f8]+kb["fast_gemm_blk"] != ka["fast_gemm_blk"] ||
		kb["fast_split_wg"] != kb[f8] || ka["fast_split_wg"] != 0) {
		t.Errorf("%s / %s ran %d / %d times without them and %d / %d by default, fast_gemm_blk %d / %d, fast_split_wg %d / %d; want none, then both, as many block products in all, and a fast_split_wg for each %s",
			bf, f8, ka[bf], ka[f8], kb[bf], kb[f8], ka["fast_gemm_blk"], kb["fast_gemm_blk"], ka["fast_split_wg"], kb["fast_split_wg"], f8)
	}
	worst, differ := logitsApart(a, b, n)
	t.Logf("worst difference %.3g of the row's largest logit; %d logits differ", worst, differ)
	if worst > 3e-5 {
		t.Errorf("prefill logits %.3g apart (relative to the row's largest), want within 3e-5", worst)
	}
	if ka == nil && differ == 0 {
		t.Error("every logit equal to the mma.sync kernels' on the GPU: the wgmma kernels did not run")
	}
}

// TestPartTilesSteps: V4's fast mixes and router choose the tiles of 4 tokens × 4 rows
// (mhc_fast_mix_tile, moe_fast_gate_tile) for steps of at least 32 and 128 tokens (a
// 130-token prefill) and a sum a work item for smaller ones (the decode steps), unless
// DEEPINFER_CUDA_PART_TILES=0: the logits of the prefill and two decode steps are the
// same bit for bit either way, on tiny-v4-dev and on V4 in V4-Flash's formats.
func TestPartTilesSteps(t *testing.T) {
	for _, m := range v4Models(t) {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := offAndOn(t, p, ws, cuda.EnvPartTiles, 130)
			if ka != nil {
				for _, k := range []string{"moe_fast_gate", "mhc_fast_mix"} {
					// every layer's prefill moved to the tiles, the decode steps stayed
					if ka[k+"_tile"] != 0 || kb[k+"_tile"] == 0 || kb[k+"_part"] == 0 || kb[k+"_part"]+kb[k+"_tile"] != ka[k+"_part"] ||
						ka[k+"_part"] != 3*kb[k+"_tile"] {
						t.Errorf("%s_part / _tile ran %d / %d times with %s=0 and %d / %d by default; want every prefill launch on the tiles",
							k, ka[k+"_part"], ka[k+"_tile"], cuda.EnvPartTiles, kb[k+"_part"], kb[k+"_tile"])
					}
				}
			}
			sameLogits(t, a, b, "with a sum a work item ("+cuda.EnvPartTiles+"=0)", "with the part tiles")
		})
	}
}

// TestIndexScoreTileSameValues: V4's index scores on att_index_score_t (the default: a
// launch block per row and 64 entries, 64 entries × 64 heads of dots in registers) give
// the logits of att_index_score_w and att_index_score (DEEPINFER_CUDA_INDEX_TILE=0) bit
// for bit, through a 300-token prefill (75 entries a row at the end: a second block of
// entries) and two decode steps, on tiny-v4-dev and V4 in V4-Flash's formats; on the
// emulated device every launch of the two moved to att_index_score_t. The device branch
// runs on host fibers in TestIndexScoreTileOnHostFibers.
func TestIndexScoreTileSameValues(t *testing.T) {
	sameAcross(t, v4Models(t), cuda.EnvIndexTile, "0", "", 300, "with att_index_score and _w ("+cuda.EnvIndexTile+"=0)", "with att_index_score_t",
		func(ka, kb map[string]int) string {
			if ka["att_index_score"] == 0 || ka["att_index_score_w"] == 0 || ka["att_index_score_t"] != 0 ||
				kb["att_index_score_t"] != ka["att_index_score"]+ka["att_index_score_w"] || kb["att_index_score"]+kb["att_index_score_w"] != 0 {
				return fmt.Sprintf("att_index_score / _w / _t ran %d / %d / %d times with %s=0 and %d / %d / %d by default; want every launch on _t",
					ka["att_index_score"], ka["att_index_score_w"], ka["att_index_score_t"], cuda.EnvIndexTile,
					kb["att_index_score"], kb["att_index_score_w"], kb["att_index_score_t"])
			}
			return ""
		})
}

// TestIndexSelectAllSameValues: V4's decode steps rank their index entries by selection
// (att_index_select, att_index_order; the default) and with DEEPINFER_CUDA_INDEX_SELECT=0
// by att_index_rank, and the logits of an 80-token prefill and two decode steps are the
// same bit for bit, on tiny-v4-dev and V4 in V4-Flash's formats; on the emulated device
// every att_index_rank launch moved.
func TestIndexSelectAllSameValues(t *testing.T) {
	sameAcross(t, v4Models(t), cuda.EnvIndexSelect, "0", "", 80, "with att_index_rank ("+cuda.EnvIndexSelect+"=0)", "with the selection",
		func(ka, kb map[string]int) string {
			if ka["att_index_rank"] == 0 || kb["att_index_rank"] != 0 || kb["att_index_select"] != ka["att_index_select"]+ka["att_index_rank"] {
				return fmt.Sprintf("att_index_rank / att_index_select ran %d / %d times with %s=0 and %d / %d by default; want every rank launch a selection",
					ka["att_index_rank"], ka["att_index_select"], cuda.EnvIndexSelect, kb["att_index_rank"], kb["att_index_select"])
			}
			return ""
		})
}

// v4Models are tiny-v4-dev and V4 in V4-Flash's storage formats.
func v4Models(t *testing.T) []struct{ name, dir string } {
	return []struct{ name, dir string }{{"tiny-v4-dev", "../../testdata/tiny-v4-dev"}, {"v4-flash-formats", quantizedV4(t)}}
}

// TestSum4SameValues: the sliced products' sums run four adjacent values a work item
// (fast_sum4) by default and one (fast_sum) with DEEPINFER_CUDA_SUM4=0; the logits are
// the same bit for bit, and each V4.1 fixture's sums moved (some may stay on fast_sum
// where a row's values are not 16-byte pieces; the V4 fixtures' products have no slices).
// The fixtures' one sliced product is the prefill's DSpark input projection after the
// head (the streams' concatenation, K 512, to N 256), whose values reach the drafts, not
// the logits: TestSum4SameSums checks the values kernel against kernel.
func TestSum4SameValues(t *testing.T) {
	sameAcross(t, v41Fixtures, cuda.EnvSum4, "0", "", 80, "fast_sum ("+cuda.EnvSum4+"=0)", "fast_sum4 (the default)",
		func(ka, kb map[string]int) string { return someMoved(ka, kb, "fast_sum", "fast_sum4") })
}

// TestFP4TiledSameLogits: with DEEPINFER_CUDA_FP4_TILED=1 (and =r) the experts' FP4
// weights of tiny-v41-dev (the V4.1 fixture whose expert shapes are whole 16 × 128
// tiles: 128 × 256 and 256 × 128) are uploaded in the tiled layout, the decode steps'
// expert launches run the _regb tiles (_regbd, _regt) and the 80-token prefill's the
// _widet ones; the logits are the row layout's (where the prefill takes the wide tiles
// and the decode steps _rega) bit for bit.
func TestFP4TiledSameLogits(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	for _, c := range []struct{ value, suffix string }{{"1", "_regb"}, {"d", "_regbd"}, {"r", "_regt"}} {
		t.Run(c.suffix, func(t *testing.T) {
			a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvFP4Tiled, "", c.value, 80)
			if ka != nil { // (the GPU records no launch counts)
				for _, k := range []string{"fast_moe_up_fp4", "fast_moe_down_fp4"} {
					if ka[k+c.suffix]+ka[k+"_widet"] != 0 || kb[k+c.suffix] != ka[k+"_rega"] || kb[k+"_widet"] != ka[k+"_wide"] || kb[k+"_rega"]+kb[k+"_wide"] != 0 || ka[k+"_wide"] == 0 {
						t.Errorf("%s: _rega %d / %d, _wide %d / %d, %s %d / %d, _widet %d / %d launches in the row / tiled layout", k,
							ka[k+"_rega"], kb[k+"_rega"], ka[k+"_wide"], kb[k+"_wide"], c.suffix, ka[k+c.suffix], kb[k+c.suffix], ka[k+"_widet"], kb[k+"_widet"])
					}
				}
			}
			sameLogits(t, a, b, "in the row layout", "in the tiled layout ("+cuda.EnvFP4Tiled+"="+c.value+")")
		})
	}
}

// TestFP4TiledRefused: DEEPINFER_CUDA_FP4_TILED=1 (or r) with a program whose FP4
// weights a kernel other than the _regb and _regt tiles would read (tiny-v41-dev in the
// exact mode, or in the fast mode with another tile form asked for) fails to open with
// an error naming the variable, as does a value other than 0, 1 and r.
func TestFP4TiledRefused(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	for _, c := range []struct {
		name, value, other, otherValue string
		numerics                       string
	}{
		{"exact", "1", "", "", targets.NumericsExact},
		{"pipe", "1", cuda.EnvFP4Pipe, "1", targets.NumericsFast},
		{"generic", "1", cuda.EnvFP4Tiles, "0", targets.NumericsFast},
		{"exact, register tiles", "r", "", "", targets.NumericsExact},
		{"bad value", "yes", "", "", targets.NumericsFast},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(cuda.EnvFP4Tiled, c.value)
			if c.other != "" {
				t.Setenv(c.other, c.otherValue)
			}
			r, err := devExec{}.Open(p, ws, targets.Options{Numerics: c.numerics, MaxTokens: 16})
			if err == nil {
				r.Close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), cuda.EnvFP4Tiled) {
				t.Errorf("the error does not name %s: %v", cuda.EnvFP4Tiled, err)
			}
		})
	}
}
