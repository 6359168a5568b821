package sim

import (
	"fmt"
	"math"

	"deepinfer/plan"
)

// simDecode runs a decode role: every rank steps in lockstep (the expert all-to-all
// joins them every layer), so a step lasts as long as the slowest rank's. With
// speculation and a draft program (draft, V4.1's DSpark drafter; nil without one) a
// rank's step is the verify step (1 + γ rows a sequence), the draft step (the drafter's
// block of rows a sequence) and the rebuild of the groups that rejected a draft (their
// k + 1 accepted rows run again), one after the other.
func simDecode(o Options, role *plan.Role, pr, draft *pricer) (*RoleResult, error) {
	w := o.Workload
	ranks := make([]*rankState, role.DP)
	for i := range ranks {
		ranks[i] = &rankState{}
	}
	perTok, capacity := kvCapacity(role)
	g := newGenerator(w, 2)
	gamma := max(0, len(w.Acceptance)-1)
	var clock float64
	var tpot []float64
	acc := newAccumulator()
	rr := &RoleResult{Role: role.Name, Ranks: role.DP}
	refill := func() {
		if w.ConcurrencyPerRank == 0 {
			for _, r := range g.arrivals(clock) {
				st := leastLoaded(ranks)
				st.waiting = append(st.waiting, r)
			}
			return
		}
		for _, st := range ranks {
			for len(st.waiting)+len(st.running) < w.ConcurrencyPerRank && g.made < w.Requests {
				st.waiting = append(st.waiting, g.make(clock))
			}
		}
	}
	block := draftBlock(o.Plan, draft, gamma)
	if block > 0 && gamma > block {
		return nil, fmt.Errorf("the workload's acceptance has %d drafts a step (γ), the plan's drafter proposes at most %d (its block)", gamma, block)
	}
	finished := 0
	for step := 0; finished < w.Requests; step++ {
		if step >= o.MaxSteps {
			return nil, fmt.Errorf("stopped after %d steps with %d of %d requests finished", step, finished, w.Requests)
		}
		refill()
		var slow slowest
		for _, st := range ranks {
			// admit while the batch and the KV (the prompt already prefilled) allow
			for len(st.waiting) > 0 && len(st.running) < role.MaxNumSeqs {
				r := st.waiting[0]
				need := int64(r.in) * perTok
				if st.kvUsed+need > capacity {
					break
				}
				st.waiting = st.waiting[1:]
				r.ctx = r.in
				st.kvUsed += need
				st.running = append(st.running, r)
			}
			b := len(st.running)
			if b == 0 {
				continue
			}
			var ctx float64
			for _, r := range st.running {
				ctx += float64(r.ctx)
			}
			T := b * (1 + gamma)
			parts := []stepPart{{pr, w.rows(stepShape{T: T, R: T, Ctx: ctx / float64(b)})}}
			if gamma > 0 {
				// each request's accepted drafts, drawn now (in the order the advance
				// below takes them) so that the rebuild can be priced with the step
				rebuild, groups := 0, 0
				for _, r := range st.running {
					r.accepted = sampleAccepted(w.Acceptance, g)
					if r.accepted < gamma {
						rebuild += r.accepted + 1
						groups++
					}
				}
				if block > 0 {
					parts = append(parts, stepPart{draft, stepShape{T: b * block, R: b * block, Ctx: ctx / float64(b)}})
					if rebuild > 0 {
						// (its rows follow the acceptance: rounded to about 2%, as contexts
						// are, so that the priced shapes stay few)
						parts = append(parts, stepPart{pr, stepShape{T: ctxBucket(float64(rebuild)), R: ctxBucket(float64(groups)), Ctx: ctx / float64(b)}})
					}
				}
			}
			if err := slow.rank(parts, w.overlap(), b); err != nil {
				return nil, err
			}
		}
		if slow.busy == 0 {
			if w.Rate > 0 && g.made < w.Requests {
				clock = g.next // idle until the next arrival
				continue
			}
			return nil, fmt.Errorf("no request could start: a single prompt needs more KV than a rank has")
		}
		slow.record(acc, role.Name, clock)
		clock += slow.us / 1e6
		for _, st := range ranks {
			kept := st.running[:0]
			for _, r := range st.running {
				adv := 1
				if gamma > 0 {
					adv += r.accepted
				}
				adv = min(adv, r.out-r.generated)
				if r.generated == 0 {
					r.firstTok = clock
				}
				r.generated += adv
				r.ctx += adv
				st.kvUsed += int64(adv) * perTok
				r.lastTok = clock
				if r.generated >= r.out {
					st.kvUsed -= int64(r.ctx) * perTok
					finished++
					rr.TokensOut += int64(r.out)
					rr.TokensIn += int64(r.in)
					if r.out > 1 {
						tpot = append(tpot, (r.lastTok-r.firstTok)/float64(r.out-1)*1e3)
					}
					continue
				}
				kept = append(kept, r)
			}
			st.running = kept
			// preempt the newest requests while the KV overflows (they requeue and
			// must be prefilled again, which this role does not see)
			for st.kvUsed > capacity && len(st.running) > 1 {
				r := st.running[len(st.running)-1]
				st.running = st.running[:len(st.running)-1]
				st.kvUsed -= int64(r.ctx) * perTok
				r.ctx, r.generated = r.in, 0
				st.waiting = append([]*request{r}, st.waiting...)
				rr.Preemptions++
			}
		}
	}
	rr.SimSeconds = clock
	rr.Requests = finished
	rr.TPOT = percentiles(tpot)
	if clock > 0 {
		rr.TokensPerSecPerDevice = float64(rr.TokensOut) / clock / float64(role.DP*role.CP*role.TP)
	}
	acc.finish(rr)
	if err := representative(rr, pr, w.rows(stepShape{T: max(1, int(rr.MeanTokens)), R: max(1, int(rr.MeanTokens)), Ctx: w.in.Mean() + w.out.Mean()/2})); err != nil {
		return nil, err
	}
	if gamma > 0 {
		if err := speculativeSpeedup(rr, pr, draft, block, w, gamma); err != nil {
			return nil, err
		}
		rr.DrafterPriced = block > 0
	}
	return rr, nil
}

