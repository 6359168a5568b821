package grammars

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// loadFast against the schema library's Compile: the same refusals, and for every
// schema both load, the same Schema graph (every exported field, subschemas matched
// one to one).

// sameSchemaGraph compares two Schema graphs; "" if equal, else where they differ.
// skip names fields left out of the comparison.
func sameSchemaGraph(a, b *jsonschema.Schema, skip ...string) string {
	pairs := map[*jsonschema.Schema]*jsonschema.Schema{}
	back := map[*jsonschema.Schema]*jsonschema.Schema{}
	type item struct {
		a, b *jsonschema.Schema
		at   string
	}
	work := []item{{a, b, "root"}}
	var diff string
	pair := func(x, y *jsonschema.Schema, at string) bool {
		if (x == nil) != (y == nil) {
			diff = fmt.Sprintf("%s: one side nil", at)
			return false
		}
		if x == nil {
			return true
		}
		if p, ok := pairs[x]; ok {
			if p != y {
				diff = fmt.Sprintf("%s: %s matched twice", at, x.Location)
				return false
			}
			return true
		}
		if q, ok := back[y]; ok && q != x {
			diff = fmt.Sprintf("%s: %s matched twice", at, y.Location)
			return false
		}
		pairs[x], back[y] = y, x
		work = append(work, item{x, y, at})
		return true
	}
	var same func(x, y reflect.Value, at string) bool
	same = func(x, y reflect.Value, at string) bool {
		if x.Kind() == reflect.Interface {
			if x.IsNil() || y.IsNil() {
				if x.IsNil() != y.IsNil() {
					diff = at + ": nil on one side"
					return false
				}
				return true
			}
			if x.Elem().Type() != y.Elem().Type() {
				diff = fmt.Sprintf("%s: %v vs %v", at, x.Elem().Type(), y.Elem().Type())
				return false
			}
			return same(x.Elem(), y.Elem(), at)
		}
		switch v := x.Interface().(type) {
		case *jsonschema.Schema:
			return pair(v, y.Interface().(*jsonschema.Schema), at)
		case []*jsonschema.Schema:
			w := y.Interface().([]*jsonschema.Schema)
			if (v == nil) != (w == nil) || len(v) != len(w) {
				diff = at + ": different arrays"
				return false
			}
			for i := range v {
				if !pair(v[i], w[i], fmt.Sprintf("%s/%d", at, i)) {
					return false
				}
			}
			return true
		case map[string]*jsonschema.Schema:
			w := y.Interface().(map[string]*jsonschema.Schema)
			if (v == nil) != (w == nil) || len(v) != len(w) {
				diff = at + ": different maps"
				return false
			}
			for k := range v {
				if _, ok := w[k]; !ok || !pair(v[k], w[k], at+"/"+k) {
					if diff == "" {
						diff = at + ": key " + k
					}
					return false
				}
			}
			return true
		case map[jsonschema.Regexp]*jsonschema.Schema:
			w := y.Interface().(map[jsonschema.Regexp]*jsonschema.Schema)
			if (v == nil) != (w == nil) || len(v) != len(w) {
				diff = at + ": different pattern maps"
				return false
			}
			byStr := map[string]*jsonschema.Schema{}
			for k, s := range w {
				byStr[k.String()] = s
			}
			for k, s := range v {
				t, ok := byStr[k.String()]
				if !ok || !pair(s, t, at+"/"+k.String()) {
					if diff == "" {
						diff = at + ": pattern " + k.String()
					}
					return false
				}
			}
			return true
		case map[string]any:
			w := y.Interface().(map[string]any)
			if (v == nil) != (w == nil) || len(v) != len(w) {
				diff = at + ": different maps"
				return false
			}
			for k := range v {
				if _, ok := w[k]; !ok || !same(reflect.ValueOf(&v).Elem().MapIndex(reflect.ValueOf(k)), reflect.ValueOf(&w).Elem().MapIndex(reflect.ValueOf(k)), at+"/"+k) {
					if diff == "" {
						diff = at + ": key " + k
					}
					return false
				}
			}
			return true
		case *big.Rat:
			w := y.Interface().(*big.Rat)
			if (v == nil) != (w == nil) || v != nil && v.Cmp(w) != 0 {
				diff = at + ": numbers differ"
				return false
			}
			return true
		case *jsonschema.Format:
			w := y.Interface().(*jsonschema.Format)
			if (v == nil) != (w == nil) || v != nil && (v.Name != w.Name || v.Name != "regex" && v != w) {
				diff = at + ": formats differ"
				return false
			}
			return true
		case jsonschema.Regexp:
			w, _ := y.Interface().(jsonschema.Regexp)
			if (v == nil) != (w == nil) || v != nil && v.String() != w.String() {
				diff = at + ": patterns differ"
				return false
			}
			return true
		case *jsonschema.DynamicRef:
			w := y.Interface().(*jsonschema.DynamicRef)
			if (v == nil) != (w == nil) {
				diff = at + ": one side nil"
				return false
			}
			if v == nil {
				return true
			}
			if v.Anchor != w.Anchor {
				diff = at + ": anchors differ"
				return false
			}
			return pair(v.Ref, w.Ref, at)
		case *jsonschema.Enum:
			w := y.Interface().(*jsonschema.Enum)
			if (v == nil) != (w == nil) || v != nil && !reflect.DeepEqual(v.Values, w.Values) {
				diff = at + ": enums differ"
				return false
			}
			return true
		}
		if !reflect.DeepEqual(x.Interface(), y.Interface()) {
			diff = fmt.Sprintf("%s: %#v vs %#v", at, x.Interface(), y.Interface())
			return false
		}
		return true
	}
	for len(work) > 0 {
		it := work[len(work)-1]
		work = work[:len(work)-1]
		x, y := reflect.ValueOf(it.a).Elem(), reflect.ValueOf(it.b).Elem()
		t := x.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || slices.Contains(skip, f.Name) {
				continue
			}
			if !same(x.Field(i), y.Field(i), it.a.Location+" "+f.Name) {
				return diff
			}
		}
	}
	return ""
}

