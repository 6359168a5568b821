package cuda

import (
	"math"
	"math/rand/v2"
	"sort"
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
//     activations against FP4-valued weights): every sum within 2^-8 of the sum of the
//     products' magnitudes (a layout error is far outside it);
//
// and logs how the device's sums differ from the exact ones rounded once (on the
// emulated device none may: it sums exactly, decoding with prelude.h's e4m3_f32, which
// this compares with quant.DecodeE4M3). What the log says on a GPU — how many
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
		dp := put(k, make([]float32, 4*64*8))
		k.run("wg_e4m3_probe", func(args *ArgBuf) {
			args.P(ap)
			args.P(bp)
			args.P(dp)
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
					if e > 1.0/256 {
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
			continue
		}
		t.Logf("%s: %d of %d sums equal the exact sums rounded once; the others differ by a median %.3g and a worst %.3g of Σ|products| (2^%.1f and 2^%.1f)",
			kind, exactRounded, 4*64*8, rel[len(rel)/2], rel[len(rel)-1], math.Log2(rel[len(rel)/2]), math.Log2(rel[len(rel)-1]))
	}
}
