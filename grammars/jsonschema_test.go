package grammars

import (
	"math/rand"
	"strings"
	"testing"
)

// greedyTokens splits b into the longest vocabulary tokens (tests' stand-in for BPE).
func greedyTokens(v *Vocab, b []byte) []int32 {
	t := v.getTrie()
	var out []int32
	for p := 0; p < len(b); {
		best, n, _ := t.longestToken(b[p:])
		if best < 0 {
			return nil
		}
		out = append(out, best)
		p += n
	}
	return out
}

// runDoc feeds doc's tokens, checking each against the mask; it returns whether all
// were accepted and the matcher then accepts EOS.
func runDoc(tb testing.TB, g *Grammar, doc string, check bool) (bool, string) {
	tb.Helper()
	v := g.Vocab()
	m := g.NewMatcher()
	toks := greedyTokens(v, []byte(doc))
	if toks == nil {
		tb.Fatalf("cannot tokenize %q", doc)
	}
	mask := make([]uint64, v.MaskWords())
	pos := 0
	for _, tk := range toks {
		if check {
			mask = checkMask(tb, m, doc[:pos])
		} else if err := m.FillMask(mask); err != nil {
			tb.Fatal(err)
		}
		inMask := mask[tk>>6]&(1<<(uint(tk)&63)) != 0
		err := m.Accept(tk)
		if (err == nil) != inMask {
			tb.Fatalf("%q at %d: mask %v but Accept %v", doc, pos, inMask, err)
		}
		if err != nil {
			return false, err.Error()
		}
		pos += len(v.TokenBytes(tk))
	}
	if check {
		checkMask(tb, m, doc)
	}
	return m.IsAccepting(), "not accepting at the end"
}

func TestJSONSchemaBasics(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	cases := []struct {
		schema string
		valid  []string
		inval  []string
	}{
		{`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer","minimum":0,"maximum":150}},"required":["name"]}`,
			[]string{`{"name": "ab"}`, `{"age": 12, "name": "x"}`, `{"name": "a\"b", "age": 0}`, `{"name": "", "extra": [1, {"a": null}]}`},
			[]string{`{"age": 12}`, `{"name": 1}`, `{"name": "a", "name": "b"}`, `{"name": "a", "age": 151}`, `{"name": "a", "age": -1}`, `{"name":"a"}`}},
		{`{"type":"array","items":{"enum":["ab","cd",1.5,null]},"minItems":1,"maxItems":3}`,
			[]string{`["ab"]`, `["cd", 1.5, null]`},
			[]string{`[]`, `["ab", "ab", "ab", "ab"]`, `["abc"]`}},
		{`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"additionalProperties":false}},"$ref":"#/$defs/node"}`,
			[]string{`{"v": 1, "kids": [{"v": 2}, {"kids": []}]}`, `{}`},
			[]string{`{"v": 1, "x": 2}`, `{"kids": [{"v": "a"}]}`}},
		{`{"anyOf":[{"type":"string","maxLength":3},{"type":"number"}]}`,
			[]string{`"abc"`, `-12.5e+3`, `0`},
			[]string{`"abcd"`, `01`, `true`}},
		{`{"type":"string","pattern":"^a+b?$"}`,
			[]string{`"aaa"`, `"ab"`},
			[]string{`"b"`, `"aba"`}},
		{`{"type":"object","patternProperties":{"^x":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{"xa": 1, "x": 2}`, `{}`},
			[]string{`{"ya": 1}`, `{"xa": "s"}`}},
		{`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false}`,
			[]string{`[1, "a"]`, `[1]`, `[]`},
			[]string{`[1, "a", 2]`, `["a"]`}},
		{`{"type":"array","uniqueItems":true}`,
			[]string{`[1, 2]`, `[]`},
			[]string{`[1, 1]`}},
		{`{"const":{"b":[1,"x"],"a":true}}`,
			[]string{`{"a": true, "b": [1, "x"]}`, `{"b": [1, "x"], "a": true}`},
			[]string{`{"a": true}`, `{"a": true, "b": [1, "x"], "c": 1}`}},
		{`{"type":"string","format":"date"}`,
			[]string{`"2020-02-29"`},
			[]string{`"2021-02-29"`, `"2020-13-01"`}},
		{`{"oneOf":[{"type":"integer"},{"type":"number","minimum":1}]}`,
			[]string{`0`, `1.5`},
			[]string{`2`}},
		{`{"type":"object","properties":{"a":{"type":"integer"}},"minProperties":1,"maxProperties":2}`,
			[]string{`{"a": 1}`, `{"b": 1, "c": 2}`},
			[]string{`{}`, `{"a": 1, "b": 2, "c": 3}`}},
	}
	for _, tc := range cases {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		for _, d := range tc.valid {
			if ok, why := runDoc(t, g, d, true); !ok {
				t.Errorf("%s: valid %s rejected: %s", tc.schema, d, why)
			}
		}
		for _, d := range tc.inval {
			if ok, _ := runDoc(t, g, d, true); ok {
				t.Errorf("%s: invalid %s accepted", tc.schema, d)
			}
		}
	}
}

