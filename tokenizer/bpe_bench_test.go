package tokenizer

import "testing"

// BenchmarkEncode measures encoding throughput (MB/s of input text) over the whole
// corpus. scripts/tokenizer-bench.sh runs it with GOMAXPROCS=1 next to the JS port's
// tools/tokref/bench.js on the same corpus. Like the JS tokenizer's LRU cache, the word
// cache is warm after the first pass, so this is the steady state of a long-running
// server.
func BenchmarkEncode(b *testing.B) {
	tok := realBPE(b)
	texts := readJSONL[string](b, corpusPath)
	n := 0
	for _, s := range texts {
		n += len(s)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range texts {
			tok.Encode(s, false)
		}
	}
}

// BenchmarkDecode measures decoding throughput (MB/s of output text) over the golden ids.
func BenchmarkDecode(b *testing.B) {
	tok := realBPE(b)
	lines := readJSONL[goldenLine](b, goldenPath)
	n := 0
	for _, l := range lines {
		n += len(l.Text)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			tok.Decode(l.IDs, false)
		}
	}
}
