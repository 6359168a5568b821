package grammars

import (
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// parseJSON decodes one JSON document into the values encoding/json gives an `any`
// with UseNumber (map[string]any, []any, json.Number, string, bool, nil), as the
// schema library's UnmarshalJSON does, in one pass without reflection: schemas are
// decoded on the way to the first mask, and documents at every semantic check.
// Invalid UTF-8 and lone surrogates become U+FFFD as in encoding/json; a later
// duplicate member wins. FuzzParseJSON compares it with encoding/json.
func parseJSON(b []byte) (any, error) {
	p := jsonParser{b: b}
	p.space()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.b) {
		return nil, p.fail("after top-level value")
	}
	return v, nil
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) fail(what string) error {
	if p.i >= len(p.b) {
		return errors.New("unexpected end of JSON input")
	}
	return fmt.Errorf("invalid character %q at offset %d %s", p.b[p.i], p.i, what)
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (any, error) {
	if p.i >= len(p.b) {
		return nil, p.fail("")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		if depth >= maxJSONDepth {
			return nil, errors.New("exceeded max depth")
		}
		p.i++
		m := map[string]any{}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == '}' {
			p.i++
			return m, nil
		}
		for {
			if p.i >= len(p.b) || p.b[p.i] != '"' {
				return nil, p.fail("looking for beginning of object key string")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			p.space()
			if p.i >= len(p.b) || p.b[p.i] != ':' {
				return nil, p.fail("after object key")
			}
			p.i++
			p.space()
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			m[k] = v
			p.space()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				p.space()
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == '}' {
				p.i++
				return m, nil
			}
			return nil, p.fail("after object key:value pair")
		}
	case c == '[':
		if depth >= maxJSONDepth {
			return nil, errors.New("exceeded max depth")
		}
		p.i++
		a := []any{}
		p.space()
		if p.i < len(p.b) && p.b[p.i] == ']' {
			p.i++
			return a, nil
		}
		for {
			v, err := p.value(depth + 1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
			p.space()
			if p.i < len(p.b) && p.b[p.i] == ',' {
				p.i++
				p.space()
				continue
			}
			if p.i < len(p.b) && p.b[p.i] == ']' {
				p.i++
				return a, nil
			}
			return nil, p.fail("after array element")
		}
	case c == '"':
		return p.str()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, p.fail("looking for beginning of value")
}

func (p *jsonParser) literal(lit string) error {
	for j := 0; j < len(lit); j++ {
		if p.i >= len(p.b) || p.b[p.i] != lit[j] {
			return p.fail("in literal " + lit)
		}
		p.i++
	}
	return nil
}

func (p *jsonParser) digits() int {
	n := 0
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}

func (p *jsonParser) number() (any, error) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	if p.i < len(p.b) && p.b[p.i] == '0' {
		p.i++
	} else if p.digits() == 0 {
		return nil, p.fail("in numeric literal")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, p.fail("after decimal point in numeric literal")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, p.fail("in exponent of numeric literal")
		}
	}
	return json.Number(p.b[start:p.i]), nil
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// str reads a string at p.i (the opening quote).
func (p *jsonParser) str() (string, error) {
	p.i++
	start := p.i
	// the plain case: printable ASCII without escapes
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		p.i++
	}
	out := append([]byte(nil), p.b[start:p.i]...)
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), nil
		case c < 0x20:
			return "", p.fail("in string literal")
		case c == '\\':
			if p.i+1 >= len(p.b) {
				p.i = len(p.b)
				return "", p.fail("")
			}
			e := p.b[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := hex4(p.b[p.i:])
				if r < 0 {
					return "", p.fail("in \\u hexadecimal character escape")
				}
				p.i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if p.i+1 < len(p.b) && p.b[p.i] == '\\' && p.b[p.i+1] == 'u' {
						r2 = hex4(p.b[p.i+2:])
					}
					if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
						p.i += 6
						r = d
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				p.i--
				return "", p.fail("in string escape code")
			}
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, p.b[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.fail("")
}
