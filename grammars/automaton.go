package grammars

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// The automaton layer. Every rule body is compiled (Thompson) to an NFA over bytes
// whose edges are byte sets, epsilon moves and calls of other symbols; nodes may carry
// a guard or an effect on a small per-item register ("aux": a member bitset and count
// for objects, a counter for arrays, a position in an exclusion trie for keys). An
// automaton is determinized lazily: a DFA state is an interned set of (node, aux)
// items, and transitions are computed on first use and stored in a lock-free table.

type nedge struct {
	set   byteSet
	to    int32
	track bool // advance the exclusion trie by the byte
}

type nnode struct {
	edges  []nedge
	eps    []int32
	call   int32 // symbol called from here, or -1
	ret    int32 // node after the call
	accept bool
	op     auxOp // guard or effect applied when an item arrives here
	// charStart marks a character boundary of a string body (a gCharLT node): DFA
	// states keep such items, and a state holding one is "at a boundary"
	charStart bool
	// univ marks the character start of a search's tail (any characters to the end
	// of the string: a gCharLT node with arg 1); see subsume
	univ bool
	// anyLoop marks the character start of a loop over any characters (a search's
	// head or tail: gCharLT arg 2 or 1); see walkAnyContent
	anyLoop bool
}

// keyTrie holds strings that an exclusion-tracked region must not spell exactly.
type keyTrie struct {
	nodes []ktNode
}

type ktNode struct {
	bytes []byte
	to    []int32
	term  bool
}

func newKeyTrie(keys [][]byte) *keyTrie {
	t := &keyTrie{nodes: []ktNode{{}}}
	for _, k := range keys {
		n := int32(0)
		for _, b := range k {
			nx := int32(-1)
			for i, c := range t.nodes[n].bytes {
				if c == b {
					nx = t.nodes[n].to[i]
					break
				}
			}
			if nx < 0 {
				t.nodes = append(t.nodes, ktNode{})
				nx = int32(len(t.nodes) - 1)
				t.nodes[n].bytes = append(t.nodes[n].bytes, b)
				t.nodes[n].to = append(t.nodes[n].to, nx)
			}
			n = nx
		}
		t.nodes[n].term = true
	}
	return t
}

func (t *keyTrie) key() string {
	var sb []byte
	for _, nd := range t.nodes {
		sb = append(sb, byte(len(nd.bytes)))
		sb = append(sb, nd.bytes...)
		for _, x := range nd.to {
			sb = binary.LittleEndian.AppendUint32(sb, uint32(x))
		}
		if nd.term {
			sb = append(sb, 1)
		} else {
			sb = append(sb, 0)
		}
	}
	return string(sb)
}

func (t *keyTrie) step(n int32, b byte) int32 {
	for i, c := range t.nodes[n].bytes {
		if c == b {
			return t.nodes[n].to[i]
		}
	}
	return -1
}

type item struct {
	node int32
	aux  int32
}

// auxVal is the register an item carries. trie: 0 not tracking, >0 trie node+1, -1
// diverged from every excluded string. min/max bound a string's length (-1: none).
// An abstract register ignores counts and tries: mask walks from abstract states are
// shared by every length bound and excluded-key set, and filtered per state.
type auxVal struct {
	bits     []uint64
	count    int32
	trieID   int32
	trie     int32
	min, max int32
	abstract bool
}

func (v *auxVal) key() string {
	b := make([]byte, 0, 24+8*len(v.bits))
	if v.abstract {
		b = append(b, 'A')
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(v.min))
	b = binary.LittleEndian.AppendUint32(b, uint32(v.max))
	b = binary.LittleEndian.AppendUint32(b, uint32(v.count))
	b = binary.LittleEndian.AppendUint32(b, uint32(v.trieID))
	b = binary.LittleEndian.AppendUint32(b, uint32(v.trie))
	n := len(v.bits)
	for n > 0 && v.bits[n-1] == 0 {
		n--
	}
	for _, w := range v.bits[:n] {
		b = binary.LittleEndian.AppendUint64(b, w)
	}
	return string(b)
}

// total is the number of members (bits set plus counted extras).
func (v *auxVal) total() int32 {
	n := v.count
	for _, w := range v.bits {
		n += int32(bits.OnesCount64(w))
	}
	return n
}

func (v *auxVal) bit(i int32) bool {
	w := int(i >> 6)
	return w < len(v.bits) && v.bits[w]&(1<<(uint(i)&63)) != 0
}

