package cpu

import (
	"math"

	"deepinfer/ir"
)

// The single-pass mHC of V4.1 in the reference's fp32 order (v41_order.go says why the
// order matters): Block.hc_mixes, hc_split_sinkhorn, hc_post, and RMSNorm.

func isV41(a ir.Attrs) bool { n, _ := a.Str("numerics"); return n == "v41" }

func newHCMixAny(args, res []ir.Type, a ir.Attrs) (Kernel, error) {
	if !isV41(a) {
		return newHCMix(args, res, a)
	}
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	normEps, eps := float32(attrFloat(a, "norm_eps")), float32(attrFloat(a, "eps"))
	iters, keep := attrInt(a, "iters"), attrInt(a, "keep")
	m := (2 + n) * n
	var mixes, sq []float32
	return kfunc(func(s *Step, in, r []Tensor) error {
		streams, fn, base, scale := in[0].F32, in[1].F32, in[2].F32, in[3].F32
		pre, post, comb := r[0].F32, r[1].F32, r[2].F32
		T := in[0].Rows()
		K := n * d
		mixes = grow(mixes, T*m)
		sq = grow(sq, K)
		for _, v := range views(s, keep) {
			// mixes = F.linear(x, hc_fn) for this sequence's rows, in MKL's order for its m
			v.linearRows(K, m, streams[v.row*K:(v.row+v.n)*K], fn, mixes[v.row*m:(v.row+v.n)*m])
		}
		for _, v := range views(s, keep) {
			rows := v.orderRows() // the sigmoid's vector/tail split follows them
			for t := v.row; t < v.row+v.n; t++ {
				mixRow41(streams[t*K:(t+1)*K], mixes[t*m:(t+1)*m], sq, normEps, scale, base, n, iters, eps,
					pre[t*n:(t+1)*n], post[t*n:(t+1)*n], comb[t*n*n:(t+1)*n*n], (t-v.row)%rows*n < vecTail(rows*n))
			}
		}
		return nil
	}), nil
}

// mixRow41 finishes one row of hc_mixes: the RMS scaling of its mixes, then the split.
// vec says whether ATen computes this row's sigmoids on its vector path.
func mixRow41(x, mx, sq []float32, normEps float32, scale, base []float32, n, iters int, eps float32, pre, post, comb []float32, vec bool) {
	sq = sq[:len(x)]
	for i, xv := range x {
		sq[i] = xv * xv
	}
	mean := cascadeSum(sq) / float32(len(x))
	rs := 1 / float32(math.Sqrt(float64(mean+normEps)))
	for i := range mx {
		mx[i] *= rs
	}
	splitSinkhorn(mx, scale, base, n, iters, eps, pre, post, comb, vec)
}

// splitSinkhorn is hc_split_sinkhorn in fp32: pre = σ(m·s0 + b) + eps,
// post = 2σ(m·s1 + b), comb = row softmax + eps, a column normalization, then iters-1
// rounds of row and column normalization.
func splitSinkhorn(mx, scale, base []float32, n, iters int, eps float32, pre, post, comb []float32, vec bool) {
	sig := sigmoidScalar
	if vec {
		sig = sigmoidVec
	}
	for j := 0; j < n; j++ {
		pre[j] = sig(mx[j]*scale[0]+base[j]) + eps
		post[j] = 2 * sig(mx[n+j]*scale[1]+base[n+j])
	}
	c := comb
	for i := 0; i < n; i++ {
		row := c[i*n : (i+1)*n]
		mxv := float32(math.Inf(-1))
		for j := range row {
			row[j] = mx[2*n+i*n+j]*scale[2] + base[2*n+i*n+j]
			mxv = max(mxv, row[j])
		}
		var sum float32
		for j := range row {
			row[j] = expScalar(row[j] - mxv) // torch.exp: MKL VML
			sum += row[j]
		}
		for j := range row {
			row[j] = row[j]/sum + eps
		}
	}
	cols := func() {
		for j := 0; j < n; j++ {
			var s float32
			for i := 0; i < n; i++ {
				s += c[i*n+j]
			}
			for i := 0; i < n; i++ {
				c[i*n+j] /= s + eps
			}
		}
	}
	rows := func() {
		for i := 0; i < n; i++ {
			var s float32
			for j := 0; j < n; j++ {
				s += c[i*n+j]
			}
			for j := 0; j < n; j++ {
				c[i*n+j] /= s + eps
			}
		}
	}
	cols()
	for it := 1; it < iters; it++ {
		rows()
		cols()
	}
}

func newHCExpandAny(args, res []ir.Type, a ir.Attrs) (Kernel, error) {
	if !isV41(a) {
		return newHCExpand(args, res, a)
	}
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	return kfunc(func(s *Step, in, r []Tensor) error {
		streams, out, post, comb, y := in[0].F32, in[1].F32, in[2].F32, in[3].F32, r[0].F32
		for t := 0; t < in[0].Rows(); t++ {
			o := out[t*d : (t+1)*d]
			for k := 0; k < n; k++ {
				dst := y[(t*n+k)*d : (t*n+k+1)*d]
				pk := post[t*n+k]
				for i := range dst {
					var sum float32
					for j := 0; j < n; j++ {
						sum += comb[t*n*n+j*n+k] * streams[(t*n+j)*d+i]
					}
					dst[i] = pk*o[i] + sum
				}
			}
		}
		return nil
	}), nil
}

func newRMSNormAny(args, res []ir.Type, a ir.Attrs) (Kernel, error) {
	if !isV41(a) {
		return newRMSNorm(args, res, a)
	}
	g := int(args[0].Last())
	if v, ok := a.Int("group"); ok {
		g = int(v)
	}
	eps := float32(attrFloat(a, "eps"))
	weighted := len(args) == 2
	var sq []float32
	return kfunc(func(s *Step, in, r []Tensor) error {
		x, y := in[0].F32, r[0].F32
		sq = grow(sq, g)
		for c := 0; c+g <= len(x); c += g {
			for i, v := range x[c : c+g] {
				sq[i] = v * v
			}
			rs := 1 / float32(math.Sqrt(float64(cascadeSum(sq)/float32(g)+eps)))
			for i := 0; i < g; i++ {
				v := x[c+i] * rs
				if weighted {
					v *= in[1].F32[i]
				}
				y[c+i] = v
			}
		}
		return nil
	}), nil
}
