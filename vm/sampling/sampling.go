// Package sampling draws a token from one row of logits. The same function runs inside
// the cpu target's sample kernel and in the VM's host path, so a request's tokens do not
// depend on where it was sampled.
package sampling

import (
	"math"
	"sort"
)

// Params are one row's sampling parameters. U is the row's uniform random number in
// [0, 1), drawn by the VM from the request's seeded stream.
type Params struct {
	Temperature float64 // 0: greedy
	TopP        float64 // 0 or ≥ 1: no nucleus cut
	TopK        int     // 0: no cut
	U           float64
}

// Scratch holds a sampler's reusable buffers.
type Scratch struct {
	probs []float64
	order []int
}

// Row draws a token: the lowest-index maximum when greedy; otherwise softmax at the
// temperature, keep the top k and then the smallest prefix holding top_p of the mass
// (ties broken by lower id), and return the token where the cumulative kept mass passes
// U — walking the kept tokens by probability, or by id when nothing is cut. allowed,
// when set, restricts the choice (a grammar's mask).
func Row(logits []float32, p Params, allowed func(int) bool, s *Scratch) int {
	if p.Temperature == 0 {
		best := -1
		for i, v := range logits {
			if (allowed == nil || allowed(i)) && (best < 0 || v > logits[best]) {
				best = i
			}
		}
		return max(best, 0)
	}
	if cap(s.probs) < len(logits) {
		s.probs = make([]float64, len(logits))
		s.order = make([]int, 0, len(logits))
	}
	prob, order := s.probs[:len(logits)], s.order[:0]
	mx := math.Inf(-1)
	for i, v := range logits {
		if allowed == nil || allowed(i) {
			mx = max(mx, float64(v))
		}
	}
	var sum float64
	for i, v := range logits {
		if allowed != nil && !allowed(i) {
			continue
		}
		prob[i] = math.Exp((float64(v) - mx) / p.Temperature)
		sum += prob[i]
		order = append(order, i)
	}
	if len(order) == 0 {
		return 0
	}
	if p.TopK == 0 && (p.TopP <= 0 || p.TopP >= 1) {
		// no cut: walk the ids in order, no sort needed
		u := p.U * sum
		for _, id := range order {
			u -= prob[id]
			if u < 0 {
				return id
			}
		}
		return order[len(order)-1]
	}
	sort.Slice(order, func(a, b int) bool {
		if prob[order[a]] != prob[order[b]] {
			return prob[order[a]] > prob[order[b]]
		}
		return order[a] < order[b]
	})
	if p.TopK > 0 && p.TopK < len(order) {
		order = order[:p.TopK]
	}
	if p.TopP > 0 && p.TopP < 1 {
		var acc float64
		for i, id := range order {
			acc += prob[id] / sum
			if acc >= p.TopP {
				order = order[:i+1]
				break
			}
		}
	}
	var kept float64
	for _, id := range order {
		kept += prob[id]
	}
	u := p.U * kept
	for _, id := range order {
		u -= prob[id]
		if u < 0 {
			return id
		}
	}
	return order[len(order)-1]
}
