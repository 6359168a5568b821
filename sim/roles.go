package sim

import (
	"fmt"

	"deepinfer/plan"
)

// simDecode runs a decode role: every rank steps in lockstep (the expert all-to-all
// joins them every layer), so a step lasts as long as the slowest rank's.
func simDecode(o Options, role *plan.Role, pr *pricer) (*RoleResult, error) {
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
			if err := slow.rank(pr, w.rows(stepShape{T: T, R: T, Ctx: ctx / float64(b)}), w.overlap(), b); err != nil {
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
					adv += sampleAccepted(w.Acceptance, g)
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
		if err := speculativeSpeedup(rr, pr, w, gamma); err != nil {
			return nil, err
		}
	}
	return rr, nil
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
// per step) at the same batch. The drafter's own cost is not in the plan and is not
// counted, so this is an upper bound.
func speculativeSpeedup(rr *RoleResult, pr *pricer, w *Workload, gamma int) error {
	b := max(1, int(rr.MeanBatch))
	ctx := w.in.Mean() + w.out.Mean()/2
	ps, pd, err := pr.price(w.rows(stepShape{T: b * (1 + gamma), R: b * (1 + gamma), Ctx: ctx}))
	if err != nil {
		return err
	}
	bs, bd, err := pr.price(w.rows(stepShape{T: b, R: b, Ctx: ctx}))
	if err != nil {
		return err
	}
	spec := stepTime(ps.ComputeUS+pd.ComputeUS, ps.CommUS+pd.CommUS, w.overlap(), ps.MoELayers)
	base := stepTime(bs.ComputeUS+bd.ComputeUS, bs.CommUS+bd.CommUS, w.overlap(), bs.MoELayers)
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
			if err := slow.rank(pr, w.rows(stepShape{T: T, R: seqs, K: pr.kept(ns), Ctx: pos / float64(T)}), w.overlap(), seqs); err != nil {
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
	static, dynamic      *stepPrice
	busy, seqSum, tokSum int
}

// rank prices one rank's step and keeps it if it is the slowest so far.
func (s *slowest) rank(pr *pricer, shape stepShape, overlap bool, seqs int) error {
	static, dynamic, err := pr.price(shape)
	if err != nil {
		return err
	}
	compute := static.ComputeUS + dynamic.ComputeUS
	t := stepTime(compute, static.CommUS+dynamic.CommUS, overlap, static.MoELayers)
	if t > s.us {
		s.us, s.compute, s.static, s.dynamic = t, compute, static, dynamic
	}
	s.busy++
	s.seqSum += seqs
	s.tokSum += shape.T
	return nil
}

func (s *slowest) record(acc *accumulator, role string, clock float64) {
	acc.add(role, clock, s.static, s.dynamic, s.us, s.compute, s.seqSum/s.busy, s.tokSum/s.busy)
}
