package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"deepinfer/kvlayout"
	"deepinfer/plan"
	"deepinfer/quant"
	"deepinfer/targets"
	"deepinfer/targets/ropefreq"
)

// Binders of csa41.cu's kernels: DeepSeek-V4.1's compressor, indexer and attention
// (the cpu target's v41_csa.go, v41_topk.go, v41_attention.go).
//
// State (keys "csa.*"), in the cpu target's storage formats, by position (csa41.cu's
// header says how):
//
//	csa.ring.L   layer L's window ring: RingRows rows of RingRowBytes
//	csa.kv.L     KV source L's compressed entries: max_positions/ratio packed rows
//	csa.ik.L     KV source L's index keys: max_positions/ratio packed rows
//	csa.pend.L   KV source L's open group (ratio > 1): ratio rows of kv, then of gate
//
// The draft phase leaves them alone: csa_attention reads its ring there without
// appending to it, and a draft program cannot hold a csa_compress (the cpu target's
// draft programs hold none of these ops).

const (
	csaMaxPairs  = 64 // csa41.cu's CSA_MAX_PAIRS
	csaMaxOwners = 64 // CSA_MAX_OWNERS
)

func init() {
	registerError(401, "csa_compress: a compressed entry past the sequence state's capacity (a position beyond max_positions)")
	registerError(402, "csa_index: a position needs more index keys than its KV source holds")
	registerError(403, "csa_index: the KV source an indexer reads holds no index keys")
	registerError(404, "csa_attention: an index names a compressed entry the KV source does not hold")
	register("csa_compress", csaBindCompress)
	register("csa_index", func(b *Bind) error { return csaBindIndex(b, false) })
	register("csa_index_candidates", func(b *Bind) error { return csaBindIndex(b, true) })
	register("csa_attention", csaBindAttention)
}

// csaStore is one state region of packed rows.
type csaStore struct {
	off, fmt, group, dim, ratio, rowBytes, rows int64
}

// csaFormat maps a storage format name to csa41.cu's (quant.Format; 0 float32).
func csaFormat(name string) (int64, error) {
	if name == "" {
		return 0, nil
	}
	f, ok := quant.ParseFormat(name)
	if !ok {
		return 0, fmt.Errorf("unknown storage format %q", name)
	}
	return int64(f), nil
}

func csaRowBytes(f, dim, group int64) int64 {
	if f == 0 {
		return 4 * dim
	}
	return int64(quant.Format(f).RowBytes(int(dim), int(group)))
}

// csaCache claims KV source layer's compressed cache of kind (kvlayout.CacheKV or
// kvlayout.CacheIndexKeys): an entry for every ratio positions up to max_positions.
func csaCache(b *Bind, layer int64, kind string) (csaStore, error) {
	kv := &b.Plan().KV
	if layer < 0 || layer >= int64(len(kv.Layers)) {
		return csaStore{}, b.Errorf("layer %d is not in the KV layout", layer)
	}
	for _, c := range kv.Layers[layer].Caches {
		if c.Kind != kind {
			continue
		}
		f, err := csaFormat(c.Fmt)
		if err != nil {
			return csaStore{}, b.Errorf("layer %d %s cache: %v", layer, kind, err)
		}
		g := int64(c.Group)
		if f == int64(quant.MXFP8) && g == 0 {
			g = kvlayout.RingGroup
		}
		if f == 0 {
			g = int64(c.Dim)
		}
		if g <= 0 || int64(c.Dim)%g != 0 || c.Ratio < 1 {
			return csaStore{}, b.Errorf("layer %d %s cache: dim %d in groups of %d, ratio %d", layer, kind, c.Dim, g, c.Ratio)
		}
		s := csaStore{fmt: f, group: g, dim: int64(c.Dim), ratio: int64(c.Ratio)}
		s.rowBytes = csaRowBytes(f, s.dim, g)
		s.rows = b.MaxPositions() / s.ratio
		name := "csa.kv."
		if kind == kvlayout.CacheIndexKeys {
			name = "csa.ik."
		}
		s.off, err = b.State(fmt.Sprintf("%s%d", name, layer), s.rows*s.rowBytes)
		return s, err
	}
	return csaStore{}, b.Errorf("layer %d has no %s cache in the KV layout", layer, kind)
}

// csaRing claims layer's window ring.
func csaRing(b *Bind, layer int64) (csaStore, error) {
	kv := &b.Plan().KV
	if layer < 0 || layer >= int64(len(kv.Layers)) {
		return csaStore{}, b.Errorf("layer %d is not in the KV layout", layer)
	}
	ll := &kv.Layers[layer]
	if ll.RingCap > 0 {
		return csaStore{}, b.Errorf("layer %d is a DSpark stage (its ring is dspark_*'s)", layer)
	}
	f, err := csaFormat(ll.RingFmt)
	if err != nil {
		return csaStore{}, b.Errorf("layer %d ring: %v", layer, err)
	}
	s := csaStore{fmt: f, group: kvlayout.RingGroup, dim: int64(ll.Dim), rows: int64(ll.RingRows())}
	if f == 0 {
		s.group = s.dim
	}
	if s.dim%s.group != 0 {
		return csaStore{}, b.Errorf("layer %d ring: rows of %d in groups of %d", layer, s.dim, s.group)
	}
	s.rowBytes = int64(ll.RingRowBytes())
	s.off, err = b.State(fmt.Sprintf("csa.ring.%d", layer), s.rows*s.rowBytes)
	return s, err
}

