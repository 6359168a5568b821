package grammars

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema front end. The schema is loaded and validated with
// santhosh-tekuri/jsonschema, whose compiled form (refs resolved, drafts normalized)
// is translated into grammar rules: one rule per (conjunction of) subschema, with
// objects as member automata (any key order, each key at most once, required keys
// tracked in a bitset), strings, numbers and patterns as shared leaf automata.
//
// Keywords no grammar expresses (uniqueItems, not, if/then/else, contains,
// dependent*, unevaluated*, multipleOf, propertyNames, bounds on non-integers, and
// combinations the translation can only approximate) make the grammar accept a
// superset; the schema is then enforced by a semantic check that runs inside the
// matcher at the token that completes the document (and before EOS). Grammar.Warnings
// lists every such keyword with its JSON pointer. With Options.GrammarOnly they are
// errors instead (or, with Lenient too, ignored with a warning).

const schemaURL = "mem://deepinfer/schema.json"

// JSONSchema compiles a JSON Schema (any draft the library knows; draft 2020-12 when
// "$schema" is absent).
func (c *Compiler) JSONSchema(schema []byte) (*Grammar, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, &CompileError{Reason: ReasonInvalidSchema, Err: fmt.Errorf("schema is not JSON: %w", err)}
	}
	if d := jsonDepth(doc, c.opts.maxSchemaDepth()+1); d > c.opts.maxSchemaDepth() {
		return nil, &CompileError{Reason: ReasonLimit, Err: &LimitError{What: "levels of schema nesting", Limit: c.opts.maxSchemaDepth()}}
	}
	canon, err := json.Marshal(doc)
	if err != nil {
		return nil, &CompileError{Reason: ReasonInvalidSchema, Err: err}
	}
	key := fmt.Sprintf("json\x00%d,%d,%v,%v,%v,%v,%v\x00%s", c.opts.Whitespace, c.opts.maxWS(), c.opts.Lenient, c.opts.FormatAnnotation, c.opts.AlwaysCheck, c.opts.GrammarOnly, c.opts.ZeroFractionIntegers, canon)
	return c.cached(key, func() (*Grammar, error) {
		dl := newDeadline(c.opts.compileTime())
		g, err := c.compileSchema(doc, dl)
		if err != nil {
			return nil, wrapCompileErr(err, ReasonInvalidSchema)
		}
		g.source = string(canon)
		return g, nil
	})
}

// jsonDepth returns the nesting depth of a decoded JSON value, stopping at limit.
func jsonDepth(v any, limit int) int {
	if limit <= 0 {
		return 0
	}
	d := 0
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			d = max(d, jsonDepth(x, limit-1))
			if d >= limit-1 {
				break
			}
		}
		return d + 1
	case []any:
		for _, x := range t {
			d = max(d, jsonDepth(x, limit-1))
			if d >= limit-1 {
				break
			}
		}
		return d + 1
	}
	return 0
}

// ecmaRegexp is a Go regexp compiled from an ECMA-262 pattern (escapes rewritten).
type ecmaRegexp struct {
	*regexp.Regexp
	src string
}

func (r ecmaRegexp) String() string { return r.src }

// ignoredRegexp stands for a pattern lenient mode ignores.
type ignoredRegexp struct{ src string }

func (r ignoredRegexp) String() string            { return r.src }
func (r ignoredRegexp) MatchString(s string) bool { return true }

func (c *Compiler) regexpEngine(lenient bool) jsonschema.RegexpEngine {
	return func(s string) (jsonschema.Regexp, error) {
		q, err := scanRegex(s, true)
		if err == nil {
			re, err2 := regexp.Compile(q)
			if err2 == nil {
				return ecmaRegexp{re, s}, nil
			}
			err = &RegexError{Pattern: s, Msg: err2.Error()}
		}
		if lenient {
			return ignoredRegexp{s}, nil
		}
		return nil, err
	}
}

type schemaLoader struct {
	load func(url string) ([]byte, error)
}

func (l schemaLoader) Load(url string) (any, error) {
	if l.load == nil {
		return nil, fmt.Errorf("remote $ref %s is not loaded (no SchemaLoader configured)", url)
	}
	b, err := l.load(url)
	if err != nil {
		return nil, err
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

// loadSchema validates and compiles the schema document with the jsonschema library.
func (c *Compiler) loadSchema(doc any) (sch *jsonschema.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			sch, err = nil, &CompileError{Reason: ReasonInvalidSchema, Err: fmt.Errorf("schema library failed: %v", p)}
		}
	}()
	jc := jsonschema.NewCompiler()
	jc.DefaultDraft(jsonschema.Draft2020)
	if !c.opts.FormatAnnotation {
		jc.AssertFormat()
	}
	jc.UseRegexpEngine(c.regexpEngine(c.opts.Lenient))
	for _, f := range strictFormats {
		jc.RegisterFormat(f)
	}
	jc.UseLoader(schemaLoader{c.opts.SchemaLoader})
	if err := jc.AddResource(schemaURL, doc); err != nil {
		return nil, &CompileError{Reason: ReasonInvalidSchema, Err: err}
	}
	sch, err = jc.Compile(schemaURL)
	if err != nil {
		var re *RegexError
		if errors.As(err, &re) {
			kw, ptr := regexLocation(err.Error())
			return nil, &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: ptr, Err: re}
		}
		// the metaschema's "format": "regex" checks run our engine too; its message
		// comes back as text
		if m := err.Error(); strings.Contains(m, regexUnsupportedMarker) {
			kw, ptr := regexLocation(m)
			return nil, &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: ptr, Err: errors.New(firstLineWith(m, regexUnsupportedMarker))}
		}
		return nil, &CompileError{Reason: ReasonInvalidSchema, Err: err}
	}
	return sch, nil
}

// firstLineWith returns the first line of m containing sub, trimmed.
func firstLineWith(m, sub string) string {
	for _, l := range strings.Split(m, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "- "))
		}
	}
	return m
}

// regexLocation digs the keyword and pointer out of the library's invalid-regex
// message ("... at '<url>#/path/pattern'").
func regexLocation(msg string) (string, string) {
	kw := "pattern"
	if strings.Contains(msg, "patternProperties") {
		kw = "patternProperties"
	}
	// prefer a quoted JSON pointer that names the keyword ('/a/b/pattern')
	best := ""
	for _, m := range quotedPointer.FindAllStringSubmatch(msg, -1) {
		p := m[1]
		if i := strings.IndexByte(p, '#'); i >= 0 {
			p = p[i+1:]
		}
		if p == "" {
			continue
		}
		if strings.HasSuffix(p, "/pattern") || strings.Contains(p, "/patternProperties") {
			return kw, p
		}
		if best == "" {
			best = p
		}
	}
	return kw, best
}

var quotedPointer = regexp.MustCompile(`['"]((?:[a-z]+://[^'"#]*)?#?/[^'"]*)['"]`)

// JSON value types as bits.
const (
	tyNull = 1 << iota
	tyBool
	tyInt  // integers
	tyFrac // numbers that are not integers
	tyStr
	tyArr
	tyObj
	tyAll = tyNull | tyBool | tyInt | tyFrac | tyStr | tyArr | tyObj
)

// part is a subschema in a conjunction; skip marks disjunctions already expanded.
type part struct {
	s    *jsonschema.Schema
	skip uint8 // 1: anyOf done, 2: oneOf done
}

type jsc struct {
	c        *Compiler
	opts     Options
	gb       *grammarBuilder
	dl       *deadline
	root     *jsonschema.Schema
	ids      map[*jsonschema.Schema]int
	memo     map[string]int32
	queue    []int32
	pending  map[int32][]part
	sets     [][]uint64
	tries    []*keyTrie
	leafMemo map[string]int32
	inexact  []string
	warnings []string
	err      error
	anySym   int32
	nsyms    int
}

func (c *Compiler) compileSchema(doc any, dl *deadline) (*Grammar, error) {
	// the library cannot be interrupted: run it with the deadline, leaving it to
	// finish in the background if it overruns (the depth limit keeps that short)
	type loaded struct {
		s   *jsonschema.Schema
		err error
	}
	ch := make(chan loaded, 1)
	go func() {
		s, err := c.loadSchema(doc)
		ch <- loaded{s, err}
	}()
	var sch *jsonschema.Schema
	select {
	case l := <-ch:
		if l.err != nil {
			return nil, l.err
		}
		sch = l.s
	case <-time.After(time.Until(dl.at)):
		return nil, &TimeoutError{Limit: dl.limit}
	}
	j := &jsc{c: c, opts: c.opts, gb: newGrammarBuilder(), dl: dl, root: sch,
		ids: map[*jsonschema.Schema]int{}, memo: map[string]int32{}, leafMemo: map[string]int32{}, anySym: -1}
	if bad, through := refCycle(sch); bad != nil {
		if through == "" {
			return nil, &CompileError{Reason: ReasonInvalidSchema, Keyword: "$ref", Pointer: pointerOf(bad),
				Err: errors.New("reference cycle: the schema reaches itself without consuming input")}
		}
		j.semantic("reference cycle through "+through, bad)
	}
	if !j.opts.Lenient {
		if err := j.checkPatterns(sch); err != nil {
			return nil, err
		}
	}
	check := func(doc []byte) (err error) {
		defer func() {
			// a validator panic must not take the server down: the document is refused
			if p := recover(); p != nil {
				err = fmt.Errorf("validator failed: %v", p)
			}
		}()
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
		if err != nil {
			return err
		}
		return sch.Validate(v)
	}
	root := j.symFor([]part{{s: sch}})
	if !j.opts.GrammarOnly {
		// translate lazily: subschemas become rules when a parse first needs them
		g, err := c.compileLazy(j, root, check)
		if err != nil {
			if strings.Contains(err.Error(), "matches nothing") {
				return nil, &CompileError{Reason: ReasonEmpty, Err: err}
			}
			return nil, err
		}
		return g, nil
	}
	for len(j.queue) > 0 {
		id := j.queue[0]
		j.queue = j.queue[1:]
		if err := dl.check(); err != nil {
			return nil, err
		}
		if err := j.translate(id); err != nil {
			return nil, err
		}
	}
	if !((len(j.inexact) > 0 && !j.opts.GrammarOnly) || j.opts.AlwaysCheck) {
		check = nil
	}
	warn := append([]string(nil), j.warnings...)
	for _, s := range j.inexact {
		warn = append(warn, "semantic check: "+s)
	}
	g, err := c.compile(&buildInput{gb: j.gb, root: root, sets: j.sets, tries: j.tries, check: check, kind: "json-schema", warn: warn}, dl)
	if err != nil {
		if strings.Contains(err.Error(), "matches nothing") {
			return nil, &CompileError{Reason: ReasonEmpty, Err: err}
		}
		return nil, err
	}
	return g, nil
}

