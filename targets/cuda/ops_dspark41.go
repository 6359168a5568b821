package cuda

import "fmt"

// Binders of dspark41.cu's kernels: DeepSeek-V4.1's DSpark drafter (cpu:
// targets/cpu/v41_dspark.go). dspark_push runs in the prefill and decode programs and
// writes a stage's window ring; the draft program's dspark_attention only reads it and
// dspark_head keeps no state, so a draft step leaves every sequence's state as it was.

func init() {
	registerError(501, "a DSpark draft block needs a decoded token before it")
	registerError(502, "a DSpark stage's window ring lacks a position the draft block reads")
	registerError(503, "the draft rows are not whole DSpark blocks")
	registerError(504, "a draft token is outside the vocabulary")
	register("dspark_push", bindDSparkPush)
	register("dspark_attention", bindDSparkAttention)
	register("dspark_head", bindDSparkHead)
}

// dsparkRing claims stage layer's window ring in the sequence state: cap i64 position
// tags, then cap rows of dim float32 (dspark41.cu).
type dsparkRing struct {
	off, cap, dim int64
	mxfp8         bool
}

func claimDSparkRing(b *Bind, layer int64) (dsparkRing, error) {
	kv := &b.Plan().KV
	if layer < 0 || layer >= int64(len(kv.Layers)) {
		return dsparkRing{}, b.Errorf("DSpark stage %d is missing from the KV layout", layer)
	}
	ll := &kv.Layers[layer]
	r := dsparkRing{cap: int64(ll.RingRows()), dim: int64(ll.Dim)}
	switch ll.RingFmt {
	case "":
	case "mxfp8":
		if r.dim%32 != 0 {
			return r, b.Errorf("MXFP8 ring rows of %d values", r.dim)
		}
		r.mxfp8 = true
	default:
		return r, b.Errorf("DSpark stage %d's ring format %q", layer, ll.RingFmt)
	}
	var err error
	r.off, err = b.State(fmt.Sprintf("dspark.ring.%d", layer), r.cap*8+r.cap*r.dim*4)
	return r, err
}

func bindDSparkPush(b *Bind) error {
	layer, keep := b.Int("layer"), b.Int("keep")
	r, err := claimDSparkRing(b, layer)
	if err != nil {
		return err
	}
	if d := Dim(b.Args[0], -1); d != r.dim {
		return b.Errorf("rows of %d values for stage %d's ring of %d", d, layer, r.dim)
	}
	if r.cap == 0 {
		return nil // the cpu's Push keeps nothing either
	}
	mx := int64(0)
	if r.mxfp8 {
		mx = 1
	}
	b.Launch("dspark_push", func(s *Step, a *ArgBuf) int64 {
		rows := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(rows)
		a.I(r.dim)
		a.I(r.cap)
		a.I(keep)
		a.I(r.off)
		a.I(mx)
		return rows * ((r.dim + 31) / 32) * 32 // a warp a (row, group of 32) (dspark41.cu)
	})
	return nil
}

