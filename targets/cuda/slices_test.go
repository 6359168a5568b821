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
