package cuda

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"unsafe"
)

// FP4TileShape is one expert product FP4TilesBench times: E experts' weights of N rows ×
// K FP4 values (Up: w1 and w3, the w1/w3 product of a token's row; otherwise w2, the w2
// product of each slot's row), each token routed to TopK distinct experts drawn
// uniformly (the bench's uniform routing).
type FP4TileShape struct {
	E, N, K, TopK int64
	Up            bool
}

// FP4TileStep is one step FP4TilesBench times on the same weights: T tokens, the
// reduction in S slices of Ks values.
type FP4TileStep struct{ T, S, Ks int64 }

// FP4TileResult is one kernel's timing in FP4TilesBench: the median of the timed
// launches and the weight bytes (codes and scales) of the experts the step touches.
type FP4TileResult struct {
	Kernel string
	T      int64
	Ms     float64
	Bytes  int64
}

// FP4TilesBench times the FP4 expert tiles named by kernels (fast_moe_up_fp4_rega,
// fast_moe_down_fp4_regb, ...) on random weights and bf16 activations of sh, each the
// median of reps launches after one warm-up, for a benchmark of the tiles alone
// (BenchmarkFP4Tiles: no checkpoint, no program). Kernels whose names end in _regb,
// _regbd, _regt or _widet read the weights in the tiled layout (tileFP4), the others in
// rows.
// Every kernel's partial sums must equal the first's bit for bit (the same chains), or
// it returns an error naming the first difference.
func (rt *Runtime) FP4TilesBench(kernels []string, sh FP4TileShape, steps []FP4TileStep, seed uint64, reps int) ([]FP4TileResult, error) {
	var res []FP4TileResult
	var err error
	rt.w.do(func() { res, err = rt.fp4TilesBench(kernels, sh, steps, seed, reps) })
	return res, err
}

