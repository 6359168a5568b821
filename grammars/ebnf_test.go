package grammars

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

const jsonGBNF = `
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
`

func TestEBNFJSON(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.EBNF(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{`{"a": 1}`, `{}`, `{"ab": [1, 2.5, "x", true, null, {"c": []}]}`, `{"a":"\u00e9"}`} {
		if ok, why := runDoc(t, g, d, true); !ok {
			t.Errorf("%s rejected: %s", d, why)
		}
	}
	for _, d := range []string{`[1]`, `{"a" 1}`, `{"a": 01}`, `{a: 1}`} {
		if ok, _ := runDoc(t, g, d, false); ok {
			t.Errorf("%s accepted", d)
		}
	}
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 8; i++ {
		m := g.NewMatcher()
		out, ended := randomWalk(t, m, rng, 25, true)
		if ended {
			var x any
			if err := json.Unmarshal(out, &x); err != nil {
				t.Errorf("generated %q is not JSON: %v", out, err)
			}
		}
	}
}

func TestEBNFFeatures(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	cases := []struct {
		src     string
		in, out []string
	}{
		{`root ::= "a"{2,3} "b"?`, []string{"aa", "aaab"}, []string{"a", "aaaa", "b"}},
		{`root ::= [^a-c]+`, []string{"xyz", "dé"}, []string{"a", "xb"}},
		{`root ::= "x" . "y"`, []string{"xay", "xéy"}, []string{"xy"}},
		{`root ::= item ("," item)*
item ::= [0-9]+ | "(" root ")"`, []string{"1,2", "(1,(2)),3"}, []string{"1,", "(1"}},
		{`root ::= "\x41\u00e9\n"`, []string{"Aé\n"}, []string{"A"}},
		{`root ::= a{,2}
a ::= "ab"`, []string{"", "ab", "abab"}, []string{"ababab"}},
	}
	for _, tc := range cases {
		g, err := c.EBNF(tc.src)
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		for _, d := range tc.in {
			if d == "" {
				if !g.NewMatcher().IsAccepting() {
					t.Errorf("%s: empty rejected", tc.src)
				}
				continue
			}
			if ok, why := runDoc(t, g, d, true); !ok {
				t.Errorf("%s: %q rejected: %s", tc.src, d, why)
			}
		}
		for _, d := range tc.out {
			if ok, _ := runDoc(t, g, d, false); ok {
				t.Errorf("%s: %q accepted", tc.src, d)
			}
		}
	}
}

func TestEBNFErrors(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	for src, want := range map[string]string{
		"root ::= foo":                   `1:10: rule "foo" is not defined`,
		"root ::= \"a\"\nroot ::= \"b\"": "2:1: rule \"root\" is defined twice",
		"start ::= \"a\"":                `no "root" rule`,
		"root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"": "left recursion: expr -> expr",
		"root ::= \"a\" (":         "1:",
		"root ::= [b-a]":           "reversed",
		"root ::= \"a\"{3,1}":      "max is below min",
		"root ::= (= \"a\") \"a\"": "lookahead",
	} {
		_, err := c.EBNF(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want %q", src, err, want)
		}
	}
}
