package kvstate

import (
	"math"
	"math/rand/v2"
	"testing"

	"deepinfer/kvlayout"
	"deepinfer/quant"
)

// A V4.1 sequence's packed state returns exactly the values the reference keeps: the
// window ring's MXFP8 rows and the compressed caches' FP4 entries, across page
// boundaries, are the fake-quantized rows that were pushed.
func TestV41PackedState(t *testing.T) {
	l := &kvlayout.Layout{Layers: []kvlayout.LayerLayout{{
		Window: 16, Dim: 64, RingFmt: "mxfp8",
		Caches: []kvlayout.CacheLayout{
			{Ratio: 2, Dim: 64, Kind: kvlayout.CacheKV, Fmt: "fp4_e4m3", Group: 16},
			{Ratio: 2, Dim: 32, Kind: kvlayout.CacheIndexKeys, Fmt: "fp4_ue8m0", Group: 32},
		},
	}}, EngramContext: 3}
	if err := l.Validate(); err != nil {
		t.Fatal(err)
	}
	s := New(l)
	r := rand.New(rand.NewPCG(5, 6))
	row := func(n int, f quant.Format, g int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(8)-4)))
		}
		f.FakeQuant(x, g)
		return x
	}
	var pushed [][]float32
	for p := 0; p < 40; p++ {
		x := row(64, quant.MXFP8, 32)
		pushed = append(pushed, x)
		s.Layers[0].Ring.Push(x, p)
	}
	got := make([]float32, 64)
	ring := &s.Layers[0].Ring
	for i := 0; i < ring.Len(); i++ {
		p := ring.RowInto(i, got)
		for j := range got {
			if got[j] != pushed[p][j] {
				t.Fatalf("ring row at position %d, elem %d: %v, pushed %v", p, j, got[j], pushed[p][j])
			}
		}
	}
	if ring.Len() != 15 {
		t.Fatalf("ring keeps %d rows, want window-1 = 15", ring.Len())
	}
	for ci, f := range []quant.Format{quant.FP4E4M3, quant.FP4UE8M0} {
		c := &s.Layers[0].Caches[ci]
		var entries [][]float32
		for e := 0; e < 3*pageEntries/2; e++ {
			x := row(c.Dim, f, c.Group)
			entries = append(entries, x)
			c.Append(x)
		}
		dst := make([]float32, c.Dim)
		for e, want := range entries {
			c.EntryInto(e, dst)
			for j := range dst {
				if dst[j] != want[j] {
					t.Fatalf("cache %d entry %d elem %d: %v, appended %v", ci, e, j, dst[j], want[j])
				}
			}
		}
	}
	s.PushEngram([]int32{1, 2}, l.EngramContext)
	s.PushEngram([]int32{3, 4}, l.EngramContext)
	if len(s.Engram) != 3 || s.Engram[0] != 2 || s.Engram[2] != 4 {
		t.Fatalf("engram history %v, want the last 3 ids [2 3 4]", s.Engram)
	}
}
