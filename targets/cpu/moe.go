package cpu

import (
	"fmt"
	"math"

	"deepinfer/ir"
)

// Mixture of experts (MODEL.md §1, "MoE").

// routeKernel scores the experts (sqrtsoftplus, sigmoid or softmax of the gate logits),
// selects k of them — top-k of score + correction bias, or the frozen tid2eid row of
// the token for hash layers — and weights them by their normalized, scaled scores.
type routeKernel struct {
	experts, dim, topk int
	hash, norm         bool
	scoring            string
	scale              float64
}

func newMoERoute(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	mode, _ := a.Str("mode")
	scoring, _ := a.Str("scoring")
	norm, _ := a.Bool("norm")
	k := &routeKernel{experts: int(args[1].Shape[0].N), dim: int(args[1].Shape[1].N), topk: attrInt(a, "topk"),
		hash: mode == "hash", norm: norm, scoring: scoring, scale: attrFloat(a, "scale")}
	if isV41(a) {
		if k.hash || scoring != "sqrtsoftplus" {
			return nil, fmt.Errorf("moe_route: V4.1 numerics route top-k by sqrtsoftplus, not %s/%s", mode, scoring)
		}
		return &route41{routeKernel: k, keep: attrInt(a, "keep")}, nil
	}
	return k, nil
}

// route41 is the V4.1 reference's Gate in float32: scores = sqrt(softplus(x·Wᵀ)) with
// the product in MKL's order for the sequence's row count (fp32Linear), the top-k of
// score + bias, weights = scores / (Σ + 1e-20) · scale, summed in top-k order. The
// routing weights are rounded where the reference rounds them; a float64 router moves
// a weight by an ulp now and then, which flips a bf16 rounding of an expert's output
// (tiny-v41-dev2 prefill_23, layer 0, row 4).
type route41 struct {
	*routeKernel
	keep   int // swa_replay's keep: the rows are each sequence's last keep
	scores []float32
}

func (k *route41) Run(s *Step, a, r []Tensor) error {
	x, gate := a[0].F32, a[1].F32
	var bias []float32
	if len(a) == 3 {
		bias = a[2].F32
	}
	T, E, D := a[0].Rows(), k.experts, k.dim
	k.scores = grow(k.scores, T*E)
	for _, v := range views(s, k.keep) {
		v.linearRows(D, E, x[v.row*D:(v.row+v.n)*D], gate, k.scores[v.row*E:(v.row+v.n)*E])
	}
	wOut, idOut := r[0].F32, r[1].I32
	sel := make([]float64, E)
	pick := make([]int, k.topk)
	for t := 0; t < T; t++ {
		sc := k.scores[t*E : (t+1)*E]
		for e, v := range sc {
			if v <= 20 { // F.softplus's threshold
				v = float32(math.Log1p(math.Exp(float64(v))))
			}
			sc[e] = float32(math.Sqrt(float64(v)))
			sel[e] = float64(sc[e])
			if bias != nil {
				sel[e] = float64(sc[e] + bias[e])
			}
		}
		topExperts(sel, nil, pick)
		routeWeights(sc, pick, k.norm, float32(k.scale), wOut[t*k.topk:], idOut[t*k.topk:])
	}
	return nil
}

func softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

func (k *routeKernel) score(logits []float64) {
	switch k.scoring {
	case "sqrtsoftplus":
		for i, v := range logits {
			logits[i] = math.Sqrt(softplus(v))
		}
	case "sigmoid":
		for i, v := range logits {
			logits[i] = sigmoid(v)
		}
	case "softmax":
		mx := math.Inf(-1)
		for _, v := range logits {
			mx = max(mx, v)
		}
		var sum float64
		for i, v := range logits {
			logits[i] = math.Exp(v - mx)
			sum += logits[i]
		}
		for i := range logits {
			logits[i] /= sum
		}
	}
}

