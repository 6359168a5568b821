package tokenizer

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzEncode: encoding never panics, is deterministic, yields ids in range, and
// decodes back to the input when the input is valid UTF-8 (HF's input always is).
// Seeded from the corpus.
func FuzzEncode(f *testing.F) {
	for _, l := range readJSONL[goldenLine](f, goldenPath) {
		f.Add(l.Text)
	}
	f.Add("\xff\xfe<｜User｜\xe2\x82")
	f.Fuzz(func(t *testing.T, s string) {
		b := realBPE(t)
		ids := b.Encode(s, false)
		for _, id := range ids {
			if id < 0 || int(id) >= b.NumTokens() {
				t.Fatalf("id %d out of range", id)
			}
		}
		if again := b.Encode(s, false); !slices.Equal(ids, again) {
			t.Fatalf("Encode(%q) not deterministic: %v then %v", s, ids, again)
		}
		if utf8.ValidString(s) {
			if got := b.Decode(ids, false); got != s {
				t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
			}
		} else if got, want := b.Decode(ids, false), lossyString([]byte(s)); got != want {
			// Invalid input bytes survive as byte tokens, so decoding repairs them
			// exactly as decoding the input itself would.
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// FuzzDecode: any sequence of in-range ids decodes without panicking to valid UTF-8,
// and the stream decoder agrees with the whole decode, both with and without special
// tokens. Every 3 bytes of the input are one id (mod NumTokens).
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1, 2, 3})
	f.Add([]byte("\x00\x00\xe2\x00\x00\x82\x00\x00\xac"))
	for i, l := range readJSONL[goldenLine](f, goldenPath) {
		if i%50 != 0 {
			continue
		}
		f.Add(idsToFuzz(l.IDs))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := realBPE(t)
		ids := make([]int32, 0, len(data)/3)
		for i := 0; i+3 <= len(data); i += 3 {
			v := int(data[i])<<16 | int(data[i+1])<<8 | int(data[i+2])
			ids = append(ids, int32(v%b.NumTokens()))
		}
		for _, skip := range []bool{false, true} {
			whole := b.Decode(ids, skip)
			if !utf8.ValidString(whole) {
				t.Fatalf("Decode(%v) is not valid UTF-8: %q", ids, whole)
			}
			s := b.NewStream(skip)
			var sb strings.Builder
			for _, id := range ids {
				out := s.Push(id)
				if !utf8.ValidString(out) {
					t.Fatalf("Push(%d) = %q, not valid UTF-8", id, out)
				}
				sb.WriteString(out)
			}
			sb.WriteString(s.Flush())
			if sb.String() != whole {
				t.Fatalf("ids %v skip=%v: stream %q, decode %q", ids, skip, sb.String(), whole)
			}
		}
	})
}

// idsToFuzz packs ids as FuzzDecode reads them: 3 big-endian bytes each.
func idsToFuzz(ids []int32) []byte {
	out := make([]byte, 0, 3*len(ids))
	for _, id := range ids {
		out = append(out, byte(id>>16), byte(id>>8), byte(id))
	}
	return out
}
