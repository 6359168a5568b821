package grammars

import (
	"fmt"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Emptiness: whether any JSON value satisfies a conjunction of subschemas. The lazy
// translation places a rule before the rules it calls are translated, so a call of a
// subschema that admits no value would be found dead only after the input leading to
// it was written: `{"matcher": ` and then nothing (a dead end). The translation asks
// nothing() first and leaves such members, items and alternatives out.
//
// The answer looks through $ref/allOf, anyOf/oneOf alternatives, required members,
// minProperties and the items minItems needs, to a bounded depth and amount of work;
// past those bounds, and on a cycle, a subschema counts as satisfiable, so "nothing"
// is always exact (the grammar never loses a value) while "something" may be wrong in
// the rare schemas the bounds cut (a dead end remains possible there).

const (
	emptyDepth  = 12  // nested subschemas one question may look through
	emptyBudget = 400 // conjunctions one question may evaluate (memo hits are free)
)

type emptiness uint8

const (
	emUnknown emptiness = iota // not decided within the bounds: taken as satisfiable
	emSome
	emNothing
)

// nothing reports whether no JSON value satisfies every part (exactly: a false
// answer may mean "not decided").
func (j *jsc) nothing(ps []part) bool {
	if j.emptyMemo == nil {
		j.emptyMemo = map[string]emptiness{}
	}
	// the question must not change the translation: keywords merge() meets in
	// subschemas that are never translated are not recorded
	err, nIn, nWarn := j.err, len(j.inexact), len(j.warnings)
	budget := emptyBudget
	r := j.emptiness(ps, emptyDepth, &budget, map[string]bool{})
	j.err, j.inexact, j.warnings = err, j.inexact[:nIn], j.warnings[:nWarn]
	return r == emNothing
}

// conjKey is the canonical key of a conjunction (as symFor's).
func (j *jsc) conjKey(conj []part) string {
	_, key := j.canonical(conj)
	return key
}

// canonical sorts a conjunction's parts by schema and skip, drops repeats, and returns
// them with their key.
func (j *jsc) canonical(parts []part) ([]part, string) {
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
	return uniq, kb.String()
}

func (j *jsc) emptiness(ps []part, depth int, budget *int, onPath map[string]bool) emptiness {
	conj := j.expand(ps)
	key := j.conjKey(conj)
	if r, ok := j.emptyMemo[key]; ok {
		return r
	}
	if onPath[key] || depth <= 0 || *budget <= 0 {
		return emUnknown
	}
	*budget--
	onPath[key] = true
	r := j.emptinessOf(conj, depth, budget, onPath)
	delete(onPath, key)
	if r != emUnknown {
		j.emptyMemo[key] = r
	}
	return r
}

// emptinessOf decides an expanded conjunction (see emptiness).
func (j *jsc) emptinessOf(conj []part, depth int, budget *int, onPath map[string]bool) emptiness {
	for _, p := range conj {
		if p.s.Bool != nil && !*p.s.Bool {
			return emNothing
		}
	}
	// a pending disjunction: satisfiable if one alternative is
	for i, p := range conj {
		s := p.s
		var alts []*jsonschema.Schema
		var flag uint8
		switch {
		case len(s.AnyOf) > 0 && p.skip&1 == 0:
			alts, flag = s.AnyOf, 1
		case len(s.OneOf) > 0 && p.skip&2 == 0:
			alts, flag = s.OneOf, 2
		default:
			continue
		}
		base := append([]part(nil), conj...)
		base[i].skip |= flag
		r := emNothing
		for _, a := range alts {
			ps := append(append([]part(nil), base...), part{s: a})
			switch j.emptiness(ps, depth-1, budget, onPath) {
			case emSome:
				return emSome
			case emUnknown:
				r = emUnknown
			}
		}
		return r
	}
	m := j.merge(conj, true)
	if m.empty() {
		return emNothing
	}
	if m.hasEnum || m.types&(tyNull|tyBool|tyInt|tyFrac|tyStr) != 0 {
		// enum values passed the validator; scalars are taken as satisfiable (a number
		// range or a string pattern the grammar finds empty is a leaf automaton's
		// dead start, refused at the key before it)
		return emSome
	}
	r := emNothing
	if m.types&tyArr != 0 {
		r = j.arrayEmptiness(conj, depth, budget, onPath)
		if r == emSome {
			return r
		}
	}
	if m.types&tyObj != 0 {
		switch j.objectEmptiness(conj, depth, budget, onPath) {
		case emSome:
			return emSome
		case emUnknown:
			r = emUnknown
		}
	}
	return r
}

// arrayEmptiness: an array needs its first minItems items.
func (j *jsc) arrayEmptiness(conj []part, depth int, budget *int, onPath map[string]bool) emptiness {
	sh, ok := arrayShape(conj)
	if !ok {
		return emNothing
	}
	r := emSome
	restDone := false
	for i := 0; i < sh.minItems; i++ {
		var ps []part
		switch {
		case i < len(sh.posParts):
			ps = sh.posParts[i]
		case sh.noRest:
			return emNothing
		case restDone:
			continue
		default:
			ps, restDone = sh.restParts, true
		}
		if len(ps) == 0 {
			continue
		}
		switch j.emptiness(ps, depth-1, budget, onPath) {
		case emNothing:
			return emNothing
		case emUnknown:
			r = emUnknown
		}
	}
	return r
}

// objectEmptiness: an object needs its required members, and minProperties members
// in all.
func (j *jsc) objectEmptiness(conj []part, depth int, budget *int, onPath map[string]bool) emptiness {
	sh := objectShape(conj)
	if sh.maxP >= 0 && (sh.minP > sh.maxP || len(sh.required) > sh.maxP) {
		return emNothing
	}
	r := emSome
	for _, k := range sh.keys {
		if !sh.required[k] {
			continue
		}
		ps, forbidden := sh.memberParts(k)
		if forbidden {
			return emNothing
		}
		if len(ps) == 0 {
			continue
		}
		switch j.emptiness(ps, depth-1, budget, onPath) {
		case emNothing:
			return emNothing
		case emUnknown:
			r = emUnknown
		}
	}
	if sh.minP <= len(sh.required) {
		return r
	}
	if s, _ := sh.extrasSchema(); s == nil || len(s.PatternProperties) > 0 {
		return r // other keys (taken as possible)
	} else if ap, ok := s.AdditionalProperties.(bool); !ok || ap {
		return r
	}
	// only known members: are there enough optional ones?
	n := len(sh.required)
	for _, k := range sh.keys {
		if sh.required[k] {
			continue
		}
		ps, forbidden := sh.memberParts(k)
		if forbidden {
			continue
		}
		if len(ps) > 0 {
			e := j.emptiness(ps, depth-1, budget, onPath)
			if e == emNothing {
				continue
			}
			if e == emUnknown {
				r = emUnknown
			}
		}
		if n++; n >= sh.minP {
			return r
		}
	}
	return emNothing
}
