package grammars

import (
	"deepinfer/internal/testtok"
	"sync"
	"testing"

	"deepinfer/tokenizer"
)

// The DeepSeek vocabulary for tests: internal/testtok fetches the tokenizer once,
// tokenizer.LoadBPE reads it.
var (
	realOnce sync.Once
	realBPE  *tokenizer.BPE
	realVoc  *Vocab
	realErr  error
)

const deepseekWidth = 129280

func needReal(tb testing.TB) (*Vocab, *tokenizer.BPE) {
	tb.Helper()
	dir := testtok.Need(tb)
	realOnce.Do(func() {
		realBPE, realErr = tokenizer.LoadBPE(dir)
		if realErr == nil {
			realVoc = VocabFrom(realBPE, deepseekWidth)
		}
	})
	if realErr != nil {
		tb.Fatal(realErr)
	}
	return realVoc, realBPE
}

// needRealVocab returns the DeepSeek vocabulary.
func needRealVocab(tb testing.TB) *Vocab {
	v, _ := needReal(tb)
	return v
}

// realEncode tokenizes like MaskBench does (no special tokens).
func realEncode(tb testing.TB) func(string) []int32 {
	_, b := needReal(tb)
	return func(s string) []int32 { return b.Encode(s, false) }
}
