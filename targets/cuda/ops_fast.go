package cuda

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The fast numerics mode's products (kernels/tensorcore.cu): tensor-core tiles over bf16
// halves of the activations, checked against the exact kernels with a tolerance.

// fastTileN is tensorcore.cu's warp tile's weight rows (its activation rows are 8 or 32).
const (
	fastTileN = 16
	// fastWarps is the number of warp tiles a product aims for (about 16 per SM of an
	// H200), reached by splitting the reduction when the weight has few rows.
	fastWarps = 2048
)

// fastAttnHeads is attention.cu's FATT_HG: the heads one fast attention work item serves.
const fastAttnHeads = 16

// fastGemm describes y = x·wᵀ: x (an operand, or a scratch when xScratch ≥ 0) whose
// rows are taken in order or picked by a rows operand (rows ≥ 0), row stride ldx; the
// weight's shape; y's row stride and bf16 rounding. With groups G > 1 (grouped_linear)
// weight row n belongs to group n / (N/G) and reads its row's values
// [g·K, (g+1)·K) of x (ldx = G·K).
type fastGemm struct {
	x, xScratch, rows, w, y int
	// yScratch ≥ 0: y is that scratch, not result y
	yScratch          int
	N, K, ldx, ldy, G int64
	outBF16           int64
	// xExact: x is bf16 already (V4.1's quantized activations): its lo halves are zero,
	// the tiles leave their mma out, and fast_split reports error 600 if one is not
	xExact bool
	// xRound: the fp8 numerics round x to bf16 in its split (fast_split's xexact 2; the
	// products as for xExact, which fastProduct sets with it): roundX's products
	xRound bool
	// quant (1 bf16, 2 MXFP8: dense_quant's modes, pieces of 32 values): x is the
	// unquantized operand and fast_quant_split quantizes and splits it in one launch
	// (rows in order, ldx = K, one group, xExact)
	quant int64
}

func init() {
	registerError(600, "fast product: activations marked as bf16 values have a nonzero residual half")
}