// csaRope is an instruction's RoPE (the cpu target's ropeSpec): the frequencies as the
// cpu computes them, passed in the kernel's arguments.
type csaRope struct {
	dim, fp32 int64
	af        float64
	inv       []float64
}

func csaRopeOf(b *Bind, headDims ...int64) (csaRope, error) {
	r := csaRope{dim: b.Int("rope_dim"), af: 1}
	if v, ok := b.Attrs.Float("attn_factor"); ok {
		r.af = v
	}
	if r.dim < 0 || r.dim/2 > csaMaxPairs {
		return r, b.Errorf("rope_dim %d (at most %d)", r.dim, 2*csaMaxPairs)
	}
	for _, hd := range headDims {
		if r.dim > hd {
			return r, b.Errorf("rope_dim %d exceeds head_dim %d", r.dim, hd)
		}
	}
	theta := b.Float("theta")
	rd := int(r.dim)
	if b.Bool("rope_fp32") {
		r.fp32 = 1
		for _, f := range ropefreq.Inverse32(rd, float32(theta), b.Attrs) {
			r.inv = append(r.inv, float64(f))
		}
	} else {
		r.inv = ropefreq.Inverse(rd, theta, b.Attrs)
	}
	return r, nil
}

func (r *csaRope) put(a *ArgBuf) {
	a.I(r.dim)
	a.I(r.fp32)
	a.F(r.af)
	for i := 0; i < csaMaxPairs; i++ {
		if i < len(r.inv) {
			a.F(r.inv[i])
		} else {
			a.F(0)
		}
	}
}

// csaBindCompress: csa_compress(x, pos, wkv, [wgate], norm, [wk, k_norm]) in four
// launches: the projections, the pooling of each closed group (ratio > 1), each closed
// group's entry and index key, and the open group kept for the next step (ratio > 1).
func csaBindCompress(b *Bind) error {
	if b.Phase == plan.PhaseDraft {
		return b.Errorf("a draft program must not append to the compressed caches (the cpu target's draft programs hold no csa_compress)")
	}
	layer, ratio, d, idim, eps := b.Int("layer"), b.Int("ratio"), b.Int("head_dim"), b.Int("index_head_dim"), b.Float("eps")
	want := 4
	if ratio > 1 {
		want++
	}
	if idim > 0 {
		want += 2
	}
	if ratio < 1 || d < 1 || idim < 0 || len(b.Args) != want {
		return b.Errorf("ratio %d, head_dim %d, index_head_dim %d with %d operands", ratio, d, idim, len(b.Args))
	}
	D := b.Args[0].Last()
	kv, err := csaCache(b, layer, kvlayout.CacheKV)
	if err != nil {
		return err
	}
	if kv.dim != d || kv.ratio != ratio {
		return b.Errorf("layer %d's compressed cache holds entries of %d every %d tokens, not %d every %d", layer, kv.dim, kv.ratio, d, ratio)
	}
	var ik csaStore
	if idim > 0 {
		if ik, err = csaCache(b, layer, kvlayout.CacheIndexKeys); err != nil {
			return err
		}
		if ik.dim != idim || ik.rows != kv.rows {
			return b.Errorf("layer %d's index keys hold %d values every %d tokens, not %d every %d", layer, ik.dim, ik.ratio, idim, ratio)
		}
	}
	var pend int64
	if ratio > 1 {
		if pend, err = b.State(fmt.Sprintf("csa.pend.%d", layer), 2*ratio*d*4); err != nil {
			return err
		}
	}
	heads := []int64{d}
	if idim > 0 {
		heads = append(heads, idim)
	}
	rope, err := csaRopeOf(b, heads...)
	if err != nil {
		return err
	}
	iNorm := 3
	if ratio > 1 {
		iNorm = 4
	}
	sc := b.Scratch((3*d+idim)*4, 0)
	// the fast mode: the projections' independent pieces as work items (csa41.cu's
	// csa_fast_proj_part), then folded (csa_fast_proj_sum): the same values
	lanes, partS := int64(32), -1
	if ratio == 1 {
		lanes = (D + 63) / 64
	}
	kblocks, keyS := (d+63)/64, -1
	if b.Fast() {
		partS = b.Scratch(4*d*lanes, 0)
		if idim > 0 {
			keyS = b.Scratch(4*idim*kblocks, 0)
		}
	}
	fill := func(s *Step, a *ArgBuf) {
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(2))
		if ratio > 1 {
			a.W(s.Arg(3))
		} else {
			a.W(Operand{})
		}
		a.W(s.Arg(iNorm))
		if idim > 0 {
			a.W(s.Arg(iNorm + 1))
			a.W(s.Arg(iNorm + 2))
		} else {
			a.W(Operand{})
			a.W(Operand{})
		}
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(s.T)
		a.I(D)
		a.I(d)
		a.I(idim)
		a.I(ratio)
		a.F(eps)
		base := s.Scratch(sc)
		a.P(base)
		a.P(base + devptr(s.T*d*4))
		a.P(base + devptr(2*s.T*d*4))
		a.P(base + devptr(3*s.T*d*4))
		a.I(kv.off)
		a.I(kv.fmt)
		a.I(kv.group)
		a.I(kv.rows)
		a.I(kv.rowBytes)
		a.I(ik.off)
		a.I(ik.fmt)
		a.I(ik.group)
		a.I(ik.rowBytes)
		a.I(pend)
		a.I(int64(runtime.GOMAXPROCS(0)))
		rope.put(a)
		a.P(s.Err)
		if partS >= 0 {
			a.P(s.Scratch(partS))
			a.I(lanes)
		} else {
			a.P(0)
			a.I(0)
		}
		if keyS >= 0 {
			a.P(s.Scratch(keyS))
			a.I(kblocks)
		} else {
			a.P(0)
			a.I(0)
		}
	}
	if partS >= 0 {
		// ratio 1, steps of at least projTileMin rows: tiles of rows × channels, the
		// blocks staged in shared memory (csa_fast_proj_tile: the same values)
		tiles := ratio == 1 && D%4 == 0 && tilesOn()
		tiled := func(s *Step) bool { return tiles && s.T >= projTileMin }
		b.Launch("csa_fast_proj_tile", func(s *Step, a *ArgBuf) int64 {
			if !tiled(s) {
				return 0
			}
			fill(s, a)
			return ceilDiv(s.T, projTileRows) * ceilDiv(d, projTileChannels) * launchBlock
		})
		b.Launch("csa_fast_proj_part", func(s *Step, a *ArgBuf) int64 {
			if tiled(s) {
				return 0
			}
			fill(s, a)
			return s.T * d * lanes
		})
		b.Launch("csa_fast_proj_sum", func(s *Step, a *ArgBuf) int64 {
			if tiled(s) {
				return 0
			}
			fill(s, a)
			return s.T * d
		})
	} else {
		b.Launch("csa_compress_proj", func(s *Step, a *ArgBuf) int64 { fill(s, a); return s.T * d })
	}
	if ratio > 1 {
		b.Launch("csa_compress_pool", func(s *Step, a *ArgBuf) int64 { fill(s, a); return s.T * d })
	}
	if keyS >= 0 {
		// a warp a row (csa41.cu)
		b.Launch("csa_fast_entry_norm", func(s *Step, a *ArgBuf) int64 { fill(s, a); return 32 * s.T })
		b.Launch("csa_fast_key_part", func(s *Step, a *ArgBuf) int64 { fill(s, a); return s.T * idim * kblocks })
		b.Launch("csa_fast_key_sum", func(s *Step, a *ArgBuf) int64 { fill(s, a); return s.T * idim })
	}
	// a warp a row (csa41.cu csa_compress_entry)
	b.Launch("csa_compress_entry", func(s *Step, a *ArgBuf) int64 { fill(s, a); return 32 * s.T })
	if ratio > 1 {
		b.Launch("csa_compress_pend", func(s *Step, a *ArgBuf) int64 { fill(s, a); return s.T * d })
	}
	return nil
}

