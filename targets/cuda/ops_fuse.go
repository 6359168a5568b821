package cuda

import "deepinfer/plan"

// Epilogues: V4.1's reference rounds many activations to bf16 right after the op that
// computes them (a fake_quant to bf16 after an RMSNorm, a rotary embedding, an mHC
// expansion or collapse, a residual add). Run alone, each rounding is a launch that
// reads and writes its tensor again — 61 of a V4.1 decode step's launches over four
// layers. The memory planner gives such a rounding its operand's slot when nothing else
// uses the operand (passes/memplan.go), so the producer's result and the rounding's
// result are one buffer: the producer can store its values already rounded and the
// rounding launches nothing. The values are the same bit for bit (rounding a float32
// to bf16 as it is stored or in a pass after it is one operation on the same value).
//
// While a Hook is set (the instruction-by-instruction checks read every instruction's
// own result, and may feed the rounding the cpu target's input) nothing is fused.

// EnvEpilogue set to 0 runs every bf16 rounding as its own launch (mhc_fake_quant)
// instead of inside its producer (the same values; for comparisons; read when a program
// is bound).
const EnvEpilogue = "DEEPINFER_CUDA_EPILOGUE"

// epilogueWithHook fuses while a Hook is set too (tests that compare every
// instruction's results with and without the fusion).
var epilogueWithHook bool

// fuseEpilogues marks each fake_quant to bf16 that runs in place (its operand's slot is
// its result's) whose operand's producer rounds on store (Bind.RoundsOnStore): the
// producer stores rounded values (Step.Round) and the rounding launches nothing. The
// producer is the last instruction before the rounding that writes the slot, as its
// only result; no instruction between them may read the slot.
func fuseEpilogues(pr *prog) {
	for i, f := range pr.calls {
		s, ok := inPlaceRounding(f)
		if !ok {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			p := pr.calls[j]
			if readsSlot(p, s) && !writesSlot(p, s) {
				break // a reader between the producer and the rounding
			}
			if !writesSlot(p, s) {
				continue
			}
			if p.rounds && !p.epilogue && len(p.resRefs) == 1 && !readsSlot(p, s) && p.resT[0].Equal(f.resT[0]) {
				p.step.Round = true
				p.roundFor = i
				f.epilogue = true
				f.launches = nil
				pr.epilogues++
			}
			break
		}
	}
}

// inPlaceRounding reports a fake_quant to bf16 whose one operand and result are the
// same slot, and that slot.
func inPlaceRounding(c *call) (int, bool) {
	if c.in.Op != "fake_quant" || len(c.argRefs) != 1 || len(c.resRefs) != 1 {
		return 0, false
	}
	if f, _ := c.in.Attrs.Str("format"); f != "bf16" {
		return 0, false
	}
	a, r := c.argRefs[0], c.resRefs[0]
	if a.Kind != plan.OpSlot || r.Kind != plan.OpSlot || a.Index != r.Index || !c.argT[0].Equal(c.resT[0]) {
		return 0, false
	}
	return r.Index, true
}

func readsSlot(c *call, s int) bool {
	for _, o := range c.argRefs {
		if o.Kind == plan.OpSlot && o.Index == s {
			return true
		}
	}
	return false
}

func writesSlot(c *call, s int) bool {
	for _, o := range c.resRefs {
		if o.Kind == plan.OpSlot && o.Index == s {
			return true
		}
	}
	return false
}

// Epilogues is how many bf16 roundings of the phase's program its producers store
// (none while a Hook is set or with DEEPINFER_CUDA_EPILOGUE=0).
func (rt *Runtime) Epilogues(phase string) int {
	if pr := rt.progs[phase]; pr != nil {
		return pr.epilogues
	}
	return 0
}
