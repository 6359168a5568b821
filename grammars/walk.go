package grammars

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Mask computation walks the vocabulary trie. A walk starts from one parse context
// (the top frame of a stack, "level 1") and yields the tokens allowed without leaving
// that frame plus the trie nodes where the frame's rule can return ("pops"); the
// parent frame's context continues from those nodes ("level 2", ...). Level-1 results
// are cached per DFA state. For JSON strings (length bounds and excluded keys are
// parameters of one shared automaton) the walk runs once from the "abstract" state
// and records, per token, how many characters it needs; each concrete state filters
// that shared result.

// walkRes is the cached result of a walk.
type walkRes struct {
	toks []int32  // allowed tokens (sparse form)
	bits []uint64 // allowed tokens (dense form), nil when sparse
	pops []int32  // trie nodes, in preorder
	mem  int64
	idx  atomic.Pointer[popIndex]
}

// absRes is the walk from an abstract string state.
type absRes struct {
	toks    []int32 // sorted by need
	needs   []uint16
	all     []uint64 // all toks as a bitset (dense results only)
	maxNeed int
	cum     sync.Map // R -> *[]uint64: toks with need <= R (dense results)
	// ends: tokens after which the string can only close (a pattern or format that
	// ends there). Whether the closing quote is then allowed depends on the concrete
	// state (minimum length, excluded keys), so each is filtered like a pop.
	ends       []int32
	endNeed    []uint16
	endK       []uint16 // characters the token completes
	pops       []int32  // preorder
	popNeed    []uint8
	popK       []uint16
	popMaxNeed int
	popMinK    int
	idx        atomic.Pointer[popIndex]
	mem        int64
	// shared walks: the part of the walk deeper than shareDepth
	long *absPart
	// quick: walkAnyContent's (the tokens shared, only the quote paths walked)
	quick bool
}

// popIndex speeds up continuing many pops in a parent context: the token at each
// pop, and the pops' children grouped by byte.
type popIndex struct {
	popTok      []int32
	tokBits     []uint64
	child       [256][]int32
	childParent [256][]int32
}

// denseAbove is the token count past which a result is stored as a bitset.
const denseAbove = 2048

// walkScratch is a walker's reusable memory (one per matcher).
type walkScratch struct {
	// the per-mask budget (Options.MaxMaskTime): the clock is read every 32 lazily
	// built transitions; past stopAt the walk stops with over set, and nothing it
	// found is cached (the transitions it built are kept, so a retry goes further)
	stopAt time.Time
	nslow  int
	over   bool
	// past: the budget is spent, seen by work that keeps nothing when cut off (an
	// equivalence check, walkshare.go), which gives up and lets the walk go on
	past bool

	// per trie depth: the configuration, its row, and (abstract walks) the
	// characters completed, the need, whether the next content byte starts a
	// character, and whether the walk is in the string's content
	cfg       [258]int32
	row       [258][]int32
	comp      [258]uint16
	need      [258]uint8
	bnd       [258]bool
	inContent [258]bool

	// free: the abstract walk is for states whose remaining length no need can
	// exceed, so it records every need as 0
	free bool
	// what the equivalence checks of this walk may still spend (walkshare.go)
	eqSteps, eqSlow int

	toks  []int32
	needs []uint16
	ends  []int32
	endN  []uint16
	endK  []uint16
	pops  []int32
	pneed []uint8
	pk    []uint16
	path  []byte
	next  []int32
	hbuf  []int32
}

func (sc *walkScratch) finish(words int) *walkRes {
	r := &walkRes{}
	if len(sc.toks) > denseAbove {
		r.bits = make([]uint64, words)
		for _, t := range sc.toks {
			r.bits[t>>6] |= 1 << (uint(t) & 63)
		}
		r.mem = int64(words) * 8
	} else if len(sc.toks) > 0 {
		r.toks = append([]int32(nil), sc.toks...)
		r.mem = int64(len(r.toks)) * 4
	}
	if len(sc.pops) > 0 {
		r.pops = append([]int32(nil), sc.pops...)
		r.mem += int64(len(r.pops)) * 4
	}
	r.mem += 64
	return r
}

