package cuda_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// openPrefilled opens a fast-mode runtime on p and prefills B sequences of 2 to 6
// tokens in one step, the last row's logits each: the runtime, the sequences' states and
// positions, and the prefill step's logits.
func openPrefilled(t *testing.T, p *plan.Plan, ws []targets.Weight, B int) (*cuda.Runtime, []targets.State, []int, [][]float32, []int32) {
	t.Helper()
	r, err := devExec{}.Open(p, ws, targets.Options{Numerics: targets.NumericsFast, MaxTokens: 32})
	if err != nil {
		t.Fatal(err)
	}
	rt := r.(*cuda.Runtime)
	V := p.Model.Vocab
	states := make([]targets.State, B)
	pos := make([]int, B)
	in := targets.StepIn{Phase: plan.PhasePrefill}
	for b := range states {
		if states[b], err = rt.NewState(); err != nil {
			rt.Close()
			t.Fatal(err)
		}
		n := 2 + b%5
		in.Seqs = append(in.Seqs, targets.SeqIn{State: states[b], N: n})
		for i := 0; i < n; i++ {
			in.Tokens = append(in.Tokens, int32((b*131+i*977+13)%V))
		}
		in.Rows = append(in.Rows, int32(len(in.Tokens)-1))
		in.Sample = append(in.Sample, 0, 0, 0, 0)
		in.Want = append(in.Want, true)
		pos[b] = n
	}
	var o targets.StepOut
	if err := rt.Step(&in, &o); err != nil {
		rt.Close()
		t.Fatal(err)
	}
	return rt, states, pos, o.Logits, o.Tokens
}

// kernelRuns is the emulated device's launch counts (nil on the GPU).
func kernelRuns(rt *cuda.Runtime) map[string]int {
	if *device == "gpu" {
		return nil
	}
	return cuda.KernelRuns(rt)
}

// batchDecode runs B sequences on one fast-mode runtime: a prefill step of every
// sequence's first tokens (a different count each, so rows are not in lockstep), then
// steps decode steps of B one-row sequences; it returns every step's logits rows and,
// on the emulated device, the kernels' launch counts.
func batchDecode(t *testing.T, p *plan.Plan, ws []targets.Weight, B, steps int) ([][]float32, map[string]int) {
	t.Helper()
	rt, states, pos, first, next := openPrefilled(t, p, ws, B)
	defer rt.Close()
	logits := append([][]float32(nil), first...)
	for step := 1; step <= steps; step++ {
		in := targets.StepIn{Phase: plan.PhaseDecode, Tokens: append([]int32(nil), next...)}
		for b := range states {
			in.Seqs = append(in.Seqs, targets.SeqIn{State: states[b], N: 1, Pos: pos[b]})
			in.Rows = append(in.Rows, int32(b))
			in.Sample = append(in.Sample, 0, 0, 0, 0)
			in.Want = append(in.Want, true)
			pos[b]++
		}
		var o targets.StepOut
		if err := rt.Step(&in, &o); err != nil {
			t.Fatal(err)
		}
		logits = append(logits, o.Logits...)
		next = append(next[:0], o.Tokens...)
	}
	return logits, kernelRuns(rt)
}

// verifyGroups prefills B sequences (fast mode) and runs one step of verify groups: each
// sequence rows decode rows at once (targets.SeqIn.Decode, as speculation's groups),
// every row's logits returned; on the emulated device also the launch counts.
func verifyGroups(t *testing.T, p *plan.Plan, ws []targets.Weight, B, rows int) ([][]float32, map[string]int) {
	t.Helper()
	rt, states, pos, logits, _ := openPrefilled(t, p, ws, B)
	defer rt.Close()
	V := p.Model.Vocab
	in := targets.StepIn{Phase: plan.PhaseDecode}
	for b := range states {
		in.Seqs = append(in.Seqs, targets.SeqIn{State: states[b], N: rows, Pos: pos[b], Decode: true})
		for i := 0; i < rows; i++ {
			in.Rows = append(in.Rows, int32(len(in.Tokens)))
			in.Tokens = append(in.Tokens, int32((b*37+i*511+5)%V))
			in.Sample = append(in.Sample, 0, 0, 0, 0)
			in.Want = append(in.Want, true)
		}
	}
	var o targets.StepOut
	if err := rt.Step(&in, &o); err != nil {
		t.Fatal(err)
	}
	return append(logits, o.Logits...), kernelRuns(rt)
}

