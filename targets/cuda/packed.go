package cuda

import (
	"fmt"
	"unsafe"

	"deepinfer/targets"
)

// Packed uploads (the default; EnvPacked=0 turns them off). A step's parameters —
// tokens, positions, logits rows, sampling values, the sequence table and the grammar
// masks — are laid out in one host buffer (packLayout) and reach the device in one
// copy, into a staging region of the arena; unpack_step (kernels/basic.cu) scatters
// them to the parameter buffers the kernels read and replaces FromPrevious tokens with
// the previous step's sampled ids on the way. At the step's end keep_ids copies the
// sampled ids next to the error flag, so that one copy brings both back. Per step that
// is one host-to-device copy, the graph (or the launches), and for a pipelined step one
// device-to-host copy, where the per-parameter path makes five or six uploads, a
// resolve_prev launch, a device-to-device copy and two read-backs.
//
// Only the grammar masks of rows that have one travel: the per-parameter path copies
// every logits row's mask words (4·MaskCols bytes a row, 16 KB for a vocabulary of
// 129,280, so 4 MB a step at batch 256) even when no row has a mask; the packed layout
// copies one flag word a row plus the words of the masked rows. The sampler reads a
// row's words only when its flag is set, so the rows without one are not rewritten.
//
// unpack_step and keep_ids go inside the step's CUDA graph. Their arguments are the
// layout's word offsets, which follow from T, R, NSeq and whether the program has a
// mask parameter (fixed per program: the graph key's phase), the mask row length (fixed
// per plan), and addresses fixed while the arena stays (the staging region, the
// parameter buffers, the sequence table, the error flag, the kept ids, the program's
// sampled-ids slot) — the graph key (phase, T, R, K, NSeq) covers all of it, and graphs
// are dropped with the arena. What changes from step to step with the same shape — the
// previous step's id count, how many rows carry a mask, the values themselves — is in
// the staging region's header and body, read by the kernel from device memory. A
// runtime reads EnvPacked once, when it opens, so its graphs are all of one kind.

// EnvPacked set to 0 restores the per-parameter copies (and resolve_prev, the
// device-to-device copy of the sampled ids and the two read-backs of a pipelined step).
const EnvPacked = "DEEPINFER_CUDA_PACKED"

// packHeader is the staging region's header in words: nprev and m, one i64 each.
const packHeader = 4

// unpackMaskBlocks bounds the launch blocks unpack_step gets for the mask words (a
// grid-stride loop covers the rest): the grid must follow from the step's shape, and
// sizing it for every row masked would launch thousands of idle blocks on the usual
// step with none.
const unpackMaskBlocks = 256

// packLayout is the staging region of one step: word offsets from its start.
type packLayout struct {
	tok, pos, rows, sample, seqs, flags, maskRows, masks int64
	T, R, seqWords                                       int64
	cols                                                 int64 // mask row words; 0 without a mask parameter
	m                                                    int64 // rows with a mask this step
	words                                                int64 // the whole region this step
}

// layoutFor lays out a step of T tokens, R logits rows and nseq sequences, m of whose
// rows carry a mask of cols words (cols 0: no mask parameter). The one place the
// layout is defined: the host packs by it, unpack_step gets its offsets.
func layoutFor(T, R, nseq, cols, m int64) packLayout {
	l := packLayout{T: T, R: R, seqWords: 10 * nseq, cols: cols, m: m}
	off := int64(packHeader)
	seg := func(n int64) int64 { o := off; off += n; return o }
	l.tok, l.pos, l.rows, l.sample, l.seqs = seg(T), seg(T), seg(R), seg(4*R), seg(l.seqWords)
	if cols > 0 {
		l.flags, l.maskRows = seg(R), seg(R)
		l.masks = seg(m * (cols - 1))
	} else {
		l.m = 0
	}
	l.words = off
	return l
}

// stageRegionBytes is the device staging region for steps of up to maxT tokens, rows
// and sequences, every row masked.
func stageRegionBytes(maxT, cols int64) int64 {
	return 4 * layoutFor(maxT, maxT, maxT, cols, maxT).words
}

// packFor is the layout of this step.
func (rt *Runtime) packFor(pr *prog, in *targets.StepIn, st Step) packLayout {
	var cols, m int64
	if pr.mask >= 0 {
		cols = rt.params.maskCols
		for _, mk := range in.Masks {
			if mk != nil {
				m++
			}
		}
	}
	return layoutFor(st.T, st.R, st.NSeq, cols, m)
}

