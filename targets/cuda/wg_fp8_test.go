package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"deepinfer/quant"
)

// TestWGFP8NearWide: fast_gemm_wg_fp8 (wgmma on the GPU, both operands in shared
// memory) against fast_gemm_wide (the mma.sync chain) on the same FP8 weights and bf16
// activations, and both against a float64 reference of the widened operands: every
// output within 1.5e-6·Σ|x·w| of the reference (the emulated device: at most 6.6e-7;
// a float32 sum's worst case over L values, (L − 1)·2^-24, is 1.9e-5 at L = 320; the
// H200 in run 24: at most 6.8e-7), and on the GPU not all equal (the wgmma kernel ran its own
// order). Shapes: each FP8 format (32×32 blocks, rows of
// 32-value groups, 128×128 blocks), a partial last tile of 64 weight rows, a partial
// last block of 128 x rows and more than one, sliced reductions (a slice of one step),
// a reduction of one step, scale bytes far from 127, and weight codes of every kind
// (subnormals, zeros, both signs; never the NaN codes). fast_gemm_wg_fp8a's and
// fast_gemm_wg_fp8n's outputs are fast_gemm_wg_fp8's bit for bit (fast_gemm_wg_fp8n's
// m64n64k16 sums each output in the m64n128k16 form's order: on an H100 in run 39, every
// output equal).
func TestWGFP8NearWide(t *testing.T) {
	// each output within 1.5e-6 of Σ|x·w| of the reference: about twice the worst the
	// emulated device (6.6e-7) and the H200 (6.8e-7, run 24) showed, far inside a float32 sum's worst case over a
	// slice, (L − 1)·2^-24 (1.9e-5 at L = 320)
	const refGate = 1.5e-6
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(23, 8))
	for _, c := range []struct{ M, N, K, fmt, S, G int64 }{
		{200, 100, 320, 2, 1, 1}, {40, 64, 512, 5, 2, 1}, {129, 130, 192, 3, 3, 1}, {300, 200, 64, 5, 1, 1}, {64, 48, 256, 2, 4, 1},
	} {
		t.Run(fmt.Sprintf("M%d_N%d_K%d_fmt%d_S%d_G%d", c.M, c.N, c.K, c.fmt, c.S, c.G), func(t *testing.T) {
			M, N, K, S, G := c.M, c.N, c.K, c.S, c.G
			ks := K / S / 64 * 64
			if ks*S != K {
				t.Fatalf("slices %d of K %d", S, K)
			}
			codes, scales, w := randFP8(rng, N, K, c.fmt)
			// x's bf16 values as pairs (rows of Kp/2 words; Kp = K; with groups G rows a
			// token, row m·G + g group g's)
			xv := make([]float32, M*G*K)
			xw := make([]uint32, M*G*K/2)
			for i := range xv {
				xv[i] = math.Float32frombits(math.Float32bits(float32(rng.NormFloat64())) &^ 0xffff)
			}
			for i := range xw {
				xw[i] = math.Float32bits(xv[2*i])>>16 | math.Float32bits(xv[2*i+1])&0xffff0000
			}
			wp, sp := put(k, packBytes(codes)), put(k, packBytes(scales))
			xp := put(k, xw)
			outs := S * M * N
			run := func(kernel string) []float32 {
				y := put(k, make([]float32, outs))
				k.run(kernel, func(a *ArgBuf) {
					// (xl never read: xexact)
					gemmArgs(a, xp, xp, Operand{Ptr: wp, Scales: sp, Fmt: c.fmt, Cols: K}, y, M, N, K, S, ks, fastWideRows, G, true)
				})
				return k.get(y, int(outs))
			}
			wide, wg := run("fast_gemm_wide"), run("fast_gemm_wg_fp8")
			// the float64 reference of the widened operands: an output's value and Σ|x·w|
			ref := func(s, m, n int64) (ref, mag float64) {
				x := xv[(m*G+n/(N/G))*K:]
				for kk := s * ks; kk < (s+1)*ks; kk++ {
					p := float64(x[kk]) * w(n, kk)
					ref += p
					mag += math.Abs(p)
				}
				return ref, mag
			}
			differ, worst, worstRef := nearRef(t, S, M, N, refGate, ref, "fast_gemm_wide", wide, "fast_gemm_wg_fp8", wg)
			t.Logf("%d of %d outputs differ; worst %.3g of Σ|x·w| apart, %.3g from the reference", differ, outs, worst, worstRef)
			// fast_gemm_wg_fp8a (the weight bytes two steps ahead): the same products in
			// the same order
			sameBits(t, "fast_gemm_wg_fp8a against fast_gemm_wg_fp8", run("fast_gemm_wg_fp8a"), wg)
			// fast_gemm_wg_fp8n (blocks of 64 x rows, wgmma m64n64k16): the same sums
			sameBits(t, "fast_gemm_wg_fp8n against fast_gemm_wg_fp8", run("fast_gemm_wg_fp8n"), wg)
			if k.where != nil && differ == 0 {
				t.Error("every output equal to fast_gemm_wide's on the GPU: the wgmma kernel did not run its own order")
			}
		})
	}
}

