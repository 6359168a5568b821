package cpu

import (
	"fmt"
	"math"
	"slices"

	"deepinfer/ir"
	"deepinfer/quant"
	"deepinfer/targets/cpu/kvstate"
)

// DeepSeek-V4.1's numerics (MODEL.md §2, "Quantization"). The reference runs in bf16
// with FP8/FP4 weights: every GEMM input is a bf16 tensor quantized to MXFP8 (E4M3, a
// power-of-two scale per 32) when the weight is FP8 or FP4, products accumulate in
// fp32, and results land in bf16 again. These kernels keep float32 buffers holding
// exactly those rounded values: a dequantized FP8/FP4 weight is exact in float32, and
// so is a dequantized activation, so a float32 GEMM over them differs from the
// reference's tensor-core GEMM only in the order of the fp32 sums.

// seqView is one sequence's rows in a step, or in its SWA-replay tail when keep > 0.
type seqView struct {
	row, n, pos int // first row (in T, or K for a tail), rows, position of the first
	full        int // rows of the sequence in the step (n ≤ full)
	fromZero    bool
	decode      bool // every row is a decode row (Seq.Decode)
	rowOrders   bool // every row summed as in a one-row step (Seq.RowOrders)
	st          *kvstate.Seq
}

// orderRows is how many rows a product over the view's rows is summed as at once:
// each row alone in row-order mode, else all of them.
func (v *seqView) orderRows() int {
	if v.rowOrders {
		return 1
	}
	return v.n
}

// linearRows is fp32Linear over the view's rows (x and y start at its first row),
// in blocks of orderRows rows.
func (v *seqView) linearRows(K, N int, x, w, y []float32) {
	m := v.orderRows()
	for r := 0; r < v.n; r += m {
		fp32Linear(m, K, N, x[r*K:(r+m)*K], w, y[r*N:(r+m)*N])
	}
}

// bf16Rows is bf16Matmul over the view's rows, in blocks of orderRows rows.
func (v *seqView) bf16Rows(g, in, out int, x, w, y []float32) {
	m := v.orderRows()
	for r := 0; r < v.n; r += m {
		bf16Matmul(v.row+r, m, g, in, out, x, w, y)
	}
}

// views lists the step's sequences; keep > 0 restricts each to its last keep rows. A
// view is fromZero when it is a whole prefill starting at position 0 (the reference's
// start_pos == 0 path, whose index lists this target reproduces exactly) — never in
// batch-invariant mode, where a prompt is computed the same whether it comes whole or
// in chunks.
func views(s *Step, keep int) []seqView {
	out := make([]seqView, len(s.Seqs))
	row := 0
	for i, q := range s.Seqs {
		n := q.N
		if keep > 0 && n > keep {
			n = keep
		}
		out[i] = seqView{row: row, n: n, pos: q.Pos + q.N - n, full: q.N, fromZero: q.Pos == 0 && n == q.N && !q.Invariant, decode: q.Decode, rowOrders: q.RowOrders, st: q.State}
		if keep <= 0 {
			out[i].row = q.Row
		}
		row += n
	}
	return out
}

func newFakeQuant(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	format, _ := a.Str("format")
	g := attrInt(a, "group")
	last := int(args[0].Last())
	var f quant.Format
	if format != "bf16" {
		var ok bool
		if f, ok = quant.ParseFormat(format); !ok {
			return nil, fmt.Errorf("fake_quant: unknown format %q", format)
		}
	}
	return kfunc(func(s *Step, in, r []Tensor) error {
		x, y := in[0].F32, r[0].F32
		copy(y, x)
		if f == 0 {
			quant.BF16Slice(y)
			return nil
		}
		for c := 0; c+last <= len(y); c += last {
			f.FakeQuant(y[c:c+last], g)
		}
		return nil
	}), nil
}

// quantizeActs writes bf16(x) (act "bf16"), or its MXFP8 value in groups of block
// (act "mxfp8"), into dst; rows of width in.
func quantizeActs(act string, block, in int, x, dst []float32) {
	copy(dst, x)
	if act == "f32" {
		return
	}
	quant.BF16Slice(dst)
	if act == "mxfp8" {
		for c := 0; c+in <= len(dst); c += in {
			quant.MXFP8.FakeQuant(dst[c:c+in], block)
		}
	}
}

