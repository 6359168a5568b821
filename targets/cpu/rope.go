package cpu

import (
	"math"

	"deepinfer/ir"
)

// ropeSpec is the interleaved partial RoPE of DeepSeek-V4: channel pairs (2i, 2i+1) of
// the trailing rope_dim channels of each head rotate by pos·θ_i.
type ropeSpec struct {
	headDim, ropeDim int
	invFreq          []float64
	attnFactor       float64
	// fp32 follows DeepSeek-V4.1's reference (rope_fp32): its precompute_freqs_cis
	// works in float32, so the frequencies (inverseFrequencies32) and each angle
	// pos·θ_i are rounded to float32 as there. cos, sin and the rotation stay float64,
	// rounded once: that agrees with the reference's complex64 arithmetic after the bf16
	// rounding that follows every rotation in V4.1 (both tiny-v41 fixtures, every case);
	// rounding cos/sin to float32 here instead does not (tiny-v41-dev2 prefill_90 moves
	// by 1.3e-2).
	fp32      bool
	invFreq32 []float32
}

// yarnRamp gives YaRN's blend weight per frequency index: ramp(i) = clamp((i-low)/
// (high-low), 0, 1) over the correction range [low, high] of precompute_freqs_cis
// (a width below 1e-3 taken as 1e-3), and the factor; ok is false without YaRN.
func yarnRamp(dim int, base float64, a ir.Attrs) (ramp []float64, factor float64, ok bool) {
	factor, ok = a.Float("yarn_factor")
	if !ok {
		return nil, 0, false
	}
	orig := float64(attrInt(a, "yarn_original"))
	fast, slow := attrFloat(a, "yarn_beta_fast"), attrFloat(a, "yarn_beta_slow")
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low := max(math.Floor(corr(fast)), 0)
	high := min(math.Ceil(corr(slow)), float64(dim-1))
	width := max(high-low, 1e-3)
	ramp = make([]float64, dim/2)
	for i := range ramp {
		ramp[i] = min(max((float64(i)-low)/width, 0), 1)
	}
	return ramp, factor, true
}

// inverseFrequencies gives θ_i = base^(-2i/dim), blended with θ_i/factor by YaRN's ramp
// when a YaRN factor is set (the DeepSeek reference's precompute_freqs_cis).
func inverseFrequencies(dim int, base float64, a ir.Attrs) []float64 {
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(base, float64(2*i)/float64(dim))
	}
	if ramp, factor, ok := yarnRamp(dim, base, a); ok {
		for i, r := range ramp {
			smooth := 1 - r
			inv[i] = inv[i]/factor*(1-smooth) + inv[i]*smooth
		}
	}
	return inv
}

// inverseFrequencies32 is precompute_freqs_cis's frequency vector as DeepSeek-V4.1's
// reference computes it, in float32: 1/base^(2i/dim) (correctly rounded, as torch's
// float32 pow and reciprocal give for these exponents), then YaRN's blend
// freqs/factor·(1-smooth) + freqs·smooth in float32.
func inverseFrequencies32(dim int, base float32, a ir.Attrs) []float32 {
	inv := make([]float32, dim/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(float64(base), float64(2*i)/float64(dim)))
	}
	if ramp, factor, ok := yarnRamp(dim, float64(base), a); ok {
		f32 := float32(factor)
		for i, r := range ramp {
			smooth := 1 - float32(r)
			inv[i] = inv[i]/f32*(1-smooth) + inv[i]*smooth
		}
	}
	return inv
}

func newRopeSpec(a ir.Attrs, headDim int) ropeSpec {
	rd := attrInt(a, "rope_dim")
	af := 1.0
	if v, ok := a.Float("attn_factor"); ok {
		af = v
	}
	r := ropeSpec{headDim: headDim, ropeDim: rd, invFreq: inverseFrequencies(rd, attrFloat(a, "theta"), a), attnFactor: af}
	if attrBool(a, "rope_fp32") {
		r.fp32 = true
		r.invFreq32 = inverseFrequencies32(rd, float32(attrFloat(a, "theta")), a)
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
