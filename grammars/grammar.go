package grammars

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// symbol is a named rule of a grammar under construction.
type symbol struct {
	name     string
	body     *expr
	noInline bool // keep calls to it (shared leaves such as the JSON string)
	defined  bool
	// parameterized string leaves: the start register and the excluded keys
	params       *auxVal
	trie         *keyTrie
	abstractable bool
	leafKey      string // precomputed leaf registry key (body has no sets or tries)
}

// grammarBuilder collects the rules a front end produces.
type grammarBuilder struct {
	syms   []*symbol
	names  map[string]int32
	suffix map[string]int
}

func newGrammarBuilder() *grammarBuilder {
	return &grammarBuilder{names: map[string]int32{}, suffix: map[string]int{}}
}

// sym returns the id of the named symbol, creating an undefined one if needed.
func (gb *grammarBuilder) sym(name string) int32 {
	if id, ok := gb.names[name]; ok {
		return id
	}
	id := int32(len(gb.syms))
	gb.syms = append(gb.syms, &symbol{name: name})
	gb.names[name] = id
	return id
}

func (gb *grammarBuilder) define(id int32, body *expr) {
	gb.syms[id].body = body
	gb.syms[id].defined = true
}

// add defines a fresh symbol named after name (made unique).
func (gb *grammarBuilder) add(name string, body *expr) int32 {
	n := name
	for {
		if _, ok := gb.names[n]; !ok {
			break
		}
		gb.suffix[name]++
		n = name + "#" + strconv.Itoa(gb.suffix[name]+1)
	}
	id := gb.sym(n)
	gb.define(id, body)
	return id
}

// symInfo locates a compiled symbol.
type symInfo struct {
	name     string
	aut      int32 // automaton index
	node     int32 // start node in that automaton's NFA (-1: built on first use)
	start    atomic.Int32
	startAux *auxVal
	resolved atomic.Bool // aut, node and startAux are set
}

const refAutShift = 22
const refStateMask = 1<<refAutShift - 1

// maxAuts is the number of automata one grammar can use (the bits above refAutShift).
const maxAuts = 1 << (31 - refAutShift)

// Grammar is a compiled grammar: immutable from the outside, safe to share between
// goroutines and matchers. Its automata and mask caches grow lazily as matchers visit
// new states (for JSON Schemas, even the translation of subschemas), bounded by the
// Options it was compiled with.
type Grammar struct {
	vocab    *Vocab
	auts     [maxAuts]atomic.Pointer[automaton]
	nauts    int32 // under the compile or lazy lock
	autIdx   map[*automaton]int32
	syms     ptrStore[symInfo] // grows while a lazy front end translates
	root     int32
	check    func(doc []byte) error // root-level semantic check, or nil
	checkOn  atomic.Bool            // the check applies (lazy grammars turn it on as they find inexact keywords)
	warnings []string
	kind     string
	source   string
	opts     Options
	lazy     *lazyJSON

	// configurations (sets of relative stacks) for trie walks
	cmu    sync.Mutex
	cfgs   ptrStore[config]
	cindex map[string]int32
	ctrans *lazyTable
	// cfgIntern's scratch (g.cmu)
	kscratch [][]int32
	kbuf     []byte
	cls      [256]uint8
	ncls     int
	reps     []byte
	failed   atomic.Bool
	cfgMem   atomic.Int64
	walkMem  atomic.Int64
	levels   sync.Map // levelKey -> *walkRes
}

func (g *Grammar) aut(i int32) *automaton { return g.auts[i].Load() }

func (g *Grammar) autOf(ref int32) (*automaton, int32) {
	return g.auts[ref>>refAutShift].Load(), ref & refStateMask
}

func (g *Grammar) sym(s int32) *symInfo { return g.syms.at(s) }

