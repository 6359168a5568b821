package kvstate

import (
	"testing"

	"deepinfer/kvlayout"
)

func TestRingKeepsLastRows(t *testing.T) {
	l := &kvlayout.Layout{Layers: []kvlayout.LayerLayout{{Window: 4, Dim: 2}}}
	s := New(l)
	r := &s.Layers[0].Ring
	rows := func(n, start int) []float32 {
		v := make([]float32, 2*n)
		for i := 0; i < n; i++ {
			v[2*i], v[2*i+1] = float32(start+i), -float32(start+i)
		}
		return v
	}
	r.Push(rows(2, 0), 0) // positions 0,1
	r.Push(rows(5, 2), 2) // positions 2..6: keeps 4,5,6
	if r.Len() != 3 {
		t.Fatalf("len %d, want 3 (window-1)", r.Len())
	}
	for i := 0; i < 3; i++ {
		row, p := r.Row(i)
		if p != int32(4+i) || row[0] != float32(4+i) || row[1] != -float32(4+i) {
			t.Fatalf("row %d: pos %d values %v", i, p, row)
		}
	}
	r.Push(rows(1, 7), 7)
	if _, p := r.Row(0); p != 5 {
		t.Fatalf("oldest position %d after one more push, want 5", p)
	}
}
