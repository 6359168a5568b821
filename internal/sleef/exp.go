// Package sleef holds SLEEF's single-precision exponential as the V4.1 reference's CPU
// build computes it (Vectorized<float>::exp), operation for operation, so that the cpu
// target, the VM's sampler and the CUDA kernels (kernels/numerics.h exp_sleef) round
// exactly alike.
package sleef

import "math"

// Exp is SLEEF's xexpf (the u10 variant) with FMA, as Vectorized<float>::exp computes
// each lane: a Cody–Waite reduction by ln 2, a degree-6 polynomial, and a scaling by 2^q
// done as two multiplications. Below -104 it is 0, above 100 +Inf.
func Exp(d float32) float32 {
	const (
		rln2 = float32(1.442695040888963407359924681001892137426645954152985934135449406931)
		l2u  = float32(0.693145751953125)
		l2l  = float32(1.428606765330187045e-06)
	)
	if d < -104 {
		return 0
	}
	if d > 100 {
		return float32(math.Inf(1))
	}
	q := int32(math.RoundToEven(float64(d * rln2)))
	qf := float32(q)
	s := fma32(qf, -l2u, d)
	s = fma32(qf, -l2l, s)
	u := float32(0.000198527617612853646278381)
	u = fma32(u, s, 0.00139304355252534151077271)
	u = fma32(u, s, 0.00833336077630519866943359)
	u = fma32(u, s, 0.0416664853692054748535156)
	u = fma32(u, s, 0.166666671633720397949219)
	u = fma32(u, s, 0.5)
	u = 1 + fma32(s*s, u, s)
	h := q >> 1
	return u * pow2f(h) * pow2f(q-h)
}

// fma32 is an exact float64 fused multiply-add rounded to float32 (a·b + c with one
// rounding to float64, then one to float32: exact, since the product of two float32
// values and their sum with a third fit in a float64 but for rare midpoints).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// pow2f is 2^e built from exponent bits, as SLEEF's vpow2i does (no range checks).
func pow2f(e int32) float32 { return math.Float32frombits(uint32(e+0x7f) << 23) }
