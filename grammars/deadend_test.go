package grammars

import (
	"testing"
)

// Regression tests for mask soundness (FillMask must allow exactly what Accept
// takes) and for dead ends (a state with no allowed token, EOS included, although
// the schema is satisfiable and nothing was left to the semantic check).

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
