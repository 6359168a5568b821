package tokenizer

import (
	"unicode/utf8"
)

// Decode implements Tokenizer. It concatenates the tokens' bytes (dropping special
// tokens when skipSpecial, and ids that name no token, as HF does) and turns invalid
// UTF-8 into U+FFFD the way HF's String::from_utf8_lossy does.
func (b *BPE) Decode(ids []int32, skipSpecial bool) string {
	buf := make([]byte, 0, len(ids)*4)
	for _, id := range ids {
		if t, ok := b.piece(id, skipSpecial); ok {
			buf = append(buf, t...)
		}
	}
	return lossyString(buf)
}

// piece returns the bytes id contributes to a decode, or ok=false if it contributes
// nothing at all (not even a break in a UTF-8 sequence).
func (b *BPE) piece(id int32, skipSpecial bool) ([]byte, bool) {
	if id < 0 || int(id) >= len(b.flags) {
		return nil, false
	}
	f := b.flags[id]
	if f&flagValid == 0 || skipSpecial && f&flagSpecial != 0 {
		return nil, false
	}
	return b.arena[b.offs[id]:b.offs[id+1]], true
}

// lossyString converts b to a string, replacing each maximal ill-formed subsequence
// with one U+FFFD. This is the Unicode "substitution of maximal subparts" practice that
// Rust's from_utf8_lossy and the WHATWG TextDecoder (the JS oracle) both follow; Go's
// strings.ToValidUTF8 (one U+FFFD per run) and range loops (one per byte) do not.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || n > 1 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		out = append(out, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return string(out)
}

// seqInfo gives, for a lead byte, the length of its sequence and the range its second
// byte must be in (Unicode Table 3-7); need == 0 for bytes that cannot lead.
func seqInfo(c byte) (need int, lo, hi byte) {
	switch {
	case c >= 0xC2 && c <= 0xDF:
		return 2, 0x80, 0xBF
	case c == 0xE0:
		return 3, 0xA0, 0xBF
	case c == 0xED:
		return 3, 0x80, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		return 3, 0x80, 0xBF
	case c == 0xF0:
		return 4, 0x90, 0xBF
	case c >= 0xF1 && c <= 0xF3:
		return 4, 0x80, 0xBF
	case c == 0xF4:
		return 4, 0x80, 0x8F
	}
	return 0, 0, 0
}

// validPrefix is the length of the longest prefix of b (at most a whole sequence) that
// is a prefix of some well-formed UTF-8 sequence; 0 if b[0] cannot start one.
func validPrefix(b []byte) (n, need int) {
	need, lo, hi := seqInfo(b[0])
	if need == 0 {
		return 0, 0
	}
	n = 1
	if n < len(b) && b[1] >= lo && b[1] <= hi {
		n = 2
		for n < need && n < len(b) && b[n] >= 0x80 && b[n] <= 0xBF {
			n++
		}
	}
	return n, need
}

// maximalSubpart is the length of the ill-formed subsequence at the start of b (which
// does not begin a valid character): its longest valid-prefix, or one byte.
func maximalSubpart(b []byte) int {
	n, _ := validPrefix(b)
	return max(n, 1)
}

// incompleteTail is the length of the suffix of b that is a proper prefix of a
// well-formed sequence, i.e. a character still waiting for its last bytes.
func incompleteTail(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return 0
		}
		if c < 0xC0 {
			continue // a continuation byte: look further back for its lead
		}
		n, need := validPrefix(b[len(b)-back:])
		if n == back && n < need {
			return back
		}
		return 0
	}
	return 0
}

// NewStream implements Tokenizer.
func (b *BPE) NewStream(skipSpecial bool) Stream { return &bpeStream{b: b, skip: skipSpecial} }

// bpeStream decodes incrementally. It keeps back only an incomplete character at the
// end of what it has seen, so the text it returns is always valid UTF-8 and the
// concatenation of its outputs and Flush equals Decode of all the ids: the bytes before
// the held tail can no longer change their decoding (the tail starts with a lead byte,
// which no earlier sequence can absorb).
type bpeStream struct {
	b    *BPE
	skip bool
	held []byte
}

func (s *bpeStream) Push(id int32) string {
	t, ok := s.b.piece(id, s.skip)
	if !ok {
		return ""
	}
	if len(s.held) == 0 && utf8.Valid(t) {
		return string(t) // the common case: a token that is whole characters
	}
	s.held = append(s.held, t...)
	n := len(s.held) - incompleteTail(s.held)
	out := lossyString(s.held[:n])
	s.held = append(s.held[:0], s.held[n:]...)
	return out
}

func (s *bpeStream) Flush() string {
	out := lossyString(s.held)
	s.held = s.held[:0]
	return out
}