// translate builds the body of pending symbol id.
func (j *jsc) translate(id int32) error {
	parts, ok := j.pending[id]
	if !ok {
		return nil
	}
	delete(j.pending, id)
	body := j.valueExpr(parts)
	if j.err != nil {
		return j.err
	}
	j.gb.define(id, body)
	if j.nsyms > j.opts.maxSchemaRules() {
		return &LimitError{What: "schema rules (subschemas and merged allOf/anyOf/oneOf combinations)", Limit: j.opts.maxSchemaRules()}
	}
	return nil
}

// lazyJSON translates a schema's subschemas into rules when a parse first enters them,
// so compiling a large schema costs only its root until matchers explore it.
type lazyJSON struct {
	mu  sync.Mutex
	c   *Compiler
	j   *jsc
	err error
}

func (c *Compiler) compileLazy(j *jsc, root int32, check func([]byte) error) (*Grammar, error) {
	g := c.newGrammar("json-schema", root, check)
	g.lazy = &lazyJSON{c: c, j: j}
	main := newAutomaton("main", nil, nil, nil, false, c.opts.maxStates())
	main.lazy = &lazyRules{bodies: map[int32]*expr{}, prod: func(int32) bool { return true }, limit: c.opts.maxNFANodes(), nodes: map[int32]int32{}}
	g.registerAut(main)
	g.identityClasses()
	g.ctrans = newLazyTable(g.ncls)
	g.checkOn.Store(c.opts.AlwaysCheck || len(j.inexact) > 0)
	for _, sy := range j.gb.syms {
		g.addSym(sy.name)
	}
	if g.symStart(root) < 0 {
		if err := g.lazy.error(); err != nil {
			return nil, err
		}
		return nil, errors.New("the grammar matches nothing")
	}
	return g, nil
}

// resolve translates and places symbol s; false if the translation failed.
func (l *lazyJSON) resolve(g *Grammar, s int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	si := g.sym(s)
	if si.resolved.Load() {
		return true
	}
	if l.err != nil {
		return false
	}
	j := l.j
	if err := j.translate(s); err != nil {
		l.fail(g, err)
		return false
	}
	for i := int(g.syms.n); i < len(j.gb.syms); i++ {
		g.addSym(j.gb.syms[i].name)
	}
	if err := l.c.place(g, s, j.gb.syms[s], j.gb.syms[s].body, j.tries, j.sets); err != nil {
		l.fail(g, err)
		return false
	}
	if len(j.inexact) > 0 {
		g.checkOn.Store(true)
	}
	return true
}

func (l *lazyJSON) fail(g *Grammar, err error) {
	l.err = wrapCompileErr(err, ReasonInvalidSchema)
	g.failed.Store(true)
}

func (l *lazyJSON) error() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *lazyJSON) warnings() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := append([]string(nil), l.j.warnings...)
	for _, s := range l.j.inexact {
		w = append(w, "semantic check: "+s)
	}
	return w
}

// refCycle finds a schema that reaches itself through applicators at the same instance
// location. through is "" for $ref/allOf cycles (the validator fails every instance)
// and names the keyword otherwise.
func refCycle(root *jsonschema.Schema) (*jsonschema.Schema, string) {
	color := map[*jsonschema.Schema]int{}
	var all []*jsonschema.Schema
	seen := map[*jsonschema.Schema]bool{}
	var collect func(s *jsonschema.Schema)
	collect = func(s *jsonschema.Schema) {
		for stack := []*jsonschema.Schema{s}; len(stack) > 0; {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if x == nil || seen[x] {
				continue
			}
			seen[x] = true
			all = append(all, x)
			stack = append(stack, schemaChildren(x)...)
		}
	}
	collect(root)
	var bad *jsonschema.Schema
	through := ""
	type edge struct {
		to  *jsonschema.Schema
		via string
	}
	sameLoc := func(s *jsonschema.Schema) []edge {
		var out []edge
		if s.Ref != nil {
			out = append(out, edge{s.Ref, ""})
		}
		if s.DynamicRef != nil && s.DynamicRef.Ref != nil {
			out = append(out, edge{s.DynamicRef.Ref, "$dynamicRef"})
		}
		if s.RecursiveRef != nil {
			out = append(out, edge{s.RecursiveRef, "$recursiveRef"})
		}
		for _, a := range s.AllOf {
			out = append(out, edge{a, ""})
		}
		for _, a := range s.AnyOf {
			out = append(out, edge{a, "anyOf"})
		}
		for _, a := range s.OneOf {
			out = append(out, edge{a, "oneOf"})
		}
		for _, a := range []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else} {
			if a != nil {
				out = append(out, edge{a, "not/if/then/else"})
			}
		}
		return out
	}
	var dfs func(s *jsonschema.Schema, via string) bool
	dfs = func(s *jsonschema.Schema, via string) bool {
		color[s] = 1
		for _, e := range sameLoc(s) {
			v := via
			if e.via != "" {
				v = e.via
			}
			if color[e.to] == 1 {
				bad, through = e.to, v
				return true
			}
			if color[e.to] == 0 && dfs(e.to, v) {
				return true
			}
		}
		color[s] = 2
		return false
	}
	for _, s := range all {
		if color[s] == 0 && dfs(s, "") {
			return bad, through
		}
	}
	return nil, ""
}

// schemaChildren lists every subschema of s.
func schemaChildren(s *jsonschema.Schema) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	add := func(xs ...*jsonschema.Schema) {
		for _, x := range xs {
			if x != nil {
				out = append(out, x)
			}
		}
	}
	add(s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames, s.UnevaluatedProperties, s.Contains,
		s.Items2020, s.UnevaluatedItems, s.ContentSchema)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.AllOf...)
	add(s.AnyOf...)
	add(s.OneOf...)
	add(s.PrefixItems...)
	for _, x := range s.Properties {
		add(x)
	}
	for _, x := range s.PatternProperties {
		add(x)
	}
	for _, x := range s.DependentSchemas {
		add(x)
	}
	for _, x := range s.Dependencies {
		if d, ok := x.(*jsonschema.Schema); ok {
			add(d)
		}
	}
	if x, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
		add(x)
	}
	if x, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
		add(x)
	}
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		add(it)
	case []*jsonschema.Schema:
		add(it...)
	}
	return out
}

func (j *jsc) id(s *jsonschema.Schema) int {
	if i, ok := j.ids[s]; ok {
		return i
	}
	i := len(j.ids)
	j.ids[s] = i
	return i
}

func pointerOf(s *jsonschema.Schema) string {
	loc := s.Location
	if i := strings.IndexByte(loc, '#'); i >= 0 {
		p := loc[i+1:]
		if p == "" {
			return "/"
		}
		return p
	}
	return loc
}

// symFor returns the rule for "a value valid against every part".
func (j *jsc) symFor(parts []part) int32 {
	ps := append([]part(nil), parts...)
	sort.Slice(ps, func(a, b int) bool {
		ia, ib := j.id(ps[a].s), j.id(ps[b].s)
		if ia != ib {
			return ia < ib
		}
		return ps[a].skip < ps[b].skip
	})
	var kb strings.Builder
	var uniq []part
	for i, p := range ps {
		if i > 0 && p.s == ps[i-1].s && p.skip == ps[i-1].skip {
			continue
		}
		uniq = append(uniq, p)
		fmt.Fprintf(&kb, "%d.%d,", j.id(p.s), p.skip)
	}
	key := kb.String()
	if id, ok := j.memo[key]; ok {
		return id
	}
	name := pointerOf(uniq[0].s)
	if len(uniq) > 1 {
		name += "&" + strconv.Itoa(len(uniq)-1)
	}
	id := j.gb.add(name, exprNoneV)
	j.gb.syms[id].defined = false
	j.memo[key] = id
	j.nsyms++
	if j.pending == nil {
		j.pending = map[int32][]part{}
	}
	j.pending[id] = uniq
	j.queue = append(j.queue, id)
	return id
}

// semantic records a keyword that only the document check enforces.
func (j *jsc) semantic(kw string, s *jsonschema.Schema) {
	msg := fmt.Sprintf("%s at %s", kw, pointerOf(s))
	for _, x := range j.inexact {
		if x == msg {
			return
		}
	}
	if j.opts.GrammarOnly {
		if j.opts.Lenient {
			j.warnings = append(j.warnings, "ignored "+msg)
			return
		}
		if j.err == nil {
			j.err = &CompileError{Reason: ReasonUnsupported, Keyword: kw, Pointer: pointerOf(s), Err: errors.New("not expressible as a grammar (GrammarOnly is set)")}
		}
		return
	}
	j.inexact = append(j.inexact, msg)
}

