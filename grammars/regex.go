package grammars

import (
	"fmt"
	"regexp/syntax"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Regular expressions: RE2 syntax (Go's regexp/syntax parser), which includes \d, \w
// and \s. Lookarounds, backreferences and word boundaries are not regular (or not
// byte-level) and get an error that names them.

// RegexError is a regular expression the engine cannot compile.
type RegexError struct {
	Pattern string
	Feature string // the unsupported construct, if that is the reason
	Msg     string
}

// regexUnsupportedMarker is in the message of every unsupported-construct error.
const regexUnsupportedMarker = "is not supported by the grammar engine"

func (e *RegexError) Error() string {
	if e.Feature != "" {
		return fmt.Sprintf("regex %q: %s %s (%s)", e.Pattern, e.Feature, regexUnsupportedMarker, e.Msg)
	}
	return fmt.Sprintf("regex %q: %s", e.Pattern, e.Msg)
}

// scanRegex looks for constructs RE2 lacks and names them; with ecma it also rewrites
// ECMA-262 escapes (\uXXXX, \u{X}, [^], \cX) into RE2 syntax.
func scanRegex(p string, ecma bool) (string, error) {
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			n := p[i+1]
			switch {
			case n >= '1' && n <= '9' && !inClass:
				return "", &RegexError{p, "backreference \\" + string(n), "backreferences are not regular"}
			case n == 'k' && i+2 < len(p) && p[i+2] == '<':
				return "", &RegexError{p, "named backreference \\k<...>", "backreferences are not regular"}
			case (n == 'b' || n == 'B') && !inClass:
				return "", &RegexError{p, "word boundary \\" + string(n), "assertions between characters are not supported"}
			case n == 'u' && ecma:
				if i+2 < len(p) && p[i+2] == '{' {
					j := strings.IndexByte(p[i+2:], '}')
					if j > 0 {
						sb.WriteString(`\x{` + p[i+3:i+2+j] + `}`)
						i += 2 + j
						continue
					}
				}
				if i+5 < len(p) && isHex(p[i+2:i+6]) {
					sb.WriteString(`\x{` + p[i+2:i+6] + `}`)
					i += 5
					continue
				}
			case n == 'c' && ecma && i+2 < len(p) && isASCIILetter(p[i+2]):
				fmt.Fprintf(&sb, `\x{%x}`, p[i+2]%32)
				i += 2
				continue
			case n == 'Z' || n == 'G':
				return "", &RegexError{p, "anchor \\" + string(n), "use $ or \\z"}
			}
			sb.WriteByte(c)
			sb.WriteByte(n)
			i++
			continue
		case c == '[' && !inClass:
			inClass = true
			if ecma && strings.HasPrefix(p[i:], "[^]") {
				sb.WriteString(`[\x{0}-\x{10FFFF}]`)
				i += 2
				inClass = false
				continue
			}
			sb.WriteByte(c)
			// a ']' right after '[' or '[^' is a literal in RE2 as in ECMA
			if i+1 < len(p) && p[i+1] == '^' {
				sb.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				sb.WriteString(`\]`)
				i++
			}
			continue
		case c == ']' && inClass:
			inClass = false
		case c == '(' && !inClass && i+2 < len(p) && p[i+1] == '?':
			rest := p[i+2:]
			switch {
			case strings.HasPrefix(rest, "="):
				return "", &RegexError{p, "lookahead (?=...)", "lookarounds are not regular in this engine"}
			case strings.HasPrefix(rest, "!"):
				return "", &RegexError{p, "negative lookahead (?!...)", "lookarounds are not regular in this engine"}
			case strings.HasPrefix(rest, "<="):
				return "", &RegexError{p, "lookbehind (?<=...)", "lookarounds are not regular in this engine"}
			case strings.HasPrefix(rest, "<!"):
				return "", &RegexError{p, "negative lookbehind (?<!...)", "lookarounds are not regular in this engine"}
			case strings.HasPrefix(rest, ">"):
				return "", &RegexError{p, "atomic group (?>...)", "atomic groups are not supported"}
			}
		}
		sb.WriteByte(c)
	}
	return sb.String(), nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// parseRegex parses p (RE2 syntax; ecma rewrites ECMA escapes first).
func parseRegex(p string, ecma bool) (*syntax.Regexp, error) {
	q, err := scanRegex(p, ecma)
	if err != nil {
		return nil, err
	}
	re, err := syntax.Parse(q, syntax.Perl)
	if err != nil {
		msg := err.Error()
		if e, ok := err.(*syntax.Error); ok {
			msg = string(e.Code) + ": `" + e.Expr + "`"
		}
		return nil, &RegexError{Pattern: p, Msg: msg}
	}
	return re, nil
}

// charEncoder turns a set of runes into a byte-level expression: raw UTF-8 for plain
// regexes, the canonical JSON string encoding for JSON Schema patterns.
type charEncoder func(ranges []rune) *expr

// utf8Class encodes rune ranges (pairs lo, hi) as UTF-8 byte sequences; surrogates
// are excluded.
func utf8Class(ranges []rune) *expr {
	var alts []*expr
	// group single-byte ranges into one set
	var ascii byteSet
	for i := 0; i+1 < len(ranges); i += 2 {
		utf8Split(ranges[i], ranges[i+1], func(seq [][2]byte) {
			if len(seq) == 1 {
				ascii.addRange(int(seq[0][0]), int(seq[0][1]))
				return
			}
			parts := make([]*expr, len(seq))
			for j, r := range seq {
				parts[j] = eByteRange(r[0], r[1])
			}
			alts = append(alts, eSeqOf(parts...))
		})
	}
	if !ascii.empty() {
		alts = append([]*expr{eByteSet(ascii)}, alts...)
	}
	return mergeAltPrefixes(alts)
}

// mergeAltPrefixes factors alternatives of byte-range sequences that share their first
// byte range, which keeps Unicode classes small.
func mergeAltPrefixes(alts []*expr) *expr {
	if len(alts) <= 1 {
		return eAltOf(alts...)
	}
	type group struct {
		first *expr
		rests []*expr
	}
	var groups []*group
	idx := map[byteSet]*group{}
	var singles []*expr
	for _, a := range alts {
		if a.op != eSeq || a.subs[0].op != eSet {
			singles = append(singles, a)
			continue
		}
		k := a.subs[0].set
		gp, ok := idx[k]
		if !ok {
			gp = &group{first: a.subs[0]}
			idx[k] = gp
			groups = append(groups, gp)
		}
		gp.rests = append(gp.rests, eSeqOf(a.subs[1:]...))
	}
	out := singles
	for _, gp := range groups {
		out = append(out, eSeqOf(gp.first, mergeAltPrefixes(gp.rests)))
	}
	return eAltOf(out...)
}

func utf8Split(lo, hi rune, emit func([][2]byte)) {
	if lo > hi {
		return
	}
	if lo <= 0xDFFF && hi >= 0xD800 {
		utf8Split(lo, 0xD7FF, emit)
		utf8Split(0xE000, hi, emit)
		return
	}
	if hi > unicode.MaxRune {
		hi = unicode.MaxRune
	}
	for _, m := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= m && m < hi {
			utf8Split(lo, m, emit)
			utf8Split(m+1, hi, emit)
			return
		}
	}
	if hi <= 0x7F {
		emit([][2]byte{{byte(lo), byte(hi)}})
		return
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Split(lo, lo|m, emit)
				utf8Split((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				utf8Split(lo, (hi&^m)-1, emit)
				utf8Split(hi&^m, hi, emit)
				return
			}
		}
	}
	var a, b [4]byte
	utf8.EncodeRune(a[:], lo)
	utf8.EncodeRune(b[:], hi)
	seq := make([][2]byte, n)
	for i := 0; i < n; i++ {
		seq[i] = [2]byte{a[i], b[i]}
	}
	emit(seq)
}