// b2i is 1 for true.
func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
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
// (fast_split; a grouped product's row t, group g is row t·G+g of K values), the warp
// tiles (fast_gemm_m1, _m4 and their _f32 forms) and, when the reduction is sliced, the
// sum of the slices (fast_sum). It returns the scratch buffer of x's halves (with quant,
// the quantized activations fast_quant_split writes).
func fastProduct(b *Bind, g fastGemm) int {
	if g.G <= 0 {
		g.G = 1
	}
	if !g.xExact && g.quant == 0 && b.roundX() {
		g.xExact, g.xRound = true, true
	}
	kp := (g.K + 63) / 64 * 64
	S, ks := fastSplits(g.N, g.K)
	// the fp8 numerics: MXFP8 activations' products of 33 to 64 rows on
	// fast_gemm_wg_e4m3n (FP8 weights of 32 × 32 blocks; larger steps on the fast mode's
	// kernels, which the 128-row form fast_gemm_wg_e4m3 did not beat on the H200, run 48),
	// the product's slices multiples of their steps of 128 values (the last slice may end
	// in a part of one), and the quantization's E4M3 codes and scales in scratch xq (asked
	// for before xs, so that a product reading its predecessor's quantization,
	// ops_fuse.go, shares it only where both wrote the codes)
	e4m3On := b.rt.fp8 && g.quant == 2 && g.G == 1 && g.K%32 == 0 && g.N%64 == 0 && g.xExact && !b.rt.invariant &&
		os.Getenv(EnvWGE4M3) != "0" && wgE4M3Shared(128) <= b.SharedMax()
	e4m3Env := os.Getenv(EnvWGE4M3)
	xq := -1
	if e4m3On {
		S, ks = e4m3Slices(g.N, g.K)
		xq = b.Scratch(g.K+g.K/8, 0) // per row: K codes, K/32 float scales
	}
	xs := b.Scratch(4*kp*g.G, 0) // per row and group: Kp/2 hi pairs and Kp/2 lo pairs, 4 bytes each
	part := -1
	if S > 1 {
		part = b.Scratch(4*S*g.N, 0)
	}
	sum4On := os.Getenv(EnvSum4) != "0"
	rowsOf := func(s *Step) int64 {
		if g.rows >= 0 {
			return s.Arg(g.rows).Elems()
		}
		return s.Arg(g.x).Rows()
	}
	halves := func(s *Step) (devptr, devptr) {
		p := s.Scratch(xs)
		return p, p + devptr(rowsOf(s)*g.G*2*kp)
	}
	if g.quant != 0 && (g.rows >= 0 || g.G != 1 || g.ldx != g.K || g.xScratch >= 0 || !g.xExact) {
		panic("fastProduct: a fused quantization needs whole rows of K in order, one group, bf16 values")
	}
	qsWide := quantSplitWideOn()
	wideMin := envRows(EnvWideMin, fastWideMin)
	// e4m3Rows: whether a step of M rows may run an e4m3 form, so that its quantization
	// writes the codes (decided by the rows and the setting alone, never by the weight:
	// a quant_shared successor reads what this launch wrote)
	e4m3Rows := func(M int64) bool {
		return xq >= 0 && M > wideMin && (M <= 64 || e4m3Env == "all" || e4m3Env == "128" || e4m3Env == "p" || e4m3Env == "q" || e4m3Env == "w")
	}
	b.Launch("fast_quant_split", func(s *Step, a *ArgBuf) int64 {
		if g.quant == 0 {
			return 0
		}
		xqp := devptr(0)
		if e4m3Rows(rowsOf(s)) {
			xqp = s.Scratch(xq)
		}
		return quantSplitArgs(s, a, s.Arg(g.x).Ptr, rowsOf(s), g.K, kp, s.Scratch(xs), g.quant, false, qsWide, xqp)
	})
	// products of at most fastGemvRows rows on the CUDA cores (fast_gemv_f32, _bf16,
	// _fp8, reading x's float32 rows, so without the split; _q forms read a quantized
	// split's hi halves): a warp two weight rows, no slices; another summation order
	// than the tiles', so never in batch-invariant mode; EnvGemv=0 keeps the tiles
	// (FP8 weights by default: run 28c on the H200 measured the tiles faster for the bf16
	// and float32 heads; EnvGemv=all takes every format). Without the split, xExact's
	// promise (bf16-valued activations, error 600 from fast_split) goes unchecked in those
	// steps; the same products' larger steps still check it.
	gemvEnv := os.Getenv(EnvGemv)
	gemvOn := gemvEnv != "0" && !b.rt.invariant && g.K%16 == 0 && (g.N/g.G)%fastGemvR == 0
	gemvStaged := os.Getenv(EnvGemvStaged) == "1"
	gemvOne := os.Getenv(EnvGemvOne)
	if gemvOne == "" {
		gemvOne = "p" // (the default since run 32: gemvOnePrefix)
	}
	gemvKernel := func(s *Step) string {
		w := s.Arg(g.w)
		if !gemvOn || rowsOf(s) > fastGemvRows || w.Cols != g.K || w.Ptr%16 != 0 {
			return ""
		}
		name := ""
		switch w.Fmt {
		case 0:
			name = "fast_gemv_f32"
		case 1:
			name = "fast_gemv_bf16"
		case 2, 3, 5:
			name = "fast_gemv_fp8"
		default:
			return ""
		}
		if w.Fmt < 2 && gemvEnv != "all" {
			return ""
		}
		switch {
		case gemvStaged:
			name += "s"
		case w.Fmt >= 2 && rowsOf(s) == 1 && gemvOnePrefix[gemvOne] != "":
			// (the FP8 forms written for one row: fast_gemv1p_fp8 by default, with
			// two-piece stages a stage ahead; fast_gemv1_fp8; fast_gemv1b_fp8 at six
			// launch blocks a multiprocessor)
			name = strings.Replace(name, "fast_gemv_", gemvOnePrefix[gemvOne], 1)
		}
		if g.quant != 0 {
			return name + "_q"
		}
		return name
	}
	// the split writes the pairs in wgr_pos's order for fast_gemm_wg_fp8r (fast_split_wg;
	// wgFrag is set once mt and blkKernel are)
	var wgFrag func(s *Step) bool
	for _, split := range []string{"fast_split", "fast_split_wg"} {
		b.Launch(split, func(s *Step, a *ArgBuf) int64 {
			if g.quant != 0 || (split == "fast_split_wg") != wgFrag(s) || gemvKernel(s) != "" {
				return 0
			}
			M := rowsOf(s) * g.G
			xh, xl := halves(s)
			xRowsArgs(s, a, g.x, g.xScratch, g.rows)
			a.P(xh)
			a.P(xl)
			a.I(M)
			a.I(g.K)
			a.I(kp)
			a.I(g.ldx / g.G)
			a.I(s.Arg(g.x).Rows())
			a.P(s.Err)
			a.I(xexactArg(g.xExact, g.xRound))
			return M * kp / 2
		})
	}
	// mt is the activation rows a warp tile holds: 8 up to 8 rows (decode at small
	// batch), 32 up to 32 rows, else 128 (fast_gemm_wide: a launch block of four warps
	// sharing 64 widened weight rows and 128 rows of x) above fastWideMin rows for bf16
	// activations and weights other than float32, or 64 (fast_gemm_blk: a launch block of four warps sharing the
	// rows' halves, 128 weight rows), where the groups allow; a value does not depend
	// on it
	// (the register-operand wgmma kernels' switches: blkKernel, below)
	wgROK := g.G == 1 && g.K%64 == 0 && !b.rt.invariant
	wgBF16On, wgFP8ROn := wgROK && os.Getenv(EnvWGBF16) != "0", wgROK && os.Getenv(EnvWGFP8R) != "0"
	// bf16R: the fp8 numerics' rounded activations (xRound) and bf16 weights in steps of
	// more than 32 rows and at most bf16RRows take fast_gemm_wg_bf16 (x from registers,
	// one pass: xexact) instead of the wide fast_gemm_wg_bf16w (EnvFP8BF16R: 1 past
	// bf16RRows too, 0 never)
	bf16Env := os.Getenv(EnvFP8BF16R)
	bf16ROn := g.xRound && wgBF16On && bf16Env != "0"
	bf16R := func(s *Step) bool {
		w, M := s.Arg(g.w), rowsOf(s)
		return bf16ROn && w.Fmt == 1 && w.Cols == g.K && w.Ptr%16 == 0 && w.Cols%8 == 0 && M > 32 && (M <= bf16RRows || bf16Env == "1")
	}
	blockOn := os.Getenv(EnvBlockGemm) != "0"
	blockOK := fastBlockOK(g.N, g.G) && blockOn
	wideOK := g.xExact && fastWideOK(g.N, g.G) && blockOn && os.Getenv(EnvWideGemm) != "0"
	prefetch := int64(1)
	if os.Getenv(EnvBlockPrefetch) == "0" {
		prefetch = 0
	}
	// one-tile products of FP8 weights (formats 2, 3, 5) whose reduction is whole steps
	// of 64 run fast_gemm_m1_fp8 (the weight's bytes steps ahead; the same values)
	m1pipe := g.K%64 == 0 && os.Getenv(EnvM1Pipe) != "0"
	m1fp8 := func(s *Step) bool {
		f := s.Arg(g.w).Fmt
		return m1pipe && (f == 2 || f == 3 || f == 5)
	}
	// (capped at 128 registers: fast_gemm_m1_fp8_b4; EnvM1Bounds=0 runs the uncapped
	// fast_gemm_m1_fp8)
	m1name := "fast_gemm_m1_fp8_b4"
	if os.Getenv(EnvM1Bounds) == "0" {
		m1name = "fast_gemm_m1_fp8"
	}
	// (fast_gemm_m1_fp8_only where every tile takes that loop: 16-row tiles whole, rows
	// of whole 16-value pieces; EnvM1Only=0, or the uncapped kernel, keeps m1name)
	m1only := os.Getenv(EnvM1Only) != "0" && m1name == "fast_gemm_m1_fp8_b4" && g.N%fastTileN == 0
	m1kernel := func(s *Step) string {
		switch {
		case !m1fp8(s):
			return "fast_gemm_m1"
		case m1only && s.Arg(g.w).Cols%16 == 0:
			return "fast_gemm_m1_fp8_only"
		}
		return m1name
	}
	mt := func(s *Step) int64 {
		switch M := rowsOf(s); {
		case M <= 8:
			return 8
		case M <= 32:
			return 4 * 8
		case bf16R(s):
			return fastBlockRows
		case wideOK && M > wideMin && s.Arg(g.w).Fmt != 0:
			return fastWideRows
		case !blockOK:
			return 4 * 8
		}
		return fastBlockRows
	}
	// the block products of activations in two halves (not xExact: V4's; bf16-valued
	// ones take the wide kernels) and bf16 weights (format 1) or FP8 weights (formats 2,
	// 3, 5) in rows of K values, one group: fast_gemm_wg_bf16 or fast_gemm_wg_fp8r
	// (wgmma, x in two halves as its registers; near fast_gemm_blk's values rather than
	// equal, so never in batch-invariant mode; EnvWGBF16=0 and EnvWGFP8R=0 keep
	// fast_gemm_blk)
	// (EnvWGAhead=all: fast_gemm_wg_bf16a and _fp8ra, the weight rows two steps ahead;
	// the same values, slower on the H200 in run 31)
	wgBF16, wgFP8R := "fast_gemm_wg_bf16", "fast_gemm_wg_fp8r"
	if os.Getenv(EnvWGAhead) == "all" {
		wgBF16, wgFP8R = "fast_gemm_wg_bf16a", "fast_gemm_wg_fp8ra"
	}
	blkKernel := func(s *Step) string {
		w := s.Arg(g.w)
		if w.Cols != g.K || w.Ptr%16 != 0 || (g.xExact && !bf16R(s)) {
			return "fast_gemm_blk"
		}
		switch f := w.Fmt; {
		case wgBF16On && f == 1 && w.Cols%8 == 0:
			return wgBF16
		case wgFP8ROn && (f == 2 || f == 3 || f == 5) && w.Cols%16 == 0:
			return wgFP8R
		}
		return "fast_gemm_blk"
	}
	wgFrag = func(s *Step) bool {
		if mt(s) != fastBlockRows || s.Arg(g.w).Fmt == 0 {
			return false
		}
		return strings.HasPrefix(blkKernel(s), "fast_gemm_wg_fp8r")
	}
	// yPtr is where the product's values go: the scratch yScratch, or result y
	yPtr := func(s *Step) devptr {
		if g.yScratch >= 0 {
			return s.Scratch(g.yScratch)
		}
		return s.Result(g.y).Ptr
	}
	fill := func(s *Step, a *ArgBuf) int64 {
		M := rowsOf(s)
		xh, xl := halves(s)
		a.P(xh)
		a.P(xl)
		a.W(s.Arg(g.w))
		a.P(yPtr(s))
		if part >= 0 {
			a.P(s.Scratch(part))
		} else {
			a.P(0)
		}
		mtiles := (M + mt(s) - 1) / mt(s)
		a.I(M)
		a.I(g.N)
		a.I(g.K)
		a.I(kp)
		a.I(S)
		a.I(ks)
		a.I(mtiles)
		a.I(g.ldy)
		a.I(g.outBF16)
		a.I(g.G)
		a.I(prefetch)
		a.I(b2i(g.xExact))
		return mtiles
	}
	// float32 weights in blocks of 64 rows: fast_gemm_blk_f32, or the staged form
	// EnvStageF32 names where its copies are aligned
	stageEnv := os.Getenv(EnvStageF32)
	// (or fast_gemm_wg_f32p for bf16 activations, the default since run 24: wgmma, near
	// the others' values rather than equal, so never in batch-invariant mode; EnvHeadWG=0
	// keeps the others, EnvHeadWG=1 the one-fragment-set fast_gemm_wg_f32)
	headWG := os.Getenv(EnvHeadWG)
	wgOn := headWG != "0" && g.xExact && g.G == 1 && g.K%64 == 0 && !b.rt.invariant
	blkF32 := func(s *Step) string {
		w := s.Arg(g.w)
		if wgOn && w.Cols == g.K && w.Ptr%16 == 0 {
			if headWG == "1" {
				return "fast_gemm_wg_f32"
			}
			if headWG == "pair" {
				return "fast_gemm_wg_f32p3w"
			}
			return "fast_gemm_wg_f32p"
		}
		if name := stageF32Kernel(stageEnv, rowsOf(s)); name != "" && fastStageOK(uint64(w.Ptr), w.Cols, g.K) {
			return name
		}
		return "fast_gemm_blk_f32"
	}
	// the wide products of FP8 weights (formats 2, 3, 5) in rows of K values, one group:
	// fast_gemm_wg_fp8 (wgmma, near fast_gemm_wide's values rather than equal, so never
	// in batch-invariant mode; the default since run 24, EnvWideWG=0 keeps fast_gemm_wide)
	// (fast_gemm_wg_fp8a, its weight bytes two steps ahead, by default: the same values;
	// EnvWGAhead=0 keeps fast_gemm_wg_fp8)
	wgFP8On := os.Getenv(EnvWideWG) != "0" && g.G == 1 && g.K%64 == 0 && !b.rt.invariant
	// (bf16 weights, in groups too — V4.1's wo_a, each group's weight rows a multiple of
	// 64 —: fast_gemm_wg_bf16w, both operands copied by cp.async; EnvWGBF16W=0 keeps
	// fast_gemm_wide)
	wgBF16WOn := os.Getenv(EnvWideWG) != "0" && os.Getenv(EnvWGBF16W) != "0" && (g.G == 1 || (g.N/g.G)%64 == 0) && g.K%64 == 0 && !b.rt.invariant
	wgBF16W4, wgBF16WP := os.Getenv(EnvWGBF16W) == "4", os.Getenv(EnvWGBF16W) == "p"
	wgFP8 := "fast_gemm_wg_fp8a"
	if os.Getenv(EnvWGAhead) == "0" {
		wgFP8 = "fast_gemm_wg_fp8"
	}
	// (fast_gemm_wg_fp8n, blocks of 64 x rows, for steps of at most 64 rows; EnvWGN64=0
	// keeps fast_gemm_wg_fp8a there)
	wgN64 := wgFP8 == "fast_gemm_wg_fp8a" && os.Getenv(EnvWGN64) != "0"
	// (EnvWGFP8=a2: fast_gemm_wg_fp8a2, two warpgroups a block, wherever fast_gemm_wg_fp8a
	// would run; =p: fast_gemm_wg_fp8p, a producer warpgroup and two consumers)
	if wgFP8 == "fast_gemm_wg_fp8a" {
		switch os.Getenv(EnvWGFP8) {
		case "a2":
			wgFP8 = "fast_gemm_wg_fp8a2"
		case "p":
			wgFP8 = "fast_gemm_wg_fp8p"
		}
	}
	wideKernel := func(s *Step) string {
		w := s.Arg(g.w)
		if e4m3On && w.Fmt == 2 && w.Cols == g.K && w.Ptr%16 == 0 {
			switch {
			case e4m3Env == "128":
				return "fast_gemm_wg_e4m3"
			case e4m3Env == "p" || e4m3Env == "q" || e4m3Env == "w":
				return "fast_gemm_wg_e4m3" + e4m3Env
			case rowsOf(s) <= 64:
				return "fast_gemm_wg_e4m3n"
			case e4m3Env == "all":
				return "fast_gemm_wg_e4m3"
			}
		}
		if f := w.Fmt; wgFP8On && (f == 2 || f == 3 || f == 5) && w.Cols == g.K && w.Cols%16 == 0 && w.Ptr%16 == 0 {
			if wgN64 && rowsOf(s) <= 64 {
				return "fast_gemm_wg_fp8n"
			}
			return wgFP8
		}
		if wgBF16WOn && w.Fmt == 1 && w.Cols == g.K && w.Ptr%16 == 0 {
			switch {
			case wgBF16W4:
				return "fast_gemm_wg_bf16w4"
			case wgBF16WP && (g.G == 1 || (g.N/g.G)%128 == 0):
				return "fast_gemm_wg_bf16wp"
			}
			return "fast_gemm_wg_bf16w"
		}
		return "fast_gemm_wide"
	}
	for _, v := range []struct {
		kernel string
		rows   int64
		f32    bool
	}{{"fast_gemm_m1", 8, false}, {m1name, 8, false}, {"fast_gemm_m1_fp8_only", 8, false}, {"fast_gemm_m4", 32, false}, {"fast_gemm_m1_f32", 8, true},
		{"fast_gemm_m4_f32", 32, true}, {"fast_gemm_blk", fastBlockRows, false}, {"fast_gemm_blk_f32", fastBlockRows, true},
		{"fast_gemm_stage_f32", fastBlockRows, true}, {"fast_gemm_stage_f32_b2", fastBlockRows, true},
		{"fast_gemm_wg_f32", fastBlockRows, true}, {"fast_gemm_wg_f32p", fastBlockRows, true}, {"fast_gemm_wg_f32p3w", fastBlockRows, true}, {"fast_gemm_wide", fastWideRows, false}, {"fast_gemm_wg_fp8", fastWideRows, false},
		{"fast_gemm_wg_fp8a", fastWideRows, false}, {"fast_gemm_wg_fp8a2", fastWideRows, false}, {"fast_gemm_wg_fp8p", fastWideRows, false}, {"fast_gemm_wg_fp8n", fastWideRows, false},
		{"fast_gemm_wg_bf16w", fastWideRows, false}, {"fast_gemm_wg_bf16w4", fastWideRows, false}, {"fast_gemm_wg_bf16wp", fastWideRows, false},
		{"fast_gemm_wg_bf16", fastBlockRows, false}, {"fast_gemm_wg_bf16a", fastBlockRows, false}, {"fast_gemm_wg_fp8r", fastBlockRows, false},
		{"fast_gemm_wg_fp8ra", fastBlockRows, false}} {
		launch := b.Launch
		if v.kernel == "fast_gemm_wg_f32p3w" {
			// (two warpgroups a launch block)
			launch = func(kernel string, fill func(s *Step, a *ArgBuf) int64) { b.LaunchBlocks(kernel, 256, fill) }
		}
		if mw, ok := wgMultiForms[v.kernel]; ok {
			// (several warpgroups a launch block, their buffers in dynamic shared memory)
			launch = func(kernel string, fill func(s *Step, a *ArgBuf) int64) {
				b.LaunchShared(kernel, mw.threads, mw.shared, fill)
			}
		}
		launch(v.kernel, func(s *Step, a *ArgBuf) int64 {
			if mt(s) != v.rows || (s.Arg(g.w).Fmt == 0) != v.f32 || gemvKernel(s) != "" {
				return 0
			}
			if v.rows == fastBlockRows && v.f32 && blkF32(s) != v.kernel {
				return 0
			}
			if v.rows == fastBlockRows && !v.f32 && blkKernel(s) != v.kernel {
				return 0
			}
			if v.rows == 8 && !v.f32 && m1kernel(s) != v.kernel {
				return 0
			}
			if v.rows == fastWideRows && wideKernel(s) != v.kernel {
				return 0
			}
			mtiles := fill(s, a)
			if v.kernel == "fast_gemm_wg_f32" || v.kernel == "fast_gemm_wg_f32p" {
				// a launch block (one warpgroup) per (64 weight rows, slice, 128 rows)
				return ceilDiv(g.N, 64) * S * ceilDiv(rowsOf(s), 128) * 128
			}
			if v.kernel == "fast_gemm_wg_f32p3w" {
				// two warpgroups per (128 weight rows, slice, 128 rows)
				return ceilDiv(g.N, 128) * S * ceilDiv(rowsOf(s), 128) * 256
			}
			if mw, ok := wgMultiForms[v.kernel]; ok {
				// a launch block per (its weight rows, slice, 128 rows)
				return ceilDiv(g.N, mw.wrows) * S * ceilDiv(rowsOf(s), 128) * mw.threads
			}
			if v.kernel == "fast_gemm_wg_fp8n" {
				// one warpgroup per (64 weight rows, slice, 64 rows)
				return ceilDiv(g.N, 64) * S * ceilDiv(rowsOf(s), 64) * 128
			}
			if v.rows == fastWideRows {
				// a launch block of 128 work items per (64 weight rows, slice, 128 rows)
				// (fast_gemm_wg_fp8: one warpgroup)
				return (g.N + fastWideN - 1) / fastWideN * S * mtiles * 128
			}
			if v.rows == fastBlockRows {
				// a launch block of 128 work items per (128 weight rows, slice, 64 rows)
				// (fast_gemm_wg_bf16, fast_gemm_wg_fp8r: one warpgroup)
				return (g.N + fastBlockN - 1) / fastBlockN * S * mtiles * 128
			}
			return (g.N + fastTileN - 1) / fastTileN * S * mtiles * 32
		})
	}
	if e4m3On {
		for _, v := range e4m3Kernels {
			name, bn := v.name, v.rows
			b.LaunchShared(name, 128, wgE4M3Shared(bn), func(s *Step, a *ArgBuf) int64 {
				if mt(s) != fastWideRows || s.Arg(g.w).Fmt == 0 || gemvKernel(s) != "" || wideKernel(s) != name {
					return 0
				}
				fill(s, a)
				a.P(s.Scratch(xq))
				a.P(s.Scratch(xq) + devptr(rowsOf(s)*g.K))
				// a launch block (one warpgroup) per (64 weight rows, slice, bn rows)
				return ceilDiv(g.N, 64) * S * ceilDiv(rowsOf(s), bn) * 128
			})
		}
	}
	for _, v := range []struct {
		kernel string
		staged bool
	}{{"fast_gemv_f32", false}, {"fast_gemv_bf16", false}, {"fast_gemv_fp8", false}, {"fast_gemv_f32_q", false}, {"fast_gemv_bf16_q", false},
		{"fast_gemv_fp8_q", false}, {"fast_gemv_f32s", true}, {"fast_gemv_bf16s", true}, {"fast_gemv_fp8s", true}, {"fast_gemv_f32s_q", true},
		{"fast_gemv_bf16s_q", true}, {"fast_gemv_fp8s_q", true}, {"fast_gemv1_fp8", false}, {"fast_gemv1_fp8_q", false},
		{"fast_gemv1b_fp8", false}, {"fast_gemv1b_fp8_q", false}, {"fast_gemv1p_fp8", false}, {"fast_gemv1p_fp8_q", false}} {
		kernel := v.kernel
		b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
			if gemvKernel(s) != kernel {
				return 0
			}
			xRowsArgs(s, a, g.x, g.xScratch, g.rows)
			xh, _ := halves(s)
			a.P(xh)
			a.W(s.Arg(g.w))
			a.P(yPtr(s))
			a.I(rowsOf(s))
			a.I(g.N)
			a.I(g.K)
			a.I(kp)
			a.I(g.ldx / g.G)
			a.I(g.ldy)
			a.I(g.outBF16)
			a.I(g.G)
			a.I(s.Arg(g.x).Rows())
			a.P(s.Err)
			if v.staged {
				return min(gemvItems(g.N), gemvStagedBlocks*128)
			}
			return gemvItems(g.N)
		})
	}
	if S > 1 {
		// fast_sum4 where every row's values are 16-byte pieces (the same values)
		sum4 := func(s *Step) bool {
			return sum4On && g.N%4 == 0 && g.ldy%4 == 0 && yPtr(s)%16 == 0 && s.Scratch(part)%16 == 0
		}
		b.Launch("fast_sum", func(s *Step, a *ArgBuf) int64 {
			if gemvKernel(s) != "" || sum4(s) {
				return 0
			}
			fill(s, a)
			return rowsOf(s) * g.N
		})
		b.Launch("fast_sum4", func(s *Step, a *ArgBuf) int64 {
			if gemvKernel(s) != "" || !sum4(s) {
				return 0
			}
			fill(s, a)
			return rowsOf(s) * g.N / 4
		})
	}
	return xs
}

