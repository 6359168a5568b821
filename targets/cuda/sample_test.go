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

// sampleOnDevice runs tiny-v4-dev's prefill program with the sample instruction's
// logits replaced by logits (one row of the vocabulary a row), each row's sampling
// parameters (temperature, top-p, top-k, U) and masks, on the emulated device (or with
// -device gpu the GPU), and returns the sampled tokens and the vocabulary's size.
func sampleOnDevice(t *testing.T, logits func(V int) []float32, params []float32, masks func(V int) [][]uint64) ([]int32, int) {
	t.Helper()
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
	R := len(params) / 4
	sampleAt := -1
	for i, in := range p.Program(plan.PhasePrefill).Instrs {
		if in.Op == "sample" {
			sampleAt = i
		}
	}
	lg := logits(V)
	var rt *cuda.Runtime
	hook := func(phase string, idx int, in *plan.Instr, run func() error) error {
		if phase == plan.PhasePrefill && idx == sampleAt {
			if err := rt.SetArg(phase, idx, 0, lg, nil); err != nil {
				return err
			}
		}
		return run()
	}
	o := targets.Options{Hook: hook, MaxTokens: R}
	if *device == "gpu" {
		r, err := cuda.Open(p, ws, o)
		if err != nil {
			t.Fatal(err)
		}
		rt = r.(*cuda.Runtime)
	} else if rt, err = cuda.OpenEmulated(p, ws, o, 1<<30); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	st, err := rt.NewState()
	if err != nil {
		t.Fatal(err)
	}
	toks, rows := make([]int32, R), make([]int32, R)
	for i := range toks {
		toks[i], rows[i] = int32(1+i%7), int32(i)
	}
	in := &targets.StepIn{Phase: plan.PhasePrefill, Seqs: []targets.SeqIn{{State: st, N: R}},
		Tokens: toks, Rows: rows, Sample: params, Masks: masks(V)}
	var o2 targets.StepOut
	if err := rt.Step(in, &o2); err != nil {
		t.Fatal(err)
	}
	return o2.Tokens, V
}

// TestGreedySampleMatchesSampling feeds the sample instruction crafted logits — ties
// across the scan's chunks, NaNs first and later, masks that hide the maximum, a mask
// that allows nothing — and checks each greedy row's token against vm/sampling.Row.
func TestGreedySampleMatchesSampling(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const R = 6
	var logits []float32
	row := func(r, V int) []float32 { return logits[r*V : (r+1)*V] }
	mkLogits := func(V int) []float32 {
		logits = make([]float32, R*V)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		nan := float32(math.NaN())
		row(0, V)[7], row(0, V)[300] = 9, 9 // a tie: the first wins
		row(1, V)[0] = nan                  // the first allowed logit NaN: it is the answer
		row(2, V)[5], row(2, V)[400] = nan, 50
		row(3, V)[100] = 99 // hidden by the mask below
		return logits
	}
	var masks [][]uint64
	mkMasks := func(V int) [][]uint64 {
		masks = make([][]uint64, R)
		masks[3] = maskOf(V, func(i int) bool { return i != 100 && i%3 != 0 })
		masks[4] = maskOf(V, func(i int) bool { return i > 200 && i < 260 })
		masks[5] = maskOf(V, func(int) bool { return false })
		return masks
	}
	toks, V := sampleOnDevice(t, mkLogits, make([]float32, 4*R), mkMasks)
	var s sampling.Scratch
	for r := 0; r < R; r++ {
		want := sampling.Row(row(r, V), sampling.Params{}, allowedOf(masks[r]), &s)
		if int(toks[r]) != want {
			t.Errorf("row %d: device picked %d, sampling.Row %d", r, toks[r], want)
		}
	}
	if toks[0] != 7 || toks[1] != 0 || toks[2] != 400 {
		t.Errorf("tokens %v: want 7 (first of a tie), 0 (a NaN first), 400", toks[:3])
	}
}

// TestSampledRowsMatchSampling: rows sampled at a temperature (plain draws, top-k, top-p,
// both; flat, tied, peaked and wide logits whose tail has no mass; masks; NaN and +Inf
// rows; U of 0) through the sample instruction, each token against vm/sampling.Row on
// the host. With -device gpu it checks the launch-block sampler NVRTC compiled.
func TestSampledRowsMatchSampling(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const R = 48
	params := make([]float32, 4*R)
	cuts := [][2]float32{{0, 0}, {5, 0}, {0, 0.9}, {5, 0.9}, {0, 0.5}, {100000, 0}, {3, 0.999}, {0, 0.999999}, {1, 0}, {40, 0.95}, {200, 0.3}, {0, 0.05}}
	for r := 0; r < R; r++ {
		c := cuts[r%len(cuts)]
		params[4*r], params[4*r+1], params[4*r+2] = []float32{0.6, 1, 1.4}[r%3], c[1], c[0]
		params[4*r+3] = float32(rng.Float64())
		if r%11 == 5 {
			params[4*r+3] = 0
		}
	}
	var logits []float32
	mkLogits := func(V int) []float32 {
		logits = make([]float32, R*V)
		for r := 0; r < R; r++ {
			row := logits[r*V : (r+1)*V]
			for i := range row {
				switch r / 12 {
				case 0:
					row[i] = float32(rng.NormFloat64())
				case 1:
					row[i] = float32(rng.IntN(4)) // ties at every cut
				case 2:
					row[i] = float32(rng.NormFloat64()) + float32(20*(rng.IntN(40)/39))
				default:
					row[i] = float32(rng.NormFloat64() * 30) // a tail of no mass
				}
			}
		}
		nan, inf := float32(math.NaN()), float32(math.Inf(1))
		logits[7*V+3], logits[19*V+V-2] = nan, inf
		return logits
	}
	var masks [][]uint64
	mkMasks := func(V int) [][]uint64 {
		masks = make([][]uint64, R)
		for r := 2; r < R; r += 5 {
			k := r
			masks[r] = maskOf(V, func(i int) bool { return (i*7+k)%3 != 0 })
		}
		masks[9] = maskOf(V, func(int) bool { return false })
		masks[21] = maskOf(V, func(i int) bool { return i == 77 })
		return masks
	}
	toks, V := sampleOnDevice(t, mkLogits, params, mkMasks)
	var s sampling.Scratch
	for r := 0; r < R; r++ {
		p := params[4*r : 4*r+4]
		sp := sampling.Params{Temperature: float64(p[0]), TopP: float64(p[1]), TopK: int(p[2]), U: float64(p[3])}
		want := sampling.Row(logits[r*V:(r+1)*V], sp, allowedOf(masks[r]), &s)
		if int(toks[r]) != want {
			t.Errorf("row %d (%+v): device drew %d, sampling.Row %d", r, sp, toks[r], want)
		}
	}
}

func maskOf(V int, allow func(int) bool) []uint64 {
	m := make([]uint64, (V+63)/64)
	for i := 0; i < V; i++ {
		if allow(i) {
			m[i/64] |= 1 << (i % 64)
		}
	}
	return m
}

func allowedOf(m []uint64) func(int) bool {
	if m == nil {
		return nil
	}
	return func(i int) bool { return m[i/64]>>(i%64)&1 != 0 }
}