// uploadPacked packs the step's parameters by l into stage (a pipelined step's
// page-locked buffer; nil: the runtime's own host buffer) and copies them to the
// staging region in one copy. With resolve, FromPrevious tokens are replaced by the
// previous step's ids (unpack_step, at the step's start); without, they are copied as
// they are (and refused by embed, as Step always did).
func (rt *Runtime) uploadPacked(in *targets.StepIn, l *packLayout, resolve bool, stage []byte) error {
	n := 4 * l.words
	if n > rt.stageBytes {
		return fmt.Errorf("a step's parameters take %d bytes; the staging region holds %d (more rows or sequences than the arena's %d tokens)", n, rt.stageBytes, rt.maxT)
	}
	if stage == nil {
		h := &rt.host
		if int64(len(h.pack))*8 < n {
			h.pack = make([]int64, (n+7)/8)
		}
		stage = unsafe.Slice((*byte)(unsafe.Pointer(&h.pack[0])), n)
	}
	if int64(len(stage)) < n || uintptr(unsafe.Pointer(&stage[0]))%8 != 0 {
		return fmt.Errorf("upload staging: %d bytes needed, a buffer of %d", n, len(stage))
	}
	w := unsafe.Slice((*int32)(unsafe.Pointer(&stage[0])), l.words)
	nprev := int64(-1)
	if resolve {
		nprev = rt.prevN
	}
	*(*int64)(unsafe.Pointer(&w[0])) = nprev
	*(*int64)(unsafe.Pointer(&w[2])) = l.m
	words := func(p unsafe.Pointer, n int) []int32 {
		if n == 0 {
			return nil
		}
		return unsafe.Slice((*int32)(p), n)
	}
	h := &rt.host
	copy(w[l.tok:l.tok+l.T], in.Tokens)
	copy(w[l.pos:l.pos+l.T], h.positions)
	copy(w[l.rows:l.rows+l.R], in.Rows)
	copy(w[l.sample:l.sample+4*l.R], words(unsafe.Pointer(unsafe.SliceData(in.Sample)), len(in.Sample)))
	copy(w[l.seqs:l.seqs+l.seqWords], words(unsafe.Pointer(unsafe.SliceData(h.seqs)), 2*len(h.seqs)))
	if l.cols > 0 {
		k := int64(0)
		mw := l.cols - 1
		for r := int64(0); r < l.R; r++ {
			var mk []uint64
			if in.Masks != nil {
				mk = in.Masks[r]
			}
			if mk == nil {
				w[l.flags+r] = 0
				continue
			}
			// as maskWords lays a row out: the words' low halves first (little-endian)
			w[l.flags+r] = 1
			w[l.maskRows+k] = int32(r)
			copy(w[l.masks+k*mw:l.masks+(k+1)*mw], words(unsafe.Pointer(&mk[0]), 2*len(mk)))
			k++
		}
		for ; k < l.R; k++ {
			w[l.maskRows+k] = -1
		}
	}
	if err := rt.drv.HtoD(rt.stageDev, unsafe.Pointer(&stage[0]), uint64(n), rt.stream); err != nil {
		return fmt.Errorf("upload of the step's parameters (%d bytes, one copy): %w", n, err)
	}
	return nil
}

// unpack launches unpack_step for layout l (in the step's graph when it has one).
func (rt *Runtime) unpack(l *packLayout) error {
	p := &rt.params
	a := &rt.unpackBuf
	a.reset()
	a.P(rt.stageDev)
	a.P(rt.prevIds)
	a.P(rt.errFlag)
	a.P(p.tokens)
	a.P(p.positions)
	a.P(p.rows)
	a.P(p.sample)
	a.P(rt.seqTab)
	if l.cols > 0 {
		a.P(p.mask)
	} else {
		a.P(0)
	}
	a.I(l.T)
	a.I(l.R)
	a.I(l.seqWords)
	a.I(l.cols)
	for _, o := range []int64{l.tok, l.pos, l.rows, l.sample, l.seqs, l.flags, l.maskRows, l.masks} {
		a.I(o)
	}
	n := max(l.T, 4*l.R, l.seqWords)
	grid := (n + launchBlock - 1) / launchBlock
	if l.cols > 0 {
		grid = max(grid, min((l.R*(l.cols-1)+launchBlock-1)/launchBlock, unpackMaskBlocks))
	}
	if err := rt.drv.Launch(rt.unpackFn, uint32(max(grid, 1)), launchBlock, 0, rt.stream, a.w); err != nil {
		return fmt.Errorf("kernel unpack_step: %w", err)
	}
	return nil
}

// keepIds launches keep_ids: the R sampled ids in ids copied next to the error flag.
func (rt *Runtime) keepIds(ids devptr, R int64) error {
	if R == 0 {
		return nil
	}
	a := &rt.keepBuf
	a.reset()
	a.P(ids)
	a.P(rt.prevIds)
	a.I(R)
	if err := rt.drv.Launch(rt.keepFn, uint32((R+launchBlock-1)/launchBlock), launchBlock, 0, rt.stream, a.w); err != nil {
		return fmt.Errorf("kernel keep_ids: %w", err)
	}
	return nil
}