// symStart returns the (unpacked) state ref where symbol s starts.
func (g *Grammar) symStart(s int32) int32 {
	si := g.sym(s)
	if v := si.start.Load(); v != tUnknown {
		return v
	}
	if !si.resolved.Load() {
		if g.lazy == nil || !g.lazy.resolve(g, s) {
			si.start.Store(tDead)
			return tDead
		}
	}
	a := g.aut(si.aut)
	node := si.node
	if a.lazy != nil {
		node = a.ruleNode(s)
		if node < 0 {
			si.start.Store(tDead)
			return tDead
		}
	}
	st := a.startWith(node, si.startAux)
	v := tDead
	if st >= 0 {
		v = si.aut<<refAutShift | st
	}
	si.start.Store(v)
	return v
}

// runCheck applies the semantic check, if there is one and it is on.
func (g *Grammar) runCheck(doc []byte) error {
	if g.check == nil || !g.checkOn.Load() {
		return nil
	}
	return g.check(doc)
}

// Warnings lists what the compiler approximated or checks only semantically (for a
// lazily translated schema: in the parts translated so far).
func (g *Grammar) Warnings() []string {
	if g.lazy != nil {
		return g.lazy.warnings()
	}
	return g.warnings
}

// Kind is "regex", "json-schema" or "ebnf".
func (g *Grammar) Kind() string { return g.kind }

// Vocab returns the vocabulary the grammar was compiled for.
func (g *Grammar) Vocab() *Vocab { return g.vocab }

// err reports whether a lazily grown structure hit its bound.
func (g *Grammar) err() error {
	if g.failed.Load() {
		if g.lazy != nil {
			if err := g.lazy.error(); err != nil {
				return err
			}
		}
		return errLimit
	}
	for i := int32(0); i < maxAuts; i++ {
		a := g.auts[i].Load()
		if a == nil {
			break
		}
		if a.failed.Load() {
			return errLimit
		}
	}
	return nil
}

// newGrammar makes an empty grammar; main is its (lazily built) rule automaton.
func (c *Compiler) newGrammar(kind string, root int32, check func([]byte) error) *Grammar {
	g := &Grammar{vocab: c.vocab, root: root, check: check, kind: kind, opts: c.opts, autIdx: map[*automaton]int32{}}
	g.syms.init()
	g.cfgs.init()
	g.cindex = map[string]int32{}
	return g
}

// addSym appends the symInfo of the next symbol. Caller holds the compile or lazy lock.
func (g *Grammar) addSym(name string) {
	si := &symInfo{name: name, aut: -1}
	si.start.Store(tUnknown)
	g.syms.push(si)
}

// registerAut returns a's index in the grammar (adding it), or -1 when full.
func (g *Grammar) registerAut(a *automaton) int32 {
	if i, ok := g.autIdx[a]; ok {
		return i
	}
	if g.nauts >= maxAuts {
		return -1
	}
	i := g.nauts
	g.auts[i].Store(a)
	g.autIdx[a] = i
	g.nauts++
	return i
}

// place decides where symbol s lives given its final body: call-free bodies become
// (shared) leaf automata, the others rules of the main automaton (index 0). Caller
// holds the compile or lazy lock.
func (c *Compiler) place(g *Grammar, s int32, sy *symbol, body *expr, tries []*keyTrie, sets [][]uint64) error {
	si := g.sym(s)
	main := g.aut(0)
	if !hasCalls(body) && g.nauts < maxAuts {
		var a *automaton
		var err error
		if sy.leafKey != "" && body == sy.body {
			a, err = c.leafAutomatonKeyed(sy.name, sy.leafKey, body, nil, nil, sy.abstractable)
		} else {
			lb, lt, ls := localize(body, tries, sets)
			a, err = c.leafAutomaton(sy.name, lb, lt, ls, sy.abstractable)
		}
		if err != nil {
			return err
		}
		if ai := g.registerAut(a); ai >= 0 {
			si.aut, si.node = ai, 0
			if sy.params != nil || sy.trie != nil {
				p := auxVal{max: -1}
				if sy.params != nil {
					p = *sy.params
				}
				if sy.trie != nil {
					p.trieID = a.addTrie(sy.trie)
					p.trie = 1
				}
				si.startAux = &p
			}
			si.resolved.Store(true)
			return nil
		}
	}
	// a rule of the main automaton, its NFA built when a parse first enters it
	si.aut, si.node = 0, -1
	main.mu.Lock()
	main.lazy.bodies[s] = body
	if sy.params != nil || sy.trie != nil {
		p := auxVal{max: -1}
		if sy.params != nil {
			p = *sy.params
		}
		if sy.trie != nil {
			main.tries = append(main.tries, sy.trie)
			p.trieID = int32(len(main.tries) - 1)
			p.trie = 1
		}
		si.startAux = &p
	}
	main.sets = sets
	main.mu.Unlock()
	si.resolved.Store(true)
	return nil
}