func bindDSparkAttention(b *Bind) error {
	layer := b.Int("layer")
	heads, dim, window, block := b.Int("heads"), b.Int("head_dim"), b.Int("window"), b.Int("block")
	scale := b.Float("scale")
	if heads <= 0 || dim <= 0 || window <= 0 || block <= 0 {
		return b.Errorf("heads %d, head_dim %d, window %d, block %d", heads, dim, window, block)
	}
	r, err := claimDSparkRing(b, layer)
	if err != nil {
		return err
	}
	if r.dim != dim || Dim(b.Args[1], -1) != dim || Dim(b.Args[0], -1) != heads*dim {
		return b.Errorf("q %s, kv %s for %d heads of %d and a ring of %d", b.Args[0], b.Args[1], heads, dim, r.dim)
	}
	stride := dsparkAttnStride(block, dim, window)
	scratch := b.Scratch(heads*stride*4, 0)
	b.Launch("dspark_attention", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.W(s.Arg(3))
		a.P(s.Result(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(s.T)
		a.I(heads)
		a.I(dim)
		a.I(window)
		a.I(block)
		a.F(scale)
		a.I(r.off)
		a.I(r.cap)
		a.P(s.Scratch(scratch))
		a.P(s.Err)
		a.I(stride)
		return s.T * heads * 32 // a warp a (row, head)
	})
	return nil
}

// dsparkAttnStride is dspark_attention's scratch a (row, head), in floats: the serial
// form's softmax-block scores and dim accumulators, or the warp form's scores of every
// key a row attends to — the window ring's rows and its sequence's rows in the step (a
// DSpark block, 5 in V4.1's plans; up to the softmax block here: a sequence of more
// rows runs the serial form).
func dsparkAttnStride(block, dim, window int64) int64 {
	return max(block+dim, window+block)
}

// bindDSparkHead: the head GEMM, then per row of the block (the chain of greedy
// drafts) the Markov bias of the row's previous token and the pick.
func bindDSparkHead(b *Bind) error {
	block := b.Int("block")
	D, V, R := Dim(b.Args[0], -1), Dim(b.Args[3], 0), Dim(b.Args[4], 1)
	if block <= 0 || D <= 0 || V <= 0 || R <= 0 {
		return b.Errorf("block %d, hidden %d, vocabulary %d, Markov rank %d", block, D, V, R)
	}
	if Dim(b.Args[6], -1) != D+R {
		return b.Errorf("confidence weight %s for %d hidden and %d Markov values", b.Args[6], D, R)
	}
	// In the fast mode the logits are the fast mode's product (the LM head's kernels):
	// dspark_head_logits in gonum's order took about 1.1 s a draft step at 64 requests on
	// the H200 (run 28d's trace: T·V work items, each reading a head row of D values).
	// There dspark_head_logits runs only for a step whose rows are not whole blocks, one
	// work item, to report it (error 503).
	b.Launch("dspark_head_logits", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(3))
		a.P(s.Result(0).Ptr)
		a.I(s.T)
		a.I(V)
		a.I(D)
		a.I(block)
		a.P(s.Err)
		if b.Fast() {
			return b2i(s.T%block != 0)
		}
		return s.T * V
	})
	if b.Fast() {
		// xbf16 (hn is the drafter's final norm's bf16 rounding, as the LM head's input
		// is): the products leave out the activations' zero lo halves and may run on
		// the LM head's wgmma kernel (fast_split checks them: error 600). Until after
		// run 30 the head's product ran both halves on fast_gemm_stage_f32_b2: 6.1 ms a
		// draft step at 64 requests in run 29d, where the target's head took 2.3 ms at
		// 384 rows on fast_gemm_wg_f32p.
		fastProduct(b, fastGemm{x: 0, xScratch: -1, rows: -1, w: 3, y: 0, yScratch: -1, N: V, K: D, ldx: D, ldy: V,
			xExact: b.Bool("xbf16") && xExactOn()})
	}
	// dspark_head_pick_part's (value, index) a (block, chunk): 8 bytes a chunk, claimed per
	// token (a block a token is the most)
	parts := b.Scratch(8*((V+dsparkPickChunk-1)/dsparkPickChunk), 0)
	for i := int64(0); i < block; i++ {
		b.Launch("dspark_head_bias", func(s *Step, a *ArgBuf) int64 {
			a.P(s.Arg(2).Ptr)
			a.P(s.Result(1).Ptr)
			a.W(s.Arg(4))
			a.W(s.Arg(5))
			a.P(s.Result(0).Ptr)
			a.I(s.T)
			a.I(V)
			a.I(R)
			a.I(block)
			a.I(i)
			a.P(s.Err)
			if s.T%block != 0 {
				return 0
			}
			if R <= dsparkBiasRMax {
				// a launch block a tile of dsparkBiasRows entries (dspark41.cu)
				return (V + dsparkBiasRows - 1) / dsparkBiasRows * launchBlock
			}
			return V // a work item a vocabulary entry, every block in turn
		})
		pick := func(s *Step, a *ArgBuf) int64 {
			a.P(s.Arg(1).Ptr)
			a.P(s.Arg(2).Ptr)
			a.W(s.Arg(4))
			a.W(s.Arg(6))
			a.P(s.Result(0).Ptr)
			a.P(s.Result(1).Ptr)
			a.P(s.Result(2).Ptr)
			a.I(s.T)
			a.I(V)
			a.I(D)
			a.I(R)
			a.I(block)
			a.I(i)
			a.P(s.Scratch(parts))
			if s.T%block != 0 {
				return 0
			}
			return s.T / block * 32 // a warp a block
		}
		b.Launch("dspark_head_pick_part", func(s *Step, a *ArgBuf) int64 {
			return pick(s, a) * ((V + dsparkPickChunk - 1) / dsparkPickChunk) // a warp a (block, chunk)
		})
		b.Launch("dspark_head_pick", pick)
	}
	return nil
}

// dspark41.cu's DSPARK_BIAS_ROWS and DSPARK_BIAS_RMAX: dspark_head_bias's tile of
// vocabulary entries a launch block, and the largest Markov rank it stages.
const (
	dsparkBiasRows = 32
	dsparkBiasRMax = 256
	// DSPARK_PICK_CHUNK: the logits a warp of dspark_head_pick_part scans
	dsparkPickChunk = 4096
)
