package cuda_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
	"deepinfer/vm/sampling"
)

// TestGreedySampleMatchesSampling feeds the sample instruction crafted logits — ties
// across the scan's chunks, NaNs first and later, masks that hide the maximum, a mask
// that allows nothing — and checks each greedy row's token against vm/sampling.Row.
func TestGreedySampleMatchesSampling(t *testing.T) {
	out, err := compiler.Compile(compiler.Options{ModelDir: "../../testdata/tiny-v4-dev", Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Plan
	ws, err := vm.LoadWeights(p, "../../testdata/tiny-v4-dev")
	if err != nil {
		t.Fatal(err)
	}
	V := p.Model.Vocab
	sampleAt := -1
	for i, in := range p.Program(plan.PhasePrefill).Instrs {
		if in.Op == "sample" {
			sampleAt = i
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const R = 6
	logits := make([]float32, R*V)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64())
	}
	nan := float32(math.NaN())
	row := func(r int) []float32 { return logits[r*V : (r+1)*V] }
	row(0)[7], row(0)[300] = 9, 9 // a tie: the first wins
	row(1)[0] = nan               // the first allowed logit NaN: it is the answer
	row(2)[5], row(2)[400] = nan, 50
	row(3)[100] = 99 // hidden by the mask below
	mask := func(allow func(int) bool) []uint64 {
		m := make([]uint64, (V+63)/64)
		for i := 0; i < V; i++ {
			if allow(i) {
				m[i/64] |= 1 << (i % 64)
			}
		}
		return m
	}
	masks := make([][]uint64, R)
	masks[3] = mask(func(i int) bool { return i != 100 && i%3 != 0 })
	masks[4] = mask(func(i int) bool { return i > 200 && i < 260 })
	masks[5] = mask(func(int) bool { return false })
	var rt *cuda.Runtime
	hook := func(phase string, idx int, in *plan.Instr, run func() error) error {
		if phase == plan.PhasePrefill && idx == sampleAt {
			if err := rt.SetArg(phase, idx, 0, logits, nil); err != nil {
				return err
			}
		}
		return run()
	}
	rt, err = cuda.OpenEmulated(p, ws, targets.Options{Hook: hook, MaxTokens: 16}, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	st, err := rt.NewState()
	if err != nil {
		t.Fatal(err)
	}
	in := &targets.StepIn{Phase: plan.PhasePrefill, Seqs: []targets.SeqIn{{State: st, N: R}},
		Tokens: []int32{1, 2, 3, 4, 5, 6}, Rows: []int32{0, 1, 2, 3, 4, 5}, Sample: make([]float32, 4*R), Masks: masks}
	var o targets.StepOut
	if err := rt.Step(in, &o); err != nil {
		t.Fatal(err)
	}
	var s sampling.Scratch
	for r := 0; r < R; r++ {
		var allowed func(int) bool
		if masks[r] != nil {
			m := masks[r]
			allowed = func(i int) bool { return m[i/64]>>(i%64)&1 != 0 }
		}
		want := sampling.Row(row(r), sampling.Params{}, allowed, &s)
		if int(o.Tokens[r]) != want {
			t.Errorf("row %d: device picked %d, sampling.Row %d", r, o.Tokens[r], want)
		}
	}
	if o.Tokens[0] != 7 || o.Tokens[1] != 0 || o.Tokens[2] != 400 {
		t.Errorf("tokens %v: want 7 (first of a tie), 0 (a NaN first), 400", o.Tokens[:3])
	}
}
