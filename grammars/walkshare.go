package grammars

import (
	"slices"
	"sync"
	"sync/atomic"
)

// Shared walks of abstract string states.
//
// A walk from a string state not seen before visits most of the vocabulary trie
// (every token is string content), and in some patterns every character leads to such
// a state: a counter (`[a-z0-9]{162}` searched anywhere, a word count
// `^(?:\S+\s+){0,99}\S+$`) or a partial match of literal text searched anywhere. Yet
// most of such a walk repeats an earlier one. Two states are equivalent to depth r
// when no byte string of at most r bytes tells them apart to a walk: along it, the
// transitions of both are dead or both live with the same packed flags (and, where
// the walk records needs, targets at the same distance to acceptance). Equivalence is
// checked, not assumed: the two states are explored side by side over every class of
// bytes to that depth, a pair of equal states ending a branch (equivalent).
//
// A walk is then shared at two levels. (1) A state equivalent to depth shareDepth to
// a recently walked one (a counter far from its bound) takes that walk, if the part
// deeper than shareDepth is the same too. (2) Otherwise the walk is cut at the root's
// children: the result below a child (tokens with their needs, pops) is kept per
// (child, entry state, the walk's context there) and reused for a later entry state
// equivalent to a kept one as deep as the subtree goes (below most children a walk
// from a partial match of literal text enters a state it entered there before).
//
// The few very long tokens would make that depth the trie's (128 bytes) and defeat
// the equivalence of counters. So the shared part stops at shareDepth bytes, and the
// nodes deeper than that (on the paths of the ~400 longer tokens) are walked for every
// state, on a small trie that holds only those paths.

// shareDepth is the depth to which walks below the root's children are shared.
const shareDepth = 20

// Equivalence checks are bounded: one may examine eqSteps transitions and compute
// eqSlow of them (transitions not built yet cost an automaton step each); the checks
// of one walk together walkEqSteps and walkEqSlow.
const (
	eqSteps     = 1 << 14
	eqSlow      = 384
	walkEqSteps = 3 << 14
	walkEqSlow  = 768
)

// prepShare computes what shared walks need of the trie: the heights of the root's
// children's subtrees and the trie of the paths to tokens longer than shareDepth.
func (t *trie) prepShare() {
	n := int32(len(t.b))
	t.view.nodes = make([]tnode, n)
	for i := range t.view.nodes {
		t.view.nodes[i] = tnode{next: t.next[i], tok: t.tok[i], depth: t.depth[i], b: t.b[i]}
	}
	t.height = make([]uint16, n)
	for i := n - 1; i > 0; i-- {
		h := t.depth[i]
		if t.height[i] > h {
			h = t.height[i]
		}
		t.height[i] = h
		if p := t.parent[i]; p >= 0 && t.height[p] < h {
			t.height[p] = h
		}
	}
	keep := make([]bool, n)
	for i := int32(0); i < n; i++ {
		if t.tok[i] >= 0 && t.depth[i] > shareDepth {
			for p := i; p >= 0 && !keep[p]; p = t.parent[p] {
				keep[p] = true
			}
		}
	}
	lt := &trieView{}
	var stack []int32 // indices in lt of the open nodes
	for i := int32(0); i < n; i++ {
		if !keep[i] {
			continue
		}
		d := t.depth[i]
		for len(stack) > 0 && lt.nodes[stack[len(stack)-1]].depth >= d {
			lt.nodes[stack[len(stack)-1]].next = int32(len(lt.nodes))
			stack = stack[:len(stack)-1]
		}
		tok := int32(-1)
		if d > shareDepth {
			tok = t.tok[i]
		}
		lt.nodes = append(lt.nodes, tnode{tok: tok, depth: d, b: t.b[i]})
		lt.orig = append(lt.orig, i)
		stack = append(stack, int32(len(lt.nodes)-1))
	}
	for _, x := range stack {
		lt.nodes[x].next = int32(len(lt.nodes))
	}
	t.long = lt
	t.quote = t.pathsTo(func(i int32) bool { return t.b[i] == '"' })
}