// TestWGRNearBlk: fast_gemm_wg_bf16 and fast_gemm_wg_fp8r (wgmma on the GPU, the
// activations' halves as the register operand) against fast_gemm_blk (the mma.sync
// chain) on the same bf16 or FP8 weights and activations in two halves (hi = bf16(x),
// lo = bf16(x − hi)), or bf16 activations with xexact, and both against a float64
// reference of the halves' products: every output within refGate·Σ|x·w| of the
// reference, and on the GPU not all equal (the wgmma kernel ran its own order); x comes
// in fast_split's order for fast_gemm_blk and fast_gemm_wg_bf16, in fast_split_wg's
// (wgr_pos) for fast_gemm_wg_fp8r. Shapes:
// bf16 and each FP8 format, a partial last tile of 128 weight rows, a partial last
// block of 64 x rows and more than one, sliced reductions, a reduction of one step,
// scale bytes far from 127, and weight codes of every kind (never the NaN codes).
// fast_gemm_wg_bf16a's and _fp8ra's outputs are fast_gemm_wg_bf16's and _fp8r's bit for bit.
func TestWGRNearBlk(t *testing.T) {
	// each output within 1.5e-6 of Σ|x·w| of the reference: about twice the worst the
	// emulated device showed (8.0e-7, an FP8 case) and 1.3 times the H200's in run 25b
	// (1.16e-6, the FP8 128-block case), far inside a float32 sum's worst case over a
	// slice of L values in two halves, (2L − 1)·2^-24 (3.8e-5 at L = 320)
	const refGate = 1.5e-6
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(29, 4))
	for _, c := range []struct {
		M, N, K, S, fmt int64
		xexact          bool
	}{
		{200, 100, 320, 1, 1, false}, {40, 300, 512, 2, 1, false}, {129, 130, 192, 3, 1, true}, {70, 256, 64, 1, 1, false},
		{64, 48, 256, 4, 1, true}, {200, 100, 320, 1, 2, false}, {130, 300, 512, 2, 5, false}, {129, 130, 192, 3, 3, true},
	} {
		t.Run(fmt.Sprintf("M%d_N%d_K%d_S%d_fmt%d_xexact%v", c.M, c.N, c.K, c.S, c.fmt, c.xexact), func(t *testing.T) {
			M, N, K, S := c.M, c.N, c.K, c.S
			ks := K / S / 64 * 64
			if ks*S != K {
				t.Fatalf("slices %d of K %d", S, K)
			}
			// the weights: bf16 values two to a word, or FP8 codes and scale bytes
			wv := make([]float64, N*K)
			var wop Operand
			kernel := "fast_gemm_wg_bf16"
			if c.fmt == 1 {
				ww := make([]uint32, N*K/2)
				for i := range wv {
					wv[i] = float64(quant.BF16(float32(rng.NormFloat64())))
				}
				for i := range ww {
					ww[i] = math.Float32bits(float32(wv[2*i]))>>16 | math.Float32bits(float32(wv[2*i+1]))&0xffff0000
				}
				wop = Operand{Ptr: put(k, ww), Fmt: 1, Cols: K}
			} else {
				kernel = "fast_gemm_wg_fp8r"
				codes, scales, w := randFP8(rng, N, K, c.fmt)
				for n := range N {
					for kk := range K {
						wv[n*K+kk] = w(n, kk)
					}
				}
				wop = Operand{Ptr: put(k, packBytes(codes)), Scales: put(k, packBytes(scales)), Fmt: c.fmt, Cols: K}
			}
			// x's halves as pairs (rows of K/2 words)
			hv, lv := make([]float32, M*K), make([]float32, M*K)
			xh, xl := make([]uint32, M*K/2), make([]uint32, M*K/2)
			for i := range hv {
				x := float32(rng.NormFloat64())
				hv[i] = quant.BF16(x)
				if !c.xexact {
					lv[i] = quant.BF16(x - hv[i])
				}
			}
			for i := range xh {
				xh[i] = math.Float32bits(hv[2*i])>>16 | math.Float32bits(hv[2*i+1])&0xffff0000
				xl[i] = math.Float32bits(lv[2*i])>>16 | math.Float32bits(lv[2*i+1])&0xffff0000
			}
			// and in wgr_pos's order (fast_split_wg's), which fast_gemm_wg_fp8r[a] reads
			fh, fl := make([]uint32, M*K/2), make([]uint32, M*K/2)
			for m := range M {
				for q := range K / 2 {
					fh[m*K/2+wgrPos(q)], fl[m*K/2+wgrPos(q)] = xh[m*K/2+q], xl[m*K/2+q]
				}
			}
			hp, lp, fhp, flp := put(k, xh), put(k, xl), put(k, fh), put(k, fl)
			outs := S * M * N
			run := func(kernel string) []float32 {
				y := put(k, make([]float32, outs))
				k.run(kernel, func(a *ArgBuf) {
					xh, xl := hp, lp
					if strings.HasPrefix(kernel, "fast_gemm_wg_fp8r") {
						xh, xl = fhp, flp
					}
					gemmArgs(a, xh, xl, wop, y, M, N, K, S, ks, fastBlockRows, 1, c.xexact)
				})
				return k.get(y, int(outs))
			}
			blk, wg := run("fast_gemm_blk"), run(kernel)
			differ, worst, worstRef := nearRef(t, S, M, N, refGate, func(s, m, n int64) (ref, mag float64) {
				for kk := s * ks; kk < (s+1)*ks; kk++ {
					for _, x := range []float32{hv[m*K+kk], lv[m*K+kk]} {
						p := float64(x) * wv[n*K+kk]
						ref += p
						mag += math.Abs(p)
					}
				}
				return ref, mag
			}, "fast_gemm_blk", blk, kernel, wg)
			t.Logf("%d of %d outputs differ; worst %.3g of Σ|x·w| apart, %.3g from the reference", differ, outs, worst, worstRef)
			// fast_gemm_wg_bf16a, _fp8ra (the weight rows two steps ahead): the same
			// products in the same order
			sameBits(t, kernel+"a against "+kernel, run(kernel+"a"), wg)
			if k.where != nil && differ == 0 {
				t.Errorf("every output equal to fast_gemm_blk's on the GPU: %s did not run its own order", kernel)
			}
		})
	}
}