// expand flattens $ref and allOf into the conjunction (one part per schema, its skip
// flags merged).
func (j *jsc) expand(parts []part) []part {
	var out []part
	seen := map[*jsonschema.Schema]int{}
	onPath := map[*jsonschema.Schema]bool{}
	var add func(p part, via *jsonschema.Schema)
	add = func(p part, via *jsonschema.Schema) {
		if onPath[p.s] {
			// $ref/allOf lead back to a schema at the same instance location: the
			// validator reports a reference cycle for every instance
			if j.err == nil {
				j.err = &CompileError{Reason: ReasonInvalidSchema, Keyword: "$ref", Pointer: pointerOf(via),
					Err: errors.New("reference cycle: the schema reaches itself without consuming input")}
			}
			return
		}
		if i, ok := seen[p.s]; ok {
			out[i].skip |= p.skip
			return
		}
		seen[p.s] = len(out)
		out = append(out, p)
		onPath[p.s] = true
		s := p.s
		if s.Ref != nil {
			add(part{s: s.Ref}, s)
		}
		if s.DynamicRef != nil && s.DynamicRef.Ref != nil {
			j.semantic("$dynamicRef", s)
			add(part{s: s.DynamicRef.Ref}, s)
		}
		if s.RecursiveRef != nil {
			j.semantic("$recursiveRef", s)
			add(part{s: s.RecursiveRef}, s)
		}
		for _, a := range s.AllOf {
			add(part{s: a}, s)
		}
		delete(onPath, p.s)
	}
	for _, p := range parts {
		add(p, p.s)
	}
	return out
}

// ruleRef adds a rule with this body and calls it (nothing if the body matches
// nothing, so that the emptiness shows in the caller).
func (j *jsc) ruleRef(name string, body *expr) *expr {
	if body.op == eNone {
		return exprNoneV
	}
	return eCallOf(j.gb.add(name, body))
}

// valueRef refers to the value rule of parts: inline when the value is a few literals
// (enum or const of scalars, null, booleans), a call otherwise.
func (j *jsc) valueRef(ps []part) *expr {
	conj := j.expand(ps)
	simple := true
	for _, p := range conj {
		s := p.s
		if s.Bool != nil {
			if !*s.Bool {
				return exprNoneV
			}
			continue
		}
		if len(s.AnyOf) > 0 && p.skip&1 == 0 || len(s.OneOf) > 0 && p.skip&2 == 0 {
			simple = false
			break
		}
	}
	if simple {
		m := j.merge(conj, true)
		switch {
		case m.types == 0:
			return exprNoneV
		case m.hasEnum:
			scalar := len(m.enum) <= 64
			for _, v := range m.enum {
				switch v.(type) {
				case map[string]any, []any:
					scalar = false
				}
			}
			if scalar {
				var alts []*expr
				for _, v := range m.enum {
					alts = append(alts, j.constExpr(v))
				}
				return eAltOf(alts...)
			}
		case m.types&^(tyNull|tyBool) == 0:
			return j.build(m, conj)
		}
	}
	return eCallOf(j.symFor(ps))
}

// valueExpr builds the body of a value rule.
func (j *jsc) valueExpr(parts []part) *expr {
	conj := j.expand(parts)
	for _, p := range conj {
		if p.s.Bool != nil && !*p.s.Bool {
			return exprNoneV
		}
	}
	// expand the first pending disjunction
	for i, p := range conj {
		s := p.s
		if len(s.AnyOf) > 0 && p.skip&1 == 0 {
			return j.disjunction(conj, i, s.AnyOf, 1)
		}
		if len(s.OneOf) > 0 && p.skip&2 == 0 {
			return j.disjunction(conj, i, s.OneOf, 2)
		}
	}
	m := j.merge(conj, true)
	return j.build(m, conj)
}

func (j *jsc) disjunction(conj []part, i int, alts []*jsonschema.Schema, flag uint8) *expr {
	base := append([]part(nil), conj...)
	base[i].skip |= flag
	// the base parts that matter: drop the conjunction members expand() added (they
	// come back when the rule expands again)
	var exprs []*expr
	var types []uint8
	var discs []map[string][]any
	for _, a := range alts {
		ps := append(append([]part(nil), base...), part{s: a})
		m := j.merge(j.expand(ps), false)
		if m.empty() {
			continue
		}
		types = append(types, m.types)
		discs = append(discs, m.discriminators())
		exprs = append(exprs, j.valueRef(ps))
	}
	if flag == 2 && !pairwiseDisjoint(types, discs) {
		j.semantic("oneOf", conj[i].s)
	}
	return eAltOf(exprs...)
}

// pairwiseDisjoint reports whether no value can match two alternatives: their types
// differ, or both are objects that require a property with different constant values.
func pairwiseDisjoint(types []uint8, discs []map[string][]any) bool {
	for a := 0; a < len(types); a++ {
		for b := a + 1; b < len(types); b++ {
			common := types[a] & types[b]
			if common == 0 {
				continue
			}
			if common&^tyObj == 0 && disjointDisc(discs[a], discs[b]) {
				continue
			}
			return false
		}
	}
	return true
}

func disjointDisc(x, y map[string][]any) bool {
	for k, vx := range x {
		vy, ok := y[k]
		if !ok {
			continue
		}
		overlap := false
		for _, a := range vx {
			for _, b := range vy {
				if jsonEqual(a, b) {
					overlap = true
				}
			}
		}
		if !overlap {
			return true
		}
	}
	return false
}

// merged holds the constraints of a conjunction.
type merged struct {
	types   uint8
	hasEnum bool
	enum    []any
	// strings
	minLen, maxLen int
	patterns       []*jsonschema.Schema
	formats        []*jsonschema.Schema
	// numbers
	lo, hi     *big.Rat
	loEx, hiEx bool
	numInexact bool
	integral   bool // multipleOf 1: integral values, which "number" may write as 6000.0
	// arrays and objects are built from the members themselves
	members []part
}

func (m *merged) empty() bool { return m.types == 0 || (m.hasEnum && len(m.enum) == 0) }

// discriminators: for objects, required properties with const/enum values.
func (m *merged) discriminators() map[string][]any {
	out := map[string][]any{}
	req := map[string]bool{}
	for _, p := range m.members {
		for _, r := range p.s.Required {
			req[r] = true
		}
	}
	for _, p := range m.members {
		for k, ps := range p.s.Properties {
			if !req[k] {
				continue
			}
			var vals []any
			if ps.Const != nil {
				vals = []any{*ps.Const}
			} else if ps.Enum != nil {
				vals = ps.Enum.Values
			} else {
				continue
			}
			out[k] = vals
		}
	}
	return out
}

func typesOf(t *jsonschema.Types) uint8 {
	var out uint8
	for _, s := range t.ToStrings() {
		switch s {
		case "null":
			out |= tyNull
		case "boolean":
			out |= tyBool
		case "integer":
			out |= tyInt
		case "number":
			out |= tyInt | tyFrac
		case "string":
			out |= tyStr
		case "array":
			out |= tyArr
		case "object":
			out |= tyObj
		}
	}
	return out
}

func valueType(v any) uint8 {
	switch t := v.(type) {
	case nil:
		return tyNull
	case bool:
		return tyBool
	case string:
		return tyStr
	case []any:
		return tyArr
	case map[string]any:
		return tyObj
	case json.Number:
		r, ok := new(big.Rat).SetString(string(t))
		if ok && r.IsInt() {
			return tyInt
		}
		return tyFrac
	case float64:
		if t == float64(int64(t)) {
			return tyInt
		}
		return tyFrac
	}
	return 0
}

func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		ra, ok1 := new(big.Rat).SetString(string(x))
		rb, ok2 := new(big.Rat).SetString(string(y))
		return ok1 && ok2 && ra.Cmp(rb) == 0
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// merge intersects the constraints of a conjunction. validate filters enum values
// through the full validation of every member (exact, slower); without it only their
// types are checked (enough to test for emptiness).
func (j *jsc) merge(conj []part, validate bool) *merged {
	m := &merged{types: tyAll, minLen: 0, maxLen: -1, members: conj}
	for _, p := range conj {
		s := p.s
		if s.Bool != nil {
			if !*s.Bool {
				m.types = 0
			}
			continue
		}
		if s.Types != nil {
			m.types &= typesOf(s.Types)
		}
		if s.Const != nil {
			m.intersectEnum([]any{*s.Const})
		}
		if s.Enum != nil {
			m.intersectEnum(s.Enum.Values)
		}
		if s.MinLength != nil && *s.MinLength > m.minLen {
			m.minLen = *s.MinLength
		}
		if s.MaxLength != nil && (m.maxLen < 0 || *s.MaxLength < m.maxLen) {
			m.maxLen = *s.MaxLength
		}
		if s.Pattern != nil {
			m.patterns = append(m.patterns, s)
		}
		if s.Format != nil && !j.opts.FormatAnnotation {
			m.formats = append(m.formats, s)
		}
		if s.Minimum != nil {
			m.lower(s.Minimum, false)
		}
		if s.ExclusiveMinimum != nil {
			m.lower(s.ExclusiveMinimum, true)
		}
		if s.Maximum != nil {
			m.upper(s.Maximum, false)
		}
		if s.ExclusiveMaximum != nil {
			m.upper(s.ExclusiveMaximum, true)
		}
		if s.MultipleOf != nil {
			if s.MultipleOf.IsInt() && s.MultipleOf.Num().Cmp(big.NewInt(1)) == 0 {
				m.integral = true
			} else {
				j.semantic("multipleOf", s)
			}
		}
		if s.Not != nil {
			j.semantic("not", s)
		}
		if s.If != nil && (s.Then != nil || s.Else != nil) {
			j.semantic("if", s)
		}
		if s.UniqueItems {
			j.semantic("uniqueItems", s)
		}
		if s.Contains != nil {
			j.semantic("contains", s)
		}
		if len(s.DependentRequired) > 0 {
			j.semantic("dependentRequired", s)
		}
		if len(s.DependentSchemas) > 0 {
			j.semantic("dependentSchemas", s)
		}
		if len(s.Dependencies) > 0 {
			j.semantic("dependencies", s)
		}
		if s.PropertyNames != nil && !(s.PropertyNames.Bool != nil && *s.PropertyNames.Bool) {
			j.semantic("propertyNames", s)
		}
		if s.UnevaluatedProperties != nil && !(s.UnevaluatedProperties.Bool != nil && *s.UnevaluatedProperties.Bool) {
			j.semantic("unevaluatedProperties", s)
		}
		if s.UnevaluatedItems != nil && !(s.UnevaluatedItems.Bool != nil && *s.UnevaluatedItems.Bool) {
			j.semantic("unevaluatedItems", s)
		}
		if len(s.Extensions) > 0 {
			j.semantic("vocabulary extension", s)
		}
	}
	if m.hasEnum && len(m.enum) > j.opts.maxEnum() {
		if j.err == nil {
			j.err = &LimitError{What: "values in one enum", Limit: j.opts.maxEnum()}
		}
		m.enum = m.enum[:j.opts.maxEnum()]
	}
	if m.hasEnum {
		// keep the values every member accepts (the library validates them exactly)
		var keep []any
		for _, v := range m.enum {
			if m.types&valueType(v) == 0 {
				continue
			}
			ok := true
			for _, p := range conj {
				if !validate || onlyEnumType(p.s) {
					continue
				}
				vs := p.s
				if p.skip != 0 {
					// the expanded disjunction's branch is its own member: validate
					// against the rest of this schema only
					c := *p.s
					if p.skip&1 != 0 {
						c.AnyOf = nil
					}
					if p.skip&2 != 0 {
						c.OneOf = nil
					}
					if onlyEnumType(&c) {
						continue
					}
					vs = &c
				}
				if vs.Validate(v) != nil {
					ok = false
					break
				}
			}
			if ok {
				keep = append(keep, v)
			}
		}
		m.enum = keep
		if len(keep) == 0 {
			m.types = 0
		}
	}
	if m.lo != nil && m.hi != nil {
		c := m.lo.Cmp(m.hi)
		if c > 0 || c == 0 && (m.loEx || m.hiEx) {
			m.types &^= tyInt | tyFrac
		}
	}
	if m.maxLen >= 0 && m.minLen > m.maxLen {
		m.types &^= tyStr
	}
	return m
}