// tableView is a snapshot of a lazy table's chunk directory for fast row access.
type tableView struct {
	t   *lazyTable
	dir [][]int32
	w   int
}

func viewOf(t *lazyTable) tableView { return tableView{t, *t.dir.Load(), t.width} }

func (v *tableView) row(id int32) []int32 {
	c := int(id >> v.t.shift)
	off := int(id&(1<<v.t.shift-1)) * v.w
	if c >= len(v.dir) || off+v.w > len(v.dir[c]) {
		v.dir = *v.t.dir.Load()
	}
	return v.dir[c][off : off+v.w : off+v.w]
}

// walkLeaf walks the whole trie from state s of leaf automaton a.
func walkLeaf(a *automaton, s int32, t *trie, words int, sc *walkScratch) *walkRes {
	sc.toks = sc.toks[:0]
	sc.pops = sc.pops[:0]
	ds := a.state(s)
	if ds.accept {
		sc.pops = append(sc.pops, 0)
	}
	tv := viewOf(a.trans)
	sc.walkSubtree(t, 0, 0, s, &a.cls, &tv, a)
	return sc.finish(words)
}

// walkAnyContent is the free walk of abstract state s of a string leaf whose items
// include the character start of a loop over any characters (a search's head or
// tail): every byte string that is string content keeps that item, so the tokens
// the walk allows are those of a plain string's content, the same for every such
// state (computed once per vocabulary); only the pops (where the string may close)
// depend on the state, and they lie on the paths to the trie's quote nodes, which
// the walk follows alone (some thousands of nodes, not the whole trie). ok is false
// where the state is not such a state, or the walk met what only a full walk records
// (a token after which the string can only close).
func walkAnyContent(a *automaton, s int32, t *trie, words int, sc *walkScratch) (r *absRes, ok bool) {
	if t.quote == nil {
		return nil, false
	}
	ds := a.state(s)
	tv := viewOf(a.absTrans)
	in, pre := ds, 0
	if isStringStart(a, ds) {
		// before the opening quote: the state after it decides
		col := int(a.absCls['"'])
		v := ld(&tv.row(s)[col])
		if v == tUnknown {
			v = a.absStepSlow(s, col)
		}
		if v < 0 {
			return nil, false
		}
		in, pre = a.state(v>>pfShift), 1
	}
	loop := false
	for _, it := range in.items {
		if a.nfa[it.node].anyLoop {
			loop = true
			break
		}
	}
	if !loop {
		return nil, false
	}
	cr := t.contentWalk(words)[pre]
	sc.free = true
	sc.resetAbs()
	sc.absRoot(a, s, &tv)
	if ds.accept {
		sc.addRootPop()
	}
	if len(t.quote.nodes) > 1 {
		sc.absRange(a, &tv, t.quote, 1, int32(len(t.quote.nodes)), 1<<15, 0)
	}
	if len(sc.ends) > 0 {
		return nil, false
	}
	r = &absRes{toks: cr.toks, needs: cr.needs, all: cr.all, popMinK: 1 << 30, quick: true}
	r.pops = slices.Clone(sc.pops)
	r.popNeed = slices.Clone(sc.pneed)
	r.popK = slices.Clone(sc.pk)
	for i := range r.pops {
		r.popMaxNeed = max(r.popMaxNeed, int(r.popNeed[i]))
		r.popMinK = min(r.popMinK, int(r.popK[i]))
	}
	r.mem = int64(len(r.pops))*7 + 128
	return r, true
}

// contentWalk is the free walks of a plain string's content state (every token that
// is string content) and of its start (the same after the opening quote), in the
// form walkAnyContent hands out (shared, read only).
func (t *trie) contentWalk(words int) [2]*absRes {
	t.contentOnce.Do(func() {
		body := eSeqOf(eLit(`"`), eTrackOf(eStar(anyStringChar())), eGuardOf(gCharGE, 0), eGuardOf(gTrieOK, 0), eLit(`"`))
		b := &nfaBuilder{}
		st := b.newNode()
		en := b.build(body, st)
		b.nodes[en].accept = true
		a := newAutomaton("string-content", b.nodes, nil, nil, true, 0)
		a.abstractable = true
		a.computeDist()
		s0 := a.startWith(st, &auxVal{max: -1})
		var sc walkScratch
		t.content[0], _ = walkAbstract(a, a.abstractOf(a.step(s0, '"')>>pfShift), t, words, true, false, 1<<62, &sc)
		t.content[1], _ = walkAbstract(a, a.abstractOf(s0), t, words, true, false, 1<<62, &sc)
	})
	return t.content
}

