package grammars

import (
	"errors"
	"regexp/syntax"
	"strings"
	"time"

	"github.com/dlclark/regexp2"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema patterns the grammar engine cannot express exactly: lookarounds,
// backreferences, word boundaries, atomic groups and anchors inside a repeated group.
// The grammar takes a wider pattern in their place (approxRegex, dropRepeatedAnchors)
// and the semantic check decides on the finished document with the exact pattern:
// Go's regexp for what RE2 reads (word boundaries, anchors anywhere), regexp2 in its
// ECMAScript mode for lookarounds, backreferences and atomic groups. The schema's
// Grammar.Warnings name each such pattern.

// approxRegex rewrites an ECMA-262 pattern so that its language contains the
// original's and the grammar engine can read it: a lookaround or word boundary becomes
// an empty group, a backreference any text, an atomic group a plain one. It returns
// the new source and the constructs it replaced (none: the source unchanged).
func approxRegex(p string) (string, []string) {
	var sb strings.Builder
	var done []string
	note := func(f string) {
		for _, d := range done {
			if d == f {
				return
			}
		}
		done = append(done, f)
	}
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			n := p[i+1]
			if !inClass {
				switch {
				case n >= '1' && n <= '9':
					j := i + 2
					for j < len(p) && p[j] >= '0' && p[j] <= '9' {
						j++
					}
					sb.WriteString(`(?:[\s\S]*)`)
					note("backreference")
					i = j - 1
					continue
				case n == 'k' && i+2 < len(p) && p[i+2] == '<':
					if j := strings.IndexByte(p[i:], '>'); j > 0 {
						sb.WriteString(`(?:[\s\S]*)`)
						note("backreference")
						i += j
						continue
					}
				case n == 'b' || n == 'B':
					sb.WriteString(`(?:)`)
					note("word boundary")
					i++
					continue
				}
			}
			sb.WriteByte(c)
			sb.WriteByte(n)
			i++
			continue
		case c == '[' && !inClass && strings.HasPrefix(p[i:], "[^]"):
			sb.WriteString("[^]") // ECMA: any character
			i += 2
			continue
		case c == '[' && !inClass:
			inClass = true
			sb.WriteByte(c)
			// a ']' right after '[' or '[^' is part of the class
			if i+1 < len(p) && p[i+1] == '^' {
				sb.WriteByte('^')
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				sb.WriteByte(']')
				i++
			}
			continue
		case c == ']' && inClass:
			inClass = false
		case c == '(' && !inClass && i+2 < len(p) && p[i+1] == '?':
			rest := p[i+2:]
			if strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "!") || strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, "<!") {
				if end := groupEnd(p, i); end > 0 {
					sb.WriteString(`(?:)`)
					note("lookaround")
					i = end
					continue
				}
			}
			if strings.HasPrefix(rest, ">") {
				sb.WriteString(`(?:`)
				note("atomic group")
				i += 2
				continue
			}
		}
		sb.WriteByte(c)
	}
	if len(done) == 0 {
		return p, nil
	}
	return sb.String(), done
}

// groupEnd is the index of the ')' closing the group that opens at p[i], or -1.
func groupEnd(p string, i int) int {
	depth, inClass := 0, false
	for ; i < len(p); i++ {
		switch c := p[i]; {
		case c == '\\':
			i++
		case inClass:
			if c == ']' {
				inClass = false
			}
		case strings.HasPrefix(p[i:], "[^]"):
			i += 2
		case c == '[':
			inClass = true
			if i+1 < len(p) && p[i+1] == '^' {
				i++
			}
			if i+1 < len(p) && p[i+1] == ']' {
				i++
			}
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// tooManyRepeats: RE2 refuses the pattern's counted repetitions (over 1000 in all).
func tooManyRepeats(err error) bool {
	return strings.Contains(err.Error(), string(syntax.ErrInvalidRepeatSize))
}

// uncount widens every counted repetition {m}, {m,} or {m,n} to *.
func uncount(p string) string {
	var sb strings.Builder
	inClass := false
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '\\' && i+1 < len(p):
			sb.WriteByte(c)
			sb.WriteByte(p[i+1])
			i++
			continue
		case c == '[' && !inClass:
			inClass = !strings.HasPrefix(p[i:], "[^]")
		case c == ']' && inClass:
			inClass = false
		case c == '{' && !inClass:
			if j := countedEnd(p, i); j > 0 {
				sb.WriteByte('*')
				i = j
				continue
			}
		}
		sb.WriteByte(c)
	}
	return sb.String()
}

// countedEnd is the index of the '}' of a {m}, {m,} or {m,n} quantifier at p[i], or -1.
func countedEnd(p string, i int) int {
	j := i + 1
	digits := func() int {
		k := j
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			j++
		}
		return j - k
	}
	if digits() == 0 {
		return -1
	}
	if j < len(p) && p[j] == ',' {
		j++
		digits()
	}
	if j < len(p) && p[j] == '}' {
		return j
	}
	return -1
}