// regexToExpr converts a parsed regex. enc encodes character sets. Anchors are
// taken out before (see anchorBranches).
func regexToExpr(re *syntax.Regexp, enc charEncoder, pattern string, budget *int) (*expr, error) {
	*budget--
	if *budget < 0 {
		return nil, &RegexError{Pattern: pattern, Msg: "regex too large"}
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return exprNoneV, nil
	case syntax.OpEmptyMatch:
		return exprEmptyV, nil
	case syntax.OpLiteral:
		parts := make([]*expr, 0, len(re.Rune))
		for _, r := range re.Rune {
			rs := []rune{r, r}
			if re.Flags&syntax.FoldCase != 0 {
				rs = rs[:0]
				for f := unicode.SimpleFold(r); ; f = unicode.SimpleFold(f) {
					rs = append(rs, f, f)
					if f == r {
						break
					}
				}
			}
			parts = append(parts, enc(normRanges(rs)))
		}
		return eSeqOf(parts...), nil
	case syntax.OpCharClass:
		return enc(normRanges(re.Rune)), nil
	case syntax.OpAnyCharNotNL:
		return enc([]rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}), nil
	case syntax.OpAnyChar:
		return enc([]rune{0, unicode.MaxRune}), nil
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText:
		// anchorBranches takes every anchor out first
		return nil, &RegexError{Pattern: pattern, Feature: "an anchor (^, $, \\A, \\z) in an unexpected place", Msg: "internal: anchors are taken out before conversion"}
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, &RegexError{Pattern: pattern, Feature: "word boundary \\b", Msg: "assertions between characters are not supported"}
	case syntax.OpCapture:
		return regexToExpr(re.Sub[0], enc, pattern, budget)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		sub, err := regexToExpr(re.Sub[0], enc, pattern, budget)
		if err != nil {
			return nil, err
		}
		switch re.Op {
		case syntax.OpStar:
			return eRepOf(sub, 0, -1), nil
		case syntax.OpPlus:
			return eRepOf(sub, 1, -1), nil
		case syntax.OpQuest:
			return eRepOf(sub, 0, 1), nil
		}
		return eRepOf(sub, re.Min, re.Max), nil
	case syntax.OpConcat, syntax.OpAlternate:
		parts := make([]*expr, 0, len(re.Sub))
		for _, s := range re.Sub {
			e, err := regexToExpr(s, enc, pattern, budget)
			if err != nil {
				return nil, err
			}
			parts = append(parts, e)
		}
		if re.Op == syntax.OpConcat {
			return eSeqOf(parts...), nil
		}
		return eAltOf(parts...), nil
	}
	return nil, &RegexError{Pattern: pattern, Msg: "unsupported regex operator " + re.Op.String()}
}

