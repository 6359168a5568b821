package engram

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Vocab is what the token map needs from a tokenizer: how many ids it has and the bytes
// each decodes to (tokenizer.BPE implements it).
type Vocab interface {
	NumTokens() int
	TokenBytes(id int32) []byte
}

// BuildTokenMap maps token ids 0..n-1 (n = min(limit, v.NumTokens()); limit ≤ 0 means
// all) onto a compressed id space where tokens that normalize alike share an id, as the
// reference's build_compressed_token_map does: each id decodes to text (its bytes, read
// as UTF-8 with invalid sequences replaced by U+FFFD), the text is normalized (NFKC, NFD,
// accents stripped, lowercased, whitespace runs collapsed to one space, stripped — a
// token that is exactly one space stays one space), and ids get compressed ids in order
// of first appearance of their key. A text with a U+FFFD (a partial UTF-8 byte token)
// is keyed by its raw byte-level token string instead; an empty normalization keys by
// the text itself. It returns the map and the compressed vocabulary size.
func BuildTokenMap(v Vocab, limit int) ([]int32, int) {
	n := v.NumTokens()
	if limit > 0 && limit < n {
		n = limit
	}
	keys := map[string]int32{}
	out := make([]int32, n)
	for id := 0; id < n; id++ {
		b := v.TokenBytes(int32(id))
		text := strings.ToValidUTF8(string(b), "\uFFFD")
		var key string
		if strings.ContainsRune(text, utf8.RuneError) {
			key = byteLevel(b)
		} else if key = Normalize(text); key == "" {
			key = text
		}
		c, ok := keys[key]
		if !ok {
			c = int32(len(keys))
			keys[key] = c
		}
		out[id] = c
	}
	return out, len(keys)
}

// Normalize is the Engram key normalizer (tokenizers' NFKC, NFD, StripAccents,
// Lowercase, Replace([ \t\r\n]+ → " "), Replace(^ $ → sentinel), Strip,
// Replace(sentinel → " ")).
func Normalize(s string) string {
	s = norm.NFD.String(norm.NFKC.String(s))
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		if unicode.Is(unicode.M, r) { // StripAccents drops combining marks (General_Category M)
			continue
		}
		if r == ' ' || r == '\t' || r == '\r' || r == '\n' {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		lowerRune(&b, r)
	}
	s = b.String()
	if s == " " {
		return " "
	}
	return strings.TrimFunc(s, unicode.IsSpace)
}

// lowerRune writes Rust's char::to_lowercase of r: the simple mapping, except U+0130
// (İ), whose unconditional lowercase is two characters.
func lowerRune(b *strings.Builder, r rune) {
	if r == 'İ' {
		b.WriteString("i\u0307")
		return
	}
	b.WriteRune(unicode.ToLower(r))
}

// byteLevel spells bytes in the GPT-2 byte-level alphabet, as tokenizer.json keys its
// vocabulary (printable bytes stand for themselves, the rest take U+0100 upward).
func byteLevel(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteRune[c])
	}
	return sb.String()
}

var byteRune = func() (t [256]rune) {
	n := rune(0)
	for c := 0; c < 256; c++ {
		if c >= '!' && c <= '~' || c >= 0xA1 && c <= 0xAC || c >= 0xAE && c <= 0xFF {
			t[c] = rune(c)
		} else {
			t[c] = 0x100 + n
			n++
		}
	}
	return t
}()