func (k *routeKernel) Run(s *Step, a, r []Tensor) error {
	x, gate := a[0].F32, a[1].F32
	wOut, idOut := r[0].F32, r[1].I32
	var errs errOnce
	parallelFor(a[0].Rows(), k.experts*k.dim, func(lo, hi int) {
		scores := make([]float64, k.experts)
		pick := make([]int, k.topk)
		for t := lo; t < hi; t++ {
			xt := x[t*k.dim : (t+1)*k.dim]
			for e := range scores {
				w := gate[e*k.dim : (e+1)*k.dim]
				var acc float64
				for i, v := range xt {
					acc += float64(w[i]) * float64(v)
				}
				scores[e] = acc
			}
			k.score(scores)
			if k.hash {
				tok := a[2].I32[t]
				row := a[3].I32[int(tok)*k.topk : (int(tok)+1)*k.topk]
				for j, e := range row {
					if e < 0 || int(e) >= k.experts {
						errs.set(fmt.Errorf("tid2eid[%d] names expert %d of %d", tok, e, k.experts))
						return
					}
					pick[j] = int(e)
				}
			} else {
				var bias []float32
				if len(a) == 3 {
					bias = a[2].F32
				}
				topExperts(scores, bias, pick)
			}
			routeWeights(scores, pick, k.norm, k.scale, wOut[t*k.topk:], idOut[t*k.topk:])
		}
	})
	return errs.get()
}

// topExperts picks the len(pick) experts with the highest score+bias (lower id on ties).
func topExperts(scores []float64, bias []float32, pick []int) {
	sel := func(e int) float64 {
		if bias != nil {
			return scores[e] + float64(bias[e])
		}
		return scores[e]
	}
	for j := range pick {
		pick[j] = -1
	}
	for e := range scores {
		v := sel(e)
		// insertion into the descending list pick
		j := len(pick)
		for j > 0 && (pick[j-1] < 0 || sel(pick[j-1]) < v) {
			j--
		}
		if j == len(pick) {
			continue
		}
		copy(pick[j+1:], pick[j:len(pick)-1])
		pick[j] = e
	}
}

// expertsKernel runs each routed expert on the tokens routed to it:
// y_t += w_{t,j} · W2·(silu(min(W1·x_t, limit)) · clamp(W3·x_t, ±limit)).
// Each (token, slot) product lands in its own row, and the rows are summed in slot
// order, so the result does not depend on how experts are spread over goroutines.
type expertsKernel struct {
	experts, dim, inter int
	limit               float32
	slotOut             []float32
}

func newMoEExperts(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	return &expertsKernel{experts: attrInt(a, "experts"), dim: int(args[0].Last()),
		inter: int(args[3].Shape[0].N), limit: float32(attrFloat(a, "limit"))}, nil
}

func (k *expertsKernel) Run(s *Step, a, r []Tensor) error {
	return runExperts(k, k.experts, k.dim, &k.slotOut, a, r)
}

// input is the expert's input row as it travels to the expert (fp32 here).
func (k *expertsKernel) input(x, dst []float32) { copy(dst, x) }

// wire is the format expert inputs and outputs travel in between ranks: fp32 (the
// fixture's experts compute in fp32), and the bytes per row.
func (k *expertsKernel) wire() (in, out wireFmt) { return wireF32, wireF32 }

// rows computes expert e's weighted outputs w·W2·(silu(min(W1·x, limit))·clamp(W3·x,
// ±limit)) for n input rows xin (n×dim), into y (n×dim).
func (k *expertsKernel) rows(a []Tensor, e int, xin, w []float32, n int, sc *expertScratch, y []float32) {
	d, in := k.dim, k.inter
	g, u, h := sc.get(n*in, n*in, n*in)
	gemmNT(n, in, d, xin, d, a[3+e].F32, d, g, in)
	gemmNT(n, in, d, xin, d, a[3+2*k.experts+e].F32, d, u, in)
	swiglu(g, u, h, k.limit)
	gemmNT(n, d, in, h, in, a[3+k.experts+e].F32, in, y, d)
	for i := 0; i < n; i++ {
		for j := range y[i*d : (i+1)*d] {
			y[i*d+j] *= w[i]
		}
	}
}

