package ir

// The fusion pass groups single-use chains of instructions that a target runs as one
// kernel. A group keeps its instructions (so the IR stays verifiable and a target
// without the fused kernel can still run them one by one); each member carries the
// group's number in "fusion", and lowering names the fused kernel on every member.
func init() {
	passAttrs = append(passAttrs, AttrSpec{"fusion", AInt, false})
}

// The share_quant pass marks a qlinear "quant_shared" when the instruction before it is
// a qlinear quantizing the same activation the same way (act, block, keep): a target may
// reuse that instruction's quantized activation instead of quantizing again. The values
// are the same either way.
func init() {
	passAttrs = append(passAttrs, AttrSpec{"quant_shared", ABool, false})
}
