package ir

import (
	"fmt"
	"math"
)

// VerifyError names the function, instruction and op that broke an invariant.
type VerifyError struct {
	Func  string
	Index int // instruction index, -1 for the function itself
	Instr string
	Msg   string
}

func (e *VerifyError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("func %s: %s", e.Func, e.Msg)
	}
	return fmt.Sprintf("func %s: instr %d (%s): %s", e.Func, e.Index, e.Instr, e.Msg)
}

// Verify checks every invariant of m: known ops, arity, attribute kinds, result types
// equal to what the op's type rule infers, values defined once before use, weights
// declared in m, and stateful ops carrying their layer.
func Verify(m *Module) error {
	for i, w := range m.Weights {
		if !w.Weight || w.ID != i {
			return fmt.Errorf("weight %d (%s) is malformed", i, w.Name)
		}
		if w.Storage != "" {
			if _, ok := LookupStorage(w.Storage); !ok {
				return fmt.Errorf("weight @%d %q: unknown storage format %q", i, w.Name, w.Storage)
			}
		}
		if _, _, ok := w.Type.Elems(); !ok || w.Type.DType == State {
			return fmt.Errorf("weight @%d %q: bad type %s", i, w.Name, w.Type)
		}
		for _, d := range w.Type.Shape {
			if d.Sym != "" {
				return fmt.Errorf("weight @%d %q: symbolic dim in %s", i, w.Name, w.Type)
			}
		}
	}
	names := map[string]bool{}
	for _, f := range m.Funcs {
		if names[f.Name] {
			return &VerifyError{Func: f.Name, Index: -1, Msg: "defined twice"}
		}
		names[f.Name] = true
		if err := verifyFunc(m, f); err != nil {
			return err
		}
	}
	return nil
}

func verifyFunc(m *Module, f *Func) error {
	defined := map[*Value]bool{}
	ids := map[int]bool{}
	def := func(v *Value) error {
		if v.Weight {
			return fmt.Errorf("weight %s defined as a local", v.Ref())
		}
		if ids[v.ID] {
			return fmt.Errorf("%s defined twice", v.Ref())
		}
		if v.ID >= f.nextID {
			return fmt.Errorf("%s is past the function's value count %d", v.Ref(), f.nextID)
		}
		ids[v.ID] = true
		defined[v] = true
		return nil
	}
	for _, p := range f.Params {
		if err := def(p); err != nil {
			return &VerifyError{Func: f.Name, Index: -1, Msg: err.Error()}
		}
		if p.Name == "" {
			return &VerifyError{Func: f.Name, Index: -1, Msg: fmt.Sprintf("parameter %s has no name", p.Ref())}
		}
	}
	for i, in := range f.Body {
		bad := func(format string, args ...any) error {
			return &VerifyError{Func: f.Name, Index: i, Instr: in.Op, Msg: fmt.Sprintf(format, args...)}
		}
		info := Lookup(in.Op)
		if info == nil {
			return bad("unknown op")
		}
		if err := checkArity(info, len(in.Args)); err != nil {
			return bad("%v", err)
		}
		if err := checkAttrs(info, in.Attrs); err != nil {
			return bad("%v", err)
		}
		for k, v := range in.Attrs {
			if x, ok := v.(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
				return bad("attribute %s is not finite", k)
			}
		}
		types := make([]Type, len(in.Args))
		for j, a := range in.Args {
			if a.Weight {
				if a.ID >= len(m.Weights) || m.Weights[a.ID] != a {
					return bad("operand %d is not a weight of this module", j)
				}
			} else if !defined[a] {
				return bad("operand %s is used before it is defined", a.Ref())
			}
			types[j] = a.Type
		}
		want, err := info.Infer(types, in.Attrs)
		if err != nil {
			return bad("%v", err)
		}
		if len(want) != len(in.Results) {
			return bad("has %d results, the op defines %d", len(in.Results), len(want))
		}
		for j, r := range in.Results {
			if !r.Type.Equal(want[j]) {
				return bad("result %d is %s, the op gives %s", j, r.Type, want[j])
			}
			if r.Def != in {
				return bad("result %s does not point back at its instruction", r.Ref())
			}
			if err := def(r); err != nil {
				return bad("%v", err)
			}
		}
		if info.Effect == Stateful {
			if l, ok := in.Attrs.Int("layer"); !ok || l < 0 {
				return bad("stateful op without a layer")
			}
		}
		if slots, ok := in.Attrs.Ints("slots"); ok {
			if len(slots) != len(in.Results) {
				return bad("%d slots for %d results", len(slots), len(in.Results))
			}
			for j, sl := range slots {
				if err := fitsSlot(f, in.Results[j].Type, sl); err != nil {
					return bad("result %d: %v", j, err)
				}
			}
		}
	}
	if f.Returns == nil {
		return &VerifyError{Func: f.Name, Index: -1, Msg: "no return"}
	}
	for _, r := range f.Returns {
		if !r.Weight && !defined[r] {
			return &VerifyError{Func: f.Name, Index: -1, Msg: fmt.Sprintf("returns undefined %s", r.Ref())}
		}
	}
	return nil
}

// fitsSlot checks that a value of type t may live in slot s (-1 for state values).
func fitsSlot(f *Func, t Type, s int64) error {
	if t.DType == State {
		if s != -1 {
			return fmt.Errorf("a state value has slot %d", s)
		}
		return nil
	}
	if s < 0 || s >= int64(len(f.Slots)) {
		return fmt.Errorf("slot %d does not exist", s)
	}
	st := f.Slots[s]
	vc, vs, ok := t.Elems()
	sc, ss, _ := st.Elems()
	if !ok || st.DType != t.DType || vs != ss || vc > sc {
		return fmt.Errorf("%s does not fit slot %d (%s)", t, s, st)
	}
	return nil
}