// compareLoads loads doc both ways; it returns "" when they agree (or loadFast leaves
// the document to the library), else the disagreement. fast reports whether loadFast
// took the document.
func compareLoads(c *Compiler, doc any) (msg string, fast bool) {
	fs, libDoc, _, ferr := c.loadFast(doc)
	if ferr == errUseLibrary {
		return "", false
	}
	var skip []string
	if ferr == nil {
		if m, ok := doc.(map[string]any); ok && reflect.ValueOf(m).Pointer() != reflect.ValueOf(libDoc).Pointer() {
			// the library is given the document less the ids several subschemas have
			skip = []string{"ID", "Anchor"}
		}
		doc = libDoc
	}
	ls, lerr := c.loadSchema(doc)
	switch {
	case ferr != nil && lerr != nil:
		return "", true
	case ferr != nil:
		return fmt.Sprintf("only loadFast refuses: %v", ferr), true
	case lerr != nil:
		return fmt.Sprintf("only the library refuses: %v", lerr), true
	}
	if d := sameSchemaGraph(fs, ls, skip...); d != "" {
		return "graphs differ: " + d, true
	}
	return "", true
}

func docOf(tb testing.TB, b []byte) any {
	tb.Helper()
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// testSchemas: the schemas of the committed test data.
func testSchemas(tb testing.TB) map[string][]byte {
	out := map[string][]byte{}
	files, _ := filepath.Glob("testdata/maskbench/*.json")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var mb MaskBenchFile
		if err := json.Unmarshal(b, &mb); err != nil {
			tb.Fatal(err)
		}
		out[f] = mb.Schema
	}
	suite, _ := filepath.Glob(filepath.Join(suiteDir, "tests", "draft2020-12", "*.json"))
	for _, f := range suite {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(b, &groups); err != nil {
			tb.Fatal(err)
		}
		for i, g := range groups {
			out[fmt.Sprintf("%s#%d", f, i)] = g.Schema
		}
	}
	return out
}

