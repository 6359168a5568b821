package grammars

import "fmt"

// nfaBuilder compiles expressions to NFA nodes (Thompson construction).
type nfaBuilder struct {
	nodes []nnode
	limit int
	err   error
	track bool
}

func (b *nfaBuilder) newNode() int32 {
	if b.err == nil && b.limit > 0 && len(b.nodes) >= b.limit {
		b.err = &LimitError{What: "automaton nodes", Limit: b.limit}
	}
	b.nodes = append(b.nodes, nnode{call: -1, ret: -1})
	return int32(len(b.nodes) - 1)
}

func (b *nfaBuilder) addEps(from, to int32) {
	b.nodes[from].eps = append(b.nodes[from].eps, to)
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
			b.nodes[cur].edges = append(b.nodes[cur].edges, nedge{set: s, to: n, track: b.track})
			cur = n
		}
		return cur
	case eSet:
		n := b.newNode()
		b.nodes[from].edges = append(b.nodes[from].edges, nedge{set: e.set, to: n, track: b.track})
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
