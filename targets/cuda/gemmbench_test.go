package cuda_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"deepinfer/targets/cuda"
)

// e4m3Forms are the e4m3 product kernels BenchmarkE4M3Gemm times, the 64-row form (the
// fp8 mode's default up to 64 rows) first: the others' outputs must equal its bit for bit.
var e4m3Forms = []string{"fast_gemm_wg_e4m3n", "fast_gemm_wg_e4m3p", "fast_gemm_wg_e4m3q", "fast_gemm_wg_e4m3", "fast_gemm_wg_e4m3w"}

// TestColdCopies: a product bench's copies of the weights add up to cuda.BenchColdBytes
// (over twice an H200's L2) unless the cap of 64 stops them, and every copy is launched
// in each timing.
func TestColdCopies(t *testing.T) {
	for _, b := range []int64{1, 1 << 10, 2_621_440, 11_796_480, 42_000_000, cuda.BenchColdBytes, 3 << 30} {
		c, n := cuda.ColdCopies(b)
		if c < 1 || c > 64 || n < c || n < 8 {
			t.Fatalf("%d bytes: %d copies, %d launches", b, c, n)
		}
		if c < 64 && int64(c)*b < cuda.BenchColdBytes {
			t.Fatalf("%d bytes: %d copies hold %d bytes, under %d", b, c, int64(c)*b, cuda.BenchColdBytes)
		}
		if c > 1 && int64(c-1)*b >= cuda.BenchColdBytes {
			t.Fatalf("%d bytes: %d copies where %d would do", b, c, c-1)
		}
	}
	if c, _ := cuda.ColdCopies(2_621_440); c != 52 { // V4.1's wkv, 2.6 MB
		t.Fatalf("wkv: %d copies, want 52", c)
	}
}