// EnvSum4 set to 0 keeps every sliced product's sum on fast_sum (a value a work item)
// instead of fast_sum4 (four adjacent values a work item; the same values; read when a
// program is bound).
const EnvSum4 = "DEEPINFER_CUDA_SUM4"

// fastGemvRows and fastGemvR are tensorcore.cu's FAST_GEMV_M (the most activation rows
// fast_gemv_* take) and FAST_GEMV_R (a pair's weight rows).
const (
	fastGemvRows = 4
	fastGemvR    = 2
)

// gemvSlices is tensorcore.cu's fast_gemv_ks: the warps that share a pair of weight rows
// (more for products of fewer rows).
func gemvSlices(N int64) int64 {
	switch {
	case N >= 4096:
		return 1
	case N >= 2048:
		return 2
	}
	return 4
}

// gemvItems is a fast_gemv_* launch's work items: launch blocks of 128 threads (four
// warps), 4 / gemvSlices(N) pairs of weight rows each (fast_gemv_blocks).
func gemvItems(N int64) int64 {
	return ceilDiv(ceilDiv(N, fastGemvR), 4/gemvSlices(N)) * 128
}

// gemvStagedBlocks caps fast_gemv_fp8s's grid: four launch blocks (its bound) on each
// of the H200's 132 multiprocessors, so that each block takes several pairs of weight
// rows in turn with the next pair's bytes in flight (on another device the kernel's
// grid-stride loop still covers every pair).
const gemvStagedBlocks = 4 * 132

// EnvWGAhead set to 0 keeps fast_gemm_wg_fp8 (each thread's weight bytes loaded one step
// ahead, right before the step's products, and widened right after: the load's latency in
// every step) instead of fast_gemm_wg_fp8a (two steps ahead in two sets of registers; the
// default: run 31 on the H200, V4.1's FP8 products 1.37 → 1.00 ms at batch 64 and 2.29 →
// 1.70 at 256). Set to "all" it also runs fast_gemm_wg_bf16a (the weight rows copied two
// steps ahead into three buffers) instead of fast_gemm_wg_bf16 and fast_gemm_wg_fp8ra
// (the codes copied into shared memory two steps ahead) instead of fast_gemm_wg_fp8r,
// which run 31 measured slower (V4's head 0.51 → 0.58 ms at batch 64, its FP8 products
// 0.37 → 0.40 and 1.09 → 1.19 at 64 and 256). The same values either way; for
// comparisons. Read when a program is bound.
const EnvWGAhead = "DEEPINFER_CUDA_WG_AHEAD"

// EnvWGFP8 set to a2 runs fast_gemm_wg_fp8a2 wherever fast_gemm_wg_fp8a would run (the
// wide FP8 products of more than 64 rows): launch blocks of two warpgroups, 128 weight
// rows against one copy of a step's 128 x rows, at 128 registers, so two blocks (16
// warps) a multiprocessor against the default's 12 warps (docs/perf/dense-gemm.md: a
// test of whether more warps shorten the step's chain, which run 40 read as the bound).
// The same values as fast_gemm_wg_fp8a (each warpgroup's products in the same order).
// Set to p, those products run fast_gemm_wg_fp8p: a producer warpgroup widening the
// weights (and copying the x rows) into a ring of four stages that two consumer
// warpgroups multiply from, on named barriers instead of a block-wide barrier a step
// (dense-gemm.md: run 40 read the default as bound by the chain of barrier, widening
// and wait in the same warps); the same values. Opt-in, not yet run on a GPU; any
// other value fails the open. Read when a program is bound.
const EnvWGFP8 = "DEEPINFER_CUDA_WG_FP8"

// wgMultiForms are the wide products' forms whose launch blocks hold several
// warpgroups, with their buffers in dynamic shared memory: each one's threads a block,
// weight rows a block (against 128 x rows) and shared bytes a block. fast_gemm_wg_fp8a2:
// two steps of 128 x rows and of 128 widened weight rows (128 bytes each a step), and up
// to 1 KB to align them; fast_gemm_wg_fp8p and fast_gemm_wg_bf16wp: a ring of four such
// stages (tensorcore.cu's WGP_S) and the alignment.
var wgMultiForms = map[string]struct{ threads, wrows, shared int64 }{
	"fast_gemm_wg_fp8a2":  {256, 128, 2*128*128 + 2*128*128 + 1024},
	"fast_gemm_wg_fp8p":   {384, 128, 4*(128*128+128*128) + 1024},
	"fast_gemm_wg_bf16wp": {384, 128, 4*(128*128+128*128) + 1024},
}

// checkWGFP8Env refuses an EnvWGFP8 or EnvWGBF16W value it does not name (read when
// the runtime opens).
func checkWGFP8Env() error {
	switch v := os.Getenv(EnvWGFP8); v {
	case "", "a2", "p":
	default:
		return fmt.Errorf("%s=%q: want a2, p or nothing", EnvWGFP8, v)
	}
	switch v := os.Getenv(EnvWGBF16W); v {
	case "", "0", "1", "4", "p":
		return nil
	default:
		return fmt.Errorf("%s=%q: want 0, 1 (the default), 4, p or nothing", EnvWGBF16W, v)
	}
}

