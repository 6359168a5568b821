package cpu

import (
	"deepinfer/internal/sleef"
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

// expSleef is SLEEF's xexpf as Vectorized<float>::exp computes each lane (internal/sleef).
func expSleef(d float32) float32 { return sleef.Exp(d) }

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
