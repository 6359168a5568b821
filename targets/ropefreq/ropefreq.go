// Package ropefreq is the rotary embedding's frequency vector as DeepSeek's references
// compute it (precompute_freqs_cis), with YaRN's blend: one copy for every target that
// applies RoPE (the cpu kernels, the cuda runtime's binders).
package ropefreq

import (
	"math"

	"deepinfer/ir"
)

// YarnRamp gives YaRN's blend weight per frequency index: ramp(i) = clamp((i-low)/
// (high-low), 0, 1) over the correction range [low, high] of precompute_freqs_cis
// (a width below 1e-3 taken as 1e-3), and the factor; ok is false without YaRN.
func YarnRamp(dim int, base float64, a ir.Attrs) (ramp []float64, factor float64, ok bool) {
	factor, ok = a.Float("yarn_factor")
	if !ok {
		return nil, 0, false
	}
	orig := float64(intAttr(a, "yarn_original"))
	fast, _ := a.Float("yarn_beta_fast")
	slow, _ := a.Float("yarn_beta_slow")
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

// Inverse gives θ_i = base^(-2i/dim), blended with θ_i/factor by YaRN's ramp
// when a YaRN factor is set (the DeepSeek reference's precompute_freqs_cis).
func Inverse(dim int, base float64, a ir.Attrs) []float64 {
	inv := make([]float64, dim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(base, float64(2*i)/float64(dim))
	}
	if ramp, factor, ok := YarnRamp(dim, base, a); ok {
		for i, r := range ramp {
			smooth := 1 - r
			inv[i] = inv[i]/factor*(1-smooth) + inv[i]*smooth
		}
	}
	return inv
}

// Inverse32 is precompute_freqs_cis's frequency vector as DeepSeek-V4.1's
// reference computes it, in float32: 1/base^(2i/dim) (correctly rounded, as torch's
// float32 pow and reciprocal give for these exponents), then YaRN's blend
// freqs/factor·(1-smooth) + freqs·smooth in float32.
func Inverse32(dim int, base float32, a ir.Attrs) []float32 {
	inv := make([]float32, dim/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(float64(base), float64(2*i)/float64(dim)))
	}
	if ramp, factor, ok := YarnRamp(dim, float64(base), a); ok {
		f32 := float32(factor)
		for i, r := range ramp {
			smooth := 1 - float32(r)
			inv[i] = inv[i]/f32*(1-smooth) + inv[i]*smooth
		}
	}
	return inv
}

func intAttr(a ir.Attrs, k string) int { v, _ := a.Int(k); return int(v) }
