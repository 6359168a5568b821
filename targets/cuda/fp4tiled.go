package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"

	"deepinfer/plan"
)

// EnvFP4Tiled set to 1 uploads every FP4 weight (fp4_g32) of 16·n rows and 128·m
// columns in the tiled layout (Weight.fmt 6, fmtFP4Tiled) instead of row by row, and runs
// the FP4 expert tiles that read it by bulk copies (fast_moe_up_fp4_regb /
// _down_fp4_regb: each warp's weights copied into shared memory three steps ahead); set
// to d, by rings of eight steps at two blocks a multiprocessor (_regbd); set to r, the
// same layout read by the register tiles (fast_moe_up_fp4_regt /
// _down_fp4_regt: a warp's loads of a step whole 128-byte lines, one step ahead). Only
// the fast and fp8 modes' _rega tiles (V4.1's experts, and V4's in the fp8 mode) have
// forms that read the layout: a program whose FP4 weights another kernel would read
// fails to open with this set (the exact mode, V4's fast mode, the other tile forms'
// variables), and its prefill steps run the tiled forms instead of the wide tiles. The
// same values either way. Read when the runtime opens; 0 or unset: the row layout.
const EnvFP4Tiled = "DEEPINFER_CUDA_FP4_TILED"

// fmtFP4Tiled is prelude.h's Weight.fmt of an FP4 weight in the tiled layout. Only
// tensorcore_fp4.cu's _regt and _regb tiles read it (wval does not: checkTiledReaders
// keeps it from every other kernel).
const fmtFP4Tiled = 6

// fp4BulkShared is the dynamic shared memory of the bulk-copy tiles of this suffix:
// four warps' rings of FP4B_NS (4; _regbd 8) steps of FP4B_STAGE (2,176) bytes
// (tensorcore_fp4.cu fp4_tiles_bulk); 0 for other kernels.
func fp4BulkShared(name string) int64 {
	switch {
	case strings.HasSuffix(name, "_regb"):
		return 4 * 4 * 2176
	case strings.HasSuffix(name, "_regbd"):
		return 4 * 8 * 2176
	}
	return 0
}

// fp4TiledEnv reads EnvFP4Tiled: whether the layout is tiled, and the suffix of the tiles
// that read it ("_regb" or "_regt").
func fp4TiledEnv() (bool, string, error) {
	switch v := strings.TrimSpace(os.Getenv(EnvFP4Tiled)); v {
	case "", "0":
		return false, "", nil
	case "1":
		return true, "_regb", nil
	case "d":
		return true, "_regbd", nil
	case "r":
		return true, "_regt", nil
	default:
		return false, "", fmt.Errorf("%s=%q: want 1 (the tiled FP4 layout, read by bulk copies), d (by deeper rings of bulk copies), r (by the register tiles) or 0", EnvFP4Tiled, v)
	}
}

// tiledFP4Shape reports whether a weight of this storage and shape is laid out in tiles
// under EnvFP4Tiled: FP4, two dimensions, rows a multiple of 16, columns of 128.
func tiledFP4Shape[T int | int64](storage string, shape []T) bool {
	return storage == "fp4_g32_ue8m0" && len(shape) == 2 && shape[0] > 0 && shape[0]%16 == 0 && shape[1] > 0 && shape[1]%128 == 0
}

// tileFP4 lays an FP4 weight of rows × cols (codes two a byte, the even value low;
// a UE8M0 scale per 32 values of a row) out in tiles of 16 rows × 128 values: tiles in
// row-group order, then along the row; a tile's 1,024 code bytes hold value (r, k) of the
// tile (r < 16, k < 128) in the 16-byte piece 16·(4·(r%8) + k/32) of its half r/8 (512
// bytes a half), at the same place within the piece as in the row layout, and its 64
// scale bytes hold that piece's scale at 2·(4·(r%8) + k/32) + r/8. So the 16 bytes lane
// (g, t) of a warp loads for rows g and g+8 at a step lie 512 bytes apart, and the 32
// lanes' loads are contiguous (tensorcore_fp4.cu fp4_rows8t).
func tileFP4(codes, scales []byte, rows, cols int) (tc, ts []byte) {
	tc, ts = make([]byte, len(codes)), make([]byte, len(scales))
	groups, steps := rows/16, cols/128
	work := func(g0, g1 int) {
		for rg := g0; rg < g1; rg++ {
			for r16 := 0; r16 < 16; r16++ {
				r := 16*rg + r16
				row, srow := codes[r*cols/2:(r+1)*cols/2], scales[r*cols/32:(r+1)*cols/32]
				lane0, h8 := 4*(r16%8), r16/8
				for j := 0; j < steps; j++ {
					tile := rg*steps + j
					for t := 0; t < 4; t++ {
						lane := lane0 + t
						copy(tc[tile*1024+512*h8+16*lane:][:16], row[64*j+16*t:][:16])
						ts[tile*64+2*lane+h8] = srow[4*j+t]
					}
				}
			}
		}
	}
	// (a V4.1 layer's experts are ~10 GB: the groups split among the CPUs)
	n := min(runtime.GOMAXPROCS(0), max(1, groups/64))
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(g0, g1 int) { defer wg.Done(); work(g0, g1) }(groups*i/n, groups*(i+1)/n)
	}
	wg.Wait()
	return tc, ts
}

// checkTiledReaders fails an instruction given an FP4 weight in the tiled layout unless
// its kernels read that layout for that operand (Bind.fp4TiledArgs).
func (rt *Runtime) checkTiledReaders(b *Bind) error {
	if !rt.fp4Tiled {
		return nil
	}
	for j, w := range b.weights {
		if j >= b.fp4TiledArgs[0] && j < b.fp4TiledArgs[1] {
			continue
		}
		if w != nil && tiledFP4(rt, w) {
			return fmt.Errorf("weight %s would be in the tiled FP4 layout (%s=1), which only the fast and fp8 modes' expert tiles for bf16 activations read; unset %s for this program", w.Name, EnvFP4Tiled, EnvFP4Tiled)
		}
	}
	return nil
}

// tiledFP4 reports whether the runtime uploads w in the tiled layout.
func tiledFP4(rt *Runtime, w *plan.Weight) bool {
	return rt != nil && rt.fp4Tiled && tiledFP4Shape(w.Storage, w.Shape)
}
