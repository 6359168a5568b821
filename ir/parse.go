package ir

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// ParseError is a syntax error with its position.
type ParseError struct {
	Line, Col int
	Msg       string
}

func (e *ParseError) Error() string { return fmt.Sprintf("%d:%d: %s", e.Line, e.Col, e.Msg) }

// Parse reads the text form written by Print. It checks syntax and that every value is
// defined once before use; Verify checks the rest.
func Parse(src string) (*Module, error) {
	p := &parser{}
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		p.line++
		if err := p.statement(sc.Text()); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{Line: p.line + 1, Col: 1, Msg: err.Error()}
	}
	if p.m == nil {
		return nil, &ParseError{Line: 1, Col: 1, Msg: "missing module header"}
	}
	if p.f != nil {
		return nil, &ParseError{Line: p.line, Col: 1, Msg: fmt.Sprintf("func %s is not closed", p.f.Name)}
	}
	return p.m, nil
}

type parser struct {
	m      *Module
	f      *Func
	locals map[int]*Value
	line   int
	// current line
	s   string
	pos int
}

func (p *parser) errf(format string, args ...any) error {
	return &ParseError{Line: p.line, Col: p.pos + 1, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t') {
		p.pos++
	}
}

func (p *parser) eol() bool { p.skipSpace(); return p.pos >= len(p.s) }

func (p *parser) peek() byte {
	p.skipSpace()
	if p.pos < len(p.s) {
		return p.s[p.pos]
	}
	return 0
}

func (p *parser) expect(c byte) error {
	if p.peek() != c {
		return p.errf("expected %q", c)
	}
	p.pos++
	return nil
}

func isIdent(c byte, first bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && (c == '.' || (c >= '0' && c <= '9')))
}

func (p *parser) ident() (string, error) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) && isIdent(p.s[p.pos], p.pos == start) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errf("expected a name")
	}
	return p.s[start:p.pos], nil
}

func (p *parser) quoted() (string, error) {
	p.skipSpace()
	if p.pos >= len(p.s) || p.s[p.pos] != '"' {
		return "", p.errf("expected a quoted string")
	}
	q, err := strconv.QuotedPrefix(p.s[p.pos:])
	if err != nil {
		return "", p.errf("bad string: %v", err)
	}
	p.pos += len(q)
	s, _ := strconv.Unquote(q)
	return s, nil
}

func (p *parser) number() (string, error) {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) && strings.IndexByte("+-.0123456789eEInfNa", p.s[p.pos]) >= 0 {
		p.pos++
	}
	if p.pos == start {
		return "", p.errf("expected a number")
	}
	return p.s[start:p.pos], nil
}

func (p *parser) ref(sigil byte) (int, error) {
	if p.peek() != sigil {
		return 0, p.errf("expected %c", sigil)
	}
	p.pos++
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	n, err := strconv.Atoi(p.s[start:p.pos])
	if err != nil || n > 1<<30 {
		return 0, p.errf("bad value number")
	}
	return n, nil
}

func (p *parser) typ() (Type, error) {
	name, err := p.ident()
	if err != nil {
		return Type{}, err
	}
	if name == "state" {
		return StateType, nil
	}
	dt, ok := ParseDType(name)
	if !ok || dt == State {
		return Type{}, p.errf("unknown dtype %q", name)
	}
	if err := p.expect('['); err != nil {
		return Type{}, err
	}
	t := Type{DType: dt, Shape: Shape{}}
	for p.peek() != ']' {
		if len(t.Shape) > 0 {
			if err := p.expect(','); err != nil {
				return Type{}, err
			}
		}
		c := p.peek()
		if isIdent(c, true) {
			s, _ := p.ident()
			t.Shape = append(t.Shape, S(s))
			continue
		}
		n, err := p.number()
		if err != nil {
			return Type{}, err
		}
		v, err := strconv.ParseInt(n, 10, 64)
		if err != nil || v < 0 {
			return Type{}, p.errf("bad dim %q", n)
		}
		t.Shape = append(t.Shape, C(int(v)))
		if len(t.Shape) > 16 {
			return Type{}, p.errf("too many dims")
		}
	}
	p.pos++
	return t, nil
}

