package grammars

import (
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Regression tests for mask soundness (FillMask must allow exactly what Accept
// takes) and for dead ends (a state with no allowed token, EOS included, although
// the schema is satisfiable and nothing was left to the semantic check).

// acceptPrefix feeds text byte by byte (the byte vocabulary has one token per byte).
func acceptPrefix(tb testing.TB, m *Matcher, text string) {
	tb.Helper()
	for i := 0; i < len(text); i++ {
		if err := m.Accept(int32(text[i])); err != nil {
			tb.Fatalf("prefix %q refused at byte %d: %v", text, i, err)
		}
	}
}

// TestMaskAgreesAtStringEnds: a token after which a string can only close must be
// allowed only where the concrete state can close there. The abstract string walk
// used to allow it whatever the state's excluded keys and minimum length were, and
// Accept then refused the token the mask had allowed.
func TestMaskAgreesAtStringEnds(t *testing.T) {
	bv, tv := byteVocab(t), toyVocab(t)
	cases := []struct{ schema, prefix, refused string }{
		// MaskBench Handwritten/dep8: "a" is a known key (required), so a pattern
		// key must not spell it; [a-e] can only close after one character
		{`{"type":"object","patternProperties":{"^[a-e]$":true},"additionalProperties":false,"allOf":[{"required":["a"]}],"maxProperties":2}`, `{"a": 1, "`, "a"},
		{`{"type":"object","properties":{"ab":{"type":"integer"}},"patternProperties":{"^[a-z]{2}$":{"type":"integer"}},"additionalProperties":false}`, `{"ab": 1, "`, "ab"},
		// the pattern ends after "a", before the minimum length
		{`{"type":"string","pattern":"^(a|bcd)$","minLength":2}`, `"`, "a"},
		{`{"type":"array","items":{"type":"string","pattern":"^(ab|cdef)$","minLength":3}}`, `["`, "ab"},
	}
	for _, v := range []*Vocab{bv, tv} {
		c := NewCompiler(v, Options{})
		for _, tc := range cases {
			g, err := c.JSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			m := g.NewMatcher()
			for _, tk := range greedyTokens(v, []byte(tc.prefix)) {
				if err := m.Accept(tk); err != nil {
					t.Fatalf("%s: prefix %q: %v", tc.schema, tc.prefix, err)
				}
			}
			mask := checkMask(t, m, tc.schema+" after "+tc.prefix)
			for _, tk := range allowedTokens(mask) {
				if string(v.TokenBytes(tk)) == tc.refused {
					t.Fatalf("%s after %q: %q allowed", tc.schema, tc.prefix, tc.refused)
				}
			}
		}
	}
}

// deadEndSchemas are satisfiable schemas that the grammar expresses exactly (no
// semantic check): a generation must never reach a state without an allowed token.
var deadEndSchemas = []string{
	// MaskBench Snowplow/sp_219: after both members only "}" may follow
	`{"additionalProperties":false,"properties":{"index":{"maximum":2147483647,"minimum":0,"type":"integer"},"isVisible":{"type":"boolean"}},"required":["isVisible"],"type":"object"}`,
	// MaskBench Github_trivial/o78476
	`{"type":"object","additionalProperties":false,"properties":{"jasmineConfigFile":{"type":"string"}}}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}},"required":["a","b","c"],"additionalProperties":false}`,
	`{"enum":[{"a":"bar","b":[1,2]},{"c":{}}]}`,
	`{"type":"array","items":{"type":"integer"},"maxItems":2}`,
	`{"type":"array","prefixItems":[{"type":"boolean"},{"type":"null"}],"items":false}`,
	`{"type":"array","prefixItems":[{"type":"boolean"}],"items":{"type":"integer"},"minItems":2,"maxItems":3}`,
	// maxProperties leaves room for the required members only
	`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"maxProperties":1}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"null"},"c":{"type":"null"}},"required":["a","c"],"maxProperties":2,"additionalProperties":{"type":"boolean"}}`,
	`{"type":"object","patternProperties":{"^x[0-9]$":{"type":"integer"}},"additionalProperties":false,"minProperties":1,"maxProperties":2}`,
	// a pattern that needs more characters than the length bound leaves
	`{"type":"string","pattern":"^a+bcd$","maxLength":6}`,
	`{"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]+-[0-9]{3}$","maxLength":8}},"required":["id"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"string","format":"uuid","maxLength":36},"maxItems":2}`,
}

func TestNoDeadEnds(t *testing.T) {
	walks := 40
	if testing.Short() || raceEnabled {
		walks = 3
	}
	for _, ws := range []Whitespace{WhitespacePython, WhitespaceCompact, WhitespaceFlexible} {
		for vi, v := range []*Vocab{byteVocab(t), toyVocab(t)} {
			c := NewCompiler(v, Options{Whitespace: ws})
			for _, s := range deadEndSchemas {
				g, err := c.JSONSchema([]byte(s))
				if err != nil {
					t.Fatalf("%s: %v", s, err)
				}
				if g.check != nil && g.checkOn.Load() {
					t.Fatalf("%s: has a semantic check (%v); the test needs exact grammars", s, g.Warnings())
				}
				sch, err := c.loadSchema(mustDoc(t, []byte(s)))
				if err != nil {
					t.Fatal(err)
				}
				rng := rand.New(rand.NewSource(int64(vi)))
				for w := 0; w < walks; w++ {
					m := g.NewMatcher()
					out, ended := randomWalk(t, m, rng, 300, w%4 == 0) // fails on a dead end
					if !ended {
						continue
					}
					if err := sch.Validate(mustDoc(t, out)); err != nil {
						t.Fatalf("%s (%v): generated %s, invalid: %v", s, ws, out, err)
					}
				}
			}
		}
	}
}

// TestNoSeparatorWithoutMember: the item separator is offered only when a member or
// item can follow it.
func TestNoSeparatorWithoutMember(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	cases := []struct{ schema, prefix string }{
		{deadEndSchemas[0], `{"index": 3, "isVisible": true`},
		{deadEndSchemas[1], `{"jasmineConfigFile": "x"`},
		{`{"enum":[{"a":"bar"}]}`, `{"a": "bar"`},
		{`{"type":"array","maxItems":2}`, `[1, 2`},
		{`{"type":"object","maxProperties":1}`, `{"x": 1`},
	}
	for _, tc := range cases {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		m := g.NewMatcher()
		acceptPrefix(t, m, tc.prefix)
		mask := checkMask(t, m, tc.prefix)
		if mask[','>>6]&(1<<(uint(',')&63)) != 0 {
			t.Errorf("%s after %q: ',' allowed", tc.schema, tc.prefix)
		}
		if len(allowedTokens(mask)) == 0 {
			t.Errorf("%s after %q: dead end", tc.schema, tc.prefix)
		}
	}
	// an optional member may not take the place the required one needs
	g, err := c.JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"maxProperties":2}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	acceptPrefix(t, m, `{"b": 1, "`)
	if al := allowedTokens(checkMask(t, m, "")); len(al) != 1 || al[0] != 'a' {
		t.Errorf(`after {"b": 1, " allowed %v, want only 'a'`, al)
	}
	g, err = c.JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"maxProperties":1}`))
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := runDoc(t, g, `{"b": 1}`, true); ok {
		t.Error(`{"b": 1} accepted although "a" is required and maxProperties is 1`)
	}
}

// TestMaskBenchSampleNoSilentDeadEnds walks MaskBench schemas with the byte vocabulary
// (the embedded default model's), comparing the mask with Accept at every step. A dead
// end is allowed only where the grammar leaves keywords to the semantic check (and then
// only at a point where the check refused the completion); a FillMask error only where
// a subschema reached late does not compile (a CompileError). The schemas are the
// committed sample; GRAMMARS_MASKBENCH_DIR names another directory, e.g. the whole dev
// set (then 4 walks per schema):
//
//	GRAMMARS_MASKBENCH_DIR=path/to/maskbench-dev go test ./grammars -run TestMaskBenchSampleNoSilentDeadEnds -v -timeout 30m
func TestMaskBenchSampleNoSilentDeadEnds(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	dir, seeds, steps := "testdata/maskbench", 6, 400
	if testing.Short() || raceEnabled {
		seeds = 1
	}
	if d := os.Getenv("GRAMMARS_MASKBENCH_DIR"); d != "" {
		dir, seeds, steps = d, 4, 600
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatal("no MaskBench files in ", dir, err)
	}
	walks, checked, fillErrs, failed := 0, 0, 0, 0
	checkedBy := map[string]int{}
	// a failure ends its walk; the others go on (up to 50 failures), so that one run
	// over a large directory reports every schema that fails
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if failed++; failed >= 50 {
			t.FailNow()
		}
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ Schema json.RawMessage }
		if json.Unmarshal(data, &d) != nil || len(d.Schema) == 0 {
			continue
		}
		g, err := c.JSONSchema(d.Schema)
		if err != nil {
			continue // compile errors are covered elsewhere
		}
		for seed := 0; seed < seeds; seed++ {
			walks++
			rng := rand.New(rand.NewSource(int64(seed)))
			m := g.NewMatcher()
			mask := make([]uint64, v.MaskWords())
			var out []byte
			for step := 0; step < steps; step++ {
				if err := m.FillMask(mask); err != nil {
					var ce *CompileError
					if !errors.As(err, &ce) {
						t.Fatalf("%s seed %d: FillMask: %v", filepath.Base(f), seed, err)
					}
					fillErrs++
					t.Logf("%s seed %d: a subschema reached late does not compile: %v", filepath.Base(f), seed, err)
					break
				}
				al := allowedTokens(mask)
				disagree := false
				for _, tk := range al {
					if err := m.Accept(tk); err != nil {
						fail("%s seed %d after %q: %q in the mask but refused: %v", filepath.Base(f), seed, out, v.TokenBytes(tk), err)
						disagree = true
						break
					}
					if err := m.Rollback(1); err != nil {
						t.Fatal(err)
					}
				}
				if disagree {
					break
				}
				if len(al) == 0 {
					if g.check == nil || !g.checkOn.Load() {
						fail("%s seed %d: dead end after %q without a semantic check", filepath.Base(f), seed, out)
						break
					}
					checked++
					checkedBy[filepath.Base(f)]++
					break
				}
				tk := al[rng.Intn(len(al))]
				if eos := v.EOS(); mask[eos>>6]&(1<<(uint(eos)&63)) != 0 && rng.Intn(3) == 0 {
					tk = eos
				}
				if err := m.Accept(tk); err != nil {
					t.Fatal(err)
				}
				if tk == v.EOS() {
					break
				}
				out = append(out, v.TokenBytes(tk)...)
			}
		}
	}
	t.Logf("%s: %d walks: %d failures (disagreements or dead ends without a check), %d dead ends at a semantic check (%d schemas), %d late compile errors",
		dir, walks, failed, checked, len(checkedBy), fillErrs)
}

// TestNumbersAreFiniteFloats: every number a schema grammar allows parses as a finite
// float64 (|value| < 1e308); 84e784 is a valid JSON Schema number (and even an
// integer) for the validator, but Go's encoding/json, JavaScript and Python's float
// cannot hold it.
func TestNumbersAreFiniteFloats(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	big309 := "1" + strings.Repeat("0", 308)
	big308 := "9" + strings.Repeat("9", 307)
	cases := []struct {
		schema string
		ok     []string
		refuse []string
	}{
		{`{"type":"number"}`,
			[]string{"0", "-0.5", "1e307", "9.99e307", "12e299", "123456789e299", "0.5e307", "-1.5E+10", "1e-999", "7e-05", big308, big308 + ".5", "1e0", "1e007"},
			[]string{"84e784", "1e308", "12e307", "0.5e308", "1e999", big309, big309 + ".0", "1e0307"}},
		{`{"type":"number","minimum":0}`, []string{"0", "1e307", "2.5"}, []string{"1e308", "-1"}},
		{`{"type":"integer"}`, []string{"0", "-7", big308, "-" + big308}, []string{big309, "-" + big309, "1e5"}},
		{`{"type":"integer","maximum":1e400}`, []string{big308}, []string{big309}},
	}
	for _, tc := range cases {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range tc.ok {
			if ok, why := runDoc(t, g, d, false); !ok {
				t.Errorf("%s: %.40s refused: %s", tc.schema, d, why)
			}
		}
		for _, d := range tc.refuse {
			if ok, _ := runDoc(t, g, d, false); ok {
				t.Errorf("%s: %.40s accepted", tc.schema, d)
			}
		}
	}
	// random numbers parse as finite float64s
	g, err := c.JSONSchema([]byte(`{"type":"array","items":{"type":"number"},"maxItems":40}`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	for w := 0; w < 30; w++ {
		out, ended := randomWalk(t, g.NewMatcher(), rng, 2000, false)
		if !ended {
			continue
		}
		var xs []float64
		if err := json.Unmarshal(out, &xs); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
	}
}