// csaBindIndex: csa_index(q, w, pos, [cand]) and csa_index_candidates(q, w, pos) in two
// launches: every (row, key) score, then per row the selection.
func csaBindIndex(b *Bind, publish bool) error {
	layer, source, ratio, topk := b.Int("layer"), b.Int("source"), b.Int("ratio"), b.Int("topk")
	heads, dim, keep := b.Int("heads"), b.Int("head_dim"), b.Int("keep")
	candBlocks, candSize := b.Int("cand_blocks"), b.Int("cand_block_size")
	scale := float64(float32(b.Float("scale")))
	withCand := len(b.Args) == 4
	if ratio < 1 || topk < 1 || heads < 1 || dim < 1 || len(b.Args) < 3 || len(b.Args) > 4 || b.Args[0].Last() != heads*dim {
		return b.Errorf("ratio %d, topk %d, %d heads of %d, %d operands", ratio, topk, heads, dim, len(b.Args))
	}
	if (publish || withCand) && (candBlocks < 1 || candSize < 1) {
		return b.Errorf("cand_blocks %d, cand_block_size %d", candBlocks, candSize)
	}
	// every index-key owner: a decode step's indexer reads the keys last published
	type owner struct{ layer, ratio, off int64 }
	var owners []owner
	var ik csaStore
	for j, ll := range b.Plan().KV.Layers {
		for _, c := range ll.Caches {
			if c.Kind != kvlayout.CacheIndexKeys {
				continue
			}
			s, err := csaCache(b, int64(j), kvlayout.CacheIndexKeys)
			if err != nil {
				return err
			}
			if len(owners) > 0 && (s.fmt != ik.fmt || s.group != ik.group) || s.dim != dim {
				return b.Errorf("layer %d's index keys (%d values, format %d in groups of %d) differ from the indexer's or the others'", j, s.dim, s.fmt, s.group)
			}
			ik = s
			owners = append(owners, owner{int64(j), s.ratio, s.off})
		}
	}
	if len(owners) > csaMaxOwners {
		return b.Errorf("%d layers own index keys (at most %d)", len(owners), csaMaxOwners)
	}
	found := false
	for _, o := range owners {
		found = found || o.layer == source
	}
	if !found {
		return b.Errorf("layer %d indexes KV source %d, which holds no index keys", layer, source)
	}
	ecap := b.MaxPositions()/ratio + 1
	var nbcap int64
	if candSize > 0 {
		nbcap = (ecap + candSize - 1) / candSize
	}
	sc := b.Scratch(ecap*8+nbcap*8, 0)
	restricted := withCand && !publish
	kept := b.Scratch((ecap+7)&^7, 0)
	// targets.EnvIndexTies=low: the lower position first among equal scores at the cut
	// (csa41.cu csa_lowtie_kept, a radix select), else the cpu's order (csa_topk_blk)
	var lowtie int64
	if low, err := targets.IndexTiesLow(); err != nil {
		return b.Errorf("%v", err)
	} else if low {
		lowtie = 1
	}
	cmark := -1
	if restricted {
		cmark = b.Scratch((nbcap+7)&^7, 0)
	}
	fill := func(s *Step, a *ArgBuf) int64 {
		rows := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		if withCand {
			a.P(s.Arg(3).Ptr)
		} else {
			a.P(0)
		}
		a.P(s.Result(0).Ptr)
		if publish {
			a.P(s.Result(1).Ptr)
		} else {
			a.P(0)
		}
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(rows)
		a.I(keep)
		a.I(layer)
		a.I(source)
		a.I(ratio)
		a.I(topk)
		a.I(heads)
		a.I(dim)
		a.F(scale)
		a.I(candBlocks)
		a.I(candSize)
		if publish {
			a.I(1)
		} else {
			a.I(0)
		}
		base := s.Scratch(sc)
		a.P(base)
		a.P(base + devptr(rows*ecap*8))
		a.I(ecap)
		a.I(nbcap)
		a.I(ik.fmt)
		a.I(ik.group)
		a.I(ik.rowBytes)
		a.I(int64(len(owners)))
		for i := 0; i < csaMaxOwners; i++ {
			if i < len(owners) {
				a.I(owners[i].layer)
				a.I(owners[i].ratio)
				a.I(owners[i].off)
			} else {
				a.I(0)
				a.I(0)
				a.I(0)
			}
		}
		a.P(s.Err)
		if restricted {
			a.P(s.Scratch(cmark))
		} else {
			a.P(0)
		}
		a.P(s.Scratch(kept))
		a.I(lowtie)
		return rows
	}
	tcTotal, wordsTotal := int64(1536), int64(4096)
	if n, err := csaIndexTotal(); err != nil {
		return b.Errorf("%v", err)
	} else if n > 0 {
		tcTotal, wordsTotal = n, n
	}
	// a step's scores run on one of two launches: csa_index_score_tc where tcFrom allows
	// (the dots on the tensor cores, the cpu's scores bit for bit; csa41.cu), the other
	// forms below it (the same scores)
	tcFrom := csaIndexTCFrom(b.Fast(), heads, dim, ik.fmt, ik.group)
	if tcFrom > 0 {
		// launch blocks looping over a row's chunks of csaIndexTCKeys keys
		b.Launch("csa_index_score_tc", func(s *Step, a *ArgBuf) int64 {
			if s.Arg(0).Rows() < tcFrom {
				return 0 // (not filled: the launch below takes the step)
			}
			rows := fill(s, a)
			return rows * csaIndexBlocks(rows, ecap, csaIndexTCKeys, tcTotal) * launchBlock
		})
	}
	notTC := func(rows int64) bool { return tcFrom == 0 || rows < tcFrom }
	if csaIndexBlkOK(heads, dim) {
		// launch blocks looping over a row's chunks of csaIndexKeys keys
		name := "csa_index_score_words"
		if os.Getenv(EnvIndexWords) == "0" {
			name = "csa_index_score_blk"
		}
		b.Launch(name, func(s *Step, a *ArgBuf) int64 {
			if !notTC(s.Arg(0).Rows()) {
				return 0
			}
			rows := fill(s, a)
			return rows * csaIndexBlocks(rows, ecap, csaIndexKeys, wordsTotal) * launchBlock
		})
	} else {
		b.Launch("csa_index_score", func(s *Step, a *ArgBuf) int64 {
			if !notTC(s.Arg(0).Rows()) {
				return 0
			}
			return fill(s, a) * ecap
		})
	}
	if restricted {
		b.Launch("csa_cand_clear", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * nbcap })
		b.Launch("csa_cand_mark", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * candBlocks })
	}
	b.Launch("csa_index_select", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * rowSpread })
	return nil
}

