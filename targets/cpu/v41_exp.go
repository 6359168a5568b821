package cpu

import (
	"math"
)

// The reference runs its fp32 elementwise math through ATen's CPU kernels. torch.exp
// goes to MKL's VML, which rounds correctly for all that the fixture shows (expScalar
// reproduces it), but torch.sigmoid is ATen's own: a contiguous tensor's first
// n − n mod 32 elements through Vectorized<float> (SLEEF's 1-ulp expf, then fp32
// arithmetic), the tail through the scalar expression (glibc's expf). The paths differ
// from a correctly rounded sigmoid by an ulp now and then, which is enough to move a
// bf16 rounding downstream (tiny-v41-dev's greedy prompt has such a case in layer 0's
// hc post-mix); these helpers reproduce each path.

// vecTail is where ATen's vectorized loop over n contiguous elements hands over to the
// scalar loop (it steps two 16-lane vectors at a time).
func vecTail(n int) int { return n - n%32 }

// expSleef is SLEEF's xexpf (the u10 variant) with FMA, as Vectorized<float>::exp
// computes each lane: a Cody–Waite reduction by ln 2, a degree-6 polynomial, and a
// scaling by 2^q done as two multiplications.
func expSleef(d float32) float32 {
	const (
		rln2 = float32(1.442695040888963407359924681001892137426645954152985934135449406931)
		l2u  = float32(0.693145751953125)
		l2l  = float32(1.428606765330187045e-06)
	)
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
	u = u * pow2f(h) * pow2f(q-h)
	if d < -104 {
		u = 0
	}
	if d > 100 {
		u = float32(math.Inf(1))
	}
	return u
}

// pow2f is 2^e built from exponent bits, as SLEEF's vpow2i does (no range checks).
func pow2f(e int32) float32 { return math.Float32frombits(uint32(e+0x7f) << 23) }

// expScalar is glibc's expf, to within its own rare misroundings: the exact value
// rounded to fp32.
func expScalar(x float32) float32 { return float32(math.Exp(float64(x))) }

// sigmoidVec and sigmoidScalar are ATen's sigmoid on the two paths:
// 1/(1 + exp(-x)), every step rounded to fp32.
func sigmoidVec(x float32) float32    { return 1 / (expSleef(0-x) + 1) }
func sigmoidScalar(x float32) float32 { return 1 / (1 + expScalar(-x)) }

// sigmoidAt is element i of a sigmoid over n contiguous elements.
func sigmoidAt(x float32, i, n int) float32 {

	if i < vecTail(n) {
		return sigmoidVec(x)
	}
	return sigmoidScalar(x)
}

// seqRows gives, for each of a step's n rows, the first row of its sequence and that
// sequence's row count — so that an elementwise op's vector/tail split follows each
// sequence alone, as the reference (one sequence per call) has it, or each row alone in
// row-order mode (Seq.RowOrders). Rows that are not
// the step's tokens (n ≠ T) count as one sequence.
func seqRows(s *Step, n int) (first, rows []int) {
	first, rows = make([]int, n), make([]int, n)
	total := 0
	for _, q := range s.Seqs {
		total += q.N
	}
	if total != n {
		for i := range rows {
			rows[i] = n
		}
		return first, rows
	}
	for _, q := range s.Seqs {
		for i := q.Row; i < q.Row+q.N; i++ {
			first[i], rows[i] = q.Row, q.N
			if q.RowOrders { // each row as in a one-row step
				first[i], rows[i] = i, 1
			}
		}
	}
	return first, rows
}
