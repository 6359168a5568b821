package cuda_test

import (
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
)

// TestFP4ExpertTilesMatchGeneric: the FP4 experts' tiles (tensorcore_fp4.cu) against
// the generic fast tiles (tensorcore.cu, DEEPINFER_CUDA_FP4_TILES=0) on models with FP4
// experts: one prefill of 80 tokens (so that some expert serves more than the 16 slots
// a block stages at once: 80 tokens × k slots over E experts averages 20 or more) and
// two decode steps, every row's logits compared. Both compute the same exact bf16
// products in float32, summed in different orders. The FP4 run must launch only the
// FP4 tiles and the generic run only the generic ones.
func TestFP4ExpertTilesMatchGeneric(t *testing.T) {
	for _, m := range []struct{ name, dir string }{
		{"tiny-v41-dev2", "../../testdata/tiny-v41-dev2"}, {"tiny-v41-dev", "../../testdata/tiny-v41-dev"},
		{"v4-flash-formats", quantizedV4(t)},
	} {
		model := m.dir
		t.Run(m.name, func(t *testing.T) {
			out, err := compiler.Compile(compiler.Options{ModelDir: model, Target: "h200"})
			if err != nil {
				t.Fatal(err)
			}
			ws, err := vm.LoadWeights(out.Plan, model)
			if err != nil {
				t.Fatal(err)
			}
			run := func(fp4 bool) ([][]float32, map[string]int) {
				if !fp4 {
					t.Setenv(cuda.EnvFP4Tiles, "0")
				} else {
					t.Setenv(cuda.EnvFP4Tiles, "")
				}
				rt, err := cuda.OpenEmulated(out.Plan, ws, targets.Options{Numerics: targets.NumericsFast, MaxTokens: 96}, 4<<30)
				if err != nil {
					t.Fatal(err)
				}
				defer rt.Close()
				st, err := rt.NewState()
				if err != nil {
					t.Fatal(err)
				}
				V := out.Plan.Model.Vocab
				toks := make([]int32, 80)
				for i := range toks {
					toks[i] = int32((i*977 + 13) % V)
				}
				var logits [][]float32
				pos := 0
				for step := 0; step < 3; step++ {
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
				return logits, cuda.KernelRuns(rt)
			}
			a, ka := run(true)
			b, kb := run(false)
			for _, k := range []string{"fast_moe_up_fp4", "fast_moe_down_fp4", "fast_split_fp4"} {
				if ka[k] == 0 || kb[k] != 0 {
					t.Errorf("%s ran %d times with the FP4 tiles, %d without; want > 0 and 0", k, ka[k], kb[k])
				}
			}
			for _, k := range []string{"fast_moe_up", "fast_moe_down"} {
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
			if worst > 1e-5 {
				t.Errorf("worst relative difference %.3g, want ≤ 1e-5", worst)
			}
		})
	}
}