// normRanges sorts and merges rune ranges.
func normRanges(rs []rune) []rune {
	type rg struct{ lo, hi rune }
	var v []rg
	for i := 0; i+1 < len(rs); i += 2 {
		v = append(v, rg{rs[i], rs[i+1]})
	}
	for i := 1; i < len(v); i++ {
		for j := i; j > 0 && v[j].lo < v[j-1].lo; j-- {
			v[j], v[j-1] = v[j-1], v[j]
		}
	}
	var out []rune
	for _, r := range v {
		n := len(out)
		if n > 0 && r.lo <= out[n-1]+1 {
			if r.hi > out[n-1] {
				out[n-1] = r.hi
			}
			continue
		}
		out = append(out, r.lo, r.hi)
	}
	return out
}

// anchorBranch is one alternative of a regex with its anchors taken out: begin when it
// matches only at the start of the text, end when only at its end, and the anchor-free
// pieces to match in order.
type anchorBranch struct {
	begin, end bool
	items      []*syntax.Regexp
}

// maxAnchorBranches bounds the alternatives anchorBranches distributes.
const maxAnchorBranches = 256

// anchorBranches rewrites a regex as alternatives without anchors, the way RE2 reads
// them: ^ (\A) holds only at the start of the text and $ (\z) only at its end, wherever
// they stand. An alternative whose ^ follows input that cannot be empty, or whose $
// precedes such input, matches nothing and is dropped. Anchors inside a repetition that
// may run more than once get an error naming the construct. (?m) line anchors are read
// as text anchors.
func anchorBranches(re *syntax.Regexp, pattern string) ([]anchorBranch, error) {
	if !hasAnchor(re) {
		return []anchorBranch{{items: []*syntax.Regexp{re}}}, nil
	}
	switch re.Op {
	case syntax.OpBeginText, syntax.OpBeginLine:
		return []anchorBranch{{begin: true}}, nil
	case syntax.OpEndText, syntax.OpEndLine:
		return []anchorBranch{{end: true}}, nil
	case syntax.OpCapture:
		return anchorBranches(re.Sub[0], pattern)
	case syntax.OpAlternate:
		var out []anchorBranch
		for _, s := range re.Sub {
			bs, err := anchorBranches(s, pattern)
			if err != nil {
				return nil, err
			}
			out = append(out, bs...)
		}
		return out, nil
	case syntax.OpConcat:
		acc := []anchorBranch{{}}
		for _, s := range re.Sub {
			bs, err := anchorBranches(s, pattern)
			if err != nil {
				return nil, err
			}
			var next []anchorBranch
			for _, a := range acc {
				for _, b := range bs {
					if j, ok := joinBranches(a, b); ok {
						next = append(next, j)
					}
				}
			}
			if len(next) > maxAnchorBranches {
				return nil, &RegexError{Pattern: pattern, Feature: "anchors in more than 256 combined alternatives", Msg: "too many anchored alternatives"}
			}
			acc = next
		}
		return acc, nil
	case syntax.OpQuest:
		bs, err := anchorBranches(re.Sub[0], pattern)
		if err != nil {
			return nil, err
		}
		return append(bs, anchorBranch{}), nil
	case syntax.OpRepeat:
		if re.Max == 1 {
			bs, err := anchorBranches(re.Sub[0], pattern)
			if err != nil {
				return nil, err
			}
			if re.Min == 0 {
				bs = append(bs, anchorBranch{})
			}
			return bs, nil
		}
		if re.Max == 0 {
			return []anchorBranch{{}}, nil
		}
	}
	return nil, &RegexError{Pattern: pattern, Feature: "an anchor (^, $, \\A, \\z) inside a repetition", Msg: "an anchor may stand anywhere except in a group repeated more than once"}
}