// draftBlock is the draft step's rows a sequence: the drafter's block (plan.DSpark)
// when speculation is on and the plan has a draft program, else 0 (the drafter is not
// priced).
func draftBlock(p *plan.Plan, draft *pricer, gamma int) int {
	if gamma == 0 || draft == nil || p.Model.DSpark == nil {
		return 0
	}
	return p.Model.DSpark.Block
}

func sampleAccepted(p []float64, g *generator) int {
	u := g.rng.Float64()
	for k, pk := range p {
		u -= pk
		if u <= 0 {
			return k
		}
	}
	return len(p) - 1
}

// speculativeSpeedup compares tokens per second with speculation (1 + E[accepted]
// tokens per step, verifying 1+γ tokens per sequence) against plain decoding (one token
// per step) at the same batch. With a draft program (block > 0) a speculative step also
// pays the draft step and the expected rebuild (E[k + 1 | k < γ] rows for the groups
// that reject a draft); without one the drafter is not counted and this is an upper
// bound.
func speculativeSpeedup(rr *RoleResult, pr, draft *pricer, block int, w *Workload, gamma int) error {
	b := max(1, int(rr.MeanBatch))
	ctx := w.in.Mean() + w.out.Mean()/2
	parts := []stepPart{{pr, w.rows(stepShape{T: b * (1 + gamma), R: b * (1 + gamma), Ctx: ctx})}}
	if block > 0 {
		parts = append(parts, stepPart{draft, stepShape{T: b * block, R: b * block, Ctx: ctx}})
		var rows, groups float64
		for k, pk := range w.Acceptance {
			if k < gamma {
				rows += pk * float64(k+1)
				groups += pk
			}
		}
		if n := int(math.Round(rows * float64(b))); n > 0 {
			parts = append(parts, stepPart{pr, stepShape{T: n, R: max(1, int(math.Round(groups*float64(b)))), Ctx: ctx}})
		}
	}
	spec, _, _, err := priceParts(parts, w.overlap())
	if err != nil {
		return err
	}
	base, _, _, err := priceParts([]stepPart{{pr, w.rows(stepShape{T: b, R: b, Ctx: ctx})}}, w.overlap())
	if err != nil {
		return err
	}
	rr.Speedup = (1 + w.MeanAccepted()) / (spec / base)
	return nil
}

