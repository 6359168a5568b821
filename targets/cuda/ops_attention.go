package cuda

import (
	"fmt"
	"os"

	"deepinfer/kvlayout"
	"deepinfer/plan"
)

// Binders of attention.cu's kernels: DeepSeek-V4's KV compressor, lightning indexer, and
// window / sparse attention with sinks.
//
// Per-sequence state, fixed-size and derived from positions (the cpu's targets/cpu/
// kvstate grows slices and counts instead):
//
//	att.ring.L      layer L's window ring: cap = RingRows() rows of Dim floats; position
//	                p lives at row p % cap; before a step at position pos the ring holds
//	                positions [pos - min(pos, cap), pos)
//	att.cmp.L.C     layer L's compressor cache C (0 attention, 1 indexer), floats:
//	                pending kv, pending gate   ratio × width each (width = 2·dim with
//	                                           overlap), row p % ratio: the open window's
//	                                           raw projections
//	                prev kv, prev gate         ratio × dim each: the last closed window's
//	                                           Ca slice (gate + ape, rounded to float32)
//	                entries                    MaxPositions/ratio × dim: entry w (the
//	                                           window of positions [w·ratio, (w+1)·ratio))
//	                                           at row w; (pos+n)/ratio of them after a step
//
// Only V4 plans use these ops; V4.1's attention is csa_* (other files).

func init() {
	registerError(301, "a compressor cache is full: the sequence is longer than the plan's max_positions")
	registerError(302, "decode attention got more than one token for a sequence")
	registerError(303, "decode attention found more visible keys than its key list holds")
	register("compress", bindCompress)
	register("index_topk", bindIndexTopK)
	register("window_attention", func(b *Bind) error { return bindAttention(b, false) })
	register("sparse_attention", func(b *Bind) error { return bindAttention(b, true) })
}

// attLayer is the plan's state layout of layer l.
func attLayer(b *Bind, l int64) (*kvlayout.LayerLayout, error) {
	kv := &b.Plan().KV
	if l < 0 || l >= int64(len(kv.Layers)) {
		return nil, b.Errorf("layer %d is not in the plan's KV layout (%d layers)", l, len(kv.Layers))
	}
	return &kv.Layers[l], nil
}

// attCache claims layer l's compressor cache c and returns its offset and layout.
func attCache(b *Bind, l, c int64) (int64, kvlayout.CacheLayout, error) {
	ll, err := attLayer(b, l)
	if err != nil {
		return 0, kvlayout.CacheLayout{}, err
	}
	if c < 0 || c >= int64(len(ll.Caches)) {
		return 0, kvlayout.CacheLayout{}, b.Errorf("layer %d has no compressor cache %d", l, c)
	}
	cl := ll.Caches[c]
	if cl.Fmt != "" {
		return 0, cl, b.Errorf("layer %d cache %d: packed (%s) caches are V4.1's", l, c, cl.Fmt)
	}
	r, d := int64(cl.Ratio), int64(cl.Dim)
	w := d
	if cl.Overlap {
		w = 2 * d
	}
	maxE := b.MaxPositions() / r
	off, err := b.State(fmt.Sprintf("att.cmp.%d.%d", l, c), 4*(2*r*w+2*r*d+maxE*d))
	return off, cl, err
}

// attRing claims layer l's window ring and returns its offset and rows.
func attRing(b *Bind, l, dim int64) (int64, int64, error) {
	ll, err := attLayer(b, l)
	if err != nil {
		return 0, 0, err
	}
	if int64(ll.Dim) != dim {
		return 0, 0, b.Errorf("layer %d rows are %d wide in the KV layout, %d here", l, ll.Dim, dim)
	}
	if ll.RingFmt != "" {
		return 0, 0, b.Errorf("layer %d: packed (%s) rings are V4.1's", l, ll.RingFmt)
	}
	capRows := int64(ll.RingRows())
	off, err := b.State(fmt.Sprintf("att.ring.%d", l), 4*capRows*dim)
	return off, capRows, err
}

