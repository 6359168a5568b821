package ir

import (
	"strings"
	"testing"
)

// small builds a hand-made module: an embedding, a norm, a projection and a dead value.
func small() *Module {
	m := NewModule("small")
	b := m.NewFunc("prefill")
	tok := b.Param("tokens", T(I32, SymTokens))
	rows := b.Param("logit_rows", T(I32, SymRows))
	emb := m.Weight("embed", T(F32, 16, 8))
	w := m.Weight("norm", T(F32, 8))
	x := b.Op1("embed", nil, tok, emb)
	h := b.Op1("rmsnorm", Attrs{"eps": 1e-6}, x, w)
	b.Op1("rmsnorm", Attrs{"eps": 1e-6, "group": int64(4)}, h)
	b.Return(b.Op1("lm_head", nil, h, rows, emb))
	return m
}

func TestPrintParseRoundTrip(t *testing.T) {
	m := small()
	m.Funcs[0].Body[0].Attrs["slots"] = []int64{0}
	m.Funcs[0].Slots = []Type{T(F32, SymTokens, 8)}
	m.Attrs["note"] = "a \"quoted\" string"
	m.Attrs["ratio"] = 2.0
	text := m.String()
	back, err := Parse(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if back.String() != text {
		t.Fatalf("round trip differs:\n%s\n---\n%s", text, back.String())
	}
	if err := Verify(back); err != nil {
		t.Fatal(err)
	}
	if v, ok := back.Attrs.Float("ratio"); !ok || v != 2 {
		t.Fatalf("float attribute 2.0 came back as %#v", back.Attrs["ratio"])
	}
}

func TestParseErrorsCarryPosition(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"module \"m\"\nfunc f(%0 <i32[T]> \"t\") {\n  %1 = embed <f32[T,8]> %0 @0\n  return %1\n}\n", "3:"},
		{"module \"m\"\nfunc f() {\n  %1 = add <f32[T,8]> %2 %2\n", "3:"},
		{"module \"m\"\nweight @1 <f32[2]> \"w\"\n", "2:"},
		{"module \"m\"\nfunc f() {\n  return\n", "func f is not closed"},
		{"module \"m\"\nfunc f() {\n  %1 = add <f99[T]> %1\n}\n", "unknown dtype"},
	} {
		_, err := Parse(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q): error %v, want %q", c.src, err, c.want)
		}
	}
}

func TestVerifyCatches(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(m *Module)
		want string
	}{
		{"wrong result type", func(m *Module) { m.Funcs[0].Body[1].Results[0].Type = T(F32, SymTokens, 9) }, "result 0"},
		{"unknown attribute", func(m *Module) { m.Funcs[0].Body[1].Attrs["foo"] = int64(1) }, "unknown attribute"},
		{"use before def", func(m *Module) {
			b := m.Funcs[0].Body
			b[0], b[1] = b[1], b[0]
		}, "before it is defined"},
		{"arity", func(m *Module) { m.Funcs[0].Body[0].Args = m.Funcs[0].Body[0].Args[:1] }, "operands"},
		{"bad slot", func(m *Module) { m.Funcs[0].Body[0].Attrs["slots"] = []int64{3} }, "slot 3"},
	} {
		m := small()
		c.edit(m)
		err := Verify(m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(small().String())
	f.Add("module \"x\"\nfunc f(%0 <i32[T]> \"t\") {\n  return %0\n}\n")
	f.Fuzz(func(t *testing.T, src string) {
		m, err := Parse(src)
		if err != nil {
			return
		}
		text := m.String()
		back, err := Parse(text)
		if err != nil {
			t.Fatalf("printed module does not parse: %v\n%s", err, text)
		}
		if back.String() != text {
			t.Fatalf("print/parse not stable")
		}
		_ = Verify(m) // must not panic
	})
}