// onlyEnumType: the schema constrains values by type, enum and const alone (already
// applied to enum values by merge).
func onlyEnumType(s *jsonschema.Schema) bool {
	if s.Bool != nil {
		return true
	}
	return s.Ref == nil && s.DynamicRef == nil && s.RecursiveRef == nil && s.Not == nil && len(s.AllOf) == 0 && len(s.AnyOf) == 0 &&
		len(s.OneOf) == 0 && s.If == nil && s.Format == nil && s.MaxProperties == nil && s.MinProperties == nil &&
		len(s.Required) == 0 && s.PropertyNames == nil && len(s.Properties) == 0 && len(s.PatternProperties) == 0 &&
		s.AdditionalProperties == nil && len(s.Dependencies) == 0 && len(s.DependentRequired) == 0 &&
		len(s.DependentSchemas) == 0 && s.UnevaluatedProperties == nil && s.MinItems == nil && s.MaxItems == nil &&
		!s.UniqueItems && s.Contains == nil && s.Items == nil && s.AdditionalItems == nil && len(s.PrefixItems) == 0 &&
		s.Items2020 == nil && s.UnevaluatedItems == nil && s.MinLength == nil && s.MaxLength == nil && s.Pattern == nil &&
		s.ContentEncoding == nil && s.Maximum == nil && s.Minimum == nil && s.ExclusiveMaximum == nil &&
		s.ExclusiveMinimum == nil && s.MultipleOf == nil && len(s.Extensions) == 0
}

func (m *merged) intersectEnum(vals []any) {
	if !m.hasEnum {
		m.hasEnum = true
		m.enum = append([]any(nil), vals...)
		return
	}
	var keep []any
	for _, a := range m.enum {
		for _, b := range vals {
			if jsonEqual(a, b) {
				keep = append(keep, a)
				break
			}
		}
	}
	m.enum = keep
}

func (m *merged) lower(r *big.Rat, ex bool) {
	if m.lo == nil || r.Cmp(m.lo) > 0 || r.Cmp(m.lo) == 0 && ex {
		m.lo, m.loEx = r, ex
	}
}

func (m *merged) upper(r *big.Rat, ex bool) {
	if m.hi == nil || r.Cmp(m.hi) < 0 || r.Cmp(m.hi) == 0 && ex {
		m.hi, m.hiEx = r, ex
	}
}

// ---- expressions --------------------------------------------------------------

func (j *jsc) itemSep() *expr {
	switch j.opts.Whitespace {
	case WhitespaceCompact:
		return eLit(",")
	case WhitespaceFlexible:
		return eSeqOf(j.ws(), eLit(","), j.ws())
	}
	return eLit(", ")
}

func (j *jsc) keySep() *expr {
	switch j.opts.Whitespace {
	case WhitespaceCompact:
		return eLit(":")
	case WhitespaceFlexible:
		return eSeqOf(j.ws(), eLit(":"), j.ws())
	}
	return eLit(": ")
}

// inner is the whitespace after an opening and before a closing bracket.
func (j *jsc) inner() *expr {
	if j.opts.Whitespace == WhitespaceFlexible {
		return j.ws()
	}
	return exprEmptyV
}

func (j *jsc) ws() *expr {
	var s byteSet
	for _, c := range []byte(" \t\n\r") {
		s.add(c)
	}
	return eRepOf(eByteSet(s), 0, j.opts.maxWS())
}

// leaf returns a shared leaf symbol for a call-free body.
func (j *jsc) leaf(key, name string, body *expr) int32 {
	if id, ok := j.leafMemo[key]; ok {
		return id
	}
	id := j.gb.add(name, body)
	j.gb.syms[id].noInline = true
	j.leafMemo[key] = id
	return id
}

func (j *jsc) anyValue() int32 {
	if j.anySym >= 0 {
		return j.anySym
	}
	anyV := j.gb.sym("any")
	j.anySym = anyV
	str := j.stringSym(0, -1, "", "", "", nil)
	num, _ := j.numberSym(tyInt|tyFrac, false, nil, false, nil, false)
	arr := j.gb.add("any-array", eSeqOf(eLit("["), j.inner(),
		eOpt(eSeqOf(eCallOf(anyV), eStar(eSeqOf(j.itemSep(), eCallOf(anyV))), j.inner())), eLit("]")))
	obj := j.gb.add("any-object", eSeqOf(eLit("{"), j.inner(),
		eOpt(eSeqOf(eCallOf(str), j.keySep(), eCallOf(anyV),
			eStar(eSeqOf(j.itemSep(), eCallOf(str), j.keySep(), eCallOf(anyV))), j.inner())), eLit("}")))
	j.gb.define(anyV, eAltOf(eLit("null"), eLit("true"), eLit("false"), eCallOf(num), eCallOf(str), eCallOf(arr), eCallOf(obj)))
	return anyV
}

// build makes the alternatives of the merged constraints.
func (j *jsc) build(m *merged, conj []part) *expr {
	if m.types == 0 {
		return exprNoneV
	}
	if m.hasEnum {
		var alts []*expr
		for _, v := range m.enum {
			alts = append(alts, j.constExpr(v))
		}
		return eAltOf(alts...)
	}
	if m.types == tyAll && isUnconstrained(conj) {
		return eCallOf(j.anyValue())
	}
	var alts []*expr
	if m.types&tyNull != 0 {
		alts = append(alts, eLit("null"))
	}
	if m.types&tyBool != 0 {
		alts = append(alts, eLit("true"), eLit("false"))
	}
	if m.types&(tyInt|tyFrac) != 0 {
		types, zeroFrac := m.types&(tyInt|tyFrac), false
		if m.integral {
			types, zeroFrac = tyInt, types&tyFrac != 0
		}
		if types == tyInt && j.opts.ZeroFractionIntegers && j.root.DraftVersion >= 6 {
			zeroFrac = true
		}
		num, exact := j.numberSym(types, zeroFrac, m.lo, m.loEx, m.hi, m.hiEx)
		alts = append(alts, eCallOf(num))
		if !exact {
			for _, p := range conj {
				if p.s.Minimum != nil || p.s.Maximum != nil || p.s.ExclusiveMinimum != nil || p.s.ExclusiveMaximum != nil {
					j.semantic("minimum/maximum of a non-integer number", p.s)
					break
				}
			}
		}
	}
	if m.types&tyStr != 0 {
		if e := j.stringExpr(m); e != nil {
			alts = append(alts, e)
		}
	}
	if m.types&tyArr != 0 {
		alts = append(alts, j.arrayExpr(conj))
	}
	if m.types&tyObj != 0 {
		alts = append(alts, j.objectExpr(conj))
	}
	return eAltOf(alts...)
}

// isUnconstrained: no member says anything about any type.
func isUnconstrained(conj []part) bool {
	for _, p := range conj {
		s := p.s
		if s.Bool != nil {
			continue
		}
		if s.Types != nil || s.Enum != nil || s.Const != nil || s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil ||
			s.Format != nil || s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil ||
			s.MultipleOf != nil || s.Items != nil || s.Items2020 != nil || s.PrefixItems != nil || s.AdditionalItems != nil ||
			s.MinItems != nil || s.MaxItems != nil || s.Properties != nil || s.PatternProperties != nil ||
			s.AdditionalProperties != nil || s.Required != nil || s.MinProperties != nil || s.MaxProperties != nil {
			return false
		}
	}
	return true
}

// ---- numbers ----------------------------------------------------------------

// maxNumDigits bounds the numbers a schema grammar writes: |value| < 10^308 (integer
// digits plus exponent at most 308), so that every number it allows parses as a finite
// float64 (in Go's encoding/json, JavaScript, Python's float), not only as a big
// number. Integer bounds beyond it are clamped to it.
const maxNumDigits = 308

