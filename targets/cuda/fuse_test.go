package cuda

import (
	"testing"

	"deepinfer/ir"
	"deepinfer/plan"
)

// TestFuseEpiloguesRules: fuseEpilogues fuses an in-place bf16 rounding into the last
// instruction writing its slot only when that producer rounds on store, has one
// result, and no instruction between them reads the slot (plans from this memory
// planner never have such a reader; a plan from elsewhere may).
func TestFuseEpiloguesRules(t *testing.T) {
	ty := ir.T(ir.F32, "T", 8)
	slot := func(i int) plan.Operand { return plan.Operand{Kind: plan.OpSlot, Index: i} }
	mk := func(op string, attrs ir.Attrs, rounds bool, args, res []int) *call {
		c := &call{in: &plan.Instr{Op: op, Attrs: attrs}, rounds: rounds}
		for _, a := range args {
			c.argRefs, c.argT = append(c.argRefs, slot(a)), append(c.argT, ty)
		}
		for _, r := range res {
			c.resRefs, c.resT = append(c.resRefs, slot(r)), append(c.resT, ty)
		}
		c.launches = []launch{{kernel: op}}
		return c
	}
	round := func() *call { return mk("fake_quant", ir.Attrs{"format": "bf16"}, false, []int{3}, []int{3}) }
	for _, c := range []struct {
		name  string
		calls []*call
		fused bool
	}{
		{"producer then rounding", []*call{mk("rmsnorm", ir.Attrs{}, true, []int{1}, []int{3}), round()}, true},
		{"a reader between", []*call{mk("rmsnorm", ir.Attrs{}, true, []int{1}, []int{3}), mk("add", ir.Attrs{}, true, []int{3, 1}, []int{2}), round()}, false},
		{"a producer that does not round", []*call{mk("swiglu", ir.Attrs{}, false, []int{1}, []int{3}), round()}, false},
		{"a producer of two results", []*call{mk("rmsnorm", ir.Attrs{}, true, []int{1}, []int{3, 4}), round()}, false},
		{"an unrelated write between", []*call{mk("rmsnorm", ir.Attrs{}, true, []int{1}, []int{3}), mk("add", ir.Attrs{}, true, []int{1, 1}, []int{2}), round()}, true},
		{"an MXFP8 rounding", []*call{mk("rmsnorm", ir.Attrs{}, true, []int{1}, []int{3}), mk("fake_quant", ir.Attrs{"format": "mxfp8"}, false, []int{3}, []int{3})}, false},
	} {
		pr := &prog{calls: c.calls}
		fuseEpilogues(pr)
		f, p := c.calls[len(c.calls)-1], c.calls[0]
		if got := pr.epilogues == 1 && f.epilogue && f.launches == nil && p.step.Round; got != c.fused || (!c.fused && (pr.epilogues != 0 || f.launches == nil || p.step.Round)) {
			t.Errorf("%s: %d fused, rounding's launches %d, producer rounds %v; want fused %v", c.name, pr.epilogues, len(f.launches), p.step.Round, c.fused)
		}
	}
}
