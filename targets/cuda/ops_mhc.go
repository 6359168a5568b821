package cuda

// Binders of mhc.cu's kernels: the mHC ops in V4's float64 mixes and, by the numerics
// attribute, V4.1's fp32 reference order (targets/cpu/mhc.go, v41_mhc.go).

import "os"

func init() {
	register("hc_init", bindHCInit)
	register("hc_mix", bindHCMix)
	register("hc_collapse", bindHCCollapse)
	register("hc_expand", bindHCExpand)
	register("hc_head", bindHCHead)
}

// streamDims is the streams operand's n and D (streams[T, n, D]).
func streamDims(b *Bind) (n, d int64, err error) {
	n, d = Dim(b.Args[0], 1), Dim(b.Args[0], 2)
	if n <= 0 || d <= 0 {
		return 0, 0, b.Errorf("streams %s: want [T, n, D]", b.Args[0])
	}
	return n, d, nil
}

func bindHCInit(b *Bind) error {
	n := b.Int("mult")
	d := b.Args[0].Last()
	if n < 1 {
		return b.Errorf("mult %d", n)
	}
	b.Launch("mhc_init", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(T)
		a.I(n)
		a.I(d)
		return T * n * d
	})
	return nil
}

func bindHCMix(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	m, K := (2+n)*n, n*d
	normEps, eps, iters := b.Float("norm_eps"), b.Float("eps"), b.Int("iters")
	if isV41(b) {
		keep := b.Int("keep")
		mix := b.Scratch(4*m, 0)
		rs, part := -1, -1
		// the fast mode's split folds the mixes and RMS scale from their lanes itself
		// (mhc.cu mhc_mix41_split's fold) in steps of at least mixFoldRows rows
		// (EnvMixFold=0: never, =1: in every step), else mhc_fast_mix41_sum's launch
		// does; steps of long sequences have no lanes
		env := os.Getenv(EnvMixFold)
		foldOK := b.Fast() && env != "0"
		folds := func(s *Step) bool { return foldOK && !longRows(s) && (env == "1" || s.T >= mixFoldRows) }
		if b.Fast() {
			rs = b.Scratch(4, 0)
			part = fastMix41(b, mix, rs, m, K, normEps, keep, folds)
		}
		{
			fill := func(s *Step, a *ArgBuf) int64 {
				T := s.Arg(0).Shape[0]
				a.P(s.Arg(0).Ptr)
				a.W(s.Arg(1))
				a.P(s.Scratch(mix))
				a.I(T)
				a.I(m)
				a.I(K)
				a.P(s.Seqs)
				a.I(s.NSeq)
				a.I(keep)
				return T
			}
			// the fast mode's steps of long sequences (longRows) run tiles of tokens ×
			// mix rows (mhc_fast_mix41_seq: MKL's sequential chains with fma_fast), or
			// with EnvSeqTiles=0 the exact kernel
			seqTiles := rs >= 0 && seqTilesOn()
			if seqTiles {
				b.Launch("mhc_fast_mix41_seq", func(s *Step, a *ArgBuf) int64 {
					if !longRows(s) {
						return 0
					}
					return ceilDiv(fill(s, a), seqMixTokens) * ceilDiv(m, seqMixRows) * launchBlock
				})
			} else {
				// the exact mode, and with EnvSeqTiles=0 the fast mode's steps of long
				// sequences
				b.Launch("mhc_mix41_dot", func(s *Step, a *ArgBuf) int64 {
					if rs >= 0 && !longRows(s) {
						return 0
					}
					return fill(s, a) * m
				})
			}
		}
		b.Launch("mhc_mix41_split", func(s *Step, a *ArgBuf) int64 {
			T := s.Arg(0).Shape[0]
			a.P(s.Arg(0).Ptr)
			a.P(s.Scratch(mix))
			a.W(s.Arg(2))
			a.W(s.Arg(3))
			a.P(s.Result(0).Ptr)
			a.P(s.Result(1).Ptr)
			a.P(s.Result(2).Ptr)
			a.I(T)
			a.I(n)
			a.I(K)
			a.F(normEps)
			a.F(eps)
			a.I(iters)
			a.P(s.Seqs)
			a.I(s.NSeq)
			a.I(keep)
			if rs >= 0 && !longRows(s) {
				a.P(s.Scratch(rs))
			} else {
				a.P(0) // mhc_mix41_split computes the RMS scale itself
			}
			a.W(s.Arg(1))
			if part >= 0 {
				a.P(s.Scratch(part))
			} else {
				a.P(0)
			}
			a.I(b2i(folds(s)))
			return T * 16 // half a warp a token (kernels/mhc.cu)
		})
		return nil
	}
	mix := b.Scratch(8*m, 0)
	work := b.Scratch(8*n*n, 0)
	mixDot(b, mix, m, K, normEps)
	b.Launch("mhc_mix_split", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Scratch(mix))
		a.W(s.Arg(2))
		a.W(s.Arg(3))
		a.P(s.Result(0).Ptr)
		a.P(s.Result(1).Ptr)
		a.P(s.Result(2).Ptr)
		a.P(s.Scratch(work))
		a.I(T)
		a.I(n)
		a.F(eps)
		a.I(iters)
		return T * 16 // half a warp a token (kernels/mhc.cu)
	})
	return nil
}

