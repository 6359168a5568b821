package cpu

import (
	"math"

	"deepinfer/ir"
)

// Manifold-constrained hyper-connections (MODEL.md §1, "Residual: mHC"). The mixes are
// small per-token products, computed in float64 so the Sinkhorn projection is stable.

func newHCInit(args, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	n := attrInt(at, "mult")
	d := int(args[0].Last())
	return kfunc(func(s *Step, a, r []Tensor) error {
		x, y := a[0].F32, r[0].F32
		for t := 0; t < a[0].Rows(); t++ {
			for j := 0; j < n; j++ {
				copy(y[(t*n+j)*d:(t*n+j+1)*d], x[t*d:(t+1)*d])
			}
		}
		return nil
	}), nil
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// mixRow computes fn·(x / rms(x)) for one token's flattened streams into out (len rows).
func mixRow(fn []float32, x []float32, normEps float64, out []float64) {
	k := len(x)
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	inv := 1 / math.Sqrt(ss/float64(k)+normEps)
	for r := range out {
		w := fn[r*k : (r+1)*k]
		var acc float64
		for i, v := range x {
			acc += float64(w[i]) * float64(v)
		}
		out[r] = acc * inv
	}
}

func newHCMix(args, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	normEps, eps, iters := attrFloat(at, "norm_eps"), attrFloat(at, "eps"), attrInt(at, "iters")
	m := (2 + n) * n
	return kfunc(func(s *Step, a, r []Tensor) error {
		streams, fn, base, scale := a[0].F32, a[1].F32, a[2].F32, a[3].F32
		pre, post, comb := r[0].F32, r[1].F32, r[2].F32
		parallelFor(a[0].Rows(), m*n*d, func(lo, hi int) {
			mix := make([]float64, m)
			c := make([]float64, n*n)
			for t := lo; t < hi; t++ {
				mixRow(fn, streams[t*n*d:(t+1)*n*d], normEps, mix)
				for j := 0; j < n; j++ {
					pre[t*n+j] = float32(sigmoid(mix[j]*float64(scale[0])+float64(base[j])) + eps)
					post[t*n+j] = float32(2 * sigmoid(mix[n+j]*float64(scale[1])+float64(base[n+j])))
				}
				// comb = softmax over the last axis (+eps), then Sinkhorn: a column
				// normalization, then iters-1 rounds of row and column normalization.
				for i := 0; i < n; i++ {
					row := c[i*n : (i+1)*n]
					mx := math.Inf(-1)
					for j := range row {
						row[j] = mix[2*n+i*n+j]*float64(scale[2]) + float64(base[2*n+i*n+j])
						mx = max(mx, row[j])
					}
					var sum float64
					for j := range row {
						row[j] = math.Exp(row[j] - mx)
						sum += row[j]
					}
					for j := range row {
						row[j] = row[j]/sum + eps
					}
				}
				normCols(c, n, eps)
				for it := 1; it < iters; it++ {
					normRows(c, n, eps)
					normCols(c, n, eps)
				}
				for i, v := range c {
					comb[t*n*n+i] = float32(v)
				}
			}
		})
		return nil
	}), nil
}

func normCols(c []float64, n int, eps float64) {
	for j := 0; j < n; j++ {
		var s float64
		for i := 0; i < n; i++ {
			s += c[i*n+j]
		}
		for i := 0; i < n; i++ {
			c[i*n+j] /= s + eps
		}
	}
}

func normRows(c []float64, n int, eps float64) {
	for i := 0; i < n; i++ {
		var s float64
		for j := 0; j < n; j++ {
			s += c[i*n+j]
		}
		for j := 0; j < n; j++ {
			c[i*n+j] /= s + eps
		}
	}
}

// collapse writes Σ_j w_j·stream_j.
func collapse(streams []float32, w []float32, out []float32) {
	d := len(out)
	for i := range out {
		out[i] = 0
	}
	for j, wj := range w {
		st := streams[j*d : (j+1)*d]
		for i := range out {
			out[i] += wj * st[i]
		}
	}
}

func newHCCollapse(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	return kfunc(func(s *Step, a, r []Tensor) error {
		for t := 0; t < a[0].Rows(); t++ {
			collapse(a[0].F32[t*n*d:(t+1)*n*d], a[1].F32[t*n:(t+1)*n], r[0].F32[t*d:(t+1)*d])
		}
		return nil
	}), nil
}

// hc_expand: new_k = post_k·out + Σ_j comb[j,k]·stream_j (combᵀ applied to the streams).
func newHCExpand(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	return kfunc(func(s *Step, a, r []Tensor) error {
		streams, out, post, comb, y := a[0].F32, a[1].F32, a[2].F32, a[3].F32, r[0].F32
		for t := 0; t < a[0].Rows(); t++ {
			o := out[t*d : (t+1)*d]
			for k := 0; k < n; k++ {
				dst := y[(t*n+k)*d : (t*n+k+1)*d]
				pk := post[t*n+k]
				for i := range dst {
					dst[i] = pk * o[i]
				}
				for j := 0; j < n; j++ {
					c := comb[t*n*n+j*n+k]
					src := streams[(t*n+j)*d : (t*n+j+1)*d]
					for i := range dst {
						dst[i] += c * src[i]
					}
				}
			}
		}
		return nil
	}), nil
}

// hc_head: pre = sigmoid(fn·x/rms(x)·scale + base) + eps, then collapse.
func newHCHead(args, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	normEps, eps := attrFloat(at, "norm_eps"), attrFloat(at, "eps")
	return kfunc(func(s *Step, a, r []Tensor) error {
		streams, fn, base, scale := a[0].F32, a[1].F32, a[2].F32, a[3].F32
		mix := make([]float64, n)
		w := make([]float32, n)
		for t := 0; t < a[0].Rows(); t++ {
			x := streams[t*n*d : (t+1)*n*d]
			mixRow(fn, x, normEps, mix)
			for j := range w {
				w[j] = float32(sigmoid(mix[j]*float64(scale[0])+float64(base[j])) + eps)
			}
			collapse(x, w, r[0].F32[t*d:(t+1)*d])
		}
		return nil
	}), nil
}
