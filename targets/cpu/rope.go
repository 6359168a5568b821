package cpu

import (
	"math"

	"deepinfer/ir"
	"deepinfer/targets/ropefreq"
)

// ropeSpec is the interleaved partial RoPE of DeepSeek-V4: channel pairs (2i, 2i+1) of
// the trailing rope_dim channels of each head rotate by pos·θ_i.
type ropeSpec struct {
	headDim, ropeDim int
	invFreq          []float64
	attnFactor       float64
	// fp32 follows DeepSeek-V4.1's reference (rope_fp32): its precompute_freqs_cis
	// works in float32, so the frequencies (ropefreq.Inverse32) and each angle
	// pos·θ_i are rounded to float32 as there. cos, sin and the rotation stay float64,
	// rounded once: that agrees with the reference's complex64 arithmetic after the bf16
	// rounding that follows every rotation in V4.1 (both tiny-v41 fixtures, every case);
	// rounding cos/sin to float32 here instead does not (tiny-v41-dev2 prefill_90 moves
	// by 1.3e-2).
	fp32      bool
	invFreq32 []float32
}

func newRopeSpec(a ir.Attrs, headDim int) ropeSpec {
	rd := attrInt(a, "rope_dim")
	af := 1.0
	if v, ok := a.Float("attn_factor"); ok {
		af = v
	}
	r := ropeSpec{headDim: headDim, ropeDim: rd, invFreq: ropefreq.Inverse(rd, attrFloat(a, "theta"), a), attnFactor: af}
	if attrBool(a, "rope_fp32") {
		r.fp32 = true
		r.invFreq32 = ropefreq.Inverse32(rd, float32(attrFloat(a, "theta")), a)
	}
	return r
}

// tables fills cos/sin (len ropeDim/2) for one position; sign -1 gives the inverse rotation.
func (r *ropeSpec) tables(pos int, sign float64, cos, sin []float64) {
	if r.fp32 {
		for i, f := range r.invFreq32 {
			ang := float32(pos) * f // torch.outer(arange, freqs) in float32
			s, c := math.Sincos(float64(ang))
			cos[i], sin[i] = c, sign*s
		}
		return
	}
	for i, f := range r.invFreq {
		s, c := math.Sincos(float64(pos) * f)
		cos[i], sin[i] = c*r.attnFactor, sign*s*r.attnFactor
	}
}

// apply rotates every head of one row in place.
func (r *ropeSpec) apply(row []float32, cos, sin []float64) {
	off := r.headDim - r.ropeDim
	for h := 0; h+r.headDim <= len(row); h += r.headDim {
		x := row[h+off : h+r.headDim]
		for i := range cos {
			x0, x1 := float64(x[2*i]), float64(x[2*i+1])
			x[2*i] = float32(x0*cos[i] - x1*sin[i])
			x[2*i+1] = float32(x1*cos[i] + x0*sin[i])
		}
	}
}

func newRope(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	spec := newRopeSpec(a, attrInt(a, "head_dim"))
	sign := 1.0
	if attrBool(a, "inverse") {
		sign = -1
	}
	w := int(args[0].Last())
	return kfunc(func(s *Step, in, r []Tensor) error {
		cos := make([]float64, spec.ropeDim/2)
		sin := make([]float64, spec.ropeDim/2)
		x, y := in[0].F32, r[0].F32
		copy(y, x)
		for t, p := range in[1].I32 {
			spec.tables(int(p), sign, cos, sin)
			spec.apply(y[t*w:(t+1)*w], cos, sin)
		}
		return nil
	}), nil
}
