package grammars

import (
	"fmt"
	"math/rand"
	"testing"
)

// toyVocab: the 256 single bytes, some multi-byte tokens, a special token and EOS,
// in a mask wider than the vocabulary.
func toyVocab(tb testing.TB) *Vocab {
	tb.Helper()
	var toks [][]byte
	for b := 0; b < 256; b++ {
		toks = append(toks, []byte{byte(b)})
	}
	for _, s := range []string{"ab", "abc", "cd", "123", "-12", "αβ", "\"a", "a\"", ", ", ": ", "{\"", "\"}", "true", "null", "1.5",
		"\", \"", "\": ", "\": \"", "}}", "]}", "[{", "\"]", "name", "\"name\": ", "e+", "00", "abab", " \"", "x\"y", "é", "\xc3", "\xa9", "ab", "{}", "[]", "},", "\\n", "\\u00", "a\"}"} {
		toks = append(toks, []byte(s))
	}
	special := make([]bool, len(toks)+2)
	toks = append(toks, []byte("<|special|>"), nil)
	special[len(toks)-2] = true
	special[len(toks)-1] = true
	v, err := NewVocab(toks, special, int32(len(toks)-1), len(toks)+70)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// checkMask compares FillMask with trying every token (Accept then Rollback).
func checkMask(tb testing.TB, m *Matcher, ctx string) []uint64 {
	tb.Helper()
	v := m.g.vocab
	mask := make([]uint64, v.MaskWords())
	if err := m.FillMask(mask); err != nil {
		tb.Fatalf("%s: FillMask: %v", ctx, err)
	}
	for id := 0; id < v.Width(); id++ {
		bit := mask[id>>6]&(1<<(uint(id)&63)) != 0
		if id >= v.NumTokens() {
			if bit {
				tb.Fatalf("%s: id %d past the vocabulary is allowed", ctx, id)
			}
			continue
		}
		err := m.Accept(int32(id))
		ok := err == nil
		if ok {
			if rerr := m.Rollback(1); rerr != nil {
				tb.Fatal(rerr)
			}
		}
		if ok != bit {
			tb.Fatalf("%s: token %d %q: mask says %v, Accept says %v (%v)", ctx, id, v.TokenBytes(int32(id)), bit, ok, err)
		}
	}
	return mask
}

func allowedTokens(mask []uint64) []int32 {
	var out []int32
	for i, w := range mask {
		for w != 0 {
			b := 0
			for w&(1<<uint(b)) == 0 {
				b++
			}
			out = append(out, int32(i*64+b))
			w &^= 1 << uint(b)
		}
	}
	return out
}

// randomWalk samples allowed tokens, checking the mask at every step, until EOS or
// steps run out; it returns the bytes generated.
func randomWalk(tb testing.TB, m *Matcher, rng *rand.Rand, steps int, check bool) ([]byte, bool) {
	tb.Helper()
	v := m.g.vocab
	var out []byte
	mask := make([]uint64, v.MaskWords())
	for i := 0; i < steps; i++ {
		if check {
			mask = checkMask(tb, m, fmt.Sprintf("step %d after %q", i, out))
		} else if err := m.FillMask(mask); err != nil {
			tb.Fatal(err)
		}
		al := allowedTokens(mask)
		if len(al) == 0 {
			tb.Fatalf("dead end after %q", out)
		}
		tok := al[rng.Intn(len(al))]
		// prefer ending sometimes
		if err := m.Accept(tok); err != nil {
			tb.Fatalf("accept of allowed token %d: %v", tok, err)
		}
		if tok == v.EOS() {
			return out, true
		}
		out = append(out, v.TokenBytes(tok)...)
	}
	return out, false
}