// numberSym returns the number rule for a type set and bounds; exact is false when
// the bounds are left to the semantic check.
func (j *jsc) numberSym(types uint8, zeroFrac bool, lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool) (sym int32, exact bool) {
	if types&tyFrac == 0 {
		// integers: exact ranges
		var ilo, ihi *big.Int
		if lo != nil {
			ilo = ceilRat(lo, loEx)
		}
		if hi != nil {
			ihi = floorRat(hi, hiEx)
		}
		// integers as users write them: no fraction, no exponent (96, not 96.0; draft 4
		// counts 96.0 as a number that is not an integer)
		key := fmt.Sprintf("int:%v:%v:%v", ilo, ihi, zeroFrac)
		body := intRange(ilo, ihi)
		if zeroFrac {
			// a "number" with multipleOf 1 may also be written with a zero fraction
			body = eSeqOf(body, eOpt(eSeqOf(eLit("."), eRepOf(eLit("0"), 1, -1))))
		}
		return j.leaf(key, "integer", body), true
	}
	nonneg := lo != nil && lo.Sign() >= 0
	if lo == nil && hi == nil || hi == nil && lo.Sign() == 0 && !loEx {
		// no bounds, or minimum 0: exact with every number form
		key := fmt.Sprintf("num:%v", nonneg)
		sign := eOpt(eLit("-"))
		if nonneg {
			sign = exprEmptyV
		}
		return j.leaf(key, "number", eSeqOf(sign, boundedNumber())), true
	}
	if body, ok := decimalRange(lo, loEx, hi, hiEx); ok {
		key := fmt.Sprintf("dec:%v:%v:%v:%v", lo, loEx, hi, hiEx)
		return j.leaf(key, "number", body), true
	}
	// bounds without a short decimal expansion: the semantic check enforces them
	key := fmt.Sprintf("num:%v", nonneg)
	sign := eOpt(eLit("-"))
	if nonneg {
		sign = exprEmptyV
	}
	return j.leaf(key, "number", eSeqOf(sign, boundedNumber())), false
}

// maxBoundFrac bounds the fraction digits of a minimum or maximum the number grammar
// takes exactly.
const maxBoundFrac = 40

// decimalRange matches the numbers in a range (lo or hi nil: open), exactly: decimals
// without an exponent (an integer part, optionally a fraction), no negative zero,
// |value| < 10^308, and where the range holds them whole, the exponent forms Python's
// repr writes: d.ddde-k for (0, 1) and d.ddde+k for [1, 1e308), and their negatives.
// ok is false when a bound has no decimal expansion of at most maxBoundFrac digits.
func decimalRange(lo *big.Rat, loEx bool, hi *big.Rat, hiEx bool) (*expr, bool) {
	zero := new(big.Rat)
	var alts []*expr
	neg := func(r *big.Rat) *big.Rat {
		if r == nil {
			return nil
		}
		return new(big.Rat).Neg(r)
	}
	// x >= 0
	if hi == nil || hi.Sign() > 0 || hi.Sign() == 0 && !hiEx {
		l, lex := zero, false
		if lo != nil && lo.Sign() >= 0 {
			l, lex = lo, loEx
		}
		e, ok := magnitudeRange(l, lex, hi, hiEx)
		if !ok {
			return nil, false
		}
		alts = append(alts, e)
	}
	// x < 0: magnitudes in (max(0, -hi), -lo]
	if lo == nil || lo.Sign() < 0 {
		l, lex := zero, true
		if hi != nil && hi.Sign() < 0 {
			l, lex = neg(hi), hiEx
		}
		e, ok := magnitudeRange(l, lex, neg(lo), loEx)
		if !ok {
			return nil, false
		}
		alts = append(alts, eSeqOf(eLit("-"), e))
	}
	// exponent forms, where the range holds every number they can write
	one := big.NewRat(1, 1)
	var es byteSet
	es.add('e')
	es.add('E')
	digit := eByteRange('0', '9')
	mant := eSeqOf(eByteRange('1', '9'), eOpt(eSeqOf(eLit("."), eRepOf(digit, 1, -1)))) // [1, 10)
	// a negative exponent of 1 to 3 digits, not all zero: values in (0, 1)
	small := eSeqOf(mant, eByteSet(es), eLit("-"), eAltOf(
		eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, 2)),
		eSeqOf(eLit("0"), eByteRange('1', '9'), eOpt(digit)),
		eSeqOf(eLit("00"), eByteRange('1', '9'))))
	// a positive exponent up to 307: values in [1, 1e308)
	large := eSeqOf(mant, eByteSet(es), eOpt(eLit("+")), expDigitsUpTo(maxNumDigits-1))
	le := func(a *big.Rat, b *big.Rat) bool { return a.Cmp(b) <= 0 }
	if (lo == nil || lo.Sign() <= 0) && (hi == nil || le(one, hi)) {
		alts = append(alts, small)
	}
	if (hi == nil || hi.Sign() >= 0) && (lo == nil || le(lo, neg(one))) {
		alts = append(alts, eSeqOf(eLit("-"), small))
	}
	if hi == nil && (lo == nil || lo.Cmp(one) < 0 || lo.Cmp(one) == 0 && !loEx) {
		alts = append(alts, large)
	}
	if lo == nil && (hi == nil || hi.Cmp(neg(one)) > 0 || hi.Cmp(neg(one)) == 0 && !hiEx) {
		alts = append(alts, eSeqOf(eLit("-"), large))
	}
	return eAltOf(alts...), true
}

// decimalDigits writes a non-negative rational as integer digits and fraction digits
// (no trailing zeros); ok is false when its expansion does not end within
// maxBoundFrac digits.
func decimalDigits(r *big.Rat) (ip, fp string, ok bool) {
	// r * 10^k is an integer for the smallest such k
	scaled := new(big.Rat).Set(r)
	ten := big.NewRat(10, 1)
	k := 0
	for ; !scaled.IsInt(); k++ {
		if k >= maxBoundFrac {
			return "", "", false
		}
		scaled.Mul(scaled, ten)
	}
	s := scaled.Num().String()
	if len(s) <= k {
		s = strings.Repeat("0", k-len(s)+1) + s
	}
	return s[:len(s)-k], strings.TrimRight(s[len(s)-k:], "0"), true
}

// magnitudeRange matches unsigned decimals ("0", "12", "3.25", no exponent, at most
// maxNumDigits integer digits) with value in [l, h] (lex, hex: exclusive; h nil: no
// upper bound).
func magnitudeRange(l *big.Rat, lex bool, h *big.Rat, hex bool) (*expr, bool) {
	li, lf, ok := decimalDigits(l)
	if !ok {
		return nil, false
	}
	if h != nil {
		if c := l.Cmp(h); c > 0 || c == 0 && (lex || hex) {
			return exprNoneV, true
		}
	}
	var hi, hf string
	if h != nil {
		if hi, hf, ok = decimalDigits(h); !ok {
			return nil, false
		}
		if len(hi) > maxNumDigits {
			h = nil
		}
	}
	if len(li) > maxNumDigits {
		return exprNoneV, true
	}
	LI, _ := new(big.Int).SetString(li, 10)
	one := big.NewInt(1)
	anyFrac := eOpt(eSeqOf(eLit("."), eRepOf(eByteRange('0', '9'), 1, -1)))
	var alts []*expr
	if h == nil {
		alts = append(alts,
			eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, "", false, false)),
			eSeqOf(natRange(new(big.Int).Add(LI, one), nil), anyFrac))
		return eAltOf(alts...), true
	}
	HI, _ := new(big.Int).SetString(hi, 10)
	if LI.Cmp(HI) == 0 {
		return eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, hf, hex, true)), true
	}
	alts = append(alts,
		eSeqOf(eLitBytes([]byte(li)), fracRange(lf, lex, true, "", false, false)),
		eSeqOf(eLitBytes([]byte(hi)), fracRange("", false, false, hf, hex, true)))
	if mid := new(big.Int).Add(LI, one); mid.Cmp(HI) < 0 {
		alts = append(alts, eSeqOf(natRange(mid, new(big.Int).Sub(HI, one)), anyFrac))
	}
	return eAltOf(alts...), true
}

// fracRange matches the fraction of a decimal, "" or "." and digits, whose value
// 0.ddd is >= 0.a (> when aEx) if hasA and <= 0.b (< when bEx) if hasB.
func fracRange(a string, aEx, hasA bool, b string, bEx, hasB bool) *expr {
	digitAt := func(s string, i int) byte {
		if i < len(s) {
			return s[i]
		}
		return '0'
	}
	allZero := func(s string) bool { return strings.Trim(s, "0") == "" }
	anyDigits := eStar(eByteRange('0', '9'))
	type key struct {
		pos      int
		loT, hiT bool
		needOne  bool
	}
	memo := map[key]*expr{}
	// rest matches the digits after pos; loT/hiT: the digits so far equal a/b
	var rest func(pos int, loT, hiT, needOne bool) *expr
	rest = func(pos int, loT, hiT, needOne bool) *expr {
		if loT && pos >= len(a) && !aEx {
			loT = false // anything from here on is >= a
		}
		if hiT && pos >= len(b) {
			// equal to b so far: only zeros may follow, and not at all when strict
			if bEx || loT {
				return exprNoneV
			}
			if needOne {
				return eRepOf(eLit("0"), 1, -1)
			}
			return eStar(eLit("0"))
		}
		if !loT && !hiT {
			if needOne {
				return eRepOf(eByteRange('0', '9'), 1, -1)
			}
			return anyDigits
		}
		if loT && !hiT && pos >= len(a) {
			// equal to a so far and strict: some nonzero digit must come
			return eSeqOf(anyDigits, eByteRange('1', '9'), anyDigits)
		}
		k := key{pos, loT, hiT, needOne}
		if e, ok := memo[k]; ok {
			return e
		}
		var alts []*expr
		if !needOne {
			// the fraction ends here: what remains of it is zero
			okLo := !loT || allZero(a[min(pos, len(a)):]) && !aEx
			okHi := !hiT || !bEx || !allZero(b[min(pos, len(b)):])
			if okLo && okHi {
				alts = append(alts, exprEmptyV)
			}
		}
		// digits with the same outcome (still equal to a, to b) share a branch
		type branch struct {
			lo, hi byte
			nl, nh bool
		}
		var brs []branch
		for d := byte('0'); d <= '9'; d++ {
			if loT && d < digitAt(a, pos) || hiT && d > digitAt(b, pos) {
				continue
			}
			nl := loT && d == digitAt(a, pos)
			nh := hiT && d == digitAt(b, pos)
			if n := len(brs); n > 0 && brs[n-1].hi == d-1 && brs[n-1].nl == nl && brs[n-1].nh == nh {
				brs[n-1].hi = d
				continue
			}
			brs = append(brs, branch{d, d, nl, nh})
		}
		for _, br := range brs {
			alts = append(alts, eSeqOf(eByteRange(br.lo, br.hi), rest(pos+1, br.nl, br.nh, false)))
		}
		r := eAltOf(alts...)
		memo[k] = r
		return r
	}
	aT, bT := hasA, hasB
	var alts []*expr
	// no fraction at all: the value is the integer part
	if (!aT || allZero(a) && !aEx) && (!bT || !bEx || !allZero(b)) {
		alts = append(alts, exprEmptyV)
	}
	alts = append(alts, eSeqOf(eLit("."), rest(0, aT, bT, true)))
	return eAltOf(alts...)
}