// pathsTo is the view of the trie's nodes on the paths from the root to the nodes
// where want holds (those included, their subtrees not).
func (t *trie) pathsTo(want func(int32) bool) *trieView {
	n := int32(len(t.b))
	keep := make([]bool, n)
	for i := int32(1); i < n; i++ {
		if want(i) {
			for p := i; p >= 0 && !keep[p]; p = t.parent[p] {
				keep[p] = true
			}
		}
	}
	v := &trieView{}
	var stack []int32
	for i := int32(0); i < n; i++ {
		if !keep[i] {
			continue
		}
		d := t.depth[i]
		for len(stack) > 0 && v.nodes[stack[len(stack)-1]].depth >= d {
			v.nodes[stack[len(stack)-1]].next = int32(len(v.nodes))
			stack = stack[:len(stack)-1]
		}
		v.nodes = append(v.nodes, tnode{tok: t.tok[i], depth: d, b: t.b[i]})
		v.orig = append(v.orig, i)
		stack = append(stack, int32(len(v.nodes)-1))
	}
	for _, x := range stack {
		v.nodes[x].next = int32(len(v.nodes))
	}
	return v
}

// subKey locates a kept walk below a child of the root.
type subKey struct {
	node  int32 // the child
	state int32 // the state entered there
	ctx   subCtx
}

// subCtx is the walk's context at the child (absRange's per-depth values).
type subCtx struct {
	comp      uint16
	need      uint8
	bnd       bool
	inContent bool
	free      bool
}

type subSlot struct {
	node int32
	ctx  subCtx
}

// absPart is a part of an abstract walk: below one child of the root, or deeper than
// shareDepth.
type absPart struct {
	toks  []int32
	needs []uint16
	ends  []int32
	endN  []uint16
	endK  []uint16
	pops  []int32
	pneed []uint8
	pk    []uint16
	mem   int64
}

// topWalk is a whole walk from an abstract state, and the root context it had.
type topWalk struct {
	s   int32
	ctx subCtx
	r   *absRes
}

// eqKey is a pair of states (the smaller first) and whether distances count.
type eqKey struct {
	x, y int32
	free bool
}

// subMemo holds an abstractable automaton's kept walks.
type subMemo struct {
	mu     sync.Mutex
	m      map[subKey]*absPart
	recent map[subSlot][]int32 // entry states of kept walks, latest last (a few)
	eq     map[eqKey]int       // pairs of states proven equivalent to a depth
	neq    map[eqKey]int       // pairs proven different within a depth
	gaveUp map[eqKey]int       // pairs whose check passed its bounds at a depth
	reps   []byte              // a byte per class of the abstract transitions
	tops   [2][]topWalk        // recent whole walks (per free), latest last
	seen   map[[2]int32]bool   // equivalent's scratch
	queue  []eqPair
	bytes  atomic.Int64 // memory of the kept walks
}

// eqPair is a pair of states equivalent explores, at depth d.
type eqPair struct {
	x, y int32
	d    int
}

// shared returns a's memo of kept walks, or nil when a's walks are not shared.
func (a *automaton) shared(t *trie) *subMemo {
	if t.long == nil {
		return nil
	}
	if a.edgeReps == nil && a.ncls == 256 {
		return nil
	}
	a.subOnce.Do(func() {
		for i := range a.nfa {
			switch a.nfa[i].op.kind {
			case auxNone, gCharLT, gCharGE, fCharInc, gTrieOK:
			default:
				// other registers (a trie started inside the automaton, counts) could
				// make abstract transitions depend on more than the byte's class
				return
			}
		}
		a.sub.Store(&subMemo{m: map[subKey]*absPart{}, recent: map[subSlot][]int32{}, eq: map[eqKey]int{}, neq: map[eqKey]int{}, gaveUp: map[eqKey]int{}, seen: map[[2]int32]bool{}, reps: a.absReps()})
	})
	return a.sub.Load()
}