// dstate is a DFA state.
type dstate struct {
	items  []item
	accept bool
	// structural: no item has a byte edge or a call (accepting states only)
	finalOnly bool
	hasEdges  bool
	cont      bool         // some byte transition leads to a live item
	boundary  bool         // an item sits at a character boundary (charStart)
	edgeBytes byteSet      // bytes some item has an edge on
	closable  bool         // an item can take an unescaped quote (a string's closing quote)
	tracked   bool         // an item has a tracked edge (string content can go on)
	trieLive  bool         // an item follows an exclusion trie (its register's trie > 0)
	dist      int32        // string automata: the fewest characters to acceptance over the items
	absState  atomic.Int32 // the abstract version of this state (tUnknown until computed)
	calls     []dcall      // sorted by symbol
	// lazily computed: the bytes with a live transition
	liveOnce atomic.Bool
	live     byteSet
	// level-1 mask caches
	walk    atomic.Pointer[walkRes]
	absWalk atomic.Pointer[absRes]
	// the walk without needs, for states without a maximum length
	absWalkFree atomic.Pointer[absRes]
	// string states: their parameters (strParams)
	params atomic.Pointer[strParams]
}

type dcall struct {
	sym int32
	ret atomic.Int32 // DFA state after the call returns, tUnknown until computed
}

const maxAuxValues = 1 << 20

// distInf marks an NFA node from which acceptance is unreachable.
const distInf = 1 << 30

// computeDist fills a.dist: for every NFA node, the fewest fCharInc nodes entered on a
// path from it to an accepting node (a 0-1 BFS over the reversed graph; entering an
// fCharInc node costs one).
func (a *automaton) computeDist() {
	n := len(a.nfa)
	// reversed edges in compressed form
	cnt := make([]int32, n+1)
	for i := range a.nfa {
		nd := &a.nfa[i]
		for _, e := range nd.edges {
			cnt[e.to+1]++
		}
		for _, t := range nd.eps {
			cnt[t+1]++
		}
		if nd.call >= 0 {
			cnt[nd.ret+1]++
		}
	}
	for i := 1; i <= n; i++ {
		cnt[i] += cnt[i-1]
	}
	rev := make([]int32, cnt[n])
	fill := append([]int32(nil), cnt[:n]...)
	add := func(to int32, from int) {
		rev[fill[to]] = int32(from)
		fill[to]++
	}
	for i := range a.nfa {
		nd := &a.nfa[i]
		for _, e := range nd.edges {
			add(e.to, i)
		}
		for _, t := range nd.eps {
			add(t, i)
		}
		if nd.call >= 0 {
			add(nd.ret, i)
		}
	}
	dist := make([]int32, n)
	var cur, next []int32
	for i := range dist {
		dist[i] = distInf
		if a.nfa[i].accept {
			dist[i] = 0
			cur = append(cur, int32(i))
		}
	}
	// level by level: a node reached at the current distance joins this level's
	// queue, one past it the next level's; a queued node whose distance has since
	// dropped is skipped
	for level := int32(0); len(cur) > 0; level++ {
		for h := 0; h < len(cur); h++ {
			v := cur[h]
			if dist[v] != level {
				continue
			}
			w := int32(0)
			if a.nfa[v].op.kind == fCharInc {
				w = 1
			}
			for _, u := range rev[cnt[v]:cnt[v+1]] {
				if d := level + w; d < dist[u] {
					dist[u] = d
					if w == 0 {
						cur = append(cur, u)
					} else {
						next = append(next, u)
					}
				}
			}
		}
		cur, next = next, cur[:0]
	}
	a.dist = dist
}

// needBound is a bound on every need an abstract walk of a records: a token
// completes at most t.maxDepth characters, a character start needs one more, and
// the state after it at most the largest finite distance to acceptance.
func (a *automaton) needBound(t *trie) int64 {
	if v := a.maxDist.Load(); v > 0 {
		return int64(t.maxDepth) + 1 + int64(v-1)
	}
	var m int32
	for _, d := range a.dist {
		if d < distInf {
			m = max(m, d)
		}
	}
	a.maxDist.Store(m + 1)
	return int64(t.maxDepth) + 1 + int64(m)
}

// errLimit reports a lazily-grown structure that hit its configured bound.
var errLimit = errors.New("grammar state limit exceeded")

