// Package ir is the compiler's intermediate representation: generic model math in SSA form.
//
// A Module holds the weight declarations (by checkpoint name) and one Func per phase
// (prefill, decode). A Func is a straight-line list of Instrs over Values; there is no
// control flow, because a model step is a fixed dataflow graph. Ops are declared once in
// the op table (ops.go) with their arity, attribute schema and effects; the verifier
// checks every instruction against it. Per-sequence state (KV windows, compressor buffers)
// is never an SSA value: ops that touch it are marked stateful and take the layer index
// as an attribute, and the order between them is made explicit with values of type
// "state" that the writer returns and the reader takes.
//
// The text form (print.go, parse.go) round-trips exactly, so passes can be tested on
// hand-written modules and golden files can be diffed.
package ir

import (
	"fmt"
	"strconv"
	"strings"
)

// DType is an element type.
type DType uint8

// Element types. State is the token type of ordering edges between stateful ops.
const (
	Invalid DType = iota
	F32
	BF16
	F16
	F8E4M3
	I32
	I64
	State
)

var dtypeNames = [...]string{Invalid: "invalid", F32: "f32", BF16: "bf16", F16: "f16", F8E4M3: "f8e4m3", I32: "i32", I64: "i64", State: "state"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", int(d))
}

// ParseDType is the inverse of DType.String.
func ParseDType(s string) (DType, bool) {
	for i, n := range dtypeNames {
		if n == s && DType(i) != Invalid {
			return DType(i), true
		}
	}
	return Invalid, false
}

// Size is the byte size of one element (0 for State).
func (d DType) Size() int {
	switch d {
	case F32, I32:
		return 4
	case BF16, F16:
		return 2
	case F8E4M3:
		return 1
	case I64:
		return 8
	}
	return 0
}

// Symbolic dimensions. A step's shapes are fixed except for these.
const (
	SymTokens = "T" // tokens in the step (all sequences packed)
	SymRows   = "R" // rows of logits requested
)

// Dim is one dimension: a constant N, or a symbol when Sym is set.
type Dim struct {
	Sym string
	N   int64
}

// C makes a constant dim; S makes a symbolic one.
func C(n int) Dim      { return Dim{N: int64(n)} }
func S(sym string) Dim { return Dim{Sym: sym} }

func (d Dim) String() string {
	if d.Sym != "" {
		return d.Sym
	}
	return strconv.FormatInt(d.N, 10)
}

// Shape is a list of dims, outermost first.
type Shape []Dim

// Type is a tensor type: element type plus symbolic shape.
type Type struct {
	DType DType
	Shape Shape
}

// T builds a type from dims given as ints or symbol strings.
func T(dt DType, dims ...any) Type {
	s := make(Shape, len(dims))
	for i, d := range dims {
		switch v := d.(type) {
		case int:
			s[i] = C(v)
		case string:
			s[i] = S(v)
		case Dim:
			s[i] = v
		default:
			panic(fmt.Sprintf("ir.T: bad dim %T", d))
		}
	}
	return Type{DType: dt, Shape: s}
}

// StateType is the type of ordering tokens.
var StateType = Type{DType: State}

func (t Type) String() string {
	if t.DType == State {
		return "state"
	}
	parts := make([]string, len(t.Shape))
	for i, d := range t.Shape {
		parts[i] = d.String()
	}
	return t.DType.String() + "[" + strings.Join(parts, ",") + "]"
}

// Equal reports whether two types are identical.
func (t Type) Equal(u Type) bool {
	if t.DType != u.DType || len(t.Shape) != len(u.Shape) {
		return false
	}
	for i := range t.Shape {
		if t.Shape[i] != u.Shape[i] {
			return false
		}
	}
	return true
}

// Rank is the number of dims.
func (t Type) Rank() int { return len(t.Shape) }

// Elems returns the element count as coef·sym (sym "" for a constant count).
// A shape holds at most one symbolic dim; ok is false otherwise.
func (t Type) Elems() (coef int64, sym string, ok bool) {
	coef = 1
	for _, d := range t.Shape {
		if d.Sym != "" {
			if sym != "" {
				return 0, "", false
			}
			sym = d.Sym
			continue
		}
		if d.N < 0 || (d.N > 0 && coef > (1<<62)/d.N) {
			return 0, "", false
		}
		coef *= d.N
	}
	return coef, sym, true
}

// Last is the size of the innermost dim, or -1 if it is symbolic or the type is a scalar.
func (t Type) Last() int64 {
	if len(t.Shape) == 0 || t.Shape[len(t.Shape)-1].Sym != "" {
		return -1
	}
	return t.Shape[len(t.Shape)-1].N
}
