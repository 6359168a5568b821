package grammars

import (
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMaskBenchWrongDecisions replays the seven wrong decisions of the full MaskBench
// run (testdata/regress, the two small files whole, the others reduced to the member
// that decided): draft-4 integers written 12345.0 (Github_easy o24544, Github_trivial
// o14485), uri-reference values with spaces (Github_hard o53084, o90924, o90925), and
// a pattern with an anchor in each alternative (JsonSchemaStore jsconfig), which was
// refused in the middle of a generation.
func TestMaskBenchWrongDecisions(t *testing.T) {
	data, err := os.ReadFile("testdata/regress/maskbench-wrong-decisions.json")
	if err != nil {
		t.Fatal(err)
	}
	var files []struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Tests  []struct {
			Data  json.RawMessage `json:"data"`
			Valid bool            `json:"valid"`
		} `json:"tests"`
	}
	if err := json.Unmarshal(data, &files); err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Fatalf("%d files, want the 6 of the 7 wrong decisions", len(files))
	}
	c := NewCompiler(byteVocab(t), Options{})
	for _, f := range files {
		g, err := c.JSONSchema(f.Schema)
		if err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		for i, tc := range f.Tests {
			doc, err := PythonJSON(tc.Data)
			if err != nil {
				t.Fatal(err)
			}
			if got := decide(t, g, doc); got != tc.Valid {
				t.Errorf("%s: test %d %s: accepted %v, want %v", f.Name, i, doc, got, tc.Valid)
			}
		}
	}
}

// TestUnsupportedPatternAtCompileTime: a regex the engine cannot express at all,
// deep in a subschema no generation has entered yet, is a compile error naming the
// construct and the JSON pointer (before, the lazily translated rule found it in a
// later mask).
func TestUnsupportedPatternAtCompileTime(t *testing.T) {
	c := NewCompiler(toyVocab(t), Options{})
	for _, tc := range []struct{ schema, kw, ptr string }{
		{`{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string","pattern":"^x\\Z"}}}}}`,
			"pattern", "/properties/a/properties/b/pattern"},
		{`{"anyOf":[{"type":"integer"},{"$ref":"#/$defs/s"}],"$defs":{"s":{"type":"object","patternProperties":{"a\\Gb":{}}}}}`,
			"patternProperties", "/$defs/s/patternProperties/a\\Gb"},
	} {
		_, err := c.JSONSchema([]byte(tc.schema))
		var ce *CompileError
		if !errors.As(err, &ce) || ce.Reason != ReasonRegex || ce.Keyword != tc.kw || ce.Pointer != tc.ptr {
			t.Errorf("%s: got %#v (%v), want %s at %s", tc.schema, ce, err, tc.kw, tc.ptr)
		}
	}
}

// TestWidenedPatterns: lookarounds, backreferences, word boundaries and anchors in a
// repeated group compile to a wider grammar, and the check on the finished document
// decides with the exact pattern; the warnings name each such pattern.
func TestWidenedPatterns(t *testing.T) {
	c := NewCompiler(byteVocab(t), Options{})
	for _, tc := range []struct {
		schema, warn   string
		valid, invalid []string
	}{
		{`{"type":"object","properties":{"a":{"type":"string","pattern":"^(?!ab)[a-z]+$"}}}`, "lookaround",
			[]string{`{"a": "xbc"}`, `{"a": "a"}`, `{}`}, []string{`{"a": "abc"}`, `{"a": "aXc"}`}},
		{`{"type":"string","pattern":"^(?<=^)a(?<!b)$"}`, "lookaround", []string{`"a"`}, []string{`"b"`, `"ba"`}},
		{`{"type":"string","pattern":"^(x$|y)+$"}`, "anchor inside a repetition", []string{`"yyx"`, `"y"`, `"x"`}, []string{`"yxy"`, `"xx"`}},
		{`{"type":"string","pattern":"^(a|b)\\1$"}`, "backreference", []string{`"aa"`, `"bb"`}, []string{`"ab"`, `"a"`}},
		{`{"type":"string","pattern":"\\bfoo\\b"}`, "word boundary", []string{`"a foo b"`, `"foo"`}, []string{`"afoob"`, `"foob"`}},
		{`{"type":"string","pattern":"^(?>a+)a$"}`, "atomic group", []string{}, []string{`"aa"`, `"a"`}},
		{`{"type":"string","pattern":"^(?>ab|a)c$"}`, "atomic group", []string{`"abc"`, `"ac"`}, []string{`"abd"`}},
		{`{"type":"string","pattern":"^(?!.*://)(?=.{1,255}$)((.{1,63}\\.){1,127}(?![0-9]*$)[a-z0-9-]+\\.?)$"}`, "counted repetition over 1000",
			[]string{`"a.b"`, `"www.example.com."`}, []string{`"http://a.b"`, `"a.123"`, `"ab"`}},
		{`{"type":"string","pattern":"^(a{1,63}\\.){1,127}$"}`, "counted repetition over 1000", []string{`"aa.a."`}, []string{`"a"`, `"aa.."`}},
		{`{"type":"object","patternProperties":{"^(?!x)":{"type":"integer"}},"additionalProperties":{"type":"string"}}`, "lookaround",
			[]string{`{"xa": "s"}`, `{"ya": 1}`, `{"ya": 2, "xb": "t"}`}, []string{`{"ya": "s"}`, `{"xa": 1}`}},
	} {
		g, err := c.JSONSchema([]byte(tc.schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.schema, err)
		}
		if w := strings.Join(g.Warnings(), "; "); !strings.Contains(w, tc.warn) {
			// the pattern's rule is translated when a generation first enters it
			decide(t, g, []byte(append(tc.valid, tc.invalid...)[0]))
			if w = strings.Join(g.Warnings(), "; "); !strings.Contains(w, tc.warn) {
				t.Errorf("%s: warnings %q do not name %q", tc.schema, w, tc.warn)
			}
		}
		for _, d := range tc.valid {
			if !decide(t, g, []byte(d)) {
				t.Errorf("%s: %s refused", tc.schema, d)
			}
		}
		for _, d := range tc.invalid {
			if decide(t, g, []byte(d)) {
				t.Errorf("%s: %s accepted", tc.schema, d)
			}
		}
	}
}

