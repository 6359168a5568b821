package cpu

import (
	"fmt"
	"math"
	"runtime"
	"sync"

	"gonum.org/v1/gonum/blas/blas32"

	"deepinfer/ir"
	"deepinfer/vm/sampling"
)

// kfunc adapts a function to Kernel.
type kfunc func(s *Step, args, res []Tensor) error

func (f kfunc) Run(s *Step, args, res []Tensor) error { return f(s, args, res) }

// parallelFor splits [0,n) over the cores when the work is worth it. work is the
// approximate cost of one index in multiply-adds.
func parallelFor(n int, work int, fn func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	if p > n {
		p = n
	}
	if p <= 1 || n*work < 1<<15 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + p - 1) / p
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(lo, hi)
		}()
	}
	wg.Wait()
}

// errOnce keeps the first error reported by parallel workers.
type errOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errOnce) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *errOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// gemmNT computes c[m,n] = a[m,k]·b[n,k]ᵀ with row strides lda, ldb, ldc. Every
// output is summed in one order whatever m and n are, so a row's result does not
// depend on the rows beside it (batch invariance): the reduction in blocks of
// gemmBlock, each a vectorized dot product (gonum's), added in order from zero — the
// order gonum's own parallel sgemm uses, which it would switch for a single running
// dot product on small shapes.
func gemmNT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	row := func(i int, lo, hi int) {
		ai := a[i*lda : i*lda+k]
		for j := lo; j < hi; j++ {
			bj := b[j*ldb : j*ldb+k]
			var s float32
			for l := 0; l < k; l += gemmBlock {
				e := min(l+gemmBlock, k)
				s += blas32.Dot(blas32.Vector{N: e - l, Inc: 1, Data: ai[l:e]}, blas32.Vector{N: e - l, Inc: 1, Data: bj[l:e]})
			}
			c[i*ldc+j] = s
		}
	}
	if m == 1 {
		parallelFor(n, k, func(lo, hi int) { row(0, lo, hi) })
		return
	}
	parallelFor(m, n*k, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			row(i, 0, n)
		}
	})
}

// gemmBlock is gemmNT's reduction block (gonum's sgemm block size).
const gemmBlock = 64

func newLinear(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	out, in := int(args[1].Shape[0].N), int(args[1].Shape[1].N)
	return kfunc(func(s *Step, a, r []Tensor) error {
		gemmNT(a[0].Rows(), out, in, a[0].F32, in, a[1].F32, in, r[0].F32, out)
		return nil
	}), nil
}

func newGroupedLinear(args, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	g := attrInt(at, "groups")
	rowsW, in := int(args[1].Shape[0].N), int(args[1].Shape[1].N)
	out := rowsW / g
	if isV41(at) {
		keep := attrInt(at, "keep")
		return kfunc(func(s *Step, a, r []Tensor) error {
			for _, v := range views(s, keep) {
				v.bf16Rows(g, in, out, a[0].F32, a[1].F32, r[0].F32)
			}
			return nil
		}), nil
	}
	return kfunc(func(s *Step, a, r []Tensor) error {
		t := a[0].Rows()
		for j := 0; j < g; j++ {
			gemmNT(t, out, in, a[0].F32[j*in:], g*in, a[1].F32[j*out*in:], in, r[0].F32[j*out:], g*out)
		}
		return nil
	}), nil
}

func newEmbed(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	v, d := int(args[1].Shape[0].N), int(args[1].Shape[1].N)
	return kfunc(func(s *Step, a, r []Tensor) error {
		for i, tok := range a[0].I32 {
			if tok < 0 || int(tok) >= v {
				return fmt.Errorf("token id %d at row %d is outside the vocabulary [0,%d)", tok, i, v)
			}
			copy(r[0].F32[i*d:(i+1)*d], a[1].F32[int(tok)*d:(int(tok)+1)*d])
		}
		return nil
	}), nil
}

func newLMHead(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	v, d := int(args[2].Shape[0].N), int(args[2].Shape[1].N)
	var gathered []float32
	return kfunc(func(s *Step, a, r []Tensor) error {
		rows := a[1].I32
		if cap(gathered) < len(rows)*d {
			gathered = make([]float32, len(rows)*d)
		}
		g := gathered[:len(rows)*d]
		t := a[0].Rows()
		for i, row := range rows {
			if row < 0 || int(row) >= t {
				return fmt.Errorf("logit row %d is outside the step's %d rows", row, t)
			}
			copy(g[i*d:(i+1)*d], a[0].F32[int(row)*d:(int(row)+1)*d])
		}
		gemmNT(len(rows), v, d, g, d, a[2].F32, d, r[0].F32, v)
		return nil
	}), nil
}

