package vm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Sampling are a request's sampling parameters. Temperature 0 is greedy.
type Sampling struct {
	Temperature float64
	TopP        float64 // 0 or 1: no nucleus cut
	TopK        int     // 0: no cut
	Seed        uint64
}

// Validate rejects parameters outside their ranges.
func (s Sampling) Validate() error {
	switch {
	case s.Temperature < 0 || math.IsNaN(s.Temperature) || s.Temperature > 100:
		return fmt.Errorf("temperature %g is outside [0, 100]", s.Temperature)
	case s.TopP < 0 || s.TopP > 1 || math.IsNaN(s.TopP):
		return fmt.Errorf("top_p %g is outside [0, 1]", s.TopP)
	case s.TopK < 0:
		return fmt.Errorf("top_k %d is negative", s.TopK)
	}
	return nil
}

// Sampler draws tokens for one request; its random stream depends only on the seed.
type Sampler struct {
	s     Sampling
	rng   *rand.Rand
	probs []float64
	order []int
}

// NewSampler makes a sampler for one request.
func NewSampler(s Sampling) *Sampler {
	return &Sampler{s: s, rng: rand.New(rand.NewPCG(s.Seed, 0x9e3779b97f4a7c15))}
}

// Argmax returns the index of the largest logit (the lowest index on ties).
func Argmax(logits []float32) int {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	return best
}

// Next draws the next token from logits; mask, when set, restricts the choice to the
// ids it allows.
func (sp *Sampler) Next(logits []float32, allowed func(int) bool) int {
	if sp.s.Temperature == 0 {
		best := -1
		for i, v := range logits {
			if (allowed == nil || allowed(i)) && (best < 0 || v > logits[best]) {
				best = i
			}
		}
		return max(best, 0)
	}
	if cap(sp.probs) < len(logits) {
		sp.probs = make([]float64, len(logits))
		sp.order = make([]int, len(logits))
	}
	p, order := sp.probs[:len(logits)], sp.order[:0]
	mx := math.Inf(-1)
	for i, v := range logits {
		if allowed == nil || allowed(i) {
			mx = max(mx, float64(v))
		}
	}
	var sum float64
	for i, v := range logits {
		if allowed != nil && !allowed(i) {
			p[i] = 0
			continue
		}
		p[i] = math.Exp((float64(v) - mx) / sp.s.Temperature)
		sum += p[i]
		order = append(order, i)
	}
	if len(order) == 0 {
		return 0
	}
	sort.SliceStable(order, func(a, b int) bool { return p[order[a]] > p[order[b]] })
	if sp.s.TopK > 0 && sp.s.TopK < len(order) {
		order = order[:sp.s.TopK]
	}
	if sp.s.TopP > 0 && sp.s.TopP < 1 {
		var acc float64
		for i, id := range order {
			acc += p[id] / sum
			if acc >= sp.s.TopP {
				order = order[:i+1]
				break
			}
		}
	}
	var kept float64
	for _, id := range order {
		kept += p[id]
	}
	u := sp.rng.Float64() * kept
	for _, id := range order {
		u -= p[id]
		if u <= 0 {
			return id
		}
	}
	return order[len(order)-1]
}
