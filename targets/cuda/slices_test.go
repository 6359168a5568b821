package cuda

import (
	"strings"
	"testing"

	"deepinfer/targets"
)

// TestExpertSlices: an expert product's reduction in at most the slices asked (each a
// multiple of 128 values, at least 512 unless the whole is shorter), covering it; and
// DEEPINFER_CUDA_FP4_SLICES parsed as N or U,D, each 1 to 16, anything else an error
// naming the variable.
func TestExpertSlices(t *testing.T) {
	for _, c := range []struct{ K, maxS, S, ks int64 }{
		{5120, 4, 4, 1280}, {5120, 1, 1, 5120}, {5120, 2, 2, 2560}, {5120, 16, 10, 512},
		{2304, 4, 4, 640}, {2304, 2, 2, 1152}, {2304, 16, 4, 640}, {4096, 8, 8, 512},
		{2048, 4, 4, 512}, {192, 4, 1, 256}, {96, 1, 1, 128},
	} {
		S, ks := fastExpertSlices(c.K, c.maxS)
		if S != c.S || ks != c.ks || ks%128 != 0 || S*ks < fastExpertPad(c.K) || (S-1)*ks >= fastExpertPad(c.K) {
			t.Errorf("K %d, at most %d slices: %d of %d, want %d of %d", c.K, c.maxS, S, ks, c.S, c.ks)
		}
	}
	for _, c := range []struct {
		v        string
		up, down int64
		bad      bool
	}{
		{"", 4, 4, false}, {"1", 1, 1, false}, {"2,8", 2, 8, false}, {" 3 , 1", 3, 1, false},
		{"0", 0, 0, true}, {"17", 0, 0, true}, {"a", 0, 0, true}, {"1,2,3", 0, 0, true}, {"2,", 0, 0, true},
	} {
		t.Setenv(EnvFP4Slices, c.v)
		up, down, err := expertSlicesEnv()
		if c.bad != (err != nil) || (err != nil && !strings.Contains(err.Error(), EnvFP4Slices)) || (!c.bad && (up != c.up || down != c.down)) {
			t.Errorf("%s=%q: %d, %d, %v", EnvFP4Slices, c.v, up, down, err)
		}
	}
}

// TestExpertSlicesEnvRefused: a bad DEEPINFER_CUDA_FP4_SLICES fails the plan's open in
// the fast mode with the variable named, not a panic or a silent default.
func TestExpertSlicesEnvRefused(t *testing.T) {
	p, ws := CompileDir(t, "../../testdata/tiny-v41-dev")
	t.Setenv(EnvFP4Slices, "0,2")
	_, err := OpenEmulated(p, ws, targets.Options{MaxTokens: 16, Numerics: targets.NumericsFast}, 1<<30)
	if err == nil || !strings.Contains(err.Error(), EnvFP4Slices) {
		t.Fatalf("open with %s=0,2: %v", EnvFP4Slices, err)
	}
}

// TestDownSlicesByStep: V4.1's w2 products (I = 2,304) take two slices in steps on the
// FP4 register tiles with at least fp4SliceBlocks blocks at two, four otherwise (a few
// tokens, the wide prefill tiles); none of that with DEEPINFER_CUDA_FP4_SLICES set or in
// batch-invariant mode.
func TestDownSlicesByStep(t *testing.T) {
	sh := fastExpertShape{E: 384, D: 5120, I: 2304, k: 6, v41: 1}
	step := func(T int64) *Step {
		s := &Step{args: make([]Operand, 3+3*sh.E)}
		s.args[2].Shape = []int64{T, sh.k}
		return s
	}
	open := func(rt *Runtime) *fastExperts {
		f, err := newFastExperts(&Bind{rt: rt}, sh, nil, 0, 0, 0, 0, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.fp4 = 1 // every expert FP4 (the operands above carry no formats)
		return f
	}
	f := open(nil)
	for _, c := range []struct{ T, S, ks int64 }{{1, 4, 640}, {4, 4, 640}, {8, 2, 1152}, {64, 2, 1152}, {256, 2, 1152}, {2048, 4, 640}} {
		if S, ks := f.sd(step(c.T)); S != c.S || ks != c.ks {
			t.Errorf("%d tokens: %d slices of %d, want %d of %d", c.T, S, ks, c.S, c.ks)
		}
	}
	t.Setenv(EnvFP4Slices, "4")
	if S, _ := open(nil).sd(step(256)); S != 4 {
		t.Errorf("with %s=4: %d slices at 256 tokens", EnvFP4Slices, S)
	}
	t.Setenv(EnvFP4Slices, "")
	if S, _ := open(&Runtime{invariant: true}).sd(step(256)); S != 4 {
		t.Errorf("batch-invariant mode: %d slices at 256 tokens", S)
	}
}
