package ir

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Print writes m's text form. Parse reads it back to an identical module.
//
//	module "name" {attrs}
//	weight @0 <f32[512,64]> "model.embed_tokens.weight"
//	func prefill(%0 <i32[T]> "tokens", %1 <i32[T]> "positions") {
//	  %2 = embed <f32[T,64]> %0 @0
//	  %3 %4 = moe_route <f32[T,2] i32[T,2]> %2 @5 {mode="topk", ...}
//	  return %4
//	}
func Print(w io.Writer, m *Module) error {
	var b strings.Builder
	fmt.Fprintf(&b, "module %s%s\n", strconv.Quote(m.Name), fmtAttrs(m.Attrs))
	for _, wv := range m.Weights {
		fmt.Fprintf(&b, "weight %s <%s> %s", wv.Ref(), wv.Type, strconv.Quote(wv.Name))
		if wv.Storage != "" {
			b.WriteString(" " + wv.Storage)
		}
		b.WriteByte('\n')
	}
	for _, f := range m.Funcs {
		printFunc(&b, f)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the text form of m.
func (m *Module) String() string {
	var b strings.Builder
	_ = Print(&b, m)
	return b.String()
}

func printFunc(b *strings.Builder, f *Func) {
	params := make([]string, len(f.Params))
	for i, p := range f.Params {
		params[i] = fmt.Sprintf("%s <%s> %s", p.Ref(), p.Type, strconv.Quote(p.Name))
	}
	fmt.Fprintf(b, "func %s(%s) {\n", f.Name, strings.Join(params, ", "))
	for i, t := range f.Slots {
		fmt.Fprintf(b, "  slot %d <%s>\n", i, t)
	}
	for _, in := range f.Body {
		b.WriteString("  ")
		b.WriteString(in.String())
		b.WriteByte('\n')
	}
	rets := make([]string, len(f.Returns))
	for i, r := range f.Returns {
		rets[i] = r.Ref()
	}
	fmt.Fprintf(b, "  return %s\n}\n", strings.Join(rets, " "))
}

// String is the long form of one instruction.
func (in *Instr) String() string {
	var b strings.Builder
	types := make([]string, len(in.Results))
	for i, r := range in.Results {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(r.Ref())
		types[i] = r.Type.String()
	}
	fmt.Fprintf(&b, " = %s <%s>", in.Op, strings.Join(types, " "))
	for _, a := range in.Args {
		b.WriteByte(' ')
		b.WriteString(a.Ref())
	}
	b.WriteString(fmtAttrs(in.Attrs))
	return b.String()
}

func fmtAttrs(a Attrs) string {
	if len(a) == 0 {
		return ""
	}
	parts := make([]string, 0, len(a))
	for _, k := range a.Keys() {
		parts = append(parts, k+"="+FormatAttr(a[k]))
	}
	return " {" + strings.Join(parts, ", ") + "}"
}

// FormatAttr prints one attribute value so that the parser reads back the same kind.
func FormatAttr(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		s := strconv.FormatFloat(x, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnI") {
			s += ".0"
		}
		return s
	case string:
		return strconv.Quote(x)
	case bool:
		return strconv.FormatBool(x)
	case []int64:
		parts := make([]string, len(x))
		for i, n := range x {
			parts[i] = strconv.FormatInt(n, 10)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	return fmt.Sprintf("<%T>", v)
}