// walkAbstract walks the trie from abstract string state s, recording per token the
// characters it needs (1 + the characters completed before its last character start)
// and per pop the need and the characters completed before the closing quote.
// Subtrees below the root's children are shared between states that no token tells
// apart (walkshare.go).
func walkAbstract(a *automaton, s int32, t *trie, words int, free, share bool, limit int64, sc *walkScratch) (r *absRes, fresh bool) {
	sc.free = free
	sc.eqSteps, sc.eqSlow = walkEqSteps, walkEqSlow
	sc.resetAbs()
	ds := a.state(s)
	tv := viewOf(a.absTrans)
	sc.absRoot(a, s, &tv)
	var sm *subMemo
	if share {
		sm = a.shared(t)
	}
	if sm == nil {
		if ds.accept {
			sc.addRootPop()
		}
		sc.absRange(a, &tv, &t.view, 1, int32(len(t.b)), 1<<15, 0)
		return sc.absResult(words), true
	}
	if r := sc.topShared(a, sm, s, t, &tv); r != nil {
		return r, false
	}
	sc.resetAbs()
	if ds.accept {
		sc.addRootPop()
	}
	sc.walkAbstractShared(a, sm, t, &tv, limit)
	lp := sc.walkLong(a, t, &tv)
	r = sc.absResult(words)
	r.long = lp
	if !sc.over {
		sm.noteTop(s, sc, r)
	}
	return r, true
}

func (sc *walkScratch) resetAbs() {
	sc.toks, sc.needs = sc.toks[:0], sc.needs[:0]
	sc.ends, sc.endN, sc.endK = sc.ends[:0], sc.endN[:0], sc.endK[:0]
	sc.pops, sc.pneed, sc.pk = sc.pops[:0], sc.pneed[:0], sc.pk[:0]
}

func (sc *walkScratch) addRootPop() {
	sc.pops = append(sc.pops, 0)
	sc.pneed = append(sc.pneed, 0)
	sc.pk = append(sc.pk, 0)
}

// absRoot sets the walk's context at the root (depth 0) for abstract state s. Per
// depth: the configuration, its row, the characters completed, the need, whether the
// next content byte starts a character, and whether the walk is in the content.
func (sc *walkScratch) absRoot(a *automaton, s int32, tv *tableView) {
	ds := a.state(s)
	sc.row[0] = tv.row(s)
	sc.cfg[0] = s
	sc.comp[0] = 0
	sc.need[0] = 0
	sc.inContent[0] = !ds.accept && !isStringStart(a, ds)
	sc.bnd[0] = ds.boundary || !sc.inContent[0]
}

// trieView is the part of a trie a walk reads, one record per node (in preorder);
// orig maps its nodes to the vocabulary trie's (nil: the vocabulary trie itself).
type trieView struct {
	nodes []tnode
	orig  []int32
}

// tnode is a trie node as walks read it: the index past its subtree, the token
// ending there (or -1), its depth and byte.
type tnode struct {
	next  int32
	tok   int32
	depth uint16
	b     byte
}

