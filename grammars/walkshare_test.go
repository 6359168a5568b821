package grammars

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sharedWalkSchemas are string schemas whose patterns make a new automaton state at
// most characters (MaskBench: counters searched anywhere, word counts, literal text
// and alternations searched anywhere, dates), with the texts that drive a walk into
// them.
var sharedWalkSchemas = []struct {
	pattern string
	texts   []string
}{
	{`[a-zA-Z0-9_-]{40}`, []string{"abcDEF_0123-xyz", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "x y z", "----------------------------------------------------"}},
	{`^(?:\S+\s+){0,12}\S+$`, []string{"the quick brown fox jumps over the lazy dog", "a b c d e f g h i j k l m n", "word\tword\nword"}},
	{`^$|(^(?:\S+\s+){0,5}\S+$)`, []string{"one two three four five six", "x  y"}},
	{`/api/v1/user_identities/\d+/programs`, []string{"/api/v1/user_identities/123/programs", "/api/v1/user", "/api/v1/user_identities/9/prog"}},
	{`\d{4}-\d{2}-\d{2}T\d{2}:\d{2}`, []string{"2024-01-15T10:20", "12345-678", "1999-12-3"}},
	{`(top-left|top-center|middle-left|bottom-right)`, []string{"top-left", "top-cent", "middle-le", "bottom-right"}},
	{`^[a-z]+?(_[a-z]+)*$`, []string{"snake_case_name", "abc_"}},
	{`^list|date|time|string$`, []string{"listing", "a date here", "my string"}},
}

