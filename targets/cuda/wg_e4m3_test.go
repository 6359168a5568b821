package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"

	"deepinfer/quant"
)

// TestWGE4M3Probe runs tensorcore.cu's wg_e4m3_probe: one wgmma m64n8k32 e4m3 product a
// 32-code step, four steps, on three kinds of operands, and compares each float32 sum
// with the exact one (float64: 32 products of E4M3 values span fewer than 53 bits).
//   - small integers (A's values ±1..8, B's ±1..4: every partial sum an integer below
//     2^11): any accumulation of 11 bits or more gives them exactly, so a wrong
//     descriptor, swizzle or fragment position fails the test;
//   - random finite codes of every exponent, and codes of one row's scale (MXFP8-like
//     activations against FP4-valued weights): every sum within 8e-4 of the sum of the
//     products' magnitudes (the H200 in run 48: worst 3.5e-4 random, 2.4e-4 e2m1 ×
//     MXFP8, the tensor cores' FP8 accumulation; a layout error is far outside it);
//
// and logs how the device's sums differ from the exact ones rounded once (on the
// emulated device none may: it sums exactly, decoding with prelude.h's e4m3_f32, which
// this compares with quant.DecodeE4M3). Each case runs twice: A from shared memory, and
// A from registers in mma.m16n8k32's 8-bit layout a warp (bytes 4t.. and 16 + 4t.. of
// rows g and g + 8), the layout an FP4 expert tile widening into registers would feed. What the log says on a GPU — how many
// low bits the tensor cores' FP8 accumulation keeps in a step — is what an FP8 expert
// tile's error against the fast mode's bound would be built from (docs/perf/moe.md).
func TestWGE4M3Probe(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(32, 4))
	finite := func() byte {
		for {
			c := byte(rng.IntN(256))
			if c&0x7f != 0x7f {
				return c
			}
		}
	}
	// e2m1's values as E4M3 codes (0, 0.5, 1, 1.5, 2, 3, 4, 6), signed
	fp4 := []byte{0x00, 0x30, 0x38, 0x3c, 0x40, 0x44, 0x48, 0x4c}
	for _, kind := range []string{"integers", "random", "fp4 × mxfp8"} {
		a, b := make([]byte, 64*128), make([]byte, 8*128)
		for i := range a {
			switch kind {
			case "integers": // the values 1, 2, 3, 4, 5, 6, 7, 8
				a[i] = []byte{0x38, 0x40, 0x44, 0x48, 0x4a, 0x4c, 0x4e, 0x50}[rng.IntN(8)] | byte(rng.IntN(2))<<7
			case "random":
				a[i] = finite()
			default:
				a[i] = fp4[rng.IntN(8)] | byte(rng.IntN(2))<<7
			}
		}
		for i := range b {
			switch kind {
			case "integers":
				b[i] = []byte{0x38, 0x40, 0x44, 0x48}[rng.IntN(4)] | byte(rng.IntN(2))<<7
			case "random":
				b[i] = finite()
			default: // an MXFP8 piece: any finite code (the scale is applied after the step)
				b[i] = finite()
			}
		}
		ap, bp := putBytes(k, a), putBytes(k, b)
		for _, rs := range []bool{false, true} {
			probeCheck(t, k, kind, rs, a, b, ap, bp)
		}
	}
}

// probeCheck runs wg_e4m3_probe on codes a and b (at ap, bp; A from registers with rs)
// and checks and logs its sums as TestWGE4M3Probe says.
func probeCheck(t *testing.T, k *emuKernels, kind string, rs bool, a, b []byte, ap, bp devptr) {
	t.Helper()
	if rs {
		kind += " (A from registers)"
	}
	{
		dp := put(k, make([]float32, 4*64*8))
		k.run("wg_e4m3_probe", func(args *ArgBuf) {
			args.P(ap)
			args.P(bp)
			args.P(dp)
			args.I(b2i(rs))
		})
		d := k.get(dp, 4*64*8)
		var rel []float64 // |device − exact| / Σ|products|, where they differ
		exactRounded := 0
		for s := range 4 {
			for r := range 64 {
				for c := range 8 {
					var sum, mag float64
					for j := range 32 {
						p := float64(quant.DecodeE4M3(a[r*128+32*s+j])) * float64(quant.DecodeE4M3(b[c*128+32*s+j]))
						sum += p
						mag += math.Abs(p)
					}
					got := float64(d[(s*64+r)*8+c])
					if float32(sum) == float32(got) {
						exactRounded++
						continue
					}
					if kind == "integers" {
						t.Errorf("%s: step %d row %d column %d: %g, want %g (exact in any float32 sum)", kind, s, r, c, got, sum)
						continue
					}
					e := math.Abs(got-sum) / mag
					if e > 8e-4 {
						t.Errorf("%s: step %d row %d column %d: %g, want %g (Σ|p| %g): not a sum of these products", kind, s, r, c, got, sum, mag)
					}
					rel = append(rel, e)
				}
			}
		}
		if k.where == nil && exactRounded != 4*64*8 {
			// (the emulated device sums exactly and rounds once)
			t.Errorf("%s: %d of %d sums equal the exact sums rounded once on the emulated device", kind, exactRounded, 4*64*8)
		}
		sort.Float64s(rel)
		if len(rel) == 0 {
			t.Logf("%s: all %d sums equal the exact sums rounded once", kind, 4*64*8)
			return
		}
		t.Logf("%s: %d of %d sums equal the exact sums rounded once; the others differ by a median %.3g and a worst %.3g of Σ|products| (2^%.1f and 2^%.1f)",
			kind, exactRounded, 4*64*8, rel[len(rel)/2], rel[len(rel)-1], math.Log2(rel[len(rel)/2]), math.Log2(rel[len(rel)-1]))
	}
}