// loadCases: documents of each draft that exercise ids, anchors, references and the
// keywords each draft reads differently.
var loadCases = []string{
	`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://x.test/root.json", "definitions": {"a": {"id": "#A", "type": "string"}, "b": {"id": "b.json", "definitions": {"c": {"type": "integer"}}}}, "properties": {"p": {"$ref": "#A"}, "q": {"$ref": "b.json#/definitions/c"}, "r": {"$ref": "http://x.test/b.json"}}, "maximum": 3, "exclusiveMaximum": true, "minimum": 1, "exclusiveMinimum": false}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": false, "dependencies": {"a": ["b"], "c": {"required": ["d"]}}}`,
	`{"$schema": "http://json-schema.org/draft-06/schema#", "$id": "http://x.test/s6", "definitions": {"x": {"$id": "#x", "const": 1}}, "contains": {"$ref": "#x"}, "propertyNames": {"maxLength": 3}, "items": {"$ref": "#/definitions/x", "minimum": 5}}`,
	`{"$schema": "http://json-schema.org/draft-07/schema#", "if": true, "then": {"minLength": 1}, "else": {"maxLength": 1}, "properties": {"a": {"if": false, "then": {}, "else": {"type": "null"}}, "b": {"$ref": "#/properties/a", "$comment": "x", "readOnly": true, "examples": [1], "const": 2}}}`,
	`{"$schema": "https://json-schema.org/draft/2019-09/schema", "$id": "https://x.test/t", "$recursiveAnchor": true, "$defs": {"n": {"$anchor": "node", "type": "object", "properties": {"kids": {"type": "array", "items": {"$recursiveRef": "#"}}}}}, "$ref": "#node", "minContains": 1, "contains": {"type": "string"}, "dependentRequired": {"a": ["b"]}, "dependentSchemas": {"c": {"maxProperties": 2}}, "unevaluatedProperties": false, "items": [{"type": "integer"}], "additionalItems": {"type": "string"}, "deprecated": true}`,
	`{"$id": "https://x.test/u", "$defs": {"list": {"$dynamicAnchor": "item", "type": "string"}, "other": {"$id": "other", "$defs": {"deep": {"$anchor": "deep", "minimum": 0}}}}, "properties": {"a": {"$dynamicRef": "#item"}, "b": {"$ref": "other#deep"}, "c": {"$ref": "https://x.test/other#/$defs/deep"}, "d": {"prefixItems": [{"type": "integer"}], "items": false}, "e": {"format": "email"}, "f": {"format": "regex"}, "g": {"format": "no-such-format"}, "h": {"patternProperties": {"^x": {}, "^y$": true}}}}`,
	`{"properties": {"a~b": {"type": "string"}, "c/d": {"$ref": "#/properties/a~0b"}, "e%f": {"$ref": "#/properties/c~1d"}, "g": {"$ref": "#/properties/e%25f"}}, "required": ["a~b"], "enum": [{"a~b": "x"}], "type": ["object", "null"]}`,
	`{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"type": "integer", "multipleOf": 0.5, "maximum": 1e400}}, "allOf": [{"$ref": "#/$defs/a"}], "anyOf": [{}, true], "oneOf": [false, {"not": {}}]}`,
	`{"$defs": {"a": {"type": "string"}}, "properties": {"x": {"$ref": "#/$defs/missing"}}}`,
	`{"properties": {"x": {"$ref": "#nope"}}}`,
	`{"$defs": {"a": {"$id": "https://x.test/same"}, "b": {"$id": "https://x.test/same"}}}`,
	`{"$defs": {"a": {"$anchor": "same"}, "b": {"$anchor": "same"}}}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "id": "http://x.test/r#", "properties": {"a": {"id": "http://x.test/r#a", "type": "string"}, "b": {"id": "http://x.test/r", "type": "integer"}, "c": {"items": [{"id": "x"}, {"id": "x", "minimum": 1}]}}}`,
	`{"$defs": {"a": {"$id": "http://x.test/s", "$anchor": "k"}, "b": {"$id": "http://x.test/s", "$anchor": "k"}}, "properties": {"p": {"$ref": "http://x.test/s#k"}}}`,
	`{"$defs": {"a": {"$id": "http://x.test/s"}, "b": {"$id": "http://x.test/s", "properties": {"q": {"$ref": "#"}}}}}`,
	`{"minLength": -1}`,
	`{"type": "strin"}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "properties": {"a": true}}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": true}`,
	`{"pattern": "^(a"}`,
	`{"patternProperties": {"(?<=a)b": {}}}`,
	`{"$schema": "http://json-schema.org/draft-06/schema#", "patternProperties": {"[": {}}}`,
	`{"$schema": "http://json-schema.org/draft-06/schema#", "definitions": {"x": {"patternProperties": {"[": {}}}}}`,
	`{"items": [{"type": "string"}]}`,
	`{"$id": "#frag"}`,
	`{"$anchor": "1x"}`,
	`{"$schema": "https://json-schema.org/draft/2020-12/schema", "$recursiveAnchor": true}`,
	`{"$ref": "http://json-schema.org/draft-07/schema#"}`,
	`{"$schema": "https://example.test/custom"}`,
	`{"properties": {"a": {"$ref": "#/properties/b/default"}, "b": {"default": {"type": "string"}}}}`,
	`{"properties": {"a": {"$ref": "#/properties/b/default/x"}, "b": {"default": {}}}}`,
	`true`, `false`, `{}`, `{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": {"a": 5}, "properties": {"x": {"$ref": "#/definitions/a"}}}`,
	`{"enum": [1, 1.0]}`, `{"$schema": "http://json-schema.org/draft-07/schema#", "enum": [1, 1.0]}`, `{"$schema": "http://json-schema.org/draft-07/schema#", "enum": []}`,
	`{"required": ["a", "a"]}`, `{"$schema": "http://json-schema.org/draft-04/schema#", "required": []}`,
	`{"maxLength": 1.0, "minItems": 2.5, "maxItems": 1e2}`,
	`{"x-defs": {"a": {"minLength": -1}}, "$ref": "#/x-defs/a"}`,
	`{"properties": {"a;b": {}, "c,d": {}, "e?f": {}, "g h": {}, "i%j": {}, "k$&+=:@l": {}, "é": {}, "m#n": {}}}`,
	`{"x-defs": {"a": {"$anchor": "in", "properties": {"b": {"$ref": "#in"}}}}, "$ref": "#/x-defs/a"}`,
	`{"x-defs": {"a": {"$id": "http://x.test/inner", "$defs": {"b": {"type": "string"}}, "$ref": "#/$defs/b"}}, "properties": {"p": {"$ref": "#/x-defs/a"}}}`,
	`{"$schema": "http://json-schema.org/draft-04/schema#", "x-defs": {"a": true}, "properties": {"p": {"$ref": "#/x-defs/a"}}}`,
	`{"$id": "http://x.test/a b"}`, `{"$ref": "a b"}`, `{"$schema": "not a uri"}`,
}