// TestSharedWalksExact: masks computed with walks shared between equivalent string
// states (and without needs where no need can matter) are the masks of the plain
// walks, on random generations with the DeepSeek vocabulary through patterns that
// make many states. With and without length bounds (which make the walk record the
// characters each token needs).
func TestSharedWalksExact(t *testing.T) {
	v := needRealVocab(t)
	enc := realEncode(t)
	steps, walks, variants := 80, 3, []string{``, `,"maxLength":30`, `,"minLength":8,"maxLength":400`}
	if testing.Short() || raceEnabled {
		steps, walks, variants = 15, 1, variants[1:]
	}
	shared := NewCompiler(v, Options{})
	plain := NewCompiler(v, Options{unsharedWalks: true})
	m1, m2 := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	for si, sw := range sharedWalkSchemas {
		var pool []int32
		for _, x := range sw.texts {
			pool = append(pool, enc(x)...)
			pool = append(pool, enc(" "+x)...)
		}
		for _, bounds := range variants {
			schema := fmt.Sprintf(`{"type":"array","items":{"type":"string","pattern":%q%s}}`, sw.pattern, bounds)
			g1, err := shared.JSONSchema([]byte(schema))
			if err != nil {
				t.Fatal(err)
			}
			g2, err := plain.JSONSchema([]byte(schema))
			if err != nil {
				t.Fatal(err)
			}
			for w := 0; w < walks; w++ {
				rng := rand.New(rand.NewSource(int64(si*10 + w)))
				a, b := g1.NewMatcher(), g2.NewMatcher()
				var out []byte
				for step := 0; step < steps; step++ {
					if err := a.FillMask(m1); err != nil {
						t.Fatal(err)
					}
					if err := b.FillMask(m2); err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(m1, m2) {
						al1, al2 := allowedTokens(m1), allowedTokens(m2)
						t.Fatalf("%s after %q: shared walks allow %d tokens, plain walks %d; first difference %s", schema, out, len(al1), len(al2), firstDiff(v, al1, al2))
					}
					al := allowedTokens(m1)
					if len(al) == 0 {
						break
					}
					tk := al[rng.Intn(len(al))]
					if rng.Intn(4) != 0 {
						// mostly tokens of the pattern's own texts, so that counters
						// and partial matches advance
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
}

func firstDiff(v *Vocab, a, b []int32) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			return fmt.Sprintf("%q / %q", v.TokenBytes(a[i]), v.TokenBytes(b[i]))
		}
	}
	if len(a) > len(b) {
		return fmt.Sprintf("%q only in the shared mask", v.TokenBytes(a[len(b)]))
	}
	if len(b) > len(a) {
		return fmt.Sprintf("%q only in the plain mask", v.TokenBytes(b[len(a)]))
	}
	return "none"
}

// TestSharedWalksShared: along a counter searched anywhere (`[a-zA-Z0-9_-]{162}`,
// MaskBench Github_easy o40228) and a word count, most states take the walk of an
// equivalent earlier state instead of walking the vocabulary again, or (a state that
// allows any content, walkAnyContent) walk only the paths to the quotes.
func TestSharedWalksShared(t *testing.T) {
	v := needRealVocab(t)
	enc := realEncode(t)
	c := NewCompiler(v, Options{})
	words := "the quick brown fox jumps over the lazy dog "
	for _, tc := range []struct{ schema, text string }{
		{`{"type":"string","pattern":"[a-zA-Z0-9_-]{162}"}`, "\"" + strings.Repeat("abcdefghij0123456789ABCDEFGHIJ_-", 8) + "\""},
		{`{"type":"string","maxLength":2000,"pattern":"^(?:\\S+\\s+){0,99}\\S+$"}`, "\"" + strings.Repeat(words, 8) + "end\""},
	} {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatal(err)
		}
		m := g.NewMatcher()
		mask := make([]uint64, v.MaskWords())
		for _, tk := range enc(tc.text) {
			if err := m.FillMask(mask); err != nil {
				t.Fatal(err)
			}
			if err := m.Accept(tk); err != nil {
				t.Fatalf("%s: %v", tc.schema, err)
			}
		}
		var a *automaton
		for i := int32(0); i < g.nauts; i++ {
			if g.aut(i).abstractable {
				a = g.aut(i)
			}
		}
		states, quick := 0, 0
		distinct := map[*absRes]bool{}
		for s := int32(0); s < a.states.n; s++ {
			for _, r := range []*absRes{a.state(s).absWalk.Load(), a.state(s).absWalkFree.Load()} {
				if r != nil {
					states++
					if r.quick {
						quick++
					} else {
						distinct[r] = true
					}
				}
			}
		}
		t.Logf("%s: %d states with a walk, %d walks of the vocabulary, %d of the quote paths", tc.schema, states, len(distinct), quick)
		if states < 40 || len(distinct)*4 > states {
			t.Errorf("%s: %d states with a walk share %d walks; want at least 40 states and at most a quarter as many walks", tc.schema, states, len(distinct))
		}
	}
}

// TestSharedWalksTimeBudget: masks that run past a small MaxMaskTime in the middle of
// shared walks (equivalence checks, kept parts) are retried until they finish, and
// are then the masks of plain walks: nothing a stopped walk found is kept.
func TestSharedWalksTimeBudget(t *testing.T) {
	v := needRealVocab(t)
	enc := realEncode(t)
	schema := []byte(`{"type":"array","items":{"anyOf":[{"type":"string","pattern":"[a-z0-9_-]{30}"},{"type":"string","maxLength":60,"pattern":"^(?:\\S+\\s+){0,9}\\S+$"}]}}`)
	g, err := NewCompiler(v, Options{MaxMaskTime: 200 * time.Microsecond}).JSONSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewCompiler(v, Options{unsharedWalks: true}).JSONSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	text := `["abcdefghij0123456789abcdefghij_-abc", "one two three four five six", "` + strings.Repeat("x-", 25) + `"]`
	m, mr := g.NewMatcher(), ref.NewMatcher()
	mask, want := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	timeouts := 0
	for _, tok := range enc(text) {
		for tries := 0; ; tries++ {
			err := m.FillMask(mask)
			if err == nil {
				break
			}
			var te *MaskTimeoutError
			if !errors.As(err, &te) {
				t.Fatalf("FillMask: %v", err)
			}
			timeouts++
			if tries > 10000 {
				t.Fatal("retries make no progress")
			}
		}
		if err := mr.FillMask(want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, want) {
			t.Fatalf("after timeouts the mask differs from the plain walks' (before %q)", v.TokenBytes(tok))
		}
		if err := m.Accept(tok); err != nil {
			t.Fatal(err)
		}
		if err := mr.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if timeouts == 0 {
		t.Fatal("no mask ran past the budget")
	}
	t.Logf("%d timeouts", timeouts)
}

// TestSharedWalksMaskBench follows the valid instances of MaskBench files (and a random
// walk from each) with the DeepSeek vocabulary, comparing every mask with the one of
// plain walks and plain strings (no anyOf string alternatives merged, no subsumption
// by search tails, no walks of the quote paths only). The files are the committed sample; GRAMMARS_MASKBENCH_DIR names another
// directory (GRAMMARS_MASKBENCH_EVERY=n takes every n-th file), e.g. the full set:
//
//	GRAMMARS_MASKBENCH_DIR=path/to/maskbench/data go test ./grammars -run TestSharedWalksMaskBench -v -timeout 2h
func TestSharedWalksMaskBench(t *testing.T) {
	v := needRealVocab(t)
	enc := realEncode(t)
	dir, every := "testdata/maskbench", 1
	if d := os.Getenv("GRAMMARS_MASKBENCH_DIR"); d != "" {
		dir = d
		if n, err := strconv.Atoi(os.Getenv("GRAMMARS_MASKBENCH_EVERY")); err == nil && n > 0 {
			every = n
		}
	}
	files, err := MaskBenchFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	maxSteps := 60
	if testing.Short() || raceEnabled {
		maxSteps = 12
	}
	if os.Getenv("GRAMMARS_MASKBENCH_DIR") != "" {
		maxSteps = 300
	}
	shared := NewCompiler(v, Options{})
	plain := NewCompiler(v, Options{unsharedWalks: true, plainStrings: true})
	m1, m2 := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	compared, schemas := 0, 0
	for fi := 0; fi < len(files); fi += every {
		f := files[fi]
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var mf MaskBenchFile
		if err := json.Unmarshal(data, &mf); err != nil {
			continue
		}
		g1, err1 := shared.JSONSchema(mf.Schema)
		g2, err2 := plain.JSONSchema(mf.Schema)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("%s: compile errors differ: %v / %v", filepath.Base(f), err1, err2)
		}
		if err1 != nil {
			continue
		}
		schemas++
		var paths [][]int32
		for _, tc := range mf.Tests {
			if inst, err := PythonJSON(tc.Data); err == nil && tc.Valid {
				paths = append(paths, enc(string(inst)))
			}
		}
		paths = append(paths, nil) // a random walk
		rng := rand.New(rand.NewSource(int64(fi)))
		for _, path := range paths {
			a, b := g1.NewMatcher(), g2.NewMatcher()
			var out []byte
			for step := 0; step < maxSteps; step++ {
				e1, e2 := fillRetried(a, m1), fillRetried(b, m2)
				if (e1 == nil) != (e2 == nil) {
					t.Fatalf("%s after %q: FillMask errors differ: %v / %v", filepath.Base(f), out, e1, e2)
				}
				if e1 != nil {
					break
				}
				compared++
				if !slices.Equal(m1, m2) {
					al1, al2 := allowedTokens(m1), allowedTokens(m2)
					t.Fatalf("%s after %q: shared walks allow %d tokens, plain walks %d; first difference %s", filepath.Base(f), out, len(al1), len(al2), firstDiff(v, al1, al2))
				}
				var tk int32
				if path != nil {
					if step >= len(path) {
						break
					}
					tk = path[step]
				} else {
					al := allowedTokens(m1)
					if len(al) == 0 {
						break
					}
					tk = al[rng.Intn(len(al))]
				}
				if m1[tk>>6]&(1<<(uint(tk)&63)) == 0 {
					break // an instance the grammar refuses here
				}
				if err := a.Accept(tk); err != nil {
					t.Fatalf("%s after %q: %v", filepath.Base(f), out, err)
				}
				if err := b.Accept(tk); err != nil {
					t.Fatalf("%s after %q: %v", filepath.Base(f), out, err)
				}
				if tk == v.EOS() {
					break
				}
				out = append(out, v.TokenBytes(tk)...)
			}
		}
	}
	if compared == 0 {
		t.Fatal("no mask compared")
	}
	t.Logf("%s: %d schemas, %d masks compared", dir, schemas, compared)
}

// fillRetried is FillMask continued past MaxMaskTime (a loaded machine can make any
// mask run past it).
func fillRetried(m *Matcher, mask []uint64) error {
	err := m.FillMask(mask)
	var te *MaskTimeoutError
	for tries := 0; errors.As(err, &te) && tries < 100; tries++ {
		err = m.FillMask(mask)
	}
	return err
}