type automaton struct {
	name  string
	nfa   []nnode
	sets  [][]uint64 // bitsets for gHasBits
	tries []*keyTrie
	leaf  bool

	cls  [256]uint8
	ncls int
	reps []byte // a representative byte per class

	maxStates int

	mu       sync.Mutex
	states   ptrStore[dstate]
	index    map[string]int32
	trans    *lazyTable
	auxIdx   map[string]int32
	auxVals  []auxVal
	starts   map[int32]int32 // NFA node -> DFA state
	failed   atomic.Bool
	memBytes atomic.Int64
	nstates  atomic.Int32
	trieIdx  map[string]int32
	// abstractable automata (JSON strings) take their mask walks from abstract states
	abstractable bool
	// subsumes: a string leaf with univ nodes, whose states drop the items a univ
	// item subsumes (subsume); univ0 is the first univ node
	subsumes bool
	univ0    int32
	// dist (abstractable automata): per NFA node, the fewest characters (fCharInc
	// effects) on a path to acceptance; distInf where there is none
	dist    []int32
	maxDist atomic.Int32 // the largest finite dist + 1 (0: not computed yet)
	incSeen bool         // a.mu: an fCharInc node was entered (during stepSlow)
	// closure's scratch (a.mu): a generation mark and aux per NFA node, its stack and
	// output
	clGen   uint32
	clMark  []uint32
	clAux   []int32
	clStack []item
	clOut   []item
	// lazy is set for a grammar's main automaton: rule NFAs are built on first use
	lazy *lazyRules
	// an automaton with one class per byte for its tries: the classes of its edges
	// (edgeGroups[edgeCls[b]] holds the bytes of b's class; edgeReps one byte each),
	// which a state that follows no trie cannot tell apart
	edgeCls    [256]uint8
	edgeGroups [][]uint8
	edgeReps   []byte
	// the transitions of abstract states (which follow no trie) by absCls: the
	// edge classes where the automaton keeps one class per byte, else trans and cls
	absTrans *lazyTable
	absCls   [256]uint8
	// abstractable automata: walks kept below the root's children (walkshare.go)
	subOnce sync.Once
	sub     atomic.Pointer[subMemo]
}

type lazyRules struct {
	bodies map[int32]*expr // a.mu
	prod   func(int32) bool
	limit  int
	nodes  map[int32]int32 // symbol -> start node
}

// ruleNode returns the start node of rule sym, building its NFA on first use.
func (a *automaton) ruleNode(sym int32) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n, ok := a.lazy.nodes[sym]; ok {
		return n
	}
	body := a.lazy.bodies[sym]
	if body == nil {
		return -1
	}
	b := &nfaBuilder{nodes: a.nfa, limit: a.lazy.limit}
	b.reserve(body.size(a.lazy.limit) + 1)
	lo := len(b.nodes)
	st := b.newNode()
	en := b.build(body, st)
	if b.err != nil {
		a.failed.Store(true)
		a.lazy.nodes[sym] = -1
		return -1
	}
	b.nodes[en].accept = true
	trimRange(b.nodes, lo, a.lazy.prod)
	a.nfa = b.nodes
	a.lazy.nodes[sym] = st
	a.memBytes.Add(int64(len(b.nodes)-lo) * 64)
	return st
}

func newAutomaton(name string, nodes []nnode, sets [][]uint64, tries []*keyTrie, leaf bool, maxStates int) *automaton {
	a := &automaton{name: name, nfa: nodes, sets: sets, tries: tries, leaf: leaf, maxStates: maxStates}
	if nodes == nil {
		// rules come later: one class per byte
		a.ncls = 256
		a.reps = make([]byte, 256)
		for c := 0; c < 256; c++ {
			a.cls[c] = uint8(c)
			a.reps[c] = byte(c)
		}
	} else {
		a.computeClasses()
	}
	a.states.init()
	a.index = map[string]int32{}
	a.trans = newLazyTable(a.ncls)
	a.absTrans, a.absCls = a.trans, a.cls
	if a.edgeGroups != nil {
		a.absTrans, a.absCls = newLazyTable(len(a.edgeReps)), a.edgeCls
	}
	a.auxIdx = map[string]int32{}
	a.starts = map[int32]int32{}
	zero := auxVal{}
	a.auxVals = append(a.auxVals, zero)
	a.auxIdx[zero.key()] = 0
	return a
}