func boolInt(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// bindCompress: compress(x[T, in], pos, wkv[width, in], wgate[width, in], ape[ratio,
// width], norm[dim]) appends an entry per window closed to the layer's cache.
// attPoolRowsPerSeq: a step with at least this many rows a sequence pools its windows a
// (row, channel) a work item (att_cmp_pool), a smaller one a (sequence, channel) a work
// item (att_cmp_pool_seq). A variable so that a test can choose either.
var attPoolRowsPerSeq int64 = 16

// attCmpMT is the tokens of one att_cmp_proj work item (kernels/attention.cu ATT_CMP_MT).
const attCmpMT = 8

func bindCompress(b *Bind) error {
	layer, cache, ratio, dim := b.Int("layer"), b.Int("cache"), b.Int("ratio"), b.Int("head_dim")
	overlap := b.Bool("overlap")
	eps := b.Float("eps")
	off, cl, err := attCache(b, layer, cache)
	if err != nil {
		return err
	}
	if int64(cl.Ratio) != ratio || int64(cl.Dim) != dim || cl.Overlap != overlap {
		return b.Errorf("ratio %d, dim %d, overlap %v differ from the KV layout's %d, %d, %v", ratio, dim, overlap, cl.Ratio, cl.Dim, cl.Overlap)
	}
	width := dim
	if overlap {
		width = 2 * dim
	}
	in := b.Args[0].Last()
	if Dim(b.Args[2], 0) != width || Dim(b.Args[2], 1) != in || Dim(b.Args[3], 0) != width || Dim(b.Args[3], 1) != in ||
		Dim(b.Args[4], 0) != ratio || Dim(b.Args[4], 1) != width {
		return b.Errorf("projections %v, %v and ape %v do not fit width %d, ratio %d, input %d", b.Args[2], b.Args[3], b.Args[4], width, ratio, in)
	}
	rope, err := newRopeSpec(b, dim)
	if err != nil {
		return err
	}
	maxE := b.MaxPositions() / ratio
	kvS, gateS, poolS := b.Scratch(4*width, 0), b.Scratch(4*width, 0), b.Scratch(8*dim, 0)
	// the fast mode: both projections on the tensor cores (fastProduct), every row count
	// (a row's value must not depend on the batch)
	if b.Fast() {
		for _, pr := range []struct{ w, y int }{{2, kvS}, {3, gateS}} {
			fastProduct(b, fastGemm{x: 0, xScratch: -1, rows: -1, w: pr.w, yScratch: pr.y, N: width, K: in, ldx: in, ldy: width})
		}
	} else {
		b.Launch("att_cmp_proj", func(s *Step, a *ArgBuf) int64 {
			T := s.Arg(0).Rows()
			a.P(s.Arg(0).Ptr)
			a.W(s.Arg(2))
			a.W(s.Arg(3))
			a.P(s.Scratch(kvS))
			a.P(s.Scratch(gateS))
			a.I(T)
			a.I(width)
			a.I(in)
			a.I(1) // the reduction in 64-wide blocks, for every shape (cpu: gemmNT)
			// work items: (projection, group of attCmpMT tokens, channel)
			return 2 * width * ((T + attCmpMT - 1) / attCmpMT)
		})
	}
	pool := func(s *Step, a *ArgBuf) {
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.P(s.Scratch(kvS))
		a.P(s.Scratch(gateS))
		a.W(s.Arg(4))
		a.P(s.Scratch(poolS))
		a.I(off)
		a.I(ratio)
		a.I(dim)
		a.I(boolInt(overlap))
		a.I(s.T)
	}
	// the windows the step closes, a (row, channel) a work item for steps of many rows a
	// sequence, else a (sequence, channel) a work item; then each sequence's cache (the
	// last Ca slice, the open rows), a (sequence, channel) a work item
	rowItems := func(s *Step) bool { return s.T >= attPoolRowsPerSeq*s.NSeq }
	b.Launch("att_cmp_pool", func(s *Step, a *ArgBuf) int64 {
		if !rowItems(s) {
			return 0
		}
		pool(s, a)
		return s.T * dim
	})
	b.Launch("att_cmp_pool_seq", func(s *Step, a *ArgBuf) int64 {
		if rowItems(s) {
			return 0
		}
		pool(s, a)
		return s.NSeq * dim
	})
	b.Launch("att_cmp_save", func(s *Step, a *ArgBuf) int64 { pool(s, a); return s.NSeq * dim })
	b.Launch("att_cmp_emit", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(s.T)
		a.P(s.Scratch(poolS))
		a.W(s.Arg(5))
		a.I(off)
		a.I(ratio)
		a.I(dim)
		a.I(width)
		a.I(maxE)
		a.F(eps)
		a.P(s.Err)
		rope.put(a)
		return s.T
	})
	return nil
}

