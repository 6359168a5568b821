package grammars

import (
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema arrays: prefixItems/items/additionalItems, minItems/maxItems.

// arrShape is what a conjunction says about arrays: the schemas of the prefix
// positions, of the items after them (noRest: none may follow), and the bounds.
type arrShape struct {
	posParts           [][]part
	restParts          []part
	noRest             bool
	minItems, maxItems int
}

// arrayShape returns the conjunction's array shape; false if no array satisfies it.
func arrayShape(conj []part) (arrShape, bool) {
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
		return arrShape{}, false
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
		return arrShape{}, false
	}
	return arrShape{posParts: posParts, restParts: restParts, noRest: noRest, minItems: minItems, maxItems: maxItems}, true
}

func (j *jsc) arrayExpr(conj []part) *expr {
	sh, ok := arrayShape(conj)
	if !ok {
		return exprNoneV
	}
	posParts, restParts, noRest, minItems, maxItems := sh.posParts, sh.restParts, sh.noRest, sh.minItems, sh.maxItems
	// a position whose item no JSON value satisfies ends the array before it
	for i, ps := range posParts {
		if len(ps) > 0 && j.nothing(ps) {
			posParts, noRest = posParts[:i], true
			break
		}
	}
	if !noRest && len(restParts) > 0 && j.nothing(restParts) {
		noRest = true
	}
	plen := len(posParts)
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
