package cuda_test

import (
	"strings"
	"testing"

	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// TestTwiceDoublesLaunches: DEEPINFER_CUDA_TWICE=fast_quant_split issues every launch of
// that kernel twice and no other launch more (the emulated device counts them). The
// kernel writes the split of its input elsewhere, so an 80-token prefill and two decode
// steps of tiny-v41-dev give the same logits bit for bit, and the runtime's description
// says what was doubled.
func TestTwiceDoublesLaunches(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvTwice, "", "fast_quant_split", 80)
	if ka != nil { // (the GPU records no launch counts)
		if ka["fast_quant_split"] == 0 {
			t.Fatal("fast_quant_split never ran")
		}
		for k, n := range ka {
			want := n
			if k == "fast_quant_split" {
				want = 2 * n
			}
			if kb[k] != want {
				t.Errorf("%s: %d launches, then %d with %s set (want %d)", k, n, kb[k], cuda.EnvTwice, want)
			}
		}
		for k := range kb {
			if _, ok := ka[k]; !ok {
				t.Errorf("%s: launched only with %s set", k, cuda.EnvTwice)
			}
		}
	}
	sameLogits(t, a, b, "once", "twice")
	t.Setenv(cuda.EnvTwice, "fast_quant_split, rope_one")
	r, err := devExec{}.Open(p, ws, targets.Options{Numerics: targets.NumericsFast, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if s := r.(*cuda.Runtime).Describe(); !strings.Contains(s, "every launch of fast_quant_split, rope_one issued twice ("+cuda.EnvTwice) {
		t.Errorf("the description does not say what is launched twice: %s", s)
	}
}

// TestTwiceRefused: a name that is no kernel of this build, or an empty name, fails the
// open with an error naming DEEPINFER_CUDA_TWICE.
func TestTwiceRefused(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	for _, v := range []string{"no_such_kernel", "fast_quant_split,,rope_one", "fast_quant_split,"} {
		t.Setenv(cuda.EnvTwice, v)
		r, err := devExec{}.Open(p, ws, targets.Options{Numerics: targets.NumericsFast, MaxTokens: 16})
		if err == nil {
			r.Close()
			t.Fatalf("%s=%q: opened", cuda.EnvTwice, v)
		}
		if !strings.Contains(err.Error(), cuda.EnvTwice) {
			t.Errorf("%s=%q: the error does not name the variable: %v", cuda.EnvTwice, v, err)
		}
	}
}
