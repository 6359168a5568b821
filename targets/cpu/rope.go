package cpu

import (
	"math"

	"deepinfer/ir"
	"deepinfer/targets"
)

// ropeSpec is the interleaved partial RoPE of DeepSeek-V4: channel pairs (2i, 2i+1) of
// the trailing rope_dim channels of each head rotate by pos·θ_i.
type ropeSpec struct {
	headDim, ropeDim int
	invFreq          []float64
	attnFactor       float64
}

// inverseFrequencies gives θ_i = base^(-2i/dim), blended with θ_i/factor by YaRN's ramp
// when a YaRN factor is set (the DeepSeek reference's precompute_freqs_cis).
func inverseFrequencies(dim int, base float64, a ir.Attrs) []float64 {
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(base, float64(2*i)/float64(dim))
	}
	factor, ok := a.Float("yarn_factor")
	if !ok {
		return inv
	}
	orig := float64(attrInt(a, "yarn_original"))
	fast, slow := attrFloat(a, "yarn_beta_fast"), attrFloat(a, "yarn_beta_slow")
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(orig/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low := max(math.Floor(corr(fast)), 0)
	high := min(math.Ceil(corr(slow)), float64(dim-1))
	if low == high {
		high += 0.001
	}
	for i := range inv {
		ramp := min(max((float64(i)-low)/(high-low), 0), 1)
		smooth := 1 - ramp
		inv[i] = inv[i]/factor*(1-smooth) + inv[i]*smooth
	}
	return inv
}

func newRopeSpec(a ir.Attrs, headDim int) ropeSpec {
	rd := attrInt(a, "rope_dim")
	af := 1.0
	if v, ok := a.Float("attn_factor"); ok {
		af = v
	}
	return ropeSpec{headDim: headDim, ropeDim: rd, invFreq: inverseFrequencies(rd, attrFloat(a, "theta"), a), attnFactor: af}
}

// tables fills cos/sin (len ropeDim/2) for one position; sign -1 gives the inverse rotation.
func (r *ropeSpec) tables(pos int, sign float64, cos, sin []float64) {
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

func newRope(args, _ []ir.Type, a ir.Attrs) (targets.Kernel, error) {
	spec := newRopeSpec(a, attrInt(a, "head_dim"))
	sign := 1.0
	if attrBool(a, "inverse") {
		sign = -1
	}
	w := int(args[0].Last())
	return kfunc(func(s *targets.Step, in, r []targets.Tensor) error {
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