func TestJSONSchemaRandomWalks(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":2},"b":{"enum":[1,2]}},"required":["a"],"additionalProperties":false}`,
		`{"type":"array","items":{"type":"number"}}`,
		`{"$defs":{"t":{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#/$defs/t"}}]}},"$ref":"#/$defs/t"}`,
	} {
		g, err := c.JSONSchema([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(7))
		for i := 0; i < 5; i++ {
			m := g.NewMatcher()
			out, ended := randomWalk(t, m, rng, 10, true)
			_ = out
			_ = ended
		}
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	for s, want := range map[string]string{
		`{"type":"string","pattern":"a\\Z"}`:                          "anchor \\Z",
		`{"type": 12}`:                                                "invalid schema",
		`{"$ref":"http://example.com/x.json"}`:                        "remote",
		`{"type":"string","minLength":5,"maxLength":2}`:               "matches nothing",
		`{"properties":{"a":false},"required":["a"],"type":"object"}`: "matches nothing",
	} {
		_, err := c.JSONSchema([]byte(s))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", s, err, want)
		}
	}
	cg := NewCompiler(toyVocab(t), Options{GrammarOnly: true})
	_, err := cg.JSONSchema([]byte(`{"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}}`))
	if err == nil || !strings.Contains(err.Error(), `"uniqueItems"`) || !strings.Contains(err.Error(), "/properties/x") {
		t.Errorf("GrammarOnly: error %v should name uniqueItems and /properties/x", err)
	}
	cl := NewCompiler(toyVocab(t), Options{GrammarOnly: true, Lenient: true})
	g, err := cl.JSONSchema([]byte(`{"type":"object","properties":{"x":{"type":"array","uniqueItems":true}}}`))
	if err != nil || len(g.Warnings()) == 0 {
		t.Errorf("lenient: %v, warnings %v", err, g.Warnings())
	}
}

func TestIntRange(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	for _, tc := range []struct {
		lo, hi string
		in     []string
		out    []string
	}{
		{"-9223372036854775808", "9223372036854775807", []string{"0", "-9223372036854775808", "9223372036854775807", "12"}, []string{"9223372036854775808", "-9223372036854775809", "01"}},
		{"10", "125", []string{"10", "99", "100", "125"}, []string{"9", "126", "200", "-10"}},
		{"-50", "-5", []string{"-50", "-5", "-17"}, []string{"-4", "-51", "0"}},
		{"0", "", []string{"0", "7", "123456789012345678901"}, []string{"-1"}},
		{"", "3", []string{"3", "-1000"}, []string{"4"}},
	} {
		sch := `{"type":"integer"`
		if tc.lo != "" {
			sch += `,"minimum":` + tc.lo
		}
		if tc.hi != "" {
			sch += `,"maximum":` + tc.hi
		}
		sch += "}"
		g, err := c.JSONSchema([]byte(sch))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range tc.in {
			if ok, why := runDoc(t, g, d, false); !ok {
				t.Errorf("%s: %s rejected: %s", sch, d, why)
			}
		}
		for _, d := range tc.out {
			if ok, _ := runDoc(t, g, d, false); ok {
				t.Errorf("%s: %s accepted", sch, d)
			}
		}
	}
}

func TestWhitespacePolicies(t *testing.T) {
	v := toyVocab(t)
	schema := []byte(`{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}`)
	for _, tc := range []struct {
		ws      Whitespace
		in, out []string
	}{
		{WhitespacePython, []string{`{"a": [1, 2]}`, `{"a": []}`}, []string{`{"a":[1,2]}`, `{ "a": [1, 2] }`}},
		{WhitespaceCompact, []string{`{"a":[1,2]}`}, []string{`{"a": [1, 2]}`}},
		{WhitespaceFlexible, []string{`{"a":[1,2]}`, `{"a": [1, 2]}`, "{\n  \"a\" : [ 1 ,\n\t2 ]\n}"}, []string{`{"a": [1 2]}`}},
	} {
		c := NewCompiler(v, Options{Whitespace: tc.ws})
		g, err := c.JSONSchema(schema)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range tc.in {
			if ok, why := runDoc(t, g, d, true); !ok {
				t.Errorf("%v: %q rejected: %s", tc.ws, d, why)
			}
		}
		for _, d := range tc.out {
			if ok, _ := runDoc(t, g, d, false); ok {
				t.Errorf("%v: %q accepted", tc.ws, d)
			}
		}
	}
}

func TestStringLengthsCountCodePoints(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.JSONSchema([]byte(`{"type":"string","minLength":2,"maxLength":3}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{`"αβ"`, `"é\n"`, `"😀😀😀"`, `"a\"b"`, `"\u0001x"`} {
		if ok, why := runDoc(t, g, d, true); !ok {
			t.Errorf("%s rejected: %s", d, why)
		}
	}
	for _, d := range []string{`"α"`, `"abcd"`, `"😀😀😀😀"`, `"\u00e9\u00e9"`} {
		if ok, _ := runDoc(t, g, d, false); ok {
			t.Errorf("%s accepted", d)
		}
	}
}

func TestForcedTokensRealVocab(t *testing.T) {
	v := needRealVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.JSONSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if fb := string(m.ForcedBytes()); fb != `{"name": "` {
		t.Fatalf("forced bytes %q", fb)
	}
	var spelled []byte
	for _, tk := range m.ForcedTokens() {
		spelled = append(spelled, v.TokenBytes(tk)...)
		if err := m.Accept(tk); err != nil {
			t.Fatalf("forced token %d refused: %v", tk, err)
		}
	}
	if !strings.HasPrefix(`{"name": "`, string(spelled)) || len(spelled) == 0 {
		t.Fatalf("forced tokens spell %q", spelled)
	}
}