// mixDot launches V4's float64 mixes of the streams (argument 0) against fn (argument
// 1, m rows of K) into scratch mix.
func mixDot(b *Bind, mix int, m, K int64, normEps float64) {
	if b.Fast() {
		fastMixDot(b, mix, m, K, normEps)
		return
	}
	b.Launch("mhc_mix_dot", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Scratch(mix))
		a.I(T)
		a.I(m)
		a.I(K)
		a.F(normEps)
		return T * m
	})
}

func bindHCCollapse(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	b.RoundsOnStore()
	launchStreamsRound(b, "mhc_collapse", n, d, true)
	return nil
}

// launchStreams launches a kernel over T·d work items whose arguments are the
// instruction's operand addresses (every argument, then every result), then T, n, d
// and extra.
func launchStreams(b *Bind, kernel string, n, d int64, extra ...int64) {
	launchStreamsRound(b, kernel, n, d, false, extra...)
}

// launchStreamsRound is launchStreams with, when round, Step.Round after extra (a
// kernel that stores its result rounded to bf16 on request: Bind.RoundsOnStore).
func launchStreamsRound(b *Bind, kernel string, n, d int64, round bool, extra ...int64) {
	b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		for j := range s.args {
			a.P(s.Arg(j).Ptr)
		}
		for j := range s.results {
			a.P(s.Result(j).Ptr)
		}
		a.I(T)
		a.I(n)
		a.I(d)
		for _, v := range extra {
			a.I(v)
		}
		if round {
			a.I(b2i(s.Round))
		}
		return T * d
	})
}

func bindHCExpand(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	v41 := int64(0)
	if isV41(b) {
		v41 = 1
	}
	// (mhc_expand4, a work item per token and 4 channels, where the streams are whole
	// float4s and at most 8: the same values; EnvExpand4=0 keeps mhc_expand)
	four := os.Getenv(EnvExpand4) != "0" && d%4 == 0 && n <= 8
	vec := func(s *Step) bool {
		return four && (s.Arg(0).Ptr|s.Arg(1).Ptr|s.Result(0).Ptr)%16 == 0
	}
	b.RoundsOnStore()
	for _, k := range []string{"mhc_expand", "mhc_expand4"} {
		b.Launch(k, func(s *Step, a *ArgBuf) int64 {
			if vec(s) != (k == "mhc_expand4") {
				return 0
			}
			T := s.Arg(0).Shape[0]
			a.P(s.Arg(0).Ptr)
			a.P(s.Arg(1).Ptr)
			a.P(s.Arg(2).Ptr)
			a.P(s.Arg(3).Ptr)
			a.P(s.Result(0).Ptr)
			a.I(T)
			a.I(n)
			a.I(d)
			a.I(v41)
			a.I(b2i(s.Round))
			if k == "mhc_expand4" {
				return T * d / 4
			}
			return T * n * d
		})
	}
	return nil
}

// EnvExpand4 set to 0 keeps hc_expand on mhc_expand (a work item per output value)
// instead of mhc_expand4 (a work item per token and 4 channels, every stream's output;
// the same values; read when a program is bound).
const EnvExpand4 = "DEEPINFER_CUDA_EXPAND4"

// bindHCHead: the cpu target computes hc_head in V4's float64 for both numerics.
func bindHCHead(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	normEps, eps := b.Float("norm_eps"), b.Float("eps")
	mix := b.Scratch(8*n, 0)
	mixDot(b, mix, n, n*d, normEps)
	b.Launch("mhc_head", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.P(s.Scratch(mix))
		a.W(s.Arg(2))
		a.W(s.Arg(3))
		a.P(s.Result(0).Ptr)
		a.I(T)
		a.I(n)
		a.I(d)
		a.F(eps)
		return T * d
	})
	return nil
}

// fastParts is how many interleaved parts the fast mode splits a sum over K values into
// (mhc.cu's mhc_fast_* kernels): the smallest power of two whose square reaches K, so
// that a part's chain and the sum of the parts are both about √K long. It depends on
// the shape alone, never the batch, so that a row's value does not depend on the rows
// beside it.
func fastParts(K int64) int64 {
	P := int64(1)
	for P*P < K {
		P *= 2
	}
	return P
}