// EnvWGN64 set to 0 runs fast_gemm_wg_fp8a instead of fast_gemm_wg_fp8n for the wide
// FP8 products of at most 64 rows (V4.1's at batch 64). fast_gemm_wg_fp8n's launch
// blocks take 64 x rows (wgmma m64n64k16, 32 KB of shared memory a block) where
// fast_gemm_wg_fp8a's 128-row blocks copy and multiply zero rows for the other half:
// 0.998 → 0.809 ms a step at V4.1 batch 64 in run 39 (H100); the default since. Near
// fast_gemm_wide's values as fast_gemm_wg_fp8a is (TestWGFP8NearWide). (Its other end,
// blocks of 256 x rows on m64n256k16, ran slower than fast_gemm_wg_fp8a at batch 256 in
// the same run, 1.90 against 1.71 ms, and was removed; and fast_gemm_wg_fp8n itself at
// batch 256, four blocks a multiprocessor each widening its weights for 64 rows, 2.07
// against 1.71 ms in run 39c.) Read when a program is bound.
const EnvWGN64 = "DEEPINFER_CUDA_WG_N64"

// EnvWGBF16W set to 0 runs the wide products of bf16 weights and bf16 activations (V4.1's
// wo_a: 8 groups of 1,024 weight rows) on fast_gemm_wide (the mma.sync chain) instead of
// fast_gemm_wg_bf16w (wgmma, both operands copied into shared memory by cp.async a step
// ahead; each launch block's x values its group's): 0.332 → 0.226 ms at V4.1 batch 64
// and 0.483 → 0.386 ms at 256 in run 39 (H100); the default since. Near fast_gemm_wide's
// values (the wgmma order), so not in batch-invariant mode. Set to 4, those products
// (and V4's bf16 LM head in the fp8 mode) run fast_gemm_wg_bf16w4: the same code bounded
// to four launch blocks a multiprocessor (128 registers against 180; the same values;
// opt-in, untimed). Set to p, they run fast_gemm_wg_bf16wp: fast_gemm_wg_fp8p's blocks,
// a producer warpgroup copying the weight and x rows into the ring two consumer
// warpgroups multiply from (where each group's weight rows are a multiple of 128; the
// same values; opt-in, untimed). Read when a program is bound.
const EnvWGBF16W = "DEEPINFER_CUDA_WG_BF16W"

// EnvGemvStaged set to 1 runs fast_gemv_fp8s and fast_gemv_fp8s_q (each lane's weight
// bytes copied into shared memory a trip ahead, on a grid of gemvStagedBlocks) instead of
// fast_gemv_fp8 and fast_gemv_fp8_q (the bytes loaded into registers a trip at a time,
// a launch block a few pairs), and with EnvGemv=all the float32 and bf16 forms likewise:
// the same values; for comparisons (run 31 on the H200 measured the staged kernels 7-10%
// slower, so they are not the default). Read when a program is bound.
const EnvGemvStaged = "DEEPINFER_CUDA_GEMV_STAGED"

// EnvGemvOne picks the one-row steps' FP8 products: unset (or p) fast_gemv1p_fp8 and
// fast_gemv1p_fp8_q (written for one activation row: each lane's addresses found once a
// pair, a trip's loads without branches, the weights read past L1, one row's sums, and
// stages of two pieces in two register sets, the next stage's loads issued before a
// stage is summed), 1 fast_gemv1_fp8 and _fp8_q (the same without the stages), b
// fast_gemv1b_fp8 and _fp8_q (those bounded to six launch blocks a multiprocessor), 0
// fast_gemv_fp8 and _fp8_q (the products of one to four rows, the default until run 32).
// The same values bit for bit. Run 32 (an H100; V4.1 layers 20-23, batch 1, context
// 4,096): the products' event time 0.568 ms with =0, 0.456 / 0.462 / 0.448 with =1 / =b
// / =p, the device time a step 3.371 → 3.222 / 3.192 / 3.216 ms; Nsight Compute: the
// =0 kernel stalled on L1TEX loads at 25% occupancy (13-43% of DRAM throughput), =p
// 14-59%. Not with EnvGemvStaged=1 (the staged kernels then). Read when a program is
// bound.
const EnvGemvOne = "DEEPINFER_CUDA_GEMV_ONE"

// gemvOnePrefix maps EnvGemvOne's values to their kernels' prefix ("0": none, the
// products of one to four rows).
var gemvOnePrefix = map[string]string{"1": "fast_gemv1_", "b": "fast_gemv1b_", "p": "fast_gemv1p_"}

// EnvAttAhead set to 0 runs V4.1's tensor-core attention output in small steps on
// csa_tc_out_n instead of csa_tc_out_na (the default since run 32: csa_tc_out_n with four
// key steps' probabilities and values loaded before the first of them is multiplied; the
// same mma in the same order, so the same values bit for bit; run 32 on an H100, V4.1
// layers 20-23, batch 1: 0.152 → 0.125 ms a step). Read when a program is bound.
const EnvAttAhead = "DEEPINFER_CUDA_ATT_AHEAD"

// EnvGemv set to 0 keeps the fast products of FP8 weights and at most four activation
// rows (decode at batch 1-4) on the split and the warp tiles (fast_gemm_m1_fp8_only,
// with fast_sum for sliced reductions) instead of fast_gemv_fp8 and fast_gemv_fp8_q
// (CUDA cores, x's rows read directly, one to four warps a pair of weight rows; another
// summation order, near the tiles' values rather than equal); set to "all" it also runs
// float32 and bf16 weights' on fast_gemv_f32 and _bf16 (slower than the tiles for the LM
// heads on the H200, run 28c). Read when a program is bound; for comparisons.
const EnvGemv = "DEEPINFER_CUDA_GEMV"

// quantSplitArgs fills FastQuantSplitArgs: M rows of K values at x quantized (mode) and
// split into the halves at xs (Kp values a row; the FP4 tiles' pair order with fp4); with
// xq ≠ 0 (mode 2) also their E4M3 codes there (K a row) and their pieces' scales after
// (K/32 floats a row).
func quantSplitArgs(s *Step, a *ArgBuf, x devptr, M, K, Kp int64, xs devptr, mode int64, fp4, wide bool, xq devptr) int64 {
	a.P(x)
	a.P(xs)
	a.P(xs + devptr(M*2*Kp))
	a.I(M)
	a.I(K)
	a.I(Kp)
	a.I(mode)
	a.I(b2i(fp4))
	a.P(s.Err)
	qs := int64(1)
	if wide && M >= quantSplitWideRows {
		qs = quantSplitPieces
	}
	a.I(qs)
	a.P(xq)
	if xq != 0 {
		a.P(xq + devptr(M*K))
	} else {
		a.P(0)
	}
	return M * ((Kp/32 + qs - 1) / qs) * 32 // a warp qs pieces of 32 values
}

// quantSplitPieces is tensorcore.cu's QS_PIECES: the pieces of 32 values of a row a warp
// of fast_quant_split takes in steps of at least quantSplitWideRows rows (one below:
// on an H100, run 46a, four a warp took V4.1's 31 launches at batch 256 from 0.411 to
// 0.347 ms and at batch 1 from 0.110 to 0.149 ms, the same at 64). The same values
// either way.
const (
	quantSplitPieces   = 4
	quantSplitWideRows = 128
)

// EnvQuantSplitWide set to 0 keeps fast_quant_split at one piece a warp at every batch
// size (the same values; a comparison in one run; read when a program is bound).
const EnvQuantSplitWide = "DEEPINFER_CUDA_QUANT_SPLIT_WIDE"

func quantSplitWideOn() bool { return os.Getenv(EnvQuantSplitWide) != "0" }

// EnvQuantSplit set to 0 keeps V4.1's activation quantization (dense_quant) and the
// split into bf16 halves (fast_split, fast_split_fp4) as two launches instead of
// fast_quant_split's one (the same bits; a comparison in one run; read when a program
// is bound).
const EnvQuantSplit = "DEEPINFER_CUDA_QUANT_SPLIT"

// quantSplitOn reports whether fast products may fuse the quantization and the split.
func quantSplitOn() bool { return os.Getenv(EnvQuantSplit) != "0" }

// EnvXExact set to 0 keeps the lo halves' mma in products whose activations are bf16
// values already (V4.1's quantized activations; their lo halves are zero, so the values
// are the same; a comparison in one run; read when a program is bound).
const EnvXExact = "DEEPINFER_CUDA_XEXACT"

// xExactOn reports whether products may leave out the lo mma of bf16 activations.
func xExactOn() bool { return os.Getenv(EnvXExact) != "0" }

// xexactArg is a split's xexact: 0 both halves, 1 bf16 values already (checked: error
// 600), 2 rounded to bf16 there (the fp8 numerics' roundX).
func xexactArg(exact, round bool) int64 {
	switch {
	case round:
		return 2
	case exact:
		return 1
	}
	return 0
}

// EnvFP8BF16R chooses the kernel of the fp8 numerics' products of bf16 weights and
// rounded activations (V4's head and bf16 linears) of more than 32 rows: by default those
// of at most bf16RRows rows run on fast_gemm_wg_bf16 (x as wgmma's register operand, the
// weights from shared memory; one pass, the lo halves left out) and larger ones on the
// wide fast_gemm_wg_bf16w; set to 1, every one on fast_gemm_wg_bf16; set to 0, every one
// on fast_gemm_wg_bf16w. Run 52 (an H100, V4 layers 4-5 at 512, the same call): V4's
// head 0.608 → 0.449 ms at batch 64 on fast_gemm_wg_bf16, 1.139 → 1.194 at 256. Read
// when a program is bound.
const EnvFP8BF16R = "DEEPINFER_CUDA_FP8_BF16R"

// bf16RRows: the most rows of the fp8 numerics' bf16 products run on fast_gemm_wg_bf16
// by default (EnvFP8BF16R; run 52 timed 64 faster there and 256 slower, nothing between)
var bf16RRows = int64(128)

// EnvFP8Round set to 0 keeps V4's products in the fp8 numerics on both bf16 halves of
// their float32 activations (the fast mode's products) instead of rounding the
// activations to bf16 (roundX). Read when a program is bound.
const EnvFP8Round = "DEEPINFER_CUDA_FP8_ROUND"

// roundX reports whether the fp8 numerics round this program's product activations to
// bf16 (one mma a product, no lo halves): V4's, whose activations are float32 (V4.1's
// are bf16 or MXFP8 values where its reference rounds them, and stay so); never in the
// batch-invariant mode. DeepSeek's kernels take a product's activations as FP8 (1×128
// blocks) or bf16 values, so bf16 is no coarser than what they compute.
func (b *Bind) roundX() bool {
	rt := b.rt
	return rt != nil && rt.fp8 && !rt.invariant && rt.plan != nil && !strings.HasPrefix(rt.plan.ModelType, "deepseek_v41") &&
		xExactOn() && os.Getenv(EnvFP8Round) != "0"
}

// EnvM1Bounds set to 0 runs the one-tile FP8 products on fast_gemm_m1_fp8 instead of
// fast_gemm_m1_fp8_b4, the same code capped at 128 registers a thread (four launch
// blocks a multiprocessor instead of three; the same values). Run 14b on the H200: V4's
// FP8 one-row products 0.308 → 0.236 ms, its batch-1 step 1.911 → 1.837 ms. Read when a
// program is bound; for comparisons.
const EnvM1Bounds = "DEEPINFER_CUDA_M1_BOUNDS"

