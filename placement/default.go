package placement

import (
	"cmp"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
)

// Default is our placement policy. It keeps eplb's constraints (in the hierarchical
// case: whole groups per node, R/N slots per node, replicas of an expert only in its
// group's node; always: S = R/P slots per GPU and every expert at least once) and
// minimises the most loaded GPU of every layer within them, which is what balancedness
// (mean/max) rewards.
//
// Groups go onto nodes by longest-processing-time (LPT, as eplb's step 1, optimal for
// two groups per node) followed by pairwise group swaps that lower the heaviest node.
// Each node ("unit") is then solved on its own (solve):
//
//  1. Several replica-count vectors. Water-filling (EPLB's replicate_experts) minimises
//     the largest replica, but on skewed loads it leaves more mid-sized replicas than
//     there are GPUs, and by pigeonhole two of them then share a GPU. So we also try
//     capped counts: every expert gets the fewest replicas no larger than θ, for θ a
//     few fractions of the unit's lower bound, spare slots going to the coldest
//     experts: hot replicas then sit just under the target with cold experts beside.
//  2. Each count vector is packed by LPT with exactly S slots per GPU (heaviest replica
//     to the lightest GPU with a free slot, avoiding a second replica of the same
//     expert on one GPU).
//  3. The best few packings are improved by local search (improve) and the best kept.
//
// The local search looks at the most loaded GPU g and applies the best improving swap
// of a replica on g with a lighter one elsewhere; only when no swap helps does it try
// re-assigning a slot from an expert with ≥ 2 replicas to another expert (changing
// two replica counts), for slots on g and for slots anywhere when the receiving expert
// has a replica on g (variable-neighbourhood descent: swaps are cheap, re-assignments
// are not). A move is taken only if every GPU it touches ends strictly below g's load,
// so the sorted vector of GPU loads falls lexicographically and the search ends; it
// also stops within nearOptimal of the lower bound max(mean load, largest replica
// under water-filling). Moves never put a second replica of an expert on a GPU.
//
// Finally, if eplb's own placement of a layer has a lighter most loaded GPU, it is
// improved by the same local search and used instead, so no layer is ever worse than
// under eplb. Layers run in parallel; the result does not depend on scheduling.
func Default(loads Loads, p Problem) (*Placement, error) { return placeOurs(loads, p, false) }

// DefaultGlobal is Default with a single node and a single group: every expert may go
// to every GPU. It is what Default does anyway when eplb would use its global policy.
func DefaultGlobal(loads Loads, p Problem) (*Placement, error) { return placeOurs(loads, p, true) }

func placeOurs(loads Loads, p Problem, global bool) (*Placement, error) {
	if err := check(loads, p); err != nil {
		return nil, err
	}
	ref, err := EPLB(loads, p)
	if err != nil {
		return nil, err
	}
	q := p.effective()
	if global {
		q = Problem{Replicas: p.Replicas, Groups: 1, Nodes: 1, GPUs: p.GPUs}
	}
	pl := newPlacement(len(loads))
	phy := make([][]int, len(loads))
	// Layers are independent, so they run in parallel; each writes only its own entry,
	// so the result does not depend on scheduling.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(loads)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l := int(next.Add(1) - 1)
				if l >= len(loads) {
					return
				}
				phy[l] = placeLayer(loads[l], q, ref.Phy2Log[l])
			}
		}()
	}
	wg.Wait()
	for l := range loads {
		pl.setLayer(l, phy[l], nil, loads.Experts())
	}
	return pl, nil
}

// placeLayer returns our placement of one layer, unless eplb's answer, improved by the
// same local search, has a lighter most-loaded GPU.
func placeLayer(w []float64, q Problem, ref []int) []int {
	nodeSlots := q.Replicas / q.Nodes
	nodeGPUs := q.GPUs / q.Nodes
	s := q.Replicas / q.GPUs

	ours := make([]int, q.Replicas)
	for n, experts := range groupsToNodes(w, q) {
		u := newUnit(w, experts, nodeGPUs, s)
		u.solve()
		u.emit(ours[n*nodeSlots : (n+1)*nodeSlots])
	}
	oursMax := maxGPULoad(w, ours, s)
	if oursMax <= maxGPULoad(w, ref, s) {
		return ours // already at least as good; polishing eplb is rarely worth it then
	}
	theirs := make([]int, q.Replicas)
	for n := range q.Nodes {
		slots := ref[n*nodeSlots : (n+1)*nodeSlots]
		experts := slices.Compact(slices.Sorted(slices.Values(slots)))
		u := newUnit(w, experts, nodeGPUs, s)
		lb := u.lowerBound()
		u.start(slots)
		u.improve(lb)
		u.emit(theirs[n*nodeSlots : (n+1)*nodeSlots])
	}
	if maxGPULoad(w, theirs, s) < oursMax {
		return theirs
	}
	return ours
}