func TestFastLoadMatchesLibrary(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	docs := map[string][]byte{}
	for k, v := range testSchemas(t) {
		docs[k] = v
	}
	for i, s := range loadCases {
		docs[fmt.Sprintf("case %d", i)] = []byte(s)
	}
	names := make([]string, 0, len(docs))
	for k := range docs {
		names = append(names, k)
	}
	sort.Strings(names)
	took := 0
	for _, name := range names {
		msg, fast := compareLoads(c, docOf(t, docs[name]))
		if fast {
			took++
		}
		if msg != "" {
			t.Errorf("%s: %s\n%s", name, msg, docs[name])
		}
	}
	t.Logf("%d documents, %d loaded by loadFast", len(names), took)
	if took < len(names)*3/4 {
		t.Errorf("loadFast took only %d of %d documents", took, len(names))
	}
}

// TestFastLoadMatchesLibraryMaskBench runs the comparison on a MaskBench directory
// (GRAMMARS_MASKBENCH_DIR; the full set is not committed).
func TestFastLoadMatchesLibraryMaskBench(t *testing.T) {
	dir := os.Getenv("GRAMMARS_MASKBENCH_DIR")
	if dir == "" {
		t.Skip("GRAMMARS_MASKBENCH_DIR is not set")
	}
	files, err := MaskBenchFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, lenient := range []bool{false, true} {
		c := NewCompiler(toyVocab(t), Options{Lenient: lenient})
		took, bad := 0, 0
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var mb MaskBenchFile
			if err := json.Unmarshal(b, &mb); err != nil {
				t.Fatal(err)
			}
			msg, fast := compareLoads(c, docOf(t, mb.Schema))
			if fast {
				took++
			}
			if msg != "" {
				bad++
				t.Errorf("%s (lenient %v): %s", filepath.Base(f), lenient, msg)
			}
		}
		t.Logf("lenient %v: %d files, %d loaded by loadFast, %d disagreements", lenient, len(files), took, bad)
	}
}

