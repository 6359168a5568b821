package passes

import (
	"deepinfer/ir"
)

// arenaPlan assigns every tensor value of a function to an arena slot. A value's slot
// is free again after its last use; a result never shares a slot with an operand of the
// same instruction, so kernels need not handle aliasing. Among free slots of the same
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
	for i, in := range f.Body {
		ids := make([]int64, len(in.Results))
		for j, r := range in.Results {
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