func unsafeString(w []uint64) string {
	b := make([]byte, 8*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return string(b)
}

// computeClasses partitions the bytes into classes no edge (and no exclusion trie)
// distinguishes.
func (a *automaton) computeClasses() {
	// an automaton that tracks exclusion tries steps them with the actual byte, and
	// tries can be added to a shared automaton later: give it one class per byte
	for i := range a.nfa {
		for _, e := range a.nfa[i].edges {
			if e.track {
				a.ncls = 256
				a.reps = make([]byte, 256)
				for c := 0; c < 256; c++ {
					a.cls[c] = uint8(c)
					a.reps[c] = byte(c)
				}
				a.computeEdgeClasses()
				return
			}
		}
	}
	// distinct edge sets; a byte's class is the set of edge sets holding it
	list := distinctEdgeSets(a.nfa)
	idx := make(map[byteSet]int, len(list))
	for i, st := range list {
		idx[st] = i
	}
	for _, t := range a.tries {
		for _, nd := range t.nodes {
			for _, b := range nd.bytes {
				var st byteSet
				st.add(b)
				if _, ok := idx[st]; !ok {
					idx[st] = len(list)
					list = append(list, st)
				}
			}
		}
	}
	words := (len(list) + 63) / 64
	sig := make([]uint64, 256*words)
	for si := range list {
		st := &list[si]
		for w := 0; w < 4; w++ {
			x := st[w]
			for x != 0 {
				b := w*64 + bits.TrailingZeros64(x)
				x &= x - 1
				sig[b*words+si/64] |= 1 << (uint(si) & 63)
			}
		}
	}
	var cls [256]int32
	n := int32(0)
	m := make(map[string]int32, 32)
	for c := 0; c < 256; c++ {
		k := unsafeString(sig[c*words : (c+1)*words])
		id, ok := m[k]
		if !ok {
			id = n
			n++
			m[k] = id
		}
		cls[c] = id
	}
	a.ncls = int(n)
	a.reps = make([]byte, n)
	done := make([]bool, n)
	for c := 0; c < 256; c++ {
		a.cls[c] = uint8(cls[c])
		if !done[cls[c]] {
			a.reps[cls[c]] = byte(c)
			done[cls[c]] = true
		}
	}
}

// distinctEdgeSets lists the byte sets of the edges of nodes, each once (a small cache
// of recent sets in front of the map: unrolled repetitions repeat a few sets many
// times).
func distinctEdgeSets(nodes []nnode) []byteSet {
	var cache [64]int32 // index+1 in list, by a hash of the set
	idx := map[byteSet]int{}
	var list []byteSet
	for i := range nodes {
		for j := range nodes[i].edges {
			st := &nodes[i].edges[j].set
			h := (st[0]*0x9E3779B97F4A7C15 ^ st[1]*0xC2B2AE3D27D4EB4F ^ st[2]*0x165667B19E3779F9 ^ st[3]) >> 58
			if k := cache[h]; k > 0 && list[k-1] == *st {
				continue
			}
			id, ok := idx[*st]
			if !ok {
				id = len(list)
				idx[*st] = id
				list = append(list, *st)
			}
			cache[h] = int32(id + 1)
		}
	}
	return list
}

// computeEdgeClasses groups the bytes of an automaton that keeps one class per byte
// (for its exclusion tries) into the classes no edge tells apart: a state none of
// whose items follows a trie steps the same on every byte of such a class.
func (a *automaton) computeEdgeClasses() {
	list := distinctEdgeSets(a.nfa)
	m := map[string]int{}
	sig := make([]byte, len(list))
	for c := 0; c < 256; c++ {
		for i := range list {
			sig[i] = 0
			if list[i].has(byte(c)) {
				sig[i] = 1
			}
		}
		id, ok := m[string(sig)]
		if !ok {
			id = len(m)
			m[string(sig)] = id
			a.edgeGroups = append(a.edgeGroups, nil)
			a.edgeReps = append(a.edgeReps, byte(c))
		}
		a.edgeCls[c] = uint8(id)
		a.edgeGroups[id] = append(a.edgeGroups[id], uint8(c))
	}
}

func (a *automaton) state(id int32) *dstate { return a.states.at(id) }

// internAux returns the id of v. Caller holds a.mu.
func (a *automaton) internAux(v auxVal) int32 {
	k := v.key()
	if id, ok := a.auxIdx[k]; ok {
		return id
	}
	if len(a.auxVals) >= maxAuxValues {
		a.failed.Store(true)
		return 0
	}
	id := int32(len(a.auxVals))
	a.auxVals = append(a.auxVals, v)
	a.auxIdx[k] = id
	return id
}

// enter applies node n's guard or effect to aux; ok is false when a guard fails, or
// when the item could no longer finish its string within the length bound (a string
// automaton: count + the characters still needed at n exceed max). Pruning such
// items keeps a bounded string from walking into a dead end: a pattern that still
// needs k characters is refused k characters before the bound, not at it. Caller
// holds a.mu.
func (a *automaton) enter(n int32, aux int32) (int32, bool) {
	r, ok := a.enterOp(n, aux)
	if ok && a.dist != nil {
		if v := &a.auxVals[r]; !v.abstract && v.max >= 0 && int64(v.count)+int64(a.dist[n]) > int64(v.max) {
			return r, false
		}
	}
	return r, ok
}

func (a *automaton) enterOp(n int32, aux int32) (int32, bool) {
	op := a.nfa[n].op
	if op.kind == auxNone {
		return aux, true
	}
	v := &a.auxVals[aux]
	switch op.kind {
	case gNotBit:
		return aux, !v.bit(op.arg)
	case gHasBits:
		for i, w := range a.sets[op.arg] {
			var have uint64
			if i < len(v.bits) {
				have = v.bits[i]
			}
			if have&w != w {
				return aux, false
			}
		}
		return aux, true
	case gCountLT:
		return aux, v.total() < op.arg
	case gUnionLT:
		n := v.count
		set := a.sets[op.arg]
		for i := 0; i < max(len(set), len(v.bits)); i++ {
			var w uint64
			if i < len(set) {
				w = set[i]
			}
			if i < len(v.bits) {
				w |= v.bits[i]
			}
			n += int32(bits.OnesCount64(w))
		}
		return aux, n < op.arg2
	case gCountGE:
		return aux, v.total() >= op.arg
	case gTrieOK:
		if v.trie > 0 && a.tries[v.trieID].nodes[v.trie-1].term {
			return aux, false
		}
		return aux, true
	case gTrieStart:
		nv := *v
		nv.trieID = op.arg
		nv.trie = 1
		return a.internAux(nv), true
	case fSetBit:
		if v.bit(op.arg) {
			return aux, false
		}
		nv := *v
		w := int(op.arg >> 6)
		nb := make([]uint64, max(len(v.bits), w+1))
		copy(nb, v.bits)
		nb[w] |= 1 << (uint(op.arg) & 63)
		nv.bits = nb
		return a.internAux(nv), true
	case fInc:
		if v.count >= op.arg {
			return aux, true
		}
		nv := *v
		nv.count++
		return a.internAux(nv), true
	case fResetCount:
		nv := *v
		nv.count = 0
		return a.internAux(nv), true
	case gCharLT:
		return aux, v.abstract || v.max < 0 || v.count < v.max
	case gCharGE:
		return aux, v.abstract || v.count >= v.min
	case fCharInc:
		a.incSeen = true
		if v.abstract || v.max < 0 && v.min <= 0 {
			return aux, true
		}
		if c := max(v.min, v.max); v.count >= c {
			return aux, true
		}
		nv := *v
		nv.count++
		return a.internAux(nv), true
	}
	return aux, true
}

func (a *automaton) trieStep(aux int32, b byte) int32 {
	v := &a.auxVals[aux]
	if v.trie <= 0 {
		return aux
	}
	nx := a.tries[v.trieID].step(v.trie-1, b)
	nv := *v
	if nx < 0 {
		nv.trie = -1
	} else {
		nv.trie = nx + 1
	}
	return a.internAux(nv)
}

// closure expands seeds (items that already entered their node) along epsilon moves
// and returns the sorted set of items that matter (byte edges, calls, accepting).
// Caller holds a.mu.
func (a *automaton) closure(seeds []item) []item {
	// seen: a node marked in this generation with the aux it was reached with; the
	// rare second aux at a node goes to a map
	a.clGen++
	if a.clGen == 0 {
		clear(a.clMark)
		a.clGen = 1
	}
	if len(a.clMark) < len(a.nfa) {
		n := len(a.nfa) + len(a.nfa)/4
		a.clMark = append(a.clMark, make([]uint32, n-len(a.clMark))...)
		a.clAux = append(a.clAux, make([]int32, n-len(a.clAux))...)
	}
	var extra map[item]struct{}
	stack := append(a.clStack[:0], seeds...)
	out := a.clOut[:0]
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if a.clMark[it.node] != a.clGen {
			a.clMark[it.node] = a.clGen
			a.clAux[it.node] = it.aux
		} else if a.clAux[it.node] == it.aux {
			continue
		} else {
			if extra == nil {
				extra = map[item]struct{}{}
			}
			if _, ok := extra[it]; ok {
				continue
			}
			extra[it] = struct{}{}
		}
		nd := &a.nfa[it.node]
		if len(nd.edges) > 0 || nd.call >= 0 || nd.accept || nd.charStart {
			out = append(out, it)
		}
		for _, t := range nd.eps {
			if aux, ok := a.enter(t, it.aux); ok {
				stack = append(stack, item{t, aux})
			}
		}
	}
	a.clStack, a.clOut = stack, out
	slices.SortFunc(out, cmpItem)
	return slices.Clone(out)
}

