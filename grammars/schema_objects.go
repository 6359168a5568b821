package grammars

import (
	"fmt"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema objects: properties, required, patternProperties, additionalProperties,
// minProperties/maxProperties as member automata.

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
	if len(patterns) == 0 && additional == nil && minP > len(known) {
		return exprNoneV // fewer possible members than minProperties
	}
	counted := minP > 0 || maxP >= 0
	capv := int32(max(minP, maxP))
	var trie *keyTrie
	if (len(patterns) > 0 || additional != nil) && len(members) > 0 {
		// (with no known keys there is nothing to keep out: no trie, so that the key
		// strings share the automata of plain strings, counted patterns included)
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

// objShape is what a conjunction says about objects: the members that constrain
// them, the known keys (properties and required), and the bounds.
type objShape struct {
	ms         []*jsonschema.Schema
	keys       []string
	required   map[string]bool
	minP, maxP int
}

func objectShape(conj []part) objShape {
	sh := objShape{maxP: -1, required: map[string]bool{}}
	for _, p := range conj {
		s := p.s
		if s.Bool != nil {
			continue
		}
		if s.MinProperties != nil && *s.MinProperties > sh.minP {
			sh.minP = *s.MinProperties
		}
		if s.MaxProperties != nil && (sh.maxP < 0 || *s.MaxProperties < sh.maxP) {
			sh.maxP = *s.MaxProperties
		}
		for _, r := range s.Required {
			sh.required[r] = true
		}
		if s.Properties != nil || s.PatternProperties != nil || s.AdditionalProperties != nil {
			sh.ms = append(sh.ms, s)
		}
	}
	keySet := map[string]bool{}
	for _, s := range sh.ms {
		for k := range s.Properties {
			keySet[k] = true
		}
	}
	for k := range sh.required {
		keySet[k] = true
	}
	sh.keys = make([]string, 0, len(keySet))
	for k := range keySet {
		sh.keys = append(sh.keys, k)
	}
	sort.Strings(sh.keys)
	return sh
}

// memberParts returns the schemas the value of member k must satisfy, or forbidden
// when some member's additionalProperties is false for k.
func (sh *objShape) memberParts(k string) (ps []part, forbidden bool) {
	for _, s := range sh.ms {
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
	return ps, forbidden
}

// extrasSchema returns the member whose patternProperties/additionalProperties
// govern keys outside the known set (the most restrictive one when several do), and
// the others; nil when no member constrains them.
func (sh *objShape) extrasSchema() (*jsonschema.Schema, []*jsonschema.Schema) {
	var nontrivial []*jsonschema.Schema
	for _, s := range sh.ms {
		ap, isBool := s.AdditionalProperties.(bool)
		if len(s.PatternProperties) > 0 || s.AdditionalProperties != nil && !(isBool && ap) {
			nontrivial = append(nontrivial, s)
		}
	}
	if len(nontrivial) == 0 {
		return nil, nil
	}
	s := nontrivial[0]
	for _, t := range nontrivial[1:] {
		if ap, ok := t.AdditionalProperties.(bool); ok && !ap && len(t.PatternProperties) == 0 {
			s = t
		}
	}
	return s, nontrivial
}

func (j *jsc) objectExpr(conj []part) *expr {
	sh := objectShape(conj)
	minP, maxP := sh.minP, sh.maxP
	if maxP >= 0 && minP > maxP {
		return exprNoneV
	}
	members := make([]objMember, 0, len(sh.keys))
	for _, k := range sh.keys {
		ps, forbidden := sh.memberParts(k)
		mb := objMember{key: k, required: sh.required[k]}
		// a member whose value no JSON value satisfies is impossible (its key is
		// never offered; a required one makes the object impossible)
		if len(ps) > 0 && j.nothing(ps) {
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
	s, nontrivial := sh.extrasSchema()
	switch {
	case s == nil:
		additional = eCallOf(j.anyValue())
	default:
		if len(nontrivial) > 1 {
			// keys outside every member's properties: intersecting several members'
			// pattern/additional languages is approximated by the most restrictive member
			j.semantic("additionalProperties/patternProperties in allOf", nontrivial[1])
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
			ps := []part{{s: bySrc[src]}}
			if j.nothing(ps) {
				continue // no value for such a key: none can be written
			}
			patterns = append(patterns, keyPattern{src: src, value: j.valueRef(ps)})
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
			if ps := []part{{s: ap}}; !j.nothing(ps) {
				additional = j.valueRef(ps)
			}
		}
		if ap, ok := s.AdditionalProperties.(bool); !(ok && !ap) && len(pats) > 0 {
			// additional keys must not match a pattern: enforced by the check
			j.semantic("additionalProperties with patternProperties", s)
		}
	}
	return j.ruleRef("object", j.objectBody(members, patterns, additional, minP, maxP))
}