func (rt *Runtime) fp4TilesBench(kernels []string, sh FP4TileShape, steps []FP4TileStep, seed uint64, reps int) ([]FP4TileResult, error) {
	bad := sh.E <= 0 || sh.N <= 0 || sh.N%16 != 0 || sh.K <= 0 || sh.K%128 != 0 || sh.TopK <= 0 || sh.TopK > sh.E || reps <= 0 || len(kernels) == 0 || len(steps) == 0
	for _, st := range steps {
		bad = bad || st.T <= 0 || st.S <= 0 || st.Ks <= 0 || st.Ks%128 != 0 || st.S*st.Ks < sh.K || (st.S-1)*st.Ks >= sh.K
	}
	if bad {
		return nil, fmt.Errorf("fp4 tiles bench: shape %+v, steps %+v, %d repetitions, %d kernels: want N a multiple of 16, K and Ks of 128, S slices of Ks covering K, TopK ≤ E", sh, steps, reps, len(kernels))
	}
	d, s := rt.drv, rt.stream
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	bb := &benchBufs{rt: rt, what: "fp4 tiles bench"}
	defer bb.free()
	up, zero := bb.up, bb.zero
	// the weights: matrix m of expert e (Up: m 0 w1, 1 w3; else w2), in both layouts
	mats := int64(1)
	if sh.Up {
		mats = 2
	}
	cb, sbytes := sh.N*sh.K/2, sh.N*sh.K/32
	type wptr struct{ rowC, rowS, tC, tS devptr }
	ws := make([]wptr, mats*sh.E)
	codes, scales := make([]byte, cb), make([]byte, sbytes)
	for i := range ws {
		for j := 0; j+8 <= len(codes); j += 8 {
			binary.LittleEndian.PutUint64(codes[j:], rng.Uint64())
		}
		for j := range scales {
			scales[j] = byte(118 + rng.IntN(11)) // 2^-9 .. 2^1, as fp4_fibers_main.cc's
		}
		tc, ts := tileFP4(codes, scales, int(sh.N), int(sh.K))
		var w wptr
		for k, b := range [][]byte{codes, scales, tc, ts} {
			p, err := up(b)
			if err != nil {
				return nil, err
			}
			*[]*devptr{&w.rowC, &w.rowS, &w.tC, &w.tS}[k] = p
		}
		ws[i] = w
		if err := d.Sync(s); err != nil { // (codes and scales are refilled next)
			return nil, err
		}
	}
	// the tables of both layouts: 3E Weights (prelude.h Weight: p, s, fmt, cols); Up
	// reads tab[e] and tab[2E + e], the w2 product tab[E + e]
	table := func(tiled bool) []byte {
		b := make([]byte, 3*sh.E*32)
		for e := int64(0); e < sh.E; e++ {
			for m := int64(0); m < mats; m++ {
				w := ws[m*sh.E+e]
				slot := sh.E + e // w2
				if sh.Up {
					slot = e + 2*m*sh.E // w1, w3
				}
				p, sc, f := w.rowC, w.rowS, int64(fmtFP4)
				if tiled {
					p, sc, f = w.tC, w.tS, fmtFP4Tiled
				}
				o := b[slot*32:]
				binary.LittleEndian.PutUint64(o[0:], uint64(p))
				binary.LittleEndian.PutUint64(o[8:], uint64(sc))
				binary.LittleEndian.PutUint64(o[16:], uint64(f))
				binary.LittleEndian.PutUint64(o[24:], uint64(sh.K))
			}
		}
		return b
	}
	rowTab, err := up(table(false))
	if err != nil {
		return nil, err
	}
	tTab, err := up(table(true))
	if err != nil {
		return nil, err
	}
	var res []FP4TileResult
	for _, st := range steps {
		if err := rt.fp4TilesStep(kernels, sh, st, rng, up, zero, rowTab, tTab, mats, cb, sbytes, reps, &res); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// fp4TilesStep is FP4TilesBench's step st: its routing and activations uploaded, then
// each kernel timed and its partial sums checked against the first's.
func (rt *Runtime) fp4TilesStep(kernels []string, sh FP4TileShape, st FP4TileStep, rng *rand.Rand, up func([]byte) (devptr, error),
	zero func(int64) (devptr, error), rowTab, tTab devptr, mats, cb, sbytes int64, reps int, res *[]FP4TileResult) error {
	d, s := rt.drv, rt.stream
	// the routing: token t's TopK distinct experts, slot t·TopK + j; each expert's slots
	// in order, the active experts in id order (then -1 up to min(E, slots))
	slots := st.T * sh.TopK
	byExpert := make([][]int32, sh.E)
	for t := int64(0); t < st.T; t++ {
		for j, e := range rng.Perm(int(sh.E))[:sh.TopK] {
			byExpert[e] = append(byExpert[e], int32(t*sh.TopK+int64(j)))
		}
	}
	nact := min(sh.E, slots)
	counts, off := make([]int64, sh.E), make([]int64, sh.E)
	list := make([]int32, 0, slots)
	act := make([]int32, 0, nact)
	bytes := int64(0)
	for e := range byExpert {
		counts[e], off[e] = int64(len(byExpert[e])), int64(len(list))
		list = append(list, byExpert[e]...)
		if len(byExpert[e]) > 0 {
			act = append(act, int32(e))
			bytes += mats * (cb + sbytes)
		}
	}
	for int64(len(act)) < nact {
		act = append(act, -1)
	}
	// the activations: bf16 values (xexact), rows of Kp/2 pairs; Up a token's row, the w2
	// product a slot's
	xrows := st.T
	if !sh.Up {
		xrows = slots
	}
	kp := st.S * st.Ks
	xh := make([]byte, xrows*kp*2)
	for r := int64(0); r < xrows; r++ {
		for k := int64(0); k < kp; k++ {
			v := uint16(0)
			if k < sh.K {
				v = uint16(rng.Uint32()&0x8000) | uint16(120+rng.IntN(8))<<7 | uint16(rng.IntN(128))
			}
			binary.LittleEndian.PutUint16(xh[(r*kp+k)*2:], v)
		}
	}
	i64s := func(v []int64) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 8*len(v)) }
	i32s := func(v []int32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v)) }
	var p struct{ counts, off, list, act, xh, xl, part devptr }
	for k, b := range [][]byte{i64s(counts), i64s(off), i32s(list), i32s(act), xh} {
		ptr, err := up(b)
		if err != nil {
			return err
		}
		*[]*devptr{&p.counts, &p.off, &p.list, &p.act, &p.xh}[k] = ptr
	}
	planes := int64(1)
	if sh.Up {
		planes = 2
	}
	partBytes := planes * st.S * slots * sh.N * 4
	var err error
	if p.xl, err = zero(int64(len(xh))); err != nil { // (bf16 activations: no lo halves)
		return err
	}
	if p.part, err = zero(partBytes); err != nil {
		return err
	}
	if err := d.Sync(s); err != nil {
		return err
	}
	runtime.KeepAlive(xh)
	rb := int64(128)
	if sh.Up {
		rb = 64
	}
	blocks := nact * ((sh.N + rb - 1) / rb) * st.S
	var first []byte
	for _, name := range kernels {
		fn, err := rt.function(name)
		if err != nil {
			return err
		}
		shared := fp4BulkShared(name)
		if shared > 0 {
			if err := d.FuncShared(fn, uint32(shared)); err != nil {
				return fmt.Errorf("kernel %s: %d bytes of shared memory: %w", name, shared, err)
			}
		}
		tab := rowTab
		if fp4TiledKernel(name) {
			tab = tTab
		}
		var a ArgBuf
		for _, v := range []devptr{p.xh, p.xl, tab, p.counts, p.off, p.list, 0, 0, p.part, 0, p.act} {
			a.P(v)
		}
		k := int64(1)
		if sh.Up {
			k = sh.TopK
		}
		for _, v := range []int64{slots, k, sh.E, sh.N, sh.K, kp, st.S, st.Ks, nact, 1} { // (v41: not read by the tiles)
			a.I(v)
		}
		a.F(10) // (limit: not read by the tiles)
		a.I(1)  // xexact
		a.P(0)
		a.P(0)
		if err := d.Memset(p.part, 0, uint64(partBytes), s); err != nil {
			return err
		}
		ms, err := rt.medianMs(reps, func() error {
			if err := d.Launch(fn, uint32(blocks), launchBlock, uint32(shared), s, a.w); err != nil {
				return fmt.Errorf("kernel %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return err
		}
		out, err := rt.readDev(p.part, partBytes)
		if err != nil {
			return fmt.Errorf("kernel %s: %w", name, err)
		}
		if first == nil {
			first = out
		} else if i := firstDiff(first, out); i >= 0 {
			return fmt.Errorf("fp4 tiles bench: %s's partial sums differ from %s's at byte %d of %d", name, kernels[0], i, partBytes)
		}
		*res = append(*res, FP4TileResult{Kernel: name, T: st.T, Ms: ms, Bytes: bytes})
	}
	return nil
}

// benchBufs are the device buffers a bench allocates (FP4TilesBench, E4M3GemmBench),
// freed together by free; what names the bench in their errors.
type benchBufs struct {
	rt   *Runtime
	what string
	ps   []devptr
}

// alloc is a device buffer of n bytes.
func (b *benchBufs) alloc(n int64) (devptr, error) {
	p, err := b.rt.drv.Alloc(uint64(max(n, 16)))
	if err != nil {
		return 0, fmt.Errorf("%s buffer (%d bytes): %w", b.what, n, err)
	}
	b.ps = append(b.ps, p)
	return p, nil
}

// zero is a device buffer of n bytes set to zeros on the runtime's stream.
func (b *benchBufs) zero(n int64) (devptr, error) {
	p, err := b.alloc(n)
	if err != nil {
		return 0, err
	}
	return p, b.rt.drv.Memset(p, 0, uint64(n), b.rt.stream)
}

// up is a device buffer holding data, copied on the runtime's stream (data must stay
// alive until the stream is synchronised).
func (b *benchBufs) up(data []byte) (devptr, error) {
	p, err := b.alloc(int64(len(data)))
	if err != nil || len(data) == 0 {
		return p, err
	}
	return p, b.rt.drv.HtoD(p, unsafe.Pointer(unsafe.SliceData(data)), uint64(len(data)), b.rt.stream)
}

func (b *benchBufs) free() {
	for _, p := range b.ps {
		b.rt.drv.Free(p)
	}
}

// fp4TiledKernel reports whether an FP4 tile kernel reads the tiled layout.
func fp4TiledKernel(name string) bool {
	return fp4BulkShared(name) > 0 || strings.HasSuffix(name, "_regt") || strings.HasSuffix(name, "_widet")
}

// firstDiff is the first index where a and b differ (-1: none; they have one length).
func firstDiff(a, b []byte) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}
