package tokenizer

import (
	"strings"
	"sync"
	"sync/atomic"
)

// mergeTable maps an adjacent pair of token ids to the rank of its merge and the id it
// merges into. Keys are left<<32|right; values rank<<32|merged. An open-addressing
// table with linear probing: it is read on every cache miss of every word, and a
// dedicated table of two uint64 arrays beats a Go map at this size (127k merges).
type mergeTable struct {
	keys []uint64 // 0 marks an empty slot; key 0 (pair 0,0) is kept in zeroVal
	vals []uint64
	mask uint64
	// pair (0,0) cannot use the empty marker; it is stored here.
	hasZero bool
	zeroVal uint64
}

func newMergeTable(n int) *mergeTable {
	size := 1
	for size < 2*n+2 {
		size <<= 1
	}
	return &mergeTable{keys: make([]uint64, size), vals: make([]uint64, size), mask: uint64(size - 1)}
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

func hashKey(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	return k
}

// put sets the merge of a pair; a later merge of the same pair overwrites the earlier,
// as HF's HashMap and the JS Map both do when tokenizer.json lists a pair twice.
func (t *mergeTable) put(a, b int32, rank uint32, merged int32) {
	k, v := pairKey(a, b), uint64(rank)<<32|uint64(uint32(merged))
	if k == 0 {
		t.hasZero, t.zeroVal = true, v
		return
	}
	for i := hashKey(k) & t.mask; ; i = (i + 1) & t.mask {
		if t.keys[i] == 0 || t.keys[i] == k {
			t.keys[i], t.vals[i] = k, v
			return
		}
	}
}

// get returns the rank and merged id of the pair (a, b), or ok=false.
func (t *mergeTable) get(a, b int32) (rank uint32, merged int32, ok bool) {
	k := pairKey(a, b)
	if k == 0 {
		return uint32(t.zeroVal >> 32), int32(uint32(t.zeroVal)), t.hasZero
	}
	for i := hashKey(k) & t.mask; ; i = (i + 1) & t.mask {
		switch t.keys[i] {
		case k:
			v := t.vals[i]
			return uint32(v >> 32), int32(uint32(v)), true
		case 0:
			return 0, 0, false
		}
	}
}

const noRank = ^uint32(0)

// appendWord appends the BPE ids of one pre-token (raw bytes) to ids.
func (b *BPE) appendWord(ids []int32, w string) []int32 {
	switch len(w) {
	case 1:
		return append(ids, b.byteID[w[0]])
	case 2, 3:
		// One or two pair lookups in the merge table beat a string-keyed map lookup.
		return b.mergeTiny(ids, w)
	}
	if cached, ok := b.cache.get(w); ok {
		return append(ids, cached...)
	}
	start := len(ids)
	if len(w) <= smallWord {
		ids = b.mergeSmall(ids, w)
	} else {
		ids = b.mergeHeap(ids, w)
	}
	b.cache.put(w, ids[start:])
	return ids
}

// mergeTiny is mergeSmall for words of two or three bytes, unrolled.
func (b *BPE) mergeTiny(ids []int32, w string) []int32 {
	x, y := b.byteID[w[0]], b.byteID[w[1]]
	if len(w) == 2 {
		if _, m, ok := b.merges.get(x, y); ok {
			return append(ids, m)
		}
		return append(ids, x, y)
	}
	z := b.byteID[w[2]]
	r1, m1 := b.pairRank(x, y)
	r2, m2 := b.pairRank(y, z)
	switch {
	case r1 == noRank && r2 == noRank:
		return append(ids, x, y, z)
	case r1 <= r2: // the left pair wins ties
		if _, m, ok := b.merges.get(m1, z); ok {
			return append(ids, m)
		}
		return append(ids, m1, z)
	default:
		if _, m, ok := b.merges.get(x, m2); ok {
			return append(ids, m)
		}
		return append(ids, x, m2)
	}
}

// smallWord is the longest word merged with the quadratic scan; longer words use the
// heap. Both implement the same rule (lowest rank first, leftmost on ties, as HF's
// Word::merge_all); the scan is faster for the short words that are nearly all of them.
const smallWord = 48

// mergeSmall merges w by repeatedly taking the lowest-ranked adjacent pair, leftmost
// among equals. It works in place on three small stack arrays: the symbols, and the
// rank and result of merging each symbol with its right neighbour.
func (b *BPE) mergeSmall(ids []int32, w string) []int32 {
	var symBuf [smallWord]int32
	var rankBuf [smallWord]uint32
	var mergedBuf [smallWord]int32
	n := len(w)
	sym, rank, merged := symBuf[:n], rankBuf[:n], mergedBuf[:n]
	for i := 0; i < n; i++ {
		sym[i] = b.byteID[w[i]]
	}
	for i := 0; i+1 < n; i++ {
		rank[i], merged[i] = b.pairRank(sym[i], sym[i+1])
	}
	rank[n-1] = noRank
	for n > 1 {
		best := -1
		br := noRank
		for i := 0; i+1 < n; i++ {
			if rank[i] < br {
				br, best = rank[i], i
			}
		}
		if best < 0 {
			break
		}
		sym[best] = merged[best]
		copy(sym[best+1:n-1], sym[best+2:n])
		copy(rank[best+1:n-1], rank[best+2:n])
		copy(merged[best+1:n-1], merged[best+2:n])
		n--
		rank[n-1] = noRank
		if best+1 < n {
			rank[best], merged[best] = b.pairRank(sym[best], sym[best+1])
		} else {
			rank[best] = noRank
		}
		if best > 0 {
			rank[best-1], merged[best-1] = b.pairRank(sym[best-1], sym[best])
		}
	}
	return append(ids, sym[:n]...)
}

func (b *BPE) pairRank(x, y int32) (uint32, int32) {
	r, m, ok := b.merges.get(x, y)
	if !ok {
		return noRank, 0
	}
	return r, m
}

// heapSym is a symbol of a long word: a doubly linked list over the initial positions,
// so a position keeps its index when its neighbours merge into it.
type heapSym struct {
	id         int32
	prev, next int32 // -1 at the ends
	dead       bool
}

// heapPair is a candidate merge of the symbol at pos with its right neighbour. Entries
// go stale when either side changes; they are checked when popped. The order (rank,
// then position) is packed into one integer so that a comparison is one instruction.
type heapPair struct {
	key    uint64 // rank<<32 | pos
	merged int32
}

func newHeapPair(rank uint32, pos int32, merged int32) heapPair {
	return heapPair{key: uint64(rank)<<32 | uint64(uint32(pos)), merged: merged}
}

func (p heapPair) pos() int32 { return int32(uint32(p.key)) }

// pairHeap is a binary min-heap of candidate merges (by rank, then position).
type pairHeap []heapPair

func (h *pairHeap) push(p heapPair) {
	*h = append(*h, p)
	q := *h
	for i := len(q) - 1; i > 0; {
		parent := (i - 1) / 2
		if q[i].key >= q[parent].key {
			break
		}
		q[i], q[parent] = q[parent], q[i]
		i = parent
	}
}

func (h *pairHeap) pop() heapPair {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].key < q[m].key {
			m = l
		}
		if r < len(q) && q[r].key < q[m].key {
			m = r
		}
		if m == i {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	*h = q
	return top
}

// mergeHeap is mergeSmall's rule with a binary heap of candidate pairs, O(n log n).
func (b *BPE) mergeHeap(ids []int32, w string) []int32 {
	n := len(w)
	syms := make([]heapSym, n)
	for i := 0; i < n; i++ {
		syms[i] = heapSym{id: b.byteID[w[i]], prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[n-1].next = -1
	h := make(pairHeap, 0, n)
	for i := 0; i+1 < n; i++ {
		if r, m, ok := b.merges.get(syms[i].id, syms[i+1].id); ok {
			h.push(newHeapPair(r, int32(i), m))
		}
	}
	for len(h) > 0 {
		p := h.pop()
		pos := p.pos()
		s := &syms[pos]
		if s.dead || s.next < 0 {
			continue
		}
		// Stale if either side has merged since the pair was pushed: the pair now at
		// pos must still merge into the same id. (A stale pair cannot pass: merging
		// only lengthens the symbols, so the pair now at pos spells a longer token.)
		right := &syms[s.next]
		if _, m, ok := b.merges.get(s.id, right.id); !ok || m != p.merged {
			continue
		}
		s.id = p.merged
		right.dead = true
		s.next = right.next
		if s.next >= 0 {
			syms[s.next].prev = pos
			if r, m, ok := b.merges.get(s.id, syms[s.next].id); ok {
				h.push(newHeapPair(r, pos, m))
			}
		}
		if s.prev >= 0 {
			if r, m, ok := b.merges.get(syms[s.prev].id, s.id); ok {
				h.push(newHeapPair(r, s.prev, m))
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// wordCache remembers the ids of words already merged. Text repeats its words, so after
// a short warm-up nearly every word is a cache hit.
//
// Hits take no lock: each shard publishes an immutable snapshot map through an atomic
// pointer (the read-mostly scheme of sync.Map, without its interface boxing, which
// would allocate for every string key). New words go to a locked dirty map; once the
// dirty hits add up to a quarter of the shard, the two are merged into a new snapshot,
// so the copying is amortized over the lookups that asked for it. Each shard has a
// byte budget: when it is spent the shard starts over, which bounds memory
// (16 × 1 MiB) on adversarial input at the cost of some re-merging.
type wordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards      = 16
	cacheShardBudget = 1 << 20 // bytes of keys and ids per shard
	cacheMaxWord     = 4096    // longer words are merged every time
)

type cacheShard struct {
	read atomic.Pointer[map[string][]int32]

	mu     sync.Mutex
	dirty  map[string][]int32 // entries not in read
	misses int                // lookups that found their word in dirty
	used   int                // bytes in read and dirty
}

// shard picks a shard from a few bytes of the word: cheaper than hashing it twice (the
// map hashes it again) and spread enough for the handful of shards.
func (c *wordCache) shard(w string) *cacheShard {
	h := uint(len(w))*31 + uint(w[0])*7 + uint(w[len(w)-1])
	return &c.shards[h%cacheShards]
}

func (c *wordCache) get(w string) ([]int32, bool) {
	if len(w) > cacheMaxWord {
		return nil, false
	}
	s := c.shard(w)
	if m := s.read.Load(); m != nil {
		if v, ok := (*m)[w]; ok {
			return v, true
		}
	}
	s.mu.Lock()
	v, ok := s.dirty[w]
	if ok {
		s.misses++
		if m := s.read.Load(); s.misses > (len(s.dirty)+lenMap(m))/4 {
			s.promote(m)
		}
	}
	s.mu.Unlock()
	return v, ok
}

func lenMap(m *map[string][]int32) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// promote publishes read+dirty as the new snapshot; s.mu is held.
func (s *cacheShard) promote(old *map[string][]int32) {
	m := make(map[string][]int32, lenMap(old)+len(s.dirty))
	if old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	for k, v := range s.dirty {
		m[k] = v
	}
	s.read.Store(&m)
	s.dirty = nil
	s.misses = 0
}

func (c *wordCache) put(w string, ids []int32) {
	if len(w) > cacheMaxWord {
		return
	}
	// Copy both: w points into the caller's text (keeping it alive would pin the whole
	// input), and ids into the caller's output slice.
	k := strings.Clone(w)
	v := append([]int32(nil), ids...)
	cost := len(k) + 4*len(v) + 64 // 64: the map entry and slice headers, roughly
	s := c.shard(w)
	s.mu.Lock()
	if s.used+cost > cacheShardBudget {
		s.read.Store(nil)
		s.dirty, s.misses, s.used = nil, 0, 0
	}
	if s.dirty == nil {
		s.dirty = make(map[string][]int32)
	}
	s.dirty[k] = v
	s.used += cost
	s.mu.Unlock()
}
