package grammars

import (
	"encoding/json"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRegexMasksMatchAccept(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	for _, p := range []string{
		`[a-z]+`, `(ab|cd)*e`, `\d{3}-\d{4}`, `[α-ω]+x`, `a|b|abc`, `"[^"]*"`, `(true|null|1\.5)`, `\w+\s\d*`, `é+`, `x{2,5}y?`, `.{0,3}`,
	} {
		g, err := c.Regex(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		re := regexp.MustCompile(`^(?:` + p + `)$`)
		rng := rand.New(rand.NewSource(1))
		for trial := 0; trial < 6; trial++ {
			m := g.NewMatcher()
			out, ended := randomWalk(t, m, rng, 12, true)
			if ended && !re.Match(out) {
				t.Fatalf("%s: ended with %q, which does not match", p, out)
			}
			if !ended && m.IsAccepting() != re.Match(out) {
				t.Fatalf("%s: IsAccepting=%v for %q", p, m.IsAccepting(), out)
			}
		}
	}
}

func TestRegexErrorsNameTheConstruct(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	for p, want := range map[string]string{
		`a(?=b)`:  "lookahead",
		`a(?!b)`:  "negative lookahead",
		`(?<=a)b`: "lookbehind",
		`(?<!a)b`: "negative lookbehind",
		`(a)\1`:   "backreference",
		`\bword`:  "word boundary",
		`(^a)*b`:  "anchor (^, $, \\A, \\z) inside a repetition",
		`a[`:      "missing closing ]",
	} {
		_, err := c.Regex(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v does not name %q", p, err, want)
		}
	}
}

func TestRegexForcedAndRollback(t *testing.T) {
	v := toyVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.Regex(`name: \d+`)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if fb := string(m.ForcedBytes()); fb != "name: " {
		t.Fatalf("forced bytes %q", fb)
	}
	ft := m.ForcedTokens()
	var got []byte
	for _, tk := range ft {
		got = append(got, v.TokenBytes(tk)...)
	}
	if !strings.HasPrefix("name: ", string(got)) || len(ft) == 0 {
		t.Fatalf("forced tokens spell %q", got)
	}
	for _, tk := range ft {
		if err := m.Accept(tk); err != nil {
			t.Fatal(err)
		}
	}
	n := m.NumAccepted()
	if err := m.Rollback(n); err != nil {
		t.Fatal(err)
	}
	if string(m.ForcedBytes()) != "name: " {
		t.Fatal("rollback did not restore the start")
	}
	if m.IsAccepting() {
		t.Fatal("accepting at start")
	}
}

// TestRegexAnchorsAsRE2 compares anchors inside alternations and groups with Go's
// regexp (RE2): whole-output regexes (Compiler.Regex) and JSON Schema patterns (search
// semantics), on every string up to 4 characters over the pattern's alphabet.
func TestRegexAnchorsAsRE2(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	for _, p := range []string{
		`^[Ee][Ss]5|[Ee][Ss]6|[Ee][Ss]7$`, `^a|b$`, `(^a|b)c`, `a(b$|c)`, `x*^y`, `a^b`, `(a$)?b`, `^(a|^b)$`,
		`(^|,)x($|,)`, `a$|^b`, `$^`, `^$`, `(?:^)?a`, `(a|^)(b|$)`, `a?^b`, `b$c?`, `^(ab|a$)`, `(x^|y)z`,
	} {
		alphabet := "abcxyzEeSs5,"
		var strs []string
		var gen func(s string)
		gen = func(s string) {
			strs = append(strs, s)
			if len(s) < 4 {
				for i := 0; i < len(alphabet); i++ {
					if strings.IndexByte(p, alphabet[i]) >= 0 || alphabet[i] == 'z' {
						gen(s + alphabet[i:i+1])
					}
				}
			}
		}
		gen("")
		whole := regexp.MustCompile(`^(?:` + p + `)$`)
		search := regexp.MustCompile(p)
		gw, werr := c.Regex(p)
		if werr != nil && !strings.Contains(werr.Error(), "matches nothing") {
			t.Fatalf("%s: %v", p, werr)
		}
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": p})
		gs, err := c.JSONSchema(schema)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, s := range strs {
			wantW := whole.MatchString(s)
			gotW := werr == nil && decide(t, gw, []byte(s))
			if gotW != wantW {
				t.Errorf("whole %s on %q: grammar %v, regexp %v", p, s, gotW, wantW)
			}
			if got, want := decide(t, gs, appendJSONString(nil, s)), search.MatchString(s); got != want {
				t.Errorf("pattern %s on %q: grammar %v, regexp %v", p, s, got, want)
			}
		}
	}
}

// FuzzWidenedPattern: a pattern the grammar widens (lookarounds, backreferences, word
// boundaries, anchors in a repeated group, large counts) decides exactly as its
// matcher (regexp2 or Go's regexp) does once the document is finished: the wider grammar never blocks a string the
// pattern matches, and the check refuses one it does not.
func FuzzWidenedPattern(f *testing.F) {
	for _, s := range [][2]string{
		{`^(?!ab)[a-z]+$`, "abc"}, {`^(?!ab)[a-z]+$`, "xbc"}, {`^(x$|y)+$`, "yyx"}, {`^(a|b)\1$`, "aa"},
		{`\bfoo\b`, "a foo"}, {`^((?!(c|C)(l|L)(y|Y)).)*$`, "a cly"}, {`^(?!@@)[\w@]+$`, "@@x"},
		{`^(https?://|/?.?-?(?!\w+://)\w).+\.ya?ml$`, "a/b.yml"}, {`^(?![i|I][o|O])`, "iob"},
		{`^(\/?((\.{2})|([a-z0-9\-]*))($|\/))*$`, "a/../b"}, {`(?<=a)b`, "ab"}, {`^(a{1,63}\.){1,127}$`, "a.a."},
	} {
		f.Add(s[0], s[1])
	}
	c := NewCompiler(byteVocab(f), Options{})
	f.Fuzz(func(t *testing.T, pat, s string) {
		if len(pat) > 60 || len(s) > 40 || !utf8.ValidString(s) || !utf8.ValidString(pat) {
			return
		}
		re, err := c.regexpEngine(false)(pat)
		if err != nil {
			return // a pattern the engine refuses at compile time
		}
		want := re.MatchString(s)
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": pat})
		g, err := c.JSONSchema(schema)
		if err != nil {
			return
		}
		raw, _ := json.Marshal(s)
		doc, err := PythonJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := decide(t, g, doc); got != want {
			t.Fatalf("pattern %q on %q: grammar+check %v, the pattern's matcher %v (warnings %q)", pat, s, got, want, g.Warnings())
		}
	})
}