// subsume drops from a closed item set of a string leaf (a.subsumes) the items that
// an item at a univ node with the same register subsumes. In a string leaf every item
// of a state has read the same characters; the content between the quotes is made of
// whole JSON characters, each under the length guard and count of its register, and
// every path leaves it through the same tail (the minimum length and excluded-key
// guards, then the closing quote). An item at the start of a search's tail (any
// characters, then that tail) therefore accepts every continuation that an item of
// the content with the same register accepts: the others are dropped, except the
// items of the univ item's own closure and those past the content (untracked edges,
// acceptance). Every univ node starts the same future (each search's tail ends the
// content), so a univ item stands for all: univ items become items at the first univ
// node. The language of the state is unchanged, and the states after a match of a
// search (for an anyOf of searches, of any of them; for an alternation, of any
// branch) become one state, walked once, however the partial matches still in flight
// differ. Caller holds a.mu.
func (a *automaton) subsume(items []item) []item {
	if !a.subsumes {
		return items
	}
	var seeds []item
	for _, it := range items {
		if a.nfa[it.node].univ && !slices.Contains(seeds, item{a.univ0, it.aux}) {
			seeds = append(seeds, item{a.univ0, it.aux})
		}
	}
	if len(seeds) == 0 {
		return items
	}
	out := a.closure(seeds)
	for _, it := range items {
		if !a.inContent(it, seeds) {
			out = append(out, it)
		}
	}
	slices.SortFunc(out, cmpItem)
	return slices.CompactFunc(out, func(x, y item) bool { return x == y })
}