// TestE4M3GemmBenchSameValues: E4M3GemmBench runs every e4m3 form on the same random
// weights and activations (a partial x tile and a sliced reduction, the binder's
// slices) and requires their outputs bit for bit equal (on the emulated device each
// kernel's emulated branch), with fast_gemm_wg_fp8a, _fp8a2 and _fp8p timed beside them
// on bf16 activations (_fp8a2's and _fp8p's outputs equal to _fp8a's); bad shapes and a
// kernel that is neither are refused.
func TestE4M3GemmBenchSameValues(t *testing.T) {
	rt := openProbe(t)
	defer rt.Close()
	defer cuda.SetBenchCopies(3)() // (three copies, eight launches a timing: the last from copy 1)
	kernels := append([]string{"fast_gemm_wg_fp8a", "fast_gemm_wg_fp8a2", "fast_gemm_wg_fp8p"}, e4m3Forms...)
	res, err := rt.E4M3GemmBench(kernels, 128, 384, []cuda.E4M3GemmStep{{M: 70, S: 2, Ks: 256}, {M: 3, S: 0}}, 5, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2*len(kernels) {
		t.Fatalf("%d results for %d kernels × 2 steps", len(res), len(kernels))
	}
	for _, r := range res {
		if r.Bytes != 128*384+4*12 || r.Ms < 0 || r.S < 1 || r.Halves != strings.HasPrefix(r.Kernel, "fast_gemm_wg_fp8") || r.Copies != 3 || r.Launches != 8 {
			t.Errorf("%s: %+v", r.Kernel, r)
		}
	}
	for _, c := range []struct {
		kernels []string
		N, K    int64
		step    cuda.E4M3GemmStep
		want    string
	}{
		{e4m3Forms, 100, 256, cuda.E4M3GemmStep{M: 4, S: 1, Ks: 256}, "N a multiple of 64"},
		{e4m3Forms, 64, 256, cuda.E4M3GemmStep{M: 4, S: 1, Ks: 192}, "Ks of 128"},
		{e4m3Forms, 64, 512, cuda.E4M3GemmStep{M: 4, S: 1, Ks: 256}, "covering K"},
		{[]string{"fast_gemm_wide"}, 64, 256, cuda.E4M3GemmStep{M: 4, S: 1, Ks: 256}, "e4m3 product kernels"},
	} {
		if _, err := rt.E4M3GemmBench(c.kernels, c.N, c.K, []cuda.E4M3GemmStep{c.step}, 1, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v N %d K %d %+v: accepted or an unclear error: %v", c.kernels, c.N, c.K, c.step, err)
		}
	}
}

// e4m3Products are BenchmarkE4M3Gemm's products: V4.1-Flash's FP8 products of a layer
// (hidden 5,120): the query's up-projection wq_b (64 heads × 512 from the rank 1,280), the
// output's wo_b (8 groups × 1,024 to 5,120), the shared expert's w1 (2,304 × 5,120) and
// the query's down-projection wq_a (1,280 × 5,120), at the binder's slices.
var e4m3Products = []struct {
	name string
	N, K int64
}{{"wq_b", 32768, 1280}, {"wo_b", 5120, 8192}, {"w1", 2304, 5120}, {"wq_a", 1280, 5120}}

// BenchmarkE4M3Gemm times the fp8 numerics' e4m3 products alone on V4.1-Flash's shapes
// (e4m3Products) at 64 and 256 rows and a prefill chunk of 2,048: fast_gemm_wg_e4m3n
// (the default up to 64 rows) against _e4m3p and _e4m3q (a step's blocks two and four at
// a time), the 128-row fast_gemm_wg_e4m3 and _e4m3w, each the median of 10 launches,
// their outputs checked bit for bit against _e4m3n's, and the fast mode's
// fast_gemm_wg_fp8n and _fp8a (the fp8 mode's kernel above 64 rows) on bf16 activations
// beside them, and _fp8a2 (two warpgroups a block) and _fp8p (a producer warpgroup
// and two consumers), their outputs checked bit for bit against _fp8a's, with the copy
// rate
// (printed as each product finishes). On the GPU:
// `cuda.test -test.run '^$' -test.bench E4M3Gemm -test.benchtime 1x -device gpu`.
// On the emulated device one small shape (its times mean nothing there).
func BenchmarkE4M3Gemm(b *testing.B) {
	runDeviceBench(b, "e4m3 gemm", func(rt *cuda.Runtime, bw float64) {
		for _, p := range e4m3Products {
			N, K := p.N, p.K
			steps := []cuda.E4M3GemmStep{{M: 256}, {M: 64}, {M: 2048}}
			if *device != "gpu" {
				if p.name != e4m3Products[0].name {
					continue
				}
				N, K, steps = 128, 512, []cuda.E4M3GemmStep{{M: 40}, {M: 130}}
			}
			res, err := rt.E4M3GemmBench(append(slices.Clone(e4m3Forms), "fast_gemm_wg_fp8n", "fast_gemm_wg_fp8a", "fast_gemm_wg_fp8a2", "fast_gemm_wg_fp8p"), N, K, steps, 11, 10)
			if err != nil {
				b.Fatal(err)
			}
			base := map[int64]float64{} // (each form's time over _e4m3n's at the same rows)
			for _, r := range res {
				if r.Kernel == e4m3Forms[0] {
					base[r.M] = r.Ms
				}
				fl := 2 * float64(r.M) * float64(N) * float64(K)
				note := ""
				switch {
				case r.Kernel == "fast_gemm_wg_fp8a2" || r.Kernel == "fast_gemm_wg_fp8p":
					note = " (bf16 activations, values equal to fast_gemm_wg_fp8a's)"
				case r.Halves:
					note = " (bf16 activations, values not compared)"
				}
				fmt.Printf("e4m3 gemm: %s M %d S %d %s: %.4f ms (×%.3f of %s), %.1f MB of weights, %.0f GB/s (%.1f%% of copy), %.0f TFLOP/s%s; %d launches a timing over %d copies\n", p.name, r.M, r.S, r.Kernel,
					r.Ms, r.Ms/base[r.M], e4m3Forms[0], float64(r.Bytes)/1e6, float64(r.Bytes)/(r.Ms/1e3)/1e9, 100*float64(r.Bytes)/(r.Ms/1e3)/bw, fl/(r.Ms/1e3)/1e12, note, r.Launches, r.Copies)
			}
		}
	})
}

// gemvOneForms are the one-row FP8 products BenchmarkGemvOne times, the default first:
// the others' outputs must equal its bit for bit.
var gemvOneForms = []string{"fast_gemv1p_fp8", "fast_gemv1_fp8", "fast_gemv1b_fp8", "fast_gemv_fp8"}

// TestGemvOneBenchSameValues: GemvOneBench runs the one-row forms on the same random
// weights and row, four warps a pair of weight rows (N under 2,048) and two, and requires
// their outputs bit for bit equal (on the emulated device fast_gemv's emulated branch for
// all); bad shapes and a kernel that is no one-row form are refused.
func TestGemvOneBenchSameValues(t *testing.T) {
	rt := openProbe(t)
	defer rt.Close()
	defer cuda.SetBenchCopies(3)() // (three copies, eight launches a timing: the last from copy 1)
	for _, c := range []struct{ N, K int64 }{{130, 320}, {2050, 128}} {
		res, err := rt.GemvOneBench(gemvOneForms, c.N, c.K, 3, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(gemvOneForms) {
			t.Fatalf("%d results for %d kernels", len(res), len(gemvOneForms))
		}
		for _, r := range res {
			if r.Bytes != c.N*c.K+(c.N+31)/32*(c.K/32) || r.Ms < 0 || r.Copies != 3 || r.Launches != 8 {
				t.Errorf("%s: %+v", r.Kernel, r)
			}
		}
	}
	for _, c := range []struct {
		kernels []string
		N, K    int64
		want    string
	}{
		{gemvOneForms, 129, 128, "N even"},
		{gemvOneForms, 128, 96, "K a multiple of 64"},
		{[]string{"fast_gemv_fp8_q"}, 128, 128, "one-row FP8 product kernels"},
	} {
		if _, err := rt.GemvOneBench(c.kernels, c.N, c.K, 1, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v N %d K %d: accepted or an unclear error: %v", c.kernels, c.N, c.K, err)
		}
	}
}

// gemvOneProducts are BenchmarkGemvOne's products: V4.1-Flash's FP8 products of a layer
// at one row (hidden 5,120): wq_b, wo_b and the shared expert's w1 as in e4m3Products,
// its w2 (5,120 × 2,304), wq_a, wkv (512 × 5,120) and the indexer's wq_b (32 heads × 128
// from the rank 1,280).
var gemvOneProducts = []struct {
	name string
	N, K int64
}{{"wq_b", 32768, 1280}, {"wo_b", 5120, 8192}, {"w1", 2304, 5120}, {"w2", 5120, 2304}, {"wq_a", 1280, 5120}, {"wkv", 512, 5120}, {"index wq_b", 4096, 1280}}

// BenchmarkGemvOne times the one-row FP8 products alone on V4.1-Flash's shapes
// (gemvOneProducts; a decode step at batch 1 runs these): fast_gemv1p_fp8 (the default)
// against fast_gemv1_fp8, _gemv1b_fp8 and fast_gemv_fp8, each the median of 20 launches,
// outputs checked bit for bit against the default's, each product's rate beside the
// copy rate (printed as each product finishes): how far each one-row product is from
// the memory's rate, by its size. On the GPU:
// `cuda.test -test.run '^$' -test.bench GemvOne -test.benchtime 1x -device gpu`.
// On the emulated device one small shape (its times mean nothing there).
func BenchmarkGemvOne(b *testing.B) {
	runDeviceBench(b, "gemv one", func(rt *cuda.Runtime, bw float64) {
		for _, p := range gemvOneProducts {
			N, K := p.N, p.K
			if *device != "gpu" {
				if p.name != gemvOneProducts[0].name {
					continue
				}
				N, K = 256, 512
			}
			res, err := rt.GemvOneBench(gemvOneForms, N, K, 13, 20)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range res {
				fmt.Printf("gemv one: %s N %d K %d %s: %.4f ms (×%.3f of %s), %.1f MB of weights, %.0f GB/s (%.1f%% of copy); %d launches a timing over %d copies\n", p.name, N, K, r.Kernel,
					r.Ms, r.Ms/res[0].Ms, res[0].Kernel, float64(r.Bytes)/1e6, float64(r.Bytes)/(r.Ms/1e3)/1e9, 100*float64(r.Bytes)/(r.Ms/1e3)/bw, r.Launches, r.Copies)
			}
		}
	})
}
