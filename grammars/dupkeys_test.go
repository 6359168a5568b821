package grammars

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strconv"
	"testing"
)

// repeatedKey returns a key that an object of doc holds twice (quoted), or "".
func repeatedKey(tb testing.TB, doc []byte) string {
	dec := json.NewDecoder(bytes.NewReader(doc))
	type level struct {
		obj    bool
		keys   map[string]bool
		expect bool
	}
	var st []*level
	for {
		tk, err := dec.Token()
		if err != nil {
			return ""
		}
		if n := len(st); n > 0 && st[n-1].obj && st[n-1].expect {
			if k, ok := tk.(string); ok {
				if st[n-1].keys[k] {
					return strconv.Quote(k)
				}
				st[n-1].keys[k] = true
				st[n-1].expect = false
				continue
			}
		}
		if n := len(st); n > 0 && st[n-1].obj {
			st[n-1].expect = true
		}
		switch tk {
		case json.Delim('{'):
			st = append(st, &level{obj: true, keys: map[string]bool{}, expect: true})
		case json.Delim('['):
			st = append(st, &level{})
		case json.Delim('}'), json.Delim(']'):
			st = st[:len(st)-1]
			if n := len(st); n > 0 && st[n-1].obj {
				st[n-1].expect = true
			}
		}
	}
}

// dupVocab: single bytes and tokens that close keys, spell whole keys or two of them.
func dupVocab(tb testing.TB) *Vocab {
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range []string{`"a"`, `"ab"`, `a"`, `b": `, `", "`, `"}`, `{"a": 1, "a"`, `, "a": `, `"a": 2, "a": `, `{"b": {"a": 1}, "a"`, `""`, `"": `, `1, "`, `}, "a"`} {
		toks = append(toks, []byte(s))
	}
	special := make([]bool, len(toks)+1)
	toks = append(toks, nil)
	special[len(toks)-1] = true
	v, err := NewVocab(toks, special, int32(len(toks)-1), len(toks)+10)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// TestNoDuplicateKeys: under patternProperties and additionalProperties no generation
// writes a key twice in one object; the mask agrees with Accept at every step
// (checkMask), also for tokens that close a key, spell one whole or spell two.
func TestNoDuplicateKeys(t *testing.T) {
	v := dupVocab(t)
	c := NewCompiler(v, Options{})
	for _, schema := range []string{
		`{"type":"object","patternProperties":{"^[ab]*$":{"type":"integer","minimum":1,"maximum":2}},"additionalProperties":false}`,
		`{"type":"object","additionalProperties":{"type":"object","additionalProperties":{"enum":[1,2]},"maxProperties":3}}`,
		`{"type":"object","properties":{"b":{"type":"object"}},"patternProperties":{"^a":{"enum":[1,2]}},"additionalProperties":{"type":"integer"}}`,
	} {
		g, err := c.JSONSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(7))
		finished := 0
		for w := 0; w < 40; w++ {
			m := g.NewMatcher()
			out, ended := randomWalk(t, m, rng, 60, true)
			if k := repeatedKey(t, out); k != "" {
				t.Fatalf("%s: generated %s, key %s twice", schema, out, k)
			}
			if ended {
				finished++
			}
		}
		if finished < 5 {
			t.Errorf("%s: %d of 40 walks finished", schema, finished)
		}
		// a document with a repeated extra key is refused at the token that repeats it
		doc := `{"a": 1, "a": 2}`
		if ok, why := runDoc(t, g, doc, true); ok {
			t.Errorf("%s: %s accepted", schema, doc)
		} else if why == "" {
			t.Errorf("no reason")
		}
	}
	// rollback restores the key sets
	g, _ := c.JSONSchema([]byte(`{"type":"object","additionalProperties":{"enum":[1,2]}}`))
	m := g.NewMatcher()
	feed := func(s string) error {
		for _, b := range []byte(s) {
			if err := m.Accept(int32(b)); err != nil {
				return err
			}
		}
		return nil
	}
	if err := feed(`{"a": 1, "a`); err != nil {
		t.Fatal(err)
	}
	if feed(`"`) == nil {
		t.Fatal(`repeated key "a" accepted`)
	}
	if err := m.Rollback(9); err != nil { // back to `{"`
		t.Fatal(err)
	}
	if err := feed(`b": 1, "a": 2, "`); err != nil {
		t.Fatal(err)
	}
	if feed(`b"`) == nil {
		t.Fatal(`repeated key "b" accepted after rollback`)
	}
}

// FuzzKeyScan: feeding a JSON document in chunks, keyScan finds a repeated key (in the
// chunk that completes it, without changing its state) exactly when encoding/json's
// token stream shows one.
func FuzzKeyScan(f *testing.F) {
	for _, s := range []string{`{"a": 1, "a": 2}`, `{"a": {"a": 1}, "b": [{"a": 1, "b": 2}], "c": "\"a\""}`, `[{"": 1, "": 2}]`,
		`{"a\"b": 1, "a\\"b": 2, "a\"b": 3}`, `{"x": {}, "y": [], "x": null}`, `{"k": "}", "k": 0}`} {
		f.Add([]byte(s), uint64(0x1234567))
	}
	f.Fuzz(func(t *testing.T, doc []byte, cuts uint64) {
		if !json.Valid(doc) {
			return
		}
		want := repeatedKey(t, doc) != ""
		var k, tmp keyScan
		got := false
		for p := 0; p < len(doc); {
			n := 1 + int(cuts%7)
			cuts = cuts/7 + cuts<<59
			chunk := doc[p:min(p+n, len(doc))]
			before := len(k.objs)
			if k.wouldRepeat(chunk, &tmp) {
				if len(k.objs) != before {
					t.Fatal("wouldRepeat changed the state")
				}
				got = true
				break
			}
			if !k.feed(chunk) {
				t.Fatalf("feed found a repeat wouldRepeat missed in %q", chunk)
			}
			p += len(chunk)
		}
		if got != want {
			t.Fatalf("%s: keyScan repeat %v, encoding/json %v", doc, got, want)
		}
	})
}

// TestKeyPrefixThatCanOnlyRepeat: in a finite key language a token that stops inside
// a key spelling one already in its object, where the key can then only close, is
// cleared (the next token would be a dead end); a key that can go on is kept.
func TestKeyPrefixThatCanOnlyRepeat(t *testing.T) {
	v := byteVocab(t)
	c := NewCompiler(v, Options{})
	g, err := c.JSONSchema([]byte(`{"type":"object","patternProperties":{"^x[0-9]$":{"type":"null"},"^y[0-9]+$":{"type":"null"}},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	acceptPrefix(t, m, `{"x1": null, "y1": null, "x`)
	mask := checkMask(t, m, "after x")
	if mask['1'>>6]&(1<<('1'&63)) != 0 || mask['2'>>6]&(1<<('2'&63)) == 0 {
		t.Errorf(`after {"x1": null, "y1": null, "x: '1' allowed %v (want false), '2' allowed %v (want true)`,
			mask['1'>>6]&(1<<('1'&63)) != 0, mask['2'>>6]&(1<<('2'&63)) != 0)
	}
	// "y1" can go on ("y12"): '1' stays
	if err := m.Rollback(1); err != nil {
		t.Fatal(err)
	}
	acceptPrefix(t, m, `y`)
	if mask := checkMask(t, m, "after y"); mask['1'>>6]&(1<<('1'&63)) == 0 {
		t.Error(`after "y: '1' cleared although "y1..." can go on`)
	}
}
