package grammars

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
)

// impossibleMatcher is MaskBench Github_medium o78964's "matcher": additionalProperties
// false leaves no key, so neither oneOf alternative (each requires "type") has a value.
const impossibleMatcher = `{"minProperties":1,"additionalProperties":false,"oneOf":[` +
	`{"type":"object","properties":{"type":{"type":"string","enum":["args","none"]}},"required":["type"]},` +
	`{"type":"object","properties":{"type":{"type":"string","const":"exact"},"code":{"type":"integer"}},"required":["type","code"]}]}`

// TestImpossibleSubschemasLeftOut: a member, item or alternative whose subschema no
// JSON value satisfies is never offered (before, the lazy translation found it empty
// only after its key was written: `{"matcher": ` and then nothing); a required one
// makes its object impossible.
func TestImpossibleSubschemasLeftOut(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	obj := func(props, extra string) string {
		return `{"type":"object","properties":{` + props + `},"additionalProperties":false` + extra + `}`
	}
	deep := `{"type":"object","properties":{"x":` + impossibleMatcher + `},"required":["x"]}`
	tooFew := obj(`"a":{"type":"null"}`, `,"minProperties":2`)
	cases := []struct {
		schema, prefix string
		refused        []string // first bytes that must not be allowed after prefix
		docs           []string // documents still accepted
	}{
		// o78964's shape: the optional member "matcher" is left out
		{obj(`"code":{"type":"integer"},"matcher":`+impossibleMatcher, ``), `{"`, []string{"m"}, []string{`{"code": 7}`, `{}`}},
		// the same one level down, through $ref and a required member
		{`{"$defs":{"m":` + deep + `},"type":"object","properties":{"a":{"$ref":"#/$defs/m"},"b":{"type":"null"}},"additionalProperties":false}`,
			`{"`, []string{"a"}, []string{`{"b": null}`}},
		// minProperties beyond the members it can have
		{obj(`"a":{"type":"boolean"},"z":`+tooFew, ``), `{"`, []string{"z"}, []string{`{"a": true}`}},
		// items: an array of impossible values is empty; a prefix position ends it
		{`{"type":"array","items":` + impossibleMatcher + `}`, `[`, []string{"{"}, []string{`[]`}},
		{`{"type":"array","prefixItems":[{"type":"null"},` + impossibleMatcher + `]}`, `[null`, []string{","}, []string{`[null]`, `[]`}},
		// anyOf: the impossible alternative is dropped
		{`{"anyOf":[` + impossibleMatcher + `,{"type":"null"}]}`, ``, []string{"{"}, []string{`null`}},
		// patternProperties whose value is impossible: no such key
		{`{"type":"object","patternProperties":{"^p":` + impossibleMatcher + `},"additionalProperties":false,"properties":{"q":{"type":"null"}}}`,
			`{"`, []string{"p"}, []string{`{"q": null}`}},
	}
	for _, tc := range cases {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		m := g.NewMatcher()
		acceptPrefix(t, m, tc.prefix)
		mask := checkMask(t, m, tc.schema+" after "+tc.prefix)
		for _, b := range tc.refused {
			if mask[b[0]>>6]&(1<<(uint(b[0])&63)) != 0 {
				t.Errorf("%s after %q: %q allowed", tc.schema, tc.prefix, b)
			}
		}
		if len(allowedTokens(mask)) == 0 {
			t.Errorf("%s after %q: dead end", tc.schema, tc.prefix)
		}
		for _, d := range tc.docs {
			if ok, why := runDoc(t, g, d, true); !ok {
				t.Errorf("%s: %s refused: %s", tc.schema, d, why)
			}
		}
		// no walk meets a dead end
		rng := rand.New(rand.NewSource(1))
		for w := 0; w < 20; w++ {
			randomWalk(t, g.NewMatcher(), rng, 200, true)
		}
	}
	// required impossible members: the schema admits nothing, said at compile time
	for _, s := range []string{
		`{"type":"object","properties":{"m":` + impossibleMatcher + `},"required":["m"]}`,
		deep,
		tooFew,
		`{"type":"array","items":` + impossibleMatcher + `,"minItems":1}`,
	} {
		_, err := c.JSONSchema([]byte(s))
		var ce *CompileError
		if !errors.As(err, &ce) || ce.Reason != ReasonEmpty {
			t.Errorf("%s: got %v, want a compile error that it matches nothing", s, err)
		}
	}
}