// randMXFP8 draws M rows of K MXFP8 activations: E4M3 codes of every kind but NaN and a
// power-of-two scale a 32-value piece (2^-12 to 2^3), and their values in float64.
func randMXFP8(rng *rand.Rand, M, K int64) (codes []byte, scales []float32, x []float64) {
	codes, scales, x = make([]byte, M*K), make([]float32, M*K/32), make([]float64, M*K)
	for i := range scales {
		scales[i] = float32(math.Ldexp(1, rng.IntN(16)-12))
	}
	for i := range codes {
		for codes[i] = byte(rng.IntN(256)); codes[i]&0x7f == 0x7f; codes[i] = byte(rng.IntN(256)) {
		}
		x[i] = float64(quant.DecodeE4M3(codes[i])) * float64(scales[i/32])
	}
	return codes, scales, x
}

// TestWGE4M3GemmNearExact: fast_gemm_wg_e4m3 (the fp8 numerics' products of MXFP8
// activations and FP8 weights of 32 × 32 blocks on wgmma's e4m3 form) on random codes
// of every kind, scale bytes 110-139 for the weights and 2^-12..2^3 for the activations'
// pieces. On the emulated device every output is bit for bit this test's own sum of the
// kernel's definition: per 32-value block the exact sum (float64) rounded to float32,
// then d = fma(that, weight scale · piece scale, d) in block order. On either device
// every output is within 1e-3 of Σ|x·w| of the float64 value (the H200 in run 48 and an
// H100 in run 60: worst 6.9e-4, the tensor cores summing each block at their FP8 precision; a wrong
// swizzle, fragment, scale or step is far outside it), and the log reports how many
// outputs equal the definition's and the worst distance in units of Σ|x·w|. Shapes: partial last blocks
// of 128 x rows and more than one, slices (three of one step each), a one-step
// reduction, reductions ending in a part of a step (5, 6, 7 and 11 blocks of 32: last steps of
// 1, 2 and 3 blocks).
// fast_gemm_wg_e4m3n's outputs (blocks of 64 x rows) are fast_gemm_wg_e4m3's bit for bit,
// and so are fast_gemm_wg_e4m3p's and _e4m3q's (a step's blocks two and four at a time)
// and _e4m3w's (128 x rows, two at a time;
// shapes whose last step holds 1, 2 or 3 blocks test the partial groups).
func TestWGE4M3GemmNearExact(t *testing.T) {
	const gate = 1e-3
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(41, 7))
	for _, c := range []struct{ M, N, K, S, ks int64 }{
		{200, 128, 512, 1, 512}, {40, 64, 1024, 2, 512}, {129, 192, 384, 3, 128}, {300, 64, 128, 1, 128},
		{70, 64, 224, 1, 256}, {130, 128, 352, 2, 256}, {72, 64, 160, 1, 256}, {65, 128, 192, 1, 256},
	} {
		t.Run(fmtShape(c.M, c.N, c.K, c.S), func(t *testing.T) {
			M, N, K, S, ks := c.M, c.N, c.K, c.S, c.ks
			xq, xe, x := randMXFP8(rng, M, K)
			codes, scales, w := randFP8(rng, N, K, 2)
			wop := Operand{Ptr: put(k, packBytes(codes)), Scales: put(k, packBytes(scales)), Fmt: 2, Cols: K}
			xqp, xep := put(k, packBytes(xq)), put(k, xe)
			outs := S * M * N
			run := func(kernel string, bn int64) []float32 {
				y := put(k, make([]float32, outs))
				k.runShared(kernel, 128, uint32(wgE4M3Shared(bn)), func(a *ArgBuf) {
					gemmArgs(a, 0, 0, wop, y, M, N, K, S, ks, bn, 1, true)
					a.P(xqp)
					a.P(xep)
				})
				return k.get(y, int(outs))
			}
			got := run("fast_gemm_wg_e4m3", 128)
			// blocks of 64 x rows: the same block sums in the same order
			sameBits(t, "fast_gemm_wg_e4m3n against fast_gemm_wg_e4m3", run("fast_gemm_wg_e4m3n", 64), got)
			// a step's blocks issued two and four at a time: the same block sums, scaled
			// and added in the same order
			sameBits(t, "fast_gemm_wg_e4m3p against fast_gemm_wg_e4m3", run("fast_gemm_wg_e4m3p", 64), got)
			sameBits(t, "fast_gemm_wg_e4m3q against fast_gemm_wg_e4m3", run("fast_gemm_wg_e4m3q", 64), got)
			sameBits(t, "fast_gemm_wg_e4m3w against fast_gemm_wg_e4m3", run("fast_gemm_wg_e4m3w", 128), got)
			sc := (K + 31) / 32
			same, worst := 0, 0.0
			for s := range S {
				for m := range M {
					for n := range N {
						var ref, mag float64
						var def float32
						for kb := s * ks; kb < min(K, (s+1)*ks); kb += 32 {
							var bs float64
							for kk := kb; kk < kb+32; kk++ {
								p := x[m*K+kk] * w(n, kk)
								ref += p
								mag += math.Abs(p)
								bs += float64(quant.DecodeE4M3(xq[m*K+kk])) * float64(quant.DecodeE4M3(codes[n*K+kk]))
							}
							cs := float32(math.Ldexp(1, int(scales[(n/32)*sc+kb/32])-127)) * xe[m*K/32+kb/32]
							def = float32(math.FMA(float64(float32(bs)), float64(cs), float64(def)))
						}
						v := got[(s*M+m)*N+n]
						if v == def {
							same++
						} else if k.where == nil {
							t.Fatalf("slice %d, row %d, weight row %d: %g, the definition's %g (the emulated device)", s, m, n, v, def)
						}
						d := math.Abs(float64(v) - ref)
						if d > gate*mag || math.IsNaN(float64(v)) {
							t.Fatalf("slice %d, row %d, weight row %d: %g, exact %g (bound %g)", s, m, n, v, ref, gate*mag)
						}
						worst = math.Max(worst, d/math.Max(mag, 1e-30))
					}
				}
			}
			t.Logf("%d of %d outputs equal the definition's (blocks summed exactly, rounded once); worst %.3g of Σ|x·w| from the exact value", same, outs, worst)
		})
	}
}

