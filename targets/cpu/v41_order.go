package cpu

import "math"

// Reproducing the V4.1 fixture's fp32 summation orders.
//
// DeepSeek's V4.1 reference rounds its residual streams to bf16 after every mHC mix, and
// quantizes every GEMM input to FP8 (and the compressed KV to FP4). Those roundings are
// discontinuous, and the mHC coefficients (pre/post/comb) come from a 4·D-long fp32 dot
// product whose rounding error (~1e-6, with cancellation) is enough to flip a few bf16
// roundings per layer — which the FP8/FP4 quantizers downstream then turn into
// percent-level differences: measured on the reference itself, computing those mixes in
// float64 moves its decode logits by up to 40%. Matching the fixture therefore needs the
// reference's fp32 results bit for bit where they feed a rounding. The reference ran on
// CPU PyTorch (MKL sgemm, AVX-512; reductions in ATen's AVX2 kernels); the orders below
// were measured on that software stack with exact-arithmetic probes (x = 2^25, -2^25 and
// 1 at three positions reveal which terms a sum combines first) and then checked bit for
// bit on random data. They are what this target uses for the mHC mixes, RMSNorm and the
// Engram gate statistics; elsewhere a float32 or float64 sum is as good, because the
// result is rounded to bf16 (or an FP8 group scale) with margin to spare.

// cascadeSum is ATen's vectorized inner sum of a contiguous fp32 row (SumKernel.cpp's
// vectorized_inner_sum over 8-lane AVX2 vectors: row_sum with 4 interleaved vector
// accumulators, each a 4-level cascade, then the leftover scalars and the lanes).
func cascadeSum(x []float32) float32 {
	const lanes, ilp, levels = 8, 4, 4
	n := len(x)
	nvec := n / lanes
	sizeILP := nvec / ilp
	power := 4
	if sizeILP > 1 {
		power = max(4, ceilLog2(sizeILP)/levels)
	}
	step := 1 << power
	mask := step - 1
	var acc [levels][ilp][lanes]float32
	vec := func(i int) []float32 { return x[i*lanes : (i+1)*lanes] }
	add := func(dst *[lanes]float32, src []float32) {
		for l := range dst {
			dst[l] += src[l]
		}
	}
	i := 0
	for i+step <= sizeILP {
		for j := 0; j < step; j++ {
			for k := 0; k < ilp; k++ {
				add(&acc[0][k], vec(i*ilp+k))
			}
			i++
		}
		for j := 1; j < levels; j++ {
			for k := 0; k < ilp; k++ {
				add(&acc[j][k], acc[j-1][k][:])
				acc[j-1][k] = [lanes]float32{}
			}
			if i&(mask<<(j*power)) != 0 {
				break
			}
		}
	}
	for ; i < sizeILP; i++ {
		for k := 0; k < ilp; k++ {
			add(&acc[0][k], vec(i*ilp+k))
		}
	}
	for j := 1; j < levels; j++ {
		for k := 0; k < ilp; k++ {
			add(&acc[0][k], acc[j][k][:])
		}
	}
	ps := acc[0]
	for t := sizeILP * ilp; t < nvec; t++ {
		add(&ps[0], vec(t))
	}
	for k := 1; k < ilp; k++ {
		add(&ps[0], ps[k][:])
	}
	var final float32
	for t := nvec * lanes; t < n; t++ {
		final += x[t]
	}
	for l := 0; l < lanes; l++ {
		final += ps[0][l]
	}
	return final
}

func ceilLog2(n int) int {
	l := 0
	for 1<<l < n {
		l++
	}
	return l
}

// fma32 is a float32 fused multiply-add (one rounding, to within a double rounding
// that practically never differs).
func fma32(a, b, c float32) float32 { return float32(math.FMA(float64(a), float64(b), float64(c))) }