// bindIndexTopK: index_topk(q[T, heads·head_dim], w[T, heads], pos) over the layer's
// indexer cache (cache 1).
func bindIndexTopK(b *Bind) error {
	layer, ratio, topk, heads, dim := b.Int("layer"), b.Int("ratio"), b.Int("topk"), b.Int("heads"), b.Int("head_dim")
	scale := b.Float("scale")
	off, cl, err := attCache(b, layer, 1)
	if err != nil {
		return err
	}
	if int64(cl.Ratio) != ratio || int64(cl.Dim) != dim {
		return b.Errorf("ratio %d, head_dim %d differ from the indexer cache's %d, %d", ratio, dim, cl.Ratio, cl.Dim)
	}
	width := dim
	if cl.Overlap {
		width = 2 * dim
	}
	maxE := b.MaxPositions() / ratio
	scores := b.Scratch(8*maxE, 0)
	qd := b.Scratch(8*heads*dim, 0)
	sel := b.Scratch(8*(2*topk+1), 0)
	vis := b.Scratch(16, 0)
	fill := func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Arg(2).Ptr)
		a.P(s.Result(0).Ptr)
		a.P(s.Scratch(scores))
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(T)
		a.I(off)
		a.I(ratio)
		a.I(width)
		a.I(dim)
		a.I(heads)
		a.I(dim)
		a.I(topk)
		a.F(scale)
		a.I(maxE)
		a.P(s.Scratch(qd))
		a.P(s.Scratch(sel))
		a.P(s.Scratch(vis))
		return T
	}
	b.Launch("att_index_qd", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads * dim })
	// the scores: a launch block per row and 64 entries (att_index_score_t) at every
	// step size where the heads fit it; otherwise a warp per (row, entry) for a few
	// rows, a work item for more (all the same values); the ranks: a selection a row
	// (att_index_select), or with DEEPINFER_CUDA_INDEX_SELECT=0 every (row, entry)
	// against the row's entries for a few rows (the same list either way)
	many := func(s *Step) bool { return s.Arg(0).Rows() >= attSelectRows }
	selectAll := os.Getenv(EnvIndexSelect) != "0"
	selects := func(s *Step) bool { return selectAll || many(s) }
	tile := os.Getenv(EnvIndexTile) != "0" && heads <= attIndexTileHeads
	b.Launch("att_index_score_t", func(s *Step, a *ArgBuf) int64 {
		if !tile {
			return 0
		}
		return fill(s, a) * ceilDiv(maxE, attIndexTile) * launchBlock
	})
	b.Launch("att_index_score", func(s *Step, a *ArgBuf) int64 {
		if tile || !many(s) {
			return 0
		}
		return fill(s, a) * maxE
	})
	b.Launch("att_index_score_w", func(s *Step, a *ArgBuf) int64 {
		if tile || many(s) {
			return 0
		}
		return fill(s, a) * maxE * 32
	})
	b.Launch("att_index_pad", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * topk })
	b.Launch("att_index_rank", func(s *Step, a *ArgBuf) int64 {
		if selects(s) {
			return 0
		}
		return fill(s, a) * maxE
	})
	b.Launch("att_index_select", func(s *Step, a *ArgBuf) int64 {
		if !selects(s) {
			return 0
		}
		return fill(s, a) * rowSpread
	})
	b.Launch("att_index_order", func(s *Step, a *ArgBuf) int64 {
		if !selects(s) {
			return 0
		}
		return fill(s, a) * topk
	})
	return nil
}