// csaBindAttention: csa_attention(q, kv, pos, sink, [idx]): every (row, head), then
// (outside the draft phase) the step's rows into the window ring.
func csaBindAttention(b *Bind) error {
	layer, source, ratio := b.Int("layer"), b.Int("source"), b.Int("ratio")
	heads, dim, window, block, keep := b.Int("heads"), b.Int("head_dim"), b.Int("window"), b.Int("block"), b.Int("keep")
	scale := float64(float32(b.Float("scale")))
	if heads < 1 || dim < 1 || window < 1 || block < 1 || b.Args[0].Last() != heads*dim || b.Args[1].Last() != dim {
		return b.Errorf("%d heads of %d, window %d, block %d for q %s and kv %s", heads, dim, window, block, b.Args[0], b.Args[1])
	}
	if (ratio == 0) != (len(b.Args) == 4) || (ratio > 0 && len(b.Args) != 5) {
		return b.Errorf("ratio %d with %d operands", ratio, len(b.Args))
	}
	if ratio > 0 && source < 0 {
		return b.Errorf("a compressed layer needs its KV source")
	}
	ring, err := csaRing(b, layer)
	if err != nil {
		return err
	}
	if ring.dim != dim {
		return b.Errorf("layer %d's ring holds rows of %d, not %d", layer, ring.dim, dim)
	}
	var kv csaStore
	var topk int64
	if ratio > 0 {
		if kv, err = csaCache(b, source, kvlayout.CacheKV); err != nil {
			return err
		}
		if kv.dim != dim {
			return b.Errorf("KV source %d's entries hold %d values, not %d", source, kv.dim, dim)
		}
		if topk = Dim(b.Args[4], 1); topk < 0 {
			return b.Errorf("idx %s", b.Args[4])
		}
	}
	// the split kernels' scratch (csa41.cu, csa_attn_*)
	lmax := window + topk
	nblk := (lmax + block - 1) / block
	kf, pb, ps := b.Scratch(lmax*dim*4, 0), b.Scratch(lmax*heads*4, 0), b.Scratch(heads*lmax*4, 0)
	bsc, den, valid := b.Scratch(nblk*heads*4, 0), b.Scratch(heads*4, 0), b.Scratch((lmax+7)&^7, 0)
	rlen, kref := b.Scratch(8, 0), b.Scratch(lmax*24, 0) // kref: a csa_Key (3 × 8 bytes) per key
	rlo := b.Scratch(4, 0)                               // the tensor-core kernels': a row's keys have lo halves
	klo := b.Scratch((lmax+7)&^7, 0)                     // and which keys have them
	// the fast mode's logits and output on the tensor cores: the keys widened to bf16
	// halves, the probabilities head-major (csa41.cu's tc layouts)
	tc, tcFlag := b.Fast() && os.Getenv(EnvV41AttentionTC) != "0", int64(0)
	if tc {
		tcFlag = 1
	}
	fill := func(s *Step, a *ArgBuf) int64 {
		rows := s.Arg(0).Rows()
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.W(s.Arg(3))
		if ratio > 0 {
			a.P(s.Arg(4).Ptr)
		} else {
			a.P(0)
		}
		a.P(s.Result(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(rows)
		a.I(keep)
		a.I(heads)
		a.I(dim)
		a.I(window)
		a.I(block)
		a.F(scale)
		a.I(ratio)
		a.I(topk)
		a.I(ring.off)
		a.I(ring.rows)
		a.I(ring.fmt)
		a.I(ring.group)
		a.I(ring.rowBytes)
		a.I(kv.off)
		a.I(kv.fmt)
		a.I(kv.group)
		a.I(kv.rowBytes)
		a.I(max(kv.ratio, 1))
		a.P(s.Err)
		a.P(s.Scratch(kf))
		a.P(s.Scratch(pb))
		a.P(s.Scratch(ps))
		a.P(s.Scratch(bsc))
		a.P(s.Scratch(den))
		a.P(s.Scratch(valid))
		a.I(lmax)
		a.I(nblk)
		a.P(s.Scratch(rlen))
		a.P(s.Scratch(kref))
		a.P(s.Scratch(rlo))
		a.I(tcFlag)
		a.P(s.Scratch(klo))
		return rows
	}
	b.Launch("csa_attn_rows", fill)
	b.Launch("csa_attn_keys", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * lmax })
	b.Launch("csa_attn_kdec", func(s *Step, a *ArgBuf) int64 {
		if tc {
			return fill(s, a) * lmax * 32 // a warp a (row, key)
		}
		return fill(s, a) * lmax * ((dim + 3) / 4)
	})
	groups := (heads + csaHeadGroup - 1) / csaHeadGroup
	if tc {
		// the logits and the output on the tensor cores (tensorcore_attn.cu, csa_tc_*):
		// warps of (row, 16 heads, 64 keys or values), or 8 of each for small steps; each
		// value's chain depends on the shapes alone
		tcArgs := func(s *Step, a *ArgBuf) int64 {
			rows := s.Arg(0).Rows()
			a.P(s.Arg(0).Ptr)
			a.P(s.Scratch(kf))                           // the hi halves
			a.P(s.Scratch(kf) + devptr(2*rows*lmax*dim)) // the lo halves
			a.P(s.Scratch(valid))
			a.P(s.Scratch(rlen))
			a.P(s.Scratch(rlo))
			a.P(s.Scratch(pb))
			a.P(s.Scratch(bsc))
			a.P(s.Scratch(den))
			a.P(s.Result(0).Ptr)
			a.I(rows)
			a.I(heads)
			a.I(dim)
			a.I(lmax)
			a.I(nblk)
			a.I(block)
			a.F(scale)
			a.P(s.Scratch(klo))
			return rows
		}
		tcGroups := (heads + fastAttnTCHeads - 1) / fastAttnTCHeads
		wide := func(s *Step) bool { return s.Arg(0).Rows()*tcGroups*((dim+63)/64) >= attTCWideWarps }
		// the three below in one launch block per (row, csaFusedHeads heads) for steps of at
		// least csaFusedMinBlocks of them (tensorcore_attn.cu, csa_tc_fused): the same values
		groupsF := (heads + csaFusedHeads - 1) / csaFusedHeads
		useFused := func(s *Step) bool { return false }
		fused, threads := "csa_tc_fused3", int64(csaFused3Threads)
		switch os.Getenv(EnvAttFusedForm) {
		case "1":
			fused, threads = "csa_tc_fused", csaFusedThreads
		case "2":
			fused, threads = "csa_tc_fused2", csaFusedThreads
		}
		if env := os.Getenv(EnvAttFused); csaFusedOK(heads, dim, block) && csaFusedShared(dim, threads/32) <= b.SharedMax() && env != "0" {
			min := csaFusedMinBlocks
			useFused = func(s *Step) bool { return env == "1" || s.Arg(0).Rows()*groupsF >= min }
			b.LaunchShared(fused, threads, csaFusedShared(dim, threads/32), func(s *Step, a *ArgBuf) int64 {
				if !useFused(s) {
					return 0
				}
				rows := tcArgs(s, a)
				a.W(s.Arg(3))
				a.P(s.Scratch(ps))
				return rows * groupsF * threads
			})
		}
		// name (wide) and name_n: warps of 64 or 8 of n keys or values, 32 work items each;
		// narrow names the narrow kernel (the output's is csa_tc_out_na unless EnvAttAhead=0:
		// the same warps); none where the step is fused
		tcPair := func(name, narrow string, n int64) {
			for _, k := range []struct {
				name string
				wide bool
				per  int64
			}{{name, true, 64}, {narrow, false, 8}} {
				b.Launch(k.name, func(s *Step, a *ArgBuf) int64 {
					if wide(s) != k.wide || useFused(s) {
						return 0
					}
					return tcArgs(s, a) * ((n + k.per - 1) / k.per) * tcGroups * 32
				})
			}
		}
		tcPair("csa_tc_logits", "csa_tc_logits_n", lmax)
		b.Launch("csa_attn_softmax", func(s *Step, a *ArgBuf) int64 { // a warp per (row, head)
			if useFused(s) {
				return 0
			}
			return fill(s, a) * heads * 32
		})
		outNarrow := "csa_tc_out_n"
		if os.Getenv(EnvAttAhead) != "0" {
			outNarrow = "csa_tc_out_na"
		}
		tcPair("csa_tc_out", outNarrow, dim)
	} else if b.Fast() {
		// fused multiply-adds, loads shared across a warp (csa41.cu, csa_fast_*); each
		// value's order depends on the shapes alone, so batch-invariant mode uses them too
		// the logits in tiles of csaTileHeads × csaTileKeys a launch block (csa_fast_logits)
		// from csaFastWideLogits items of 16 heads × 2 keys, else the narrow items (4 heads ×
		// 1 key): the same values either way
		wideLogits := func(rows int64) int64 { return rows * groups * ((lmax + csaFastKeys - 1) / csaFastKeys) }
		b.Launch("csa_fast_logits", func(s *Step, a *ArgBuf) int64 {
			if wideLogits(s.Arg(0).Rows()) >= csaFastWideLogits {
				return fill(s, a) * ((heads + csaTileHeads - 1) / csaTileHeads) * ((lmax + csaTileKeys - 1) / csaTileKeys) * launchBlock
			}
			return 0
		})
		b.Launch("csa_fast_logits_n", func(s *Step, a *ArgBuf) int64 {
			if wideLogits(s.Arg(0).Rows()) >= csaFastWideLogits {
				return 0
			}
			return fill(s, a) * ((heads + 3) / 4) * lmax
		})
		b.Launch("csa_attn_softmax", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads * 32 }) // a warp per (row, head)
		// the output's wide items (16 heads × 4 values) from csaFastWideItems of them,
		// else the narrow ones (1 head × 1 value): the same values either way
		wide := func(rows int64) int64 { return rows * groups * ((dim + 3) / 4) }
		b.Launch("csa_fast_out", func(s *Step, a *ArgBuf) int64 {
			if n := wide(s.Arg(0).Rows()); n >= csaFastWideItems {
				fill(s, a)
				return n
			}
			return 0
		})
		b.Launch("csa_fast_out_n", func(s *Step, a *ArgBuf) int64 {
			if wide(s.Arg(0).Rows()) >= csaFastWideItems {
				return 0
			}
			return fill(s, a) * heads * dim
		})
	} else {
		b.Launch("csa_attn_logits", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * lmax * groups })
		b.Launch("csa_attn_softmax", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * heads * 32 }) // a warp per (row, head)
		b.Launch("csa_attn_out", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * groups * dim })
	}
	if b.Phase != plan.PhaseDraft && ring.rows > 0 {
		// a warp a (row, group) (csa41.cu)
		b.Launch("csa_ring_push", func(s *Step, a *ArgBuf) int64 { return fill(s, a) * (dim / ring.group) * 32 })
	}
	return nil
}