// fastMixParts is how many parts the mixes' sums split into: twice fastParts, so that a
// decode step of one token has more work items in flight (V4-Flash: 25 rows × 256
// parts of 64 terms; 128 parts of 128 terms left the kernel waiting on each batch of
// loads at batch 1, and 512 parts of 32 made batch 256 and the parts' sums slower, run
// 11b on the H200); both chains stay short.
func fastMixParts(K int64) int64 { return 2 * fastParts(K) }

// fastMixDot is mixDot in the fast mode: the sums in parts (mhc_fast_mix_part or
// mhc_fast_mix_tile), then each (token, row)'s parts added by a warp (each lane's in
// order, then the lanes' sums folded pairwise) and scaled by the RMS (mhc_fast_mix_sum).
func fastMixDot(b *Bind, mix int, m, K int64, normEps float64) {
	P := fastMixParts(K)
	part := b.Scratch(8*(m+1)*P, 0)
	fill := func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Scratch(part))
		a.I(T)
		a.I(m)
		a.I(K)
		a.I(P)
		return T
	}
	tiles := partTilesOn()
	b.Launch("mhc_fast_mix_part", func(s *Step, a *ArgBuf) int64 {
		if tiles && s.Arg(0).Shape[0] >= partTileRows {
			return 0
		}
		return fill(s, a) * (m + 1) * P
	})
	b.Launch("mhc_fast_mix_tile", func(s *Step, a *ArgBuf) int64 {
		if !tiles || s.Arg(0).Shape[0] < partTileRows {
			return 0
		}
		return (fill(s, a) + 3) / 4 * ((m + 4) / 4) * P
	})
	b.Launch("mhc_fast_mix_sum", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Scratch(part))
		a.P(s.Scratch(mix))
		a.I(T)
		a.I(m)
		a.I(K)
		a.I(P)
		a.F(normEps)
		return T * m * 32 // a warp a (token, mix row)
	})
}

// partTileRows and gateTileRows are the fewest tokens a step must have for V4's fast
// mixes and router to sum their parts in tiles of 4 tokens × 4 rows (mhc_fast_mix_tile,
// moe_fast_gate_tile: the same values as mhc_fast_mix_part and moe_fast_gate_part);
// smaller steps keep a sum a work item, which has 16 times the work items to fill the
// device with. On the H200 (run 26c, V4 layers 4-5) the mixes' tiles were faster at 64
// tokens (0.271 → 0.163 ms a step) and 256 (0.807 → 0.365), the router's only at 256
// (0.972 → 0.714; 0.279 → 0.454 at 64: its 32 parts leave a 64-token step 32k work
// items, two launch blocks a multiprocessor).
const (
	partTileRows = 32
	gateTileRows = 128
)

// EnvPartTiles set to 0 keeps V4's fast router and mixes on a sum a work item
// (moe_fast_gate_part, mhc_fast_mix_part) at every step size: the same values. For
// comparisons in one run; read when a program is bound.
const EnvPartTiles = "DEEPINFER_CUDA_PART_TILES"

func partTilesOn() bool { return os.Getenv(EnvPartTiles) != "0" }

// EnvGemvRows set to 0 keeps V4.1's fast mixes and router in decode steps on their lane
// kernels (mhc_fast_mix41_part, moe_fast_gate41_part) instead of the staged rows
// (mhc_fast_mix41_rows, moe_fast_gate41_rows; the same values); set to a number N, the
// mixes stage their rows in steps of up to N tokens instead of mixRowsMax (the router
// keeps gateRowsMax). For comparisons in one run; read when a program is bound.
const EnvGemvRows = "DEEPINFER_CUDA_GEMV_ROWS"

// mixRowsMax is the most tokens a decode step may have for V4.1's fast mixes to stage
// their rows (mhc_fast_mix41_rows, a launch block a token and mix row, 16 of its 128
// threads running chains): run 12 on the H200 measured the four layers' mixes 1.24 →
// 0.37 ms at batch 1, but 1.20 → 1.59 at 64 and 2.57 → 8.04 at 256, where the lane
// kernel fills the device.
const mixRowsMax = 16

// mixTileTokens and mixTileRows are the tile of mhc.cu's mhc_fast_mix41_tile and its
// other forms (MHC_TILE: GemvTile<1, 8, 2, 1, 32>): a launch block a tile.
const mixTileTokens, mixTileRows = 2, 8