func maxGPULoad(w []float64, phy2log []int, s int) float64 {
	cnt := make([]int, len(w))
	for _, e := range phy2log {
		cnt[e]++
	}
	mx := 0.0
	for g := 0; g < len(phy2log); g += s {
		sum := 0.0
		for _, e := range phy2log[g : g+s] {
			sum += w[e] / float64(cnt[e])
		}
		mx = max(mx, sum)
	}
	return mx
}

// groupsToNodes assigns whole groups to nodes, G/N per node, minimising the heaviest
// node: LPT (which is eplb's step 1, and optimal for two groups per node), then swaps of
// two groups between the heaviest node and another while that lowers the heaviest. It
// returns each node's logical experts.
func groupsToNodes(w []float64, q Problem) [][]int {
	size := len(w) / q.Groups
	per := q.Groups / q.Nodes
	gl := make([]float64, q.Groups)
	for g := range gl {
		for _, v := range w[g*size : (g+1)*size] {
			gl[g] += v
		}
	}
	order := make([]int, q.Groups)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(gl[b], gl[a]) })
	nodes := make([][]int, q.Nodes)
	nl := make([]float64, q.Nodes)
	for _, g := range order {
		best := -1
		for n := range nodes {
			if len(nodes[n]) < per && (best < 0 || nl[n] < nl[best]) {
				best = n
			}
		}
		nodes[best] = append(nodes[best], g)
		nl[best] += gl[g]
	}
	for range q.Groups * q.Groups {
		m := 0
		for n := range nl {
			if nl[n] > nl[m] {
				m = n
			}
		}
		bestScore := nl[m] * (1 - 1e-12)
		bi, bk, bj := -1, -1, -1
		for i, g := range nodes[m] {
			for k := range nodes {
				if k == m {
					continue
				}
				for j, h := range nodes[k] {
					if gl[h] >= gl[g] {
						continue
					}
					if sc := max(nl[m]-gl[g]+gl[h], nl[k]+gl[g]-gl[h]); sc < bestScore {
						bestScore, bi, bk, bj = sc, i, k, j
					}
				}
			}
		}
		if bi < 0 {
			break
		}
		g, h := nodes[m][bi], nodes[bk][bj]
		nodes[m][bi], nodes[bk][bj] = h, g
		nl[m] += gl[h] - gl[g]
		nl[bk] += gl[g] - gl[h]
	}
	out := make([][]int, q.Nodes)
	for n, groups := range nodes {
		slices.Sort(groups)
		for _, g := range groups {
			for j := range size {
				out[n] = append(out[n], g*size+j)
			}
		}
	}
	return out
}

// unit is one node's share of a layer: its experts, its GPUs and their slots. Experts
// are numbered locally 0..len(ids)-1; local slot i is on local GPU i/s.
type unit struct {
	ids   []int     // local expert → logical expert
	w     []float64 // local expert → load
	cnt   []int     // local expert → replica count
	owner []int     // local slot → local expert
	slots [][]int   // local expert → its local slots
	load  []float64 // local GPU → load
	gpus  int
	s     int

	// Scratch for reassignScore: per-GPU load changes, valid where mark == epoch.
	delta   []float64
	mark    []int
	epoch   int
	touched []int
}

func newUnit(w []float64, ids []int, gpus, s int) *unit {
	u := &unit{
		ids:   ids,
		w:     make([]float64, len(ids)),
		cnt:   make([]int, len(ids)),
		owner: make([]int, gpus*s),
		slots: make([][]int, len(ids)),
		load:  make([]float64, gpus),
		gpus:  gpus,
		s:     s,
		delta: make([]float64, gpus),
		mark:  make([]int, gpus),
	}
	for i, e := range ids {
		u.w[i] = w[e]
	}
	return u
}

func (u *unit) share(e int) float64 { return u.w[e] / float64(u.cnt[e]) }

// start loads an existing assignment (logical ids per slot).
func (u *unit) start(phy []int) {
	local := make(map[int]int, len(u.ids))
	for i, e := range u.ids {
		local[e] = i
	}
	for i, e := range phy {
		u.owner[i] = local[e]
	}
	u.recount()
}