// fmtShape names a product's subtest.
func fmtShape(M, N, K, S int64) string {
	return "M" + itoa(M) + "_N" + itoa(N) + "_K" + itoa(K) + "_S" + itoa(S)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestFP4ToE4M3Bytes: tensorcore_fp4.cu's fp4x8_e4m3 (eight e2m1 codes of a word as eight
// E4M3 bytes by three prmt table lookups and sign copies; on a GPU the device's prmt, on
// the emulated device byte_perm's model of it) on every code at every position and on
// random words: byte i of the first output word, and of the second for code 4 + i, is an
// E4M3 code of the same value as e2m1 code i (quant.DecodeE4M3 against
// quant.DecodeE2M1, negative zero's sign included).
func TestFP4ToE4M3Bytes(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(5, 9))
	var words []uint32
	for c := range uint32(16) {
		for pos := range 8 {
			words = append(words, c<<(4*pos)|uint32(rng.Uint32())&^(15<<(4*pos)))
		}
		words = append(words, c*0x11111111)
	}
	for range 2000 {
		words = append(words, rng.Uint32())
	}
	qp, op := put(k, words), put(k, make([]uint32, 2*len(words)))
	k.run("fp4_e4m3_probe", func(a *ArgBuf) {
		a.P(qp)
		a.P(op)
		a.I(int64(len(words)))
	})
	out := k.getBytes(op, 8*len(words)) // (code c of word i: byte 8i + c, the words little-endian)
	for i, q := range words {
		for c := range 8 {
			code := byte(q >> (4 * c) & 15)
			b := out[8*i+c]
			want, got := quant.DecodeE2M1(code), quant.DecodeE4M3(b)
			if math.Float32bits(want) != math.Float32bits(got) {
				t.Fatalf("word %08x, code %d (%x): E4M3 byte %02x is %g, want %g", q, c, code, b, got, want)
			}
		}
	}
}