// TestCountedClassPatterns: ^C{m,n}$ is compiled as C* within the length bounds
// [m, n] (intersected with minLength/maxLength), deciding every string as Go's
// regexp and the bounds do, with one automaton state for all counts instead of one
// per count (each new state costs a walk of the whole vocabulary at its first mask).
func TestCountedClassPatterns(t *testing.T) {
	for _, tc := range []struct {
		src, atom string
		lo, hi    int
		ok        bool
	}{
		{`^[A-Fa-f\d]{24}$`, `[A-Fa-f\d]`, 24, 24, true},
		{`^[0-9a-zA-Z_-]{1,255}$`, `[0-9a-zA-Z_-]`, 1, 255, true},
		{`^\S{3,}$`, `\S`, 3, -1, true},
		{`^.{0,5}$`, `.`, 0, 5, true},
		{`^[\]a]{2}$`, `[\]a]`, 2, 2, true},
		{`^[]a]{2}$`, ``, 0, 0, false},
		{`^[a-z]{2}x{3}$`, ``, 0, 0, false},
		{`^[a-z]{3,2}$`, ``, 0, 0, false},
		{`^[a-z]{2,3}?$`, ``, 0, 0, false},
		{`[a-z]{2}$`, ``, 0, 0, false},
		{`^a{2}$`, ``, 0, 0, false},
	} {
		atom, lo, hi, ok := countedClass(tc.src)
		if ok != tc.ok || ok && (atom != tc.atom || lo != tc.lo || hi != tc.hi) {
			t.Errorf("countedClass(%q) = %q %d %d %v, want %q %d %d %v", tc.src, atom, lo, hi, ok, tc.atom, tc.lo, tc.hi, tc.ok)
		}
	}
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	for _, tc := range []struct {
		schema      string
		ok, refused []string
	}{
		{`{"type":"string","pattern":"^[a-f0-9]{4}$"}`, []string{`"abcd"`, `"0a9f"`}, []string{`"abc"`, `"abcde"`, `"abcg"`, `""`}},
		{`{"type":"string","pattern":"^[a-z]{2,10}$","maxLength":3}`, []string{`"ab"`, `"abc"`}, []string{`"a"`, `"abcd"`}},
		{`{"type":"string","pattern":"^[a-z]{2,10}$","minLength":5}`, []string{`"abcde"`, `"abcdefghij"`}, []string{`"abcd"`, `"abcdefghijk"`}},
		{`{"type":"string","pattern":"^\\d{2,}$"}`, []string{`"12"`, `"123456789012"`}, []string{`"1"`, `"12a"`}},
		{`{"type":"string","pattern":"^.{0,2}$"}`, []string{`""`, `"é\""`}, []string{`"abc"`, `"a\n"`}},
		{`{"type":"array","items":{"type":"string","pattern":"^[a-c]{2}$"}}`, []string{`["ab", "cc"]`}, []string{`["a"]`, `["abc"]`}},
	} {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range tc.ok {
			if ok, why := runDoc(t, g, d, true); !ok {
				t.Errorf("%s: %s refused: %s", tc.schema, d, why)
			}
		}
		for _, d := range tc.refused {
			if ok, _ := runDoc(t, g, d, true); ok {
				t.Errorf("%s: %s accepted", tc.schema, d)
			}
		}
		// the mask agrees with Accept at every step, with byte and multi-byte tokens
		for _, tv := range []*Vocab{v, toyVocab(t)} {
			g, err := NewCompiler(tv, Options{}).JSONSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(2))
			for w := 0; w < 10; w++ {
				randomWalk(t, g.NewMatcher(), rng, 60, true)
			}
		}
	}
	// one vocabulary walk for every count (the concrete states differ in the length
	// register only and share the walk of their abstract state)
	g, err := c.JSONSchema([]byte(`{"type":"string","pattern":"^[a-f0-9]{64}$"}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	for _, b := range []byte(`"` + strings.Repeat("ab", 32)) {
		checkMask(t, m, "hex digits")
		if err := m.Accept(int32(b)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range g.nauts {
		a := g.aut(int32(i))
		if !a.leaf {
			continue
		}
		walks := 0
		for s := int32(0); s < a.states.n; s++ {
			if a.state(s).absWalk.Load() != nil {
				walks++
			}
		}
		if walks > 3 {
			t.Errorf("%v: %d vocabulary walks for ^[a-f0-9]{64}$", a, walks)
		}
	}
}

// TestWarm: the warm-up follows its documents to the end through the shared string,
// number and key automata (a document refused half-way would leave them cold).
func TestWarm(t *testing.T) {
	for _, v := range []*Vocab{byteVocab(t), toyVocab(t), needRealVocab(t)} {
		if n := NewCompiler(v, Options{}).warm(); n != 2 {
			t.Errorf("warm-up followed %d of 2 documents to the end", n)
		}
	}
}