// EnvM1Only set to 0 runs the one-tile FP8 products whose every tile takes the loop
// with the weight's bytes steps ahead (N a multiple of 16, rows of whole 16-value
// pieces) on fast_gemm_m1_fp8_b4, whose body also carries fast_tile's paths for every
// other format, instead of fast_gemm_m1_fp8_only, that loop alone in a kernel body,
// which for bf16 activations (xexact) also loads the activation values of the steps
// ahead with their weight bytes (fast_m1_fp8_loop<true>). The same values; at most 128 registers a
// thread either way. On the H200 the loop alone was no faster (run 22a: 0.680 → 0.675
// ms, V4.1's one-row FP8 products at batch 1) and with the activations ahead 14% faster
// (run 22b: 0.691 → 0.596 ms); the default since. For comparisons; read when a program
// is bound.
const EnvM1Only = "DEEPINFER_CUDA_M1_ONLY"

// EnvTiles set to 0 keeps V4.1's ratio-1 compressor projections (gonum's 64-value
// blocks) on csa_fast_proj_part and csa_fast_proj_sum instead of csa_fast_proj_tile (the
// same values; run 14a on the H200: 6.35 → 1.29 ms at batch 256, an 8,192-token
// prefill's 170 → 19 ms). Read when a program is bound; for comparisons.
const EnvTiles = "DEEPINFER_CUDA_TILES"

// EnvGemvTiles set to 0 keeps V4.1's fast router and mixes in decode steps on the staged
// rows and lane kernels instead of their tile kernels (moe_fast_gate41_tile1,
// moe_fast_gate41_tile, mhc_fast_mix41_tile: numerics.h gemv_tile; the same values).
// The tiles are the default since run 15 on the H200 (docs/perf/small-kernels.md: each
// chunk's loads issued together; the router 0.476 / 1.015 / 3.881 → 0.094 / 0.811 /
// 1.894 ms, the mixes 1.190 / 2.576 → 0.721 / 1.801 at batch 1 / 64 / 256; batch 1's
// mixes stay on the staged rows). Read when a program is bound.
const EnvGemvTiles = "DEEPINFER_CUDA_GEMV_TILES"

// EnvSeqTiles set to 0 keeps V4.1's fast router and mixes in steps of long sequences
// (more than 128 rows a sequence, where MKL's order is one sequential chain a value) on
// the exact kernels (moe_gate_v41, mhc_mix41_dot: fma32, one work item a value reading
// its rows from global memory) instead of their tiles (moe_fast_gate41_seq,
// mhc_fast_mix41_seq: numerics.h seq_tile, the fast mode's chains with fma_fast). Read
// when a program is bound.
const EnvSeqTiles = "DEEPINFER_CUDA_SEQ_TILES"

// seqTilesOn reports whether the fast mode's long steps run the router and mixes on
// their sequential-order tiles.
func seqTilesOn() bool { return os.Getenv(EnvSeqTiles) != "0" }

// tilesOn reports whether the compressor's projections may run on their tiles.
func tilesOn() bool { return os.Getenv(EnvTiles) != "0" }

// gemvTilesOn reports whether the router and mixes run on their tiles.
func gemvTilesOn() bool { return os.Getenv(EnvGemvTiles) != "0" }

// V4.1's fast router and mix tiles of decode steps (moe_fast_gate41_tile,
// mhc_fast_mix41_tile) have forms whose rows are staged in shared memory by cp.async, a
// few 16-byte copies a thread a chunk, instead of a load, a widening and a store a
// value (numerics.h gemv_tile_async; the same values): moe_fast_gate41_tile_a, the
// router's default since run 23a (1.22 → 0.59 ms a batch-256 step; EnvGemvAsync=0
// keeps moe_fast_gate41_tile), and mhc_fast_mix41_tile_a, slower there (1.19 → 1.32
// ms: its float32 stages take 42 KB of shared memory a block) and opt-in
// (EnvMixAsync=1). The unstaged mix tiles run bounded to 128 registers (four blocks a
// multiprocessor instead of two: mhc_fast_mix41_tile_b) in steps of more than
// mixTileBRows tokens, unbounded (mhc_fast_mix41_tile) below; EnvMixTile=b takes the
// bounded ones and EnvMixTile=0 the unbounded ones at every step size. The same values
// every way; read when a program is bound.
const (
	EnvGemvAsync = "DEEPINFER_CUDA_GEMV_ASYNC"
	EnvMixAsync  = "DEEPINFER_CUDA_MIX_ASYNC"
	EnvMixTile   = "DEEPINFER_CUDA_MIX_TILE"
)

// routerTileName names the router's tile kernel (mixTileKernel, below, the mixes' by step size).
func routerTileName() string {
	if os.Getenv(EnvGemvAsync) == "0" {
		return "moe_fast_gate41_tile"
	}
	return "moe_fast_gate41_tile_a"
}

// mixTileKernel picks the mixes' tile kernel of a step of T tokens.
func mixTileKernel() func(T int64) string {
	async, tile := os.Getenv(EnvMixAsync) == "1", os.Getenv(EnvMixTile)
	return func(T int64) string {
		switch {
		case async:
			return "mhc_fast_mix41_tile_a"
		case tile == "b" || (tile != "0" && T > mixTileBRows):
			return "mhc_fast_mix41_tile_b"
		}
		return "mhc_fast_mix41_tile"
	}
}

// ceilDiv is n / d rounded up (d > 0).
func ceilDiv(n, d int64) int64 { return (n + d - 1) / d }

// EnvBlockGemm set to 0 keeps products of more than 32 rows on fast_gemm_m4 instead of
// fast_gemm_blk and fast_gemm_wide (the same values; a comparison in one run; read when
// a program is bound).
const EnvBlockGemm = "DEEPINFER_CUDA_BLOCK_GEMM"

// EnvBlockPrefetch set to 0 stops fast_gemm_blk asking for the next step's weights in
// the L1 cache (prefetch.global.L1, a hint: the same values; a comparison in one run;
// read when a program is bound).
const EnvBlockPrefetch = "DEEPINFER_CUDA_BLOCK_PREFETCH"

// EnvM1Pipe set to 0 runs one-tile FP8 products on fast_gemm_m1 instead of
// fast_gemm_m1_fp8, which loads the weight's bytes several reduction steps ahead
// (tensorcore.cu's fast_m1_fp8: the same values; a comparison in one run; read when a
// program is bound).
const EnvM1Pipe = "DEEPINFER_CUDA_M1_PIPE"

// fastBlockRows and fastBlockN are tensorcore.cu's FAST_BLK_ROWS and FAST_BLK_N: the
// rows of x and the weight rows a fast_gemm_blk block holds.
const (
	fastBlockRows = 64
	fastBlockN    = 128
)

// fastBlockOK reports whether fast_gemm_blk can run a product of N weight rows in G
// groups: a block's 128 weight rows must read the same rows of x (one group).
func fastBlockOK(N, G int64) bool { return G <= 1 || (N/G)%fastBlockN == 0 }

// fastExpertShape is a routed-experts instruction's shape: E experts of w1, w3 [I, D]
// and w2 [D, I], k slots a token.
type fastExpertShape struct {
	E, D, I, k, v41 int64
	limit           float64
}

// fastExpertSlices is the reduction's slice count for the experts' products (shapes
// only): a reduction of K values, padded to a multiple of 128, in at most maxS slices
// (fastExpertMaxSlices, EnvFP4Slices) of at least 512 values and a multiple of 128
// each (the FP4 tiles' step).
func fastExpertSlices(K, maxS int64) (S, ks int64) {
	kp := fastExpertPad(K)
	S = min(maxS, max(1, kp/512))
	ks = (kp/S + 127) / 128 * 128
	return (kp + ks - 1) / ks, ks
}

// fastExpertMaxSlices is the default most slices of an expert product's reduction.
const fastExpertMaxSlices = 4

// fp4DownSlices, fp4SliceBlocks: by default the w2 products of a step on the FP4 register
// tiles take at most fp4DownSlices slices where that still makes fp4SliceBlocks launch
// blocks (four waves of four blocks on 132 multiprocessors), fastExpertMaxSlices
// otherwise (a decode step of a few tokens), unless EnvFP4Slices is set or in
// batch-invariant mode (where a step's sums must not follow its size). Run 53 (an H100,
// the same call, uniform routing): V4.1's w2 tiles 3.270 → 2.996 ms at batch 64 and
// 5.057 → 4.704 at 256 with two slices (one: 3.064 / 4.701), V4's 0.924 → 0.878 and
// 1.234 → 1.150; the w1/w3 tiles got slower with fewer (V4.1 5.783 → 5.936 / 6.364 at
// 64 with two / one), so they keep four.
const (
	fp4DownSlices  = 2
	fp4SliceBlocks = 4 * 4 * 132
)

// sd is the w2 products' slices this step (fp4DownSlices' rule).
func (f *fastExperts) sd(s *Step) (S, ks int64) {
	if f.sd2 > 0 && f.fp4Tiles(s) && !f.fp4Wide(s) && !f.e4Step(s) && f.nact(s)*((f.sh.D+127)/128)*f.sd2 >= fp4SliceBlocks {
		return f.sd2, f.ksd2
	}
	return f.Sd, f.ksd
}

// EnvFP4Slices sets the most slices of the experts' reductions (default 4): "N" for both
// products, "U,D" for the w1/w3 and the w2 products, each 1 to 16. Fewer slices are
// fewer, longer launch blocks (each block's setup, first loads and partial sums paid
// fewer times) and fewer partial sums written and read; more slices, more blocks for
// steps of few experts. The values change with the slices (the fast mode's sums are
// split there). For comparisons; read when a program is bound.
const EnvFP4Slices = "DEEPINFER_CUDA_FP4_SLICES"

