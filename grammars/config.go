package grammars

import (
	"cmp"
	"encoding/binary"
	"slices"
)

// A configuration is what a trie walk carries per trie node: the set of stacks the
// parse can be in, relative to the frame the walk started from. Stacks hold state refs
// (automaton index << refAutShift | DFA state), bottom first. The kernel is the set
// reached by the last byte; the closure adds the calls the tops can make and the
// returns of accepting tops. A configuration whose closure lets the bottom frame
// return is "popable": the walk records the trie node, and the next level continues
// it in the parent frame's context. Configurations are interned per grammar and their
// byte transitions are memoized in a lock-free table, so a walk is a table lookup per
// trie node.
type config struct {
	closed [][]int32
	flags  int32
}

func stackKey(st []int32, buf []byte) []byte {
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(st)))
	for _, r := range st {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(r))
	}
	return buf
}

// cfgIntern returns the packed id of the configuration with this kernel (tDead for
// an empty one). Caller holds g.cmu.
func (g *Grammar) cfgIntern(kernel [][]int32) int32 {
	if len(kernel) == 0 {
		return tDead
	}
	// the canonical kernel: stacks sorted (by length, then element by element) and
	// each once; its key is their stackKeys in that order
	uniq := append(g.kscratch[:0], kernel...)
	if len(uniq) > 1 {
		slices.SortFunc(uniq, func(a, b []int32) int {
			if c := cmp.Compare(len(a), len(b)); c != 0 {
				return c
			}
			return slices.Compare(a, b)
		})
		uniq = slices.CompactFunc(uniq, func(a, b []int32) bool { return slices.Equal(a, b) })
	}
	kb := g.kbuf[:0]
	for _, st := range uniq {
		kb = stackKey(st, kb)
	}
	g.kscratch, g.kbuf = uniq, kb
	if id, ok := g.cindex[string(kb)]; ok {
		return id
	}
	k := string(kb)
	uniq = slices.Clone(uniq)
	if int(g.cfgs.n) >= g.opts.maxConfigs() {
		g.failed.Store(true)
		return tDead
	}
	closed, flags, ok := g.cfgClosure(uniq)
	if !ok {
		g.failed.Store(true)
		return tDead
	}
	if len(closed) == 0 {
		g.cindex[k] = tDead
		return tDead
	}
	cf := &config{closed: closed, flags: flags}
	id := g.cfgs.push(cf)
	if row := g.ctrans.addRow(); row != id {
		panic("grammars: configuration table out of step")
	}
	// bytes no top can take are dead
	var eb byteSet
	for _, st := range closed {
		a, s := g.autOf(st[len(st)-1])
		x := &a.state(s).edgeBytes
		for w := range eb {
			eb[w] |= x[w]
		}
	}
	row := g.ctrans.row(id)
	for c := 0; c < g.ncls; c++ {
		if !eb.has(g.reps[c]) {
			row[c] = enc(tDead)
		}
	}
	p := id<<pfShift | flags
	g.cindex[k] = p
	mem := int64(len(k)) + 64 + int64(g.ncls)*4
	for _, st := range closed {
		mem += int64(len(st))*4 + 24
	}
	g.cfgMem.Add(mem)
	return p
}

// cfgClosure expands a kernel. Caller holds g.cmu.
func (g *Grammar) cfgClosure(kernel [][]int32) ([][]int32, int32, bool) {
	seen := map[string]struct{}{}
	work := append([][]int32(nil), kernel...)
	var closed [][]int32
	var flags int32
	var kb []byte
	limit := g.opts.maxStacks()
	for len(work) > 0 {
		st := work[len(work)-1]
		work = work[:len(work)-1]
		kb = stackKey(st, kb[:0])
		if _, ok := seen[string(kb)]; ok {
			continue
		}
		seen[string(kb)] = struct{}{}
		if len(closed) >= limit || len(st) > 4096 {
			return nil, 0, false
		}
		top := st[len(st)-1]
		a, s := g.autOf(top)
		ds := a.state(s)
		closed = append(closed, st)
		if ds.cont {
			flags |= pfCont
		}
		aid := top >> refAutShift
		for ci := range ds.calls {
			ret := a.callRet(s, ci)
			if ret < 0 {
				continue
			}
			callee := g.symStart(ds.calls[ci].sym)
			if callee < 0 {
				continue
			}
			ns := make([]int32, 0, len(st)+1)
			ns = append(ns, st[:len(st)-1]...)
			if !a.state(ret).finalOnly {
				ns = append(ns, aid<<refAutShift|ret)
			}
			ns = append(ns, callee)
			work = append(work, ns)
		}
		if ds.accept {
			if len(st) == 1 {
				flags |= pfAccept
			} else {
				work = append(work, st[:len(st)-1:len(st)-1])
			}
		}
	}
	return closed, flags, true
}

// cfgSingle returns the packed configuration {[ref]}.
func (g *Grammar) cfgSingle(ref int32) int32 {
	g.cmu.Lock()
	defer g.cmu.Unlock()
	return g.cfgIntern([][]int32{{ref}})
}

// cfgStepSlow computes a configuration transition.
func (g *Grammar) cfgStepSlow(c int32, col int) int32 {
	g.cmu.Lock()
	defer g.cmu.Unlock()
	if t := g.ctrans.get(c, col); t != tUnknown {
		return t
	}
	b := g.reps[col]
	cf := g.cfgs.at(c)
	var kern [][]int32
	for _, st := range cf.closed {
		top := st[len(st)-1]
		a, s := g.autOf(top)
		t := a.step(s, b)
		if t < 0 {
			continue
		}
		ns := make([]int32, len(st))
		copy(ns, st)
		ns[len(ns)-1] = top&^refStateMask | t>>pfShift
		kern = append(kern, ns)
	}
	t := g.cfgIntern(kern)
	g.ctrans.set(c, col, t)
	return t
}

// cfgStep returns the packed transition of configuration c on byte b.
func (g *Grammar) cfgStep(c int32, b byte) int32 {
	col := int(g.cls[b])
	if t := ld(&g.ctrans.row(c)[col]); t != tUnknown {
		return t
	}
	return g.cfgStepSlow(c, col)
}
