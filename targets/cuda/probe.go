package cuda

import (
	"fmt"
	"runtime"
	"unsafe"
)

// ReadProbe modes (bench.cu read_probe): the rate of the FP4 register tiles' reads
// without their arithmetic.
const (
	// ProbeStream reads the codes of matrix 0 as 16-byte words in a grid-stride loop.
	ProbeStream = 0
	// ProbeTiles reads both matrices' codes and scales as the _rega tiles do (a block per
	// expert, 64 rows and slice; 16 bytes of rows g and g+8 a lane a step), with
	// 46 KB of shared memory a block capping it at their four blocks a multiprocessor.
	ProbeTiles = 1
	// ProbeTilesFree is ProbeTiles without the shared memory (occupancy the registers allow).
	ProbeTilesFree = 2
	// ProbeTilesCodes is ProbeTiles without the scale bytes.
	ProbeTilesCodes = 3
	// ProbeTiled is ProbeTiles over the same bytes laid out in tiles of (16 rows, step of
	// 128 values): each tile's codes 1 KB contiguous and its scale bytes 64 (bench.cu
	// read_probe), so that a warp's loads read whole lines; run 58 found the row layout's
	// pattern, not the tiles' arithmetic, holding them at ~2.08 TB/s on an H100.
	ProbeTiled = 4
	// ProbeTiledCodes is ProbeTiled without the scale bytes.
	ProbeTiledCodes = 5
	// ProbeBulk brings ProbeTiles' bytes into shared memory by bulk copies (cp.async.bulk
	// on an mbarrier, three stages of four steps in flight a block) and reads
	// them from there as the tiles' lanes would: the rate a producer/consumer form of the
	// tiles could read at. K and K/S must be multiples of 512.
	ProbeBulk = 6
)

// probeBulkShared is read_probe_b's dynamic shared memory: 3 stages (PB_NS) of 4 steps
// (PB_ST), each 128 rows' 4 · 64 code bytes and 4 · 4 scale bytes.
const probeBulkShared = 3 * 128 * 4 * (64 + 4)

// ProbeShape is the weights a ReadProbe reads: two matrices (w1 and w3) of E experts ×
// N rows × K FP4 values, read by S slices of K.
type ProbeShape struct{ E, N, K, S int64 }

// ProbeResult is one ReadProbe: the median of the timed launches, the bytes each read,
// and the XOR of every word and scale byte read (bench.cu read_probe: each work item's,
// XORed together here).
type ProbeResult struct {
	Ms    float64
	Bytes int64
	XOR   uint32
}

// ReadProbe uploads codes (2 × E·N·K/2 bytes) and scales (2 × E·N·K/32) and times mode's
// read_probe launch reps times (after one warm-up; medianMs), for benchmarks of the memory's rate
// for the tiles' pattern (BenchmarkFP4ReadProbe). ProbeStream reads only codes[0].
func (rt *Runtime) ReadProbe(mode int, sh ProbeShape, codes, scales [2][]byte, reps int) (ProbeResult, error) {
	var r ProbeResult
	var err error
	rt.w.do(func() { r, err = rt.readProbe(mode, sh, codes, scales, reps) })
	return r, err
}

func (rt *Runtime) readProbe(mode int, sh ProbeShape, codes, scales [2][]byte, reps int) (ProbeResult, error) {
	var res ProbeResult
	if sh.E <= 0 || sh.N <= 0 || sh.N%64 != 0 || sh.K <= 0 || sh.S <= 0 || sh.K%(128*sh.S) != 0 || reps <= 0 || mode < 0 || mode > ProbeBulk {
		return res, fmt.Errorf("read probe: mode %d, shape %+v, %d repetitions: want N a multiple of 64 and K of 128·S", mode, sh, reps)
	}
	if mode == ProbeBulk && (sh.K%512 != 0 || (sh.K/sh.S)%512 != 0) {
		return res, fmt.Errorf("read probe: the bulk mode's shape %+v: want K and K/S multiples of 512 (whole stages, 16-byte copies)", sh)
	}
	cb, sb := sh.E*sh.N*sh.K/2, sh.E*sh.N*sh.K/32
	for p := range 2 {
		if int64(len(codes[p])) != cb || int64(len(scales[p])) != sb {
			return res, fmt.Errorf("read probe: matrix %d has %d code and %d scale bytes, want %d and %d", p, len(codes[p]), len(scales[p]), cb, sb)
		}
	}
	name := "read_probe"
	shared := uint32(0)
	switch mode {
	case ProbeStream, ProbeTilesFree:
	case ProbeBulk:
		name, shared = "read_probe_b", probeBulkShared
	default:
		name = "read_probe_s"
	}
	fn, err := rt.function(name)
	if err != nil {
		return res, err
	}
	if shared > 0 {
		if err := rt.drv.FuncShared(fn, shared); err != nil {
			return res, fmt.Errorf("kernel %s: %d bytes of shared memory: %w", name, shared, err)
		}
	}
	d, s := rt.drv, rt.stream
	items := sh.E * sh.N / 64 * sh.S * 128
	switch mode {
	case ProbeStream:
		items = 132 * 16 * 128 // (a multiprocessor's 16 blocks on an H100's or H200's 132)
		res.Bytes = cb
	case ProbeTilesCodes, ProbeTiledCodes:
		res.Bytes = 2 * cb
	default:
		res.Bytes = 2 * (cb + sb)
	}
	var bufs []devptr
	defer func() {
		for _, b := range bufs {
			d.Free(b)
		}
	}()
	up := func(b []byte) (devptr, error) {
		p, err := d.Alloc(uint64(len(b)))
		if err != nil {
			return 0, fmt.Errorf("read probe buffer (%d bytes): %w", len(b), err)
		}
		bufs = append(bufs, p)
		return p, d.HtoD(p, unsafe.Pointer(unsafe.SliceData(b)), uint64(len(b)), s)
	}
	var a ArgBuf
	var ptr [4]devptr
	for i, b := range [][]byte{codes[0], codes[1], scales[0], scales[1]} {
		if ptr[i], err = up(b); err != nil {
			return res, err
		}
	}
	out, err := d.Alloc(uint64(4 * items))
	if err != nil {
		return res, fmt.Errorf("read probe output (%d bytes): %w", 4*items, err)
	}
	bufs = append(bufs, out)
	a.P(ptr[0])
	a.P(ptr[1])
	a.P(ptr[2])
	a.P(ptr[3])
	a.I(sh.E)
	a.I(sh.N)
	a.I(sh.K)
	a.I(sh.S)
	a.P(out)
	a.I(int64(mode))
	a.I(items)
	if res.Ms, err = rt.medianMs(reps, func() error {
		if err := d.Launch(fn, uint32(items/launchBlock), launchBlock, shared, s, a.w); err != nil {
			return fmt.Errorf("kernel %s: %w", name, err)
		}
		return nil
	}); err != nil {
		return res, err
	}
	words := make([]uint32, items)
	if err := d.DtoH(unsafe.Pointer(unsafe.SliceData(words)), out, uint64(4*items), s); err != nil {
		return res, err
	}
	if err := d.Sync(s); err != nil {
		return res, err
	}
	runtime.KeepAlive(codes)
	runtime.KeepAlive(scales)
	for _, w := range words {
		res.XOR ^= w
	}
	return res, nil
}