func (p *parser) attrs() (Attrs, error) {
	a := Attrs{}
	if p.peek() != '{' {
		return a, nil
	}
	p.pos++
	for p.peek() != '}' {
		if len(a) > 0 {
			if err := p.expect(','); err != nil {
				return nil, err
			}
		}
		k, err := p.ident()
		if err != nil {
			return nil, err
		}
		if err := p.expect('='); err != nil {
			return nil, err
		}
		if _, dup := a[k]; dup {
			return nil, p.errf("attribute %s given twice", k)
		}
		v, err := p.attrValue()
		if err != nil {
			return nil, err
		}
		a[k] = v
	}
	p.pos++
	return a, nil
}

func (p *parser) attrValue() (any, error) {
	switch c := p.peek(); {
	case c == '"':
		return p.quoted()
	case c == '[':
		p.pos++
		list := []int64{}
		for p.peek() != ']' {
			if len(list) > 0 {
				if err := p.expect(','); err != nil {
					return nil, err
				}
			}
			n, err := p.number()
			if err != nil {
				return nil, err
			}
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, p.errf("bad int %q", n)
			}
			list = append(list, v)
		}
		p.pos++
		return list, nil
	case c == 't' || c == 'f':
		id, _ := p.ident()
		switch id {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, p.errf("bad attribute value %q", id)
	}
	n, err := p.number()
	if err != nil {
		return nil, err
	}
	if v, err := strconv.ParseInt(n, 10, 64); err == nil {
		return v, nil
	}
	f, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return nil, p.errf("bad number %q", n)
	}
	return f, nil
}

func (p *parser) statement(line string) error {
	p.s, p.pos = line, 0
	if p.eol() {
		return nil
	}
	if p.f != nil {
		return p.funcLine()
	}
	kw, err := p.ident()
	if err != nil {
		return err
	}
	switch kw {
	case "module":
		if p.m != nil {
			return p.errf("second module header")
		}
		name, err := p.quoted()
		if err != nil {
			return err
		}
		p.m = NewModule(name)
		if p.m.Attrs, err = p.attrs(); err != nil {
			return err
		}
	case "weight":
		if p.m == nil {
			return p.errf("weight before module header")
		}
		id, err := p.ref('@')
		if err != nil {
			return err
		}
		if id != len(p.m.Weights) {
			return p.errf("weight @%d out of order (want @%d)", id, len(p.m.Weights))
		}
		t, err := p.angleType()
		if err != nil {
			return err
		}
		name, err := p.quoted()
		if err != nil {
			return err
		}
		if _, dup := p.m.LookupWeight(name); dup {
			return p.errf("weight %q declared twice", name)
		}
		w := p.m.Weight(name, t)
		if !p.eol() {
			st, err := p.ident()
			if err != nil {
				return err
			}
			if _, ok := LookupStorage(st); !ok {
				return p.errf("unknown storage format %q", st)
			}
			w.Storage = st
		}
	case "func":
		if p.m == nil {
			return p.errf("func before module header")
		}
		return p.funcHeader()
	default:
		return p.errf("unexpected %q", kw)
	}
	if !p.eol() {
		return p.errf("unexpected text after statement")
	}
	return nil
}

func (p *parser) angleType() (Type, error) {
	if err := p.expect('<'); err != nil {
		return Type{}, err
	}
	t, err := p.typ()
	if err != nil {
		return Type{}, err
	}
	return t, p.expect('>')
}