// boundedNumber is a JSON number without its sign whose magnitude is below 10^308.
// With n integer digits ("0" counts as one) a positive exponent E needs n+E <= 308;
// the grammar takes that in bands (n <= 1 with E <= 307, n <= 9 with E <= 299,
// n <= 209 with E <= 99, n <= 299 with E <= 9, and n <= 308 without a positive
// exponent), which holds every number Python's repr or JavaScript writes and keeps the
// automaton small. Negative exponents have at most 3 digits (small values underflow
// to zero, which every parser accepts, and a validator never expands 1e-999999999).
func boundedNumber() *expr {
	digit := eByteRange('0', '9')
	frac := eOpt(eSeqOf(eLit("."), eRepOf(digit, 1, -1)))
	var es byteSet
	es.add('e')
	es.add('E')
	intPart := func(n int) *expr { // 1 to n integer digits
		return eAltOf(eLit("0"), eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, n-1)))
	}
	neg := eSeqOf(eByteSet(es), eLit("-"), eRepOf(digit, 1, 3))
	alts := []*expr{eSeqOf(intPart(maxNumDigits), frac, eOpt(neg))}
	for _, b := range [][2]int{{1, 307}, {9, 299}, {209, 99}, {299, 9}} {
		pos := eSeqOf(eByteSet(es), eOpt(eLit("+")), expDigitsUpTo(b[1]))
		alts = append(alts, eSeqOf(intPart(b[0]), frac, pos))
	}
	return eAltOf(alts...)
}

// expDigitsUpTo matches exponent digits (1 to 3, leading zeros allowed) of value <= k.
func expDigitsUpTo(k int) *expr {
	var alts []*expr
	for l := 1; l <= 3; l++ {
		top := strings.Repeat("9", l)
		if v, _ := strconv.Atoi(top); k < v {
			top = fmt.Sprintf("%0*d", l, k)
		}
		alts = append(alts, sameLenRange(strings.Repeat("0", l), top))
	}
	return eAltOf(alts...)
}

func ceilRat(r *big.Rat, ex bool) *big.Int {
	q := new(big.Int).Quo(r.Num(), r.Denom()) // truncates toward zero
	if r.IsInt() {
		if ex {
			q.Add(q, big.NewInt(1))
		}
		return q
	}
	if r.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func floorRat(r *big.Rat, ex bool) *big.Int {
	q := new(big.Int).Quo(r.Num(), r.Denom())
	if r.IsInt() {
		if ex {
			q.Sub(q, big.NewInt(1))
		}
		return q
	}
	if r.Sign() < 0 {
		q.Sub(q, big.NewInt(1))
	}
	return q
}

// intRange matches the decimal integers in [lo, hi] (nil: unbounded, which is at most
// maxNumDigits digits), no leading zeros, "-" for negatives (never "-0").
func intRange(lo, hi *big.Int) *expr {
	if lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return exprNoneV
	}
	zero := big.NewInt(0)
	var alts []*expr
	// negative part: -[max(1,-hi) .. -lo]
	if lo == nil || lo.Sign() < 0 {
		var nlo, nhi *big.Int // magnitudes
		nlo = big.NewInt(1)
		if hi != nil && hi.Sign() < 0 {
			nlo = new(big.Int).Neg(hi)
		}
		if lo != nil {
			nhi = new(big.Int).Neg(lo)
		}
		alts = append(alts, eSeqOf(eLit("-"), natRange(nlo, nhi)))
	}
	if hi == nil || hi.Sign() >= 0 {
		plo := zero
		if lo != nil && lo.Sign() > 0 {
			plo = lo
		}
		alts = append(alts, natRange(plo, hi))
	}
	return eAltOf(alts...)
}

// natRange matches naturals in [lo, hi] without leading zeros and with at most
// maxNumDigits digits (hi nil: no other upper bound).
func natRange(lo, hi *big.Int) *expr {
	if hi != nil && len(hi.String()) > maxNumDigits {
		hi = nil
	}
	if hi != nil && lo.Cmp(hi) > 0 {
		return exprNoneV
	}
	ls := lo.String()
	if len(ls) > maxNumDigits {
		return exprNoneV
	}
	digit := eByteRange('0', '9')
	if hi == nil {
		// all numbers with more digits than lo, plus those with len(lo) digits >= lo
		n := len(ls)
		if lo.Sign() == 0 {
			return eAltOf(eLit("0"), eSeqOf(eByteRange('1', '9'), eRepOf(digit, 0, maxNumDigits-1)))
		}
		top := strings.Repeat("9", n)
		longer := exprNoneV
		if n < maxNumDigits {
			longer = eSeqOf(eByteRange('1', '9'), eRepOf(digit, n, maxNumDigits-1))
		}
		return eAltOf(sameLenRange(ls, top), longer)
	}
	hs := hi.String()
	var alts []*expr
	for n := len(ls); n <= len(hs); n++ {
		a := ls
		if n > len(ls) {
			a = "1" + strings.Repeat("0", n-1)
		}
		b := hs
		if n < len(hs) {
			b = strings.Repeat("9", n)
		}
		if n == 1 && len(ls) == 1 {
			a = ls
		}
		alts = append(alts, sameLenRange(a, b))
	}
	return eAltOf(alts...)
}

// sameLenRange matches digit strings of len(a) between a and b (a <= b, same length).
func sameLenRange(a, b string) *expr {
	if len(a) == 0 {
		return exprEmptyV
	}
	if a == b {
		return eLit(a)
	}
	if strings.Trim(a, "0") == "" && strings.Trim(b, "9") == "" {
		return eRepOf(eByteRange('0', '9'), len(a), len(a))
	}
	if a[0] == b[0] {
		return eSeqOf(eLit(a[:1]), sameLenRange(a[1:], b[1:]))
	}
	n := len(a) - 1
	allLow := strings.Repeat("0", n)
	allHigh := strings.Repeat("9", n)
	var alts []*expr
	// first digit a[0] with rest >= a[1:]
	alts = append(alts, eSeqOf(eLit(a[:1]), sameLenRange(a[1:], allHigh)))
	if b[0]-a[0] > 1 {
		alts = append(alts, eSeqOf(eByteRange(a[0]+1, b[0]-1), eRepOf(eByteRange('0', '9'), n, n)))
	}
	alts = append(alts, eSeqOf(eLit(b[:1]), sameLenRange(allLow, b[1:])))
	return eAltOf(alts...)
}

// ---- strings ----------------------------------------------------------------

var (
	anyStringCharOnce sync.Once
	anyStringCharExpr *expr
)

// anyStringChar is stringEncoder of every character (built once; expressions are
// immutable and shared).
func anyStringChar() *expr {
	anyStringCharOnce.Do(func() { anyStringCharExpr = stringEncoder(anyJSONCharRanges) })
	return anyStringCharExpr
}

// stringEncoder wraps each JSON character with the length counter: a guard at its
// start (which also marks the character boundary) and the count after it. The bounds
// are parameters of the automaton's start register, so every string shares it.
func stringEncoder(r []rune) *expr {
	return eSeqOf(eGuardOf(gCharLT, 0), jsonClass(r), eEffectOf(fCharInc, 0))
}

// stringSym returns a string rule: length bounds, an optional pattern (search
// semantics) or format, and optional keys it must not spell (object keys).
func (j *jsc) stringSym(minLen, maxLen int, patSrc, patPtr, format string, trie *keyTrie) int32 {
	kind := "string"
	if patSrc != "" {
		kind = "pattern:" + patSrc
	} else if format != "" {
		kind = "format:" + format
	}
	key := fmt.Sprintf("%s|%d|%d|%p", kind, minLen, maxLen, trie)
	if id, ok := j.leafMemo[key]; ok {
		return id
	}
	name := "string"
	if patSrc != "" {
		name = "pattern"
	} else if format != "" {
		name = "format-" + format
	}
	if cb, ok := stringBodies.Load(kind); ok {
		return j.stringLeaf(key, name, cb.(*cachedBody), minLen, maxLen, trie)
	}
	anyc := anyStringChar()
	var content *expr
	switch {
	case patSrc != "":
		cb, err := patternBody(patSrc, j.opts.maxNFANodes())
		if err != nil {
			var re *RegexError
			feature := ""
			if errors.As(err, &re) {
				feature = re.Feature
			}
			if j.opts.Lenient {
				j.warnings = append(j.warnings, fmt.Sprintf("ignored pattern %q at %s: %v", patSrc, patPtr, err))
				j.inexact = append(j.inexact, "pattern at "+patPtr)
				return j.stringSym(minLen, maxLen, "", "", format, trie)
			}
			if j.err == nil {
				kw := "pattern"
				if feature != "" {
					kw = "pattern (" + feature + ")"
				}
				j.err = &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: patPtr, Err: err}
			}
			return j.gb.add("error", exprNoneV)
		}
		return j.stringLeaf(key, name, cb, minLen, maxLen, trie)
	case format != "":
		fr, _, _ := formatRegex(format)
		e, err := regexWhole(fr, stringEncoder, j.opts.maxNFANodes())
		if err != nil {
			panic("grammars: bad format regex for " + format + ": " + err.Error())
		}
		content = e
	default:
		content = eStar(anyc)
	}
	return j.stringLeaf(key, name, storeStringBody(kind, content), minLen, maxLen, trie)
}