// dropRepeatedAnchors replaces the anchors inside a group repeated more than once by
// empty matches (a wider language); it reports whether it replaced any.
func dropRepeatedAnchors(re *syntax.Regexp, repeated bool) bool {
	switch re.Op {
	case syntax.OpBeginText, syntax.OpBeginLine, syntax.OpEndText, syntax.OpEndLine:
		if repeated {
			*re = syntax.Regexp{Op: syntax.OpEmptyMatch, Flags: re.Flags}
			return true
		}
		return false
	case syntax.OpStar, syntax.OpPlus:
		repeated = true
	case syntax.OpRepeat:
		if re.Max != 0 && re.Max != 1 {
			repeated = true
		}
	}
	any := false
	for _, s := range re.Sub {
		if dropRepeatedAnchors(s, repeated) {
			any = true
		}
	}
	return any
}

// approxPatternSearch compiles the JSON Schema pattern p with search semantics into a
// grammar whose language contains p's; approx names what it widened ("" when exact).
func approxPatternSearch(p string, budget int) (e *expr, approx string, err error) {
	e, err = regexSearch(p, stringEncoder, anyStringChar(), budget)
	var rerr *RegexError
	if err == nil || !errors.As(err, &rerr) || rerr.Feature == "" && !tooManyRepeats(err) {
		return e, "", err
	}
	q, done := approxRegex(p)
	re, perr := parseRegex(q, true)
	if perr != nil && tooManyRepeats(perr) {
		q = uncount(q)
		done = append(done, "counted repetition over 1000")
		re, perr = parseRegex(q, true)
	}
	if perr != nil {
		return nil, "", err
	}
	if dropRepeatedAnchors(re, false) {
		done = append(done, "anchor inside a repetition")
	}
	if len(done) == 0 {
		return nil, "", err
	}
	e, err2 := branchExprsOf(re, q, stringEncoder, anyStringChar(), budget)
	if err2 != nil {
		return nil, "", err
	}
	return e, strings.Join(done, ", "), nil
}

// ecma2Regexp is a pattern with lookarounds, backreferences or atomic groups, matched
// by regexp2 in its ECMAScript mode.
type ecma2Regexp struct {
	re  *regexp2.Regexp
	src string
}

func (r ecma2Regexp) String() string { return r.src }

// MatchString reports a match; a match that runs past the time limit counts as none
// (regexp2 backtracks).
func (r ecma2Regexp) MatchString(s string) bool {
	ok, err := r.re.MatchString(s)
	return ok && err == nil
}

// needsBacktracking: the construct scanRegex names is one regexp2 matches (and
// approxRegex widens).
func needsBacktracking(feature string) bool {
	for _, f := range []string{"lookahead", "negative lookahead", "lookbehind", "negative lookbehind", "backreference", "named backreference", "word boundary", "atomic group"} {
		if strings.HasPrefix(feature, f+" ") {
			return true
		}
	}
	return false
}

// ecma2Compile compiles p with regexp2 (ECMAScript mode, one second per match).
func ecma2Compile(p string) (jsonschema.Regexp, error) {
	re, err := regexp2.Compile(p, regexp2.ECMAScript)
	if err != nil {
		return nil, &RegexError{Pattern: p, Msg: err.Error()}
	}
	re.MatchTimeout = time.Second
	return ecma2Regexp{re, p}, nil
}
