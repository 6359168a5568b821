package engram

import (
	"math/big"
	"testing"
)

// hashRef is engram.py's hash for one position in exact integer arithmetic: the rolling
// XOR of token·multiplier over the n-gram, reduced modulo each head's prime (torch's %,
// which is non-negative for a positive divisor), plus the head's table offset.
func hashRef(l *Layout, li int, toks []int64) []int64 {
	out := make([]int64, l.Cols())
	rolling := new(big.Int)
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	for k := 0; k < l.MaxNgram; k++ {
		p := new(big.Int).Mul(big.NewInt(toks[k]), big.NewInt(l.Mult[li][k]))
		// int64 wrap-around, as the reference's int64 tensors have it
		p.Mod(p, two64)
		if p.Cmp(new(big.Int).Lsh(big.NewInt(1), 63)) >= 0 {
			p.Sub(p, two64)
		}
		if k == 0 {
			rolling.Set(p)
			continue
		}
		rolling = xor64(rolling, p)
		for h := 0; h < l.Heads; h++ {
			c := (k-1)*l.Heads + h
			m := new(big.Int).Mod(rolling, big.NewInt(l.Primes[li][c])) // Euclidean: ≥ 0
			out[c] = m.Int64() + l.Offsets[li][c]
		}
	}
	return out
}

func xor64(a, b *big.Int) *big.Int {
	return big.NewInt(a.Int64() ^ b.Int64())
}

// FuzzHash checks Layout.Hash against the exact-integer reference for any compressed
// ids in range, in both the tiny fixture's layout and the release's (99,092 ids, eight
// heads, two layers), and that every row lands inside its head's table.
func FuzzHash(f *testing.F) {
	tiny, err := NewLayout([]int{0, 1}, 4, 2, 100, 418)
	if err != nil {
		f.Fatal(err)
	}
	release, err := NewLayout([]int{1, 14}, 4, 8, 16000000, 99092)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), uint32(0), uint32(0), uint32(0), false, uint8(0))
	f.Add(uint32(417), uint32(2), uint32(99), uint32(5), false, uint8(1))
	f.Add(uint32(99091), uint32(99091), uint32(99091), uint32(99091), true, uint8(1))
	f.Fuzz(func(t *testing.T, a, b, c, d uint32, big bool, layer uint8) {
		l, v := tiny, int64(418)
		if big {
			l, v = release, 99092
		}
		toks := []int64{int64(a) % v, int64(b) % v, int64(c) % v, int64(d) % v}
		li := int(layer) % len(l.Layers)
		out := make([]int32, l.Cols())
		l.Hash(li, toks, out)
		want := hashRef(l, li, toks)
		for i := range out {
			if int64(out[i]) != want[i] {
				t.Fatalf("layer %d toks %v col %d: %d, want %d", li, toks, i, out[i], want[i])
			}
			lo, hi := l.Offsets[li][i], l.Offsets[li][i]+l.Primes[li][i]
			if int64(out[i]) < lo || int64(out[i]) >= hi || int64(out[i]) >= l.Rows(li) {
				t.Fatalf("col %d: row %d outside [%d, %d) of %d", i, out[i], lo, hi, l.Rows(li))
			}
		}
	})
}
