package cpu

import (
	"fmt"

	"deepinfer/ir"
)

// newSingleRank runs a collective on one rank, where it is a copy. The cpu target is a
// single device, so a plan sharded over more ranks is refused when it is loaded.
func newSingleRank(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	if n := attrInt(a, "ranks"); n != 1 {
		return nil, fmt.Errorf("the cpu target runs one rank; this collective spans %d", n)
	}
	return kfunc(func(s *Step, in, r []Tensor) error {
		copy(r[0].F32, in[0].F32)
		return nil
	}), nil
}
