package engram

import (
	"deepinfer/internal/testtok"
	"sync"
	"testing"

	"deepinfer/safetensors"
	"deepinfer/tokenizer"
)

var (
	tokOnce sync.Once
	tok     *tokenizer.BPE
	tokErr  error
)

// realTokenizer loads DeepSeek's tokenizer.json (fetched by internal/testtok) once.
func realTokenizer(tb testing.TB) *tokenizer.BPE {
	tb.Helper()
	dir := testtok.Need(tb)
	tokOnce.Do(func() { tok, tokErr = tokenizer.LoadBPE(dir) })
	if tokErr != nil {
		tb.Fatal(tokErr)
	}
	return tok
}

// TestTokenMapFixture builds the compressed map over the first 512 ids of DeepSeek's
// tokenizer and compares it with the map DeepSeek's engram.py computed for the V4.1
// fixture (engram_token_map), including the compressed vocabulary size of its config.
func TestTokenMapFixture(t *testing.T) {
	bpe := realTokenizer(t)
	ck, err := safetensors.OpenFile("../testdata/tiny-v41-dev/expected.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	want, _, err := ck.ReadInt64("engram_token_map")
	if err != nil {
		t.Fatal(err)
	}
	got, n := BuildTokenMap(bpe, len(want))
	if n != 418 {
		t.Errorf("compressed vocab %d, the fixture's config says 418", n)
	}
	for i := range want {
		if int64(got[i]) != want[i] {
			t.Fatalf("token %d (%q): compressed id %d, want %d", i, bpe.TokenBytes(int32(i)), got[i], want[i])
		}
	}
}

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		" The":    "the",
		"THE":     "the",
		" ":       " ",
		"\n":      " ",
		"  \t":    " ",
		"Café":    "cafe",
		"ﬁne":     "fine",
		"a  b":    "a b",
		"İ":       "i", // NFD splits off the dot, which StripAccents drops
		"<｜pad｜>": "<|pad|>",
	} {
		if got := Normalize(in); got != want {
			t.Errorf("Normalize(%q) = %q, want %q", in, got, want)
		}
	}
}
