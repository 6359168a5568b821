package cuda_test

import (
	"math"
	"strings"
	"testing"

	"deepinfer/targets/cuda"
)

// TestGemvSteps: the fast products of decode steps of at most four rows run on the CUDA
// cores (fast_gemv_f32, _bf16, _fp8; DEEPINFER_CUDA_GEMV=0 keeps the warp tiles): on V4
// (tiny-v4-dev, and V4-Flash's formats: FP8 block weights, bf16 and float32 ones) and on
// both V4.1 fixtures, a 40-token prefill's logits are the same bit for bit either way (no
// product there has four rows or fewer) and the two decode steps' logits are near the
// tiles' — another summation order, each product exact in float32 either way — within
// 2e-5 of the row's largest logit. On the emulated device the decode steps' one-row
// products moved off the tiles: no one-row tile runs by default (nor more fast_sum
// launches than with the tiles), and no fast_gemv_* launch with DEEPINFER_CUDA_GEMV=0.
func TestGemvSteps(t *testing.T) {
	const n = 40
	models := append(v4Models(t), v41Fixtures...)
	for _, m := range models {
		t.Run(m.name, func(t *testing.T) {
			p, ws := cuda.CompileDir(t, m.dir)
			a, ka, b, kb := offAndOn(t, p, ws, cuda.EnvGemv, n)
			sameLogits(t, a[:n], b[:n], "prefill with the tiles ("+cuda.EnvGemv+"=0)", "prefill by default")
			worst := 0.0
			for i := n; i < n+2; i++ {
				big, d := 0.0, 0.0
				for j := range a[i] {
					big = math.Max(big, math.Abs(float64(a[i][j])))
					d = math.Max(d, math.Abs(float64(a[i][j])-float64(b[i][j])))
				}
				worst = math.Max(worst, d/math.Max(big, 1e-30))
			}
			t.Logf("decode logits: worst difference %.3g of the row's largest", worst)
			if worst > 2e-5 {
				t.Errorf("decode logits %.3g apart (relative to the row's largest) with fast_gemv_*, want within 2e-5", worst)
			}
			if ka == nil {
				return
			}
			gemv := func(k map[string]int) (n int) {
				for name, c := range k {
					if strings.HasPrefix(name, "fast_gemv_") {
						n += c
					}
				}
				return n
			}
			// one-row tiles: the prefill has none (its products have n rows), so every
			// launch of them by default would be a decode step's
			m1 := func(k map[string]int) int {
				return k["fast_gemm_m1"] + k["fast_gemm_m1_f32"] + k["fast_gemm_m1_fp8_only"] + k["fast_gemm_m1_fp8_b4"]
			}
			if gemv(ka) != 0 || gemv(kb) == 0 || m1(ka) == 0 || m1(kb) != 0 || kb["fast_sum"] > ka["fast_sum"] {
				t.Errorf("with %s=0: %d fast_gemv_* launches, %d one-row tiles, %d fast_sum; by default %d, %d, %d: want the decode steps' one-row products on fast_gemv_*",
					cuda.EnvGemv, gemv(ka), m1(ka), ka["fast_sum"], gemv(kb), m1(kb), kb["fast_sum"])
			}
		})
	}
}
