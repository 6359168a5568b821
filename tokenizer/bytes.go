// Package tokenizer turns text into token ids and back.
//
// Bytes is the embedded default model's tokenizer: one id per byte (0-255), with BOS and
// EOS as the two ids after them. It lets the built-in model run on a fresh machine with
// nothing to download.
package tokenizer

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bytes is the byte-level tokenizer.
type Bytes struct {
	BOS, EOS int32
}

// Encode returns BOS followed by the bytes of s.
func (b Bytes) Encode(s string) []int32 {
	ids := make([]int32, 0, len(s)+1)
	ids = append(ids, b.BOS)
	for i := 0; i < len(s); i++ {
		ids = append(ids, int32(s[i]))
	}
	return ids
}

// Decode returns the bytes of the byte ids; special ids are dropped.
func (b Bytes) Decode(ids []int32) []byte {
	out := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			out = append(out, byte(id))
		}
	}
	return out
}

// Printable renders bytes as text, escaping invalid UTF-8 and control characters the
// way a Go string literal would, so random model output stays on one line.
func Printable(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
		return string(b)
	}
	q := strconv.Quote(string(b))
	return q[1 : len(q)-1]
}
