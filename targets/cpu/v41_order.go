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
// MKL's sgemm sums them for F.linear on the reference's machine (16 threads, AVX-512;
// every product fused into its sum). MKL picks a kernel and a thread split by shape;
// these are the ones measured (mklOrder):
//
//	gemv        m = 1 with N ≥ 8: the first product starts lane 0, then 16 lanes over
//	            k = 1.., the lanes reduced by halving (i, i+8, i+4, …), then the
//	            leftover (K-1) % 16 products as a second vector whose lane 0 starts from
//	            that sum, reduced the same way;
//	small       m ≤ smallRows(K, N): 4 accumulators × 4 lanes (lane k%4, accumulator
//	            (k/4)%4), accumulators summed in order per lane, lanes as (l0+l1)+(l2+l3);
//	split       17 ≤ m ≤ 128, N < 32 and m·N·K ≥ 294,912 (the work above which MKL
//	            splits the sum over threads): K in P chunks summed from zero, P = 4 for
//	            K ≥ 1024 and 2 below; with 4 chunks the rows go to 2 (m ≤ 64) or 4 groups
//	            in runs of ⌈m/groups⌉, each group's rows to four quarters (larger first),
//	            and the chunks combine as ((c0+c1)+c2)+c3 in a group's first two
//	            quarters, ((c0+c2)+c1)+c3 in its third and ((c0+c3)+c1)+c2 in its fourth;
//	sequential  otherwise: one running sum over k.
//
// Measured against torch 2.11 / MKL 2024.2 (TestProbeM, testdata/v41/probe_m.json,
// made by tools/v41/probe_gemm.py on that machine): exact for every shape probed — the
// mHC mixes (K, N) = (1024, 24) and (384, 8), the ratio-2 compressors (256, 64) and
// (192, 64), the routers (192, 5), the heads (256, 512) and (192, 448) — at every m
// probed (1–130) except (1024, 24) at m = 16 and m > 128, which use kernels this does
// not reproduce. Other shapes follow the same rules unmeasured; docs/v41.md says so.
func fp32Linear(m, K, N int, x, w, y []float32) {
	kind := mklOrder(m, K, N)
	for r := 0; r < m; r++ {
		xr := x[r*K : (r+1)*K]
		var order [4]int
		if kind == orderSplit4 {
			order = chunkOrder(m, r)
		}
		for n := 0; n < N; n++ {
			wn := w[n*K : (n+1)*K]
			var v float32
			switch kind {
			case orderGEMV:
				v = dotGEMV(xr, wn)
			case orderSmall:
				v = dotSmall(xr, wn)
			case orderSplit4:
				v = dotSplitK(xr, wn, order)
			case orderSplit2:
				h := K / 2
				v = dotSeq(xr[:h], wn[:h]) + dotSeq(xr[h:], wn[h:])
			default:
				v = dotSeq(xr, wn)
			}
			y[r*N+n] = v
		}
	}
}

const (
	orderSeq = iota
	orderGEMV
	orderSmall
	orderSplit2
	orderSplit4
)

// mklOrder is the summation order fp32Linear uses for an m-row product of shape (K, N).
func mklOrder(m, K, N int) int {
	switch {
	case m == 1 && N >= 8:
		return orderGEMV
	case m <= smallRows(K, N):
		return orderSmall
	case m >= 17 && m <= 128 && N < 32 && m*N*K >= 294912:
		if K >= 1024 && K%4 == 0 {
			return orderSplit4
		}
		if K%2 == 0 {
			return orderSplit2
		}
	}
	return orderSeq
}

// smallRows is the largest m MKL gives its small-matrix kernel: ⌊K/24⌋ up to 15, but 3
// for the (192, 448) head (measured; wide outputs leave it sooner).
func smallRows(K, N int) int {
	if N >= 448 && K < 256 {
		return 3
	}
	return min(15, K/24)
}

func dotSeq(x, w []float32) float32 {
	var v float32
	for k := range x {
		v = fma32(x[k], w[k], v)
	}
	return v
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
	// the rows go to the groups in runs of ⌈m/groups⌉ (the last run shorter), each
	// group's rows to four quarters as evenly as possible, larger ones first
	per := (m + groups - 1) / groups
	off, size := r%per, min(per, m-r/per*per)
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