// tensorcore_attn.cu's csa_tc_fused: the heads a launch block (CTF_HC), its threads
// (CTF_NT), the most keys a softmax block (CTF_KB) and the largest head dim (CTF_DMAX).
const (
	csaFusedHeads   = 32
	csaFusedThreads = 256
	csaFusedKeys    = 64
	csaFusedDimMax  = 512
	// csa_tc_fused3's threads (CTF_NT3: 16 warps)
	csaFused3Threads = 512
)

// EnvAttFused chooses how V4.1's tensor-core attention (fast mode) runs: the fused
// kernel (csa_tc_fused3 unless EnvAttFusedForm says otherwise: the logits, the softmax
// and the output of a row's 32 heads in one launch block with the keys staged in shared
// memory), or csa_tc_logits, csa_attn_softmax and csa_tc_out
// (the same operations on the same operands: the same values bit for bit). Unset: the
// fused kernel for steps of at least csaFusedMinBlocks launch blocks, the three below;
// 1: the fused kernel at every step size; 0: never. Read when a program is bound.
const EnvAttFused = "DEEPINFER_CUDA_ATT_FUSED"

// EnvAttFusedForm picks the fused attention's form: unset or 3, csa_tc_fused3 (the query
// staged in the logits' mma fragment order, the two key tiles' chains of mma
// interleaved, the output's key fragments by ldmatrix, the keys staged without a
// division a copy, in launch blocks of 16 warps at most 128 registers a thread; the
// default since run 39: 0.86 → 0.55 ms at batch 64 and 3.23 → 2.02 ms at 256 on an
// H100, V4.1 context 4,096); 2, that form in blocks of 8 warps (csa_tc_fused2: 0.61 and
// 2.24 ms); 1, run 37c's kernel (csa_tc_fused). The same values bit for bit (on host
// fibers, TestFusedAttentionOnHostFibers). Read when a program is bound.
const EnvAttFusedForm = "DEEPINFER_CUDA_ATT_FUSED_FORM"