// inContent reports whether item it is inside the content of a string leaf (at a
// character start, or at a node that reads bytes through tracked edges only) with
// the register of one of seeds.
func (a *automaton) inContent(it item, seeds []item) bool {
	nd := &a.nfa[it.node]
	if nd.accept || nd.call >= 0 || !nd.charStart && len(nd.edges) == 0 {
		return false
	}
	for _, e := range nd.edges {
		if !e.track {
			return false
		}
	}
	for _, s := range seeds {
		if s.aux == it.aux {
			return true
		}
	}
	return false
}

func cmpItem(x, y item) int {
	if x.node != y.node {
		return cmp.Compare(x.node, y.node)
	}
	return cmp.Compare(x.aux, y.aux)
}

// intern returns the DFA state of a closed item set (tDead for the empty set).
// Caller holds a.mu.
func (a *automaton) intern(items []item) int32 {
	if len(items) == 0 {
		return tDead
	}
	kb := make([]byte, 0, len(items)*8)
	for _, it := range items {
		kb = binary.LittleEndian.AppendUint32(kb, uint32(it.node))
		kb = binary.LittleEndian.AppendUint32(kb, uint32(it.aux))
	}
	k := string(kb)
	if id, ok := a.index[k]; ok {
		return id
	}
	if a.maxStates > 0 && int(a.states.n) >= a.maxStates {
		a.failed.Store(true)
		return tDead
	}
	ds := &dstate{items: items}
	callSet := map[int32]bool{}
	for _, it := range items {
		nd := &a.nfa[it.node]
		if nd.accept {
			ds.accept = true
		}
		if len(nd.edges) > 0 {
			ds.hasEdges = true
		}
		if nd.charStart {
			ds.boundary = true
		}
		for _, e := range nd.edges {
			if !e.track && e.set.has('"') {
				ds.closable = true
			}
		}
		if nd.call >= 0 && !callSet[nd.call] {
			callSet[nd.call] = true
			ds.calls = append(ds.calls, dcall{sym: nd.call})
		}
	}
	sort.Slice(ds.calls, func(i, j int) bool { return ds.calls[i].sym < ds.calls[j].sym })
	for i := range ds.calls {
		ds.calls[i].ret.Store(tUnknown)
	}
	ds.finalOnly = ds.accept && !ds.hasEdges && len(ds.calls) == 0
	ds.dist = distInf
	for _, it := range items {
		if a.dist != nil {
			ds.dist = min(ds.dist, a.dist[it.node])
		}
		for _, e := range a.nfa[it.node].edges {
			if e.track {
				ds.tracked = true
			}
		}
	}
	ds.absState.Store(tUnknown)
	for _, it := range items {
		if a.auxVals[it.aux].trie > 0 {
			ds.trieLive = true
		}
	}
	for _, it := range items {
		for _, e := range a.nfa[it.node].edges {
			if _, ok := a.enter(e.to, it.aux); ok {
				ds.cont = true
				break
			}
		}
		if ds.cont {
			break
		}
	}
	id := a.states.push(ds)
	a.nstates.Store(id + 1)
	row := a.trans.addRow()
	if row != id {
		panic("grammars: automaton table out of step")
	}
	// classes no edge of the state takes are dead: fill them now
	var eb byteSet
	for _, it := range items {
		for _, e := range a.nfa[it.node].edges {
			for w := range eb {
				eb[w] |= e.set[w]
			}
		}
	}
	ds.edgeBytes = eb
	r := a.trans.row(id)
	for c := 0; c < a.ncls; c++ {
		if !eb.has(a.reps[c]) {
			r[c] = enc(tDead)
		}
	}
	if a.absTrans != a.trans {
		if a.absTrans.addRow() != id {
			panic("grammars: automaton table out of step")
		}
		r := a.absTrans.row(id)
		for c, b := range a.edgeReps {
			if !eb.has(b) {
				r[c] = enc(tDead)
			}
		}
	}
	a.index[k] = id
	a.memBytes.Add(int64(len(items)*8 + len(k) + 96 + a.ncls*4 + 300))
	return id
}