// simPrefill runs a prefill role: each rank fills its step with prompt chunks up to
// max_num_batched_tokens (chunked prefill, first come first served); ranks step in
// lockstep. A request's time to first token ends when its last chunk is done.
func simPrefill(o Options, role *plan.Role, pr *pricer) (*RoleResult, error) {
	w := o.Workload
	ranks := make([]*rankState, role.DP)
	for i := range ranks {
		ranks[i] = &rankState{}
	}
	g := newGenerator(w, 1)
	var clock float64
	var ttft []float64
	acc := newAccumulator()
	rr := &RoleResult{Role: role.Name, Ranks: role.DP}
	finished := 0
	for step := 0; finished < w.Requests; step++ {
		if step >= o.MaxSteps {
			return nil, fmt.Errorf("stopped after %d steps with %d of %d requests finished", step, finished, w.Requests)
		}
		if w.ConcurrencyPerRank == 0 {
			for _, r := range g.arrivals(clock) {
				st := leastLoaded(ranks)
				st.waiting = append(st.waiting, r)
			}
		} else {
			for _, st := range ranks {
				for len(st.waiting) < w.ConcurrencyPerRank && g.made < w.Requests {
					st.waiting = append(st.waiting, g.make(clock))
				}
			}
		}
		var slow slowest
		type chunk struct {
			r *request
			n int
		}
		plans := make([][]chunk, len(ranks))
		for i, st := range ranks {
			left := role.MaxNumBatchedTokens
			var pos float64
			seqs := 0
			var ns []int
			for _, r := range st.waiting {
				if left == 0 || seqs == role.MaxNumSeqs {
					break
				}
				n := min(r.in-r.fed, left)
				plans[i] = append(plans[i], chunk{r, n})
				ns = append(ns, n)
				pos += float64(n) * (float64(r.fed) + float64(n)/2)
				left -= n
				seqs++
			}
			T := role.MaxNumBatchedTokens - left
			if T == 0 {
				continue
			}
			if err := slow.rank([]stepPart{{pr, w.rows(stepShape{T: T, R: seqs, K: pr.kept(ns), Ctx: pos / float64(T)})}}, w.overlap(), seqs); err != nil {
				return nil, err
			}
		}
		if slow.busy == 0 {
			if w.Rate > 0 && g.made < w.Requests {
				clock = g.next
				continue
			}
			return nil, fmt.Errorf("no prompt could be scheduled")
		}
		slow.record(acc, role.Name, clock)
		clock += slow.us / 1e6
		for i, st := range ranks {
			for _, c := range plans[i] {
				c.r.fed += c.n
				rr.TokensIn += int64(c.n)
			}
			kept := st.waiting[:0]
			for _, r := range st.waiting {
				if r.fed >= r.in {
					finished++
					ttft = append(ttft, (clock-r.arrival)*1e3)
					continue
				}
				kept = append(kept, r)
			}
			st.waiting = kept
		}
	}
	rr.SimSeconds = clock
	rr.Requests = finished
	rr.TTFT = percentiles(ttft)
	if clock > 0 {
		rr.TokensPerSecPerDevice = float64(rr.TokensIn) / clock / float64(role.DP*role.CP*role.TP)
	}
	acc.finish(rr)
	rep := stepShape{T: max(1, int(rr.MeanTokens)), R: max(1, int(rr.MeanBatch)), Ctx: w.in.Mean() / 2}
	if pr.keep > 0 {
		rep.K = min(rep.T, rep.R*pr.keep)
	}
	rep = w.rows(rep)
	if err := representative(rr, pr, rep); err != nil {
		return nil, err
	}
	return rr, nil
}

// slowest tracks a lockstep step's slowest rank and the ranks' mean batch.
type slowest struct {
	us, compute          float64
	prices               []*stepPrice
	busy, seqSum, tokSum int
}

// A stepPart is one program run in a rank's step at one shape.
type stepPart struct {
	pr    *pricer
	shape stepShape
}

// priceParts prices the parts of a rank's step, run one after another: the step's time
// (each part's compute and communication combined by stepTime), its compute, and the
// parts' priced calls.
func priceParts(parts []stepPart, overlap bool) (us, compute float64, prices []*stepPrice, err error) {
	for _, p := range parts {
		static, dynamic, err := p.pr.price(p.shape)
		if err != nil {
			return 0, 0, nil, err
		}
		c := static.ComputeUS + dynamic.ComputeUS
		us += stepTime(c, static.CommUS+dynamic.CommUS, overlap, static.MoELayers)
		compute += c
		prices = append(prices, static, dynamic)
	}
	return us, compute, prices, nil
}

// rank prices one rank's step (its parts) and keeps it if it is the slowest so far; the
// first part's tokens are the rank's tokens.
func (s *slowest) rank(parts []stepPart, overlap bool, seqs int) error {
	t, compute, prices, err := priceParts(parts, overlap)
	if err != nil {
		return err
	}
	if t > s.us {
		s.us, s.compute, s.prices = t, compute, prices
	}
	s.busy++
	s.seqSum += seqs
	s.tokSum += parts[0].shape.T
	return nil
}

func (s *slowest) record(acc *accumulator, role string, clock float64) {
	acc.add(role, clock, s.prices, s.us, s.compute, s.seqSum/s.busy, s.tokSum/s.busy)
}