// rmsnorm: y = x / sqrt(mean(x²) + eps) (· w), per chunk of `group` elements.
func newRMSNorm(args, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	g := int(args[0].Last())
	if v, ok := at.Int("group"); ok {
		g = int(v)
	}
	eps := attrFloat(at, "eps")
	weighted := len(args) == 2
	return kfunc(func(s *Step, a, r []Tensor) error {
		x, y := a[0].F32, r[0].F32
		var w []float32
		if weighted {
			w = a[1].F32
		}
		for c := 0; c+g <= len(x); c += g {
			var ss float64
			for _, v := range x[c : c+g] {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(g)+eps)
			if weighted {
				for i := 0; i < g; i++ {
					y[c+i] = float32(float64(x[c+i])*inv) * w[i]
				}
			} else {
				for i := 0; i < g; i++ {
					y[c+i] = float32(float64(x[c+i]) * inv)
				}
			}
		}
		return nil
	}), nil
}

func newAdd(_, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	return kfunc(func(s *Step, a, r []Tensor) error {
		x, y, z := a[0].F32, a[1].F32, r[0].F32
		for i := range z {
			z[i] = x[i] + y[i]
		}
		return nil
	}), nil
}

func silu(x float32) float32 { return x / (1 + float32(math.Exp(float64(-x)))) }

// swiglu is the clamped SwiGLU of MODEL.md §1: silu(min(gate, limit)) · clamp(up, ±limit).
func swiglu(g, u, out []float32, limit float32) {
	for i := range out {
		gv, uv := g[i], u[i]
		if limit > 0 {
			gv = min(gv, limit)
			uv = max(min(uv, limit), -limit)
		}
		out[i] = silu(gv) * uv
	}
}

func newSwiGLU(_, _ []ir.Type, at ir.Attrs) (Kernel, error) {
	limit := float32(attrFloat(at, "limit"))
	return kfunc(func(s *Step, a, r []Tensor) error {
		swiglu(a[0].F32, a[1].F32, r[0].F32, limit)
		return nil
	}), nil
}

// newSample draws one token per logits row (vm/sampling.Row, the VM's host sampler too).
func newSample(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	v := int(args[0].Last())
	cols := int(ir.MaskCols(int64(v)))
	return kfunc(func(s *Step, a, r []Tensor) error {
		logits, params, out := a[0].F32, a[1].F32, r[0].I32
		var mask []int32
		if len(a) == 3 {
			mask = a[2].I32
		}
		parallelFor(len(out), v, func(lo, hi int) {
			var sc sampling.Scratch
			for i := lo; i < hi; i++ {
				p := params[4*i : 4*i+4]
				var allowed func(int) bool
				if mask != nil && mask[i*cols] != 0 {
					words := mask[i*cols+1 : (i+1)*cols]
					allowed = func(id int) bool {
						w := uint32(words[2*(id>>6)+(id>>5&1)])
						return w>>(id&31)&1 != 0
					}
				}
				out[i] = int32(sampling.Row(logits[i*v:(i+1)*v], sampling.Params{Temperature: float64(p[0]),
					TopP: float64(p[1]), TopK: int(p[2]), U: float64(p[3])}, allowed, &sc))
			}
		})
		return nil
	}), nil
}

// bf16Matmul is a bf16 matmul of the V4.1 reference (F.linear on bf16 tensors, and
// torch.einsum("sgd,grd->sgr") for the grouped output projection) for one sequence's n
// rows from row0: y[t, j·out+o] = Σ_k x[t, j·in+k]·w[j·out+o, k] with fp32
// accumulation, g groups. Above 16³ multiply-adds PyTorch hands it to oneDNN, whose
// bf16 kernel on the reference's CPU accumulates each output over the reduction in
// blocks of 32 (one matrix-tile row: each block summed from zero in order, the block
// sums added in order); smaller ones use ATen's loop, one sequential sum. The product
// of two bf16 values is exact in fp32, so only the order of the additions matters.
// Measured on both tiny-v41 fixtures: a sequential or 4×4-blocked order misses one bf16
// rounding of the tiny-v41-dev2 decode trace's DSpark output projection (draft row 16,
// error 5e-3); the result is rounded to bf16 by the caller.
func bf16Matmul(row0, n, g, in, out int, x, w, y []float32) {
	blk := 32
	if g*n*in*out <= 16*16*16 {
		blk = in
	}
	for t := row0; t < row0+n; t++ {
		for j := 0; j < g; j++ {
			xr := x[t*g*in+j*in : t*g*in+(j+1)*in]
			for o := 0; o < out; o++ {
				wr := w[(j*out+o)*in : (j*out+o+1)*in]
				var tot float32
				for b := 0; b < in; b += blk {
					var p float32
					for k := b; k < min(b+blk, in); k++ {
						p += xr[k] * wr[k]
					}
					tot += p
				}
				y[t*g*out+j*out+o] = tot
			}
		}
	}
}