// start returns the DFA state for NFA node n (a rule start).
func (a *automaton) start(n int32) int32 {
	return a.startWith(n, nil)
}

// startWith starts at node n with an initial register (string parameters).
func (a *automaton) startWith(n int32, v *auxVal) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	aux := int32(0)
	if v != nil {
		aux = a.internAux(*v)
	}
	key := n
	if aux != 0 {
		// starts with a register are rare; do not memoize them in starts
		var seeds []item
		if ax, ok := a.enter(n, aux); ok {
			seeds = append(seeds, item{n, ax})
		}
		return a.intern(a.subsume(a.closure(seeds)))
	}
	if s, ok := a.starts[key]; ok {
		return s
	}
	var seeds []item
	if ax, ok := a.enter(n, 0); ok {
		seeds = append(seeds, item{n, ax})
	}
	s := a.intern(a.subsume(a.closure(seeds)))
	a.starts[key] = s
	return s
}

// addTrie registers an exclusion trie (deduplicated by content) and returns its id.
func (a *automaton) addTrie(t *keyTrie) int32 {
	k := t.key()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.trieIdx == nil {
		a.trieIdx = map[string]int32{}
	}
	if id, ok := a.trieIdx[k]; ok {
		return id
	}
	a.tries = append(a.tries, t)
	id := int32(len(a.tries) - 1)
	a.trieIdx[k] = id
	return id
}