// metaValues: values of every JSON type, for every keyword.
var metaValues = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `2.5`, `1.0`, `1e2`, `-1e-2`, `0.0`,
	`""`, `"a"`, `"#"`, `"a#"`, `"a#b"`, `"#a"`, `"_a"`, `"a:b"`, `"1a"`, `"http://x.test/y"`, `"http://x.test/y#z"`, `"x y"`, `"%zz"`,
	`"^a$"`, `"(?<=a)b"`, `"["`, `"\\p{L}"`, `"string"`, `"integer"`, `"strin"`,
	`[]`, `[1]`, `[1, 1]`, `[1, 1.0]`, `["a"]`, `["a", "a"]`, `["a", 1]`, `["string"]`, `["string", "null"]`, `["string", "string"]`, `["nope"]`,
	`[{}]`, `[true]`, `[{"type": "strin"}]`, `[{}, {"minimum": 1}]`,
	`{}`, `{"a": 1}`, `{"a": {}}`, `{"a": true}`, `{"a": false}`, `{"a": ["b"]}`, `{"a": []}`, `{"a": ["b", "b"]}`, `{"a": [1]}`,
	`{"^x": {}}`, `{"[": {}}`, `{"a": {"type": "strin"}}`, `{"http://x.test/v": true}`, `{"http://x.test/v": 1}`, `{"not a uri": true}`,
	`{"type": "string"}`, `{"minimum": "x"}`,
}

var metaDrafts = []string{
	"http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#", "http://json-schema.org/draft-07/schema#",
	"https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema",
}

func TestMetaRulesMatchLibrary(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	kws := map[string]bool{}
	for _, r := range []metaRules{metaDraft4, metaDraft6, metaDraft7, metaDraft2019, metaDraft2020} {
		for k := range r {
			kws[k] = true
		}
	}
	for _, k := range []string{"$anchor", "$dynamicAnchor", "$recursiveAnchor", "x-unknown"} {
		kws[k] = true
	}
	keys := make([]string, 0, len(kws))
	for k := range kws {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	n, took := 0, 0
	for _, d := range metaDrafts {
		for _, kw := range keys {
			if kw == "$schema" || kw == "$vocabulary" {
				continue
			}
			for _, v := range metaValues {
				kj, _ := json.Marshal(kw)
				for _, s := range []string{
					fmt.Sprintf(`{"$schema": %q, %s: %s}`, d, kj, v),
					fmt.Sprintf(`{"$schema": %q, "properties": {"p": {%s: %s}}}`, d, kj, v),
					fmt.Sprintf(`{"$schema": %q, "definitions": {"p": {"anyOf": [{%s: %s}]}}}`, d, kj, v),
				} {
					n++
					msg, fast := compareLoads(c, docOf(t, []byte(s)))
					if fast {
						took++
					}
					if msg != "" {
						t.Errorf("%s: %s", s, msg)
					}
				}
			}
		}
	}
	t.Logf("%d documents, %d loaded by loadFast", n, took)
	if took < n/2 {
		t.Errorf("loadFast took only %d of %d", took, n)
	}
}

func TestFastLoadRefusalsNamePlace(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	for _, tc := range []struct{ schema, want string }{
		{`{"properties": {"a": {"minLength": -1}}}`, "/properties/a"},
		{`{"properties": {"a": {"$ref": "#/$defs/nope"}}}`, "/$defs/nope"},
		{`{"$defs": {"a": {"$id": "http://x.test/s"}, "b": {"$id": "http://x.test/s"}}, "$ref": "http://x.test/s"}`, "several subschemas"},
		{`{"$defs": {"a": {"$id": "http://x.test/s", "$ref": "#/$defs/c", "$defs": {"c": {}}}, "b": {"$id": "http://x.test/s"}}, "allOf": [{"$ref": "#/$defs/a"}]}`, "several subschemas"},
		{`{"items": {"pattern": "a\\G"}}`, "/items/pattern"},
	} {
		_, err := c.JSONSchema([]byte(tc.schema))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to name %q", tc.schema, err, tc.want)
		}
	}
}