func newQLinear(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	out, in := int(args[1].Shape[0].N), int(args[1].Shape[1].N)
	act, _ := a.Str("act")
	o, _ := a.Str("out")
	block := attrInt(a, "block")
	keep := attrInt(a, "keep")
	var xq []float32
	return kfunc(func(s *Step, x, r []Tensor) error {
		t := x[0].Rows()
		xq = grow(xq, t*in)
		quantizeActs(act, block, in, x[0].F32, xq)
		y := r[0].F32
		if act == "f32" {
			for _, v := range views(s, keep) {
				v.linearRows(in, out, xq[v.row*in:(v.row+v.n)*in], x[1].F32, y[v.row*out:(v.row+v.n)*out])
			}
		} else if act == "bf16" {
			for _, v := range views(s, keep) {
				v.bf16Rows(1, in, out, xq, x[1].F32, y)
			}
		} else {
			gemmRows(t, out, in, xq, x[1].F32, y)
		}
		if o == "bf16" {
			quant.BF16Slice(y)
		}
		return nil
	}), nil
}

// gemmRows computes y[t,out] = x[t,in]·W[out,in]ᵀ, splitting the rows over cores.
func gemmRows(t, out, in int, x, w, y []float32) {
	parallelFor(t, out*in, func(lo, hi int) {
		gemmNT(hi-lo, out, in, x[lo*in:], in, w, in, y[lo*out:], out)
	})
}

func newHCSelect(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	j := attrInt(a, "index")
	return kfunc(func(s *Step, in, r []Tensor) error {
		for t := 0; t < in[0].Rows(); t++ {
			copy(r[0].F32[t*d:(t+1)*d], in[0].F32[(t*n+j)*d:(t*n+j+1)*d])
		}
		return nil
	}), nil
}

func newHCMean(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	return kfunc(func(s *Step, in, r []Tensor) error {
		x, y := in[0].F32, r[0].F32
		for t := 0; t < in[0].Rows(); t++ {
			for i := 0; i < d; i++ {
				var sum float32
				for j := 0; j < n; j++ {
					sum += x[(t*n+j)*d+i]
				}
				y[t*d+i] = quant.BF16(sum / float32(n))
			}
		}
		return nil
	}), nil
}

func newConcat(args, _ []ir.Type, _ ir.Attrs) (Kernel, error) {
	widths := make([]int, len(args))
	total := 0
	for i, t := range args {
		widths[i] = int(t.Last())
		total += widths[i]
	}
	return kfunc(func(s *Step, in, r []Tensor) error {
		y := r[0].F32
		for t := 0; t < r[0].Rows(); t++ {
			off := t * total
			for i, w := range widths {
				copy(y[off:off+w], in[i].F32[t*w:(t+1)*w])
				off += w
			}
		}
		return nil
	}), nil
}

// newTailRows copies each sequence's last keep rows (SWA bounded replay).
func newTailRows(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	keep := attrInt(a, "keep")
	w := 1
	for _, d := range args[0].Shape[1:] {
		w *= int(d.N)
	}
	isInt := args[0].DType == ir.I32
	return kfunc(func(s *Step, in, r []Tensor) error {
		for j, v := range views(s, keep) {
			q := s.Seqs[j]
			from := q.Row + q.N - v.n
			if isInt {
				copy(r[0].I32[v.row*w:(v.row+v.n)*w], in[0].I32[from*w:(from+v.n)*w])
			} else {
				copy(r[0].F32[v.row*w:(v.row+v.n)*w], in[0].F32[from*w:(from+v.n)*w])
			}
		}
		return nil
	}), nil
}

// newTailIndex renumbers logit rows from step rows to tail rows.
func newTailIndex(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	keep := attrInt(a, "keep")
	return kfunc(func(s *Step, in, r []Tensor) error {
		vs := views(s, keep)
		for i, row := range in[0].I32 {
			found := false
			for j, q := range s.Seqs {
				if int(row) < q.Row || int(row) >= q.Row+q.N {
					continue
				}
				off := int(row) - q.Row - (q.N - vs[j].n)
				if off < 0 {
					return fmt.Errorf("logit row %d lies before the last %d rows its sequence replays past the last KV source (SWA bounded replay keeps %d)", row, vs[j].n, keep)
				}
				r[0].I32[i] = int32(vs[j].row + off)
				found = true
				break
			}
			if !found {
				return fmt.Errorf("logit row %d is outside the step", row)
			}
		}
		return nil
	}), nil
}