func (p *parser) funcHeader() error {
	name, err := p.ident()
	if err != nil {
		return err
	}
	if p.m.Func(name) != nil {
		return p.errf("func %s defined twice", name)
	}
	p.f = &Func{Name: name}
	p.locals = map[int]*Value{}
	if err := p.expect('('); err != nil {
		return err
	}
	for p.peek() != ')' {
		if len(p.f.Params) > 0 {
			if err := p.expect(','); err != nil {
				return err
			}
		}
		v, err := p.define()
		if err != nil {
			return err
		}
		if v.Type, err = p.angleType(); err != nil {
			return err
		}
		if v.Name, err = p.quoted(); err != nil {
			return err
		}
		p.f.Params = append(p.f.Params, v)
	}
	p.pos++
	if err := p.expect('{'); err != nil {
		return err
	}
	if !p.eol() {
		return p.errf("unexpected text after func header")
	}
	return nil
}

func (p *parser) define() (*Value, error) {
	id, err := p.ref('%')
	if err != nil {
		return nil, err
	}
	if _, dup := p.locals[id]; dup {
		return nil, p.errf("%%%d defined twice", id)
	}
	v := &Value{ID: id}
	p.locals[id] = v
	p.f.noteID(id)
	return v, nil
}

func (p *parser) use() (*Value, error) {
	switch p.peek() {
	case '@':
		id, err := p.ref('@')
		if err != nil {
			return nil, err
		}
		if id >= len(p.m.Weights) {
			return nil, p.errf("undefined weight @%d", id)
		}
		return p.m.Weights[id], nil
	case '%':
		id, err := p.ref('%')
		if err != nil {
			return nil, err
		}
		v, ok := p.locals[id]
		if !ok {
			return nil, p.errf("%%%d used before it is defined", id)
		}
		return v, nil
	}
	return nil, p.errf("expected %%N or @N")
}

func (p *parser) funcLine() error {
	switch p.peek() {
	case '}':
		p.pos++
		if !p.eol() {
			return p.errf("unexpected text after }")
		}
		if p.f.Returns == nil {
			return p.errf("func %s has no return", p.f.Name)
		}
		p.m.Funcs = append(p.m.Funcs, p.f)
		p.f = nil
		return nil
	case '%':
	default:
		kw, err := p.ident()
		if err != nil {
			return err
		}
		if kw == "slot" {
			return p.slot()
		}
		if kw != "return" {
			return p.errf("unexpected %q", kw)
		}
		if p.f.Returns != nil {
			return p.errf("second return")
		}
		p.f.Returns = []*Value{}
		for !p.eol() {
			v, err := p.use()
			if err != nil {
				return err
			}
			p.f.Returns = append(p.f.Returns, v)
		}
		return nil
	}
	if p.f.Returns != nil {
		return p.errf("instruction after return")
	}
	in := &Instr{}
	for p.peek() == '%' {
		v, err := p.define()
		if err != nil {
			return err
		}
		v.Def = in
		in.Results = append(in.Results, v)
	}
	if err := p.expect('='); err != nil {
		return err
	}
	op, err := p.ident()
	if err != nil {
		return err
	}
	in.Op = op
	if err := p.expect('<'); err != nil {
		return err
	}
	for i := range in.Results {
		if in.Results[i].Type, err = p.typ(); err != nil {
			return err
		}
	}
	if err := p.expect('>'); err != nil {
		return err
	}
	for c := p.peek(); c == '%' || c == '@'; c = p.peek() {
		v, err := p.use()
		if err != nil {
			return err
		}
		in.Args = append(in.Args, v)
	}
	if in.Attrs, err = p.attrs(); err != nil {
		return err
	}
	if !p.eol() {
		return p.errf("unexpected text after instruction")
	}
	p.f.Body = append(p.f.Body, in)
	return nil
}

func (p *parser) slot() error {
	if len(p.f.Body) > 0 || p.f.Returns != nil {
		return p.errf("slot after the first instruction")
	}
	n, err := p.number()
	if err != nil {
		return err
	}
	if id, err := strconv.Atoi(n); err != nil || id != len(p.f.Slots) {
		return p.errf("slot %s out of order (want %d)", n, len(p.f.Slots))
	}
	t, err := p.angleType()
	if err != nil {
		return err
	}
	p.f.Slots = append(p.f.Slots, t)
	if !p.eol() {
		return p.errf("unexpected text after slot")
	}
	return nil
}
