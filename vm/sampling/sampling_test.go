package sampling

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestGreedyAndMask(t *testing.T) {
	logits := []float32{0.1, 2, -1, 2, 0.5}
	var s Scratch
	if got := Row(logits, Params{}, nil, &s); got != 1 {
		t.Fatalf("greedy = %d, want 1 (lowest index on ties)", got)
	}
	if got := Row(logits, Params{}, func(i int) bool { return i != 1 && i != 3 }, &s); got != 4 {
		t.Fatalf("masked greedy = %d, want 4", got)
	}
	if got := Row(logits, Params{Temperature: 1, U: 0.99}, func(i int) bool { return i == 2 }, &s); got != 2 {
		t.Fatalf("masked sampling = %d, want the only allowed id 2", got)
	}
}

// draw samples n tokens with uniform random numbers from a fixed stream.
func draw(logits []float32, p Params, n int) map[int]int {
	rng := rand.New(rand.NewPCG(7, 9))
	var s Scratch
	count := map[int]int{}
	for i := 0; i < n; i++ {
		p.U = rng.Float64()
		count[Row(logits, p, nil, &s)]++
	}
	return count
}

func TestDistribution(t *testing.T) {
	logits := []float32{0, float32(math.Ln2)} // p(1) = 2/3 at temperature 1
	for _, c := range []struct{ temp, want float64 }{{1, 2.0 / 3}, {2, math.Sqrt2 / (1 + math.Sqrt2)}} {
		n := 40000
		got := float64(draw(logits, Params{Temperature: c.temp}, n)[1]) / float64(n)
		if math.Abs(got-c.want) > 0.01 {
			t.Errorf("temperature %g: p(1) = %.4f, want %.4f", c.temp, got, c.want)
		}
	}
}

func TestCuts(t *testing.T) {
	logits := []float32{float32(math.Log(0.2)), float32(math.Log(0.5)), float32(math.Log(0.3))}
	seen := draw(logits, Params{Temperature: 1, TopP: 0.6}, 2000)
	if seen[1] == 0 || seen[2] == 0 || seen[0] != 0 {
		t.Errorf("top_p 0.6 drew %v, want ids 1 and 2 only", seen)
	}
	if seen := draw(logits, Params{Temperature: 5, TopK: 1}, 200); seen[1] != 200 {
		t.Errorf("top_k 1 drew %v, want only id 1", seen)
	}
	// the same u gives the same token
	var s Scratch
	a := Row(logits, Params{Temperature: 1, U: 0.42}, nil, &s)
	b := Row(logits, Params{Temperature: 1, U: 0.42}, nil, &s)
	if a != b {
		t.Fatal("Row is not a function of its inputs")
	}
}
