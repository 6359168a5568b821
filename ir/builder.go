package ir

import "fmt"

// Builder appends instructions to one function, inferring result types from the op table.
// A type error here is a compiler bug: it panics with the op named, and the pass
// boundary turns the panic into a report.
type Builder struct {
	M *Module
	F *Func
}

// NewFunc adds a function to m and returns a builder for it.
func (m *Module) NewFunc(name string) *Builder {
	f := &Func{Name: name}
	m.Funcs = append(m.Funcs, f)
	return &Builder{M: m, F: f}
}

// Param declares a named function parameter.
func (b *Builder) Param(name string, t Type) *Value {
	v := b.F.NewValue(t)
	v.Name = name
	b.F.Params = append(b.F.Params, v)
	return v
}

// Op appends op(args) with attrs and returns its results.
func (b *Builder) Op(op string, attrs Attrs, args ...*Value) []*Value {
	info := Lookup(op)
	if info == nil {
		panic(fmt.Sprintf("ir.Builder: unknown op %q", op))
	}
	// every instruction owns its attributes: passes annotate them in place
	attrs = attrs.Clone()
	types := make([]Type, len(args))
	for i, a := range args {
		types[i] = a.Type
	}
	if err := checkArity(info, len(args)); err != nil {
		panic(fmt.Sprintf("ir.Builder: %s: %v", op, err))
	}
	if err := checkAttrs(info, attrs); err != nil {
		panic(fmt.Sprintf("ir.Builder: %s: %v", op, err))
	}
	rt, err := info.Infer(types, attrs)
	if err != nil {
		panic(fmt.Sprintf("ir.Builder: %s: %v", op, err))
	}
	in := &Instr{Op: op, Args: args, Attrs: attrs}
	for _, t := range rt {
		v := b.F.NewValue(t)
		v.Def = in
		in.Results = append(in.Results, v)
	}
	b.F.Body = append(b.F.Body, in)
	return in.Results
}

// Op1 is Op for single-result ops.
func (b *Builder) Op1(op string, attrs Attrs, args ...*Value) *Value {
	r := b.Op(op, attrs, args...)
	if len(r) != 1 {
		panic(fmt.Sprintf("ir.Builder: %s has %d results, not 1", op, len(r)))
	}
	return r[0]
}

// Return sets the function's results.
func (b *Builder) Return(vs ...*Value) { b.F.Returns = vs }

func checkArity(info *OpInfo, n int) error {
	if n < info.MinArgs || (info.MaxArgs >= 0 && n > info.MaxArgs) {
		if info.MaxArgs == info.MinArgs {
			return fmt.Errorf("takes %d operands, have %d", info.MinArgs, n)
		}
		return fmt.Errorf("takes %d to %d operands, have %d", info.MinArgs, info.MaxArgs, n)
	}
	return nil
}

func attrKind(v any) (AttrKind, bool) {
	switch v.(type) {
	case int64:
		return AInt, true
	case float64:
		return AFloat, true
	case string:
		return AStr, true
	case bool:
		return ABool, true
	case []int64:
		return AInts, true
	}
	return 0, false
}

func checkAttrs(info *OpInfo, a Attrs) error {
	specs := map[string]AttrSpec{}
	for _, s := range info.Attrs {
		specs[s.Name] = s
	}
	for _, s := range passAttrs {
		specs[s.Name] = s
	}
	for k, v := range a {
		s, ok := specs[k]
		if !ok {
			return fmt.Errorf("unknown attribute %q", k)
		}
		kind, ok := attrKind(v)
		if !ok {
			return fmt.Errorf("attribute %s: unsupported value type %T", k, v)
		}
		if kind != s.Kind && !(s.Kind == AFloat && kind == AInt) {
			return fmt.Errorf("attribute %s: want %s, have %s", k, s.Kind, kind)
		}
	}
	for _, s := range info.Attrs {
		if _, ok := a[s.Name]; s.Required && !ok {
			return fmt.Errorf("missing attribute %s", s.Name)
		}
	}
	return nil
}

// CheckInstr checks one instruction given only types, as a plan decoder must: the op
// exists, the operand count and attributes fit its declaration, and the result types
// are exactly what its type rule infers.
func CheckInstr(op string, args, results []Type, attrs Attrs) error {
	info := Lookup(op)
	if info == nil {
		return fmt.Errorf("unknown op %q", op)
	}
	if err := checkArity(info, len(args)); err != nil {
		return err
	}
	if err := checkAttrs(info, attrs); err != nil {
		return err
	}
	want, err := info.Infer(args, attrs)
	if err != nil {
		return err
	}
	if len(want) != len(results) {
		return fmt.Errorf("%d results, the op defines %d", len(results), len(want))
	}
	for i := range want {
		if !want[i].Equal(results[i]) {
			return fmt.Errorf("result %d is %s, the op gives %s", i, results[i], want[i])
		}
	}
	return nil
}