// subBytes is the memory of a's kept walks.
func (a *automaton) subBytes() int64 {
	if sm := a.sub.Load(); sm != nil {
		return sm.bytes.Load()
	}
	return 0
}

// absReps returns a byte of each class of the abstract transitions.
func (a *automaton) absReps() []byte {
	if a.edgeReps != nil {
		return a.edgeReps
	}
	return a.reps
}

// sameObs reports whether two live packed transitions look the same to a walk (free:
// one without needs, which does not read distances).
func (a *automaton) sameObs(x, y int32, free bool) bool {
	if x&(1<<pfShift-1) != y&(1<<pfShift-1) {
		return false
	}
	if free || a.dist == nil {
		return true
	}
	return a.state(x>>pfShift).dist == a.state(y>>pfShift).dist
}

// equivalent reports whether abstract states x and y look the same to a walk on
// every byte string of at most r bytes: a breadth-first search over pairs of states,
// each pair expanded once (at the depth it is first reached), a pair of equal states
// ending its branch. Caller holds sm.mu. A check past its bounds (or the walk's, or
// the mask's time budget) answers false.
func (a *automaton) equivalent(sm *subMemo, x, y int32, r int, sc *walkScratch) bool {
	if x == y || r <= 0 {
		return true
	}
	k := sm.pairKey(x, y, sc.free)
	if d, ok := sm.eq[k]; ok && d >= r {
		return true
	}
	if d, ok := sm.neq[k]; ok && d <= r {
		return false
	}
	if d, ok := sm.gaveUp[k]; ok && d <= r {
		return false
	}
	seen := sm.seen
	clear(seen)
	seen[[2]int32{k.x, k.y}] = true
	queue := append(sm.queue[:0], eqPair{x, y, 0})
	steps, slow := eqSteps, eqSlow
	defer func() { sm.queue = queue[:0] }()
	giveUp := func() bool {
		if steps < 0 || slow < 0 {
			if d, ok := sm.gaveUp[k]; !ok || d > r {
				sm.gaveUp[k] = r
			}
		}
		return false
	}
	for h := 0; h < len(queue); h++ {
		p := queue[h]
		for col := range sm.reps {
			steps--
			sc.eqSteps--
			if steps < 0 || sc.eqSteps < 0 || sc.pastBudget() {
				// (past the mask's budget: give up, so that the walk goes on and
				// builds what a retry needs, instead of a check that never ends)
				return giveUp()
			}
			vx, vy := a.absTrans.get(p.x, col), a.absTrans.get(p.y, col)
			if vx == tUnknown {
				slow--
				sc.eqSlow--
				vx = a.absStepSlow(p.x, col)
			}
			if vy == tUnknown {
				slow--
				sc.eqSlow--
				vy = a.absStepSlow(p.y, col)
			}
			if slow < 0 || sc.eqSlow < 0 {
				return giveUp()
			}
			if vx < 0 || vy < 0 {
				if vx != vy {
					sm.neq[k] = p.d + 1
					return false
				}
				continue
			}
			if !a.sameObs(vx, vy, sc.free) {
				sm.neq[k] = p.d + 1
				return false
			}
			tx, ty := vx>>pfShift, vy>>pfShift
			if tx == ty || p.d+1 >= r {
				continue
			}
			q := sm.pairKey(tx, ty, sc.free)
			if d, ok := sm.eq[q]; ok && d >= r-p.d-1 {
				continue
			}
			if d, ok := sm.neq[q]; ok && d <= r-p.d-1 {
				sm.neq[k] = p.d + 1 + d
				return false
			}
			if seen[[2]int32{q.x, q.y}] {
				continue
			}
			seen[[2]int32{q.x, q.y}] = true
			queue = append(queue, eqPair{tx, ty, p.d + 1})
		}
	}
	sm.eq[k] = r
	return true
}

func (sm *subMemo) pairKey(x, y int32, free bool) eqKey {
	if x > y {
		x, y = y, x
	}
	return eqKey{x, y, free}
}

