package tokenizer

import (
	"bufio"
	"deepinfer/internal/testtok"
	"encoding/json"
	"os"
	"sync"
	"testing"
)

var (
	loadOnce sync.Once
	loaded   *BPE
	loadErr  error
)

// realDir returns the fetched tokenizer's directory (internal/testtok).
func realDir(tb testing.TB) string { return testtok.Need(tb) }

// realBPE loads the fetched tokenizer once per test binary.
func realBPE(tb testing.TB) *BPE {
	tb.Helper()
	dir := realDir(tb)
	loadOnce.Do(func() { loaded, loadErr = LoadBPE(dir) })
	if loadErr != nil {
		tb.Fatal(loadErr)
	}
	return loaded
}

type goldenLine struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

type chatGolden struct {
	Name                string    `json:"name"`
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	Text                string    `json:"text"`
	IDs                 []int32   `json:"ids"`
}

// readJSONL decodes every line of a testdata file into a new T.
func readJSONL[T any](tb testing.TB, path string) []T {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for n := 1; sc.Scan(); n++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatalf("%s:%d: %v", path, n, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

const (
	corpusPath     = "../testdata/tokenizer/corpus.jsonl"
	goldenPath     = "../testdata/tokenizer/golden.jsonl"
	chatGoldenPath = "../testdata/tokenizer/chat_golden.jsonl"
)

// pieces returns the pre-tokens of text (between added tokens), for tests.
func (b *BPE) pieces(text string) []string {
	var ps []string
	e := encoder{b: b, trace: func(s string) { ps = append(ps, s) }}
	e.text(0, text)
	return ps
}