// wgrPos is tensorcore.cu's wgr_pos: where fast_split_wg stores a row's pair q.
func wgrPos(q int64) int64 {
	r := q & 31
	return q&^31 + 8*(r&3) + 2*(r>>3) + (r>>2)&1
}

// randFP8 draws an N×K FP8 weight of format f (2: 32×32 blocks, 3: rows of 32-value
// groups, 5: 128×128 blocks): codes of every kind but the NaN ones (0x7f, 0xff), scale
// bytes 110-139, and w, its value at (n, k) in float64.
func randFP8(rng *rand.Rand, N, K, f int64) (codes, scales []byte, w func(n, k int64) float64) {
	codes = make([]byte, N*K)
	for i := range codes {
		for codes[i] = byte(rng.IntN(256)); codes[i]&0x7f == 0x7f; codes[i] = byte(rng.IntN(256)) {
		}
	}
	var srows, scols int64
	switch f {
	case 2:
		srows, scols = (N+31)/32, (K+31)/32
	case 3:
		srows, scols = N, (K+31)/32
	case 5:
		srows, scols = (N+127)/128, (K+127)/128
	}
	scales = make([]byte, srows*scols)
	for i := range scales {
		scales[i] = byte(110 + rng.IntN(30))
	}
	scale := func(n, k int64) byte {
		switch f {
		case 2:
			return scales[(n/32)*scols+k/32]
		case 3:
			return scales[n*scols+k/32]
		}
		return scales[(n/128)*scols+k/128]
	}
	return codes, scales, func(n, k int64) float64 {
		return float64(quant.DecodeE4M3(codes[n*K+k])) * math.Ldexp(1, int(scale(n, k))-127)
	}
}

// packBytes packs bytes four to a little-endian word.
func packBytes(b []byte) []uint32 {
	u := make([]uint32, (len(b)+3)/4)
	for i, v := range b {
		u[i/4] |= uint32(v) << (8 * (i % 4))
	}
	return u
}

// nearRef checks two kernels' outputs of S slices × M rows × N weight rows (slice-major,
// as part holds them) against a float64 reference: each within gate·Σ|x·w| of ref(s, m,
// n)'s value, its magnitude the second result. It returns how many outputs the two
// kernels' differ in, their worst distance and the worst from the reference, both
// relative to Σ|x·w|.
func nearRef(t *testing.T, S, M, N int64, gate float64, ref func(s, m, n int64) (float64, float64),
	an string, a []float32, bn string, b []float32) (differ int, worst, worstRef float64) {
	t.Helper()
	for s := range S {
		for m := range M {
			for n := range N {
				r, mag := ref(s, m, n)
				i := (s*M+m)*N + n
				for _, g := range []struct {
					name string
					v    float32
				}{{an, a[i]}, {bn, b[i]}} {
					d := math.Abs(float64(g.v) - r)
					if d > gate*mag || math.IsNaN(float64(g.v)) {
						t.Fatalf("slice %d, row %d, weight row %d: %s %g, reference %g (bound %g)", s, m, n, g.name, g.v, r, gate*mag)
					}
					worstRef = math.Max(worstRef, d/math.Max(mag, 1e-30))
				}
				if d := math.Abs(float64(a[i]) - float64(b[i])); d > 0 {
					differ++
					worst = math.Max(worst, d/math.Max(mag, 1e-30))
				}
			}
		}
	}
	return differ, worst, worstRef
}

