package grammars

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// mergedStringSchemas are anyOf/oneOf of string patterns and formats, reduced from the
// MaskBench files whose first mask in such a string walked the vocabulary once per
// alternative (Github_easy o65510: five literal searches under "type": "string";
// Github_hard o12278: untyped alternatives, so the other types stay alternatives;
// Github_hard o63198: seven date searches and "^$"), a single pattern that is an
// alternation of searches (Github_hard o83677: every match makes a new state without
// subsumption), and mixtures: formats, length bounds (merged per bounds), any string,
// other types. texts drive generations into them.
var mergedStringSchemas = []struct {
	schema string
	texts  []string
}{
	{`{"type":"array","items":{"type":"string","oneOf":[{"pattern":"customer"},{"pattern":"maker"},{"pattern":"operator"},{"pattern":"admin"},{"pattern":"designer"}]}}`,
		[]string{"customer", "maker", "operator", "admin", "designer", "an admin user", "cust"}},
	{`{"type":"object","properties":{"state":{"oneOf":[{"pattern":"NEW"},{"pattern":"ON_APPROVAL"},{"pattern":"ON_SIGNING"},{"pattern":"ON_MODIFICATION"},{"pattern":"EXECUTED"},{"pattern":"REJECTED"}]}}}`,
		[]string{"NEW", "ON_APPROVAL", "ON_SIGNING", "EXECUTED", "REJECTED", "ON_", "12", "null"}},
	{`{"type":"array","items":{"anyOf":[{"pattern":"[0-9]{4}-[0-9]{2}-[0-9]{2}","type":"string"},{"pattern":"[0-9]{4}-[0-9]{2}-[0-9]{1}","type":"string"},{"pattern":"[0-9]{4}-[1-2]{1}-[0-9]{2}","type":"string"},{"pattern":"[0-9]{4}-[0-9]{2}","type":"string"},{"pattern":"[0-9]{4}","type":"string"},{"pattern":"^$","type":"string"}]},"maxItems":3}`,
		[]string{"2022-01-01", "2022-1-15", "1999", "20", "2022-", "x2022-01y"}},
	{`{"type":"object","properties":{"type":{"type":"string","pattern":"^list|date|time|string|enum|int|double|long|boolean|number$"}}}`,
		[]string{"list", "date", "time", "string", "int", "boolean", "number", "integer", "xdouble"}},
	{`{"anyOf":[{"type":"string","format":"date"},{"type":"string","pattern":"^[0-9]+$"},{"type":"integer"},{"type":"string","maxLength":5,"pattern":"x"},{"type":"string","maxLength":5,"pattern":"y"}]}`,
		[]string{"2024-02-29", "12345", "axb", "yy", "xyzzyx", "17"}},
	{`{"type":"array","items":{"anyOf":[{"type":"string"},{"pattern":"a"},{"type":"null"}]}}`,
		[]string{"abc", "null", "b"}},
	{`{"type":"array","items":{"type":"string","minLength":2,"maxLength":12,"anyOf":[{"pattern":"ab"},{"pattern":"^c+$"},{"pattern":"d$"}]}}`,
		[]string{"ab", "cccc", "xd", "abababababab", "c"}},
}

// TestMergedStringsExact: the masks of a grammar whose string alternatives are
// merged into one leaf (and whose search tails subsume the other items of their
// states) are the masks of the grammar without either, on random generations with
// the DeepSeek vocabulary that mostly follow the texts.
func TestMergedStringsExact(t *testing.T) {
	v := needRealVocab(t)
	enc := realEncode(t)
	steps, walks := 60, 3
	if testing.Short() || raceEnabled {
		steps, walks = 25, 1
	}
	merged := NewCompiler(v, Options{})
	plain := NewCompiler(v, Options{plainStrings: true})
	m1, m2 := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	for si, tc := range mergedStringSchemas {
		var pool []int32
		for _, x := range tc.texts {
			pool = append(pool, enc(x)...)
			pool = append(pool, enc(`"`+x+`"`)...)
		}
		g1, err := merged.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		g2, err := plain.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		for w := 0; w < walks; w++ {
			rng := rand.New(rand.NewSource(int64(si*10 + w)))
			a, b := g1.NewMatcher(), g2.NewMatcher()
			var out []byte
			for step := 0; step < steps; step++ {
				if err := fillRetried(a, m1); err != nil {
					t.Fatal(err)
				}
				if err := fillRetried(b, m2); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(m1, m2) {
					al1, al2 := allowedTokens(m1), allowedTokens(m2)
					t.Fatalf("%s after %q: merged allows %d tokens, plain %d; first difference %s", tc.schema, out, len(al1), len(al2), firstDiff(v, al1, al2))
				}
				al := allowedTokens(m1)
				if len(al) == 0 {
					break
				}
				tk := al[rng.Intn(len(al))]
				if rng.Intn(4) != 0 {
					var ok []int32
					for _, p := range pool {
						if m1[p>>6]&(1<<(uint(p)&63)) != 0 {
							ok = append(ok, p)
						}
					}
					if len(ok) > 0 {
						tk = ok[rng.Intn(len(ok))]
					}
				}
				if err := a.Accept(tk); err != nil {
					t.Fatal(err)
				}
				if err := b.Accept(tk); err != nil {
					t.Fatal(err)
				}
				if tk == v.EOS() {
					break
				}
				out = append(out, v.TokenBytes(tk)...)
			}
		}
	}
}

