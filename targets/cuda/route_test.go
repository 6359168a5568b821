package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRouterSelection runs moe_route_v4's selection and weights (a token's scores and
// selection values placed in its scratch, as moe_gate_v4 and moe_score_v4 leave them)
// against the cpu's insertion order ported here: the k highest selection values, the
// lower expert id first among equals, the weights normalized in the picked order.
// On a GPU the selection runs on the first warp of a token's launch block
// (moe_topk_warp), with the serial insertion on lane 0 when a value is NaN or k is past
// MOE_KW; the emulated device runs the insertion. The cases tie values in every lane
// (a handful of distinct values over 256 or 300 experts), mix −0 and +0 and −∞, place
// NaNs (first, last, and in a full list), and take k from 1 to 17.
func TestRouterSelection(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(11, 12))
	type fill func(e int) float64
	distinct := func(int) float64 { return rng.NormFloat64() }
	few := func(int) float64 { return float64(rng.IntN(4)) * 0.25 }
	zeros := func(int) float64 {
		switch rng.IntN(4) {
		case 0:
			return math.Copysign(0, -1)
		case 1:
			return 0
		case 2:
			return math.Inf(-1)
		}
		return 1e-300 * float64(rng.IntN(3))
	}
	nanAt := func(base fill, at ...int) fill {
		return func(e int) float64 {
			for _, a := range at {
				if e == a {
					return math.NaN()
				}
			}
			return base(e)
		}
	}
	for _, c := range []struct {
		name string
		E, k int
		sel  fill
	}{
		{"distinct", 256, 6, distinct},
		{"four values", 256, 6, few},
		{"four values, k 16", 256, 16, few},
		{"four values, k 17 (serial)", 256, 17, few},
		{"four values, 300 experts", 300, 8, few},
		{"signed zeros and -inf", 256, 6, zeros},
		{"fewer experts than a warp", 20, 6, few},
		{"k 1", 384, 1, few},
		{"NaN first", 256, 6, nanAt(few, 0)},
		{"NaN last", 256, 6, nanAt(distinct, 255)},
		{"NaNs among ties", 256, 6, nanAt(few, 3, 40, 41, 200)},
	} {
		t.Run(fmt.Sprintf("%s E%d k%d", c.name, c.E, c.k), func(t *testing.T) {
			const T, scale = 37, 1.5
			per := 2*c.E + c.k // float64 words a token: scores, sel, pick
			scratch := make([]float64, T*per)
			for tok := range T {
				for e := range c.E {
					scratch[tok*per+e] = 0.01 + rng.Float64()
					scratch[tok*per+c.E+e] = c.sel(e)
				}
			}
			sp := put(k, scratch)
			wout, idout := put(k, make([]float32, T*c.k)), put(k, make([]float32, T*c.k))
			errp := put(k, make([]int64, 1))
			k.run("moe_route_v4", func(a *ArgBuf) {
				a.P(0) // x
				a.W(Operand{})
				a.W(Operand{})
				a.I(0) // has_bias
				a.P(0)
				a.P(0)
				a.P(wout)
				a.P(idout)
				a.I(T)
				a.I(int64(c.E))
				a.I(0) // D
				a.I(int64(c.k))
				a.I(0) // V
				a.I(0) // hash
				a.I(1) // norm
				a.I(0) // scoring: sqrtsoftplus (scores given)
				a.F(scale)
				a.P(sp)
				a.P(errp)
			})
			gw, gid := k.get(wout, T*c.k), k.get(idout, T*c.k)
			if e := k.getI64(errp, 1)[0]; e != 0 {
				t.Fatalf("error %d", e)
			}
			for tok := range T {
				scores, sel := scratch[tok*per:tok*per+c.E], scratch[tok*per+c.E:tok*per+2*c.E]
				pick := insertionTopK(sel, c.k)
				sum := 0.0
				for _, p := range pick {
					sum += scores[p]
				}
				for j, p := range pick {
					id := int32(math.Float32bits(gid[tok*c.k+j]))
					w := float32(scores[p] / (sum + 1e-20) * scale)
					if id != int32(p) || math.Float32bits(gw[tok*c.k+j]) != math.Float32bits(w) {
						t.Fatalf("token %d slot %d: expert %d weight %g, want %d and %g (list %v)", tok, j, id, gw[tok*c.k+j], p, w, pick)
					}
				}
			}
		})
	}
}

// insertionTopK is the cpu's topExperts: each expert in id order inserted into a
// descending list of k, past every entry not below it.
func insertionTopK(sel []float64, k int) []int {
	pick := make([]int, k)
	for j := range pick {
		pick[j] = -1
	}
	for e, v := range sel {
		j := k
		for j > 0 && (pick[j-1] < 0 || sel[pick[j-1]] < v) {
			j--
		}
		if j == k {
			continue
		}
		copy(pick[j+1:], pick[j:k-1])
		pick[j] = e
	}
	return pick
}