// EnvIndexSelect: V4's index entries are ranked by selection (att_index_select,
// att_index_order) at every step size; set to 0, steps of fewer than attSelectRows rows
// rank them with att_index_rank instead (the same lists). att_index_rank compares every
// visible entry with every other, which grows with the context squared: 0.837 ms of V4's
// batch-1 step at 32,768 on the H200 against the selection's 0.075 in the same call (run
// 27a). Read when a program is bound.
const EnvIndexSelect = "DEEPINFER_CUDA_INDEX_SELECT"

// EnvIndexTile set to 0 keeps V4's index scores off att_index_score_t (a launch block
// per row and 64 entries, the dots of 64 entries × 64 heads in registers, keys and
// queries staged in shared memory as doubles) and on att_index_score_w (a few rows) or
// att_index_score (more): the same values (TestIndexScoreTileSameValues, and the device
// branch on host fibers in TestIndexScoreTileOnHostFibers). On the H200 at context
// 32,768 (run 27d, same call): 0.298 → 0.020 ms at batch 1, 9.9 → 2.1 ms at batch 256.
// Read when a program is bound.
const EnvIndexTile = "DEEPINFER_CUDA_INDEX_TILE"

// attIndexTile and attIndexTileHeads are attention.cu's ATT_ITE and ATT_ITH: the entries
// a launch block of att_index_score_t scores, and the most heads it holds.
const (
	attIndexTile      = 64
	attIndexTileHeads = 64
)

// attSelectRows is the step size from which the indexer ranks by selection
// (att_index_select/att_index_order) instead of att_index_rank: at batch 256 and
// context 32,768 att_index_rank took 21 ms of a V4 step on the H200; at batch 1 its
// entries run in parallel and it is short.
var attSelectRows int64 = 16