// exprCalls appends the symbols e calls.
func exprCalls(e *expr, out map[int32]bool) {
	switch e.op {
	case eCall:
		out[e.ref] = true
	case eSeq, eAlt, eRep, eTrack:
		for _, s := range e.subs {
			exprCalls(s, out)
		}
	}
}

func hasCalls(e *expr) bool {
	switch e.op {
	case eCall:
		return true
	case eSeq, eAlt, eRep, eTrack:
		for _, s := range e.subs {
			if hasCalls(s) {
				return true
			}
		}
	}
	return false
}

// hasAux reports whether e uses the item register (such rules keep their own frame).
func hasAux(e *expr) bool {
	switch e.op {
	case eGuard, eEffect, eTrack:
		return true
	case eSeq, eAlt, eRep:
		for _, s := range e.subs {
			if hasAux(s) {
				return true
			}
		}
	}
	return false
}

// substitute replaces calls for which repl returns non-nil.
func substitute(e *expr, repl func(int32) *expr) *expr {
	switch e.op {
	case eCall:
		if r := repl(e.ref); r != nil {
			return r
		}
		return e
	case eSeq, eAlt, eRep, eTrack:
		changed := false
		subs := make([]*expr, len(e.subs))
		for i, s := range e.subs {
			subs[i] = substitute(s, repl)
			if subs[i] != s {
				changed = true
			}
		}
		if !changed {
			return e
		}
		switch e.op {
		case eSeq:
			return eSeqOf(subs...)
		case eAlt:
			return eAltOf(subs...)
		case eRep:
			return eRepOf(subs[0], e.min, e.max)
		case eTrack:
			return eTrackOf(subs[0])
		}
	}
	return e
}

// exprKey writes a canonical text of a call-free expression (the key that shares leaf
// automata between grammars).
func exprKey(e *expr, sb *strings.Builder) {
	switch e.op {
	case eEmpty:
		sb.WriteString("e")
	case eNone:
		sb.WriteString("n")
	case eBytes:
		sb.WriteString("b")
		sb.WriteString(strconv.Quote(string(e.lit)))
	case eSet:
		sb.WriteString("s")
		sb.WriteString(e.set.String())
	case eSeq, eAlt, eTrack:
		sb.WriteString([]string{eSeq: "(", eAlt: "|(", eTrack: "t("}[e.op])
		for i, s := range e.subs {
			if i > 0 {
				sb.WriteByte(',')
			}
			exprKey(s, sb)
		}
		sb.WriteByte(')')
	case eRep:
		fmt.Fprintf(sb, "r%d,%d(", e.min, e.max)
		exprKey(e.subs[0], sb)
		sb.WriteByte(')')
	case eGuard, eEffect:
		fmt.Fprintf(sb, "a%d.%d.%d", e.aux.kind, e.aux.arg, e.aux.arg2)
	case eCall:
		fmt.Fprintf(sb, "c%d", e.ref)
	}
}

// buildInput is everything compile needs besides the rules.
type buildInput struct {
	gb    *grammarBuilder
	root  int32
	sets  [][]uint64 // gHasBits sets (grammar automaton)
	tries []*keyTrie // exclusion tries, shared by index
	check func([]byte) error
	kind  string
	src   string
	warn  []string
}

