package grammars

import "fmt"

// nfaBuilder compiles expressions to NFA nodes (Thompson construction).
type nfaBuilder struct {
	nodes []nnode
	limit int
	err   error
	track bool
	// slabs that a node's first edge and first epsilon moves are carved from (most
	// nodes have one edge or up to two moves; more are appended as usual)
	edgeSlab []nedge
	epsSlab  []int32
}

// addEdge adds a byte edge to node from.
func (b *nfaBuilder) addEdge(from int32, e nedge) {
	nd := &b.nodes[from]
	if nd.edges == nil {
		if len(b.edgeSlab) == 0 {
			b.edgeSlab = make([]nedge, 1024)
		}
		nd.edges = b.edgeSlab[:0:1]
		b.edgeSlab = b.edgeSlab[1:]
	}
	nd.edges = append(nd.edges, e)
}

// reserve makes room for about n more nodes, doubling the capacity at least: appends
// alone grow a large slice by a quarter at a time, copying a lazily built NFA (and its
// pointers, under the garbage collector's write barrier) many times while masks wait.
func (b *nfaBuilder) reserve(n int) {
	if n <= 0 || cap(b.nodes)-len(b.nodes) >= n || b.limit > 0 && n > b.limit {
		// (an estimate past the limit: the build fails before it needs the room)
		return
	}
	nn := make([]nnode, len(b.nodes), max(2*cap(b.nodes), len(b.nodes)+n))
	copy(nn, b.nodes)
	b.nodes = nn
}

func (b *nfaBuilder) newNode() int32 {
	if b.err == nil && b.limit > 0 && len(b.nodes) >= b.limit {
		b.err = &LimitError{What: "automaton nodes", Limit: b.limit}
	}
	if len(b.nodes) == cap(b.nodes) {
		b.reserve(64)
	}
	b.nodes = append(b.nodes, nnode{call: -1, ret: -1})
	return int32(len(b.nodes) - 1)
}

func (b *nfaBuilder) addEps(from, to int32) {
	nd := &b.nodes[from]
	if nd.eps == nil {
		if len(b.epsSlab) < 2 {
			b.epsSlab = make([]int32, 2048)
		}
		nd.eps = b.epsSlab[:0:2]
		b.epsSlab = b.epsSlab[2:]
	}
	nd.eps = append(nd.eps, to)
}

// build appends e's fragment starting at node from and returns its end node.
func (b *nfaBuilder) build(e *expr, from int32) int32 {
	if b.err != nil {
		return from
	}
	switch e.op {
	case eEmpty:
		return from
	case eNone:
		return b.newNode() // unreachable end
	case eBytes:
		cur := from
		for _, c := range e.lit {
			n := b.newNode()
			var s byteSet
			s.add(c)
			b.addEdge(cur, nedge{set: s, to: n, track: b.track})
			cur = n
		}
		return cur
	case eSet:
		n := b.newNode()
		b.addEdge(from, nedge{set: e.set, to: n, track: b.track})
		return n
	case eSeq:
		cur := from
		for _, s := range e.subs {
			cur = b.build(s, cur)
		}
		return cur
	case eAlt:
		end := b.newNode()
		for _, s := range e.subs {
			st := b.newNode()
			b.addEps(from, st)
			en := b.build(s, st)
			b.addEps(en, end)
		}
		return end
	case eRep:
		sub := e.subs[0]
		cur := from
		for i := 0; i < e.min; i++ {
			cur = b.build(sub, cur)
			if b.err != nil {
				return cur
			}
		}
		if e.max < 0 {
			loop := b.newNode()
			b.addEps(cur, loop)
			body := b.newNode()
			b.addEps(loop, body)
			en := b.build(sub, body)
			b.addEps(en, loop)
			return loop
		}
		end := b.newNode()
		for i := e.min; i < e.max; i++ {
			b.addEps(cur, end)
			st := b.newNode()
			b.addEps(cur, st)
			cur = b.build(sub, st)
			if b.err != nil {
				return cur
			}
		}
		b.addEps(cur, end)
		return end
	case eCall:
		n := b.newNode()
		b.addEps(from, n)
		r := b.newNode()
		b.nodes[n].call = e.ref
		b.nodes[n].ret = r
		return r
	case eGuard, eEffect:
		n := b.newNode()
		b.nodes[n].op = e.aux
		b.nodes[n].charStart = e.aux.kind == gCharLT
		b.nodes[n].univ = e.aux.kind == gCharLT && e.aux.arg == 1
		b.nodes[n].anyLoop = e.aux.kind == gCharLT && (e.aux.arg == 1 || e.aux.arg == 2)
		b.addEps(from, n)
		return n
	case eTrack:
		old := b.track
		b.track = true
		en := b.build(e.subs[0], from)
		b.track = old
		return en
	}
	b.err = fmt.Errorf("grammars: unknown expression op %d", e.op)
	return from
}

// LimitError reports a compile or run bound that an input exceeded.
type LimitError struct {
	What  string
	Limit int
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("more than %d %s (raise the limit in grammars.Options)", e.Limit, e.What)
}
