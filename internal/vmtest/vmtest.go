// Package vmtest holds the helpers the engine's tests share across packages (the vm
// tests on the cpu target, the cuda target's device tests): run requests, and compare
// results bit for bit.
package vmtest

import (
	"math"
	"slices"
	"testing"

	"deepinfer/vm"
)

// RunAll runs reqs on e and returns the results in request order; a failed request
// fails the test.
func RunAll(t testing.TB, e *vm.Engine, reqs []vm.Request) []vm.Result {
	t.Helper()
	out := make([]vm.Result, len(reqs))
	e.Run(slices.Clone(reqs), func(r vm.Result) {
		if r.Err != nil {
			t.Fatalf("request %s: %v", r.ID, r.Err)
		}
		out[r.Index] = r
	})
	return out
}

// SameResults compares tokens and every logits row bit for bit.
func SameResults(t testing.TB, what string, got, want []vm.Result) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		first, worst := -1, 0.0
		for j := 0; j < min(len(g.Logits), len(w.Logits)); j++ {
			for v := range w.Logits[j] {
				if d := math.Abs(float64(g.Logits[j][v]) - float64(w.Logits[j][v])); d > 0 || math.IsNaN(d) {
					worst = math.Max(worst, d)
					if first < 0 {
						first = j
					}
				}
			}
		}
		switch {
		case !slices.Equal(g.Tokens, w.Tokens):
			t.Errorf("%s: request %s: tokens %v, want %v (logits first differ at row %d, by up to %.3g)", what, w.ID, g.Tokens, w.Tokens, first, worst)
		case len(g.Logits) != len(w.Logits):
			t.Errorf("%s: request %s: %d logits rows, want %d", what, w.ID, len(g.Logits), len(w.Logits))
		case first >= 0:
			t.Errorf("%s: request %s: logits differ from row %d, by up to %.3g; want bit-for-bit equality", what, w.ID, first, worst)
		}
	}
}