// lookup returns the kept walk below child node entered in state q with context ctx,
// if there is one for q or for a state equivalent to q to depth r.
func (sm *subMemo) lookup(a *automaton, node, q int32, ctx subCtx, r int, sc *walkScratch) *absPart {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	k := subKey{node, q, ctx}
	if sr := sm.m[k]; sr != nil {
		return sr
	}
	slot := subSlot{node, ctx}
	rec := sm.recent[slot]
	for j := len(rec) - 1; j >= 0; j-- {
		if a.equivalent(sm, q, rec[j], r, sc) {
			sr := sm.m[subKey{node, rec[j], ctx}]
			sm.m[k] = sr
			return sr
		}
	}
	return nil
}

// keep stores the walk below a child.
func (sm *subMemo) keep(node, q int32, ctx subCtx, sr *absPart) *absPart {
	sm.mu.Lock()
	defer sm.mu.Unlock()
	k := subKey{node, q, ctx}
	if old := sm.m[k]; old != nil {
		return old
	}
	sm.m[k] = sr
	slot := subSlot{node, ctx}
	rec := append(sm.recent[slot], q)
	if len(rec) > 3 {
		rec = rec[len(rec)-3:]
	}
	sm.recent[slot] = rec
	return sr
}

// walkAbstractShared walks the trie below the root (whose context is set) child by
// child, to depth shareDepth.
func (sc *walkScratch) walkAbstractShared(a *automaton, sm *subMemo, t *trie, tv *tableView, limit int64) {
	tn := &t.view
	n := int32(len(t.b))
	for c := int32(1); c < n; c = t.next[c] {
		col := int(a.absCls[t.b[c]])
		v := ld(&sc.row[0][col])
		if v == tUnknown {
			if sc.overBudget() {
				return
			}
			v = a.absStepSlow(sc.cfg[0], col)
		}
		if v < 0 {
			continue
		}
		sc.absRange(a, tv, tn, c, c+1, shareDepth, 0)
		if t.next[c] == c+1 {
			continue
		}
		q := sc.cfg[1]
		ctx := subCtx{sc.comp[1], sc.need[1], sc.bnd[1], sc.inContent[1], sc.free}
		r := int(min(t.height[c], shareDepth)) - 1
		if sr := sm.lookup(a, c, q, ctx, r, sc); sr != nil {
			sc.toks = append(sc.toks, sr.toks...)
			sc.needs = append(sc.needs, sr.needs...)
			sc.ends = append(sc.ends, sr.ends...)
			sc.endN = append(sc.endN, sr.endN...)
			sc.endK = append(sc.endK, sr.endK...)
			sc.pops = append(sc.pops, sr.pops...)
			sc.pneed = append(sc.pneed, sr.pneed...)
			sc.pk = append(sc.pk, sr.pk...)
			continue
		}
		t0, e0, p0 := len(sc.toks), len(sc.ends), len(sc.pops)
		sc.absRange(a, tv, tn, c+1, t.next[c], shareDepth, 0)
		if sc.over {
			return
		}
		sr := &absPart{
			toks: slices.Clone(sc.toks[t0:]), needs: sc.needsFrom(t0),
			ends: slices.Clone(sc.ends[e0:]), endN: slices.Clone(sc.endN[e0:]), endK: slices.Clone(sc.endK[e0:]),
			pops: slices.Clone(sc.pops[p0:]), pneed: slices.Clone(sc.pneed[p0:]), pk: slices.Clone(sc.pk[p0:]),
		}
		sr.mem = int64(len(sr.toks))*6 + int64(len(sr.ends))*8 + int64(len(sr.pops))*7 + 200
		if sm.bytes.Load()+sr.mem < min(limit, retireBytes) {
			if sm.keep(c, q, ctx, sr) == sr {
				sm.bytes.Add(sr.mem)
			}
		}
	}
}

