package vm

import (
	"math"
	"testing"
)

func TestSamplerGreedyAndMask(t *testing.T) {
	logits := []float32{0.1, 2, -1, 2, 0.5}
	if got := Argmax(logits); got != 1 {
		t.Fatalf("Argmax = %d, want 1 (lowest index on ties)", got)
	}
	s := NewSampler(Sampling{})
	if got := s.Next(logits, func(i int) bool { return i != 1 && i != 3 }); got != 4 {
		t.Fatalf("masked greedy = %d, want 4", got)
	}
}

func TestSamplerDistribution(t *testing.T) {
	// p(1) = 2/3 at temperature 1; 2/3 of 2/3 mass... at temperature 2 p(1) = √2/(1+√2)
	logits := []float32{0, float32(math.Ln2)}
	for _, c := range []struct {
		temp, want float64
	}{{1, 2.0 / 3}, {2, math.Sqrt2 / (1 + math.Sqrt2)}} {
		s := NewSampler(Sampling{Temperature: c.temp, Seed: 7})
		n, ones := 40000, 0
		for i := 0; i < n; i++ {
			ones += s.Next(logits, nil)
		}
		if f := float64(ones) / float64(n); math.Abs(f-c.want) > 0.01 {
			t.Errorf("temperature %g: p(1) = %.4f, want %.4f", c.temp, f, c.want)
		}
	}
}

func TestSamplerCuts(t *testing.T) {
	logits := []float32{float32(math.Log(0.5)), float32(math.Log(0.3)), float32(math.Log(0.2))}
	seen := map[int]bool{}
	s := NewSampler(Sampling{Temperature: 1, TopP: 0.6, Seed: 1})
	for i := 0; i < 2000; i++ {
		seen[s.Next(logits, nil)] = true
	}
	if !seen[0] || !seen[1] || seen[2] {
		t.Errorf("top_p 0.6 drew %v, want exactly {0, 1}", seen)
	}
	s = NewSampler(Sampling{Temperature: 5, TopK: 1, Seed: 1})
	for i := 0; i < 100; i++ {
		if got := s.Next(logits, nil); got != 0 {
			t.Fatalf("top_k 1 drew %d", got)
		}
	}
}

func TestSamplerSeeded(t *testing.T) {
	logits := make([]float32, 50)
	for i := range logits {
		logits[i] = float32(i%7) * 0.3
	}
	draw := func(seed uint64) []int {
		s := NewSampler(Sampling{Temperature: 1, Seed: seed})
		out := make([]int, 64)
		for i := range out {
			out[i] = s.Next(logits, nil)
		}
		return out
	}
	a, b, c := draw(3), draw(3), draw(4)
	same := true
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed gave different draws")
		}
		same = same && a[i] == c[i]
	}
	if same {
		t.Fatal("different seeds gave identical draws")
	}
	if err := (Sampling{Temperature: -1}).Validate(); err == nil {
		t.Fatal("negative temperature accepted")
	}
}