// libraryValid validates doc against schema with the library's validator (formats
// asserted, as the grammar does).
func libraryValid(tb testing.TB, schema, doc string) bool {
	tb.Helper()
	sd, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///s.json", sd); err != nil {
		tb.Fatal(err)
	}
	s, err := c.Compile("mem:///s.json")
	if err != nil {
		tb.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		tb.Fatal(err)
	}
	return s.Validate(inst) == nil
}

// TestMergedStringsDecide: documents built from the texts (each alone, as an array
// item and as a member) are decided by the merged grammar as the library's validator
// decides them, byte by byte with the mask and Accept in agreement.
func TestMergedStringsDecide(t *testing.T) {
	c := NewCompiler(byteVocab(t), Options{})
	for _, tc := range mergedStringSchemas {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		var docs []string
		for _, x := range append(tc.texts, "") {
			q, _ := json.Marshal(x)
			s := string(q)
			docs = append(docs, s, "["+s+"]", "["+s+", "+s+"]", `{"state": `+s+`}`, `{"type": `+s+`}`)
		}
		docs = append(docs, "12", "null", "[12]", "[null]", `{"state": 12}`, `{"state": null}`, `{"type": 1}`, "[]", "{}")
		accepted := 0
		for _, d := range docs {
			want := libraryValid(t, tc.schema, d)
			if got := decide(t, g, []byte(d)); got != want {
				t.Errorf("%s: %s accepted %v, validator %v", tc.schema, d, got, want)
			}
			if want {
				accepted++
			}
		}
		if accepted == 0 {
			t.Errorf("%s: no document valid: the test decides nothing", tc.schema)
		}
	}
}

// TestMergedStringsOneLeaf: the five literal searches of a oneOf make one string leaf
// (one automaton walked for the first mask of the string), where the grammar without
// merging has five, and its walks are those of the quote paths only (walkAnyContent);
// and the states after different matches of an alternation of searches are one
// state, where they are as many without subsumption.
func TestMergedStringsOneLeaf(t *testing.T) {
	v := byteVocab(t)
	schema := []byte(mergedStringSchemas[0].schema)
	nauts := func(opts Options) (n int32, quick int) {
		g, err := NewCompiler(v, opts).JSONSchema(schema)
		if err != nil {
			t.Fatal(err)
		}
		if !decide(t, g, []byte(`["customer", "an admin"]`)) {
			t.Fatal("a valid document refused")
		}
		for i := int32(0); i < g.nauts; i++ {
			a := g.aut(i)
			for s := int32(0); s < a.states.n; s++ {
				if r := a.state(s).absWalkFree.Load(); r != nil && r.quick {
					quick++
				}
			}
		}
		return g.nauts, quick
	}
	n1, q1 := nauts(Options{})
	n2, q2 := nauts(Options{plainStrings: true})
	if n1+4 != n2 {
		t.Errorf("automata: %d merged, %d plain; want the plain grammar's five pattern leaves as one", n1, n2)
	}
	if q1 == 0 || q2 != 0 {
		t.Errorf("walks of the quote paths only: %d merged, %d plain; want some and none", q1, q2)
	}

	top := func(g *Grammar, text string) int32 {
		m := g.NewMatcher()
		for _, b := range []byte(`{"type": "` + text) {
			if err := m.Accept(int32(b)); err != nil {
				t.Fatal(err)
			}
		}
		if len(m.tops) != 1 {
			t.Fatalf("%d stacks", len(m.tops))
		}
		_, s := g.autOf(m.frames[m.tops[0]].state)
		return s
	}
	for _, opts := range []Options{{}, {plainStrings: true}} {
		g, err := NewCompiler(v, opts).JSONSchema([]byte(mergedStringSchemas[3].schema))
		if err != nil {
			t.Fatal(err)
		}
		var states []int32
		for _, text := range []string{"int", "a string", "xdate", "doubled"} {
			states = append(states, top(g, text))
		}
		slices.Sort(states)
		n := len(slices.Compact(states))
		if opts.plainStrings && n != 4 || !opts.plainStrings && n != 1 {
			t.Errorf("plainStrings %v: %d distinct states after four matches", opts.plainStrings, n)
		}
	}
}