// compile turns rules into automata: small call-free rules are inlined, unproductive
// alternatives removed, left recursion rejected, call-free rules become (shared) leaf
// automata and the rest one grammar automaton.
func (c *Compiler) compile(in *buildInput, dl *deadline) (*Grammar, error) {
	gb := in.gb
	n := len(gb.syms)
	for i, s := range gb.syms {
		if !s.defined {
			return nil, fmt.Errorf("rule %q is used but not defined", s.name)
		}
		_ = i
	}
	opts := c.opts
	// 1. inline small call-free symbols (repeat: inlining can make callers call-free)
	bodies := make([]*expr, n)
	for i, s := range gb.syms {
		bodies[i] = s.body
	}
	for pass := 0; pass < 8; pass++ {
		if err := dl.check(); err != nil {
			return nil, err
		}
		inl := make([]bool, n)
		any := false
		for i := range bodies {
			if int32(i) != in.root && !gb.syms[i].noInline && !hasCalls(bodies[i]) && !hasAux(bodies[i]) && bodies[i].size(opts.inlineLimit()) <= opts.inlineLimit() {
				inl[i] = true
				any = true
			}
		}
		if !any {
			break
		}
		changed := false
		for i := range bodies {
			nb := substitute(bodies[i], func(r int32) *expr {
				if inl[r] && r != int32(i) {
					return bodies[r]
				}
				return nil
			})
			if nb != bodies[i] {
				changed = true
				bodies[i] = nb
			}
		}
		if !changed {
			break
		}
	}
	// 2. productivity (fixpoint), then drop calls of unproductive symbols
	prod := make([]bool, n)
	var isProd func(e *expr) bool
	isProd = func(e *expr) bool {
		switch e.op {
		case eNone:
			return false
		case eCall:
			return prod[e.ref]
		case eSeq, eTrack:
			for _, s := range e.subs {
				if !isProd(s) {
					return false
				}
			}
			return true
		case eAlt:
			for _, s := range e.subs {
				if isProd(s) {
					return true
				}
			}
			return false
		case eRep:
			return e.min == 0 || isProd(e.subs[0])
		}
		return true
	}
	for changed := true; changed; {
		changed = false
		for i := range bodies {
			if !prod[i] && isProd(bodies[i]) {
				prod[i] = true
				changed = true
			}
		}
	}
	if !prod[in.root] {
		return nil, fmt.Errorf("the grammar matches nothing (rule %q derives no string)", gb.syms[in.root].name)
	}
	for i := range bodies {
		bodies[i] = substitute(bodies[i], func(r int32) *expr {
			if !prod[r] {
				return exprNoneV
			}
			return nil
		})
	}
	// reachable symbols from the root
	reach := make([]bool, n)
	var order []int32
	var visit func(int32)
	visit = func(s int32) {
		if reach[s] {
			return
		}
		reach[s] = true
		order = append(order, s)
		cs := map[int32]bool{}
		exprCalls(bodies[s], cs)
		keys := make([]int32, 0, len(cs))
		for k := range cs {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
		for _, k := range keys {
			visit(k)
		}
	}
	visit(in.root)
	// 3. nullability and left recursion
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for _, s := range order {
			if !nullable[s] && bodies[s].nullable(func(r int32) bool { return nullable[r] }) {
				nullable[s] = true
				changed = true
			}
		}
	}
	left := make(map[int32][]int32)
	for _, s := range order {
		cs := map[int32]bool{}
		leftCalls(bodies[s], func(r int32) bool { return nullable[r] }, cs)
		for k := range cs {
			left[s] = append(left[s], k)
		}
		sort.Slice(left[s], func(i, j int) bool { return left[s][i] < left[s][j] })
	}
	if cyc := findCycle(order, left); cyc != nil {
		names := make([]string, len(cyc))
		for i, s := range cyc {
			names[i] = gb.syms[s].name
		}
		return nil, fmt.Errorf("left recursion: %s (rewrite it with repetition, e.g. a ::= b (op b)*)", strings.Join(names, " -> "))
	}
	if err := dl.check(); err != nil {
		return nil, err
	}
	// 4. automata: call-free reachable symbols are leaves; the others are rules of one
	// main automaton whose NFA is built rule by rule when a parse first enters a rule
	// (big grammars pay only for what is used)
	g := c.newGrammar(in.kind, in.root, in.check)
	g.warnings = in.warn
	g.source = in.src
	g.checkOn.Store(in.check != nil)
	for i := 0; i < n; i++ {
		g.addSym(gb.syms[i].name)
	}
	main := newAutomaton("main", nil, in.sets, in.tries, false, opts.maxStates())
	main.lazy = &lazyRules{bodies: map[int32]*expr{}, prod: func(s int32) bool { return prod[s] }, limit: opts.maxNFANodes(), nodes: map[int32]int32{}}
	g.registerAut(main)
	total := 0
	for _, s := range order {
		if hasCalls(bodies[s]) {
			total += bodies[s].size(opts.maxNFANodes())
			if total > opts.maxNFANodes() {
				return nil, &LimitError{What: "automaton nodes", Limit: opts.maxNFANodes()}
			}
		}
		if err := c.place(g, s, gb.syms[s], bodies[s], in.tries, in.sets); err != nil {
			return nil, err
		}
		if err := dl.check(); err != nil {
			return nil, err
		}
	}
	// 5. configuration classes: the common refinement of every automaton's classes
	g.computeClasses()
	g.ctrans = newLazyTable(g.ncls)
	if g.symStart(in.root) < 0 {
		return nil, fmt.Errorf("the grammar matches nothing")
	}
	return g, nil
}

