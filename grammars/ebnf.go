package grammars

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

// EBNF front end: the GBNF dialect of llama.cpp (also XGrammar's EBNF), parsed with
// participle.
//
//	root   ::= object            # the start rule is "root"
//	object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//	pair   ::= string ":" ws value
//	ws     ::= [ \t\n]*
//
// Terminals are string literals ("...", escapes \n \r \t \\ \" \xHH \uHHHH
// \UHHHHHHHH), character classes ([a-z0-9_], [^"\\], the same escapes) and "." (any
// character); items repeat with *, +, ?, {m}, {m,}, {m,n} and {,n}; ( ) groups and |
// separates alternatives. Comments run from # to the end of the line. A rule ends
// where the next "name ::=" begins. Errors carry line:col.

type gbnfFile struct {
	Rules []*gbnfRule `parser:"@@*"`
}

type gbnfRule struct {
	Pos  lexer.Position
	Name string   `parser:"@Ident \"::=\""`
	Alt  *gbnfAlt `parser:"@@"`
}

type gbnfAlt struct {
	Pos  lexer.Position
	Seqs []*gbnfSeq `parser:"@@ ( \"|\" @@ )*"`
}

type gbnfSeq struct {
	Pos   lexer.Position
	Items []*gbnfItem `parser:"@@*"`
}

type gbnfItem struct {
	Pos  lexer.Position
	Atom *gbnfAtom  `parser:"@@"`
	Reps []*gbnfRep `parser:"@@*"`
}

type gbnfAtom struct {
	Pos   lexer.Position
	Str   *string  `parser:"  @String"`
	Class *string  `parser:"| @Class"`
	Ref   *string  `parser:"| @Ident (?! \"::=\")"`
	Group *gbnfAlt `parser:"| \"(\" @@ \")\""`
	Any   bool     `parser:"| @\".\""`
}

type gbnfRep struct {
	Pos   lexer.Position
	Op    string     `parser:"  @(\"*\" | \"+\" | \"?\")"`
	Brace *gbnfBrace `parser:"| \"{\" @@ \"}\""`
}

type gbnfBrace struct {
	Min   *int `parser:"@Int?"`
	Comma bool `parser:"@\",\"?"`
	Max   *int `parser:"@Int?"`
}

var (
	gbnfOnce   sync.Once
	gbnfParser *participle.Parser[gbnfFile]
	gbnfErr    error
)

