package passes

import "deepinfer/ir"

// deadCode removes pure instructions none of whose results are used, to a fixed point.
// Stateful instructions (KV updates) always stay.
func deadCode(m *ir.Module, _ *Config) (bool, error) {
	changed := false
	for _, f := range m.Funcs {
		for {
			uses := f.Uses()
			kept := f.Body[:0]
			removed := false
			for _, in := range f.Body {
				live := ir.Lookup(in.Op).Effect == ir.Stateful
				for _, r := range in.Results {
					live = live || uses[r] > 0
				}
				if live {
					kept = append(kept, in)
				} else {
					removed = true
				}
			}
			f.Body = kept
			if !removed {
				break
			}
			changed = true
		}
	}
	return changed, nil
}