// TestFastTilesTakeVerifyGroups: a step of speculation's verify groups (several decode
// rows a sequence, each summed as in a one-row step) runs V4.1's router and mixes on
// their tile kernels, as a decode step does, with the lane kernels' logits bit for bit
// (DEEPINFER_CUDA_GEMV_TILES=0 against the default): 12 sequences' prefill, then 4 rows
// each; on the emulated device the launch counts show the verify step took the tiles.
func TestFastTilesTakeVerifyGroups(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			t.Setenv(cuda.EnvGemvTiles, "0")
			a, ka := verifyGroups(t, p, ws, 12, 4)
			t.Setenv(cuda.EnvGemvTiles, "")
			b, kb := verifyGroups(t, p, ws, 12, 4)
			if len(a) != 12+48 || len(b) != len(a) {
				t.Fatalf("%d and %d logits rows, want 60", len(a), len(b))
			}
			sameLogits(t, a, b, "on the lane kernels ("+cuda.EnvGemvTiles+"=0)", "on the tiles")
			if ka == nil {
				return
			}
			for _, k := range []string{"moe_fast_gate41_tile_a", "mhc_fast_mix41_tile"} {
				if ka[k] != 0 || kb[k] == 0 {
					t.Errorf("%s ran %d times with the tiles off and %d times by default; want 0 and some (the verify step)", k, ka[k], kb[k])
				}
			}
			for _, k := range []string{"moe_fast_gate41_part", "mhc_fast_mix41_part"} {
				if kb[k] >= ka[k] {
					t.Errorf("%s ran %d times with the tiles off and %d times by default; want fewer with the tiles", k, ka[k], kb[k])
				}
			}
		})
	}
}

// TestFastTilesMatchLanes: V4.1's exact-order products on their tile kernels
// (moe_fast_gate41_tile_a and mhc_fast_mix41_tile in decode steps of 20 one-row sequences,
// moe_fast_gate41_tile1 in one sequence's decode steps, csa_fast_proj_tile in steps of
// at least 8 rows) give the per-lane kernels' logits bit for bit
// (DEEPINFER_CUDA_TILES=0 and DEEPINFER_CUDA_GEMV_TILES=0, against both unset: the
// default): a 20-sequence prefill step and three decode steps, and a
// 9-token prompt's prefill and two decode steps, compared row by row; on the emulated
// device the launch counts show which kernels each run took. TestTilesDeviceCodeOnHostFibers checks the tiles' device code itself.
func TestFastTilesMatchLanes(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			t.Setenv(cuda.EnvTiles, "0")
			t.Setenv(cuda.EnvGemvTiles, "0")
			a, ka := batchDecode(t, p, ws, 20, 3)
			t.Setenv(cuda.EnvTiles, "")
			t.Setenv(cuda.EnvGemvTiles, "")
			b, kb := batchDecode(t, p, ws, 20, 3)
			if len(a) != 80 || len(b) != 80 {
				t.Fatalf("%d and %d logits rows, want 80", len(a), len(b))
			}
			sameLogits(t, a, b, "on the lane kernels ("+cuda.EnvTiles+"=0)", "on the tiles")
			if ka == nil {
				return
			}
			for _, k := range []string{"moe_fast_gate41_tile_a", "mhc_fast_mix41_tile", "csa_fast_proj_tile"} {
				if ka[k] != 0 || kb[k] == 0 {
					t.Errorf("%s ran %d times with the tiles off and %d times by default; want 0 and some", k, ka[k], kb[k])
				}
			}
			// the lane kernels the tiles replace: decode steps' router and mixes, every
			// step's ratio-1 projections (ratio 2's stay on csa_fast_proj_part)
			for _, k := range []string{"moe_fast_gate41_part", "mhc_fast_mix41_part", "csa_fast_proj_part"} {
				if ka[k] == 0 || kb[k] >= ka[k] {
					t.Errorf("%s ran %d times with the tiles off and %d times by default; want fewer with the tiles", k, ka[k], kb[k])
				}
			}
			// a single sequence's decode steps: the few-token router tile
			c, kc := prefillAndDecode(t, p, ws, 9)
			t.Setenv(cuda.EnvGemvTiles, "0")
			d, kd := prefillAndDecode(t, p, ws, 9)
			sameLogits(t, d, c, "on the staged rows ("+cuda.EnvGemvTiles+"=0), one sequence", "on the tiles")
			if kc != nil && (kc["moe_fast_gate41_tile1"] == 0 || kc["moe_fast_gate41_tile1"] != kd["moe_fast_gate41_rows"] ||
				kd["moe_fast_gate41_tile1"] != 0 || kc["moe_fast_gate41_tile"]+kc["moe_fast_gate41_rows"] != 0) {
				t.Errorf("one sequence's decode steps: moe_fast_gate41_tile1 / _tile / _rows ran %d / %d / %d times with the tiles, %d / %d / %d without; want the rows' launches on tile1",
					kc["moe_fast_gate41_tile1"], kc["moe_fast_gate41_tile"], kc["moe_fast_gate41_rows"],
					kd["moe_fast_gate41_tile1"], kd["moe_fast_gate41_tile"], kd["moe_fast_gate41_rows"])
			}
			t.Logf("launches (lanes → tiles): router %d → %d, mixes %d → %d, projections %d → %d (ratio 2's stay on lanes)",
				ka["moe_fast_gate41_part"], kb["moe_fast_gate41_tile"], ka["mhc_fast_mix41_part"], kb["mhc_fast_mix41_tile"],
				ka["csa_fast_proj_part"], kb["csa_fast_proj_tile"])
		})
	}
}