// fp32Linear computes y[m,n] = x[m,K]·w[n,K]ᵀ for one sequence's m rows in the order
// MKL's sgemm sums them for F.linear on that stack (all with FMA):
//
//	m = 1       GEMV: the first product starts lane 0, then 16 lanes over k = 1.., the
//	            lanes reduced by halving (i, i+8, i+4, …), then the leftover (K-1) % 16
//	            products as a second vector whose lane 0 starts from that sum, reduced the
//	            same way;
//	2 ≤ m ≤ 15  4 accumulators × 4 lanes (lane k%4, accumulator (k/4)%4), accumulators
//	            summed in order per lane, lanes as (l0+l1)+(l2+l3);
//	17 ≤ m ≤ 128 K split in 4 quarter chunks summed from zero; rows split into 2 (m ≤ 64)
//	            or 4 groups and each group into 4 quarters (larger ones first); the
//	            chunks combine as ((c0+c1)+c2)+c3 in a group's first two quarters,
//	            ((c0+c2)+c1)+c3 in its third and ((c0+c3)+c1)+c2 in its fourth;
//	otherwise   sequential (m = 16 and m > 128 use kernels this does not reproduce).
//
// Measured against torch 2.11 / MKL on the fixture's machine type (TestProbeM,
// tools/v41/probe_gemm.py): exact for the mHC mixes' shape (K = 4·hidden, 24 outputs)
// at every m from 1 to 128 except 16, 65, 66 and 69; for K = 256 with 64 or 512
// outputs only up to m = 10. The V4.1 lowering uses it for the mixes alone, so prompts
// of those lengths (and past 128 tokens) see fp32-order differences there.
func fp32Linear(m, K, N int, x, w, y []float32) {
	for r := 0; r < m; r++ {
		xr := x[r*K : (r+1)*K]
		for n := 0; n < N; n++ {
			wn := w[n*K : (n+1)*K]
			var v float32
			switch {
			case m == 1:
				v = dotGEMV(xr, wn)
			case m <= 15:
				v = dotSmall(xr, wn)
			case m >= 17 && m <= 128 && K%4 == 0:
				v = dotSplitK(xr, wn, chunkOrder(m, r))
			default:
				for k := range xr {
					v = fma32(xr[k], wn[k], v)
				}
			}
			y[r*N+n] = v
		}
	}
}

func halving(v []float32) float32 {
	for len(v) > 1 {
		h := len(v) / 2
		for i := 0; i < h; i++ {
			v[i] += v[i+h]
		}
		v = v[:h]
	}
	return v[0]
}

func dotGEMV(x, w []float32) float32 {
	K := len(x)
	var lanes [16]float32
	lanes[0] = x[0] * w[0]
	nvec := (K - 1) / 16
	for t := 0; t < nvec; t++ {
		for l := 0; l < 16; l++ {
			k := 1 + 16*t + l
			lanes[l] = fma32(x[k], w[k], lanes[l])
		}
	}
	s := halving(lanes[:])
	if 1+16*nvec == K {
		return s
	}
	var tail [16]float32
	tail[0] = s
	for k := 1 + 16*nvec; k < K; k++ {
		l := k - (1 + 16*nvec)
		tail[l] = fma32(x[k], w[k], tail[l])
	}
	return halving(tail[:])
}

func dotSmall(x, w []float32) float32 {
	var acc [4][4]float32
	for k := range x {
		u, l := (k/4)%4, k%4
		acc[u][l] = fma32(x[k], w[k], acc[u][l])
	}
	var v [4]float32
	for l := 0; l < 4; l++ {
		s := acc[0][l]
		for u := 1; u < 4; u++ {
			s += acc[u][l]
		}
		v[l] = s
	}
	return (v[0] + v[1]) + (v[2] + v[3])
}

// chunkOrder is the order row r of an m-row product combines its four K chunks in.
func chunkOrder(m, r int) [4]int {
	groups := 2
	if m > 64 {
		groups = 4
	}
	_, off, size := piece(m, groups, r)
	q, _, _ := piece(size, 4, off)
	switch q {
	case 2:
		return [4]int{0, 2, 1, 3}
	case 3:
		return [4]int{0, 3, 1, 2}
	}
	return [4]int{0, 1, 2, 3}
}

// piece cuts n into parts pieces as evenly as possible, larger ones first, and says
// which piece index i falls in, its offset there and the piece's size.
func piece(n, parts, i int) (idx, off, size int) {
	base, extra := n/parts, n%parts
	start := 0
	for p := 0; p < parts; p++ {
		size = base
		if p < extra {
			size++
		}
		if i < start+size {
			return p, i - start, size
		}
		start += size
	}
	return parts - 1, 0, base
}

func dotSplitK(x, w []float32, order [4]int) float32 {
	c := len(x) / 4
	var part [4]float32
	for p := 0; p < 4; p++ {
		var s float32
		for k := p * c; k < (p+1)*c; k++ {
			s = fma32(x[k], w[k], s)
		}
		part[p] = s
	}
	v := part[order[0]]
	for _, p := range order[1:] {
		v += part[p]
	}
	return v
}
