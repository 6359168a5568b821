package grammars

import (
	"math/rand"
	"regexp"
	"strings"
	"testing"
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
		`a^b`:     "anchor",
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
