package grammars

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	doc, err := parseJSON(schema)
	if err != nil {
		return nil, &CompileError{Reason: ReasonInvalidSchema, Err: fmt.Errorf("schema is not JSON: %w", err)}
	}
	if d := jsonDepth(doc, c.opts.maxSchemaDepth()+1); d > c.opts.maxSchemaDepth() {
		return nil, &CompileError{Reason: ReasonLimit, Err: &LimitError{What: "levels of schema nesting", Limit: c.opts.maxSchemaDepth()}}
	}
	canon := appendCanon(nil, doc)
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

// appendCanon appends a canonical text of a decoded JSON value (object members in
// sorted order, numbers as written, strings quoted with '"' and '\\' escaped): equal
// for documents that differ only in spacing and member order, the compiled-grammar
// cache's key.
func appendCanon(b []byte, v any) []byte {
	switch t := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, t)
	case json.Number:
		return append(b, t...)
	case string:
		return appendCanonString(b, t)
	case []any:
		b = append(b, '[')
		for i, x := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanon(b, x)
		}
		return append(b, ']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonString(b, k)
			b = append(b, ':')
			b = appendCanon(b, t[k])
		}
		return append(b, '}')
	}
	return fmt.Appendf(b, "%v", v)
}

func appendCanonString(b []byte, s string) []byte {
	b = append(b, '"')
	for {
		i := strings.IndexAny(s, `"\\`)
		if i < 0 {
			break
		}
		b = append(append(append(b, s[:i]...), '\\'), s[i])
		s = s[i+1:]
	}
	return append(append(b, s...), '"')
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

func (r ignoredRegexp) String() string { return r.src }

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
			if tooManyRepeats(err2) {
				if r, err3 := ecma2Compile(s); err3 == nil {
					return r, nil
				}
			}
		} else if re, ok := err.(*RegexError); ok && needsBacktracking(re.Feature) {
			// the check matches these exactly; the grammar takes a wider pattern
			// (regex_approx.go)
			r, err2 := ecma2Compile(s)
			if err2 == nil {
				return r, nil
			}
			err = err2
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

// part is a subschema in a conjunction; skip marks disjunctions already expanded.
type part struct {
	s    *jsonschema.Schema
	skip uint8 // 1: anyOf done, 2: oneOf done, 4: no strings (the disjunction's merged string leaf has them)
}

type jsc struct {
	c        *Compiler
	opts     Options
	gb       *grammarBuilder
	dl       *deadline
	root     *jsonschema.Schema
	fast     bool // root is loadFast's: values are validated by fastValid, not the library
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
	// emptyMemo: conjunction key -> decided emptiness (schema_empty.go)
	emptyMemo map[string]emptiness
}

func (c *Compiler) compileSchema(doc any, dl *deadline) (*Grammar, error) {
	// the library cannot be interrupted: run the load with the deadline, leaving it to
	// finish in the background if it overruns (the depth limit keeps that short)
	type loaded struct {
		s    *jsonschema.Schema
		fast bool
		err  error
	}
	ch := make(chan loaded, 1)
	go func() {
		s, libDoc, dynamic, err := c.loadFast(doc)
		if err == nil && !dynamic {
			ch <- loaded{s, true, nil}
			return
		}
		if err != nil && err != errUseLibrary {
			ch <- loaded{nil, false, err}
			return
		}
		if err == nil {
			// dynamic scopes: the library's validator decides values (its compile
			// of the same document, less the duplicate ids loadFast tolerates)
			doc = libDoc
		}
		s, err = c.loadSchema(doc)
		ch <- loaded{s, false, err}
	}()
	var sch *jsonschema.Schema
	var fast bool
	select {
	case l := <-ch:
		if l.err != nil {
			return nil, l.err
		}
		sch, fast = l.s, l.fast
	case <-time.After(time.Until(dl.at)):
		return nil, &TimeoutError{Limit: dl.limit}
	}
	j := &jsc{c: c, opts: c.opts, gb: newGrammarBuilder(), dl: dl, root: sch, fast: fast,
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
		v, err := parseJSON(doc)
		if err != nil {
			return err
		}
		if fast {
			if !fastValid(sch, v) {
				return errors.New("the document is not valid against the schema")
			}
			return nil
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
