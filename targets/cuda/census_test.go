package cuda_test

import (
	"maps"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cpu"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
)

// TestExpertCensusMatchesCPU: the device's expert census (ids read back after each
// moe_experts instruction) counts, instruction by instruction, the distinct experts the
// cpu target's census counts on the same exact-mode steps (the same routing), and both
// equal a count of the ids each step's moe_experts read (the cpu's operands through a
// Hook); decode steps only, with the census off no counts, and a census step runs
// without graphs.
func TestExpertCensusMatchesCPU(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev"} {
		t.Run(model, func(t *testing.T) {
			dir := "../../testdata/" + model
			out, err := compiler.Compile(compiler.Options{ModelDir: dir, Target: "h200"})
			if err != nil {
				t.Fatal(err)
			}
			p := out.Plan
			ws, err := vm.LoadWeights(p, dir)
			if err != nil {
				t.Fatal(err)
			}
			// the oracle: distinct ids of each decode moe_experts, read through a hook
			oracle := map[int]int64{}
			var acc interface {
				Arg(string, int, int) ([]float32, []int32, error)
			}
			counting := false
			hook := func(phase string, index int, in *plan.Instr, run func() error) error {
				if counting && phase == plan.PhaseDecode && in.Op == "moe_experts" {
					_, ids, err := acc.Arg(phase, index, 2)
					if err != nil {
						return err
					}
					seen := map[int32]bool{}
					for _, id := range ids {
						seen[id] = true
					}
					oracle[index] += int64(len(seen))
				}
				return run()
			}
			ref, err := cpu.OpenAny(p, ws, targets.Options{Hook: hook})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			acc = ref.(interface {
				Arg(string, int, int) ([]float32, []int32, error)
			})
			dev, err := cuda.OpenEmulated(p, ws, targets.Options{MaxTokens: 64}, 2<<30)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			rts := []targets.Runtime{ref, dev}
			V := p.Model.Vocab
			const B = 5
			states := make([][]targets.State, 2)
			for side, rt := range rts {
				for range B {
					s, err := rt.NewState()
					if err != nil {
						t.Fatal(err)
					}
					states[side] = append(states[side], s)
				}
			}
			step := func(phase string, n, pos int, tok func(i, j int) int32) {
				for side, rt := range rts {
					in := &targets.StepIn{Phase: phase}
					for i := range B {
						in.Seqs = append(in.Seqs, targets.SeqIn{State: states[side][i], N: n, Pos: pos, Decode: phase == plan.PhaseDecode})
						for j := range n {
							in.Tokens = append(in.Tokens, tok(i, j))
						}
						in.Rows = append(in.Rows, int32((i+1)*n-1))
						in.Sample = append(in.Sample, 0, 0, 0, 0)
					}
					var o targets.StepOut
					if err := rt.Step(in, &o); err != nil {
						t.Fatalf("%s step on side %d: %v", phase, side, err)
					}
				}
			}
			census := func(rt targets.Runtime) targets.ExpertCensus {
				c, ok := rt.(targets.ExpertCensus)
				if !ok {
					t.Fatalf("%T has no expert census", rt)
				}
				return c
			}
			for _, rt := range rts {
				census(rt).SetExpertCensus(true)
			}
			counting = true
			// a prefill step with the census on counts nothing
			step(plan.PhasePrefill, 7, 0, func(i, j int) int32 { return int32((i*37 + j*11 + 3) % V) })
			for _, rt := range rts {
				if d, n := census(rt).TakeExpertCensus(); len(d) != 0 || n != 0 {
					t.Fatalf("%T: a prefill step counted %v over %d steps", rt, d, n)
				}
			}
			if len(oracle) != 0 {
				t.Fatalf("the hook counted prefill instructions: %v", oracle)
			}
			before := dev.GraphStats()
			for s := range 3 {
				step(plan.PhaseDecode, 1, 7+s, func(i, j int) int32 { return int32((i*101 + s*53 + 5) % V) })
			}
			graphs := dev.GraphStats()
			got := [2]map[int]int64{}
			for side, rt := range rts {
				d, n := census(rt).TakeExpertCensus()
				if n != 3 {
					t.Errorf("side %d: census of %d steps, want 3", side, n)
				}
				got[side] = d
			}
			if len(oracle) == 0 {
				t.Fatal("no moe_experts instruction in the decode program")
			}
			if !maps.Equal(got[0], oracle) || !maps.Equal(got[1], oracle) {
				t.Fatalf("distinct experts by instruction: cpu census %v, device census %v, the operands' %v", got[0], got[1], oracle)
			}
			for i, v := range oracle {
				k, _ := p.Program(plan.PhaseDecode).Instrs[i].Attrs.Int("experts")
				if v < 3 || v > 3*min(k, B*6) {
					t.Errorf("instruction %d: %d distinct experts over 3 steps of %d tokens, %d experts", i, v, B, k)
				}
			}
			if graphs.Replayed != before.Replayed || graphs.Captured != before.Captured {
				t.Errorf("census steps ran graphs: %+v, then %+v", before, graphs)
			}
			t.Logf("%s: distinct experts over 3 decode steps of %d tokens, by instruction: %v", model, B, oracle)
			// off: nothing counted
			for _, rt := range rts {
				census(rt).SetExpertCensus(false)
			}
			counting = false
			step(plan.PhaseDecode, 1, 10, func(i, j int) int32 { return int32((i*7 + 1) % V) })
			for _, rt := range rts {
				if d, n := census(rt).TakeExpertCensus(); len(d) != 0 || n != 0 {
					t.Fatalf("%T: census off, counted %v over %d steps", rt, d, n)
				}
			}
			if after := dev.GraphStats(); after.On && after.Replayed == graphs.Replayed {
				t.Errorf("with the census off the decode step ran no graph: %+v", after)
			}
		})
	}
}