// v41Experts runs the routed experts as the V4.1 reference's MoE does: each expert
// quantizes its tokens' bf16 activations to MXFP8, takes w1 and w3 to bf16, applies
// the clamped SwiGLU in fp32, scales by the routing weight, rounds to bf16, quantizes
// again for w2 and returns bf16; a token sums its experts' outputs in fp32 in
// ascending expert id.
type v41Experts struct {
	experts, dim, inter, block int
	limit                      float32
	slotOut                    []float32
}

func newMoEExpertsAny(args, res []ir.Type, a ir.Attrs) (Kernel, error) {
	if n, _ := a.Str("numerics"); n == "v41" {
		return &v41Experts{experts: attrInt(a, "experts"), dim: int(args[0].Last()), inter: int(args[3].Shape[0].N),
			block: 32, limit: float32(attrFloat(a, "limit"))}, nil
	}
	return newMoEExperts(args, res, a)
}

func (k *v41Experts) Run(s *Step, a, r []Tensor) error {
	return runExperts(k, k.experts, k.dim, &k.slotOut, a, r)
}

// input is a token's activations as the expert takes them: MXFP8 (bf16, then E4M3
// with a power-of-two scale per 32), which is also how they travel between ranks.
func (k *v41Experts) input(x, dst []float32) { quantizeActs("mxfp8", k.block, len(x), x, dst) }

// wire: MXFP8 rows (E4M3 codes, a UE8M0 scale per 32) to the experts, bf16 back —
// exactly the values the experts take and give, and the planner's byte counts.
func (k *v41Experts) wire() (in, out wireFmt) { return wireMXFP8, wireBF16 }

// rows is one expert of the reference's MoE for n MXFP8 rows: w1 and w3 to bf16, the
// clamped SwiGLU in fp32, the routing weight, MXFP8 again for w2, a bf16 result.
func (k *v41Experts) rows(a []Tensor, e int, xq, w []float32, n int, sc *expertScratch, y []float32) {
	d, in := k.dim, k.inter
	g, u, h := sc.get(n*in, n*in, n*in)
	gemmNT(n, in, d, xq, d, a[3+e].F32, d, g, in)
	gemmNT(n, in, d, xq, d, a[3+2*k.experts+e].F32, d, u, in)
	quant.BF16Slice(g)
	quant.BF16Slice(u)
	swiglu(g, u, h, k.limit)
	for i := 0; i < n; i++ {
		for j := range h[i*in : (i+1)*in] {
			h[i*in+j] *= w[i]
		}
	}
	quantizeActs("mxfp8", k.block, in, h, h)
	gemmNT(n, d, in, h, in, a[3+k.experts+e].F32, in, y, d)
	quant.BF16Slice(y)
}

// reduce sums a token's expert outputs in fp32 in ascending expert id.
func (k *v41Experts) reduce(out, slotOut []float32, ids []int32, t, topk int) {
	d := k.dim
	order := make([]int, topk)
	for tok := 0; tok < t; tok++ {
		for j := range order {
			order[j] = j
		}
		slices.SortFunc(order, func(p, q int) int { return int(ids[tok*topk+p]) - int(ids[tok*topk+q]) })
		dst := out[tok*d : (tok+1)*d]
		clear(dst)
		for _, j := range order {
			src := slotOut[(tok*topk+j)*d : (tok*topk+j+1)*d]
			for i := range dst {
				dst[i] += src[i]
			}
		}
	}
}

// rmsRow normalizes x into y as the reference's RMSNorm: fp32 statistics in ATen's
// order, the weight, then bf16.
func rmsRow(x, w, y []float32, eps float64) {
	sq := make([]float32, len(x))
	for i, v := range x {
		sq[i] = v * v
	}
	rs := 1 / float32(math.Sqrt(float64(cascadeSum(sq)/float32(len(x))+float32(eps))))
	for i, v := range x {
		y[i] = quant.BF16(v * rs * w[i])
	}
}