// csaFusedMinBlocks is the smallest step (rows × head groups of 32) V4.1's attention
// runs as csa_tc_fused by default: a launch block a multiprocessor or so. Measured on
// an H100 (V4.1 layers 20-23, 4,096; run 37c): at 128 blocks (batch 64) and 512 the
// fused kernel took 29% and 15% less than the three launches, at 2 (batch 1; run 37b)
// three times as long (one block's serial chain a multiprocessor); between 2 and 128
// not measured.
var csaFusedMinBlocks int64 = 128 // (a variable: the tests move it)

// csaFusedOK reports whether csa_tc_fused takes an attention of heads heads of dim
// values in softmax blocks of block keys: at most csaFusedKeys keys a block, a dim of at
// most csaFusedDimMax and a multiple of 8 (the keys' 16-byte copies). The binder also
// needs the device to allow its shared bytes (V4.1's 206 KB: sm_90 and sm_100; the
// three launches elsewhere).
func csaFusedOK(heads, dim, block int64) bool {
	return heads >= 1 && block >= 1 && block <= csaFusedKeys && dim >= 8 && dim <= csaFusedDimMax && dim%8 == 0
}

// csaFusedShared is the dynamic shared memory a fused attention block of warps warps
// takes for a head dim (tensorcore_attn.cu's ctf_smem): the query's two halves and two
// stages of keys, rows of the dim rounded up to 64 values plus 16 bytes; a block's logits
// (rows of 68 floats); the warps' probabilities; the rescales, denominators and valid
// flags.
func csaFusedShared(dim, warps int64) int64 {
	rs := (dim+63)/64*32 + 4
	return 4*rs*(2*csaFusedHeads+2*csaFusedKeys) + 4*csaFusedHeads*(csaFusedKeys+4) + 4*warps*csaFusedKeys + 8*csaFusedHeads + csaFusedKeys
}

