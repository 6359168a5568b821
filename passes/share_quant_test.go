package passes_test

import (
	"fmt"
	"strings"
	"testing"

	"deepinfer/ir"
	"deepinfer/passes"
	"deepinfer/targets/cpu"
)

// runPass runs one pass of the table by name.
func runPass(t *testing.T, name string, m *ir.Module) bool {
	t.Helper()
	for _, p := range passes.Table {
		if p.Name == name {
			changed, err := p.Fn(m, &passes.Config{Target: cpu.Target{}})
			if err != nil {
				t.Fatal(err)
			}
			return changed
		}
	}
	t.Fatalf("no pass %q", name)
	return false
}

// TestShareQuantOrders: qlinears quantizing one activation the same way (act, block,
// keep) are moved right after the first of them and marked quant_shared; another act,
// another activation, or a weight operand computed in between keeps an instruction in
// place unmarked; every other instruction keeps its order, and the module verifies.
func TestShareQuantOrders(t *testing.T) {
	src := `module "t" {}
weight @0 <f32[32,32]> "a" fp8_b32_ue8m0
weight @1 <f32[32,32]> "b" fp8_b32_ue8m0
weight @2 <f32[32,32]> "c" fp8_b32_ue8m0
weight @3 <f32[32,32]> "d" bf16
weight @4 <f32[32,32]> "e" fp8_b32_ue8m0
weight @5 <f32[32]> "n" bf16
func prefill(%0 <f32[T,32]> "x", %1 <f32[32,32]> "w") {
  %2 = qlinear <f32[T,32]> %0 @0 {act="mxfp8", block=32, out="bf16"}
  %3 = qlinear <f32[T,32]> %2 @1 {act="mxfp8", block=32, out="bf16"}
  %4 = rmsnorm <f32[T,32]> %3 @5 {eps=1e-06}
  %5 = qlinear <f32[T,32]> %0 @2 {act="mxfp8", block=32, out="bf16"}
  %6 = qlinear <f32[T,32]> %0 @3 {act="bf16", out="bf16"}
  %7 = qlinear <f32[T,32]> %0 @4 {act="mxfp8", block=32, out="f32"}
  %8 = add <f32[32,32]> %1 @3
  %9 = qlinear <f32[T,32]> %0 %8 {act="mxfp8", block=32, out="bf16"}
  %10 = qlinear <f32[T,32]> %0 @4 {act="mxfp8", block=32, keep=4, out="bf16"}
  return %4 %5 %6 %7 %9 %10
}
`
	m, err := ir.Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := ir.Verify(m); err != nil {
		t.Fatal(err)
	}
	if !runPass(t, "share_quant", m) {
		t.Fatal("no change reported")
	}
	if err := ir.Verify(m); err != nil {
		t.Fatalf("after the pass: %v", err)
	}
	order := func() string {
		var got []string
		for _, in := range m.Funcs[0].Body {
			s := in.Results[0].Ref()
			if v, _ := in.Attrs.Bool("quant_shared"); v {
				s += "*"
			}
			got = append(got, s)
		}
		return strings.Join(got, " ")
	}
	// %5 and %7 move after %2 (marked); %6 (bf16), %9 (a weight computed after %2) and
	// %10 (keep) stay; %3 reads another activation
	want := "%2 %5* %7* %3 %4 %6 %8 %9 %10"
	if g := order(); g != want {
		t.Fatalf("order %s, want %s", g, want)
	}
	if runPass(t, "share_quant", m); order() != want {
		t.Fatalf("a second run changed the order to %s", order())
	}
}

// TestShareQuantV41: on V4.1-Flash's config, after the whole pipeline (the fusion and
// memory passes after it see the new order), every qlinear marked quant_shared follows a
// qlinear quantizing the same activation the same way, no unmarked one quantizes what an
// earlier one did, and every main layer's attn.wkv (after attn.wq_a),
// ffn.shared_experts.w3 (after w1) and attn.indexer.wq_b (after attn.wq_b) is marked.
func TestShareQuantV41(t *testing.T) {
	m := loweredV41(t)
	if _, err := passes.Run(m, &passes.Config{Target: cpu.Target{}, Verify: true}); err != nil {
		t.Fatal(err)
	}
	key := func(in *ir.Instr) string {
		act, _ := in.Attrs.Str("act")
		b, _ := in.Attrs.Int("block")
		k, _ := in.Attrs.Int("keep")
		return fmt.Sprintf("%s/%s/%d/%d", in.Args[0].Ref(), act, b, k)
	}
	for _, f := range m.Funcs {
		first := map[string]bool{}
		marked := map[string]int{}
		for i, in := range f.Body {
			act, _ := in.Attrs.Str("act")
			if in.Op != "qlinear" || act == "f32" {
				continue
			}
			shared, _ := in.Attrs.Bool("quant_shared")
			name := in.Args[1].Name
			switch {
			case shared && (f.Body[i-1].Op != "qlinear" || key(f.Body[i-1]) != key(in)):
				t.Errorf("%s: %s marked after %s %s", f.Name, name, f.Body[i-1].Op, f.Body[i-1].Results[0].Ref())
			case !shared && first[key(in)]:
				t.Errorf("%s: %s not marked though an earlier qlinear quantizes %s", f.Name, name, key(in))
			}
			first[key(in)] = true
			if shared && strings.HasPrefix(name, "layers.") {
				marked[name[strings.Index(name[len("layers."):], ".")+len("layers.")+1:]]++
			}
		}
		layers, indexers := 0, 0
		for _, in := range f.Body {
			if in.Op != "qlinear" || !strings.HasPrefix(in.Args[1].Name, "layers.") {
				continue
			}
			switch n := in.Args[1].Name; {
			case strings.HasSuffix(n, ".attn.wq_a.weight"):
				layers++
			case strings.HasSuffix(n, ".attn.indexer.wq_b.weight"):
				indexers++
			}
		}
		if marked["attn.wkv.weight"] != layers || marked["ffn.shared_experts.w3.weight"] != layers || marked["attn.indexer.wq_b.weight"] != indexers {
			t.Errorf("%s: %d layers, %d indexers, marked %v", f.Name, layers, indexers, marked)
		}
		t.Log(f.Name, layers, "layers,", indexers, "indexers:", marked)
	}
}