// recount derives cnt, slots and load from owner.
func (u *unit) recount() {
	clear(u.cnt)
	for e := range u.slots {
		u.slots[e] = u.slots[e][:0]
	}
	for i, e := range u.owner {
		u.cnt[e]++
		u.slots[e] = append(u.slots[e], i)
	}
	clear(u.load)
	for i, e := range u.owner {
		u.load[i/u.s] += u.share(e)
	}
}

// build is the construction: water-filling counts, then LPT with S slots per GPU.
func (u *unit) build() {
	n := len(u.ids)
	for e := range n {
		u.cnt[e] = 1
	}
	u.waterfill(len(u.owner) - n)
	u.lpt()
}

// waterfill gives k more replicas, each to the expert with the largest load per
// replica (first on ties). From all-ones this greedy minimises the largest per-replica
// load, a lower bound on the largest GPU.
func (u *unit) waterfill(k int) {
	n := len(u.ids)
	per := make([]float64, n)
	for e := range n {
		per[e] = u.share(e)
	}
	for range k {
		best := 0
		for e := 1; e < n; e++ {
			if per[e] > per[best] {
				best = e
			}
		}
		u.cnt[best]++
		per[best] = u.share(best)
	}
}

// lpt packs the replicas of u.cnt onto GPUs, heaviest first, each to the lightest GPU
// with a free slot, preferring GPUs without a replica of the same expert.
func (u *unit) lpt() {
	n := len(u.ids)
	per := make([]float64, n)
	for e := range n {
		per[e] = u.share(e)
	}
	// Heaviest first; replicas of one expert are interchangeable, so ordering equal
	// loads by expert id makes the order total and the result deterministic. All of an
	// expert's replicas weigh the same, so sorting the experts orders the replicas.
	type replica struct {
		e    int
		load float64
	}
	experts := make([]int, n)
	for e := range n {
		experts[e] = e
	}
	slices.SortFunc(experts, func(a, b int) int {
		if c := cmp.Compare(per[b], per[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	reps := make([]replica, 0, len(u.owner))
	for _, e := range experts {
		for range u.cnt[e] {
			reps = append(reps, replica{e, per[e]})
		}
	}
	fill := make([]int, u.gpus)
	for i := range u.owner {
		u.owner[i] = -1
	}
	clear(u.load)
	// has[g] == e+1 marks that GPU g got a replica of e; an expert's replicas are
	// consecutive in reps, so the marks of the previous expert never mislead.
	has := make([]int, u.gpus)
	for _, r := range reps {
		// The lightest GPU with a free slot, preferring one without this expert.
		best, bestDup := -1, -1
		for g := range u.gpus {
			if fill[g] == u.s {
				continue
			}
			if has[g] == r.e+1 {
				if bestDup < 0 || u.load[g] < u.load[bestDup] {
					bestDup = g
				}
			} else if best < 0 || u.load[g] < u.load[best] {
				best = g
			}
		}
		if best < 0 {
			best = bestDup
		}
		has[best] = r.e + 1
		u.owner[best*u.s+fill[best]] = r.e
		fill[best]++
		u.load[best] += r.load
	}
	u.recount()
}

// holds reports whether GPU g has a replica of e (unfilled slots are -1).
func (u *unit) holds(g, e int) bool {
	for _, o := range u.owner[g*u.s : (g+1)*u.s] {
		if o == e {
			return true
		}
	}
	return false
}

// move kinds for improve.
const (
	moveNone = iota
	moveSwap
	moveReassign
)

// improve is the local search described on Default. It stops at a local optimum, within nearOptimal of lb, or after a generous cap on
// moves, and returns the number of moves made.
func (u *unit) improve(lb float64) int {
	if u.gpus < 2 {
		return 0
	}
	limit := 50 * len(u.owner)
	for it := range limit {
		g := 0
		for h := range u.load {
			if u.load[h] > u.load[g] {
				g = h
			}
		}
		top := u.load[g]
		if top <= 0 || top <= lb*(1+nearOptimal) {
			return it
		}
		bestScore := top * (1 - 1e-12) // a move must land strictly below this
		kind, mi, mj, mb := moveNone, -1, -1, -1

		// Swaps: slot i on g with slot j on h.
		for i := g * u.s; i < (g+1)*u.s; i++ {
			a := u.owner[i]
			sa := u.share(a)
			for h := range u.gpus {
				if h == g || u.load[h] >= bestScore { // h must end below bestScore
					continue
				}
				for j := h * u.s; j < (h+1)*u.s; j++ {
					b := u.owner[j]
					if b == a {
						continue
					}
					sb := u.share(b)
					if sb >= sa {
						continue
					}
					sc := max(top-sa+sb, u.load[h]+sa-sb)
					if sc < bestScore && !u.holds(h, a) && !u.holds(g, b) {
						bestScore, kind, mi, mj = sc, moveSwap, i, j
					}
				}
			}
		}

		// Re-assignments change replica counts; they cost more to evaluate, so they are
		// tried only when no swap helps (variable-neighbourhood descent).
		for j := g * u.s; kind == moveNone && j < (g+1)*u.s; j++ {
			a := u.owner[j]
			if u.cnt[a] < 2 {
				continue
			}
			sa := u.share(a)
			for b := range u.cnt {
				// g's new load is top - sa + b's new share (b is not on g).
				if b == a || top-sa+u.w[b]/float64(u.cnt[b]+1) >= bestScore || u.afterShrink(b) >= bestScore {
					continue
				}
				if sc, ok := u.reassignScore(j, b, g, bestScore); ok && !u.holds(g, b) {
					bestScore, kind, mj, mb = sc, moveReassign, j, b
				}
			}
		}
		// Re-assign a slot anywhere to an expert b that has a replica on g.
		for i := g * u.s; (kind == moveNone || kind == moveReassign) && i < (g+1)*u.s; i++ {
			b := u.owner[i]
			cb := float64(u.cnt[b])
			if top-(u.w[b]/cb-u.w[b]/(cb+1)) >= bestScore {
				continue // g would not fall far enough
			}
			nb := u.w[b] / (cb + 1)
			bPart := u.afterShrink(b)
			for j, a := range u.owner {
				// j's GPU gains b's new share and loses a's; b's GPUs end at bPart or
				// above. Both bound the move's score from below.
				if j/u.s == g || a == b || u.cnt[a] < 2 || max(bPart, u.load[j/u.s]+nb-u.share(a)) >= bestScore {
					continue
				}
				if sc, ok := u.reassignScore(j, b, g, bestScore); ok && !u.holds(j/u.s, b) {
					bestScore, kind, mj, mb = sc, moveReassign, j, b
				}
			}
		}

		switch kind {
		case moveNone:
			return it
		case moveSwap:
			a, b := u.owner[mi], u.owner[mj]
			u.owner[mi], u.owner[mj] = b, a
			u.load[mi/u.s] = u.gpuLoad(mi / u.s)
			u.load[mj/u.s] = u.gpuLoad(mj / u.s)
			replace(u.slots[a], mi, mj)
			replace(u.slots[b], mj, mi)
		case moveReassign:
			a := u.owner[mj]
			u.owner[mj] = mb
			u.cnt[a]--
			u.cnt[mb]++
			u.slots[a] = slices.DeleteFunc(u.slots[a], func(x int) bool { return x == mj })
			u.slots[mb] = append(u.slots[mb], mj)
			// Loads of every GPU holding a or b changed; recompute those exactly rather
			// than accumulate rounding.
			for _, e := range []int{a, mb} {
				for _, sl := range u.slots[e] {
					u.load[sl/u.s] = u.gpuLoad(sl / u.s)
				}
			}
			u.load[mj/u.s] = u.gpuLoad(mj / u.s)
		}
	}
	return limit
}

// gpuLoad sums GPU g's replica shares afresh.
func (u *unit) gpuLoad(g int) float64 {
	sum := 0.0
	for _, e := range u.owner[g*u.s : (g+1)*u.s] {
		sum += u.share(e)
	}
	return sum
}

// replace changes the first from in xs to to.
func replace(xs []int, from, to int) {
	for i, x := range xs {
		if x == from {
			xs[i] = to
			return
		}
	}
}

// reassignScore evaluates giving slot j (owner a, which keeps ≥ 1 replica) to expert b:
// the heaviest touched GPU afterwards, and whether the move qualifies (g is touched and
// every touched GPU ends below limit).
func (u *unit) reassignScore(j, b, g int, limit float64) (float64, bool) {
	a := u.owner[j]
	ca, cb := float64(u.cnt[a]), float64(u.cnt[b])
	up := u.w[a]/(ca-1) - u.w[a]/ca   // each remaining replica of a
	down := u.w[b]/cb - u.w[b]/(cb+1) // each existing replica of b
	u.epoch++
	for _, sl := range u.slots[a] {
		if sl != j {
			u.add(sl/u.s, up)
		}
	}
	for _, sl := range u.slots[b] {
		u.add(sl/u.s, -down)
	}
	u.add(j/u.s, u.w[b]/(cb+1)-u.w[a]/ca)
	score, ok := 0.0, u.mark[g] == u.epoch
	for _, h := range u.touched {
		v := u.load[h] + u.delta[h]
		score = max(score, v)
		if v >= limit {
			ok = false
		}
	}
	u.touched = u.touched[:0]
	return score, ok
}

// afterShrink is the heaviest GPU holding b once b gains a replica elsewhere (each of
// its replicas then carries w/(c+1)), ignoring any other change: a lower bound on the
// score of every move that gives b a slot.
func (u *unit) afterShrink(b int) float64 {
	cb := float64(u.cnt[b])
	down := u.w[b]/cb - u.w[b]/(cb+1)
	m := 0.0
	for _, sl := range u.slots[b] {
		m = max(m, u.load[sl/u.s]-down)
	}
	return m
}

// add accumulates a load change for GPU h in the current evaluation (epoch).
func (u *unit) add(h int, d float64) {
	if u.mark[h] != u.epoch {
		u.mark[h] = u.epoch
		u.delta[h] = 0
		u.touched = append(u.touched, h)
	}
	u.delta[h] += d
}

// emit writes the unit's slots as logical ids, each GPU's slots sorted by expert id so
// that equal placements print the same.
func (u *unit) emit(dst []int) {
	for i, e := range u.owner {
		dst[i] = u.ids[e]
	}
	for g := range u.gpus {
		slices.Sort(dst[g*u.s : (g+1)*u.s])
	}
}

// Construction parameters. thetas are the replica-size caps tried by buildCapped, as
// fractions of the unit's lower bound; tryLS is how many of the best constructions the
// local search polishes; nearOptimal stops the search within that relative distance
// of the lower bound (balancedness to ~4 digits), where more moves buy nothing.
var thetas = []float64{0.7, 0.8, 0.9, 0.95, 1, 1.25}

const (
	tryLS       = 3
	nearOptimal = 1e-4
)

// solve builds the unit's placement: several constructions (water-filling, and capped
// counts for each theta), the best few by their packed maximum improved by local
// search, the best result kept. Water-filling minimises the largest replica but leaves
// many mid-sized replicas, more than there are GPUs, so two of them must share a GPU;
// capping replica sizes near the target load instead gives hot experts few replicas
// just under it, with room for cold experts beside them. Neither wins everywhere.
func (u *unit) solve() {
	lb := u.lowerBound()
	order := make([]int, len(u.w))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(u.w[b], u.w[a]) })

	type candidate struct {
		owner []int
		max   float64
	}
	var cands []candidate
	keep := func() { cands = append(cands, candidate{slices.Clone(u.owner), slices.Max(u.load)}) }
	u.build()
	keep()
	for _, f := range thetas {
		if u.buildCapped(f*lb, order) {
			keep()
		}
	}
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(a.max, b.max) })
	var best []int
	bestMax := 0.0
	for _, c := range cands[:min(tryLS, len(cands))] {
		copy(u.owner, c.owner)
		u.recount()
		u.improve(lb)
		if m := slices.Max(u.load); best == nil || m < bestMax {
			best, bestMax = slices.Clone(u.owner), m
		}
		if bestMax <= lb*(1+nearOptimal) {
			break
		}
	}
	copy(u.owner, best)
	u.recount()
}

// lowerBound is max(mean GPU load, largest replica under water-filling): no placement
// of the unit can do better than either.
func (u *unit) lowerBound() float64 {
	total := 0.0
	for e := range u.w {
		u.cnt[e] = 1
		total += u.w[e]
	}
	u.waterfill(len(u.owner) - len(u.w))
	top := 0.0
	for e := range u.w {
		top = max(top, u.share(e))
	}
	return max(total/float64(u.gpus), top)
}

// buildCapped gives every expert the fewest replicas no larger than theta, hands the
// slots left over to the lightest experts (tiny replicas, harmless anywhere), and packs
// by LPT. It reports false when the caps need more slots than the unit has.
func (u *unit) buildCapped(theta float64, order []int) bool {
	if theta <= 0 {
		return false
	}
	used := 0
	for e, w := range u.w {
		c := 1
		if w > theta {
			c = int(math.Ceil(w / theta))
		}
		if c > len(u.owner) {
			return false
		}
		u.cnt[e] = c
		used += c
	}
	if used > len(u.owner) {
		return false
	}
	for i := range len(u.owner) - used {
		u.cnt[order[len(order)-1-i%len(order)]]++
	}
	u.lpt()
	return true
}