// TestMergedStringsRandom: random anyOf/oneOf of random search patterns (literals,
// classes, alternations, anchors, repetitions over a small alphabet), with random
// length bounds and other types: the merged grammar decides random documents as the
// library's validator does, and its masks equal the plain grammar's along them.
func TestMergedStringsRandom(t *testing.T) {
	v := byteVocab(t)
	rounds := 150
	if testing.Short() || raceEnabled {
		rounds = 40
	}
	merged := NewCompiler(v, Options{})
	plain := NewCompiler(v, Options{plainStrings: true})
	rng := rand.New(rand.NewSource(7))
	atoms := []string{"a", "b", "ab", "ba", "[ab]", "c", "(a|bc)", "a+", "b?c", "[^a]", "."}
	pattern := func() string {
		var sb strings.Builder
		if rng.Intn(3) == 0 {
			sb.WriteString("^")
		}
		for k := 1 + rng.Intn(3); k > 0; k-- {
			sb.WriteString(atoms[rng.Intn(len(atoms))])
		}
		if rng.Intn(3) == 0 {
			sb.WriteString("$")
		}
		if rng.Intn(5) == 0 {
			return sb.String() + "|" + atoms[rng.Intn(len(atoms))]
		}
		return sb.String()
	}
	m1, m2 := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	decided := 0
	for r := 0; r < rounds; r++ {
		var alts []string
		for k := 2 + rng.Intn(4); k > 0; k-- {
			alt := fmt.Sprintf(`"pattern":%q`, pattern())
			switch rng.Intn(5) {
			case 0:
				alt += `,"type":"string"`
			case 1:
				alt += `,"maxLength":4`
			case 2:
				alt += `,"minLength":2`
			}
			alts = append(alts, "{"+alt+"}")
		}
		if rng.Intn(3) == 0 {
			alts = append(alts, `{"type":"integer"}`)
		}
		kw := "anyOf"
		if rng.Intn(3) == 0 {
			kw = "oneOf"
		}
		schema := fmt.Sprintf(`{"type":"array","items":{%q:[%s]},"maxItems":2}`, kw, strings.Join(alts, ","))
		g1, err := merged.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		g2, err := plain.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		for d := 0; d < 6; d++ {
			var sb bytes.Buffer
			for k := rng.Intn(7); k > 0; k-- {
				sb.WriteByte("abcx"[rng.Intn(4)])
			}
			q, _ := json.Marshal(sb.String())
			doc := "[" + string(q) + "]"
			if d == 5 {
				doc = "[3]"
			}
			want := libraryValid(t, schema, doc)
			if got := decide(t, g1, []byte(doc)); got != want {
				t.Fatalf("%s: %s accepted %v, validator %v", schema, doc, got, want)
			}
			if want {
				decided++
			}
			a, b := g1.NewMatcher(), g2.NewMatcher()
			for _, c := range []byte(doc) {
				if err := fillRetried(a, m1); err != nil {
					t.Fatal(err)
				}
				if err := fillRetried(b, m2); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(m1, m2) {
					t.Fatalf("%s along %s: merged allows %v, plain %v", schema, doc, allowedTokens(m1), allowedTokens(m2))
				}
				if a.Accept(int32(c)) != nil || b.Accept(int32(c)) != nil {
					break
				}
			}
		}
	}
	if decided == 0 {
		t.Fatal("no random document was valid")
	}
	t.Logf("%d rounds, %d valid documents", rounds, decided)
}