// abstractOf returns the abstract version of state s (same items, abstract register).
func (a *automaton) abstractOf(s int32) int32 {
	ds := a.state(s)
	if v := ds.absState.Load(); v != tUnknown {
		return v
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if v := ds.absState.Load(); v != tUnknown {
		return v
	}
	abs := a.internAux(auxVal{abstract: true})
	items := make([]item, len(ds.items))
	for i, it := range ds.items {
		items[i] = item{it.node, abs}
	}
	sort.Slice(items, func(i, j int) bool { return items[i].node < items[j].node })
	k := 0
	for i := range items {
		if i > 0 && items[i] == items[k-1] {
			continue
		}
		items[k] = items[i]
		k++
	}
	v := a.intern(items[:k])
	ds.absState.Store(v)
	return v
}

// params returns the string parameters of state s (its first item's register) and
// its exclusion trie, if any.
func (a *automaton) params(s int32) (auxVal, *keyTrie) {
	ds := a.state(s)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(ds.items) == 0 {
		return auxVal{}, nil
	}
	v := a.auxVals[ds.items[0].aux]
	var t *keyTrie
	if v.trie > 0 && int(v.trieID) < len(a.tries) {
		t = a.tries[v.trieID]
	}
	return v, t
}

// Transition table entries pack the target state with two flags.
const (
	pfCont     = 1  // the target can consume another byte
	pfAccept   = 2  // the target is accepting (automata) / can pop its bottom (configs)
	pfBoundary = 4  // the target is at a character boundary (string automata)
	pfInc      = 8  // the transition completed a character (string automata)
	pfClosable = 16 // the target can take the closing quote (string automata)
	pfTracked  = 32 // the target has a tracked edge (string content can go on)
	pfShift    = 6
)

func (a *automaton) pack(id int32) int32 {
	if id < 0 {
		return id
	}
	ds := a.state(id)
	p := id << pfShift
	if ds.cont {
		p |= pfCont
	}
	if ds.accept {
		p |= pfAccept
	}
	if ds.boundary {
		p |= pfBoundary
	}
	if ds.closable {
		p |= pfClosable
	}
	if ds.tracked {
		p |= pfTracked
	}
	return p
}

// step returns the packed transition of state s on byte b (tDead if none).
func (a *automaton) step(s int32, b byte) int32 {
	c := int(a.cls[b])
	if t := a.trans.get(s, c); t != tUnknown {
		return t
	}
	return a.stepSlow(s, c)
}

func (a *automaton) stepSlow(s int32, c int) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.trans.get(s, c); t != tUnknown {
		return t
	}
	b := a.reps[c]
	ds := a.state(s)
	a.incSeen = false
	var seeds []item
	for _, it := range ds.items {
		nd := &a.nfa[it.node]
		for i := range nd.edges {
			e := &nd.edges[i]
			if !e.set.has(b) {
				continue
			}
			aux := it.aux
			if e.track {
				aux = a.trieStep(aux, b)
			}
			if aux2, ok := a.enter(e.to, aux); ok {
				seeds = append(seeds, item{e.to, aux2})
			}
		}
	}
	t := tDead
	if len(seeds) > 0 {
		cl := a.subsume(a.closure(seeds))
		inc := a.incSeen
		t = a.pack(a.intern(cl))
		if inc && t >= 0 {
			t |= pfInc
		}
	}
	a.trans.set(s, c, t)
	if a.edgeGroups != nil && !ds.trieLive {
		// every byte of the class steps the same
		for _, b2 := range a.edgeGroups[a.edgeCls[b]] {
			a.trans.set(s, int(a.cls[b2]), t)
		}
		a.absTrans.set(s, int(a.edgeCls[b]), t)
	}
	return t
}

// absStepSlow computes the transition of abstract state s on class col of absCls.
func (a *automaton) absStepSlow(s int32, col int) int32 {
	if a.absTrans == a.trans {
		return a.stepSlow(s, col)
	}
	t := a.stepSlow(s, int(a.cls[a.edgeReps[col]]))
	a.absTrans.set(s, col, t)
	return t
}

// callRet returns the state after state s's call of sym returns.
func (a *automaton) callRet(s int32, ci int) int32 {
	ds := a.state(s)
	if t := ds.calls[ci].ret.Load(); t != tUnknown {
		return t
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := ds.calls[ci].ret.Load(); t != tUnknown {
		return t
	}
	sym := ds.calls[ci].sym
	var seeds []item
	for _, it := range ds.items {
		nd := &a.nfa[it.node]
		if nd.call == sym {
			if aux, ok := a.enter(nd.ret, it.aux); ok {
				seeds = append(seeds, item{nd.ret, aux})
			}
		}
	}
	t := a.intern(a.closure(seeds))
	ds.calls[ci].ret.Store(t)
	return t
}

// liveBytes returns the bytes on which s has a transition.
func (a *automaton) liveBytes(s int32) *byteSet {
	ds := a.state(s)
	if ds.liveOnce.Load() {
		return &ds.live
	}
	var live byteSet
	if ds.hasEdges {
		for c := 0; c < a.ncls; c++ {
			if a.step(s, a.reps[c]) >= 0 {
				for b := 0; b < 256; b++ {
					if int(a.cls[b]) == c {
						live.add(byte(b))
					}
				}
			}
		}
	}
	a.mu.Lock()
	if !ds.liveOnce.Load() {
		ds.live = live
		ds.liveOnce.Store(true)
	}
	a.mu.Unlock()
	return &ds.live
}

func (a *automaton) String() string {
	return fmt.Sprintf("automaton %s (%d nodes, %d classes, %d states)", a.name, len(a.nfa), a.ncls, a.states.n)
}
