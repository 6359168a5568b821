package cuda

import (
	"fmt"

	"deepinfer/ir"
)

// Binders of basic.cu's kernels.

func init() {
	registerError(1, "a token id is outside the vocabulary")
	registerError(2, "a logits row is outside the step's rows")
	registerError(3, "a token stands for a row the previous step did not sample (FromPrevious)")
	register("embed", bindEmbed)
	register("add", bindAdd)
	register("swiglu", bindSwiGLU)
	register("linear", bindLinear)
	register("lm_head", bindLMHead)
	register("sample", bindSample)
}

func bindEmbed(b *Bind) error {
	V, D := Dim(b.Args[1], 0), Dim(b.Args[1], 1)
	b.Launch("embed", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Result(0).Ptr)
		a.I(s.T)
		a.I(V)
		a.I(D)
		a.P(s.Err)
		return s.T * D
	})
	return nil
}

func bindAdd(b *Bind) error {
	b.RoundsOnStore()
	b.Launch("add", func(s *Step, a *ArgBuf) int64 {
		n := s.Result(0).Elems()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(n)
		a.I(b2i(s.Round))
		return n
	})
	return nil
}

func bindSwiGLU(b *Bind) error {
	limit := b.Float("limit")
	b.Launch("swiglu", func(s *Step, a *ArgBuf) int64 {
		n := s.Result(0).Elems()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(n)
		a.F(limit)
		return n
	})
	return nil
}

// gemmGroup is basic.cu's GEMM_G: the rows of x one gemm_nt work item serves.
const gemmGroup = 16

// splitRows is basic.cu's SPLIT_M: a product over at most this many rows runs as
// dense_part and dense_sum, every block of a weight row its own work item.
const splitRows = 8

// splitProduct describes y = x·wᵀ for launchSplit: the operands (x from a scratch when
// xScratch ≥ 0; rows < 0 when x's rows are taken in order), the weight's shape, x's row
// stride, xdiv (a weight row n reads x from column (n/xdiv)·K; 0: from 0), y's row
// stride and bf16 rounding.
type splitProduct struct {
	x, xScratch, rows, w, y int
	N, K, ldx, xdiv, ldy    int64
	outBF16                 int64
}

// launchSplit adds the two launches of a split product; they run when the step's rows
// are at most splitRows, and the returned function tells the caller's own launch so.
func launchSplit(b *Bind, g splitProduct) func(s *Step) bool {
	nb := (g.K + 63) / 64
	part := b.Scratch(0, splitRows*g.N*nb*4)
	rowsOf := func(s *Step) int64 {
		if g.rows >= 0 {
			return s.Arg(g.rows).Elems()
		}
		return s.Arg(g.x).Rows()
	}
	split := func(s *Step) bool { return rowsOf(s) <= splitRows }
	fill := func(s *Step, a *ArgBuf) {
		xRowsArgs(s, a, g.x, g.xScratch, g.rows)
		a.W(s.Arg(g.w))
		a.P(s.Result(g.y).Ptr)
		a.P(s.Scratch(part))
		a.I(rowsOf(s))
		a.I(g.N)
		a.I(g.K)
		a.I(nb)
		a.I(g.ldx)
		a.I(g.xdiv)
		a.I(g.ldy)
		a.I(g.outBF16)
		a.I(s.Arg(g.x).Rows())
		a.P(s.Err)
	}
	b.Launch("dense_part", func(s *Step, a *ArgBuf) int64 {
		if !split(s) {
			return 0
		}
		fill(s, a)
		return g.N * nb
	})
	b.Launch("dense_sum", func(s *Step, a *ArgBuf) int64 {
		if !split(s) {
			return 0
		}
		fill(s, a)
		return rowsOf(s) * g.N
	})
	return split
}

// gemm launches c = x·wᵀ over x's rows (or the rows a rows operand picks).
func gemm(b *Bind, x, rows, w, c int, N, K int64) {
	if b.Fast() {
		// xbf16 (V4.1's LM head: its input is the final norm's bf16 rounding): the
		// products leave out the activations' zero lo halves (fast_split checks them:
		// error 600)
		fastProduct(b, fastGemm{x: x, xScratch: -1, rows: rows, w: w, y: c, yScratch: -1, N: N, K: K, ldx: K, ldy: N,
			xExact: b.Bool("xbf16") && xExactOn()})
		return
	}
	split := launchSplit(b, splitProduct{x: x, xScratch: -1, rows: rows, w: w, y: c, N: N, K: K, ldx: K, ldy: N})
	b.Launch("gemm_nt", func(s *Step, a *ArgBuf) int64 {
		if split(s) {
			return 0
		}
		xo := s.Arg(x)
		M := xo.Rows()
		a.P(xo.Ptr)
		if rows >= 0 {
			M = s.Arg(rows).Elems()
			a.P(s.Arg(rows).Ptr)
		} else {
			a.P(0)
		}
		a.W(s.Arg(w))
		a.P(s.Result(c).Ptr)
		a.I(M)
		a.I(N)
		a.I(K)
		a.I(xo.Rows())
		a.P(s.Err)
		return N * ((M + gemmGroup - 1) / gemmGroup)
	})
}

func bindLinear(b *Bind) error {
	gemm(b, 0, -1, 1, 0, Dim(b.Args[1], 0), Dim(b.Args[1], 1))
	return nil
}

func bindLMHead(b *Bind) error {
	gemm(b, 0, 1, 2, 0, Dim(b.Args[2], 0), Dim(b.Args[2], 1))
	return nil
}

// sampleBlock is basic.cu's SAMPLE_NT: the sample kernel's launch block, one a row.
const sampleBlock = 1024

// sampleMaxVocab: the sampler's histogram parts (basic.cu SAMPLE_PARTS, 11 bits each)
// sum below 2^32 for vocabularies below 2^21.
const sampleMaxVocab = 1 << 21

func bindSample(b *Bind) error {
	V := b.Args[0].Last()
	if V >= sampleMaxVocab {
		// basic.cu's SampleShared sums a histogram digit's masses in 11-bit parts
		return fmt.Errorf("sample: a vocabulary of %d ids; the sampler takes fewer than %d", V, sampleMaxVocab)
	}
	cols := ir.MaskCols(V)
	scratch := b.Scratch(12*V, 0)
	masked := len(b.Args) == 3
	fill := func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		if masked {
			a.P(s.Arg(2).Ptr)
		} else {
			a.P(0)
		}
		a.P(s.Result(0).Ptr)
		a.I(s.R)
		a.I(V)
		a.I(cols)
		a.P(s.Scratch(scratch))
		return s.R
	}
	const chunk = 256 // basic.cu's SAMPLE_CHUNK
	// a warp a greedy row's (row, chunk), then a launch block of sampleBlock threads a row
	b.Launch("sample_argmax_part", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * ((V + chunk - 1) / chunk) * 32 })
	b.LaunchBlocks("sample", sampleBlock, func(s *Step, a *ArgBuf) int64 { return fill(s, a) * sampleBlock })
	return nil
}

// xRowsArgs adds a product's x pointer (the scratch xScratch when ≥ 0, else argument x)
// and its row list (argument rows when ≥ 0, else none: x's rows in order).
func xRowsArgs(s *Step, a *ArgBuf, x, xScratch, rows int) {
	if xScratch >= 0 {
		a.P(s.Scratch(xScratch))
	} else {
		a.P(s.Arg(x).Ptr)
	}
	if rows >= 0 {
		a.P(s.Arg(rows).Ptr)
	} else {
		a.P(0)
	}
}
