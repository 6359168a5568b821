package grammars

import (
	"encoding/json"
	"math/big"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validation of a JSON value against a Schema that loadFast built, keyword by keyword
// as the schema library's validator decides (drafts' differences included), for the
// document check and for testing enum values against subschemas. It does not follow
// dynamic scopes: a graph with $dynamicRef, $recursiveRef, unevaluatedProperties or
// unevaluatedItems is left to the library (loadFast reports it).
// TestFastValidateMatchesLibrary compares the two on the test data's schemas and
// instances.

// fastValid reports whether v is valid against s (a graph without dynamic scopes).
func fastValid(s *jsonschema.Schema, v any) bool {
	var vd fastValidator
	return vd.valid(s, v)
}

type fastValidator struct {
	// the schemas applied to the current instance location, for the library's
	// reference-cycle rule: a schema met again at the same location fails
	here []*jsonschema.Schema
}

// valid applies s to v at the current instance location.
func (vd *fastValidator) valid(s *jsonschema.Schema, v any) bool {
	if s.Bool != nil {
		return *s.Bool
	}
	for _, x := range vd.here {
		if x == s {
			return false
		}
	}
	vd.here = append(vd.here, s)
	ok := vd.apply(s, v)
	vd.here = vd.here[:len(vd.here)-1]
	return ok
}

// validAt applies s to v, an instance one level down.
func (vd *fastValidator) validAt(s *jsonschema.Schema, v any) bool {
	saved := vd.here
	vd.here = nil
	ok := vd.valid(s, v)
	vd.here = saved
	return ok
}

func (vd *fastValidator) apply(s *jsonschema.Schema, v any) bool {
	if s.Types != nil && !s.Types.IsEmpty() && typesOf(s.Types)&valueType(v) == 0 {
		return false
	}
	if s.Const != nil && !jsonEqual(v, *s.Const) {
		return false
	}
	if s.Enum != nil && !inEnum(s.Enum.Values, v) {
		return false
	}
	if s.Format != nil && s.Format.Validate(v) != nil {
		return false
	}
	if s.Ref != nil {
		ok := vd.valid(s.Ref, v)
		if s.DraftVersion < 2019 || !ok {
			return ok
		}
	}
	switch t := v.(type) {
	case map[string]any:
		if !vd.object(s, t) {
			return false
		}
	case []any:
		if !vd.array(s, t) {
			return false
		}
	case string:
		if !vd.str(s, t) {
			return false
		}
	case json.Number:
		if !number(s, t) {
			return false
		}
	}
	if s.Not != nil && vd.valid(s.Not, v) {
		return false
	}
	for _, a := range s.AllOf {
		if !vd.valid(a, v) {
			return false
		}
	}
	if len(s.AnyOf) > 0 {
		any := false
		for _, a := range s.AnyOf {
			if vd.valid(a, v) {
				any = true
				break
			}
		}
		if !any {
			return false
		}
	}
	if len(s.OneOf) > 0 {
		n := 0
		for _, a := range s.OneOf {
			if vd.valid(a, v) {
				if n++; n > 1 {
					return false
				}
			}
		}
		if n != 1 {
			return false
		}
	}
	if s.If != nil {
		if vd.valid(s.If, v) {
			if s.Then != nil && !vd.valid(s.Then, v) {
				return false
			}
		} else if s.Else != nil && !vd.valid(s.Else, v) {
			return false
		}
	}
	return true
}

func inEnum(vals []any, v any) bool {
	if t, ok := v.(string); ok {
		for _, x := range vals {
			if u, ok := x.(string); ok && u == t {
				return true
			}
		}
		return false
	}
	for _, x := range vals {
		if jsonEqual(v, x) {
			return true
		}
	}
	return false
}

func missing(obj map[string]any, keys []string) bool {
	for _, k := range keys {
		if _, ok := obj[k]; !ok {
			return true
		}
	}
	return false
}

func (vd *fastValidator) object(s *jsonschema.Schema, obj map[string]any) bool {
	if s.MinProperties != nil && len(obj) < *s.MinProperties {
		return false
	}
	if s.MaxProperties != nil && len(obj) > *s.MaxProperties {
		return false
	}
	if missing(obj, s.Required) {
		return false
	}
	for k, dep := range s.Dependencies {
		if _, ok := obj[k]; !ok {
			continue
		}
		switch d := dep.(type) {
		case []string:
			if missing(obj, d) {
				return false
			}
		case *jsonschema.Schema:
			if !vd.valid(d, obj) {
				return false
			}
		}
	}
	for k, x := range obj {
		evaluated := false
		if p, ok := s.Properties[k]; ok {
			evaluated = true
			if !vd.validAt(p, x) {
				return false
			}
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(k) {
				evaluated = true
				if !vd.validAt(p, x) {
					return false
				}
			}
		}
		if !evaluated {
			switch a := s.AdditionalProperties.(type) {
			case bool:
				if !a {
					return false
				}
			case *jsonschema.Schema:
				if !vd.validAt(a, x) {
					return false
				}
			}
		}
	}
	if s.DraftVersion == 4 {
		return true
	}
	if s.PropertyNames != nil {
		for k := range obj {
			if !vd.validAt(s.PropertyNames, k) {
				return false
			}
		}
	}
	if s.DraftVersion == 6 {
		return true
	}
	for k, d := range s.DependentSchemas {
		if _, ok := obj[k]; ok && !vd.valid(d, obj) {
			return false
		}
	}
	for k, req := range s.DependentRequired {
		if _, ok := obj[k]; ok && missing(obj, req) {
			return false
		}
	}
	return true
}

func (vd *fastValidator) array(s *jsonschema.Schema, arr []any) bool {
	if s.MinItems != nil && len(arr) < *s.MinItems {
		return false
	}
	if s.MaxItems != nil && len(arr) > *s.MaxItems {
		return false
	}
	if s.UniqueItems && len(arr) > 1 {
		for i := 1; i < len(arr); i++ {
			for j := 0; j < i; j++ {
				if jsonEqual(arr[i], arr[j]) {
					return false
				}
			}
		}
	}
	if s.DraftVersion < 2020 {
		done := 0
		switch items := s.Items.(type) {
		case *jsonschema.Schema:
			for _, x := range arr {
				if !vd.validAt(items, x) {
					return false
				}
			}
			done = len(arr)
		case []*jsonschema.Schema:
			done = min(len(arr), len(items))
			for i, x := range arr[:done] {
				if !vd.validAt(items[i], x) {
					return false
				}
			}
		}
		switch a := s.AdditionalItems.(type) {
		case bool:
			if !a && done != len(arr) {
				return false
			}
		case *jsonschema.Schema:
			for _, x := range arr[done:] {
				if !vd.validAt(a, x) {
					return false
				}
			}
		}
	} else {
		done := min(len(s.PrefixItems), len(arr))
		for i, x := range arr[:done] {
			if !vd.validAt(s.PrefixItems[i], x) {
				return false
			}
		}
		if s.Items2020 != nil {
			for _, x := range arr[done:] {
				if !vd.validAt(s.Items2020, x) {
					return false
				}
			}
		}
	}
	if s.Contains != nil {
		n := 0
		for _, x := range arr {
			if vd.validAt(s.Contains, x) {
				n++
			}
		}
		if s.MinContains != nil {
			if n < *s.MinContains {
				return false
			}
		} else if n == 0 {
			return false
		}
		if s.MaxContains != nil && n > *s.MaxContains {
			return false
		}
	}
	return true
}

func (vd *fastValidator) str(s *jsonschema.Schema, t string) bool {
	if s.MinLength != nil || s.MaxLength != nil {
		n := utf8.RuneCountInString(t)
		if s.MinLength != nil && n < *s.MinLength || s.MaxLength != nil && n > *s.MaxLength {
			return false
		}
	}
	return s.Pattern == nil || s.Pattern.MatchString(t)
}

func number(s *jsonschema.Schema, t json.Number) bool {
	if s.Minimum == nil && s.Maximum == nil && s.ExclusiveMinimum == nil && s.ExclusiveMaximum == nil && s.MultipleOf == nil {
		return true
	}
	n, ok := new(big.Rat).SetString(string(t))
	if !ok {
		return false
	}
	switch {
	case s.Minimum != nil && n.Cmp(s.Minimum) < 0,
		s.Maximum != nil && n.Cmp(s.Maximum) > 0,
		s.ExclusiveMinimum != nil && n.Cmp(s.ExclusiveMinimum) <= 0,
		s.ExclusiveMaximum != nil && n.Cmp(s.ExclusiveMaximum) >= 0:
		return false
	}
	if s.MultipleOf != nil && !new(big.Rat).Quo(n, s.MultipleOf).IsInt() {
		return false
	}
	return true
}