// absRange walks nodes [lo, hi) of t (a preorder range whose parent context is set at
// depth tdepth[lo]-1) from an abstract state, descending no deeper than maxD, and
// records tokens and pops only at depths above emitAbove.
func (sc *walkScratch) absRange(a *automaton, tv *tableView, t *trieView, lo, hi int32, maxD, emitAbove uint16) {
	cls := &a.absCls
	nodes, orig := t.nodes, t.orig
	free, dist := sc.free, a.dist != nil
	for i := lo; i < hi; {
		nd := &nodes[i]
		d := nd.depth
		col := int(cls[nd.b])
		v := ld(&sc.row[d-1][col])
		if v == tUnknown {
			if sc.overBudget() {
				break
			}
			v = a.absStepSlow(sc.cfg[d-1], col)
		}
		if v < 0 {
			i = nd.next
			continue
		}
		acc := v&pfAccept != 0
		comp := sc.comp[d-1]
		need := sc.need[d-1]
		inContent := sc.inContent[d-1]
		if !free && !acc && inContent && sc.bnd[d-1] {
			// this byte starts a character: count+comp < max must hold
			need = satU8(int(comp) + 1)
		}
		if v&pfInc != 0 {
			comp++
		}
		// at a boundary now: the character count may be exhausted, and then only the
		// closing quote remains; a state that cannot take it needs one more unit, and
		// in general the state needs its distance (in characters) to the end
		atBnd := v&pfInc != 0 || (!inContent && !acc)
		if d > emitAbove {
			if tok := nd.tok; v&pfCont != 0 && tok >= 0 {
				tneed := int(need)
				if !free {
					if atBnd && v&pfClosable == 0 {
						tneed = max(tneed, int(comp)+1)
					}
					if dist && !acc {
						tneed = max(tneed, int(comp)+int(a.state(v>>pfShift).dist))
					}
				}
				if atBnd && v&(pfClosable|pfTracked) == pfClosable {
					// only the closing quote can follow
					sc.ends = append(sc.ends, tok)
					sc.endN = append(sc.endN, satU16(tneed))
					sc.endK = append(sc.endK, uint16(comp))
				} else {
					sc.toks = append(sc.toks, tok)
					if !free {
						// (a free walk records no needs for its tokens)
						sc.needs = append(sc.needs, satU16(tneed))
					}
				}
			}
			if acc {
				p := i
				if orig != nil {
					p = orig[i]
				}
				sc.pops = append(sc.pops, p)
				sc.pneed = append(sc.pneed, need)
				sc.pk = append(sc.pk, sc.comp[d-1])
			}
		}
		if nd.next > i+1 {
			if d >= maxD {
				i = nd.next
				continue
			}
			ns := v >> pfShift
			sc.cfg[d] = ns
			if ns == sc.cfg[d-1] {
				sc.row[d] = sc.row[d-1] // (a state that loops on the byte)
			} else {
				sc.row[d] = tv.row(ns)
			}
			sc.comp[d] = comp
			sc.need[d] = need
			sc.bnd[d] = atBnd
			sc.inContent[d] = !acc
		}
		i++
	}
}

// absResult turns the walk's lists into an absRes.
func (sc *walkScratch) absResult(words int) *absRes {
	r := &absRes{popMinK: 1 << 30}
	if sc.free {
		// every need is 0: no order to keep
		if len(sc.toks) > denseAbove {
			r.all = make([]uint64, words)
			for _, tk := range sc.toks {
				r.all[tk>>6] |= 1 << (uint(tk) & 63)
			}
			r.mem += int64(words) * 8
		} else {
			r.toks = slices.Clone(sc.toks)
			r.needs = make([]uint16, len(r.toks))
		}
	} else {
		sc.sortByNeed(r, words)
	}
	r.ends = slices.Clone(sc.ends)
	r.endNeed = slices.Clone(sc.endN)
	r.endK = slices.Clone(sc.endK)
	r.pops = slices.Clone(sc.pops)
	r.popNeed = slices.Clone(sc.pneed)
	r.popK = slices.Clone(sc.pk)
	for i := range r.pops {
		r.popMaxNeed = max(r.popMaxNeed, int(r.popNeed[i]))
		r.popMinK = min(r.popMinK, int(r.popK[i]))
	}
	r.mem += int64(len(r.toks))*6 + int64(len(r.ends))*8 + int64(len(r.pops))*7 + 128
	return r
}

// sortByNeed stores the walk's tokens in r sorted by need (a counting sort).
func (sc *walkScratch) sortByNeed(r *absRes, words int) {
	for _, nd := range sc.needs {
		r.maxNeed = max(r.maxNeed, int(nd))
	}
	cnt := make([]int, r.maxNeed+2)
	for _, nd := range sc.needs {
		cnt[int(nd)+1]++
	}
	for i := 1; i < len(cnt); i++ {
		cnt[i] += cnt[i-1]
	}
	r.toks = make([]int32, len(sc.toks))
	r.needs = make([]uint16, len(sc.toks))
	for i, tk := range sc.toks {
		nd := sc.needs[i]
		j := cnt[nd]
		cnt[nd]++
		r.toks[j] = tk
		r.needs[j] = nd
	}
	if len(r.toks) > denseAbove {
		r.all = make([]uint64, words)
		for _, tk := range r.toks {
			r.all[tk>>6] |= 1 << (uint(tk) & 63)
		}
		r.mem += int64(words) * 8
	}
}