// expertSlicesEnv parses EnvFP4Slices: the most slices of the up and down products.
func expertSlicesEnv() (up, down int64, err error) {
	v := os.Getenv(EnvFP4Slices)
	if v == "" {
		return fastExpertMaxSlices, fastExpertMaxSlices, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > 2 {
		return 0, 0, fmt.Errorf("%s=%q: want N or U,D", EnvFP4Slices, v)
	}
	var n [2]int64
	for i, p := range parts {
		x, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || x < 1 || x > 16 {
			return 0, 0, fmt.Errorf("%s=%q: each count 1 to 16", EnvFP4Slices, v)
		}
		n[i] = x
	}
	if len(parts) == 1 {
		n[1] = n[0]
	}
	return n[0], n[1], nil
}

// fastExpertPad is an expert product's reduction padded for its activation halves: a
// multiple of 128 values (tensorcore_fp4.cu's step; tensorcore.cu's tiles need 64).
func fastExpertPad(K int64) int64 { return (K + 127) / 128 * 128 }

// fastExperts adds the fast mode's expert launches to bindMoEExperts' (which lists the
// experts' slots and sums a token's slots afterwards): x (or its MXFP8 values) split
// into halves, the w1/w3 tiles, the SwiGLU into hid; then (after the caller's V4.1
// quantization of hid) hid split into halves, the w2 tiles, their sum into y.
type fastExperts struct {
	b                              *Bind
	sh                             fastExpertShape
	x                              func(*Step) devptr
	tab, counts, off, list, hid, y int
	xs, hs, part, act              int
	Su, ksu, Sd, ksd, dp, ip       int64
	// sd2, ksd2: the w2 products' slices in steps on the FP4 register tiles with enough
	// blocks (sd; 0: none)
	sd2, ksd2 int64
	// planned: the step's moe_plan wrote the active experts (no fast_moe_active)
	planned func(*Step) bool
	// fp4 caches whether every expert weight is FP4 and the shapes suit
	// tensorcore_fp4.cu (0: not known yet, 1: yes, 2: no)
	fp4 int8
	// fp4Suffix names the FP4 tiles' variant: "" the pipelined kernels, "_reg" the
	// ones that load a step ahead into registers (the default; EnvFP4Pipe=1 the pipeline),
	// "_rega" those compiled for bf16 activations with their halves copied a stage ahead
	// (the default for them since run 34; EnvFP4XE=x "_regx", EnvFP4XE=0 the general
	// ones), "_reg8" the general ones finding rows g+8 from rows g (the default for them
	// since run 34; EnvFP4R8=0 keeps "_reg")
	fp4Suffix string
	// reg8a: with fp4Suffix "_reg8", the steps of (reg8a[0], reg8a[1]] tokens run
	// "_reg8a" (reg8aRows; zero: none)
	reg8a [2]int64
	// xexact is 1 when the activations (V4.1's MXFP8 x and hid) are bf16 values, 2 when
	// the fp8 numerics round them to bf16 in the splits (V4's: roundX), so the tiles
	// leave out the lo halves' mma
	xexact int64
	// quant 2: x and hid are unquantized and their splits quantize them to MXFP8
	// (fast_quant_split; the caller launches no dense_quant)
	quant int64
	// wide: EnvFP4Wide's tiles for steps with many slots an expert (fp4Wide)
	wide bool
	// dsum: fast_moe_dsum sums the w2 tiles' slices into y (false: the caller's
	// moe_out_parts reads the slices)
	dsum bool
	// e4: the fp8 numerics' e4m3 tiles (fast_moe_up_fp4_e4, fast_moe_down_fp4_e4) for the
	// steps that would take the register tiles (e4Step), x's and hid's E4M3 codes and
	// piece scales in scratch xq and hq (fast_quant_split writes them in those steps)
	e4 bool
	// tiled: the experts' FP4 weights are in the tiled layout (EnvFP4Tiled; the _regb,
	// _regbd or _regt tiles, and the wide ones' _widet)
	tiled  bool
	e4Name string // "_fp4_e4", or with EnvFP4E4=t "_fp4_e4t"
	xq, hq int
}

// EnvFP4E4 set to 1 runs V4.1's FP4 experts in the fp8 numerics mode on
// fast_moe_up_fp4_e4 / fast_moe_down_fp4_e4 (each 32-value block one e4m3 mma.sync from
// zero, scaled into float32: tensorcore_fp4.cu fp4_e4_tiles) instead of the fast mode's
// register tiles (_rega); set to t, on fast_moe_up_fp4_e4t / fast_moe_down_fp4_e4t (a
// row's step of codes one 16-byte load a lane, the quad's words exchanged by shuffles;
// the same values); set to w, on fast_moe_up_fp4_e4w / fast_moe_down_fp4_e4w (wgmma
// m64n8k32 e4m3: the widened codes from registers, the slots' codes from shared memory;
// the values of the others where the block sums are exact, near them on a GPU: wgmma
// sums a block at the tensor cores' FP8 precision). Opt-in: _e4 and _e4t were 36-60%
// slower than _rega on an H100 (runs 49-50; sm_90 has no FP8 mma.sync, and the compiler
// widens the codes again to f16 for two HMMA a product), _e4w 57-102% slower still (run
// 51: a wait for each round of products); docs/perf/moe.md. Read when a program is bound.
const EnvFP4E4 = "DEEPINFER_CUDA_FP4_E4"

// e4Setup decides whether the experts take the e4m3 tiles in the fp8 numerics mode (V4.1's
// activations quantized to MXFP8 by fast_quant_split, which then also writes their
// codes; not in the batch-invariant mode, where a step's choice of tiles must not follow
// its slot counts) and asks for the codes' scratch. up calls it, after the caller set
// quant.
func (f *fastExperts) e4Setup() {
	rt := f.b.rt
	env := os.Getenv(EnvFP4E4)
	f.e4 = rt != nil && rt.fp8 && !rt.invariant && f.quant == 2 && f.xexact == 1 && f.sh.v41 == 1 &&
		(env == "1" || env == "t" || env == "w")
	f.xq, f.hq = -1, -1
	f.e4Name = "_fp4_e4"
	switch env {
	case "t":
		f.e4Name = "_fp4_e4t"
	case "w":
		f.e4Name = "_fp4_e4w"
	}
	if f.e4 {
		f.xq = f.b.Scratch(f.sh.D+f.sh.D/8, 0)          // per token: D codes, D/32 float scales
		f.hq = f.b.Scratch(f.sh.k*(f.sh.I+f.sh.I/8), 0) // per token: k slots of I codes, I/32 scales
	}
}

// e4Step reports whether the step's experts run on the e4m3 tiles.
func (f *fastExperts) e4Step(s *Step) bool { return f.e4 && f.fp4Tiles(s) && !f.fp4Wide(s) }

// fp4Tiles reports whether the step's experts run on tensorcore_fp4.cu's tiles: every
// expert weight FP4 (fp4_g32) and both reductions whole 32-value scale blocks.
func (f *fastExperts) fp4Tiles(s *Step) bool {
	if f.fp4 == 0 {
		f.fp4 = 2
		if f.sh.D%32 == 0 && f.sh.I%32 == 0 {
			f.fp4 = 1
			for i := range 3 * f.sh.E {
				if fm := s.Arg(3 + int(i)).Fmt; fm != fmtFP4 && (fm != fmtFP4Tiled || !f.tiled) {
					f.fp4 = 2
					break
				}
			}
		}
	}
	return f.fp4 == 1
}

// fp4Wide reports whether the step's FP4 tiles run many slots a pass (tensorcore_fp4.cu
// fp4_tiles_wide: the weights widened once per 64 of an expert's slots for bf16
// activations (xexact), fast_moe_*_fp4_wide, or once per 32 for others, both halves
// staged, fast_moe_*_fp4_widel; the register tiles: once per 16): unless EnvFP4Wide=0,
// for steps of at least fp4WideSlots slots an expert on average (a prefill's; a decode
// step's are a few). The same values either way.
func (f *fastExperts) fp4Wide(s *Step) bool {
	return f.wide && s.Arg(2).Elems() >= fp4WideSlots*f.sh.E
}

// fp4WideName is the wide tiles' kernel of the experts' activations.
func (f *fastExperts) fp4WideName(kernel string) string {
	if f.tiled { // (the tiled layout: bf16 activations only)
		return kernel + "_fp4_widet"
	}
	if f.xexact != 0 {
		return kernel + "_fp4_wide"
	}
	return kernel + "_fp4_widel"
}

// fp4WideSlots is the average slots an expert from which EnvFP4Wide's tiles run (two
// passes of the 16-slot tiles).
const fp4WideSlots = 32

// EnvFP4Wide set to 0 keeps the FP4 tiles of steps with many slots an expert (prefill)
// on the register tiles instead of fast_moe_up_fp4_wide/fast_moe_down_fp4_wide (64 slots
// a pass; bf16 activations: V4.1's) or fast_moe_up_fp4_widel/fast_moe_down_fp4_widel
// (32 slots a pass, both halves: V4's float32 activations); the same values. The wide
// tiles are V4.1's default since run 21 on the H200 (docs/perf/moe.md: an 8,192-token
// prefill's experts 259 → 135 ms), three blocks a multiprocessor since run 22 (107 → 95
// ms); the widel tiles V4's since 2026-12-06. Read when a program is bound.
const EnvFP4Wide = "DEEPINFER_CUDA_FP4_WIDE"

// EnvFP4XE set to 0 runs the FP4 register tiles of bf16 activations (V4.1's, unless
// DEEPINFER_CUDA_XEXACT=0) as fast_moe_up_fp4_reg/fast_moe_down_fp4_reg, set to x as
// fast_moe_up_fp4_regx/fast_moe_down_fp4_regx (compiled for bf16 activations only,
// without the lo halves' staging and mma: the default from run 22 to run 34), instead of
// fast_moe_up_fp4_rega/fast_moe_down_fp4_rega (the _regx tiles with rows g+8 found from
// rows g and the slots' halves copied by cp.async a stage ahead: the default since run
// 34, docs/perf/moe.md). The same values; for comparisons; read when a program is bound.
const EnvFP4XE = "DEEPINFER_CUDA_FP4_XE"

// EnvFP4R8 set to 0 runs the general FP4 register tiles (V4's; V4.1's with
// DEEPINFER_CUDA_FP4_XE=0) as fast_moe_up_fp4_reg/fast_moe_down_fp4_reg instead of
// fast_moe_up_fp4_reg8/fast_moe_down_fp4_reg8, which find rows g+8 from rows g (four row
// pointers a lane fewer: the default since run 34, an H100, the same call: V4's up tiles
// 3.31 → 3.14 ms at batch 256, docs/perf/moe.md); set to a, as
// fast_moe_up_fp4_reg8a/fast_moe_down_fp4_reg8a (the _reg8 tiles with the slots' halves
// copied by cp.async two steps ahead) at every step size; set to 1, as _reg8 at every
// step size. Unset: _reg8, but _reg8a for the steps reg8aRows names. The same values; for
// comparisons; read when a program is bound.
const EnvFP4R8 = "DEEPINFER_CUDA_FP4_R8"

// fmtFP4 is prelude.h's Weight.fmt of fp4_g32 (Operand.Fmt).
const fmtFP4 = 4

func newFastExperts(b *Bind, sh fastExpertShape, x func(*Step) devptr, tab, counts, off, list, hid, y int) (*fastExperts, error) {
	f := &fastExperts{b: b, sh: sh, x: x, tab: tab, counts: counts, off: off, list: list, hid: hid, y: y, dsum: true}
	su, sd, err := expertSlicesEnv()
	if err != nil {
		return nil, err
	}
	f.Su, f.ksu = fastExpertSlices(sh.D, su)
	f.Sd, f.ksd = fastExpertSlices(sh.I, sd)
	if os.Getenv(EnvFP4Slices) == "" && (b.rt == nil || !b.rt.invariant) {
		if S, ks := fastExpertSlices(sh.I, fp4DownSlices); S < f.Sd {
			f.sd2, f.ksd2 = S, ks
		}
	}
	f.dp, f.ip = fastExpertPad(sh.D), fastExpertPad(sh.I)
	f.xs = b.Scratch(4*f.dp, 0)
	f.hs = b.Scratch(4*sh.k*f.ip, 0)
	f.part = b.Scratch(4*sh.k*max(2*f.Su*sh.I, f.Sd*sh.D), 0)
	f.act = b.Scratch(0, 4*sh.E)
	if os.Getenv(EnvFP4Tiles) == "0" {
		f.fp4 = 2
	}
	if os.Getenv(EnvFP4Pipe) != "1" {
		f.fp4Suffix = "_reg"
	}
	f.wide = os.Getenv(EnvFP4Wide) != "0"
	if (sh.v41 == 1 && xExactOn()) || b.roundX() {
		f.xexact = 1
		if sh.v41 != 1 {
			f.xexact = 2 // (the fp8 numerics: V4's activations rounded to bf16 by the splits)
		}
		if f.fp4Suffix == "_reg" {
			f.fp4Suffix = tileSuffix(EnvFP4XE, "x", "_regx", "_rega")
		}
	}
	if f.fp4Suffix == "_reg" {
		f.fp4Suffix = tileSuffix(EnvFP4R8, "a", "_reg8a", "_reg8")
		if f.fp4Suffix == "_reg8" && os.Getenv(EnvFP4R8) != "1" {
			f.reg8a = [2]int64{reg8aRows[0], reg8aRows[1]}
		}
	}
	if len(b.weights) > 3 && tiledFP4(b.rt, b.weights[3]) {
		// the experts' weights in the tiled layout (EnvFP4Tiled): only _rega's form reads it
		if f.fp4Suffix != "_rega" || f.fp4 == 2 || os.Getenv(EnvFP4E4) != "" {
			return nil, fmt.Errorf("%s=%s: the experts would run on the %s tiles%s, which do not read the tiled FP4 layout (only the fast and fp8 modes' _rega tiles have forms that do: V4.1's, and V4's in the fp8 mode, without %s, %s, %s and %s)",
				EnvFP4Tiled, os.Getenv(EnvFP4Tiled), f.fp4Suffix, map[bool]string{true: " (or the generic or e4m3 ones)"}[f.fp4 == 2 || os.Getenv(EnvFP4E4) != ""], EnvFP4Tiles, EnvFP4Pipe, EnvFP4XE, EnvFP4E4)
		}
		f.fp4Suffix, f.tiled = b.rt.fp4TiledSuffix, true
		b.fp4TiledArgs = [2]int{3, 3 + int(3*sh.E)}
	}
	return f, nil
}

// reg8aRows: V4's FP4 register tiles of steps of more than reg8aRows[0] and at most
// reg8aRows[1] tokens run as _reg8a (the slots' halves copied two steps ahead), the others
// as _reg8, unless EnvFP4R8 is set. Run 35 (an H100, V4 layers 4-5, 4,096, the same
// call): _reg8a took the tiles 4.836 → 4.692 ms at batch 256 (−3.0%, the step −2.0%) and
// 3.404 → 3.520 at 64 (+3.4%); steps between 64 and 256 tokens and prefill chunks past 512
// (where an expert has many slots) were not timed, so they stay on _reg8.
var reg8aRows = [2]int64{128, 512} // (a variable: the tests move it)

// fp4Name is the FP4 register tiles' kernel for a step of T tokens (kernel_fp4 +
// fp4Suffix, or _reg8a by reg8aRows).
func (f *fastExperts) fp4Name(kernel string, T int64) string {
	if f.reg8a[1] > 0 && T > f.reg8a[0] && T <= f.reg8a[1] {
		return kernel + "_fp4_reg8a"
	}
	return kernel + "_fp4" + f.fp4Suffix
}

// tileSuffix is the register tiles' suffix env selects: "_reg" when it is 0, alt when it
// is altValue, def otherwise.
func tileSuffix(env, altValue, alt, def string) string {
	switch os.Getenv(env) {
	case "0":
		return "_reg"
	case altValue:
		return alt
	}
	return def
}

// EnvFP4Tiles set to 0 runs FP4 experts on tensorcore.cu's generic tiles instead of
// tensorcore_fp4.cu's (a comparison of the two in one run; read when a program is bound).
const EnvFP4Tiles = "DEEPINFER_CUDA_FP4_TILES"

// EnvFP4Pipe set to 1 runs the FP4 tiles as the pipelined fast_moe_up_fp4/
// fast_moe_down_fp4 (cp.async copies into shared memory, steps ahead) instead of the
// default fast_moe_up_fp4_reg/fast_moe_down_fp4_reg (each lane's next step of weights
// loaded into registers): the same values. The pipeline was the default until the H200
// measured it slower (run 11c, V4 layers 4-5, context 512: the up tiles 4.05 against 3.12
// ms, the down tiles 1.94 against 1.67 ms at batch 256); read when a program is bound.
const EnvFP4Pipe = "DEEPINFER_CUDA_FP4_PIPE"

// split adds a fast_split (fast_split_fp4 for the FP4 tiles' order) of rows(s) rows
// of width K (row stride K) from src into the halves at scratch xs, Kp values a row.
// With xq ≥ 0 (the e4m3 tiles), the quantization also writes the codes there in the steps
// that take them.
func (f *fastExperts) split(src func(*Step) devptr, rows func(*Step) int64, xs, xq int, K, Kp int64) {
	qsWide := quantSplitWideOn()
	f.b.Launch("fast_quant_split", func(s *Step, a *ArgBuf) int64 {
		if f.quant == 0 {
			return 0
		}
		xqp := devptr(0)
		if xq >= 0 && f.e4Step(s) {
			xqp = s.Scratch(xq)
		}
		return quantSplitArgs(s, a, src(s), rows(s), K, Kp, s.Scratch(xs), f.quant, f.fp4Tiles(s), qsWide, xqp)
	})
	for _, fp4 := range []bool{false, true} {
		kernel := "fast_split"
		if fp4 {
			kernel = "fast_split_fp4"
		}
		f.b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
			if f.quant != 0 || f.fp4Tiles(s) != fp4 {
				return 0
			}
			return f.splitArgs(s, a, src, rows, xs, K, Kp)
		})
	}
}