// leftCalls collects the symbols e can call before consuming a byte.
func leftCalls(e *expr, nullable func(int32) bool, out map[int32]bool) bool {
	switch e.op {
	case eCall:
		out[e.ref] = true
		return nullable(e.ref)
	case eSeq:
		for _, s := range e.subs {
			if !leftCalls(s, nullable, out) {
				return false
			}
		}
		return true
	case eAlt:
		nl := false
		for _, s := range e.subs {
			if leftCalls(s, nullable, out) {
				nl = true
			}
		}
		return nl
	case eRep:
		nl := leftCalls(e.subs[0], nullable, out)
		return nl || e.min == 0
	case eTrack:
		return leftCalls(e.subs[0], nullable, out)
	case eEmpty, eGuard, eEffect:
		return true
	}
	return false
}

// findCycle returns a cycle of the graph, or nil.
func findCycle(order []int32, edges map[int32][]int32) []int32 {
	color := map[int32]int{}
	var stack []int32
	var cyc []int32
	var dfs func(int32) bool
	dfs = func(s int32) bool {
		color[s] = 1
		stack = append(stack, s)
		for _, t := range edges[s] {
			if color[t] == 1 {
				for i, x := range stack {
					if x == t {
						cyc = append(append([]int32(nil), stack[i:]...), t)
						return true
					}
				}
			}
			if color[t] == 0 && dfs(t) {
				return true
			}
		}
		stack = stack[:len(stack)-1]
		color[s] = 2
		return false
	}
	for _, s := range order {
		if color[s] == 0 && dfs(s) {
			return cyc
		}
	}
	return nil
}

// trimNFA removes edges into nodes from which no accepting node is reachable.
func trimNFA(nodes []nnode, callOK func(int32) bool) {
	trimRange(nodes, 0, callOK)
}