// csa41.cu's csa_index_score_blk: the keys a launch block scores (CSA_IXB), the most
// heads (CSA_IXH), the key values a thread widens at a time (CSA_IXC, which divides the
// head dim) and the most query values a row stages (CSA_IXQ).
const (
	csaIndexKeys    = 128
	csaIndexHeads   = 32
	csaIndexChunk   = 32
	csaIndexQueries = 8192
)

// EnvIndexBlock set to 0 keeps V4.1's index scores on csa_index_score (a work item a
// (row, key), the row's queries read from global memory by every key) instead of
// csa_index_score_blk (launch blocks looping over a row's chunks of 128 keys, the queries
// staged in shared memory once; the same values bit for bit, in both numerics modes).
// Read when a program is bound; for comparisons.
const EnvIndexBlock = "DEEPINFER_CUDA_INDEX_BLOCK"

// EnvIndexWords set to 0 runs the index scores' launch blocks on csa_index_score_blk
// (each key value widened by itself, multiply and add apart; run 18b) instead of
// csa_index_score_words (FP8/FP4 key chunks widened from 4-byte words, the products fused
// where each is exact: the same values; run 18c on the H200: 0.764 against 1.285 ms at
// batch 256 and 4,096). Read when a program is bound; for comparisons.
const EnvIndexWords = "DEEPINFER_CUDA_INDEX_WORDS"

// csaIndexTCKeys is csa41.cu's CSA_ITK: the keys a csa_index_score_tc launch block scores.
const csaIndexTCKeys = 256

// csaIndexBlocks is the launch blocks a row gets for csa_index_score_words / _blk (keys
// 128, about 4,096 blocks in all) and csa_index_score_tc (keys 256, about 1,536): a block
// loops over its row's chunks of keys (chunks c, c + nb, ...), the queries staged once, so
// the launch holds a few waves of blocks with work rather than one block a chunk of the
// longest row the plan allows (ecap entries: at 32,768 tokens 256 of a row's 4,128 blocks
// had keys, the others left at once; run 41c). At most one a chunk of ecap. The scores do
// not depend on it.
func csaIndexBlocks(rows, ecap, keys, total int64) int64 {
	return max(1, min(ceilDiv(ecap, keys), ceilDiv(total, max(rows, 1))))
}

