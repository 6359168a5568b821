// Package tokenizer turns text into token ids and back.
//
// Bytes is the embedded default model's tokenizer: one id per byte (0-255), with BOS and
// EOS as the two ids after them. It lets the built-in model run on a fresh machine with
// nothing to download.
package tokenizer

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bytes is the byte-level tokenizer.
type Bytes struct {
	BOSID, EOSID int32
}

var _ Tokenizer = Bytes{}

// Encode returns the bytes of s, after BOS when addSpecial.
func (b Bytes) Encode(s string, addSpecial bool) []int32 {
	ids := make([]int32, 0, len(s)+1)
	if addSpecial {
		ids = append(ids, b.BOSID)
	}
	for i := 0; i < len(s); i++ {
		ids = append(ids, int32(s[i]))
	}
	return ids
}

// DecodeBytes returns the bytes of the byte ids; other ids are dropped.
func (b Bytes) DecodeBytes(ids []int32) []byte {
	out := make([]byte, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id < 256 {
			out = append(out, byte(id))
		}
	}
	return out
}

// Decode implements Tokenizer; invalid UTF-8 becomes U+FFFD as in HF tokenizers.
func (b Bytes) Decode(ids []int32, skipSpecial bool) string {
	var sb strings.Builder
	for _, id := range ids {
		switch {
		case id >= 0 && id < 256:
			sb.WriteByte(byte(id))
		case !skipSpecial:
			sb.WriteString(b.special(id))
		}
	}
	return strings.ToValidUTF8(sb.String(), "\uFFFD")
}

func (b Bytes) special(id int32) string {
	switch id {
	case b.BOSID:
		return "<bos>"
	case b.EOSID:
		return "<eos>"
	}
	return fmt.Sprintf("<%d>", id)
}

// NewStream implements Tokenizer.
func (b Bytes) NewStream(skipSpecial bool) Stream { return &byteStream{b: b, skip: skipSpecial} }

type byteStream struct {
	b    Bytes
	skip bool
	held []byte
}

func (s *byteStream) Push(id int32) string {
	if id < 0 || id >= 256 {
		out := s.Flush()
		if !s.skip {
			out += s.b.special(id)
		}
		return out
	}
	s.held = append(s.held, byte(id))
	n := completeUTF8(s.held)
	out := strings.ToValidUTF8(string(s.held[:n]), "\uFFFD")
	s.held = append(s.held[:0], s.held[n:]...)
	return out
}

func (s *byteStream) Flush() string {
	out := strings.ToValidUTF8(string(s.held), "\uFFFD")
	s.held = s.held[:0]
	return out
}

// completeUTF8 is the length of the longest prefix of b that does not end inside a
// UTF-8 sequence that could still be completed.
func completeUTF8(b []byte) int {
	for back := 1; back <= 3 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b)
		}
		if c >= 0xC0 { // the leading byte of the last sequence
			if !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}

// EncodeChat renders a plain "role: content" transcript, since a byte model has no chat
// template of its own.
func (b Bytes) EncodeChat(msgs []Message, addGenerationPrompt bool) ([]int32, error) {
	var sb strings.Builder
	for _, m := range msgs {
		switch m.Role {
		case "system", "user", "assistant":
		default:
			return nil, fmt.Errorf("unknown chat role %q (want system, user or assistant)", m.Role)
		}
		sb.WriteString(m.Role + ": " + m.Content + "\n")
	}
	if addGenerationPrompt {
		sb.WriteString("assistant: ")
	}
	return b.Encode(sb.String(), true), nil
}

// TokenBytes is the byte an id stands for (nil for BOS and EOS).
func (b Bytes) TokenBytes(id int32) []byte {
	if id >= 0 && id < 256 {
		return []byte{byte(id)}
	}
	return nil
}

// IsSpecial reports whether id is BOS or EOS.
func (b Bytes) IsSpecial(id int32) bool { return id == b.BOSID || id == b.EOSID }

// BOS implements Tokenizer.
func (b Bytes) BOS() int32 { return b.BOSID }

// EOS implements Tokenizer.
func (b Bytes) EOS() int32 { return b.EOSID }

// NumTokens implements Tokenizer: 256 bytes plus BOS and EOS.
func (b Bytes) NumTokens() int { return 258 }

// Printable renders bytes as text, escaping invalid UTF-8 and control characters the
// way a Go string literal would, so random model output stays on one line.
func Printable(b []byte) string {
	if utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < 0x20 && r != '\n' && r != '\t' }) {
		return string(b)
	}
	q := strconv.Quote(string(b))
	return q[1 : len(q)-1]
}