// trimRange trims the fragment nodes[lo:] (whose edges stay inside it).
func trimRange(all []nnode, lo int, callOK func(int32) bool) {
	nodes := all[lo:]
	base := int32(lo)
	n := len(nodes)
	// reverse edges in compressed form
	cnt := make([]int32, n+1)
	for i := range nodes {
		nd := &nodes[i]
		for _, e := range nd.edges {
			cnt[e.to-base+1]++
		}
		for _, t := range nd.eps {
			cnt[t-base+1]++
		}
		if nd.call >= 0 && callOK(nd.call) {
			cnt[nd.ret-base+1]++
		}
	}
	for i := 1; i <= n; i++ {
		cnt[i] += cnt[i-1]
	}
	rev := make([]int32, cnt[n])
	fill := append([]int32(nil), cnt[:n]...)
	add := func(to, from int32) {
		rev[fill[to]] = from
		fill[to]++
	}
	for i := range nodes {
		nd := &nodes[i]
		for _, e := range nd.edges {
			add(e.to-base, int32(i))
		}
		for _, t := range nd.eps {
			add(t-base, int32(i))
		}
		if nd.call >= 0 && callOK(nd.call) {
			add(nd.ret-base, int32(i))
		}
	}
	live := make([]bool, n)
	var stack []int32
	for i := range nodes {
		if nodes[i].accept {
			live[i] = true
			stack = append(stack, int32(i))
		}
	}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, p := range rev[cnt[x]:cnt[x+1]] {
			if !live[p] {
				live[p] = true
				stack = append(stack, p)
			}
		}
	}
	for i := range nodes {
		nd := &nodes[i]
		k := 0
		for _, e := range nd.edges {
			if live[e.to-base] {
				nd.edges[k] = e
				k++
			}
		}
		nd.edges = nd.edges[:k]
		k = 0
		for _, t := range nd.eps {
			if live[t-base] {
				nd.eps[k] = t
				k++
			}
		}
		nd.eps = nd.eps[:k]
		if nd.call >= 0 && (!callOK(nd.call) || !live[nd.ret-base]) {
			nd.call = -1
		}
	}
}

// localize renumbers the exclusion tries and member sets a leaf body uses so that its
// key (and automaton) does not depend on the other rules of the grammar.
func localize(e *expr, tries []*keyTrie, sets [][]uint64) (*expr, []*keyTrie, [][]uint64) {
	var local []*keyTrie
	var lsets [][]uint64
	idx := map[int32]int32{}
	sidx := map[int32]int32{}
	var walk func(e *expr) *expr
	walk = func(e *expr) *expr {
		switch e.op {
		case eEffect, eGuard:
			if e.aux.kind == gTrieStart {
				id, ok := idx[e.aux.arg]
				if !ok {
					id = int32(len(local))
					idx[e.aux.arg] = id
					local = append(local, tries[e.aux.arg])
				}
				return &expr{op: e.op, aux: auxOp{kind: gTrieStart, arg: id}}
			}
			if e.aux.kind == gHasBits || e.aux.kind == gUnionLT {
				id, ok := sidx[e.aux.arg]
				if !ok {
					id = int32(len(lsets))
					sidx[e.aux.arg] = id
					lsets = append(lsets, sets[e.aux.arg])
				}
				return &expr{op: e.op, aux: auxOp{kind: e.aux.kind, arg: id, arg2: e.aux.arg2}}
			}
		case eSeq, eAlt, eRep, eTrack:
			subs := make([]*expr, len(e.subs))
			for i, s := range e.subs {
				subs[i] = walk(s)
			}
			ne := *e
			ne.subs = subs
			return &ne
		}
		return e
	}
	return walk(e), local, lsets
}

// leafAutomaton returns the automaton of a call-free rule, shared between grammars
// compiled by the same Compiler when its text matches.
func (c *Compiler) leafAutomaton(name string, body *expr, tries []*keyTrie, sets [][]uint64, abstractable bool) (*automaton, error) {
	var sb strings.Builder
	if abstractable {
		sb.WriteString("abs:")
	}
	exprKey(body, &sb)
	for _, st := range sets {
		fmt.Fprintf(&sb, "|set:%x", st)
	}
	// exclusion tries are part of the key
	for _, t := range tries {
		sb.WriteString("|trie:")
		for _, nd := range t.nodes {
			sb.WriteString(strconv.Quote(string(nd.bytes)))
			if nd.term {
				sb.WriteByte('$')
			}
		}
	}
	return c.leafAutomatonKeyed(name, sb.String(), body, tries, sets, abstractable)
}

