package tokenizer

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// The three Split regexes of DeepSeek-V3's pre_tokenizer, as tokenizer.json spells them.
// The Split steps are compiled by hand below (Go's regexp has no lookahead, and a
// general regex engine would be the slowest part of encoding); LoadBPE checks that a
// tokenizer.json carries exactly these, so a different pre-tokenizer is refused rather
// than silently mis-split.
const (
	reDigits = `\p{N}{1,3}`
	reCJK    = "[一-龥぀-ゟ゠-ヿ]+"
	reWords  = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// sameRegex reports whether got is want up to how a JSON writer may spell it: the CJK
// class with \uXXXX escapes instead of the characters, and \r \n as escapes instead of
// the control characters themselves.
func sameRegex(got, want string) bool {
	if got == want {
		return true
	}
	r := strings.NewReplacer("\r", `\r`, "\n", `\n`, "一", `\u4e00`, "龥", `\u9fa5`, "぀", `\u3040`,
		"ゟ", `\u309f`, "゠", `\u30a0`, "ヿ", `\u30ff`)
	return r.Replace(got) == r.Replace(want)
}

// Character classes, one bit each, as the regexes see them. The categories are Unicode
// general categories; cWS is the \s of Oniguruma and Rust's regex (the engines behind
// HF tokenizers): 0009-000D, 0085 and Zs/Zl/Zp, which is exactly the White_Space
// property. (JavaScript's \s differs on U+0085 and U+FEFF; see doc.go.)
const (
	cL      = 1 << iota // \p{L}
	cM                  // \p{M}
	cN                  // \p{N}
	cP                  // \p{P}
	cS                  // \p{S}
	cWS                 // \s
	cCJK                // [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]
	cASCIIP             // [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]
)

// classTableSize covers planes 0-3, where nearly all text lives; runes above it are
// classified with the unicode package's range tables.
const classTableSize = 0x40000

var (
	classOnce  sync.Once
	classTable []uint8    // classTableSize entries, built on first use
	asciiClass [256]uint8 // the table's first 128 entries; 256 so a byte indexes it unchecked
)

func initClasses() {
	classOnce.Do(func() {
		t := make([]uint8, classTableSize)
		set := func(rt *unicode.RangeTable, bit uint8) {
			for _, r := range rt.R16 {
				for c := uint32(r.Lo); c <= uint32(r.Hi); c += uint32(r.Stride) {
					t[c] |= bit
				}
			}
			for _, r := range rt.R32 {
				for c := r.Lo; c <= r.Hi && c < classTableSize; c += r.Stride {
					t[c] |= bit
				}
			}
		}
		set(unicode.L, cL)
		set(unicode.M, cM)
		set(unicode.N, cN)
		set(unicode.P, cP)
		set(unicode.S, cS)
		set(unicode.White_Space, cWS)
		for _, rg := range [][2]int{{0x4e00, 0x9fa5}, {0x3040, 0x309f}, {0x30a0, 0x30ff}} {
			for c := rg[0]; c <= rg[1]; c++ {
				t[c] |= cCJK
			}
		}
		for _, c := range "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~" {
			t[c] |= cASCIIP
		}
		copy(asciiClass[:utf8.RuneSelf], t)
		classTable = t
	})
}

// classOf returns the class bits of r. Used above the table and by tests.
func classOf(r rune) uint8 {
	if r >= 0 && r < classTableSize {
		return classTable[r]
	}
	var c uint8
	switch {
	case unicode.IsLetter(r):
		c = cL
	case unicode.IsMark(r):
		c = cM
	case unicode.IsNumber(r):
		c = cN
	case unicode.IsPunct(r):
		c = cP
	case unicode.IsSymbol(r):
		c = cS
	}
	// White_Space has nothing above U+3000, so no cWS here.
	return c
}

// classAt returns the class bits and byte length of the rune at s[i]. An invalid byte
// is a one-byte rune of no class (HF's input is always valid UTF-8, so any choice
// is consistent; this one keeps such bytes in their own gap pieces).
func classAt(s string, i int) (uint8, int) {
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	return classAtMulti(s, i)
}

// classAtMulti is classAt's non-ASCII case; the hot loops test for ASCII themselves
// (classAt is just over the inliner's budget) and call this for the rest.
func classAtMulti(s string, i int) (uint8, int) {
	b := s[i]
	// Two- and three-byte sequences decoded inline (DecodeRuneInString's slow path
	// dominated the profile); the checks are those of Unicode Table 3-7, so overlongs
	// and surrogates fall through to the general decoder and come out as invalid.
	if b >= 0xC2 && b <= 0xDF && i+1 < len(s) {
		if c := s[i+1]; c >= 0x80 && c <= 0xBF {
			return classTable[rune(b&0x1F)<<6|rune(c&0x3F)], 2
		}
	} else if b >= 0xE1 && b <= 0xEC && i+2 < len(s) {
		c, d := s[i+1], s[i+2]
		if c >= 0x80 && c <= 0xBF && d >= 0x80 && d <= 0xBF {
			return classTable[rune(b&0x0F)<<12|rune(c&0x3F)<<6|rune(d&0x3F)], 3
		}
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return 0, 1
	}
	return classOf(r), n
}

func isASCIILetter(b byte) bool { return (b|0x20) >= 'a' && (b|0x20) <= 'z' }

func isCRLF(b byte) bool { return b == '\r' || b == '\n' }

// pretokenize cuts s (text between added tokens) into the pre-tokens of DeepSeek's
// Sequence of three Isolated Splits and passes each to e.word, in order.
//
// Isolated means each match becomes a piece and the text between matches stays a piece,
// and each later Split runs on each piece separately (so a lookahead never sees past the
// end of its piece). Composed, the first two Splits cut s into runs of three kinds:
// chunks of at most three \p{N} runes (split 1's matches), maximal CJK runs (split 2's
// matches inside split 1's gaps) and the remaining text. Digit chunks match nothing in
// split 3 (N is disjoint from L, M, P, S and \s), so they are final; the other two kinds
// go through split 3.
func (e *encoder) pretokenize(s string) {
	const (
		none = iota
		other
		cjk
	)
	kind, start := none, 0
	for i := 0; i < len(s); {
		// classAt, with its ASCII case inlined by hand (it is over the inliner's budget).
		c, n := uint8(0), 1
		if b := s[i]; b < utf8.RuneSelf {
			c = asciiClass[b]
		} else {
			c, n = classAtMulti(s, i)
		}
		switch {
		case c&cN != 0:
			if kind != none {
				e.splitWords(s[start:i])
				kind = none
			}
			j, k := i+n, 1
			for k < 3 && j < len(s) {
				c2, n2 := classAt(s, j)
				if c2&cN == 0 {
					break
				}
				j += n2
				k++
			}
			e.word(s[i:j])
			i = j
			continue
		case c&cCJK != 0:
			if kind != cjk {
				if kind != none {
					e.splitWords(s[start:i])
				}
				kind, start = cjk, i
			}
		default:
			if kind != other {
				if kind != none {
					e.splitWords(s[start:i])
				}
				kind, start = other, i
			}
		}
		i += n
	}
	if kind != none {
		e.splitWords(s[start:])
	}
}

// splitWords applies the third Split to s: every match of the word regex is a piece,
// and each maximal run of text no alternative matches at is a piece too.
func (e *encoder) splitWords(s string) {
	gap := -1
	for i := 0; i < len(s); {
		m := matchWord(s, i)
		if m == 0 {
			if gap < 0 {
				gap = i
			}
			_, n := classAt(s, i)
			i += n
			continue
		}
		if gap >= 0 {
			e.word(s[gap:i])
			gap = -1
		}
		e.word(s[i : i+m])
		i += m
	}
	if gap >= 0 {
		e.word(s[gap:])
	}
}

// matchWord returns the byte length of the match of reWords starting exactly at s[i],
// or 0 if none. It is a hand compilation of the regex with the reference engines'
// semantics: alternatives are tried in order and the first that matches wins
// (leftmost-first, not longest), quantifiers are greedy and give back only as far as
// the rest of their alternative needs, and s ends at the end of the current piece.
//
//	A1 [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+
//	A2 [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
//	A3  ?[\p{P}\p{S}]+[\r\n]*
//	A4 \s*[\r\n]+
//	A5 \s+(?!\S)
//	A6 \s+
func matchWord(s string, i int) int {
	c0, n0 := classAt(s, i)

	// A1: one ASCII punctuation character, then ASCII letters.
	if c0&cASCIIP != 0 && i+1 < len(s) && isASCIILetter(s[i+1]) {
		j := i + 2
		for j < len(s) && isASCIILetter(s[j]) {
			j++
		}
		return j - i
	}

	// A2: the optional leading character is tried first (greedy ?): anything but CR, LF,
	// L, P and S — a space, a tab, a mark, a control, ZWJ... — when a letter or mark
	// follows. Otherwise the run of letters and marks starts at s[i] itself.
	if c0&(cL|cP|cS) == 0 && !isCRLF(s[i]) && i+n0 < len(s) {
		if c1, n1 := classAt(s, i+n0); c1&(cL|cM) != 0 {
			return runOf(s, i+n0+n1, cL|cM) - i
		}
	}
	if c0&(cL|cM) != 0 {
		return runOf(s, i+n0, cL|cM) - i
	}

	// A3: an optional space (U+0020 only), punctuation and symbols, then CRs and LFs.
	if s[i] == ' ' && i+1 < len(s) {
		if c1, n1 := classAt(s, i+1); c1&(cP|cS) != 0 {
			return runCRLF(s, runOf(s, i+1+n1, cP|cS)) - i
		}
	}
	if c0&(cP|cS) != 0 {
		return runCRLF(s, runOf(s, i+n0, cP|cS)) - i
	}

	if c0&cWS == 0 {
		return 0
	}
	// The whitespace run s[i:j]; last is the start of its last rune, nl the last CR/LF.
	nl, last, j := -1, i, i+n0
	if isCRLF(s[i]) {
		nl = i
	}
	for j < len(s) {
		c, n := classAt(s, j)
		if c&cWS == 0 {
			break
		}
		if isCRLF(s[j]) {
			nl = j
		}
		last = j
		j += n
	}
	// A4: \s* takes the whole run and gives back until [\r\n]+ can match, so the match
	// ends just after the run's last CR or LF.
	if nl >= 0 {
		return nl + 1 - i
	}
	// A5: the run at the end of the piece, or all of it but its last rune, so that the
	// lookahead sees whitespace. A6: a single whitespace rune before non-space.
	if j == len(s) {
		return j - i
	}
	if last > i {
		return last - i
	}
	return j - i
}

// runOf returns the end of the run of runes with any of the class bits starting at i.
func runOf(s string, i int, bits uint8) int {
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if asciiClass[b]&bits == 0 {
				break
			}
			i++
			continue
		}
		c, n := classAtMulti(s, i)
		if c&bits == 0 {
			break
		}
		i += n
	}
	return i
}

func runCRLF(s string, i int) int {
	for i < len(s) && isCRLF(s[i]) {
		i++
	}
	return i
}