// mixTileBRows: steps of more tokens than this run the mixes' tiles bounded to 128
// registers (mhc_fast_mix41_tile_b) by default. Run 36a (an H100, V4.1 layers 20-23,
// 4,096) timed the bounded tiles 0.816 → 0.615 ms a step at batch 256 and 0.373 → 0.387
// at 64 against the unbounded ones; 128 tokens, between the two, was not timed.
const mixTileBRows = 128

// seqMixTokens and seqMixRows are the tile of mhc.cu's mhc_fast_mix41_seq (MHC_SEQ:
// SeqTile<64, 32>): a launch block a tile.
const seqMixTokens, seqMixRows = 64, 32

// gemvRowsMax is the step size up to which a staged-rows kernel runs: def, or
// EnvGemvRows's number (0 turns the staged rows off).
func gemvRowsMax(def int64) int64 { return envRows(EnvGemvRows, def) }

// fastMix41 is V4.1's mhc_mix41_dot in the fast mode, with the RMS scale of
// mhc_mix41_split: the independent lanes of MKL's and ATen's fp32 orders as work items
// (mhc_fast_mix41_part), then folded per (token, row) into scratch mix and per token
// into scratch rs (mhc_fast_mix41_sum) — the cpu target's values, bit for bit.
func fastMix41(b *Bind, mix, rs int, m, K int64, normEps float64, keep int64, folds func(*Step) bool) (part int) {
	per := m*16 + 32
	part = b.Scratch(4*per, 0)
	fill := func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Scratch(part))
		a.P(s.Scratch(mix))
		a.P(s.Scratch(rs))
		a.I(T)
		a.I(m)
		a.I(K)
		a.F(normEps)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(keep)
		return T
	}
	// (steps of long sequences run mhc_mix41_dot instead: longRows; steps of one row a
	// sequence, decode, stage the rows in shared memory: mhc_fast_mix41_rows, the same
	// values)
	rowsMax := gemvRowsMax(mixRowsMax)
	oneRow := func(s *Step) bool { return s.T == max(s.NSeq, 1) && s.T <= rowsMax }
	b.Launch("mhc_fast_mix41_rows", func(s *Step, a *ArgBuf) int64 {
		if longRows(s) || !oneRow(s) {
			return 0
		}
		return fill(s, a) * (m + 1) * rowSpread
	})
	// larger decode steps run tiles of tokens × mix rows, then the cascade lanes in
	// blocks of 4 tokens (mhc_fast_mix41_tile: the same values; EnvGemvTiles=0 keeps
	// the lanes; faster on the H200 since run 15: 2.576 → 1.801 ms at batch 256); so do
	// steps whose every row is summed as in a one-row step (Step.RowsAlone:
	// speculation's verify groups), which ran the lanes until after run 30 (2.1 ms of a
	// 30 ms verify step at 64 requests in run 29d)
	tiles := gemvTilesOn()
	tiled := func(s *Step) bool { return tiles && !oneRow(s) && s.RowsAlone }
	tileKernel := mixTileKernel()
	for _, name := range []string{"mhc_fast_mix41_tile", "mhc_fast_mix41_tile_a", "mhc_fast_mix41_tile_b"} {
		b.Launch(name, func(s *Step, a *ArgBuf) int64 {
			if longRows(s) || !tiled(s) || tileKernel(s.T) != name {
				return 0
			}
			T := fill(s, a)
			return (ceilDiv(T, mixTileTokens)*ceilDiv(m, mixTileRows) + ceilDiv(32*T, launchBlock)) * launchBlock
		})
	}
	b.Launch("mhc_fast_mix41_part", func(s *Step, a *ArgBuf) int64 {
		if longRows(s) || oneRow(s) || tiled(s) {
			return 0
		}
		return fill(s, a) * per
	})
	b.Launch("mhc_fast_mix41_sum", func(s *Step, a *ArgBuf) int64 {
		if longRows(s) || folds(s) {
			return 0
		}
		return fill(s, a) * (m + 1)
	})
	return part
}

// EnvMixFold set to 0 folds V4.1's fast mHC mixes from their lanes in a launch of their
// own (mhc_fast_mix41_sum) instead of in mhc_mix41_split, in every step; set to 1, in
// the split in every step (the same values; read when a program is bound). By default
// the split folds in steps of at least mixFoldRows rows: run 31 on the H200 (V4.1
// layers 20-23, 4,096) measured the fold 0.03 ms a step slower at batch 1 and 0.02 and
// 0.07 ms faster at 64 and 256.
const EnvMixFold = "DEEPINFER_CUDA_MIX_FOLD"

// mixFoldRows is the fewest rows of a step whose mixes mhc_mix41_split folds.
const mixFoldRows = 64