// TestM1BoundsSameValues: the one-tile FP8 products capped at 128 registers
// (fast_gemm_m1_fp8_b4, the default) give fast_gemm_m1_fp8's (DEEPINFER_CUDA_M1_BOUNDS=0) logits bit for
// bit on the V4-Flash-format model (FP8 128-blocks): a prefill and two decode steps; on
// the emulated device the launch counts show which kernel each run took.
func TestM1BoundsSameValues(t *testing.T) {
	p, ws := cuda.CompileDir(t, quantizedV4(t))
	t.Setenv(cuda.EnvM1Only, "0") // (the capped kernel, not the loop alone: TestM1OnlySameValues)
	t.Setenv(cuda.EnvM1Bounds, "0")
	a, ka := prefillAndDecode(t, p, ws, 8)
	t.Setenv(cuda.EnvM1Bounds, "")
	b, kb := prefillAndDecode(t, p, ws, 8)
	sameLogits(t, a, b, "uncapped ("+cuda.EnvM1Bounds+"=0)", "capped at 128 registers (the default)")
	if ka != nil && (ka["fast_gemm_m1_fp8"] == 0 || ka["fast_gemm_m1_fp8_b4"] != 0 || kb["fast_gemm_m1_fp8_b4"] != ka["fast_gemm_m1_fp8"] || kb["fast_gemm_m1_fp8"] != 0) {
		t.Errorf("fast_gemm_m1_fp8 / _b4 ran %d / %d times uncapped and %d / %d by default; want the same count on the other kernel",
			ka["fast_gemm_m1_fp8"], ka["fast_gemm_m1_fp8_b4"], kb["fast_gemm_m1_fp8"], kb["fast_gemm_m1_fp8_b4"])
	}
}

// TestM1OnlySameValues: by default the one-tile FP8 products whose every tile is whole
// run fast_gemm_m1_fp8_only (the FP8 loop alone in a kernel body; for bf16 activations
// with their values loaded steps ahead, fast_m1_fp8_loop<true>), with DEEPINFER_CUDA_M1_ONLY=0
// fast_gemm_m1_fp8_b4, and the logits are the same bit for bit: the V4-Flash-format
// model (FP8 128-blocks) and both V4.1 fixtures (FP8 32-blocks), a prefill and two
// decode steps; on the emulated device the launch counts show the switch (the products
// that are not whole stay on fast_gemm_m1_fp8_b4).
func TestM1OnlySameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	sameAcross(t, models, cuda.EnvM1Only, "0", "", 8, "fast_gemm_m1_fp8_b4 ("+cuda.EnvM1Only+"=0)", "fast_gemm_m1_fp8_only (the default)",
		func(ka, kb map[string]int) string {
			return someMoved(ka, kb, "fast_gemm_m1_fp8_b4", "fast_gemm_m1_fp8_only")
		})
}

