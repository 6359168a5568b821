// Package sampling draws a token from one row of logits. The same function runs inside
// the cpu target's sample kernel and in the VM's host path, and the CUDA target's sample
// kernel computes the same token (kernels/basic.cu), so a request's tokens do not depend
// on where it was sampled.
package sampling

import (
	"math"
	"slices"

	"deepinfer/internal/sleef"
)

// Params are one row's sampling parameters. U is the row's uniform random number in
// [0, 1), drawn by the VM from the request's seeded stream.
type Params struct {
	Temperature float64 // 0 (or below, or NaN): greedy
	TopP        float64 // 0 or ≥ 1: no nucleus cut
	TopK        int     // 0: no cut
	U           float64
}

// Scratch holds a sampler's reusable buffers.
type Scratch struct {
	e     []float32
	order []int32
}

// massScale: a candidate's mass is its probability relative to the row's largest (a
// float32 in [0, 1]) times 2^40, truncated to an integer. Sums of masses are exact and
// do not depend on their order, which is what lets a GPU add them in parallel and still
// draw the token a serial loop draws; a candidate below 2^-40 of the largest has no
// mass and is never drawn.
const massScale = 1 << 40

// mass is a relative probability's integer mass.
func mass(e float32) uint64 { return uint64(e * massScale) }

// Row draws a token. Greedy (temperature not above 0): the lowest-index maximum.
// Otherwise, over the allowed ids (allowed, when set, is a grammar's mask):
//   - none allowed: 0; an allowed logit NaN, or the largest ±Inf: the last allowed id;
//   - each id's relative probability e = exp((logit − max) / T) in float32 (T the
//     temperature as a float32, exp SLEEF's expf: internal/sleef), its mass ⌊e · 2^40⌋;
//   - the cuts: the candidates of positive mass sorted by e (larger first, then lower
//     id); keep the first top_k, then the shortest prefix whose mass reaches
//     ⌈top_p · total⌉ (top_p as a float32, the product in float64);
//   - the draw: u = ⌊U · kept mass⌋ (at most kept − 1), U rounded to a float32 first (the
//     precision a step's parameters reach a device with: vm/machine.go), and the first
//     kept id, walking the ids in order, at which the kept mass so far exceeds u.
func Row(logits []float32, p Params, allowed func(int) bool, s *Scratch) int {
	if !(p.Temperature > 0) {
		best := -1
		for i, v := range logits {
			if (allowed == nil || allowed(i)) && (best < 0 || v > logits[best]) {
				best = i
			}
		}
		return max(best, 0)
	}
	e, total, tok := weigh(logits, p.Temperature, allowed, s)
	if tok >= 0 {
		return tok
	}
	c := cutRow(e, total, p, s)
	u := threshold(float64(float32(p.U)), c.mass)
	var acc uint64
	last := 0
	for i, v := range e {
		q := mass(v)
		if q == 0 || !c.keeps(i, v) {
			continue
		}
		acc += q
		last = i
		if acc > u {
			return i
		}
	}
	return last // not reached: u is below the kept mass
}

// threshold is the draw's ⌊U · mass⌋, 0 for U·mass below 1 (or NaN), at most mass − 1.
func threshold(U float64, mass uint64) uint64 {
	x := U * float64(mass)
	if !(x >= 1) {
		return 0
	}
	if x >= float64(mass) {
		return mass - 1
	}
	return min(uint64(x), mass-1)
}

// needMass is the top-p cut's mass: ⌈top_p · total⌉, top_p a float32.
func needMass(topP float32, total uint64) uint64 {
	return uint64(math.Ceil(float64(topP) * float64(total)))
}

// weigh fills s.e with each id's relative probability (0 for ids not allowed) and
// returns it with the total mass, or, for a row that is not sampled by mass (nothing
// allowed, a NaN, an infinite largest logit), the token to return (else -1).
func weigh(logits []float32, temp float64, allowed func(int) bool, s *Scratch) ([]float32, uint64, int) {
	n, last, nan := 0, -1, false
	mx := float32(math.Inf(-1))
	for i, v := range logits {
		if allowed != nil && !allowed(i) {
			continue
		}
		n, last = n+1, i
		if v != v {
			nan = true
		} else if v > mx {
			mx = v
		}
	}
	if n == 0 {
		return nil, 0, 0
	}
	if nan || math.IsInf(float64(mx), 0) {
		return nil, 0, last
	}
	if cap(s.e) < len(logits) {
		s.e = make([]float32, len(logits))
	}
	e := s.e[:len(logits)]
	t := float32(temp)
	var total uint64
	for i, v := range logits {
		e[i] = 0
		if allowed == nil || allowed(i) {
			e[i] = sleef.Exp((v - mx) / t)
			total += mass(e[i])
		}
	}
	return e, total, -1
}

// cut is a row's kept candidates: every id of positive mass when all, else those with
// e above key, or equal to it up to id last; mass is their mass.
type cut struct {
	all  bool
	key  float32
	last int
	mass uint64
}

func (c cut) keeps(i int, e float32) bool { return c.all || e > c.key || e == c.key && i <= c.last }

// cutRow applies top-k and top-p to a weighed row.
func cutRow(e []float32, total uint64, p Params, s *Scratch) cut {
	topP := float32(p.TopP)
	nucleus := topP > 0 && topP < 1
	if p.TopK <= 0 && !nucleus {
		return cut{all: true, mass: total}
	}
	order := s.order[:0]
	for i, v := range e {
		if mass(v) > 0 {
			order = append(order, int32(i))
		}
	}
	s.order = order
	keep := len(order)
	if p.TopK > 0 && p.TopK < keep {
		keep = p.TopK
	}
	if keep == len(order) && !nucleus {
		return cut{all: true, mass: total}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if e[a] != e[b] {
			if e[a] > e[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	if nucleus {
		need := needMass(topP, total)
		var acc uint64
		for j, id := range order[:keep] {
			acc += mass(e[id])
			if acc >= need {
				keep = j + 1
				break
			}
		}
	}
	var m uint64
	for _, id := range order[:keep] {
		m += mass(e[id])
	}
	b := order[keep-1]
	return cut{key: e[b], last: int(b), mass: m}
}