// joinBranches is a followed by b; false when no string matches it.
func joinBranches(a, b anchorBranch) (anchorBranch, bool) {
	ai, bi := a.items, b.items
	if b.begin {
		// the start of the text: a must have matched the empty string
		if !allNullable(ai) {
			return anchorBranch{}, false
		}
		ai = nil
	}
	if a.end {
		// the end of the text: b may only match the empty string
		if !allNullable(bi) {
			return anchorBranch{}, false
		}
		bi = nil
	}
	items := make([]*syntax.Regexp, 0, len(ai)+len(bi))
	items = append(append(items, ai...), bi...)
	return anchorBranch{begin: a.begin || b.begin, end: a.end || b.end, items: items}, true
}

func allNullable(rs []*syntax.Regexp) bool {
	for _, r := range rs {
		if !nullable(r) {
			return false
		}
	}
	return true
}

// nullable reports whether an anchor-free regex matches the empty string.
func nullable(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpEmptyMatch, syntax.OpStar, syntax.OpQuest, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	case syntax.OpLiteral:
		return len(re.Rune) == 0
	case syntax.OpCapture, syntax.OpPlus:
		return nullable(re.Sub[0])
	case syntax.OpRepeat:
		return re.Min == 0 || nullable(re.Sub[0])
	case syntax.OpConcat:
		return allNullable(re.Sub)
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if nullable(s) {
				return true
			}
		}
	}
	return false
}

// hasAnchor reports whether re contains a text or line anchor.
func hasAnchor(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return true
	}
	for _, s := range re.Sub {
		if hasAnchor(s) {
			return true
		}
	}
	return false
}

// branchExprs converts the alternatives of p; around sets the expression for any
// characters before an alternative not anchored at the start and after one not
// anchored at the end (nil: whole-output matching, where the anchors are redundant).
func branchExprs(p string, ecma bool, enc charEncoder, around *expr, budget int) (*expr, error) {
	re, err := parseRegex(p, ecma)
	if err != nil {
		return nil, err
	}
	return branchExprsOf(re, p, enc, around, budget)
}

// branchExprsOf is branchExprs of the parsed regex re (source p).
func branchExprsOf(re *syntax.Regexp, p string, enc charEncoder, around *expr, budget int) (*expr, error) {
	bs, err := anchorBranches(re, p)
	if err != nil {
		return nil, err
	}
	var alts []*expr
	for _, b := range bs {
		var seq []*expr
		if around != nil && !b.begin {
			seq = append(seq, eStar(headChar(around)))
		}
		for _, it := range b.items {
			e, err := regexToExpr(it, enc, p, &budget)
			if err != nil {
				return nil, err
			}
			seq = append(seq, e)
		}
		if around != nil && !b.end {
			seq = append(seq, eStar(tailChar(around)))
		}
		alts = append(alts, eSeqOf(seq...))
	}
	return eAltOf(alts...), nil
}

// regexWhole compiles p for whole-output matching: the output must match p entirely
// (anchors at the ends are redundant; inside, they hold as in RE2).
func regexWhole(p string, enc charEncoder, budget int) (*expr, error) {
	return branchExprs(p, false, enc, nil, budget)
}

// regexSearch compiles p with search semantics (JSON Schema "pattern": the string
// contains a match): unanchored sides get any characters.
func regexSearch(p string, enc charEncoder, anyChar *expr, budget int) (*expr, error) {
	return branchExprs(p, true, enc, anyChar, budget)
}