// storeStringBody wraps string content (characters in stringEncoder form) in the quotes
// and guards of a string leaf, and keeps it for every grammar of the process (bounded).
func storeStringBody(kind string, content *expr) *cachedBody {
	body := eSeqOf(eLit(`"`), eTrackOf(content), eGuardOf(gCharGE, 0), eGuardOf(gTrieOK, 0), eLit(`"`))
	var sb strings.Builder
	sb.WriteString("abs:")
	exprKey(body, &sb)
	cb := &cachedBody{body: body, key: sb.String()}
	if stringBodyCount.Add(1) < 10000 {
		stringBodies.Store(kind, cb)
	}
	return cb
}

// patternBody is the string leaf body of a JSON Schema pattern (search semantics),
// built once per process.
func patternBody(src string, budget int) (*cachedBody, error) {
	kind := "pattern:" + src
	if cb, ok := stringBodies.Load(kind); ok {
		return cb.(*cachedBody), nil
	}
	e, err := regexSearch(src, stringEncoder, anyStringChar(), budget)
	if err != nil {
		return nil, err
	}
	return storeStringBody(kind, e), nil
}

// checkPatterns translates every pattern and patternProperties regex of the schema, so
// that an unsupported construct is a compile error naming it and its JSON pointer,
// and not an error of a later mask when a generation first enters that subschema.
// The translations are kept for the lazy rules.
func (j *jsc) checkPatterns(root *jsonschema.Schema) error {
	seen := map[*jsonschema.Schema]bool{}
	for stack := []*jsonschema.Schema{root}; len(stack) > 0; {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if err := j.dl.check(); err != nil {
			return err
		}
		stack = append(stack, schemaChildren(s)...)
		if s.Pattern != nil {
			if _, ignored := s.Pattern.(ignoredRegexp); !ignored {
				if _, err := patternBody(s.Pattern.String(), j.opts.maxNFANodes()); err != nil {
					return regexCompileError("pattern", pointerOf(s)+"/pattern", err)
				}
			}
		}
		for re := range s.PatternProperties {
			if _, ignored := re.(ignoredRegexp); ignored {
				continue
			}
			if _, err := patternBody(re.String(), j.opts.maxNFANodes()); err != nil {
				return regexCompileError("patternProperties", pointerOf(s)+"/patternProperties", err)
			}
		}
	}
	return nil
}

// regexCompileError names the keyword (and the unsupported construct) of a regex
// error.
func regexCompileError(kw, ptr string, err error) error {
	var re *RegexError
	if errors.As(err, &re) && re.Feature != "" {
		kw += " (" + re.Feature + ")"
	}
	return &CompileError{Reason: ReasonRegex, Keyword: kw, Pointer: ptr, Err: err}
}

// String bodies are the same for every grammar: built once per process (bounded).
type cachedBody struct {
	body *expr
	key  string
}

var (
	stringBodies    sync.Map
	stringBodyCount atomic.Int64
)

func (j *jsc) stringLeaf(key, name string, cb *cachedBody, minLen, maxLen int, trie *keyTrie) int32 {
	id := j.gb.add(name, cb.body)
	sy := j.gb.syms[id]
	sy.noInline = true
	sy.abstractable = true
	sy.leafKey = cb.key
	sy.params = &auxVal{min: int32(max(minLen, 0)), max: int32(maxLen)}
	sy.trie = trie
	j.leafMemo[key] = id
	return id
}

func (j *jsc) stringExpr(m *merged) *expr {
	var pat, fmtS *jsonschema.Schema
	if len(m.patterns) > 0 {
		pat = m.patterns[0]
		for _, p := range m.patterns[1:] {
			if p.Pattern.String() != pat.Pattern.String() {
				j.semantic("pattern (more than one)", p)
			}
		}
	}
	if len(m.formats) > 0 {
		fmtS = m.formats[0]
		for _, f := range m.formats[1:] {
			if f.Format.Name != fmtS.Format.Name {
				j.semantic("format (more than one)", f)
			}
		}
	}
	patSrc, patPtr, format := "", "", ""
	if pat != nil {
		if _, ok := pat.Pattern.(ignoredRegexp); ok {
			j.warnings = append(j.warnings, fmt.Sprintf("ignored pattern %q at %s (unsupported regex)", pat.Pattern.String(), pointerOf(pat)))
		} else {
			patSrc, patPtr = pat.Pattern.String(), pointerOf(pat)+"/pattern"
		}
	}
	if fmtS != nil {
		f := fmtS.Format.Name
		_, exact, ok := formatRegex(f)
		switch {
		case !ok:
			if knownFormat(f) {
				j.semantic("format "+f, fmtS)
			}
		case patSrc != "":
			j.semantic("format "+f+" with pattern", fmtS)
		default:
			if !exact {
				j.semantic("format "+f, fmtS)
			}
			format = f
		}
	}
	maxLen := m.maxLen
	if fm := formatMaxLen(format); fm >= 0 && (maxLen < 0 || fm < maxLen) {
		maxLen = fm
	}
	return eCallOf(j.stringSym(m.minLen, maxLen, patSrc, patPtr, format, nil))
}

// ---- constants ----------------------------------------------------------------

// constExpr matches the JSON text of v as Python's json.dumps writes it (objects in
// any key order).
func (j *jsc) constExpr(v any) *expr {
	switch t := v.(type) {
	case nil:
		return eLit("null")
	case bool:
		if t {
			return eLit("true")
		}
		return eLit("false")
	case string:
		return eLitBytes(appendJSONString(nil, t))
	case json.Number:
		var alts []*expr
		for _, f := range numberForms(t) {
			alts = append(alts, eLit(f))
		}
		return eAltOf(alts...)
	case []any:
		parts := []*expr{eLit("["), j.inner()}
		for i, x := range t {
			if i > 0 {
				parts = append(parts, j.itemSep())
			}
			parts = append(parts, j.constExpr(x))
		}
		parts = append(parts, j.inner(), eLit("]"))
		return eSeqOf(parts...)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		members := make([]objMember, len(keys))
		for i, k := range keys {
			members[i] = objMember{key: k, value: j.constExpr(t[k]), required: true}
		}
		return j.ruleRef("const-object", j.objectBody(members, nil, nil, -1, -1))
	}
	return exprNoneV
}

// numberForms lists the texts Python prints for numbers equal to n: the integer
// form and the float form for integral values, the float repr otherwise.
func numberForms(n json.Number) []string {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return []string{string(n)}
	}
	var out []string
	f, _ := r.Float64()
	if r.IsInt() {
		out = append(out, r.Num().String())
		out = append(out, pyFloat(f))
	} else {
		out = append(out, pyFloat(f))
		if s := string(n); s != out[0] {
			out = append(out, s)
		}
	}
	seen := map[string]bool{}
	var uniq []string
	for _, s := range out {
		if !seen[s] {
			seen[s] = true
			uniq = append(uniq, s)
		}
	}
	return uniq
}

// ---- arrays -----------------------------------------------------------------

func (j *jsc) arrayExpr(conj []part) *expr {
	type memberArr struct {
		prefix []*jsonschema.Schema
		rest   *jsonschema.Schema // nil: anything
		noRest bool
	}
	var ms []memberArr
	minItems, maxItems := 0, -1
	for _, p := range conj {
		s := p.s
		if s.MinItems != nil && *s.MinItems > minItems {
			minItems = *s.MinItems
		}
		if s.MaxItems != nil && (maxItems < 0 || *s.MaxItems < maxItems) {
			maxItems = *s.MaxItems
		}
		var ma memberArr
		has := false
		if s.PrefixItems != nil || s.Items2020 != nil {
			ma.prefix = s.PrefixItems
			ma.rest = s.Items2020
			has = true
		} else if s.Items != nil {
			has = true
			switch it := s.Items.(type) {
			case []*jsonschema.Schema:
				ma.prefix = it
				switch ai := s.AdditionalItems.(type) {
				case bool:
					ma.noRest = !ai
				case *jsonschema.Schema:
					ma.rest = ai
				}
			case *jsonschema.Schema:
				ma.rest = it
			}
		}
		if ma.rest != nil && ma.rest.Bool != nil {
			if !*ma.rest.Bool {
				ma.noRest = true
			}
			ma.rest = nil
		}
		if has {
			ms = append(ms, ma)
		}
	}
	if maxItems >= 0 && minItems > maxItems {
		return exprNoneV
	}
	plen := 0
	for _, ma := range ms {
		plen = max(plen, len(ma.prefix))
	}
	// per-position schemas
	posParts := make([][]part, plen)
	limit := -1 // positions >= limit are impossible
	for i := 0; i < plen; i++ {
		for _, ma := range ms {
			switch {
			case i < len(ma.prefix):
				posParts[i] = append(posParts[i], part{s: ma.prefix[i]})
			case ma.noRest:
				if limit < 0 || i < limit {
					limit = i
				}
			case ma.rest != nil:
				posParts[i] = append(posParts[i], part{s: ma.rest})
			}
		}
	}
	var restParts []part
	noRest := false
	for _, ma := range ms {
		if ma.noRest {
			noRest = true
		} else if ma.rest != nil {
			restParts = append(restParts, part{s: ma.rest})
		}
	}
	if limit >= 0 && limit < plen {
		plen = limit
		posParts = posParts[:plen]
		noRest = true
	}
	if maxItems >= 0 && maxItems < plen {
		plen = maxItems
		posParts = posParts[:plen]
		noRest = true
	}
	if maxItems >= 0 && maxItems == plen {
		noRest = true
	}
	if noRest && minItems > plen {
		return exprNoneV
	}
	valOf := func(ps []part) *expr {
		if len(ps) == 0 {
			return eCallOf(j.anyValue())
		}
		return j.valueRef(ps)
	}
	closeAt := func(i int) *expr { // "]" after i items (prefix part)
		if i < minItems {
			return exprNoneV
		}
		return eSeqOf(j.inner(), eLit("]"))
	}
	// the tail after the prefix: more items from restParts
	var tail *expr
	if noRest {
		tail = closeAt(plen)
	} else {
		restMin := max(minItems-plen, 0)
		restMax := -1
		if maxItems >= 0 {
			restMax = maxItems - plen
		}
		item := valOf(restParts)
		counted := restMin > 0 || restMax >= 0
		capv := int32(max(restMin, restMax))
		// one more item, after sep: the maxItems guard comes before the separator,
		// so that ", " is offered only when an item may follow
		mk := func(sep *expr) *expr {
			if !counted {
				return eSeqOf(sep, item)
			}
			parts := []*expr{}
			if restMax >= 0 {
				parts = append(parts, eGuardOf(gCountLT, int32(restMax)))
			}
			parts = append(parts, sep, item, eEffectOf(fInc, capv))
			return eSeqOf(parts...)
		}
		closeG := eSeqOf(j.inner(), eLit("]"))
		if restMin > 0 {
			closeG = eSeqOf(eGuardOf(gCountGE, int32(restMin)), j.inner(), eLit("]"))
		}
		if plen == 0 {
			empty := closeAt(0)
			tail = eAltOf(empty, eSeqOf(mk(exprEmptyV), eStar(mk(j.itemSep())), closeG))
		} else {
			tail = eSeqOf(eStar(mk(j.itemSep())), closeG)
		}
	}
	// build the prefix from the end
	body := tail
	for i := plen - 1; i >= 0; i-- {
		sep := j.itemSep()
		if i == 0 {
			sep = exprEmptyV
		}
		body = eAltOf(closeAt(i), eSeqOf(sep, valOf(posParts[i]), body))
	}
	return j.ruleRef("array", eSeqOf(eLit("["), j.inner(), body))
}