// splitArgs fills FastSplitArgs for split.
func (f *fastExperts) splitArgs(s *Step, a *ArgBuf, src func(*Step) devptr, rows func(*Step) int64, xs int, K, Kp int64) int64 {
	M := rows(s)
	a.P(src(s))
	a.P(0)
	a.P(s.Scratch(xs))
	a.P(s.Scratch(xs) + devptr(M*2*Kp))
	a.I(M)
	a.I(K)
	a.I(Kp)
	a.I(K)
	a.I(M)
	a.P(s.Err)
	a.I(f.xexact) // V4.1's expert activations are MXFP8 values: bf16 already
	return M * Kp / 2
}

// args fills FastMoEArgs: activations' halves at xs (rows(s) rows of Kp), with xq ≥ 0
// in the e4m3 tiles' steps their codes and scales there, output rows of N, reduction K
// in S slices of ks, which 0 (w1/w3) or 1 (w2).
// nact is how many experts can have slots: min(E, slots).
func (f *fastExperts) nact(s *Step) int64 { return min(f.sh.E, s.Arg(2).Elems()) }

func (f *fastExperts) args(s *Step, a *ArgBuf, xs, xq int, xrows, N, K, Kp, S, ks int64, out devptr) {
	sh := f.sh
	a.P(s.Scratch(xs))
	a.P(s.Scratch(xs) + devptr(xrows*2*Kp))
	a.P(s.Table(f.tab))
	a.P(s.Scratch(f.counts))
	a.P(s.Scratch(f.off))
	a.P(s.Scratch(f.list))
	a.P(s.Arg(2).Ptr)
	a.P(s.Arg(1).Ptr)
	a.P(s.Scratch(f.part))
	a.P(out)
	a.P(s.Scratch(f.act))
	a.I(s.Arg(2).Elems())
	a.I(sh.k)
	a.I(sh.E)
	a.I(N)
	a.I(K)
	a.I(Kp)
	a.I(S)
	a.I(ks)
	a.I(f.nact(s))
	a.I(sh.v41)
	a.F(sh.limit)
	a.I(f.xexact) // V4.1's expert activations (x and hid) are MXFP8 values
	if xq >= 0 && f.e4Step(s) {
		a.P(s.Scratch(xq))
		a.P(s.Scratch(xq) + devptr(xrows*K))
	} else {
		a.P(0)
		a.P(0)
	}
}

// tiles adds a tiles kernel's three entries: kernel_fp4 (kernel_fp4_reg with
// EnvFP4Pipe=0) for FP4 experts (tensorcore_fp4.cu: a launch block of 128 work items
// per active expert, rows rows of weights and slice; fp4 is that block count), kernel_f32 for float32 experts and kernel
// for the others (tensorcore.cu's warp tiles: fill's count); the step runs the one its
// weights need (expert 0's w1 stands for all but FP4, which checks every expert).
func (f *fastExperts) tiles(kernel string, fill func(s *Step, a *ArgBuf) int64, fp4 func(s *Step) int64) {
	names := []string{f.fp4WideName(kernel), kernel + "_fp4" + f.fp4Suffix}
	if f.reg8a[1] > 0 {
		names = append(names, kernel+"_fp4_reg8a") // (reg8aRows' steps)
	}
	for i, name := range names {
		wide := i == 0
		f.b.LaunchShared(name, 128, fp4BulkShared(name), func(s *Step, a *ArgBuf) int64 {
			if !f.fp4Tiles(s) || f.fp4Wide(s) != wide || (!wide && f.fp4Name(kernel, s.Arg(0).Rows()) != name) || f.e4Step(s) {
				return 0
			}
			fill(s, a)
			return fp4(s) * 128
		})
	}
	if f.e4 {
		f.b.Launch(kernel+f.e4Name, func(s *Step, a *ArgBuf) int64 {
			if !f.e4Step(s) {
				return 0
			}
			fill(s, a)
			return fp4(s) * 128
		})
	}
	for _, f32 := range []bool{false, true} {
		name := kernel
		if f32 {
			name += "_f32"
		}
		f.b.Launch(name, func(s *Step, a *ArgBuf) int64 {
			if (s.Arg(3).Fmt == 0) != f32 || f.fp4Tiles(s) {
				return 0
			}
			return fill(s, a)
		})
	}
}

// up: x's halves, the w1/w3 tiles and the SwiGLU into hid.
func (f *fastExperts) up() {
	sh := f.sh
	tokens := func(s *Step) int64 { return s.Arg(0).Rows() }
	f.e4Setup()
	f.split(f.x, tokens, f.xs, f.xq, sh.D, f.dp)
	f.b.Launch("fast_moe_active", func(s *Step, a *ArgBuf) int64 {
		if f.planned != nil && f.planned(s) {
			return 0 // moe_plan wrote the list (moe.cu)
		}
		f.args(s, a, f.xs, -1, tokens(s), sh.I, sh.D, f.dp, f.Su, f.ksu, 0)
		return 32 // one warp (tensorcore.cu)
	})
	f.tiles("fast_moe_up", func(s *Step, a *ArgBuf) int64 {
		f.args(s, a, f.xs, f.xq, tokens(s), sh.I, sh.D, f.dp, f.Su, f.ksu, 0)
		return f.nact(s) * ((sh.I + fastTileN - 1) / fastTileN) * f.Su * 32
	}, func(s *Step) int64 { return f.nact(s) * ((sh.I + 63) / 64) * f.Su })
	f.b.Launch("fast_moe_act", func(s *Step, a *ArgBuf) int64 {
		f.args(s, a, f.xs, -1, tokens(s), sh.I, sh.D, f.dp, f.Su, f.ksu, s.Scratch(f.hid))
		return s.Arg(2).Elems() * sh.I
	})
}

