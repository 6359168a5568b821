package cuda

import (
	"reflect"

	"deepinfer/plan"
)

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

// Shared quantizations: the compiler's share_quant pass places V4.1's qlinears that
// quantize one activation the same way next to each other and marks the later ones
// quant_shared (attn.wq_a and attn.wkv, the shared expert's w1 and w3, attn.wq_b and
// attn.indexer.wq_b). Each instruction's scratch starts at the same address, so when two
// such calls keep their quantized activations in the same buffer (the same requests up
// to it), the later call can read what the earlier one wrote and leave its own
// quantizing launch (fast_quant_split, or dense_quant) out: the same bits, one launch and
// one pass over the activations fewer.
//
// While a Hook is set nothing is shared (the instruction-by-instruction checks may feed
// an instruction the cpu target's input, not its predecessor's).

// EnvShareQuant set to 0 quantizes every qlinear's activations in its own launch even
// where its predecessor quantized the same ones (the same values; for comparisons; read
// when a program is bound).
const EnvShareQuant = "DEEPINFER_CUDA_SHARE_QUANT"

// shareQuants leaves out the quantizing launch of each quant_shared call whose
// predecessor quantizes the same operand the same way into the same scratch buffer.
func shareQuants(pr *prog) {
	for i := 1; i < len(pr.calls); i++ {
		c, p := pr.calls[i], pr.calls[i-1]
		if shared, _ := c.in.Attrs.Bool("quant_shared"); !shared || !sameQuant(p, c) {
			continue
		}
		kept := c.launches[:0:0]
		for _, l := range c.launches {
			if l.kernel != c.quantizes {
				kept = append(kept, l)
			}
		}
		c.launches = kept
		pr.quantShares++
	}
}

// sameQuant reports whether c may read p's quantized activations: both qlinears with
// the same operand 0 (a slot p does not write), act, block and keep, the same quantizing
// kernel, and the same scratch requests up to and including the buffer (so the same
// address and size at any token count).
func sameQuant(p, c *call) bool {
	if p.in.Op != "qlinear" || c.in.Op != "qlinear" || p.quantizes == "" || p.quantizes != c.quantizes ||
		p.quantScratch != c.quantScratch || len(p.argRefs) == 0 || len(c.argRefs) == 0 {
		return false
	}
	x := c.argRefs[0]
	if p.argRefs[0] != x || !p.argT[0].Equal(c.argT[0]) || (x.Kind == plan.OpSlot && writesSlot(p, x.Index)) {
		return false
	}
	for _, k := range []string{"act", "block", "keep"} {
		if !reflect.DeepEqual(p.in.Attrs[k], c.in.Attrs[k]) {
			return false
		}
	}
	k := c.quantScratch
	if k < 0 || k >= len(p.scratch) || k >= len(c.scratch) {
		return false
	}
	for j := 0; j <= k; j++ {
		if p.scratch[j] != c.scratch[j] {
			return false
		}
	}
	return true
}

// QuantShares is how many quantizing launches of the phase's program read their
// predecessor's activations instead (none while a Hook is set or with
// DEEPINFER_CUDA_SHARE_QUANT=0).
func (rt *Runtime) QuantShares(phase string) int {
	if pr := rt.progs[phase]; pr != nil {
		return pr.quantShares
	}
	return 0
}
