package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSum4SameSums: fast_sum4 (four adjacent values a work item, the slices' pieces
// loaded four at a time) writes what fast_sum writes, bit for bit, and both are each
// value's float32 sum in slice order (a Go loop): slice counts below, at and past four
// and not a multiple of it, a row stride past N (the values between rows untouched),
// bf16 outputs, and slices of magnitudes far apart so that another order of the
// additions gives other bits. On a GPU (newKernels) the device's code.
func TestSum4SameSums(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(45, 2))
	for _, c := range []struct{ M, N, S, ldy, bf16 int }{
		{1, 4, 2, 4, 0}, {5, 12, 3, 16, 0}, {3, 1024, 4, 1024, 0}, {7, 256, 5, 260, 1}, {2, 64, 8, 64, 0}, {4, 40, 9, 44, 1},
	} {
		t.Run(fmt.Sprintf("M %d N %d S %d ldy %d bf16 %d", c.M, c.N, c.S, c.ldy, c.bf16), func(t *testing.T) {
			part := make([]float32, c.S*c.M*c.N)
			for i := range part {
				part[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(9)-3)))
			}
			pp := put(k, part)
			outs := map[string][]float32{}
			for _, name := range []string{"fast_sum", "fast_sum4"} {
				y := make([]float32, c.M*c.ldy)
				for i := range y {
					y[i] = 7
				}
				yp := put(k, y)
				k.run(name, func(a *ArgBuf) {
					a.P(0)
					a.P(0)
					a.W(Operand{})
					a.P(yp)
					a.P(pp)
					a.I(int64(c.M))
					a.I(int64(c.N))
					a.I(0) // K
					a.I(0) // Kp
					a.I(int64(c.S))
					a.I(0) // ks
					a.I(0) // mtiles
					a.I(int64(c.ldy))
					a.I(int64(c.bf16))
					a.I(1) // G
					a.I(0) // prefetch
					a.I(0) // xexact
				})
				outs[name] = k.get(yp, c.M*c.ldy)
			}
			sameBits(t, "fast_sum4 against fast_sum", outs["fast_sum4"], outs["fast_sum"])
			if c.bf16 != 0 {
				return
			}
			want := make([]float32, c.M*c.ldy)
			for m := range c.M {
				for n := range c.ldy {
					if n >= c.N {
						want[m*c.ldy+n] = 7
						continue
					}
					var v float32
					for s := range c.S {
						v += part[(s*c.M+m)*c.N+n]
					}
					want[m*c.ldy+n] = v
				}
			}
			sameBits(t, "fast_sum4 against the sums in slice order", outs["fast_sum4"], want)
		})
	}
}