// EnvIndexBlocks sets the launch blocks of one index-score launch over its rows
// (csaIndexBlocks' total; default 4,096 for csa_index_score_words / _blk and 1,536 for
// csa_index_score_tc): 1 gives each row one block that loops over all its chunks, a large
// value (1000000000) one block a chunk of the plan's longest row, the grid before run 42.
// The scores do not depend on it. Read when a program is bound; for comparisons.
const EnvIndexBlocks = "DEEPINFER_CUDA_INDEX_BLOCKS"

// csaIndexTotal is EnvIndexBlocks' value, 0 where it is unset.
func csaIndexTotal() (int64, error) {
	v := os.Getenv(EnvIndexBlocks)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > 1<<40 {
		return 0, fmt.Errorf("%s=%q: want a whole number of launch blocks from 1 to 2^40", EnvIndexBlocks, v)
	}
	return n, nil
}

// EnvIndexTC chooses the fast numerics mode's index-score kernel: unset, steps of
// indexTCRows rows or more run csa_index_score_tc (the dots on the tensor cores, each
// settled to the cpu's bf16-rounded value where the sums are exact or the two sums' error
// bound allows, the rest computed in the cpu's order: the same scores bit for bit) and
// smaller steps csa_index_score_words; 1 runs csa_index_score_tc at every step size, 0
// never. Read when a program is bound.
const EnvIndexTC = "DEEPINFER_CUDA_INDEX_TC"

// indexTCRows: the step size (rows) from which the fast mode's index scores run on the
// tensor cores by default. Run 42a (an H200, V4.1 layers 20-23 at 32,768, event times):
// csa_index_score_tc 0.968 / 3.241 ms at batch 64 / 256 against csa_index_score_words'
// 1.142 / 4.235 in the same call; run 43 (an H100) 0.943 / 3.257 against 1.101 / 4.225
// at 32,768 and 0.230 / 0.588 against 0.215 / 0.679 at 4,096; at batch 1 the words kernel
// took ~0.05 ms against run 41e's ~0.12 for the tensor cores (an earlier form).
// docs/perf/attention.md.
const indexTCRows = 64

// csaIndexTCFrom is the least step size (rows) whose index scores run on
// csa_index_score_tc, 0 for none: EnvIndexTC's choice in the fast numerics mode, where the
// kernel takes the shape (at most 32 heads of a multiple of 32 values up to 128, FP8 or
// FP4 keys in groups of 32).
func csaIndexTCFrom(fast bool, heads, dim, fmt, group int64) int64 {
	if !fast || heads > 32 || dim%32 != 0 || dim > 128 || fmt < 1 || fmt > 3 || group != 32 {
		return 0
	}
	switch os.Getenv(EnvIndexTC) {
	case "0":
		return 0
	case "1":
		return 1
	}
	return indexTCRows
}

// csaIndexBlkOK reports whether an indexer of heads heads of dim values runs its scores
// on csa_index_score_blk.
func csaIndexBlkOK(heads, dim int64) bool {
	return os.Getenv(EnvIndexBlock) != "0" && heads <= csaIndexHeads && dim%csaIndexChunk == 0 && heads*dim <= csaIndexQueries
}

// EnvV41AttentionTC set to 0 runs V4.1's fast attention logits and output as fused
// multiply-add chains (csa_fast_*) instead of on the tensor cores (csa_tc_*; read when
// a program is bound).
const EnvV41AttentionTC = "DEEPINFER_CUDA_V41_ATT_TC"

// csaHeadGroup is csa41.cu's CSA_HG: the heads one attention work item serves.
// projTileRows and projTileChannels are the tile of csa41.cu's csa_fast_proj_tile
// (CSA_PT, CSA_PC): a launch block a tile.
const projTileRows, projTileChannels = 16, 64

// projTileMin is the fewest rows a step has for the ratio-1 compressor's projections to
// run on tiles (csa_fast_proj_tile; fewer run csa_fast_proj_part's blocks, which fill
// the device with so few rows). A variable so that a test can choose either kernel.
var projTileMin int64 = 8

const csaHeadGroup = 16

// csaFastKeys is csa41.cu's CSA_FK: the keys one csa_fast_logits work item scores (on the
// emulated device; the choice of kernel counts in these items).
const csaFastKeys = 2

// csaTileHeads, csaTileKeys are csa41.cu's CSA_TH, CSA_TK: the heads and keys of one
// csa_fast_logits launch block (launchBlock threads).
const (
	csaTileHeads = 64
	csaTileKeys  = 32
)

// csaFastWideItems: a step whose output has at least this many wide work items (16
// heads × 4 values) runs csa_fast_out, a smaller one csa_fast_out_n (1 head × 1 value,
// 64× the items). A variable so that a test can choose either.
var csaFastWideItems int64 = 1 << 14

// csaFastWideLogits: a step with at least this many wide logit work items (16 heads × 2
// keys) runs csa_fast_logits, a smaller one csa_fast_logits_n (4 heads × 1 key, 8× the
// items: at batch 1 the wide kernel had 1,280 work items for the whole GPU). A variable
// so that a test can choose either.
var csaFastWideLogits int64 = 1 << 14