func satU8(x int) uint8 {
	if x > 255 {
		return 255
	}
	return uint8(x)
}

func satU16(x int) uint16 {
	if x > 65535 {
		return 65535
	}
	return uint16(x)
}

// isStringStart: the state still expects the opening quote.
func isStringStart(a *automaton, ds *dstate) bool {
	for _, it := range ds.items {
		for _, e := range a.nfa[it.node].edges {
			if e.set.has('"') && !e.track {
				// only the opening quote edge is untracked among a string's edges
				// before the content starts
				if !ds.boundary {
					return true
				}
			}
		}
	}
	return false
}

// orNeed adds the tokens whose need is at most R.
func (r *absRes) orNeed(mask []uint64, R int) {
	if R >= r.maxNeed {
		if r.all != nil {
			for i, w := range r.all[:len(mask)] {
				mask[i] |= w
			}
			return
		}
		for _, t := range r.toks {
			mask[t>>6] |= 1 << (uint(t) & 63)
		}
		return
	}
	if R < 0 {
		return
	}
	if r.all != nil {
		var p *[]uint64
		if x, ok := r.cum.Load(R); ok {
			p = x.(*[]uint64)
		} else {
			b := make([]uint64, len(r.all))
			for i, t := range r.toks {
				if int(r.needs[i]) > R {
					break
				}
				b[t>>6] |= 1 << (uint(t) & 63)
			}
			x, _ := r.cum.LoadOrStore(R, &b)
			p = x.(*[]uint64)
		}
		for i, w := range (*p)[:len(mask)] {
			mask[i] |= w
		}
		return
	}
	for i, t := range r.toks {
		if int(r.needs[i]) > R {
			break
		}
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

func buildPopIndex(pops []int32, t *trie, words int) *popIndex {
	ix := &popIndex{popTok: make([]int32, len(pops))}
	ntok := 0
	for i, p := range pops {
		ix.popTok[i] = t.tok[p]
		if t.tok[p] >= 0 {
			ntok++
		}
		for c := p + 1; c < t.next[p]; c = t.next[c] {
			b := t.b[c]
			ix.child[b] = append(ix.child[b], c)
			ix.childParent[b] = append(ix.childParent[b], int32(i))
		}
	}
	if ntok > denseAbove {
		ix.tokBits = make([]uint64, words)
		for _, tk := range ix.popTok {
			if tk >= 0 {
				ix.tokBits[tk>>6] |= 1 << (uint(tk) & 63)
			}
		}
	}
	return ix
}

// walkFrom walks the subtree below node st (st itself already consumed) from packed
// configuration c, appending allowed tokens and pops to sc.
func (g *Grammar) walkFrom(st int32, c int32, sc *walkScratch, tv *tableView, t *trie) {
	sc.walkSubtree(t, st, t.depth[st], c>>pfShift, &g.cls, tv, g)
}

// slowStepper computes a transition its table does not hold yet.
type slowStepper interface {
	slowStep(cfg int32, col int) int32
}

func (a *automaton) slowStep(s int32, col int) int32 { return a.stepSlow(s, col) }
func (g *Grammar) slowStep(c int32, col int) int32   { return g.cfgStepSlow(c, col) }

// walkSubtree walks the trie nodes below st (st itself consumed, at depth d0) from
// configuration cfg, appending allowed tokens and pops to sc. Rows come from tv; a
// transition the table does not hold yet comes from slow.
func (sc *walkScratch) walkSubtree(t *trie, st int32, d0 uint16, cfg int32, cls *[256]uint8, tv *tableView, slow slowStepper) {
	tb, tdepth, tnext, ttok := t.b, t.depth, t.next, t.tok
	sc.cfg[d0] = cfg
	sc.row[d0] = tv.row(cfg)
	for i, end := st+1, tnext[st]; i < end; {
		d := tdepth[i]
		col := int(cls[tb[i]])
		v := ld(&sc.row[d-1][col])
		if v == tUnknown {
			if sc.overBudget() {
				return
			}
			v = slow.slowStep(sc.cfg[d-1], col)
		}
		if v < 0 {
			i = tnext[i]
			continue
		}
		if v&pfCont != 0 && ttok[i] >= 0 {
			sc.toks = append(sc.toks, ttok[i])
		}
		if v&pfAccept != 0 {
			sc.pops = append(sc.pops, i)
		}
		if tnext[i] > i+1 {
			sc.cfg[d] = v >> pfShift
			sc.row[d] = tv.row(v >> pfShift)
		}
		i++
	}
}

// overBudget reports (every 32 calls, and from then on) that the mask's time budget
// is spent.
func (sc *walkScratch) overBudget() bool {
	if sc.over {
		return true
	}
	if sc.stopAt.IsZero() {
		return false
	}
	sc.nslow++
	if sc.nslow&31 == 0 && time.Now().After(sc.stopAt) {
		sc.over = true
	}
	return sc.over
}

// pastBudget reports (reading the clock every 32 calls, and from then on) that the
// mask's time budget is spent, without stopping the walk.
func (sc *walkScratch) pastBudget() bool {
	if sc.past || sc.over {
		return true
	}
	if sc.stopAt.IsZero() {
		return false
	}
	sc.nslow++
	if sc.nslow&31 == 0 && time.Now().After(sc.stopAt) {
		sc.past = true
	}
	return sc.past
}

// walkCfg walks the subtrees of the start nodes from configuration c0 (packed). A
// start node other than the root is itself a position: its token is allowed when c0
// can continue, and it is a pop when c0 can pop.
func (g *Grammar) walkCfg(c0 int32, starts []int32, sc *walkScratch) *walkRes {
	t := g.vocab.getTrie()
	sc.toks = sc.toks[:0]
	sc.pops = sc.pops[:0]
	tv := viewOf(g.ctrans)
	for _, st := range starts {
		if st != 0 && c0&pfCont != 0 && t.tok[st] >= 0 {
			sc.toks = append(sc.toks, t.tok[st])
		}
		if c0&pfAccept != 0 {
			sc.pops = append(sc.pops, st)
		}
		g.walkFrom(st, c0, sc, &tv, t)
	}
	return sc.finish(g.vocab.MaskWords())
}

// level1 returns the cached walk from a (non-abstract) frame state.
func (g *Grammar) level1(ref int32, sc *walkScratch) *walkRes {
	a, s := g.autOf(ref)
	ds := a.state(s)
	if r := ds.walk.Load(); r != nil {
		return r
	}
	var r *walkRes
	if a.leaf {
		r = walkLeaf(a, s, g.vocab.getTrie(), g.vocab.MaskWords(), sc)
	} else {
		c := g.cfgSingle(ref)
		if c < 0 {
			return &walkRes{}
		}
		r = g.walkCfg(c, []int32{0}, sc)
	}
	if sc.over || g.walkMem.Load()+r.mem > g.opts.maxCacheBytes() {
		return r
	}
	if ds.walk.CompareAndSwap(nil, r) {
		g.walkMem.Add(r.mem)
		return r
	}
	return ds.walk.Load()
}

// popFilter is a concrete string state's filter of an abstract walk's pops and ends:
// at most R more characters, at least minK, and no excluded key.
type popFilter struct {
	R, minK int
	excl    []int32 // sorted excluded pop nodes
	exclEnd []int32 // sorted tokens that spell the rest of an excluded key
	all     bool    // nothing filtered
}

// orEnds adds the tokens after which only the closing quote can follow, where this
// state can take it then: within the length bounds and not on an excluded key.
func (r *absRes) orEnds(mask []uint64, f *popFilter) {
	for i, t := range r.ends {
		if int(r.endNeed[i]) > f.R || int(r.endK[i]) < f.minK {
			continue
		}
		if len(f.exclEnd) > 0 {
			if _, found := slices.BinarySearch(f.exclEnd, t); found {
				continue
			}
		}
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// abstractWalk returns the walk from the abstract version of string state s. A
// state whose remaining length no need can exceed takes the walk without needs
// ("free"), which states that differ only in their distance to acceptance share.
func (g *Grammar) abstractWalk(a *automaton, s int32, sc *walkScratch) *absRes {
	as := a.abstractOf(s)
	if as < 0 {
		return &absRes{}
	}
	p := g.strParams(a, s).v
	free := (p.max < 0 || int64(p.max)-int64(p.count) >= a.needBound(g.vocab.getTrie())) && !g.opts.unsharedWalks
	ads := a.state(as)
	cache := &ads.absWalk
	if free {
		cache = &ads.absWalkFree
	}
	if r := cache.Load(); r != nil {
		return r
	}
	var r *absRes
	fresh, fast := true, false
	if free && !g.opts.plainStrings {
		r, fast = walkAnyContent(a, as, g.vocab.getTrie(), g.vocab.MaskWords(), sc)
	}
	if !fast {
		r, fresh = walkAbstract(a, as, g.vocab.getTrie(), g.vocab.MaskWords(), free, !g.opts.unsharedWalks, g.opts.maxCacheBytes(), sc)
	}
	if !sc.over && a.memBytes.Load()+r.mem < g.opts.maxCacheBytes() {
		if cache.CompareAndSwap(nil, r) && fresh {
			a.memBytes.Add(r.mem)
		}
		if x := cache.Load(); x != nil {
			return x
		}
	}
	return r
}

// strParams is what a concrete string state's masks need of it, computed once: its
// register (length bounds, count) and the pops and tokens its excluded keys rule out.
type strParams struct {
	v             auxVal
	excl, exclEnd []int32 // sorted (excludedPops)
}

// strParams returns the parameters of concrete string state s.
func (g *Grammar) strParams(a *automaton, s int32) *strParams {
	ds := a.state(s)
	if p := ds.params.Load(); p != nil {
		return p
	}
	v, kt := a.params(s)
	p := &strParams{v: v}
	if kt != nil {
		p.excl, p.exclEnd = g.excludedPops(kt, v.trie-1)
	}
	ds.params.CompareAndSwap(nil, p)
	return ds.params.Load()
}

// stringFilter computes the filter of concrete string state s.
func (g *Grammar) stringFilter(a *automaton, s int32, r *absRes, sc *walkScratch) popFilter {
	sp := g.strParams(a, s)
	p := &sp.v
	f := popFilter{R: 1 << 30, minK: -1 << 30}
	if p.max >= 0 {
		f.R = int(p.max - p.count)
	}
	if p.min > 0 {
		f.minK = int(p.min - p.count)
	}
	f.excl, f.exclEnd = sp.excl, sp.exclEnd
	f.all = f.R >= r.popMaxNeed && f.minK <= r.popMinK && len(f.excl) == 0
	return f
}

// excludedPops lists the pop nodes that would close the string on an excluded key:
// for each excluded key below trie node n, the vocabulary node spelling the rest of
// the key and the closing quote. ends lists the tokens that spell the rest of an
// excluded key without the quote.
func (g *Grammar) excludedPops(kt *keyTrie, n int32) (pops, ends []int32) {
	t := g.vocab.getTrie()
	var out []int32
	var rec func(kn int32, vn int32)
	rec = func(kn int32, vn int32) {
		if kt.nodes[kn].term {
			// the closing quote after vn
			if q := t.child(vn, '"'); q >= 0 {
				out = append(out, q)
			}
			if vn != 0 && t.tok[vn] >= 0 {
				ends = append(ends, t.tok[vn])
			}
		}
		for i, b := range kt.nodes[kn].bytes {
			if c := t.child(vn, b); c >= 0 {
				rec(kt.nodes[kn].to[i], c)
			}
		}
	}
	rec(n, 0)
	slices.Sort(out)
	slices.Sort(ends)
	return out, ends
}

func (f *popFilter) pass(r *absRes, i int) bool {
	if f.all {
		return true
	}
	if int(r.popNeed[i]) > f.R || int(r.popK[i]) < f.minK {
		return false
	}
	if len(f.excl) > 0 {
		if _, found := slices.BinarySearch(f.excl, r.pops[i]); found {
			return false
		}
	}
	return true
}

// levelIndexed continues pops (with their index) in the context of parent state r,
// adding tokens to mask; it returns the next level's pops (in sc.next).
func (g *Grammar) levelIndexed(pops []int32, ix *popIndex, pass func(int) bool, all bool, r int32, mask []uint64, sc *walkScratch) []int32 {
	t := g.vocab.getTrie()
	c := g.cfgSingle(r)
	next := sc.next[:0]
	if c < 0 {
		sc.next = next
		return next
	}
	if c&pfCont != 0 {
		if all && ix.tokBits != nil {
			for i, w := range ix.tokBits[:len(mask)] {
				mask[i] |= w
			}
		} else {
			for i, tk := range ix.popTok {
				if tk >= 0 && (all || pass(i)) {
					mask[tk>>6] |= 1 << (uint(tk) & 63)
				}
			}
		}
	}
	if c&pfAccept != 0 {
		for i, p := range pops {
			if all || pass(i) {
				next = append(next, p)
			}
		}
	}
	tv := viewOf(g.ctrans)
	row := tv.row(c >> pfShift)
	sc.toks = sc.toks[:0]
	sc.pops = sc.pops[:0]
	for b := 0; b < 256; b++ {
		ch := ix.child[b]
		if len(ch) == 0 {
			continue
		}
		col := int(g.cls[b])
		v := ld(&row[col])
		if v == tUnknown {
			if sc.overBudget() {
				break
			}
			v = g.cfgStepSlow(c>>pfShift, col)
		}
		if v < 0 {
			continue
		}
		par := ix.childParent[b]
		for j, n := range ch {
			if !all && !pass(int(par[j])) {
				continue
			}
			if v&pfCont != 0 && t.tok[n] >= 0 {
				sc.toks = append(sc.toks, t.tok[n])
			}
			if v&pfAccept != 0 {
				sc.pops = append(sc.pops, n)
			}
			if t.next[n] > n+1 {
				g.walkFrom(n, v, sc, &tv, t)
			}
		}
	}
	for _, tk := range sc.toks {
		mask[tk>>6] |= 1 << (uint(tk) & 63)
	}
	next = append(next, sc.pops...)
	slices.Sort(next)
	sc.next = next
	return next
}

type levelKey struct {
	h   uint64
	n   int
	r   int32
	res *walkRes
}

var hashSeed = maphash.MakeSeed()

// levelNext continues pops in the context of parent state r (cached by the pop list).
func (g *Grammar) levelNext(pops []int32, owner *walkRes, r int32, sc *walkScratch) *walkRes {
	var k levelKey
	if owner != nil {
		k = levelKey{res: owner, r: r}
	} else {
		var h maphash.Hash
		h.SetSeed(hashSeed)
		for _, p := range pops {
			var b [4]byte
			b[0], b[1], b[2], b[3] = byte(p), byte(p>>8), byte(p>>16), byte(p>>24)
			h.Write(b[:])
		}
		k = levelKey{h: h.Sum64(), n: len(pops), r: r}
	}
	if v, ok := g.levels.Load(k); ok {
		return v.(*walkRes)
	}
	c := g.cfgSingle(r)
	var nr *walkRes
	if c < 0 {
		nr = &walkRes{}
	} else {
		nr = g.walkCfg(c, pops, sc)
	}
	if sc.over || g.walkMem.Load()+nr.mem > g.opts.maxCacheBytes() {
		return nr
	}
	v, loaded := g.levels.LoadOrStore(k, nr)
	if !loaded {
		g.walkMem.Add(nr.mem)
	}
	return v.(*walkRes)
}

// orInto adds a result's tokens to mask.
func (r *walkRes) orInto(mask []uint64) {
	if r.bits != nil {
		b := r.bits[:len(mask)]
		for i, w := range b {
			mask[i] |= w
		}
		return
	}
	for _, t := range r.toks {
		mask[t>>6] |= 1 << (uint(t) & 63)
	}
}

// child returns the child of trie node n with byte b, or -1.
func (t *trie) child(n int32, b byte) int32 {
	for c := n + 1; c < t.next[n]; c = t.next[c] {
		if t.b[c] == b {
			return c
		}
		if t.b[c] > b {
			return -1
		}
	}
	return -1
}
