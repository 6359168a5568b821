package cuda

import "runtime"

// Binders of dense41.cu's kernels: qlinear (V4.1) and grouped_linear (V4 and V4.1).

func init() {
	register("qlinear", bindQLinear)
	register("grouped_linear", bindGroupedLinear)
}

// quantMode is dense_quant's mode for an activation format: 0 f32 (a copy), 1 bf16,
// 2 bf16 then MXFP8.
func quantMode(act string) (int64, bool) {
	switch act {
	case "f32":
		return 0, true
	case "bf16":
		return 1, true
	case "mxfp8":
		return 2, true
	}
	return 0, false
}

// bindQLinear: the activations quantized into scratch (bf16, MXFP8), then one work item
// per output in the cpu's order for the act format (cpu: newQLinear).
func bindQLinear(b *Bind) error {
	N, K := Dim(b.Args[1], 0), Dim(b.Args[1], 1)
	act, out := b.Str("act"), b.Str("out")
	mode, ok := quantMode(act)
	if !ok || (out != "bf16" && out != "f32") {
		return b.Errorf("act %q / out %q", act, out)
	}
	block, keep := b.Int("block"), b.Int("keep")
	chunk := int64(32)
	if mode == 2 {
		if block <= 0 || K%block != 0 {
			return b.Errorf("activation block %d does not divide %d", block, K)
		}
		chunk = block
	}
	outBF16 := int64(0)
	if out == "bf16" {
		outBF16 = 1
	}
	if b.Fast() && mode != 0 && chunk == 32 && xExactOn() && quantSplitOn() {
		// the quantization and the split into bf16 halves in one launch (left out where
		// the previous qlinear quantized the same activations: ops_fuse.go)
		xs := fastProduct(b, fastGemm{x: 0, xScratch: -1, rows: -1, w: 1, y: 0, yScratch: -1, N: N, K: K, ldx: K, ldy: N, outBF16: outBF16, xExact: true, quant: mode})
		b.Quantizes("fast_quant_split", xs)
		return nil
	}
	xq := -1
	if mode != 0 {
		xq = b.Scratch(4*K, 0)
		b.Quantizes("dense_quant", xq)
		b.Launch("dense_quant", func(s *Step, a *ArgBuf) int64 {
			rows := s.Arg(0).Rows()
			a.P(s.Arg(0).Ptr)
			a.P(s.Scratch(xq))
			a.I(rows)
			a.I(K)
			a.I(chunk)
			a.I(mode)
			if chunk == 32 {
				return rows * ((K + chunk - 1) / chunk) * 32 // a warp a piece (dense41.cu)
			}
			return rows * ((K + chunk - 1) / chunk)
		})
	}
	if b.Fast() {
		x := xq
		// bf16 and MXFP8 activations are bf16 values: the products leave out the lo mma
		fastProduct(b, fastGemm{x: 0, xScratch: x, rows: -1, w: 1, y: 0, yScratch: -1, N: N, K: K, ldx: K, ldy: N, outBF16: outBF16, xExact: mode != 0 && xExactOn()})
		return nil
	}
	kernel := "dense_qlinear"
	split := func(*Step) bool { return false }
	if mode == 2 {
		// the same sums, a weight row read once per group of rows, or split in blocks
		kernel = "dense_qlinear_rows"
		split = launchSplit(b, splitProduct{x: 0, xScratch: xq, rows: -1, w: 1, y: 0, N: N, K: K, ldx: K, ldy: N, outBF16: outBF16})
	}
	b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
		if split(s) {
			return 0
		}
		T := s.Arg(0).Rows()
		if xq >= 0 {
			a.P(s.Scratch(xq))
		} else {
			a.P(s.Arg(0).Ptr)
		}
		a.W(s.Arg(1))
		a.P(s.Result(0).Ptr)
		a.I(T)
		a.I(N)
		a.I(K)
		a.I(mode)
		a.I(outBF16)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(keep)
		// the cpu's gemmRows splits the rows over this process's cores, and gonum's
		// order depends on the rows of each split
		a.I(int64(runtime.GOMAXPROCS(0)))
		if kernel == "dense_qlinear_rows" {
			return N * ((T + denseGroup - 1) / denseGroup)
		}
		return T * N
	})
	return nil
}

// denseGroup is dense41.cu's DENSE_G.
const denseGroup = 16

// bindGroupedLinear: one work item per output (cpu: newGroupedLinear), or per weight row
// and group of rows (dense_grouped_rows).
func bindGroupedLinear(b *Bind) error {
	G := b.Int("groups")
	rowsW, in := Dim(b.Args[1], 0), Dim(b.Args[1], 1)
	if G <= 0 || rowsW%G != 0 || Dim(b.Args[0], 1) != G*in {
		return b.Errorf("W %s with %d groups does not take x %s", b.Args[1], G, b.Args[0])
	}
	out := rowsW / G
	v41, keep := int64(0), b.Int("keep")
	if isV41(b) {
		v41 = 1
	}
	if b.Fast() && out%fastTileN == 0 {
		// xbf16 (V4.1's wo_a: its input is rope's bf16 rounding): the lo halves' mma left
		// out, and the wide kernel from 33 rows (fast_split checks the promise: error 600)
		fastProduct(b, fastGemm{x: 0, xScratch: -1, rows: -1, w: 1, y: 0, yScratch: -1, N: G * out, K: in, ldx: G * in, ldy: G * out, G: G,
			xExact: b.Bool("xbf16") && xExactOn()})
		return nil
	}
	kernel := "dense_grouped"
	split := func(*Step) bool { return false }
	if v41 == 0 {
		kernel = "dense_grouped_rows"
		split = launchSplit(b, splitProduct{x: 0, xScratch: -1, rows: -1, w: 1, y: 0, N: G * out, K: in, ldx: G * in, xdiv: out, ldy: G * out})
	}
	b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
		if split(s) {
			return 0
		}
		T := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Result(0).Ptr)
		a.I(T)
		a.I(G)
		a.I(out)
		a.I(in)
		a.I(v41)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(keep)
		if kernel == "dense_grouped_rows" {
			return G * out * ((T + denseGroup - 1) / denseGroup)
		}
		return T * G * out
	})
	return nil
}