// bindAttention: window_attention(q, kv, pos, sink) and sparse_attention(q, kv, pos, sink,
// state[, idx]); the state operand carries no buffer. In the decode phase the cpu target
// runs the .decode kernels, which attend to every held key; so does this.
func bindAttention(b *Bind, sparse bool) error {
	layer, heads, dim, window := b.Int("layer"), b.Int("heads"), b.Int("head_dim"), b.Int("window")
	ratio := b.Int("ratio")
	scale := b.Float("scale")
	if sparse && ratio < 1 {
		return b.Errorf("sparse attention needs a positive ratio")
	}
	if len(b.Args) < 4 || b.Args[0].Last() != heads*dim || b.Args[1].Last() != dim {
		return b.Errorf("operands %v do not fit %d heads of %d", b.Args, heads, dim)
	}
	ringOff, capRows, err := attRing(b, layer, dim)
	if err != nil {
		return err
	}
	var cacheOff, cwidth, topk int64
	hasIdx := sparse && len(b.Args) == 5
	if sparse {
		off, cl, err := attCache(b, layer, 0)
		if err != nil {
			return err
		}
		if int64(cl.Ratio) != ratio || int64(cl.Dim) != dim {
			return b.Errorf("ratio %d, head_dim %d differ from the attention cache's %d, %d", ratio, dim, cl.Ratio, cl.Dim)
		}
		cacheOff, cwidth = off, dim
		if cl.Overlap {
			cwidth = 2 * dim
		}
		if hasIdx {
			topk = Dim(b.Args[4], 1)
		}
	}
	decode := b.Phase == plan.PhaseDecode
	acc := b.Scratch(8*heads*dim, 0)
	maxE := b.MaxPositions() / max(ratio, 1)
	mark := -1
	if hasIdx {
		mark = b.Scratch((maxE+7)&^7, 0)
		markArgs := func(s *Step, a *ArgBuf) int64 {
			a.P(s.Arg(4).Ptr)
			a.P(s.Scratch(mark))
			a.I(s.Arg(0).Rows())
			a.I(topk)
			a.I(maxE)
			return s.Arg(0).Rows()
		}
		b.Launch("att_mark_clear", func(s *Step, a *ArgBuf) int64 { return markArgs(s, a) * maxE })
		b.Launch("att_mark_set", func(s *Step, a *ArgBuf) int64 { return markArgs(s, a) * topk })
	}
	// the decode program's keys: the ring, the token, and the top-k entries (sparse with
	// an index) or every entry (HCA)
	kmax := capRows + 1
	if sparse {
		if hasIdx {
			kmax += topk
		} else {
			kmax += maxE
		}
	}
	// the fast mode on the tensor cores (tensorcore_attn.cu), in both phases: each row
	// its own key list (att_tc_keys; a prefill row's visible keys, at most the window
	// and the top-k or every entry, as a decode row's), the probabilities' halves, kp =
	// kmax rounded up to the output's mma step of 16 keys, 4 bytes a key
	tc := b.Fast() && !b.rt.invariant && os.Getenv(EnvTCAttention) != "0"
	kp := (kmax + 15) / 16 * 16
	var keys, nkeys, lg, den int
	if decode || tc {
		keys, nkeys = b.Scratch(8*kmax, 0), b.Scratch(8, 0)
		lg, den = b.Scratch(8*heads*kmax, 0), b.Scratch(8*heads, 0)
	}
	pp := -1
	if tc {
		pp = b.Scratch(4*heads*kp, 0)
	}
	fill := func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Arg(2).Ptr)
		a.W(s.Arg(3))
		if hasIdx {
			a.P(s.Arg(4).Ptr)
		} else {
			a.P(0)
		}
		a.P(s.Result(0).Ptr)
		a.P(s.Scratch(acc))
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(T)
		a.I(heads)
		a.I(dim)
		a.I(window)
		a.F(scale)
		a.I(ringOff)
		a.I(capRows)
		a.I(boolInt(decode))
		a.I(boolInt(sparse))
		a.I(topk)
		a.I(cacheOff)
		a.I(max(ratio, 1))
		a.I(cwidth)
		a.P(s.Err)
		if hasIdx {
			a.P(s.Scratch(mark))
		} else {
			a.P(0)
		}
		a.I(maxE)
		if decode || tc {
			a.P(s.Scratch(keys))
			a.P(s.Scratch(nkeys))
			a.P(s.Scratch(lg))
			a.P(s.Scratch(den))
		} else {
			a.P(0)
			a.P(0)
			a.P(0)
			a.P(0)
		}
		a.I(kmax)
		if pp >= 0 {
			a.P(s.Scratch(pp))
		} else {
			a.P(0)
		}
		a.I(kp)
		return T
	}
	if tc {
		// a warp per token (the same list)
		b.Launch("att_tc_keys", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * 32 })
		bindAttentionTC(b, heads, dim, kmax, kp, scale, keys, nkeys, lg, den, pp, fill)
	} else if decode {
		b.Launch("att_dec_keys", fill)
		if b.Fast() && !b.rt.invariant {
			// a key row read once for a group of heads, float32 sums (attention.cu, after
			// the exact kernels); not in batch-invariant mode, where a decode row that a
			// mixed step computes with the prefill kernel must get the same values
			// (att_attention's)
			groups := (heads + fastAttnHeads - 1) / fastAttnHeads
			b.Launch("att_fast_logits", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * groups * kmax })
			b.Launch("att_dec_softmax", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads })
			b.Launch("att_fast_out", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * groups * dim })
		} else {
			// a key read once for a group of heads, each head's float64 sums in order
			groups := (heads + attHeadGroup - 1) / attHeadGroup
			b.Launch("att_dec_logits", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * groups * kmax })
			b.Launch("att_dec_softmax", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads })
			b.Launch("att_dec_out", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * groups * dim })
		}
	} else {
		b.Launch("att_attention", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads })
	}
	b.Launch("att_ring_push", func(s *Step, a *ArgBuf) int64 {
		if capRows == 0 {
			return 0
		}
		a.P(s.Arg(1).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(s.T)
		a.I(ringOff)
		a.I(capRows)
		a.I(dim)
		return s.T * ((dim + 3) / 4)
	})
	return nil
}

// attHeadGroup is attention.cu's ATT_HG: the heads one exact decode-attention work item
// serves.
const attHeadGroup = 16

