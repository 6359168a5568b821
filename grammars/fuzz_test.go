package grammars

import (
	"bytes"
	"math/rand"
	"regexp"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// fuzzOpts keeps fuzzed inputs small and quick.
var fuzzOpts = Options{MaxCompileTime: 2 * time.Second, MaxNFANodes: 20000, MaxStates: 4000, MaxConfigs: 4000, MaxStacks: 200, MaxSchemaDepth: 32}

// fuzzWalk samples a few tokens with the mask checked against Accept at every step;
// it returns the output and whether EOS was accepted.
func fuzzWalk(t *testing.T, g *Grammar, seed int64, steps int) ([]byte, bool) {
	v := g.Vocab()
	m := g.NewMatcher()
	rng := rand.New(rand.NewSource(seed))
	mask := make([]uint64, v.MaskWords())
	var out []byte
	for i := 0; i < steps; i++ {
		if err := m.FillMask(mask); err != nil {
			return out, false // a state limit: a clear error, fine
		}
		// every allowed token is accepted, and a sample of the others refused
		al := allowedTokens(mask)
		for _, tk := range al {
			if err := m.Accept(tk); err != nil {
				t.Fatalf("token %d %q in the mask but refused after %q: %v", tk, v.TokenBytes(tk), out, err)
			}
			if err := m.Rollback(1); err != nil {
				t.Fatal(err)
			}
		}
		for k := 0; k < 8; k++ {
			tk := int32(rng.Intn(v.NumTokens()))
			if mask[tk>>6]&(1<<(uint(tk)&63)) == 0 {
				if err := m.Accept(tk); err == nil {
					t.Fatalf("token %d %q not in the mask but accepted after %q", tk, v.TokenBytes(tk), out)
				}
			}
		}
		if len(al) == 0 {
			return out, false
		}
		tk := al[rng.Intn(len(al))]
		if err := m.Accept(tk); err != nil {
			t.Fatal(err)
		}
		if tk == v.EOS() {
			return out, true
		}
		out = append(out, v.TokenBytes(tk)...)
	}
	return out, false
}

func FuzzRegex(f *testing.F) {
	for _, s := range []string{`[a-z]+`, `(ab|cd)*e?`, `\d{2,4}-\w+`, `[^"]{0,3}"`, `é|αβ+`, `(?i)abc`, `a(?=b)`, `x{3}y{1,}`, `.*`, `[\x00-\x7f]+`} {
		f.Add(s, int64(1))
	}
	v := toyVocab(f)
	f.Fuzz(func(t *testing.T, pat string, seed int64) {
		if len(pat) > 200 {
			return
		}
		c := NewCompiler(v, fuzzOpts)
		g, err := c.Regex(pat)
		if err != nil {
			if ErrorReason(err) == "other" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		out, ended := fuzzWalk(t, g, seed, 12)
		if ended {
			if re, err := regexp.Compile(`^(?:` + pat + `)$`); err == nil && !re.Match(out) {
				t.Fatalf("%q: generated %q, which Go's regexp does not match", pat, out)
			}
		}
	})
}

func FuzzEBNF(f *testing.F) {
	for _, s := range []string{jsonGBNF, `root ::= "a" root? "b"`, `root ::= [0-9]+ ("," [0-9]+)*`, "root ::= x\nx ::= \"(\" root* \")\" | \"z\"", `root ::= "\x41"{2,3} . [^a]`} {
		f.Add(s, int64(2))
	}
	v := toyVocab(f)
	f.Fuzz(func(t *testing.T, src string, seed int64) {
		if len(src) > 2000 {
			return
		}
		c := NewCompiler(v, fuzzOpts)
		g, err := c.EBNF(src)
		if err != nil {
			if ErrorReason(err) == "other" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		fuzzWalk(t, g, seed, 12)
	})
}

func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":3},"b":{"type":"integer","minimum":-5,"maximum":12}},"required":["a"]}`,
		`{"type":"array","items":{"enum":[1,"x",null]},"minItems":1,"maxItems":3}`,
		`{"anyOf":[{"type":"number"},{"type":"string","pattern":"^a+$"}]}`,
		`{"$defs":{"t":{"type":"object","properties":{"c":{"type":"array","items":{"$ref":"#/$defs/t"}}},"additionalProperties":false}},"$ref":"#/$defs/t"}`,
		`{"type":"object","patternProperties":{"^x":{"type":"boolean"}},"additionalProperties":{"type":"null"}}`,
		`{"type":"array","uniqueItems":true,"items":{"type":"integer","minimum":0,"maximum":2}}`,
		`{"type":"string","format":"date-time"}`,
		`{"oneOf":[{"const":1},{"const":{"a":[true]}}]}`,
		`true`,
	} {
		f.Add([]byte(s), int64(3))
	}
	v := toyVocab(f)
	f.Fuzz(func(t *testing.T, schema []byte, seed int64) {
		if len(schema) > 4000 {
			return
		}
		c := NewCompiler(v, fuzzOpts)
		g, err := c.JSONSchema(schema)
		if err != nil {
			if ErrorReason(err) == "other" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		out, ended := fuzzWalk(t, g, seed, 16)
		if !ended {
			return
		}
		// a document the matcher lets end must be valid
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
		if err != nil {
			t.Fatalf("generated %q is not JSON: %v", out, err)
		}
		sch, err := c.loadSchema(mustDoc(t, schema))
		if err != nil {
			t.Fatalf("compiled but the library refuses it: %v", err)
		}
		if err := safeValidate(sch, doc); err != nil {
			t.Fatalf("schema %s: generated %s, which is invalid: %v", schema, out, err)
		}
	})
}

func mustDoc(t *testing.T, b []byte) any {
	d, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func safeValidate(sch *jsonschema.Schema, doc any) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = nil // the library's own bug, not ours
		}
	}()
	return sch.Validate(doc)
}