// reduce sums each token's slot outputs in slot order.
func (k *expertsKernel) reduce(out, slotOut []float32, _ []int32, t, topk int) {
	d := k.dim
	for tok := 0; tok < t; tok++ {
		dst := out[tok*d : (tok+1)*d]
		copy(dst, slotOut[tok*topk*d:(tok*topk+1)*d])
		for j := 1; j < topk; j++ {
			src := slotOut[(tok*topk+j)*d : (tok*topk+j+1)*d]
			for i := range dst {
				dst[i] += src[i]
			}
		}
	}
}

// routedExperts is a routed-experts kernel's arithmetic, shared by the single-rank
// kernel (runExperts) and the expert-parallel one (ranks.go), so a token's result is
// the same bits wherever its experts ran.
type routedExperts interface {
	input(x, dst []float32)
	wire() (in, out wireFmt)
	rows(a []Tensor, e int, xin, w []float32, n int, sc *expertScratch, y []float32)
	reduce(out, slotOut []float32, ids []int32, t, topk int)
}

// expertScratch holds one worker's buffers.
type expertScratch struct{ b [3][]float32 }

func (s *expertScratch) get(n0, n1, n2 int) (a, b, c []float32) {
	s.b[0], s.b[1], s.b[2] = grow(s.b[0], n0), grow(s.b[1], n1), grow(s.b[2], n2)
	return s.b[0], s.b[1], s.b[2]
}

// runExperts runs each routed expert on the tokens routed to it, every (token, slot)
// output in its own row, then the kernel's reduction: the result does not depend on
// how experts are spread over goroutines or ranks.
func runExperts(k routedExperts, experts, d int, slotBuf *[]float32, a, r []Tensor) error {
	x, wts, ids := a[0].F32, a[1].F32, a[2].I32
	t, topk := a[0].Rows(), a[1].Shape[1]
	*slotBuf = grow(*slotBuf, t*topk*d)
	slotOut := *slotBuf
	routed := make([][]int, experts)
	for i, e := range ids {
		if e < 0 || int(e) >= experts {
			return fmt.Errorf("router chose expert %d of %d", e, experts)
		}
		routed[e] = append(routed[e], i)
	}
	var active []int
	for e, rows := range routed {
		if len(rows) > 0 {
			active = append(active, e)
		}
	}
	parallelFor(len(active), t*topk*d*d/max(len(active), 1), func(lo, hi int) {
		var xe, xin, w, y []float32
		var sc expertScratch
		for _, e := range active[lo:hi] {
			rows := routed[e]
			n := len(rows)
			xe, xin, w, y = grow(xe, n*d), grow(xin, n*d), grow(w, n), grow(y, n*d)
			for i, slot := range rows {
				tok := slot / topk
				copy(xe[i*d:(i+1)*d], x[tok*d:(tok+1)*d])
				w[i] = wts[slot]
			}
			for i := 0; i < n; i++ {
				k.input(xe[i*d:(i+1)*d], xin[i*d:(i+1)*d])
			}
			k.rows(a, e, xin, w, n, &sc, y)
			for i, slot := range rows {
				copy(slotOut[slot*d:(slot+1)*d], y[i*d:(i+1)*d])
			}
		}
	})
	k.reduce(r[0].F32, slotOut, ids, t, topk)
	return nil
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// routeWeights writes one token's picks and their weights: the picked scores, over their
// sum (taken in pick order) when norm is set, times scale, in the router's precision.
func routeWeights[F float32 | float64](scores []F, pick []int, norm bool, scale F, wOut []float32, idOut []int32) {
	var sum F
	for _, e := range pick {
		sum += scores[e]
	}
	for j, e := range pick {
		w := scores[e]
		if norm {
			w /= sum + 1e-20
		}
		wOut[j] = float32(w * scale)
		idOut[j] = int32(e)
	}
}