// EnvTCAttention set to 0 keeps V4's fast decode attention on the SIMT kernels
// (att_fast_logits, att_fast_out: float32 fused multiply-adds) instead of the tensor
// cores (att_tc_*; read when a program is bound).
const EnvTCAttention = "DEEPINFER_CUDA_TC_ATTENTION"

// fastAttnTCHeads is tensorcore_attn.cu's FATC_HG: the heads of one warp tile.
const fastAttnTCHeads = 16

// attTCWideWarps: a step with at least this many wide output warps (16 heads × 64 values)
// runs the wide kernels (att_tc_logits: 64 keys a warp; att_tc_out: 64 values), a smaller
// one the narrow ones (8 keys, 8 values: 8× the warps). Each value is the same chain of
// mma either way. A variable so that a test can choose either.
var attTCWideWarps int64 = 2048

// bindAttentionTC adds the fast mode's decode attention on the tensor cores after
// att_dec_keys (tensorcore_attn.cu): the queries' bf16 halves (fast_split, the head dim
// padded to 64), the logits, the softmax (att_tc_softmax: attention.cu's arguments, a
// warp per (token, head), writing the probabilities' halves) and the output.
func bindAttentionTC(b *Bind, heads, dim, kmax, kp int64, scale float64, keys, nkeys, lg, den, pp int, fill func(*Step, *ArgBuf) int64) {
	dp := (dim + 63) / 64 * 64
	qs := b.Scratch(4*heads*dp, 0) // per token and head: dp/2 hi pairs, then (after all rows) dp/2 lo pairs
	halves := func(s *Step) (devptr, devptr) {
		p := s.Scratch(qs)
		return p, p + devptr(s.Arg(0).Rows()*heads*2*dp)
	}
	b.Launch("fast_split", func(s *Step, a *ArgBuf) int64 {
		M := s.Arg(0).Rows() * heads
		xh, xl := halves(s)
		a.P(s.Arg(0).Ptr)
		a.P(0)
		a.P(xh)
		a.P(xl)
		a.I(M)
		a.I(dim)
		a.I(dp)
		a.I(dim)
		a.I(M)
		a.P(s.Err)
		a.I(0) // xexact: the queries are float32
		return M * dp / 2
	})
	groups := (heads + fastAttnTCHeads - 1) / fastAttnTCHeads
	wide := func(s *Step) bool { return s.Arg(0).Rows()*groups*((dim+63)/64) >= attTCWideWarps }
	args := func(s *Step, a *ArgBuf) int64 {
		xh, xl := halves(s)
		T := s.Arg(0).Rows()
		a.P(xh)
		a.P(xl)
		a.P(s.Scratch(keys))
		a.P(s.Scratch(nkeys))
		a.P(s.Scratch(lg))
		a.W(s.Arg(3))
		a.P(s.Scratch(pp))
		a.P(s.Scratch(den))
		a.P(s.Result(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(T)
		a.I(heads)
		a.I(dim)
		a.I(kmax)
		a.I(kp)
		a.I(dp / 2)
		a.F(scale)
		return T
	}
	// warps: (token, chunk of keys or values, head group), 32 work items each
	for _, k := range []struct {
		name string
		wide bool
		per  int64 // keys or values a warp
		n    int64 // keys or values
	}{{"att_tc_logits", true, 64, kmax}, {"att_tc_logits_n", false, 8, kmax}} {
		b.Launch(k.name, func(s *Step, a *ArgBuf) int64 {
			if wide(s) != k.wide {
				return 0
			}
			return args(s, a) * (k.n + k.per - 1) / k.per * groups * 32
		})
	}
	// a warp per (token, head)
	b.Launch("att_tc_softmax", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads * 32 })
	for _, k := range []struct {
		name string
		wide bool
		per  int64
	}{{"att_tc_out", true, 64}, {"att_tc_out_n", false, 8}} {
		b.Launch(k.name, func(s *Step, a *ArgBuf) int64 {
			if wide(s) != k.wide {
				return 0
			}
			return args(s, a) * (dim + k.per - 1) / k.per * groups * 32
		})
	}
}
