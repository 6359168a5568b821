package grammars

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema references: the subschema graph ($ref, $dynamicRef, allOf, ...), reference
// cycles, rule identities of conjunctions, and the keywords left to the semantic check.

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
	uniq, key := j.canonical(parts)
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
	j.semanticAt(kw, pointerOf(s))
}

// semanticAt records a keyword that only the document check enforces, at ptr.
func (j *jsc) semanticAt(kw, ptr string) {
	msg := fmt.Sprintf("%s at %s", kw, ptr)
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
			j.err = &CompileError{Reason: ReasonUnsupported, Keyword: kw, Pointer: ptr, Err: errors.New("not expressible as a grammar (GrammarOnly is set)")}
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
