package grammars

import (
	"encoding/json"
	"math/big"
	"sort"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema keywords: conjunctions merged into one set of constraints (type, enum,
// const, bounds, ...), anyOf/oneOf as alternatives, constants, and the value rule.

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
	var alive [][]part
	var types []uint8
	var discs []map[string][]any
	var strs []altString
	for _, a := range alts {
		ps := append(append([]part(nil), base...), part{s: a})
		if j.nothing(ps) {
			continue
		}
		ex := j.expand(ps)
		m := j.merge(ex, false)
		types = append(types, m.types)
		discs = append(discs, m.discriminators())
		if st, ok := j.splittableString(ex, m); ok {
			st.alt = len(alive)
			strs = append(strs, st)
		}
		alive = append(alive, ps)
	}
	if flag == 2 && !pairwiseDisjoint(types, discs) {
		j.semantic("oneOf", conj[i].s)
	}
	// the string parts merged into one leaf per length bounds (schema_strings.go);
	// those alternatives keep their other types
	var exprs []*expr
	if !j.opts.plainStrings {
		exprs = j.mergeStrings(alive, strs)
	}
	for _, ps := range alive {
		if ps != nil {
			exprs = append(exprs, j.valueRef(ps))
		}
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
	case string:
		y, ok := b.(string)
		return ok && x == y
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case nil:
		return b == nil
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
		if p.skip&skipStrings != 0 {
			m.types &^= tyStr
		}
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
				if !validate || onlyEnumType(p.s) || onlyRefs(p.s) {
					continue
				}
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
				}
				if !j.validValue(p.s, p.skip, v) {
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

// validValue reports whether v is valid against s, less its anyOf (skip&1) and oneOf
// (skip&2), as the library's validator decides.
func (j *jsc) validValue(s *jsonschema.Schema, skip uint8, v any) bool {
	if skip != 0 {
		c := *s
		if skip&1 != 0 {
			c.AnyOf = nil
		}
		if skip&2 != 0 {
			c.OneOf = nil
		}
		s = &c
	}
	if j.fast {
		return fastValid(s, v)
	}
	return s.Validate(v) == nil
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

// onlyRefs: s constrains nothing but through $ref and allOf, whose schemas expand()
// makes members of the conjunction themselves (validating a value against s would
// validate it against them again: with a large enum behind the $ref, a scan of the
// enum per value).
func onlyRefs(s *jsonschema.Schema) bool {
	if s.Ref == nil && len(s.AllOf) == 0 {
		return false
	}
	c := *s
	c.Ref, c.AllOf = nil, nil
	return onlyEnumType(&c)
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