// gemmArgs fills FastGemmArgs for a product of M rows of K values (Kp = K) with N weight
// rows in S slices of ks, one group, float32 outputs in y (and its slices there too),
// the x tiles of rows rows.
func gemmArgs(a *ArgBuf, xh, xl devptr, w Operand, y devptr, M, N, K, S, ks, rows, G int64, xexact bool) {
	a.P(xh)
	a.P(xl)
	a.W(w)
	a.P(y)
	a.P(y) // part: S > 1
	a.I(M)
	a.I(N)
	a.I(K)
	a.I(K)
	a.I(S)
	a.I(ks)
	a.I((M + rows - 1) / rows)
	a.I(N) // ldy
	a.I(0) // out_bf16
	a.I(G)
	a.I(1) // prefetch
	a.I(b2i(xexact))
}

// TestWGBF16WNearRef: fast_gemm_wg_bf16w (bf16 weights and bf16 activations on wgmma,
// both operands copied into shared memory; in groups too) and fast_gemm_wide (the
// mma.sync chain) against a float64 reference of the same bf16 operands: every output
// within 1.5e-6·Σ|x·w| (TestWGFP8NearWide's gate: the same sums of exact products in
// another order), on the GPU not all equal. Shapes: one group with a partial last tile
// of 64 weight rows and of 128 x rows, sliced reductions, V4.1's wo_a in groups (64
// weight rows a group, as the fixtures', and 128).
func TestWGBF16WNearRef(t *testing.T) {
	const refGate = 1.5e-6
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(31, 7))
	for _, c := range []struct{ M, N, K, S, G int64 }{
		{200, 100, 320, 1, 1}, {40, 192, 512, 2, 1}, {110, 128, 128, 1, 2}, {150, 256, 256, 1, 2}, {70, 512, 192, 3, 4},
	} {
		t.Run(fmt.Sprintf("M%d_N%d_K%d_S%d_G%d", c.M, c.N, c.K, c.S, c.G), func(t *testing.T) {
			M, N, K, S, G := c.M, c.N, c.K, c.S, c.G
			ks := K / S / 64 * 64
			if ks*S != K {
				t.Fatalf("slices %d of K %d", S, K)
			}
			// bf16 values as pairs: the weights' rows of K, x's G rows a token of K
			bf := func(n int64) ([]float32, []uint32) {
				v, w := make([]float32, n), make([]uint32, n/2)
				for i := range v {
					v[i] = quant.BF16(float32(rng.NormFloat64()))
				}
				for i := range w {
					w[i] = math.Float32bits(v[2*i])>>16 | math.Float32bits(v[2*i+1])&0xffff0000
				}
				return v, w
			}
			wv, ww := bf(N * K)
			xv, xw := bf(M * G * K)
			wp, xp := put(k, ww), put(k, xw)
			outs := S * M * N
			run := func(kernel string) []float32 {
				y := put(k, make([]float32, outs))
				k.run(kernel, func(a *ArgBuf) {
					gemmArgs(a, xp, xp, Operand{Ptr: wp, Fmt: 1, Cols: K}, y, M, N, K, S, ks, fastWideRows, G, true)
				})
				return k.get(y, int(outs))
			}
			ref := func(s, m, n int64) (ref, mag float64) {
				x := xv[(m*G+n/(N/G))*K:]
				for kk := s * ks; kk < (s+1)*ks; kk++ {
					p := float64(x[kk]) * float64(wv[n*K+kk])
					ref += p
					mag += math.Abs(p)
				}
				return ref, mag
			}
			differ, worst, worstRef := nearRef(t, S, M, N, refGate, ref, "fast_gemm_wide", run("fast_gemm_wide"), "fast_gemm_wg_bf16w", run("fast_gemm_wg_bf16w"))
			t.Logf("%d of %d outputs differ; worst %.3g of Σ|x·w| apart, %.3g from the reference", differ, outs, worst, worstRef)
			if k.where != nil && differ == 0 {
				t.Error("every output equal to fast_gemm_wide's on the GPU: the wgmma kernel did not run its own order")
			}
		})
	}
}
