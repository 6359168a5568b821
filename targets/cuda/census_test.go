package cuda_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cpu"
	"deepinfer/targets/cuda"
)

// TestExpertCensusMatchesCPU: the device's expert census (ids read back after each
// moe_experts instruction) counts, instruction by instruction, the distinct experts the
// cpu target's census counts on the same exact-mode steps (the same routing), and both
// equal a count of the ids each step's moe_experts read (the cpu's operands through a
// Hook), and so do the most slots an expert had; decode steps only, with the census off no counts, and a census step runs
// without graphs.
func TestExpertCensusMatchesCPU(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev"} {
		t.Run(model, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, "../../testdata/"+model)
			// the oracle: distinct ids of each decode moe_experts, read through a hook
			oracle := map[int]targets.ExpertTally{}
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
					per := map[int32]int64{}
					for _, id := range ids {
						per[id]++
					}
					o := oracle[index]
					o.Distinct += int64(len(per))
					for _, n := range per {
						o.MaxSlots = max(o.MaxSlots, n)
					}
					oracle[index] = o
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
			step := lockstep(t, rts, B)
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
			got := [2]map[int]targets.ExpertTally{}
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
				if v.Distinct < 3 || v.Distinct > 3*min(k, B*6) || v.MaxSlots < 1 || v.MaxSlots > B {
					t.Errorf("instruction %d: %+v over 3 steps of %d tokens, %d experts", i, v, B, k)
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

// TestUniformRoute: with DEEPINFER_CUDA_ROUTE=uniform every top-k router's ids are k
// distinct experts a token in range, spread evenly over the experts (a chi-square over
// the experts' counts, pooled over the routers and steps, under its 99% point), and
// differ from the model's routing (the cpu target's ids for the same step, whose counts
// the same statistic rejects); the hash layers keep theirs; the runtime's description
// says so.
func TestUniformRoute(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev"} {
		t.Run(model, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, "../../testdata/"+model)
			const B, steps = 16, 6
			type key struct{ step, instr int }
			ids := [2]map[key][]int32{{}, {}}
			var accs [2]interface {
				Result(string, int, int) ([]float32, []int32, error)
			}
			step := 0
			hook := func(side int) targets.Hook {
				return func(phase string, index int, in *plan.Instr, run func() error) error {
					if err := run(); err != nil {
						return err
					}
					if phase == plan.PhaseDecode && in.Op == "moe_route" {
						_, v, err := accs[side].Result(phase, index, 1)
						if err != nil {
							return err
						}
						ids[side][key{step, index}] = v
					}
					return nil
				}
			}
			ref, err := cpu.OpenAny(p, ws, targets.Options{Hook: hook(0)})
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			// (the setting by its variable on one model, by targets.Options on the other)
			o := targets.Options{MaxTokens: 64, Hook: hook(1)}
			if model == "tiny-v4-dev" {
				t.Setenv(cuda.EnvRoute, "uniform")
			} else {
				o.UniformRoute = true
			}
			dev, err := cuda.OpenEmulated(p, ws, o, 2<<30)
			if err != nil {
				t.Fatal(err)
			}
			defer dev.Close()
			if !strings.Contains(dev.Describe(), "routing uniform") {
				t.Errorf("description without the routing: %s", dev.Describe())
			}
			accs[0] = ref.(interface {
				Result(string, int, int) ([]float32, []int32, error)
			})
			accs[1] = dev
			rts := []targets.Runtime{ref, dev}
			V := p.Model.Vocab
			run := lockstep(t, rts, B)
			// every sequence the same prompt, then its own tokens: the rows share a context
			run(plan.PhasePrefill, 6, 0, func(i, j int) int32 { return int32((j*29 + 3) % V) })
			for s := 1; s < steps; s++ {
				step = s
				run(plan.PhaseDecode, 1, 5+s, func(i, j int) int32 { return int32((i*101 + s*53 + 5) % V) })
			}
			pr := p.Program(plan.PhaseDecode)
			var counts, model0 []float64
			routers, same, hashSame, hashN := 0, 0, 0, 0
			for k, dv := range ids[1] {
				in := &pr.Instrs[k.instr]
				E := cuda.Dim(in.ArgTypes[1], 0) // the gate's rows
				topk, _ := in.Attrs.Int("topk")
				rv := ids[0][k]
				if len(rv) != len(dv) || len(dv) != B*int(topk) {
					t.Fatalf("step %d instr %d: %d ids on the device, %d on the cpu", k.step, k.instr, len(dv), len(rv))
				}
				eq := slices.Equal(rv, dv)
				if mode, _ := in.Attrs.Str("mode"); mode == "hash" {
					hashN++
					if eq {
						hashSame++
					}
					continue
				}
				routers++
				if eq {
					same++
				}
				if len(counts) < int(E) {
					counts = make([]float64, E)
				}
				if len(model0) < int(E) {
					model0 = make([]float64, E)
				}
				for _, x := range rv {
					model0[x]++
				}
				for tk := range B {
					row := dv[tk*int(topk) : (tk+1)*int(topk)]
					for a, x := range row {
						if x < 0 || int64(x) >= E || slices.Contains(row[:a], x) {
							t.Fatalf("step %d instr %d token %d: ids %v of %d experts", k.step, k.instr, tk, row, E)
						}
						counts[x]++
					}
				}
			}
			if routers == 0 || same > 0 || hashSame != hashN {
				t.Fatalf("%d top-k routers' steps (%d equal to the model's), %d hash routers' (%d equal)", routers, same, hashN, hashSame)
			}
			var n float64
			for _, c := range counts {
				n += c
			}
			chiSq := func(counts []float64) float64 {
				chi := 0.0
				for _, c := range counts {
					e := n / float64(len(counts))
					chi += (c - e) * (c - e) / e
				}
				return chi
			}
			chi := chiSq(counts)
			// the 99% point of chi-square with len-1 degrees of freedom: 3 (4 experts) or 7
			// (8); the hash draws are fixed, so the statistic is too (8.09 and 6.53)
			limit := map[int]float64{4: 11.34, 8: 18.48}[len(counts)]
			t.Logf("%s: %d top-k router steps, expert counts %v, chi-square %.2f (limit %.2f); the model's routing %v, chi-square %.2f", model, routers, counts, chi, limit, model0, chiSq(model0))
			if limit == 0 || chi > limit {
				t.Errorf("expert counts %v: chi-square %.2f past %.2f", counts, chi, limit)
			}
			// the fixture's own routing of these rows is far from even (what the setting
			// is for), so the statistic tells the two apart
			if c := chiSq(model0); c <= limit {
				t.Errorf("the model's routing %v: chi-square %.2f within %.2f", model0, c, limit)
			}
		})
	}
}

// lockstep opens B sequences on each runtime and returns a function that runs one step
// of n tokens a sequence at position pos on every runtime in turn (token j of sequence
// i from tok; one logits row a sequence, greedy; decode steps marked so).
func lockstep(t *testing.T, rts []targets.Runtime, B int) func(phase string, n, pos int, tok func(i, j int) int32) {
	t.Helper()
	states := make([][]targets.State, len(rts))
	for side, rt := range rts {
		for range B {
			s, err := rt.NewState()
			if err != nil {
				t.Fatal(err)
			}
			states[side] = append(states[side], s)
		}
	}
	return func(phase string, n, pos int, tok func(i, j int) int32) {
		t.Helper()
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
				t.Fatalf("%s step at %d on side %d: %v", phase, pos, side, err)
			}
		}
	}
}
