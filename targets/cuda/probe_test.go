package cuda_test

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"deepinfer/targets"
	"deepinfer/targets/cuda"
)

// probeData is two matrices' random codes and scales of shape sh.
func probeData(sh cuda.ProbeShape, seed uint64) (codes, scales [2][]byte) {
	r := rand.New(rand.NewPCG(seed, 7))
	for p := range 2 {
		codes[p] = make([]byte, sh.E*sh.N*sh.K/2)
		scales[p] = make([]byte, sh.E*sh.N*sh.K/32)
		for i := 0; i+8 <= len(codes[p]); i += 8 {
			binary.LittleEndian.PutUint64(codes[p][i:], r.Uint64())
		}
		for i := range scales[p] {
			scales[p][i] = byte(r.Uint32())
		}
	}
	return codes, scales
}

// probeXOR is what read_probe's items XOR together over every byte they read: each
// 32-bit word of the codes read (matrix 0 alone in the stream mode), and in the tiles'
// modes but ProbeTilesCodes and ProbeTiledCodes each scale byte, shifted 8 bits up for
// rows 8-15 of their 16-row group (in the tiled layout, the second 32 bytes of each
// 64-byte tile).
func probeXOR(mode int, sh cuda.ProbeShape, codes, scales [2][]byte) uint32 {
	var x uint32
	mats := 2
	if mode == cuda.ProbeStream {
		mats = 1
	}
	for p := range mats {
		for i := 0; i < len(codes[p]); i += 4 {
			x ^= binary.LittleEndian.Uint32(codes[p][i:])
		}
		if mode == cuda.ProbeStream || mode == cuda.ProbeTilesCodes || mode == cuda.ProbeTiledCodes {
			continue
		}
		srow := sh.K / 32
		for i, b := range scales[p] {
			if hi := (int64(i)/srow)%16 >= 8; (mode != cuda.ProbeTiled && hi) || (mode == cuda.ProbeTiled && i%64 >= 32) {
				x ^= uint32(b) << 8
			} else {
				x ^= uint32(b)
			}
		}
	}
	return x
}

func openProbe(t testing.TB) *cuda.Runtime {
	p, ws := cuda.CompileDir(t, "../../testdata/tiny-v4-dev")
	r, err := devExec{}.Open(p, ws, targets.Options{MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	return r.(*cuda.Runtime)
}

// TestReadProbeReadsEveryByte: bench.cu's read_probe (BenchmarkFP4ReadProbe's kernel)
// reads every code word (and, but in ProbeTilesCodes and ProbeTiledCodes, scale byte) of
// its shape once, in each mode: the XOR of its work items' XORs equals the host's over
// the same bytes (random data: a byte read twice or not at all changes it), and a bad
// shape is refused. On the emulated device ProbeBulk's kernel (read_probe_b) reads as
// ProbeTiles does, so there this checks only its launch (the name, the dynamic shared
// memory, the refused shapes); its bulk copies and mbarriers run only with -device gpu.
func TestReadProbeReadsEveryByte(t *testing.T) {
	rt := openProbe(t)
	defer rt.Close()
	sh := cuda.ProbeShape{E: 3, N: 128, K: 1024, S: 2}
	codes, scales := probeData(sh, 1)
	for _, mode := range []int{cuda.ProbeStream, cuda.ProbeTiles, cuda.ProbeTilesFree, cuda.ProbeTilesCodes, cuda.ProbeTiled, cuda.ProbeTiledCodes, cuda.ProbeBulk} {
		r, err := rt.ReadProbe(mode, sh, codes, scales, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := probeXOR(mode, sh, codes, scales); r.XOR != want {
			t.Errorf("mode %d: the items' XOR %#x, the bytes' %#x", mode, r.XOR, want)
		}
	}
	if _, err := rt.ReadProbe(cuda.ProbeTiles, cuda.ProbeShape{E: 1, N: 96, K: 1024, S: 2}, codes, scales, 1); err == nil {
		t.Error("a shape of 96 rows (not whole 64-row blocks) was not refused")
	}
	sh = cuda.ProbeShape{E: 1, N: 64, K: 1024, S: 4} // slices of 256 values: not whole stages
	codes, scales = probeData(sh, 3)
	if _, err := rt.ReadProbe(cuda.ProbeBulk, sh, codes, scales, 1); err == nil {
		t.Error("the bulk mode took slices of 256 values (half a stage)")
	}
}

// BenchmarkFP4ReadProbe times read_probe's first six modes (the codes as a stream, the
// _rega tiles' loads at their occupancy, without their shared memory, without the scale
// bytes, and the same loads over a layout in (16-row, step) tiles with and without the
// scale bytes) over V4's up weights of 128 experts (2,048 × 4,096 values each, w1 and
// w3: 1.07 GB of codes and scales) in 4 slices, the tiles' split at decode, and reports
// each mode's rate (GB/s of bytes read, the median of 10 launches) with the device's
// copy rate beside them: on the GPU run
// `cuda.test -test.run '^$' -test.bench FP4ReadProbe -test.benchtime 1x -device gpu`.
// On the emulated device a small shape (its rates mean nothing there).
func BenchmarkFP4ReadProbe(b *testing.B) {
	benchProbe(b, []probeMode{{cuda.ProbeStream, "stream"}, {cuda.ProbeTiles, "tiles"}, {cuda.ProbeTilesFree, "tiles-free"},
		{cuda.ProbeTilesCodes, "tiles-codes"}, {cuda.ProbeTiled, "tiled"}, {cuda.ProbeTiledCodes, "tiled-codes"}})
}

// BenchmarkFP4ReadProbeBulk times the seventh, the tiles' bytes brought into shared
// memory by bulk copies on mbarriers and read from there (read_probe_b), on the same
// weights; a benchmark of its own, so that `-test.bench FP4ReadProbe` prints the six
// plain modes first, whatever this one does on its first GPU.
func BenchmarkFP4ReadProbeBulk(b *testing.B) {
	benchProbe(b, []probeMode{{cuda.ProbeBulk, "bulk"}})
}

type probeMode struct {
	mode int
	name string
}

// benchProbe times each of modes over V4's up weights (a small shape on the emulated
// device) beside the copy rate, checking each launch's XOR.
func benchProbe(b *testing.B, modes []probeMode) {
	rt := openProbe(b)
	defer rt.Close()
	sh := cuda.ProbeShape{E: 128, N: 2048, K: 4096, S: 4}
	if *device != "gpu" {
		sh = cuda.ProbeShape{E: 2, N: 64, K: 1024, S: 2}
	}
	codes, scales := probeData(sh, 2)
	for range b.N {
		bw, err := rt.CopyBandwidth(1<<30, 10)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(bw/1e9, "copy-GB/s")
		for _, m := range modes {
			r, err := rt.ReadProbe(m.mode, sh, codes, scales, 10)
			if err != nil {
				b.Fatal(err)
			}
			if want := probeXOR(m.mode, sh, codes, scales); r.XOR != want {
				b.Fatalf("%s: the items' XOR %#x, the bytes' %#x", m.name, r.XOR, want)
			}
			b.ReportMetric(float64(r.Bytes)/(r.Ms/1e3)/1e9, m.name+"-GB/s")
			b.Logf("%s: %d bytes in %.3f ms (median of 10): %.0f GB/s; copy %.0f GB/s (read + write)", m.name, r.Bytes, r.Ms, float64(r.Bytes)/(r.Ms/1e3)/1e9, bw/1e9)
		}
	}
}