// walkLong walks the nodes deeper than shareDepth, on the small trie of the long
// tokens' paths (the root's context set), and returns what it added.
func (sc *walkScratch) walkLong(a *automaton, t *trie, tv *tableView) *absPart {
	lt := t.long
	t0, e0, p0 := len(sc.toks), len(sc.ends), len(sc.pops)
	if len(lt.nodes) > 1 {
		sc.absRange(a, tv, lt, 1, int32(len(lt.nodes)), 1<<15, shareDepth)
	}
	lp := &absPart{
		toks: slices.Clone(sc.toks[t0:]), needs: sc.needsFrom(t0),
		ends: slices.Clone(sc.ends[e0:]), endN: slices.Clone(sc.endN[e0:]), endK: slices.Clone(sc.endK[e0:]),
		pops: slices.Clone(sc.pops[p0:]), pneed: slices.Clone(sc.pneed[p0:]), pk: slices.Clone(sc.pk[p0:]),
	}
	if len(sc.pops) > p0 && p0 > 0 && sc.pops[p0-1] > sc.pops[p0] {
		sc.mergePops(p0)
	}
	return lp
}

// needsFrom copies the needs of the tokens from t0 on (none in a free walk).
func (sc *walkScratch) needsFrom(t0 int) []uint16 {
	if sc.free {
		return nil
	}
	return slices.Clone(sc.needs[t0:])
}

func (p *absPart) equal(q *absPart) bool {
	return slices.Equal(p.toks, q.toks) && slices.Equal(p.needs, q.needs) &&
		slices.Equal(p.ends, q.ends) && slices.Equal(p.endN, q.endN) && slices.Equal(p.endK, q.endK) &&
		slices.Equal(p.pops, q.pops) && slices.Equal(p.pneed, q.pneed) && slices.Equal(p.pk, q.pk)
}

func rootCtx(sc *walkScratch) subCtx {
	return subCtx{sc.comp[0], sc.need[0], sc.bnd[0], sc.inContent[0], sc.free}
}

// topShared returns the walk of a recent state that no byte string of at most
// shareDepth bytes tells apart from s and whose deeper part is the same as s's, or
// nil.
func (sc *walkScratch) topShared(a *automaton, sm *subMemo, s int32, t *trie, tv *tableView) *absRes {
	ctx := rootCtx(sc)
	acc := a.state(s).accept
	f := 0
	if sc.free {
		f = 1
	}
	sm.mu.Lock()
	cands := slices.Clone(sm.tops[f])
	sm.mu.Unlock()
	for j := len(cands) - 1; j >= 0; j-- {
		c := cands[j]
		if c.ctx != ctx || a.state(c.s).accept != acc || c.r.long == nil {
			continue
		}
		sm.mu.Lock()
		ok := a.equivalent(sm, s, c.s, shareDepth, sc)
		sm.mu.Unlock()
		if !ok {
			continue
		}
		sc.resetAbs()
		if lp := sc.walkLong(a, t, tv); !sc.over && lp.equal(c.r.long) {
			return c.r
		}
		return nil
	}
	return nil
}

// noteTop remembers a whole walk for topShared.
func (sm *subMemo) noteTop(s int32, sc *walkScratch, r *absRes) {
	f := 0
	if sc.free {
		f = 1
	}
	sm.mu.Lock()
	defer sm.mu.Unlock()
	l := append(sm.tops[f], topWalk{s, rootCtx(sc), r})
	if len(l) > 3 {
		l = l[len(l)-3:]
	}
	sm.tops[f] = l
}

// mergePops restores preorder when the pops from p0 on (sorted) belong among the
// earlier ones (sorted).
func (sc *walkScratch) mergePops(p0 int) {
	type pop struct {
		p    int32
		need uint8
		k    uint16
	}
	all := make([]pop, len(sc.pops))
	for i := range sc.pops {
		all[i] = pop{sc.pops[i], sc.pneed[i], sc.pk[i]}
	}
	slices.SortStableFunc(all, func(x, y pop) int { return int(x.p) - int(y.p) })
	for i, x := range all {
		sc.pops[i], sc.pneed[i], sc.pk[i] = x.p, x.need, x.k
	}
}
