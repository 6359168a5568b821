package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// lowTieBrute is lowTieTopK written plainly:
// the positions ordered by value, larger first (every NaN first, +0 and -0 equal, as
// torch.topk orders them), the lower position first among equal values; the first k.
func lowTieBrute(vals []float32, k int) []int {
	key := func(v float32) float64 {
		if v != v {
			return math.Inf(1) // above +inf: compared apart below
		}
		return float64(v)
	}
	order := make([]int, len(vals))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		na, nb := vals[a] != vals[a], vals[b] != vals[b]
		switch {
		case na && nb:
			return 0
		case na:
			return -1
		case nb:
			return 1
		}
		if key(vals[a]) > key(vals[b]) {
			return -1
		}
		if key(vals[a]) < key(vals[b]) {
			return 1
		}
		return 0
	})
	return order[:min(k, len(order))]
}

// TestLowTieTopK: lowTieTopK (a cut by the order keys, its equals taken by position)
// against lowTieBrute (a stable sort by value) on rows full of ties: bf16-rounded values,
// a few distinct values, NaNs, ±0 and ±inf, at V4.1's row sizes.
func TestLowTieTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fills := map[string]func() float32{
		"bf16": func() float32 {
			return math.Float32frombits(math.Float32bits(float32(4+rng.NormFloat64())) & 0xffff0000)
		},
		"few": func() float32 { return float32(rng.IntN(5)) },
		"specials": func() float32 {
			return []float32{float32(math.NaN()), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0,
				float32(math.Inf(1)), 1, 2}[rng.IntN(7)]
		},
		"distinct": func() float32 { return float32(rng.NormFloat64()) },
	}
	for name, fill := range fills {
		for _, nk := range [][2]int{{1, 1}, {9, 20}, {70, 30}, {4096, 512}, {32768, 512}, {5000, 4999}} {
			vals := make([]float32, nk[0])
			for i := range vals {
				vals[i] = fill()
			}
			want := slices.Clone(lowTieBrute(vals, nk[1]))
			slices.Sort(want)
			if got := lowTieTopK(vals, nk[1]); !slices.Equal(got, want) {
				t.Fatalf("%s n %d k %d: %v..., want %v...", name, nk[0], nk[1], got[:min(8, len(got))], want[:min(8, len(want))])
			}
		}
	}
}