func gbnf() (*participle.Parser[gbnfFile], error) {
	gbnfOnce.Do(func() {
		lex := lexer.MustSimple([]lexer.SimpleRule{
			{Name: "Comment", Pattern: `#[^\n]*`},
			{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
			{Name: "Assign", Pattern: `::=`},
			{Name: "String", Pattern: `"(\\.|[^"\\])*"`},
			{Name: "Class", Pattern: `\[(\\.|[^\]\\])*\]`},
			{Name: "Int", Pattern: `[0-9]+`},
			{Name: "Ident", Pattern: `[a-zA-Z_][a-zA-Z0-9_.\-]*`},
			{Name: "Punct", Pattern: `[|()*+?{},.]`},
		})
		gbnfParser, gbnfErr = participle.Build[gbnfFile](
			participle.Lexer(lex),
			participle.Elide("Comment", "Whitespace"),
			participle.UseLookahead(2),
		)
	})
	return gbnfParser, gbnfErr
}

// SyntaxError is a grammar text error at a line and column.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

func syntaxErr(pos lexer.Position, format string, args ...any) error {
	return &SyntaxError{Line: pos.Line, Col: pos.Column, Msg: fmt.Sprintf(format, args...)}
}

// EBNF compiles a GBNF grammar (start rule "root").
func (c *Compiler) EBNF(src string) (*Grammar, error) {
	return c.cached("ebnf\x00"+src, func() (*Grammar, error) {
		dl := newDeadline(c.opts.compileTime())
		gb, root, err := parseGBNF(src, c.opts)
		if err != nil {
			return nil, wrapCompileErr(err, ReasonSyntax)
		}
		g, err := c.compile(&buildInput{gb: gb, root: root, kind: "ebnf", src: src}, dl)
		if err != nil {
			return nil, wrapCompileErr(err, ReasonGrammar)
		}
		return g, nil
	})
}

func parseGBNF(src string, opts Options) (*grammarBuilder, int32, error) {
	p, err := gbnf()
	if err != nil {
		return nil, 0, err
	}
	// XGrammar extensions we do not support get a clear error
	if i := strings.Index(src, "(="); i >= 0 && !inLiteral(src, i) {
		line, col := lineCol(src, i)
		return nil, 0, &SyntaxError{line, col, "lookahead assertions (= ...) are not supported"}
	}
	file, err := p.ParseString("", src)
	if err != nil {
		var pe participle.Error
		if errors.As(err, &pe) {
			pos := pe.Position()
			return nil, 0, &SyntaxError{pos.Line, pos.Column, pe.Message()}
		}
		return nil, 0, err
	}
	gb := newGrammarBuilder()
	defined := map[string]lexer.Position{}
	for _, r := range file.Rules {
		if prev, ok := defined[r.Name]; ok {
			return nil, 0, syntaxErr(r.Pos, "rule %q is defined twice (first at %d:%d)", r.Name, prev.Line, prev.Column)
		}
		defined[r.Name] = r.Pos
	}
	if _, ok := defined["root"]; !ok {
		return nil, 0, &SyntaxError{1, 1, `no "root" rule (the start rule must be named root)`}
	}
	budget := opts.maxNFANodes()
	for _, r := range file.Rules {
		id := gb.sym(r.Name)
		e, err := gbnfAltExpr(r.Alt, gb, defined, &budget)
		if err != nil {
			return nil, 0, err
		}
		gb.define(id, e)
	}
	return gb, gb.sym("root"), nil
}

func inLiteral(src string, i int) bool {
	// crude: inside "..." or [...] on the same line
	line := src[strings.LastIndexByte(src[:i], '\n')+1 : i]
	q := strings.Count(line, `"`) - strings.Count(line, `\"`)
	return q%2 == 1 || strings.Count(line, "[") > strings.Count(line, "]")
}

func lineCol(src string, i int) (int, int) {
	line := 1 + strings.Count(src[:i], "\n")
	col := i - strings.LastIndexByte(src[:i], '\n')
	return line, col
}

func gbnfAltExpr(a *gbnfAlt, gb *grammarBuilder, defined map[string]lexer.Position, budget *int) (*expr, error) {
	var alts []*expr
	for _, s := range a.Seqs {
		var parts []*expr
		for _, it := range s.Items {
			e, err := gbnfItemExpr(it, gb, defined, budget)
			if err != nil {
				return nil, err
			}
			parts = append(parts, e)
		}
		alts = append(alts, eSeqOf(parts...))
	}
	if len(alts) == 0 {
		return exprEmptyV, nil
	}
	return eAltOf(alts...), nil
}

func gbnfItemExpr(it *gbnfItem, gb *grammarBuilder, defined map[string]lexer.Position, budget *int) (*expr, error) {
	*budget--
	if *budget < 0 {
		return nil, &LimitError{What: "grammar elements", Limit: 0}
	}
	a := it.Atom
	var e *expr
	switch {
	case a.Str != nil:
		runes, err := gbnfUnescape((*a.Str)[1:len(*a.Str)-1], a.Pos)
		if err != nil {
			return nil, err
		}
		var b []byte
		for _, r := range runes {
			b = utf8.AppendRune(b, r)
		}
		e = eLitBytes(b)
	case a.Class != nil:
		body := (*a.Class)[1 : len(*a.Class)-1]
		neg := strings.HasPrefix(body, "^")
		if neg {
			body = body[1:]
		}
		runes, err := gbnfUnescape(body, a.Pos)
		if err != nil {
			return nil, err
		}
		var ranges []rune
		for i := 0; i < len(runes); i++ {
			lo := runes[i]
			hi := lo
			if i+2 < len(runes) && runes[i+1] == '-' && !isEscapedDash(body, i+1) {
				hi = runes[i+2]
				i += 2
			}
			if hi < lo {
				return nil, syntaxErr(a.Pos, "character range %q-%q is reversed", lo, hi)
			}
			ranges = append(ranges, lo, hi)
		}
		ranges = normRanges(ranges)
		if neg {
			ranges = negateRanges(ranges)
		}
		if len(ranges) == 0 {
			return nil, syntaxErr(a.Pos, "character class %s matches nothing", *a.Class)
		}
		e = utf8Class(ranges)
	case a.Ref != nil:
		if _, ok := defined[*a.Ref]; !ok {
			return nil, syntaxErr(a.Pos, "rule %q is not defined", *a.Ref)
		}
		e = eCallOf(gb.sym(*a.Ref))
	case a.Group != nil:
		g, err := gbnfAltExpr(a.Group, gb, defined, budget)
		if err != nil {
			return nil, err
		}
		e = g
	case a.Any:
		e = utf8Class([]rune{0, utf8.MaxRune})
	default:
		return nil, syntaxErr(a.Pos, "empty item")
	}
	for _, r := range it.Reps {
		switch {
		case r.Op == "*":
			e = eStar(e)
		case r.Op == "+":
			e = eRepOf(e, 1, -1)
		case r.Op == "?":
			e = eOpt(e)
		case r.Brace != nil:
			b := r.Brace
			lo, hi := 0, -1
			switch {
			case b.Min != nil && !b.Comma:
				lo, hi = *b.Min, *b.Min
			case b.Min != nil && b.Comma && b.Max != nil:
				lo, hi = *b.Min, *b.Max
			case b.Min != nil && b.Comma:
				lo = *b.Min
			case b.Min == nil && b.Comma && b.Max != nil:
				hi = *b.Max
			default:
				return nil, syntaxErr(r.Pos, "empty repetition {}")
			}
			if hi >= 0 && hi < lo {
				return nil, syntaxErr(r.Pos, "repetition {%d,%d}: max is below min", lo, hi)
			}
			if lo > 100000 || hi > 100000 {
				return nil, syntaxErr(r.Pos, "repetition count too large (at most 100000)")
			}
			*budget -= max(lo, hi)
			if *budget < 0 {
				return nil, &LimitError{What: "grammar elements (repetitions expanded)", Limit: 0}
			}
			e = eRepOf(e, lo, hi)
		}
	}
	return e, nil
}

func isEscapedDash(body string, runeIdx int) bool {
	// the dash at rune index runeIdx of the unescaped class: was it written "\-"?
	i := 0
	for k := 0; k < len(body); k++ {
		if i == runeIdx {
			return body[k] == '\\'
		}
		if body[k] == '\\' {
			k++
			for k+1 < len(body) && isHexDigit(body[k+1]) && (body[k] == 'x' || body[k] == 'u' || body[k] == 'U') {
				k++
			}
		} else {
			_, sz := utf8.DecodeRuneInString(body[k:])
			k += sz - 1
		}
		i++
	}
	return false
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// gbnfUnescape decodes the escapes of a literal or class body into runes.
func gbnfUnescape(s string, pos lexer.Position) ([]rune, error) {
	var out []rune
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if r != '\\' {
			out = append(out, r)
			i += sz
			continue
		}
		if i+1 >= len(s) {
			return nil, syntaxErr(pos, "dangling backslash")
		}
		c := s[i+1]
		i += 2
		switch c {
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+n > len(s) {
				return nil, syntaxErr(pos, "escape \\%c needs %d hex digits", c, n)
			}
			v, err := strconv.ParseUint(s[i:i+n], 16, 32)
			if err != nil || v > utf8.MaxRune {
				return nil, syntaxErr(pos, "bad escape \\%c%s", c, s[i:i+n])
			}
			out = append(out, rune(v))
			i += n
		default:
			out = append(out, rune(c))
		}
	}
	return out, nil
}

// negateRanges complements sorted ranges within all code points.
func negateRanges(rs []rune) []rune {
	var out []rune
	next := rune(0)
	for i := 0; i+1 < len(rs); i += 2 {
		if rs[i] > next {
			out = append(out, next, rs[i]-1)
		}
		next = rs[i+1] + 1
	}
	if next <= utf8.MaxRune {
		out = append(out, next, utf8.MaxRune)
	}
	return out
}