// TestIndexScoreKernelsAgree: V4.1's index scores on the default (fast numerics: steps
// of 64 rows or more on csa_index_score_tc, the dots on the tensor cores settled to the
// cpu's values; smaller steps on csa_index_score_words), on csa_index_score_words alone
// (DEEPINFER_CUDA_INDEX_TC=0), on csa_index_score_tc alone (=1), on csa_index_score_blk
// (DEEPINFER_CUDA_INDEX_WORDS=0) and on csa_index_score (DEEPINFER_CUDA_INDEX_BLOCK=0), and
// with the launch blocks one a row or one a chunk (DEEPINFER_CUDA_INDEX_BLOCKS), give the
// same logits bit for bit (the exact instruction check runs csa_index_score_words): 20
// sequences' prefill and three decode steps on each V4.1 fixture. On the emulated device
// the forms run the same item loop and the launch counts show which kernels each run
// took; on a GPU the device branches are compared. A bad DEEPINFER_CUDA_INDEX_BLOCKS is an
// error. TestTilesDeviceCodeOnHostFibers checks the blocks' device code itself,
// TestIndexScoreTCSameScores the tensor cores' at V4.1-Flash's shape.
func TestIndexScoreKernelsAgree(t *testing.T) {
	const tc, words = "csa_index_score_tc", "csa_index_score_words"
	all := []string{tc, words, "csa_index_score_blk", "csa_index_score"}
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			runs := []struct {
				what    string
				env     []string // (name, value) pairs
				kernels []string // the index-score kernels it runs
			}{
				{"the default (" + tc + " from 64 rows, " + words + " below)", nil, []string{tc, words}},
				{words + " (" + cuda.EnvIndexTC + "=0)", []string{cuda.EnvIndexTC, "0"}, []string{words}},
				{tc + " (" + cuda.EnvIndexTC + "=1)", []string{cuda.EnvIndexTC, "1"}, []string{tc}},
				{"csa_index_score_blk (" + cuda.EnvIndexWords + "=0)", []string{cuda.EnvIndexTC, "0", cuda.EnvIndexWords, "0"}, []string{"csa_index_score_blk"}},
				{"csa_index_score (" + cuda.EnvIndexBlock + "=0)", []string{cuda.EnvIndexTC, "0", cuda.EnvIndexBlock, "0"}, []string{"csa_index_score"}},
				// the launch's blocks: one a row looping over all its chunks, one a chunk
				{words + ", one block a row", []string{cuda.EnvIndexTC, "0", cuda.EnvIndexBlocks, "1"}, []string{words}},
				{words + ", one block a chunk", []string{cuda.EnvIndexTC, "0", cuda.EnvIndexBlocks, "1000000000"}, []string{words}},
				{tc + ", one block a row", []string{cuda.EnvIndexTC, "1", cuda.EnvIndexBlocks, "1"}, []string{tc}},
			}
			var first [][]float32
			for i, r := range runs {
				for j := 0; j < len(r.env); j += 2 {
					t.Setenv(r.env[j], r.env[j+1])
				}
				got, k := batchDecode(t, p, ws, 20, 3)
				for j := 0; j < len(r.env); j += 2 {
					t.Setenv(r.env[j], "")
				}
				if len(got) != 80 {
					t.Fatalf("%s: %d logits rows, want 80", r.what, len(got))
				}
				if i == 0 {
					first = got
				} else {
					sameLogits(t, first, got, runs[0].what, r.what)
				}
				if k == nil {
					continue
				}
				for _, name := range all {
					if n := k[name]; slices.Contains(r.kernels, name) != (n > 0) {
						t.Errorf("%s: %s ran %d times", r.what, name, n)
					}
				}
			}
			for _, bad := range []string{"0", "x", "-4", "1e9"} {
				t.Setenv(cuda.EnvIndexBlocks, bad)
				if _, err := (devExec{}).Open(p, ws, targets.Options{MaxTokens: 256}); err == nil || !strings.Contains(err.Error(), cuda.EnvIndexBlocks) {
					t.Errorf("%s=%s: %v", cuda.EnvIndexBlocks, bad, err)
				}
			}
		})
	}
}

