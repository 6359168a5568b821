package compiler

import (
	"deepinfer/ir"
	"deepinfer/kvlayout"
)

// KVLayoutFor is the per-sequence state a lowered model keeps: what the plan carries and
// what the memory pass sizes.
func KVLayoutFor(m *ir.Module, c *ModelConfig) kvlayout.Layout {
	if c.V41 != nil {
		return kvLayoutV41(c)
	}
	return kvLayout(m, c)
}