// ---- objects ----------------------------------------------------------------

type objMember struct {
	key      string
	value    *expr // nil: the key is forbidden
	required bool
}

type keyPattern struct {
	src   string
	value *expr
}

// objectBody builds an object automaton: known members in any order, each at most
// once, required ones tracked in the item register; pattern and additional members
// with keys that spell no known key.
//
// Every guard that decides whether one more member may come sits before the item
// separator, so the separator is offered only when a member can follow it: a known
// member not yet present, or an extra (pattern or additional) member, within
// maxProperties, and an optional member only while maxProperties leaves room for the
// required members still missing. Otherwise a generation could write ", " after the
// last possible member and find no continuation (a dead end).
func (j *jsc) objectBody(members []objMember, patterns []keyPattern, additional *expr, minP, maxP int) *expr {
	var known []objMember
	for _, mb := range members {
		if mb.value != nil {
			known = append(known, mb)
		} else if mb.required {
			return exprNoneV
		}
	}
	req := make([]uint64, (len(known)+63)/64)
	nreq := 0
	for i, mb := range known {
		if mb.required {
			req[i>>6] |= 1 << (uint(i) & 63)
			nreq++
		}
	}
	if maxP >= 0 && nreq > maxP {
		return exprNoneV
	}
	counted := minP > 0 || maxP >= 0
	capv := int32(max(minP, maxP))
	var trie *keyTrie
	if len(patterns) > 0 || additional != nil {
		keys := make([][]byte, 0, len(members))
		// known keys, and forbidden ones: pattern and additional members must not
		// produce them
		for _, mb := range members {
			keys = append(keys, jsonContent(mb.key))
		}
		trie = newKeyTrie(keys)
	}
	setIdx := int32(-1)
	if len(known) > 0 {
		j.sets = append(j.sets, req)
		setIdx = int32(len(j.sets) - 1)
	}
	// guards of one more member: within maxProperties, and an optional member only
	// while the required ones still missing fit
	room := func(optional bool) []*expr {
		if maxP < 0 {
			return nil
		}
		if optional && nreq > 0 {
			return []*expr{eGuardOf(gCountLT, int32(maxP)), &expr{op: eGuard, aux: auxOp{kind: gUnionLT, arg: setIdx, arg2: int32(maxP)}}}
		}
		return []*expr{eGuardOf(gCountLT, int32(maxP))}
	}
	inc := exprEmptyV
	if counted {
		inc = eEffectOf(fInc, capv)
	}
	// member alternatives, each with its guards first and then sep (the separator
	// before it, empty for the first member)
	members1 := func(sep *expr) *expr {
		var alts []*expr
		for i, mb := range known {
			parts := append([]*expr{eGuardOf(gNotBit, int32(i))}, room(!mb.required)...)
			parts = append(parts, sep, eLitBytes(appendJSONString(nil, mb.key)), eEffectOf(fSetBit, int32(i)), j.keySep(), mb.value)
			alts = append(alts, eSeqOf(parts...))
		}
		for _, kp := range patterns {
			parts := append(room(true), sep, eCallOf(j.stringSym(0, -1, kp.src, "patternProperties", "", trie)), j.keySep(), kp.value, inc)
			alts = append(alts, eSeqOf(parts...))
		}
		if additional != nil {
			parts := append(room(true), sep, eCallOf(j.stringSym(0, -1, "", "", "", trie)), j.keySep(), additional, inc)
			alts = append(alts, eSeqOf(parts...))
		}
		return eAltOf(alts...)
	}
	var closeParts []*expr
	if len(known) > 0 && nreq > 0 {
		closeParts = append(closeParts, eGuardOf(gHasBits, setIdx))
	}
	if minP > 0 {
		closeParts = append(closeParts, eGuardOf(gCountGE, int32(minP)))
	}
	closeParts = append(closeParts, j.inner(), eLit("}"))
	closeE := eSeqOf(closeParts...)
	return eSeqOf(eLit("{"), j.inner(), eAltOf(closeE, eSeqOf(members1(exprEmptyV), eStar(members1(j.itemSep())), closeE)))
}

func (j *jsc) objectExpr(conj []part) *expr {
	// members that constrain objects
	var ms []*jsonschema.Schema
	minP, maxP := 0, -1
	required := map[string]bool{}
	for _, p := range conj {
		s := p.s
		if s.Bool != nil {
			continue
		}
		if s.MinProperties != nil && *s.MinProperties > minP {
			minP = *s.MinProperties
		}
		if s.MaxProperties != nil && (maxP < 0 || *s.MaxProperties < maxP) {
			maxP = *s.MaxProperties
		}
		for _, r := range s.Required {
			required[r] = true
		}
		if s.Properties != nil || s.PatternProperties != nil || s.AdditionalProperties != nil {
			ms = append(ms, s)
		}
	}
	if maxP >= 0 && minP > maxP {
		return exprNoneV
	}
	keySet := map[string]bool{}
	for _, s := range ms {
		for k := range s.Properties {
			keySet[k] = true
		}
	}
	for k := range required {
		keySet[k] = true
	}
	keys := make([]string, 0, len(keySet))
	for k := range keySet {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	members := make([]objMember, 0, len(keys))
	for _, k := range keys {
		var ps []part
		forbidden := false
		for _, s := range ms {
			matched := false
			if ps2, ok := s.Properties[k]; ok {
				ps = append(ps, part{s: ps2})
				matched = true
			}
			for re, ps2 := range s.PatternProperties {
				if re.MatchString(k) {
					ps = append(ps, part{s: ps2})
					matched = true
				}
			}
			if matched {
				continue
			}
			switch ap := s.AdditionalProperties.(type) {
			case bool:
				if !ap {
					forbidden = true
				}
			case *jsonschema.Schema:
				ps = append(ps, part{s: ap})
			}
		}
		mb := objMember{key: k, required: required[k]}
		if len(ps) > 0 && j.merge(j.expand(ps), false).empty() {
			forbidden = true
		}
		if !forbidden {
			if len(ps) == 0 {
				mb.value = eCallOf(j.anyValue())
			} else {
				mb.value = j.valueRef(ps)
			}
		}
		members = append(members, mb)
	}
	// keys outside the known set
	var patterns []keyPattern
	var additional *expr
	var nontrivial []*jsonschema.Schema
	for _, s := range ms {
		ap, isBool := s.AdditionalProperties.(bool)
		if len(s.PatternProperties) > 0 || s.AdditionalProperties != nil && !(isBool && ap) {
			nontrivial = append(nontrivial, s)
		}
	}
	switch {
	case len(nontrivial) == 0:
		additional = eCallOf(j.anyValue())
	default:
		if len(nontrivial) > 1 {
			// keys outside every member's properties: intersecting several members'
			// pattern/additional languages is approximated by the most restrictive member
			j.semantic("additionalProperties/patternProperties in allOf", nontrivial[1])
		}
		s := nontrivial[0]
		for _, t := range nontrivial[1:] {
			if ap, ok := t.AdditionalProperties.(bool); ok && !ap && len(t.PatternProperties) == 0 {
				s = t
			}
		}
		pats := make([]string, 0, len(s.PatternProperties))
		bySrc := map[string]*jsonschema.Schema{}
		for re, ps := range s.PatternProperties {
			src := re.String()
			if _, ok := re.(ignoredRegexp); ok {
				j.warnings = append(j.warnings, fmt.Sprintf("ignored patternProperties %q at %s (unsupported regex)", src, pointerOf(s)))
				j.semantic("patternProperties", s)
				continue
			}
			pats = append(pats, src)
			bySrc[src] = ps
		}
		sort.Strings(pats)
		for _, src := range pats {
			patterns = append(patterns, keyPattern{src: src, value: j.valueRef([]part{{s: bySrc[src]}})})
		}
		if len(pats) > 1 {
			j.semantic("patternProperties (overlapping patterns)", s)
		}
		switch ap := s.AdditionalProperties.(type) {
		case nil:
			additional = eCallOf(j.anyValue())
		case bool:
			if ap {
				additional = eCallOf(j.anyValue())
			}
		case *jsonschema.Schema:
			additional = j.valueRef([]part{{s: ap}})
		}
		if additional != nil && len(pats) > 0 {
			// additional keys must not match a pattern: enforced by the check
			j.semantic("additionalProperties with patternProperties", s)
		}
	}
	return j.ruleRef("object", j.objectBody(members, patterns, additional, minP, maxP))
}