// TestWideMinSameValues: by default a 40-token prefill of the V4.1 fixtures runs its FP8
// products of bf16 activations on fast_gemm_wide (40 > 32 rows); with
// DEEPINFER_CUDA_WIDE_MIN=64 (the limit until run 22) on fast_gemm_blk (the grouped wo_a,
// whose groups the block kernel does not take, on fast_gemm_m4); the logits are the same
// bit for bit (on the GPU, the device code of all three).
func TestWideMinSameValues(t *testing.T) {
	t.Setenv(cuda.EnvWideWG, "0") // fast_gemm_wide, not its wgmma form (TestWideWGNearWide)
	sameAcross(t, v41Fixtures, cuda.EnvWideMin, "64", "", 40, "fast_gemm_blk ("+cuda.EnvWideMin+"=64)", "fast_gemm_wide (the default)",
		func(ka, kb map[string]int) string {
			blk, m4, wide := "fast_gemm_blk", "fast_gemm_m4", "fast_gemm_wide"
			if ka[wide] != 0 || ka[blk] == 0 || kb[blk] != 0 || ka[m4] <= kb[m4] || kb[wide] != ka[blk]+ka[m4]-kb[m4] {
				return fmt.Sprintf("%s / %s / %s ran %d / %d / %d times in the first run and %d / %d / %d in the second; want the block and grouped products moved to %s",
					blk, m4, wide, ka[blk], ka[m4], ka[wide], kb[blk], kb[m4], kb[wide], wide)
			}
			return ""
		})
}

