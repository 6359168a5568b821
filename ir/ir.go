package ir

import (
	"fmt"
	"sort"
)

// Value is an SSA value: a function parameter, an instruction result, or a module weight.
type Value struct {
	ID     int
	Type   Type
	Def    *Instr // defining instruction; nil for params and weights
	Name   string // parameter name, or checkpoint name for a weight
	Weight bool   // a module-level weight (printed @ID)
	// Storage is a weight's checkpoint storage format (see storage.go); "" means its
	// runtime type.
	Storage string
}

// Ref is the short form of a value: %12 or @3.
func (v *Value) Ref() string {
	if v.Weight {
		return fmt.Sprintf("@%d", v.ID)
	}
	return fmt.Sprintf("%%%d", v.ID)
}

// Attrs are an instruction's compile-time parameters. Values are int64, float64,
// string, bool or []int64.
type Attrs map[string]any

// Keys returns the attribute names in sorted order (the printed order).
func (a Attrs) Keys() []string {
	ks := make([]string, 0, len(a))
	for k := range a {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Int returns an int attribute (0, false when absent or of another kind).
func (a Attrs) Int(k string) (int64, bool) { v, ok := a[k].(int64); return v, ok }

// Float returns a float attribute; an int attribute is widened.
func (a Attrs) Float(k string) (float64, bool) {
	switch v := a[k].(type) {
	case float64:
		return v, true
	case int64:
		return float64(v), true
	}
	return 0, false
}

// Str returns a string attribute.
func (a Attrs) Str(k string) (string, bool) { v, ok := a[k].(string); return v, ok }

// Bool returns a bool attribute.
func (a Attrs) Bool(k string) (bool, bool) { v, ok := a[k].(bool); return v, ok }

// Ints returns an int-list attribute.
func (a Attrs) Ints(k string) ([]int64, bool) { v, ok := a[k].([]int64); return v, ok }

// Clone copies the map (list values are shared; attributes are never mutated in place).
func (a Attrs) Clone() Attrs {
	b := make(Attrs, len(a))
	for k, v := range a {
		b[k] = v
	}
	return b
}

// Instr is one operation. After lowering, Attrs["kernel"] names the target kernel and,
// after memory planning, Attrs["slots"] lists the buffer slot of each result.
type Instr struct {
	Op      string
	Args    []*Value
	Results []*Value
	Attrs   Attrs
}

// Func is one phase's program: parameters, a straight-line body, returned values.
type Func struct {
	Name   string
	Params []*Value
	// Slots are the buffers of the memory plan (empty before it runs): slot i holds
	// up to Slots[i]'s element count, for values of its dtype.
	Slots   []Type
	Body    []*Instr
	Returns []*Value
	nextID  int
}

// NewValue allocates a fresh local value ID in f.
func (f *Func) NewValue(t Type) *Value {
	v := &Value{ID: f.nextID, Type: t}
	f.nextID++
	return v
}

// NumValues is one past the largest local value ID in f.
func (f *Func) NumValues() int { return f.nextID }

func (f *Func) noteID(id int) {
	if id >= f.nextID {
		f.nextID = id + 1
	}
}

// Module is the whole compilation unit.
type Module struct {
	Name    string
	Attrs   Attrs
	Weights []*Value
	Funcs   []*Func
	byName  map[string]*Value
}

// NewModule makes an empty module.
func NewModule(name string) *Module {
	return &Module{Name: name, Attrs: Attrs{}, byName: map[string]*Value{}}
}

// Weight declares (or returns the existing) weight named by its checkpoint name.
func (m *Module) Weight(name string, t Type) *Value {
	if v, ok := m.byName[name]; ok {
		return v
	}
	v := &Value{ID: len(m.Weights), Type: t, Name: name, Weight: true}
	m.Weights = append(m.Weights, v)
	m.byName[name] = v
	return v
}

// LookupWeight finds a weight by checkpoint name.
func (m *Module) LookupWeight(name string) (*Value, bool) {
	v, ok := m.byName[name]
	return v, ok
}

// Func returns the function with the given name, or nil.
func (m *Module) Func(name string) *Func {
	for _, f := range m.Funcs {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Uses counts how many times each local value of f is read (args and returns).
func (f *Func) Uses() map[*Value]int {
	u := map[*Value]int{}
	for _, in := range f.Body {
		for _, a := range in.Args {
			if !a.Weight {
				u[a]++
			}
		}
	}
	for _, r := range f.Returns {
		u[r]++
	}
	return u
}