// TestIntegersWithoutFraction: "type": "integer" values are written as users expect
// (96, never 96.0 or 9.6e1): after the digits the mask offers no '.', 'e' or 'E', and
// random generations only write plain integers; a "number" with multipleOf 1 still
// takes 96.0.
func TestIntegersWithoutFraction(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.JSONSchema([]byte(`{"type":"object","properties":{"n":{"type":"integer"},"m":{"type":"integer","minimum":-5,"maximum":1000}},"required":["n","m"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	for _, b := range []byte(`{"m": 96`) {
		if err := m.Accept(int32(b)); err != nil {
			t.Fatal(err)
		}
	}
	mask := make([]uint64, v.MaskWords())
	if err := m.FillMask(mask); err != nil {
		t.Fatal(err)
	}
	for _, b := range []byte(".eE") {
		if mask[b>>6]&(1<<(b&63)) != 0 {
			t.Errorf("after 96 the mask allows %q", b)
		}
	}
	rng := rand.New(rand.NewSource(3))
	plain := regexp.MustCompile(`^\{"(n|m)": -?(0|[1-9][0-9]*), "(n|m)": -?(0|[1-9][0-9]*)\}$`)
	done := 0
	for w := 0; w < 400 && done < 50; w++ {
		out, ended := randomWalk(t, g.NewMatcher(), rng, 700, false)
		if !ended {
			continue
		}
		done++
		if !plain.Match(out) {
			t.Errorf("generated %s", out)
		}
	}
	if done < 20 {
		t.Fatalf("only %d generations finished", done)
	}
	for schema, doc := range map[string]string{
		`{"type":"number","multipleOf":1}`: `6000.0`,
		`{"type":"integer"}`:               `96`,
	} {
		g, err := c.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if !decide(t, g, []byte(doc)) {
			t.Errorf("%s refuses %s", schema, doc)
		}
	}
	for _, doc := range []string{`96.0`, `9.6e1`, `1e2`} {
		g, _ := c.JSONSchema([]byte(`{"type":"integer"}`))
		if decide(t, g, []byte(doc)) {
			t.Errorf("integer accepts %s", doc)
		}
	}
	// draft 6 and later count 96.0 as an integer: ZeroFractionIntegers takes it
	cz := NewCompiler(v, Options{ZeroFractionIntegers: true})
	for schema, want := range map[string]bool{`{"type":"integer"}`: true, `{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer"}`: false} {
		g, err := cz.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		if got := decide(t, g, []byte(`96.0`)); got != want {
			t.Errorf("ZeroFractionIntegers %s on 96.0: %v, want %v", schema, got, want)
		}
	}
}

// TestMaskTimeBudget: past MaxMaskTime FillMask returns a *MaskTimeoutError (an empty
// mask, not a stall); the work it did is kept, so retries finish, with the mask a
// grammar without a budget computes.
func TestMaskTimeBudget(t *testing.T) {
	v := toyVocab(t)
	schema := []byte(`{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{3,9}(-[0-9]+)?$"},"b":{"type":"array","items":{"type":"integer","minimum":-70,"maximum":12345}}},"required":["a","b"]}`)
	ref, err := NewCompiler(v, Options{}).JSONSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	g, err := NewCompiler(v, Options{MaxMaskTime: time.Nanosecond}).JSONSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	m, mr := g.NewMatcher(), ref.NewMatcher()
	mask, want := make([]uint64, v.MaskWords()), make([]uint64, v.MaskWords())
	timeouts := 0
	for _, tok := range greedyTokens(v, []byte(`{"a": "abc-12", "b": [5, -3]}`)) {
		for tries := 0; ; tries++ {
			err := m.FillMask(mask)
			if err == nil {
				break
			}
			var te *MaskTimeoutError
			if !errors.As(err, &te) || te.Limit != time.Nanosecond {
				t.Fatalf("FillMask: %v", err)
			}
			for _, w := range mask {
				if w != 0 {
					t.Fatal("a timed-out mask is not empty")
				}
			}
			timeouts++
			if tries > 100000 {
				t.Fatal("retries make no progress")
			}
		}
		if err := mr.FillMask(want); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(mask, want) {
			t.Fatalf("the mask after timeouts differs from the mask without a budget")
		}
		if err := m.Accept(tok); err != nil {
			t.Fatal(err)
		}
		if err := mr.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if timeouts == 0 {
		t.Fatal("no mask ran past a 1ns budget")
	}
	t.Logf("%d timeouts before the masks were built", timeouts)
}

// TestMaskBenchContinuesTimedOutMasks: the benchmark continues a mask that passed the
// per-mask time budget (as a loaded machine can make any mask do) instead of counting
// the instance as refused.
func TestMaskBenchContinuesTimedOutMasks(t *testing.T) {
	v := toyVocab(t)
	dir := t.TempDir()
	file := `{"description":"t","schema":{"type":"object","properties":{"a":{"type":"string","pattern":"^[a-z]{3,9}(-[0-9]+)?$"}},"required":["a"]},` +
		`"tests":[{"description":"ok","valid":true,"data":{"a":"abc-12"}},{"description":"bad","valid":false,"data":{"a":"ab"}}]}`
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := MaskBenchFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := RunMaskBench(MaskBenchConfig{
		NewCompiler: func() *Compiler { return NewCompiler(v, Options{MaxMaskTime: time.Nanosecond}) },
		Encode:      func(s string) []int32 { return greedyTokens(v, []byte(s)) },
	}, files)
	if err != nil {
		t.Fatal(err)
	}
	if s.Compiled != 1 || s.ValidTests != 1 || s.InvalidTests != 1 || s.ValidRejected+s.InvalidAccepted != 0 {
		t.Fatalf("compiled %d, valid %d, invalid %d, wrong %d: %+v", s.Compiled, s.ValidTests, s.InvalidTests, s.ValidRejected+s.InvalidAccepted, s.Results[0])
	}
	if s.MaskRetries == 0 {
		t.Fatal("no mask passed a 1 ns budget")
	}
}

// TestMaskBenchCPUTime: with CPUTime the benchmark times its work by the thread's CPU
// clock, which runs while the thread computes and stands still while it waits.
func TestMaskBenchCPUTime(t *testing.T) {
	if _, ok := threadCPUTime(); !ok {
		t.Skip("no per-thread CPU clock on this platform: CPUTime times wall time")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	clk := benchClock{cpu: true}
	t0 := clk.now()
	time.Sleep(30 * time.Millisecond)
	if d := clk.usSince(t0); d > 15000 {
		t.Errorf("the CPU clock ran %dus over a 30ms sleep", d)
	}
	t0 = clk.now()
	for start := time.Now(); time.Since(start) < 20*time.Millisecond; {
	}
	if d := clk.usSince(t0); d < 2000 {
		t.Errorf("the CPU clock ran %dus over 20ms of spinning", d)
	}
	v := toyVocab(t)
	dir := t.TempDir()
	file := `{"description":"t","schema":{"type":"array","items":{"type":"string","pattern":"^[a-z]+$"}},` +
		`"tests":[{"description":"ok","valid":true,"data":["abc","de"]},{"description":"bad","valid":false,"data":["A"]}]}`
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err := MaskBenchFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := RunMaskBench(MaskBenchConfig{
		NewCompiler: func() *Compiler { return NewCompiler(v, Options{}) },
		Encode:      func(s string) []int32 { return greedyTokens(v, []byte(s)) },
		CPUTime:     true,
	}, files)
	if err != nil {
		t.Fatal(err)
	}
	if s.Compiled != 1 || s.ValidTests != 1 || s.InvalidTests != 1 || s.TBM.N == 0 || s.TTFM.N != 1 {
		t.Fatalf("compiled %d, valid %d, invalid %d, %d masks timed: %+v", s.Compiled, s.ValidTests, s.InvalidTests, s.TBM.N, s.Results[0])
	}
}