func (c *Compiler) leafAutomatonKeyed(name, key string, body *expr, tries []*keyTrie, sets [][]uint64, abstractable bool) (*automaton, error) {
	if a := c.leaves.get(key); a != nil {
		return a, nil
	}
	b := &nfaBuilder{limit: c.opts.maxNFANodes()}
	b.reserve(body.size(c.opts.maxNFANodes()) + 1)
	st := b.newNode()
	en := b.build(body, st)
	if b.err != nil {
		return nil, b.err
	}
	b.nodes[en].accept = true
	trimNFA(b.nodes, func(int32) bool { return false })
	a := newAutomaton(name, b.nodes, sets, tries, true, c.opts.maxStates())
	a.abstractable = abstractable
	if abstractable {
		a.computeDist()
		for i := range a.nfa {
			if a.nfa[i].univ {
				a.subsumes, a.univ0 = !c.opts.plainStrings, int32(i)
				break
			}
		}
	}
	return c.leaves.put(key, a), nil
}

func (g *Grammar) computeClasses() {
	var cls [256]int32
	n := int32(1)
	for i := int32(0); i < g.nauts; i++ {
		a := g.aut(i)
		m := map[[2]int32]int32{}
		var next [256]int32
		nn := int32(0)
		for c := 0; c < 256; c++ {
			k := [2]int32{cls[c], int32(a.cls[c])}
			id, ok := m[k]
			if !ok {
				id = nn
				nn++
				m[k] = id
			}
			next[c] = id
		}
		cls = next
		n = nn
	}
	g.setClasses(cls, n)
}

// identityClasses gives the configurations one class per byte (lazy grammars, whose
// automata are not all known up front).
func (g *Grammar) identityClasses() {
	var cls [256]int32
	for c := range cls {
		cls[c] = int32(c)
	}
	g.setClasses(cls, 256)
}

func (g *Grammar) setClasses(cls [256]int32, n int32) {
	g.ncls = int(n)
	g.reps = make([]byte, n)
	done := make([]bool, n)
	for c := 0; c < 256; c++ {
		g.cls[c] = uint8(cls[c])
		if !done[cls[c]] {
			done[cls[c]] = true
			g.reps[cls[c]] = byte(c)
		}
	}
}

// leafRegistry shares leaf automata (and their vocabulary mask caches) between the
// grammars of one Compiler, bounded by entry count (oldest dropped first).
type leafRegistry struct {
	*leafStore
}

type leafStore struct {
	mu    sync.Mutex
	m     map[string]*automaton
	order []string
	max   int
}

func (r *leafRegistry) share() leafRegistry {
	r.init()
	return leafRegistry{r.leafStore}
}

func (r *leafRegistry) init() {
	if r.leafStore == nil {
		r.leafStore = &leafStore{}
	}
}

// A shared leaf automaton grows with every grammar that uses it (concrete states for
// each grammar's length bounds and excluded keys). Past these bounds it is retired: new
// grammars get a fresh one (and recompute its shared walks once), grammars that hold
// the old one keep it until they are dropped.
const (
	retireStates = 16384
	retireBytes  = 64 << 20
)

func (r *leafStore) get(k string) *automaton {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.m[k]
	if a != nil && (a.nstates.Load() > retireStates || a.memBytes.Load()+a.subBytes() > retireBytes) {
		delete(r.m, k)
		return nil
	}
	return a
}

func (r *leafStore) put(k string, a *automaton) *automaton {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[string]*automaton{}
	}
	if old, ok := r.m[k]; ok {
		return old
	}
	r.m[k] = a
	for i, o := range r.order {
		if o == k {
			r.order = append(r.order[:i], r.order[i+1:]...)
			break
		}
	}
	r.order = append(r.order, k)
	for r.max > 0 && len(r.order) > r.max {
		delete(r.m, r.order[0])
		r.order = r.order[1:]
	}
	return a
}