// needsLibrary reports whether the subschema graph from root uses a keyword that
// fastValid does not evaluate.
func needsLibrary(root *jsonschema.Schema) bool {
	seen := map[*jsonschema.Schema]bool{}
	for stack := []*jsonschema.Schema{root}; len(stack) > 0; {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if s == nil || seen[s] {
			continue
		}
		seen[s] = true
		if s.DynamicRef != nil || s.RecursiveRef != nil || s.UnevaluatedProperties != nil || s.UnevaluatedItems != nil ||
			len(s.Extensions) > 0 || s.ContentEncoding != nil || s.ContentMediaType != nil || s.ContentSchema != nil {
			return true
		}
		stack = append(stack, schemaChildren(s)...)
	}
	return false
}

// subValues lists v and every value inside it.
func subValues(v any, out []any) []any {
	out = append(out, v)
	switch t := v.(type) {
	case []any:
		for _, x := range t {
			out = subValues(x, out)
		}
	case map[string]any:
		for _, x := range t {
			out = subValues(x, out)
		}
	}
	return out
}

// compareValidation validates every value (and every value inside it) against every
// subschema of the graph, with fastValid and with the library's validator on its own
// compile; it returns the disagreements.
func compareValidation(c *Compiler, doc any, values []any) (bad []string, checked int) {
	fs, doc, _, err := c.loadFast(doc)
	if err != nil || needsLibrary(fs) {
		return nil, 0
	}
	ls, err := c.loadSchema(doc)
	if err != nil {
		return []string{"the library refuses: " + err.Error()}, 0
	}
	byLoc := map[string]*jsonschema.Schema{}
	for stack := []*jsonschema.Schema{ls}; len(stack) > 0; {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if _, ok := byLoc[s.Location]; !ok {
			byLoc[s.Location] = s
			stack = append(stack, schemaChildren(s)...)
		}
	}
	var all []any
	for _, v := range values {
		all = subValues(v, all)
	}
	subs := map[*jsonschema.Schema]bool{}
	for stack := []*jsonschema.Schema{fs}; len(stack) > 0; {
		s := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if subs[s] {
			continue
		}
		subs[s] = true
		stack = append(stack, schemaChildren(s)...)
		if s.Enum != nil {
			all = append(all, s.Enum.Values...)
		}
		if s.Const != nil {
			all = append(all, *s.Const)
		}
	}
	if len(all) > 300 {
		all = all[:300]
	}
	for s := range subs {
		l := byLoc[s.Location]
		if l == nil {
			bad = append(bad, "the library has no subschema at "+s.Location)
			continue
		}
		for _, v := range all {
			checked++
			f, w := fastValid(s, v), safeValidate(l, v) == nil
			if f != w {
				b, _ := json.Marshal(v)
				bad = append(bad, fmt.Sprintf("%s on %s: fastValid %v, library %v", s.Location, b, f, w))
			}
		}
	}
	return bad, checked
}

