package grammars

import (
	"encoding/json"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The metaschema check of loadFast: what each draft's metaschema asks of every
// keyword it knows, written out as rules, applied to every subschema of the document
// in one pass. The library validates the document against the metaschema with its
// general validator instead; TestMetaRulesMatchLibrary compares the two on every
// keyword of every draft with values of every JSON type.

type metaRule uint8

const (
	mAny metaRule = iota
	mString
	mURI          // string, format uri
	mURIRef       // string, format uri-reference
	mID           // mURIRef; from 2019-09 also no fragment but an empty one
	mAnchor2019   // string matching ^[A-Za-z][-A-Za-z0-9.:_]*$
	mAnchor2020   // string matching ^[A-Za-z_][-A-Za-z0-9._]*$
	mBool         // boolean
	mNumber       // number
	mPositive     // number > 0
	mNonNeg       // integer >= 0
	mRegex        // string, format regex (the grammar engine's dialect)
	mSchema       // schema (draft 4: an object; later: an object or a boolean)
	mSchemaOrBool // draft 4: boolean or schema
	mSchemaArray  // non-empty array of schemas
	mSchemaOrArr  // schema or non-empty array of schemas
	mSchemaMap    // object of schemas
	mSchemaMapRe  // object of schemas whose names are regexes
	mDeps         // object of schemas or string arrays
	mStrings      // array of unique strings
	mStrings1     // non-empty array of unique strings (draft 4)
	mEnumStrict   // non-empty array of unique values (drafts 4 to 7)
	mArray        // array
	mType         // a simple type or a non-empty array of unique simple types
	mVocab        // object: URI -> boolean
	mDepRequired  // object of string arrays
)

type metaRules map[string]metaRule

var (
	metaDraft4 = metaRules{
		"id": mString, "$schema": mURI, "title": mString, "description": mString, "default": mAny,
		"multipleOf": mPositive, "maximum": mNumber, "exclusiveMaximum": mBool, "minimum": mNumber,
		"exclusiveMinimum": mBool, "maxLength": mNonNeg, "minLength": mNonNeg, "pattern": mRegex,
		"additionalItems": mSchemaOrBool, "items": mSchemaOrArr, "maxItems": mNonNeg, "minItems": mNonNeg,
		"uniqueItems": mBool, "maxProperties": mNonNeg, "minProperties": mNonNeg, "required": mStrings1,
		"additionalProperties": mSchemaOrBool, "definitions": mSchemaMap, "properties": mSchemaMap,
		"patternProperties": mSchemaMap, "dependencies": mDeps, "enum": mEnumStrict, "type": mType,
		"allOf": mSchemaArray, "anyOf": mSchemaArray, "oneOf": mSchemaArray, "not": mSchema,
		"format": mString, "$ref": mString,
	}
	metaDraft6 = metaRules{
		"$id": mURIRef, "$schema": mURI, "$ref": mURIRef, "title": mString, "description": mString,
		"default": mAny, "multipleOf": mPositive, "maximum": mNumber, "exclusiveMaximum": mNumber,
		"minimum": mNumber, "exclusiveMinimum": mNumber, "maxLength": mNonNeg, "minLength": mNonNeg,
		"pattern": mRegex, "additionalItems": mSchema, "items": mSchemaOrArr, "maxItems": mNonNeg,
		"minItems": mNonNeg, "uniqueItems": mBool, "contains": mSchema, "maxProperties": mNonNeg,
		"minProperties": mNonNeg, "required": mStrings, "additionalProperties": mSchema,
		"definitions": mSchemaMap, "properties": mSchemaMap, "patternProperties": mSchemaMap,
		"dependencies": mDeps, "propertyNames": mSchema, "const": mAny, "enum": mEnumStrict, "type": mType,
		"format": mString, "allOf": mSchemaArray, "anyOf": mSchemaArray, "oneOf": mSchemaArray, "not": mSchema,
	}
	metaDraft7 = with(metaDraft6, metaRules{
		"$comment": mString, "readOnly": mBool, "writeOnly": mBool, "examples": mArray,
		"patternProperties": mSchemaMapRe, "contentMediaType": mString, "contentEncoding": mString,
		"if": mSchema, "then": mSchema, "else": mSchema,
	})
	metaCommon2019 = metaRules{
		// applicator
		"contains": mSchema, "additionalProperties": mSchema, "unevaluatedProperties": mSchema,
		"unevaluatedItems": mSchema, "properties": mSchemaMap, "patternProperties": mSchemaMapRe,
		"dependentSchemas": mSchemaMap, "propertyNames": mSchema, "if": mSchema, "then": mSchema,
		"else": mSchema, "allOf": mSchemaArray, "anyOf": mSchemaArray, "oneOf": mSchemaArray, "not": mSchema,
		// validation
		"multipleOf": mPositive, "maximum": mNumber, "exclusiveMaximum": mNumber, "minimum": mNumber,
		"exclusiveMinimum": mNumber, "maxLength": mNonNeg, "minLength": mNonNeg, "pattern": mRegex,
		"maxItems": mNonNeg, "minItems": mNonNeg, "uniqueItems": mBool, "maxContains": mNonNeg,
		"minContains": mNonNeg, "maxProperties": mNonNeg, "minProperties": mNonNeg, "required": mStrings,
		"dependentRequired": mDepRequired, "const": mAny, "enum": mArray, "type": mType,
		// meta-data, format, content
		"title": mString, "description": mString, "default": mAny, "deprecated": mBool, "readOnly": mBool,
		"writeOnly": mBool, "examples": mArray, "format": mString, "contentMediaType": mString,
		"contentEncoding": mString, "contentSchema": mSchema,
		// core
		"$id": mID, "$schema": mURI, "$ref": mURIRef, "$vocabulary": mVocab, "$comment": mString,
		"$defs": mSchemaMap,
		// kept from earlier drafts
		"definitions": mSchemaMap, "dependencies": mDeps,
	}
	metaDraft2019 = with(metaCommon2019, metaRules{
		"$anchor": mAnchor2019, "$recursiveRef": mURIRef, "$recursiveAnchor": mBool,
		"additionalItems": mSchema, "items": mSchemaOrArr,
	})
	metaDraft2020 = with(metaCommon2019, metaRules{
		"$anchor": mAnchor2020, "$dynamicRef": mURIRef, "$dynamicAnchor": mAnchor2020,
		"prefixItems": mSchemaArray, "items": mSchema,
		"$recursiveAnchor": mAnchor2020, "$recursiveRef": mURIRef,
	})
)

func with(base, more metaRules) metaRules {
	out := metaRules{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range more {
		out[k] = v
	}
	return out
}

func (d *draftSpec) meta() metaRules {
	switch d.version {
	case 4:
		return metaDraft4
	case 6:
		return metaDraft6
	case 7:
		return metaDraft7
	case 2019:
		return metaDraft2019
	}
	return metaDraft2020
}

var (
	anchor2019 = regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9.:_]*$`)
	anchor2020 = regexp.MustCompile(`^[A-Za-z_][-A-Za-z0-9._]*$`)
	simpleType = map[string]bool{"array": true, "boolean": true, "integer": true, "null": true, "number": true, "object": true, "string": true}

	uriFormats     sync.Once
	uriFormat      func(any) error
	uriRefFormat   func(any) error
	uriFormatsLoad = func() {
		uriFormat = libraryFormat("uri").Validate
		uriRefFormat = libraryFormat("uri-reference").Validate
	}
)

// schemaType checks that v, at a schema position, is a schema (draft 4: an object;
// later drafts: an object or a boolean).
func schemaType(v any, ptr string, d *draftSpec) error {
	if _, ok := v.(map[string]any); ok {
		return nil
	}
	if _, isBool := v.(bool); isBool && d.version > 4 {
		return nil
	}
	return invalid("", ptr, "a schema must be an object%s", map[bool]string{true: "", false: " or a boolean"}[d.version == 4])
}

// schemaRule: the rule's value holds subschemas, which the metaschema checks too.
func schemaRule(r metaRule) bool {
	switch r {
	case mSchema, mSchemaOrBool, mSchemaArray, mSchemaOrArr, mSchemaMap, mSchemaMapRe, mDeps:
		return true
	}
	return false
}

// validate checks the subschema v at ptr against draft d's metaschema rules: its
// type, its keywords, and the types of the subschemas they hold (collect applies
// validate to each of those in turn).
func (l *fastLoad) validate(v any, ptr string, d *draftSpec) error {
	if err := schemaType(v, ptr, d); err != nil {
		return err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	rules := d.meta()
	for kw, x := range obj {
		r, ok := rules[kw]
		if !ok || r == mAny {
			continue
		}
		if err := l.check(r, x, kw, ptr, d); err != nil {
			return err
		}
	}
	if d.version == 4 {
		for _, b := range [][2]string{{"exclusiveMaximum", "maximum"}, {"exclusiveMinimum", "minimum"}} {
			if _, ok := obj[b[0]]; ok {
				if _, ok := obj[b[1]]; !ok {
					return invalid(b[0], ptr, "%s needs %s", b[0], b[1])
				}
			}
		}
	}
	return nil
}

func (l *fastLoad) check(r metaRule, x any, kw, ptr string, d *draftSpec) error {
	bad := func(what string) error { return invalid(kw, ptr, "%s must be %s", kw, what) }
	kp := func() string { return appendPtr(ptr, kw) }
	switch r {
	case mString:
		if _, ok := x.(string); !ok {
			return bad("a string")
		}
	case mURI, mURIRef, mID:
		s, ok := x.(string)
		if !ok {
			return bad("a string")
		}
		uriFormats.Do(uriFormatsLoad)
		f, what := uriRefFormat, "a URI reference"
		if r == mURI {
			f, what = uriFormat, "a URI"
		}
		if err := f(s); err != nil {
			return bad(what)
		}
		if r == mID && d.version >= 2019 {
			if i := strings.IndexByte(s, '#'); i >= 0 && i != len(s)-1 {
				return bad("without a fragment")
			}
		}
	case mAnchor2019, mAnchor2020:
		s, ok := x.(string)
		re := anchor2019
		if r == mAnchor2020 {
			re = anchor2020
		}
		if !ok || !re.MatchString(s) {
			return bad("an anchor name (" + re.String() + ")")
		}
	case mBool:
		if _, ok := x.(bool); !ok {
			return bad("a boolean")
		}
	case mNumber, mPositive, mNonNeg:
		n, ok := x.(json.Number)
		var q *big.Rat
		if ok {
			q, ok = new(big.Rat).SetString(string(n))
		}
		switch {
		case !ok:
			return bad("a number")
		case r == mPositive && q.Sign() <= 0:
			return bad("greater than 0")
		case r == mNonNeg && (!q.IsInt() || q.Sign() < 0):
			return bad("a non-negative integer")
		}
	case mRegex:
		s, ok := x.(string)
		if !ok {
			return bad("a string")
		}
		if _, err := l.regex(s); err != nil {
			return regexRefusal(kw, kp(), err)
		}
	case mSchema:
		return schemaType(x, kp(), d)
	case mSchemaOrBool:
		if _, ok := x.(bool); ok {
			return nil
		}
		return schemaType(x, kp(), d)
	case mSchemaArray:
		a, ok := x.([]any)
		if !ok || len(a) == 0 {
			return bad("a non-empty array of schemas")
		}
		for i, y := range a {
			if err := schemaType(y, kp()+"/"+strconv.Itoa(i), d); err != nil {
				return err
			}
		}
	case mSchemaOrArr:
		if _, ok := x.([]any); ok {
			return l.check(mSchemaArray, x, kw, ptr, d)
		}
		return schemaType(x, kp(), d)
	case mSchemaMap, mSchemaMapRe:
		m, ok := x.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for k, y := range m {
			if r == mSchemaMapRe {
				if _, err := l.regex(k); err != nil {
					return regexRefusal(kw, appendPtr(kp(), k), err)
				}
			}
			if err := schemaType(y, appendPtr(kp(), k), d); err != nil {
				return err
			}
		}
	case mDeps:
		m, ok := x.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for k, y := range m {
			if _, ok := y.([]any); ok {
				sr := mStrings
				if d.version == 4 {
					sr = mStrings1
				}
				if err := l.check(sr, y, kw, ptr, d); err != nil {
					return err
				}
				continue
			}
			if err := schemaType(y, appendPtr(kp(), k), d); err != nil {
				return err
			}
		}
	case mStrings, mStrings1:
		a, ok := x.([]any)
		if !ok || (r == mStrings1 && len(a) == 0) {
			return bad("a non-empty array of unique strings")
		}
		seen := make(map[string]bool, len(a))
		for _, y := range a {
			s, ok := y.(string)
			if !ok || seen[s] {
				return bad("an array of unique strings")
			}
			seen[s] = true
		}
	case mEnumStrict:
		a, ok := x.([]any)
		if !ok || len(a) == 0 {
			return bad("a non-empty array")
		}
		if hasDuplicate(a) {
			return bad("an array of unique values")
		}
	case mArray:
		if _, ok := x.([]any); !ok {
			return bad("an array")
		}
	case mType:
		if s, ok := x.(string); ok {
			if !simpleType[s] {
				return bad("a JSON type name")
			}
			return nil
		}
		a, ok := x.([]any)
		if !ok || len(a) == 0 {
			return bad("a JSON type name or a non-empty array of them")
		}
		seen := map[string]bool{}
		for _, y := range a {
			s, ok := y.(string)
			if !ok || !simpleType[s] || seen[s] {
				return bad("an array of unique JSON type names")
			}
			seen[s] = true
		}
	case mVocab:
		m, ok := x.(map[string]any)
		if !ok {
			return bad("an object")
		}
		uriFormats.Do(uriFormatsLoad)
		for k, y := range m {
			if _, ok := y.(bool); !ok || uriFormat(k) != nil {
				return bad("an object of URI: boolean")
			}
		}
	case mDepRequired:
		m, ok := x.(map[string]any)
		if !ok {
			return bad("an object")
		}
		for _, y := range m {
			if err := l.check(mStrings, y, kw, ptr, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasDuplicate reports two equal JSON values in a (numbers compared by value).
func hasDuplicate(a []any) bool {
	seen := make(map[string]bool, len(a))
	for _, x := range a {
		k := canonKey(x)
		if seen[k] {
			return true
		}
		seen[k] = true
	}
	return false
}

// canonKey is a string equal for equal JSON values: object members sorted, numbers as
// exact fractions.
func canonKey(x any) string {
	var sb strings.Builder
	writeCanon(&sb, x)
	return sb.String()
}

func writeCanon(sb *strings.Builder, x any) {
	switch v := x.(type) {
	case nil:
		sb.WriteString("n")
	case bool:
		if v {
			sb.WriteString("t")
		} else {
			sb.WriteString("f")
		}
	case string:
		sb.WriteString("s")
		sb.WriteString(strconv.Quote(v))
	case json.Number:
		if q, ok := new(big.Rat).SetString(string(v)); ok {
			sb.WriteString("#")
			sb.WriteString(q.RatString())
		} else {
			sb.WriteString("?" + string(v))
		}
	case []any:
		sb.WriteString("[")
		for _, y := range v {
			writeCanon(sb, y)
			sb.WriteString(",")
		}
		sb.WriteString("]")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sb.WriteString("{")
		for _, k := range keys {
			sb.WriteString(strconv.Quote(k))
			sb.WriteString(":")
			writeCanon(sb, v[k])
			sb.WriteString(",")
		}
		sb.WriteString("}")
	default:
		sb.WriteString("?")
	}
}