// down: hid's halves, the w2 tiles and their sum into y.
func (f *fastExperts) down() {
	sh := f.sh
	slots := func(s *Step) int64 { return s.Arg(2).Elems() }
	f.split(func(s *Step) devptr { return s.Scratch(f.hid) }, slots, f.hs, f.hq, sh.I, f.ip)
	f.tiles("fast_moe_down", func(s *Step, a *ArgBuf) int64 {
		S, ks := f.sd(s)
		f.args(s, a, f.hs, f.hq, slots(s), sh.D, sh.I, f.ip, S, ks, 0)
		return f.nact(s) * ((sh.D + fastTileN - 1) / fastTileN) * S * 32
	}, func(s *Step) int64 { S, _ := f.sd(s); return f.nact(s) * ((sh.D + 127) / 128) * S })
	f.b.Launch("fast_moe_dsum", func(s *Step, a *ArgBuf) int64 {
		if !f.dsum {
			return 0 // moe_out_parts sums the slices
		}
		S, ks := f.sd(s)
		f.args(s, a, f.hs, -1, slots(s), sh.D, sh.I, f.ip, S, ks, s.Scratch(f.y))
		return slots(s) * sh.D
	})
}

// fastWideRows and fastWideN are tensorcore.cu's FAST_WIDE_ROWS and FAST_WIDE_N: the
// rows of x and the weight rows a fast_gemm_wide block holds.
const (
	fastWideRows = 128
	fastWideN    = 64
)

// fastWideMin is the most rows a product keeps on fast_gemm_m4 / fast_gemm_blk when
// fast_gemm_wide could run it: on the H200 the wide kernel's first form took 2.10 ms a
// step for V4.1's FP8 products at 64 rows against the block kernel's 1.86 ms (run 16a),
// its second form 1.60 against 1.88 (run 22b, DEEPINFER_CUDA_WIDE_MIN=32), and 2.62
// against 4.89 at 256 rows (run 16b; docs/perf/dense-gemm.md).
const fastWideMin = 32

// EnvWideMin set to a number N runs products of bf16 activations (xexact) with more than
// N rows on fast_gemm_wide (where its shapes allow) instead of more than fastWideMin (the
// same values). For comparisons; read when a program is bound.
const EnvWideMin = "DEEPINFER_CUDA_WIDE_MIN"

// envRows is the row count the environment variable env names (a whole number ≥ 0), or
// def when it is unset or not one.
func envRows(env string, def int64) int64 {
	if n, err := strconv.ParseInt(os.Getenv(env), 10, 64); err == nil && n >= 0 {
		return n
	}
	return def
}

// fastWideOK reports whether fast_gemm_wide can run a product of N weight rows in G
// groups: a block's 64 weight rows in one group.
func fastWideOK(N, G int64) bool { return G <= 1 || (N/G)%fastWideN == 0 }

// EnvStageF32 chooses the kernel of float32-weight products of more than 32 rows (V4's
// fixtures, V4.1's LM head): fast_gemm_blk_f32 (each warp's weights loaded into
// registers) or a staged form (tensorcore.cu, fast_gemm_stage_f32: the weights staged in
// shared memory by asynchronous copies, half a reduction step a stage; "1" four launch
// blocks a multiprocessor, "2" two, fast_gemm_stage_f32_b2). Unset: the two-block staged
// form for products of at least fastStageRows rows, fast_gemm_blk_f32 below; "0":
// fast_gemm_blk_f32 always; "1", "2": that staged form always. Every form gives the same
// values bit for bit (TestStageF32MatchesBlock), so the choice by rows keeps a row's
// value independent of the batch. Read when a program is bound. On the H200 (run 20a,
// V4.1's head, docs/perf/dense-gemm.md): the two-block form 1.524 / 4.966 ms at 64 / 256
// rows against fast_gemm_blk_f32's 1.478 / 5.771; the four-block form spilled and lost
// (runs 19a, 19b).
const EnvStageF32 = "DEEPINFER_CUDA_STAGE_F32"

// fastStageRows is the fewest rows the default runs on the two-block staged kernel: it
// lost at 64 rows and won at 256 (run 20a); between them not measured.
const fastStageRows = 128

// stageF32Kernel is the staged float32 kernel EnvStageF32 chooses for a product of M
// rows ("" for fast_gemm_blk_f32).
func stageF32Kernel(env string, M int64) string {
	switch env {
	case "0":
		return ""
	case "1":
		return "fast_gemm_stage_f32"
	case "2":
		return "fast_gemm_stage_f32_b2"
	}
	if M >= fastStageRows {
		return "fast_gemm_stage_f32_b2"
	}
	return ""
}

// EnvHeadWG set to 0 keeps products of float32 weights and bf16-valued activations
// (V4.1's LM head) of more than 32 rows on the mma.sync kernels (fast_gemm_blk_f32,
// fast_gemm_stage_f32_b2) instead of fast_gemm_wg_f32 (wgmma: run 23b, V4.1's head at
// batch 256 3.87 → 1.92 ms; near their values, not equal, and not in batch-invariant
// mode; read when a program is bound). By default (since run 24: V4.1's head at batch
// 256 1.91 → 1.62 ms on the H200) fast_gemm_wg_f32p: the same products in the same
// order as fast_gemm_wg_f32 with two sets of A fragments, the next step's split while a
// step's products run (the same values); set to 1 it runs fast_gemm_wg_f32, set to pair
// fast_gemm_wg_f32p3w (fast_gemm_wg_f32p with a ring of three x buffers and two
// warpgroups a launch block, half the x bytes read from L2; the same values; run 40 on
// an H100, V4.1's head 1.665 → 1.622 ms at batch 256 and 0.973 → 0.960 at 64, one
// profiled step each: too little to make it the default).
const EnvHeadWG = "DEEPINFER_CUDA_HEAD_WG"

// EnvWGBF16 set to 0 runs the block products of bf16 weights (format 1: V4's LM head;
// activations in two bf16 halves, more than 32 rows, one group, rows of K values, K a
// multiple of 64) on fast_gemm_blk (mma.sync) instead of, the default,
// fast_gemm_wg_bf16 (wgmma with the activations' halves as its register operand;
// outside batch-invariant mode only: its values are near fast_gemm_blk's, not equal).
// Read when a program is bound.
const EnvWGBF16 = "DEEPINFER_CUDA_WG_BF16"

// EnvWGFP8R set to 0 runs the block products of FP8 weights (formats 2, 3, 5: V4's
// FP8 linear layers; activations in two bf16 halves, more than 32 rows, one group, rows
// of K values, K a multiple of 64) on fast_gemm_blk instead of, the default,
// fast_gemm_wg_fp8r (the weights widened into shared memory, wgmma with the
// activations' halves as its register operand; outside batch-invariant mode only).
// Read when a program is bound.
const EnvWGFP8R = "DEEPINFER_CUDA_WG_FP8R"

// EnvWGE4M3 picks the fp8 numerics' kernels for MXFP8 products of more than 32 rows:
// unset, fast_gemm_wg_e4m3n up to 64 rows and the fast mode's kernels above (run 48,
// the H200: fast_gemm_wg_e4m3n 0.664 ms a V4.1 step at batch 64 against
// fast_gemm_wg_fp8n's 0.811; fast_gemm_wg_e4m3 1.929 at 256 against fast_gemm_wg_fp8a's
// 1.706); all, fast_gemm_wg_e4m3 above 64 rows too; 128, fast_gemm_wg_e4m3 at every
// size; p / q, fast_gemm_wg_e4m3p / _e4m3q (fast_gemm_wg_e4m3n's blocks of 64 x rows with
// a step's 32-value blocks issued two / four at a time: the same values) at every size;
// w, fast_gemm_wg_e4m3w (the 128-row form, two blocks at a time) at every size (all three
// slower than the defaults in run 60; kept because removing them changes the default
// e4m3 kernels' machine code, which run 60 timed: docs/perf/dense-gemm.md);
// 0, the fast mode's kernels everywhere (the bf16 halves). Read when a program is bound.
const EnvWGE4M3 = "DEEPINFER_CUDA_WG_E4M3"

// checkWGE4M3Env refuses an EnvWGE4M3 value it does not name (read when the runtime
// opens: a mistyped value would otherwise run the default silently).
func checkWGE4M3Env() error {
	switch v := os.Getenv(EnvWGE4M3); v {
	case "", "0", "all", "128", "p", "q", "w":
		return nil
	default:
		return fmt.Errorf("%s=%q: want all, 128, p, q, w or 0", EnvWGE4M3, v)
	}
}

// e4m3Kernels are the fp8 numerics' e4m3 product kernels and the x rows a launch block
// of each takes (tensorcore.cu's wg_e4m3_body BN).
var e4m3Kernels = []struct {
	name string
	rows int64
}{{"fast_gemm_wg_e4m3", 128}, {"fast_gemm_wg_e4m3n", 64}, {"fast_gemm_wg_e4m3p", 64}, {"fast_gemm_wg_e4m3q", 64}, {"fast_gemm_wg_e4m3w", 128}}

// e4m3BlockRows is e4m3Kernels' rows for kernel name (0: not an e4m3 product kernel).
func e4m3BlockRows(name string) int64 {
	for _, v := range e4m3Kernels {
		if v.name == name {
			return v.rows
		}
	}
	return 0
}

// wgE4M3Shared is the dynamic shared memory of fast_gemm_wg_e4m3 (bn 128) and
// fast_gemm_wg_e4m3n (64): tensorcore.cu's WGE4_SHARED(BN).
func wgE4M3Shared(bn int64) int64 { return 2*bn*128 + 2*8192 + 2*bn*16 + 1024 }

// EnvWideWG set to 0 runs the wide products of FP8 weights (bf16 activations, more
// than fastWideMin rows, one group, rows of K values) on fast_gemm_wide (mma.sync, each
// weight value widened once a launch block into shared memory) instead of the default
// since run 24, fast_gemm_wg_fp8 (wgmma with both operands in shared memory; outside
// batch-invariant mode only: its values are near fast_gemm_wide's, not equal; V4.1's
// products at batch 256 2.61 → 1.81 ms on the H200, docs/perf/dense-gemm.md). Read when
// a program is bound.
const EnvWideWG = "DEEPINFER_CUDA_WIDE_WG"

// fastStageOK reports whether fast_gemm_stage_f32 can run a float32 weight at ptr of
// cols values a row over a reduction of K: its 16-byte copies need an aligned weight
// and rows and a reduction in whole units of four values.
func fastStageOK(ptr uint64, cols, K int64) bool { return ptr%16 == 0 && cols%4 == 0 && K%4 == 0 }

// EnvWideGemm set to 0 keeps products of bf16 activations (xexact) with more than 64
// rows on fast_gemm_blk instead of fast_gemm_wide (the same values; a comparison of
// the two in one run; read when a program is bound).
const EnvWideGemm = "DEEPINFER_CUDA_WIDE_GEMM"
