package cuda_test

import (
	"strings"
	"testing"

	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// twicePure are kernels of docs/perf/README.md's batch-1 attribution call that write
// only outputs apart from their inputs, so that doubling them leaves the values alone
// (mhc_mix41_split and csa_index_select, also in the call, change them when doubled).
var twicePure = []string{"fast_quant_split", "fast_gemv1p_fp8_q", "fast_gemm_m1_f32", "mhc_fast_mix41_rows", "fast_gemm_m1", "csa_tc_out_na", "moe_fast_gate41_tile1"}

// TestTwiceDoublesLaunches: DEEPINFER_CUDA_TWICE=K issues every launch of K twice and no
// other launch more (the emulated device counts them). For each of twicePure, an
// 80-token prefill and two decode steps of tiny-v41-dev give the same logits bit for bit;
// the runtime's description says what was doubled.
func TestTwiceDoublesLaunches(t *testing.T) {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	for _, kernel := range twicePure {
		a, ka, b, kb := twoRuns(t, p, ws, cuda.EnvTwice, "", kernel, 80)
		if ka != nil { // (the GPU records no launch counts)
			if ka[kernel] == 0 {
				t.Fatalf("%s never ran", kernel)
			}
			for k, n := range ka {
				want := n
				if k == kernel {
					want = 2 * n
				}
				if kb[k] != want {
					t.Errorf("%s=%s: %s: %d launches, then %d (want %d)", cuda.EnvTwice, kernel, k, n, kb[k], want)
				}
			}
			for k := range kb {
				if _, ok := ka[k]; !ok {
					t.Errorf("%s=%s: %s launched only with it set", cuda.EnvTwice, kernel, k)
				}
			}
		}
		sameLogits(t, a, b, "once", kernel+" twice")
	}
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

// refusedOpen requires the open of tiny-v41-dev in the numerics mode to fail, naming
// env, with env set to each of values.
func refusedOpen(t *testing.T, env, numerics string, values ...string) {
	t.Helper()
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	for _, v := range values {
		t.Setenv(env, v)
		r, err := devExec{}.Open(p, ws, targets.Options{Numerics: numerics, MaxTokens: 16})
		if err == nil {
			r.Close()
			t.Fatalf("%s=%q: opened", env, v)
		}
		if !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: the error does not name the variable: %v", env, v, err)
		}
	}
}

// TestTwiceRefused: a name that is no kernel of this build, or an empty name, fails the
// open with an error naming DEEPINFER_CUDA_TWICE.
func TestTwiceRefused(t *testing.T) {
	refusedOpen(t, cuda.EnvTwice, targets.NumericsFast, "no_such_kernel", "fast_quant_split,,rope_one", "fast_quant_split,")
}

// TestWGE4M3EnvRefused: DEEPINFER_CUDA_WG_E4M3 set to a value it does not name fails
// the open, naming the variable; a named one opens.
func TestWGE4M3EnvRefused(t *testing.T) {
	refusedOpen(t, cuda.EnvWGE4M3, targets.NumericsFP8, "yes", "P", "all ")
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v41-dev")
	t.Setenv(cuda.EnvWGE4M3, "all")
	r, err := devExec{}.Open(p, ws, targets.Options{Numerics: targets.NumericsFP8, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
}

// TestWGFP8EnvRefused: DEEPINFER_CUDA_WG_FP8 set to anything but a2 or p, or
// DEEPINFER_CUDA_WG_BF16W to anything but 0, 1, 4 or p, fails the open, naming the variable
// (the named values open: TestWGProductFormsSameValues).
func TestWGFP8EnvRefused(t *testing.T) {
	refusedOpen(t, cuda.EnvWGFP8, targets.NumericsFP8, "a", "A2", "1", "a2 ", "P")
	t.Setenv(cuda.EnvWGFP8, "")
	refusedOpen(t, cuda.EnvWGBF16W, targets.NumericsFP8, "2", "w4", "on", "P")
}
