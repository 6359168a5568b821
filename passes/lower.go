package passes

import (
	"fmt"

	"deepinfer/ir"
)

// lowerToKernels records, on every instruction, the target kernel that implements its op
// in its function's phase. A missing kernel is an error naming target, op and phase.
func lowerToKernels(m *ir.Module, cfg *Config) (bool, error) {
	if cfg.Target == nil {
		return false, fmt.Errorf("no target")
	}
	changed := false
	for _, f := range m.Funcs {
		for _, in := range f.Body {
			if _, fused := in.Attrs.Int("fusion"); fused {
				continue // the fusion pass named the group's kernel
			}
			k, ok := cfg.Target.Kernel(in.Op, f.Name)
			if !ok {
				return false, fmt.Errorf("target %s has no kernel for op %s in phase %s", cfg.Target.Name(), in.Op, f.Name)
			}
			if old, _ := in.Attrs.Str("kernel"); old != k {
				in.Attrs["kernel"] = k
				changed = true
			}
		}
	}
	return changed, nil
}