func instancesOf(tb testing.TB, tests []json.RawMessage) []any {
	var out []any
	for _, t := range tests {
		out = append(out, docOf(tb, t))
	}
	return out
}

func TestFastValidateMatchesLibrary(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	files, _ := filepath.Glob("testdata/maskbench/*.json")
	total, schemas := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var mb MaskBenchFile
		if err := json.Unmarshal(b, &mb); err != nil {
			t.Fatal(err)
		}
		var data []json.RawMessage
		for _, tc := range mb.Tests {
			data = append(data, tc.Data)
		}
		bad, n := compareValidation(c, docOf(t, mb.Schema), instancesOf(t, data))
		total += n
		if n > 0 {
			schemas++
		}
		for _, m := range bad {
			t.Errorf("%s: %s", f, m)
		}
	}
	suite, _ := filepath.Glob(filepath.Join(suiteDir, "tests", "draft2020-12", "*.json"))
	for _, f := range suite {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var groups []suiteGroup
		if err := json.Unmarshal(b, &groups); err != nil {
			t.Fatal(err)
		}
		for _, g := range groups {
			var data []json.RawMessage
			for _, tc := range g.Tests {
				data = append(data, tc.Data)
			}
			bad, n := compareValidation(c, docOf(t, g.Schema), instancesOf(t, data))
			total += n
			if n > 0 {
				schemas++
			}
			for _, m := range bad {
				t.Errorf("%s %q: %s", f, g.Description, m)
			}
		}
	}
	for i, s := range loadCases {
		bad, n := compareValidation(c, docOf(t, []byte(s)), instancesOf(t, []json.RawMessage{
			[]byte(`{"a~b": "x", "p": "s", "q": 1, "kids": [{"kids": []}]}`), []byte(`[1, "a", 2.5, null, true, {"a": 1}]`),
			[]byte(`"abc"`), []byte(`1e400`), []byte(`-0.5`), []byte(`{"a": 1, "b": 2, "c": {}}`), []byte(`[[1], [1]]`)}))
		total += n
		for _, m := range bad {
			t.Errorf("case %d: %s", i, m)
		}
	}
	t.Logf("%d validations in %d schemas", total, schemas)
	if total < 10000 {
		t.Errorf("only %d validations compared", total)
	}
}

func TestFastValidateMatchesLibraryMaskBench(t *testing.T) {
	dir := os.Getenv("GRAMMARS_MASKBENCH_DIR")
	if dir == "" {
		t.Skip("GRAMMARS_MASKBENCH_DIR is not set")
	}
	files, err := MaskBenchFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCompiler(toyVocab(t), Options{})
	total, nbad := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var mb MaskBenchFile
		if err := json.Unmarshal(b, &mb); err != nil {
			t.Fatal(err)
		}
		var data []json.RawMessage
		for _, tc := range mb.Tests {
			data = append(data, tc.Data)
		}
		bad, n := compareValidation(c, docOf(t, mb.Schema), instancesOf(t, data))
		total += n
		nbad += len(bad)
		for i, m := range bad {
			if i < 3 {
				t.Errorf("%s: %s", filepath.Base(f), m)
			}
		}
	}
	t.Logf("%d files, %d validations, %d disagreements", len(files), total, nbad)
}

// FuzzFastLoad: on any JSON document, loadFast and the library agree (both refuse, or
// both load the same graph), unless loadFast leaves the document to the library.
func FuzzFastLoad(f *testing.F) {
	for _, s := range loadCases {
		f.Add([]byte(s))
	}
	c := NewCompiler(byteVocab(f), Options{})
	f.Fuzz(func(t *testing.T, b []byte) {
		doc, err := parseJSON(b)
		if err != nil || jsonDepth(doc, 65) > 64 {
			return
		}
		if msg, _ := compareLoads(c, doc); msg != "" {
			t.Fatalf("%s\n%s", msg, b)
		}
	})
}