// TestGemvAsyncSameValues: the router's tiles of decode steps run
// moe_fast_gate41_tile_a (the rows staged by cp.async) by default and
// moe_fast_gate41_tile with DEEPINFER_CUDA_GEMV_ASYNC=0, the mixes' tiles
// mhc_fast_mix41_tile by default and mhc_fast_mix41_tile_a with
// DEEPINFER_CUDA_MIX_ASYNC=1, as often, and the logits of a 20-sequence prefill and
// three decode steps are the same bit for bit (on the emulated device the kernels share
// one loop, so there this checks the switches; the device code:
// TestTilesDeviceCodeOnHostFibers; on the GPU both).
func TestGemvAsyncSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka := batchDecode(t, p, ws, 20, 3)
			t.Setenv(cuda.EnvGemvAsync, "0")
			t.Setenv(cuda.EnvMixAsync, "1")
			b, kb := batchDecode(t, p, ws, 20, 3)
			if len(a) != 80 || len(b) != 80 {
				t.Fatalf("%d and %d logits rows, want 80", len(a), len(b))
			}
			sameLogits(t, a, b, "the default tiles", "the router's tiles unstaged, the mixes' staged")
			for _, m := range [][2]string{{"moe_fast_gate41_tile_a", "moe_fast_gate41_tile"}, {"mhc_fast_mix41_tile", "mhc_fast_mix41_tile_a"}} {
				if msg := moved(ka, kb, m[0], m[1]); ka != nil && msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// TestMixTileFormsSameValues: the mixes' tiles of decode steps run bounded to 128
// registers (mhc_fast_mix41_tile_b) in steps of more than 128 tokens and unbounded
// (mhc_fast_mix41_tile) below; DEEPINFER_CUDA_MIX_TILE=b takes the bounded ones and =0
// the unbounded ones at every size. Decode steps of 20 and of 130 sequences (a
// prefill and three decode steps each) give the same logits bit for bit either way,
// with every tile launch moved (on the emulated device the kernels share one loop, so
// there this checks the choice and the launches; the device code:
// TestTilesDeviceCodeOnHostFibers; on the GPU both).
func TestMixTileFormsSameValues(t *testing.T) {
	for _, m := range v41Fixtures {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			for _, c := range []struct {
				seqs     int
				val      string
				from, to string
			}{
				{20, "b", "mhc_fast_mix41_tile", "mhc_fast_mix41_tile_b"},
				{130, "0", "mhc_fast_mix41_tile_b", "mhc_fast_mix41_tile"},
			} {
				a, ka := batchDecode(t, p, ws, c.seqs, 3)
				t.Setenv(cuda.EnvMixTile, c.val)
				b, kb := batchDecode(t, p, ws, c.seqs, 3)
				t.Setenv(cuda.EnvMixTile, "")
				if len(a) != 4*c.seqs || len(b) != 4*c.seqs {
					t.Fatalf("%d and %d logits rows, want %d", len(a), len(b), 4*c.seqs)
				}
				sameLogits(t, a, b, "the default tiles", c.to)
				if msg := moved(ka, kb, c.from, c.to); ka != nil && msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// TestRopeCopy4SameValues: rope's kept channels (when the result is not the input) are
// copied four a work item by default (rope_copy4) and one a work item with
// DEEPINFER_CUDA_ROPE_COPY4=0 (rope_copy), as often, with the same logits bit for bit:
// the V4-Flash-format model and both V4.1 fixtures, a prefill and two decode steps.
func TestRopeCopy4SameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	t.Setenv(cuda.EnvRopeOne, "0") // (the copies as launches of their own)
	sameAcross(t, models, cuda.EnvRopeCopy4, "0", "", 8, "rope_copy ("+cuda.EnvRopeCopy4+"=0)", "rope_copy4 (the default)",
		func(ka, kb map[string]int) string { return moved(ka, kb, "rope_copy", "rope_copy4") })
}

// TestRopeOneSameValues: rope's copies of the kept channels and its rotations run as
// one launch by default (rope_one) and as two with DEEPINFER_CUDA_ROPE_ONE=0 (rope_copy4
// or rope_copy, then rope_apply), with the same logits bit for bit: the V4-Flash-format
// model and both V4.1 fixtures, a prefill and two decode steps, with the copies four
// channels a work item and (DEEPINFER_CUDA_ROPE_COPY4=0) one. Every rope_apply launch
// becomes a rope_one, and no copy launch is left.
func TestRopeOneSameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	for _, copy4 := range []string{"", "0"} {
		t.Run("copy4="+copy4, func(t *testing.T) {
			t.Setenv(cuda.EnvRopeCopy4, copy4)
			copies := "rope_copy4"
			if copy4 == "0" {
				copies = "rope_copy"
			}
			sameAcross(t, models, cuda.EnvRopeOne, "0", "", 8, "two launches ("+cuda.EnvRopeOne+"=0)", "rope_one (the default)",
				func(ka, kb map[string]int) string {
					msg := moved(ka, kb, "rope_apply", "rope_one")
					if ka[copies] == 0 || kb[copies] != 0 || kb["rope_copy"]+kb["rope_copy4"] != 0 {
						msg += fmt.Sprintf("%s ran %d times in two launches and %d in one; want some, then none. ", copies, ka[copies], kb[copies])
					}
					return msg
				})
		})
	}
}

// TestExpand4SameValues: hc_expand runs mhc_expand4 (a work item per token and 4
// channels, every stream's output) by default and mhc_expand (a work item per output
// value) with DEEPINFER_CUDA_EXPAND4=0, as often, with the same logits bit for bit: the
// V4-Flash-format model (V4's order) and both V4.1 fixtures (V4.1's), a prefill and two
// decode steps.
func TestExpand4SameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	sameAcross(t, models, cuda.EnvExpand4, "0", "", 8, "mhc_expand ("+cuda.EnvExpand4+"=0)", "mhc_expand4 (the default)",
		func(ka, kb map[string]int) string { return moved(ka, kb, "mhc_expand", "mhc_expand4") })
}

// TestMoEOutPartsSameValues: the fast mode's expert output runs moe_out_parts (each
// slot's w2·h summed from the tiles' slices as it is read) by default and fast_moe_dsum
// then moe_out with DEEPINFER_CUDA_MOE_OUT_PARTS=0, as often, with the same logits bit
// for bit: the V4-Flash-format model (V4's weighted sum) and both V4.1 fixtures (V4.1's
// bf16 sum in expert order), a prefill and two decode steps.
func TestMoEOutPartsSameValues(t *testing.T) {
	models := append([]struct{ name, dir string }{{"v4-flash-formats", quantizedV4(t)}}, v41Fixtures...)
	sameAcross(t, models, cuda.EnvMoEOutParts, "0", "", 8, "fast_moe_dsum and moe_out ("+cuda.EnvMoEOutParts+"=0)",
		"moe_out_parts (the default)", func(ka, kb map[string]int) string {
			if kb["fast_moe_dsum"] != 0 {
				return "fast_moe_dsum ran by default"
			}
			return moved(ka, kb, "moe_out", "moe_out_parts")
		})
}
