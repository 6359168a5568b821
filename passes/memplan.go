package passes

import (
	"deepinfer/ir"
)

// arenaPlan assigns every tensor value of a function to an arena slot. A value's slot
// is free again after its last use; a result never shares a slot with an operand of the
// same instruction, so kernels need not handle aliasing — except a bf16 rounding
// (fake_quant to bf16) of a value nothing else uses, whose result takes its operand's
// slot: the rounding is elementwise, so it runs in place, and a device target may then
// run it as its producer's epilogue (the producer rounding as it stores) without the
// producer ever writing over its own operands (the cuda target does). Among free slots of the same
// dtype and symbolic dim, it takes the smallest that fits, else grows the largest, else
// opens a new one. Returned values stay live to the end.
func arenaPlan(m *ir.Module, _ *Config) (bool, error) {
	for _, f := range m.Funcs {
		planFunc(f)
	}
	return true, nil
}

type slotInfo struct {
	dt   ir.DType
	sym  string
	coef int64
	free bool
}

func planFunc(f *ir.Func) {
	last := map[*ir.Value]int{}
	for i, in := range f.Body {
		for _, a := range in.Args {
			last[a] = i
		}
	}
	for _, r := range f.Returns {
		last[r] = len(f.Body)
	}
	var slots []slotInfo
	slotOf := map[*ir.Value]int{}
	uses := f.Uses()
	for i, in := range f.Body {
		ids := make([]int64, len(in.Results))
		if s, ok := firstSlot(in, slotOf); ok && inPlace(in, uses, last, i) {
			r := in.Results[0]
			ids[0] = int64(s)
			slotOf[r] = s
			delete(slotOf, in.Args[0]) // the slot now holds the result: not freed with its operand
			if _, used := last[r]; !used {
				last[r] = i
			}
		}
		for j, r := range in.Results {
			if _, done := slotOf[r]; done {
				continue
			}
			if r.Type.DType == ir.State {
				ids[j] = -1
				continue
			}
			coef, sym, _ := r.Type.Elems()
			best := -1
			for s, si := range slots {
				if !si.free || si.dt != r.Type.DType || si.sym != sym {
					continue
				}
				switch {
				case best < 0:
					best = s
				case si.coef >= coef && (slots[best].coef < coef || si.coef < slots[best].coef):
					best = s // smallest slot that fits
				case slots[best].coef < coef && si.coef > slots[best].coef:
					best = s // nothing fits yet: the largest, to grow least
				}
			}
			if best < 0 {
				slots = append(slots, slotInfo{dt: r.Type.DType, sym: sym})
				best = len(slots) - 1
			}
			slots[best].free = false
			slots[best].coef = max(slots[best].coef, coef)
			slotOf[r] = best
			ids[j] = int64(best)
			if _, used := last[r]; !used {
				// unused result (a stateful op's by-product): free after this instruction
				last[r] = i
			}
		}
		in.Attrs["slots"] = ids
		for _, v := range append(append([]*ir.Value{}, in.Args...), in.Results...) {
			if s, ok := slotOf[v]; ok && last[v] == i {
				slots[s].free = true
			}
		}
	}
	f.Slots = make([]ir.Type, len(slots))
	for s, si := range slots {
		if si.sym == "" {
			f.Slots[s] = ir.T(si.dt, int(si.coef))
		} else {
			f.Slots[s] = ir.T(si.dt, si.sym, int(si.coef))
		}
	}
}

// inPlace reports a bf16 rounding at index i whose one operand, of the same type as its
// result, has no other use and is not returned: its result takes the operand's slot.
func inPlace(in *ir.Instr, uses map[*ir.Value]int, last map[*ir.Value]int, i int) bool {
	if !roundsToBF16(in) || len(in.Args) != 1 || len(in.Results) != 1 {
		return false
	}
	a, r := in.Args[0], in.Results[0]
	return uses[a] == 1 && last[a] == i && a.Type.Equal(r.Type) && a.Type.DType == ir.F32
}

// firstSlot is the slot of in's first operand, if it has one.
func firstSlot(in *ir.Instr, slotOf map[*ir.Value]int) (int, bool) {
	if len(in.Args) == 0 {
		return 0, false
	}
	s, ok := slotOf[in.Args[0]]
	return s, ok
}
