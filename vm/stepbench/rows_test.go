package stepbench

import (
	"math/rand/v2"
	"testing"

	"deepinfer/vm"
	"deepinfer/vm/sampling"
)

// TestSampleRows: a sampled bench gives every decode row the configured parameters and
// a random number of its own, new each step; a greedy one leaves the rows greedy.
func TestSampleRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	chunks := make([]vm.Chunk, 4)
	sampleRows(chunks, vm.Sampling{}, rng)
	for i, c := range chunks {
		if c.Sample != (sampling.Params{}) {
			t.Errorf("greedy: row %d sampled with %+v", i, c.Sample)
		}
	}
	sp := vm.Sampling{Temperature: 0.8, TopP: 0.9, TopK: 7}
	seen := map[float64]bool{}
	for step := 0; step < 3; step++ {
		sampleRows(chunks, sp, rng)
		for i, c := range chunks {
			if c.Sample.Temperature != 0.8 || c.Sample.TopP != 0.9 || c.Sample.TopK != 7 || c.Sample.U < 0 || c.Sample.U >= 1 || seen[c.Sample.U] {
				t.Errorf("step %d, row %d: %+v (a repeated or out-of-range U?)", step, i, c.Sample)
			}
			seen[c.Sample.U] = true
		}
	}
}
