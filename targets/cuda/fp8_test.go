package cuda_test

import (
	"os"
	"testing"

	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// TestFP8InstructionsNearCPU: the fp8 numerics mode against the cpu target on the V4.1
// fixtures, every instruction fed the cpu's inputs, with a first prompt of 48 tokens
// (the prefill's MXFP8 products on fast_gemm_wg_e4m3n, 33 to 64 rows) and, with
// DEEPINFER_CUDA_WG_E4M3=all, of 100 (fast_gemm_wg_e4m3 above 64 rows); on the emulated
// device the launches are counted (a run that never launched the kernel fails) and each
// instruction is gated as the fast mode's long-prompt check is (6e-6: a block is summed
// exactly there, so the mode differs from the fast one by float32 roundings only). On a
// GPU the tensor cores sum a block at their FP8 precision (run 48's probe on the H200:
// a median 2^-15 and a worst 2^-12 of the block's Σ|products|), which no host run shows:
// the first MXFP8 product of each prefill came 3.3e-3 to 4.6e-3 from the cpu target's
// (run 50, an H100: the largest difference over the result's largest value), past the
// fixtures' goal against DeepSeek's reference (2e-3), so there every instruction is
// gated at the fixtures' bar (1e-2, docs/cuda.md "The fp8 numerics mode") and the worst
// is logged.
func TestFP8InstructionsNearCPU(t *testing.T) {
	for _, m := range v41Fixtures {
		for _, c := range []struct {
			env, kernel string
			prompt      int
		}{{"", "fast_gemm_wg_e4m3n", 48}, {"all", "fast_gemm_wg_e4m3", 100}} {
			t.Run(m.name+"/"+c.kernel, func(t *testing.T) {
				t.Setenv(cuda.EnvWGE4M3, c.env)
				// (the experts' e4m3 tiles are opt-in: _e4 unless the run asks for _e4t)
				if os.Getenv(cuda.EnvFP4E4) == "" {
					t.Setenv(cuda.EnvFP4E4, "1")
				}
				p, ws := cuda.CompileDir(t, m.dir)
				_, kc, _ := prefillAndDecodeIn(t, p, ws, c.prompt, targets.Options{Numerics: targets.NumericsFP8}, nil)
				// (launches are counted on the emulated device only)
				if *device != "gpu" {
					// (the experts' e4m3 tiles in either form: DEEPINFER_CUDA_FP4_E4=t's e4t)
					for _, k := range []string{c.kernel, "fast_moe_up_fp4_e4", "fast_moe_down_fp4_e4"} {
						n := kc[k]
						if k != c.kernel {
							n += kc[k+"t"]
						}
						if n == 0 {
							t.Fatalf("%s never launched in a %d-token prefill and its decode (launches: %v)", k, c.prompt, kc)
						}
					}
				}
				cfg := checkConfig{numerics: targets.NumericsFP8, tol: 6e-6, force: true, prompt: c.prompt, bf16Step: true}
				if *device == "gpu" {
					cfg.tol = 1e-2
				}
				worst := checkInstructions(t, m.name, cfg)
				t.Logf("worst instruction %.3g from the cpu target's (gate %g)", worst, cfg.tol)
			})
		}
	}
}
