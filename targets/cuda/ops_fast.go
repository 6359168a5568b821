package cuda

// The fast numerics mode's products (kernels/fast.cu): tensor-core tiles over bf16
// halves of the activations, checked against the exact kernels with a tolerance.

// fastTile is fast.cu's warp tile: 16 weight rows × fastRows activation rows.
const (
	fastTileN = 16
	fastRows  = 32 // 8 · FAST_MT
	// fastWarps is the number of warp tiles a product aims for (about 16 per SM of an
	// H200), reached by splitting the reduction when the weight has few rows.
	fastWarps = 2048
)

// fastGemm describes y = x·wᵀ: x's rows (rows < 0: in order) with row stride ldx,
// the weight's shape, y's row stride and bf16 rounding.
type fastGemm struct {
	x, rows, w, y  int
	N, K, ldx, ldy int64
	outBF16        int64
}

// fastSplits picks the reduction's slices from the weight's shape alone (never the
// batch, so that a row's value does not depend on the rows beside it): enough warp
// tiles for the device at one activation tile, each slice a multiple of 64 values and
// at least 256 long. It returns the slice count and length.
func fastSplits(N, K int64) (S, ks int64) {
	kp := (K + 63) / 64 * 64
	ntiles := (N + fastTileN - 1) / fastTileN
	S = 1
	for S*ntiles < fastWarps && kp/(2*S) >= 256 {
		S *= 2
	}
	ks = (kp/S + 63) / 64 * 64
	S = (kp + ks - 1) / ks
	return S, ks
}

// fastProduct adds a product's launches: the activations split into bf16 halves
// (fast_split), the warp tiles (fast_gemm) and, when the reduction is sliced, the sum of
// the slices (fast_sum).
func fastProduct(b *Bind, g fastGemm) {
	kp := (g.K + 63) / 64 * 64
	S, ks := fastSplits(g.N, g.K)
	xs := b.Scratch(4*kp, 0) // per row: Kp/2 hi pairs and Kp/2 lo pairs, 4 bytes each
	part := -1
	if S > 1 {
		part = b.Scratch(4*S*g.N, 0)
	}
	rowsOf := func(s *Step) int64 {
		if g.rows >= 0 {
			return s.Arg(g.rows).Elems()
		}
		return s.Arg(g.x).Rows()
	}
	halves := func(s *Step) (devptr, devptr) {
		p := s.Scratch(xs)
		return p, p + devptr(rowsOf(s)*2*kp)
	}
	b.Launch("fast_split", func(s *Step, a *ArgBuf) int64 {
		M := rowsOf(s)
		xh, xl := halves(s)
		a.P(s.Arg(g.x).Ptr)
		if g.rows >= 0 {
			a.P(s.Arg(g.rows).Ptr)
		} else {
			a.P(0)
		}
		a.P(xh)
		a.P(xl)
		a.I(M)
		a.I(g.K)
		a.I(kp)
		a.I(g.ldx)
		a.I(s.Arg(g.x).Rows())
		a.P(s.Err)
		return M * kp / 2
	})
	fill := func(s *Step, a *ArgBuf) int64 {
		M := rowsOf(s)
		xh, xl := halves(s)
		a.P(xh)
		a.P(xl)
		a.W(s.Arg(g.w))
		a.P(s.Result(g.y).Ptr)
		if part >= 0 {
			a.P(s.Scratch(part))
		} else {
			a.P(0)
		}
		mtiles := (M + fastRows - 1) / fastRows
		a.I(M)
		a.I(g.N)
		a.I(g.K)
		a.I(kp)
		a.I(S)
		a.I(ks)
		a.I(mtiles)
		a.I(g.ldy)
		a.I(g.outBF16)
		return mtiles
	}
	b.Launch("fast_gemm", func(s *Step, a *ArgBuf) int64 {
		mtiles := fill(s, a)
		return (g.N + fastTileN - 1) / fastTileN * S * mtiles * 32
	})
	if S > 1 {
		b.Launch("fast_sum", func(s *Step, a *ArgBuf) int64 {
			fill(s, a)
			return rowsOf(s) * g.N
		})
	}
}
