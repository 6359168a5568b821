package cuda

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"unsafe"
)

// E4M3GemmStep is one product E4M3GemmBench times on the same weights: M activation
// rows, the reduction in S slices of Ks values (S 0: the slices the binder gives the
// product in the fp8 numerics mode).
type E4M3GemmStep struct{ M, S, Ks int64 }

// e4m3Slices is the binder's slices of an e4m3 product of N × K (ops_fast.go: fastSplits'
// slice length rounded up to the kernels' steps of 128 values).
func e4m3Slices(N, K int64) (S, ks int64) {
	_, ks = fastSplits(N, K)
	ks = (ks + 127) / 128 * 128
	return ((K+63)/64*64 + ks - 1) / ks, ks
}

// GemmBenchResult is one kernel's timing in E4M3GemmBench or GemvOneBench: the median
// time a launch (each timing a run of launches back to back over copies of the weights)
// and the weight bytes (codes and scales) the product reads;
// Halves: a fast mode kernel on bf16 activations, timed beside the e4m3 forms, its values
// not compared.
type GemmBenchResult struct {
	Kernel string
	M, S   int64
	Ms     float64
	Bytes  int64
	Halves bool
	// Copies of the weights the launches rotated through, Launches a timing (coldCopies)
	Copies, Launches int
}

// benchColdBytes is the weight bytes a product bench rotates through: over twice the L2
// of an H100 or H200 (50 MB), so that each launch reads its weights from HBM, as a step's
// products do (the other layers' weights pass through L2 between them), not from L2.
const benchColdBytes = 128 << 20

// coldCopies is how many copies of a weight of this many bytes a product bench rotates
// through (at least one, at most 64, together at least benchColdBytes where that allows),
// and the launches of a timing (every copy once, at least 8).
// benchCopies, when positive, is the copies instead (the tests on the emulated device,
// where there is no L2 to miss and every launch is slow).
func coldCopies(bytes int64) (copies, launches int) {
	copies = int(min(64, max(1, (benchColdBytes+bytes-1)/max(bytes, 1))))
	if benchCopies > 0 {
		copies = benchCopies
	}
	return copies, max(copies, 8)
}

var benchCopies int

// halvesRows is the x rows a launch block of the fast mode's wgmma FP8 products takes
// (fast_gemm_wg_fp8a 128, _fp8n 64: the fp8 mode's kernels above 64 rows and the fast
// mode's up to 64), which E4M3GemmBench times on bf16 activations; 0 for other names.
func halvesRows(name string) int64 {
	switch name {
	case "fast_gemm_wg_fp8a", "fast_gemm_wg_fp8a2", "fast_gemm_wg_fp8p":
		return fastWideRows
	case "fast_gemm_wg_fp8n":
		return 64
	}
	return 0
}

// E4M3GemmBench times the fp8 numerics' e4m3 product kernels named by kernels
// (fast_gemm_wg_e4m3, _e4m3n, _e4m3p, _e4m3q, _e4m3w) on random FP8 weights of N rows ×
// K (32 × 32 blocks) and random MXFP8 activations, each step the median of reps timings
// after one warm-up, each a run of launches back to back over copies of the weights
// (coldCopies: read from HBM, the launches' submission off the clock): a benchmark of
// the products alone (BenchmarkE4M3Gemm: no checkpoint, no program). Every e4m3 form's outputs must equal the first one's bit for
// bit (the same block sums, scaled and added in the same order), or it returns an error
// naming the first difference. fast_gemm_wg_fp8a and _fp8n (the kernels the fp8 mode
// runs above 64 rows, and the fast mode up to 64) are timed beside them on random bf16
// activations, the same weights, their values not compared.
func (rt *Runtime) E4M3GemmBench(kernels []string, N, K int64, steps []E4M3GemmStep, seed uint64, reps int) ([]GemmBenchResult, error) {
	var res []GemmBenchResult
	var err error
	rt.w.do(func() { res, err = rt.e4m3GemmBench(kernels, N, K, steps, seed, reps) })
	return res, err
}

func (rt *Runtime) e4m3GemmBench(kernels []string, N, K int64, steps []E4M3GemmStep, seed uint64, reps int) ([]GemmBenchResult, error) {
	bad := N <= 0 || N%64 != 0 || K <= 0 || K%32 != 0 || reps <= 0 || len(kernels) == 0 || len(steps) == 0
	for _, k := range kernels {
		bad = bad || e4m3BlockRows(k)+halvesRows(k) == 0
	}
	steps = slices.Clone(steps)
	for i, st := range steps {
		if st.S == 0 {
			steps[i].S, steps[i].Ks = e4m3Slices(N, K)
			st = steps[i]
		}
		bad = bad || st.M <= 0 || st.S <= 0 || st.Ks <= 0 || st.Ks%128 != 0 || st.S*st.Ks < K || (st.S-1)*st.Ks >= K
	}
	if bad {
		return nil, fmt.Errorf("e4m3 gemm bench: N %d, K %d, steps %+v, %d repetitions, kernels %v: want N a multiple of 64, K of 32, Ks of 128, S slices of Ks covering K, e4m3 product kernels (or fast_gemm_wg_fp8a / _fp8n)", N, K, steps, reps, kernels)
	}
	d, s := rt.drv, rt.stream
	rng := rand.New(rand.NewPCG(seed, 0xe4a3))
	bb := &benchBufs{rt: rt, what: "e4m3 gemm bench"}
	defer bb.free()
	// up: a buffer holding b, synchronised (b may go once it returns)
	up := func(b []byte) (devptr, error) {
		p, err := bb.up(b)
		if err != nil {
			return 0, err
		}
		return p, d.Sync(s)
	}
	// E4M3 codes without the NaN codes (S.1111.111), so that every output is a number
	code := func() byte {
		c := byte(rng.UintN(256))
		if c&0x7f == 0x7f {
			c ^= 1
		}
		return c
	}
	sc := (K + 31) / 32
	wc, ws := make([]byte, N*K), make([]byte, (N+31)/32*sc)
	for i := range wc {
		wc[i] = code()
	}
	for i := range ws {
		ws[i] = byte(120 + rng.IntN(15)) // 2^-7 .. 2^7
	}
	bytes := int64(len(wc) + len(ws))
	copies, runs := coldCopies(bytes)
	ws4 := make([]Operand, copies) // the same weights, copies apart (coldCopies)
	for c := range ws4 {
		wp, err := up(wc)
		if err != nil {
			return nil, err
		}
		wsp, err := up(ws)
		if err != nil {
			return nil, err
		}
		ws4[c] = Operand{Ptr: wp, Scales: wsp, Fmt: 2, Cols: K}
	}
	var res []GemmBenchResult
	for _, st := range steps {
		xq, xe := make([]byte, st.M*K), make([]float32, st.M*K/32)
		for i := range xq {
			xq[i] = code()
		}
		for i := range xe {
			xe[i] = float32(1) / float32(int(1)<<rng.IntN(8)) // 2^-7 .. 1
		}
		xqp, err := up(xq)
		if err != nil {
			return nil, err
		}
		xep, err := up(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xe))), 4*len(xe)))
		if err != nil {
			return nil, err
		}
		// the fast mode's kernels' activations: bf16 values as the hi halves of rows of
		// Kp/2 pairs (lo halves zero: xexact)
		kp := (K + 63) / 64 * 64
		xh := make([]byte, st.M*kp*2)
		for r := int64(0); r < st.M; r++ {
			for k := int64(0); k < K; k++ {
				v := uint16(rng.Uint32()&0x8000) | uint16(120+rng.IntN(8))<<7 | uint16(rng.IntN(128))
				xh[(r*kp+k)*2], xh[(r*kp+k)*2+1] = byte(v), byte(v>>8)
			}
		}
		xhp, err := up(xh)
		if err != nil {
			return nil, err
		}
		xlp, err := bb.zero(int64(len(xh)))
		if err != nil {
			return nil, err
		}
		outBytes := 4 * st.S * st.M * N
		y, err := up(make([]byte, outBytes))
		if err != nil {
			return nil, err
		}
		var first, fp8a []byte
		firstName := ""
		for _, name := range kernels {
			fn, err := rt.function(name)
			if err != nil {
				return nil, err
			}
			bn, halves, shared := e4m3BlockRows(name), halvesRows(name) > 0, int64(0)
			// (the forms of several warpgroups a block: wgMultiForms)
			threads, wrows := int64(launchBlock), int64(64)
			if halves {
				bn = halvesRows(name)
				if mw, ok := wgMultiForms[name]; ok {
					threads, wrows, shared = mw.threads, mw.wrows, mw.shared
				}
				if shared > 0 {
					if err := d.FuncShared(fn, uint32(shared)); err != nil {
						return nil, fmt.Errorf("kernel %s: %d bytes of shared memory: %w", name, shared, err)
					}
				}
			} else {
				shared = wgE4M3Shared(bn)
				if err := d.FuncShared(fn, uint32(shared)); err != nil {
					return nil, fmt.Errorf("kernel %s: %d bytes of shared memory: %w", name, shared, err)
				}
			}
			// (fastProduct's fill: x halves (the e4m3 forms: unused), weight, y and the
			// slices' partials — the same buffer here —, M, N, K, ldx, S, ks, the x tiles,
			// ldy, bf16 out, groups, prefetch, xexact; then the e4m3 forms' codes and
			// their scales)
			args := make([]ArgBuf, copies)
			for c, w := range ws4 {
				a := &args[c]
				if halves {
					a.P(xhp)
					a.P(xlp)
				} else {
					a.P(0)
					a.P(0)
				}
				a.W(w)
				a.P(y)
				a.P(y)
				for _, v := range []int64{st.M, N, K, K, st.S, st.Ks, (st.M + bn - 1) / bn, N, 0, 1, 1, 1} {
					a.I(v)
				}
				if !halves {
					a.P(xqp)
					a.P(xep)
				}
			}
			blocks := (N + wrows - 1) / wrows * st.S * ((st.M + bn - 1) / bn)
			if err := d.Memset(y, 0, uint64(outBytes), s); err != nil {
				return nil, err
			}
			ms, err := rt.medianMsRun(reps, runs, func(i int) error {
				if err := d.Launch(fn, uint32(blocks), uint32(threads), uint32(shared), s, args[i%copies].w); err != nil {
					return fmt.Errorf("kernel %s: %w", name, err)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out, err := rt.readDev(y, outBytes)
			if err != nil {
				return nil, fmt.Errorf("kernel %s: %w", name, err)
			}
			switch {
			case name == "fast_gemm_wg_fp8a":
				fp8a = out
			case (name == "fast_gemm_wg_fp8a2" || name == "fast_gemm_wg_fp8p") && fp8a != nil:
				// the same products as fast_gemm_wg_fp8a's in the same order
				if i := firstDiff(fp8a, out); i >= 0 {
					return nil, fmt.Errorf("e4m3 gemm bench: %s's outputs differ from fast_gemm_wg_fp8a's at byte %d of %d (M %d)", name, i, outBytes, st.M)
				}
			case halves: // (other activations and other sums: not compared)
			case first == nil:
				if !slices.ContainsFunc(out, func(b byte) bool { return b != 0 }) {
					return nil, fmt.Errorf("e4m3 gemm bench: kernel %s wrote only zeros (M %d)", name, st.M)
				}
				// the copies hold the same weights: the timed output (the last launch's
				// copy) equals copy 0's
				if last := (runs - 1) % copies; last != 0 {
					again, err := rt.launchOut(fn, uint32(blocks), uint32(shared), args[0].w, y, outBytes)
					if err != nil {
						return nil, fmt.Errorf("kernel %s: %w", name, err)
					}
					if i := firstDiff(out, again); i >= 0 {
						return nil, fmt.Errorf("e4m3 gemm bench: %s's output from copy %d of the weights differs from copy 0's at byte %d (M %d)", name, last, i, st.M)
					}
				}
				first, firstName = out, name
			default:
				if i := firstDiff(first, out); i >= 0 {
					return nil, fmt.Errorf("e4m3 gemm bench: %s's outputs differ from %s's at byte %d of %d (M %d)", name, firstName, i, outBytes, st.M)
				}
			}
			res = append(res, GemmBenchResult{Kernel: name, M: st.M, S: st.S, Ms: ms, Bytes: bytes, Halves: halves, Copies: copies, Launches: runs})
		}
	}
	return res, nil
}

// gemvOneKernels are the one-row FP8 product kernels GemvOneBench times (ops_fast.go's
// EnvGemvOne forms and the products of one to four rows): the same values bit for bit.
var gemvOneKernels = map[string]bool{"fast_gemv_fp8": true, "fast_gemv1_fp8": true, "fast_gemv1b_fp8": true, "fast_gemv1p_fp8": true}

// GemvOneBench times the one-row FP8 products named by kernels (fast_gemv1p_fp8, the
// default of a one-row step, fast_gemv1_fp8, _gemv1b_fp8, fast_gemv_fp8) on random FP8
// weights of N rows × K (32 × 32 blocks) and one random float32 activation row, each the
// median of reps timings after one warm-up, each a run of launches back to back over
// copies of the weights (coldCopies) (BenchmarkGemvOne: V4.1's one-row products
// alone, no checkpoint); every kernel's outputs must equal the first's bit for bit.
func (rt *Runtime) GemvOneBench(kernels []string, N, K int64, seed uint64, reps int) ([]GemmBenchResult, error) {
	var res []GemmBenchResult
	var err error
	rt.w.do(func() { res, err = rt.gemvOneBench(kernels, N, K, seed, reps) })
	return res, err
}

func (rt *Runtime) gemvOneBench(kernels []string, N, K int64, seed uint64, reps int) ([]GemmBenchResult, error) {
	bad := N <= 0 || N%fastGemvR != 0 || K <= 0 || K%64 != 0 || reps <= 0 || len(kernels) == 0
	for _, k := range kernels {
		bad = bad || !gemvOneKernels[k]
	}
	if bad {
		return nil, fmt.Errorf("gemv one bench: N %d, K %d, %d repetitions, kernels %v: want N even, K a multiple of 64, one-row FP8 product kernels", N, K, reps, kernels)
	}
	d, s := rt.drv, rt.stream
	rng := rand.New(rand.NewPCG(seed, 0x9e1))
	bb := &benchBufs{rt: rt, what: "gemv one bench"}
	defer bb.free()
	sc := K / 32
	wc, ws := make([]byte, N*K), make([]byte, (N+31)/32*sc)
	for i := range wc {
		wc[i] = byte(rng.UintN(256))
		if wc[i]&0x7f == 0x7f { // (no NaN codes)
			wc[i] ^= 1
		}
	}
	for i := range ws {
		ws[i] = byte(120 + rng.IntN(15))
	}
	x := make([]float32, K)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	bytes := int64(len(wc) + len(ws))
	copies, runs := coldCopies(bytes)
	wops := make([]Operand, copies) // the same weights, copies apart (coldCopies)
	for c := range wops {
		wp, err := bb.up(wc)
		if err != nil {
			return nil, err
		}
		sp, err := bb.up(ws)
		if err != nil {
			return nil, err
		}
		wops[c] = Operand{Ptr: wp, Scales: sp, Fmt: 2, Cols: K}
	}
	xp, err := bb.up(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x)))
	if err != nil {
		return nil, err
	}
	y, err := bb.zero(4 * N)
	if err != nil {
		return nil, err
	}
	errp, err := bb.zero(8)
	if err != nil {
		return nil, err
	}
	if err := d.Sync(s); err != nil {
		return nil, err
	}
	var res []GemmBenchResult
	var first []byte
	for _, name := range kernels {
		fn, err := rt.function(name)
		if err != nil {
			return nil, err
		}
		// (FastGemvArgs: x, rows, xh, weight, y, M, N, K, Kp, ldx, ldy, bf16 out, groups,
		// x's rows, err)
		args := make([]ArgBuf, copies)
		for c, w := range wops {
			a := &args[c]
			a.P(xp)
			a.P(0)
			a.P(0)
			a.W(w)
			a.P(y)
			for _, v := range []int64{1, N, K, K, K, N, 0, 1, 1} {
				a.I(v)
			}
			a.P(errp)
		}
		blocks := gemvItems(N) / launchBlock
		ms, err := rt.medianMsRun(reps, runs, func(i int) error {
			if err := d.Launch(fn, uint32(blocks), launchBlock, 0, s, args[i%copies].w); err != nil {
				return fmt.Errorf("kernel %s: %w", name, err)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		out := make([]byte, 4*N+8)
		if err := d.DtoH(unsafe.Pointer(unsafe.SliceData(out)), y, uint64(4*N), s); err != nil {
			return nil, err
		}
		if err := d.DtoH(unsafe.Pointer(&out[4*N]), errp, 8, s); err != nil {
			return nil, err
		}
		if err := d.Sync(s); err != nil {
			return nil, fmt.Errorf("kernel %s: %w", name, err)
		}
		if e := binary.LittleEndian.Uint64(out[4*N:]); e != 0 {
			return nil, fmt.Errorf("gemv one bench: kernel %s set error %d", name, e)
		}
		if first == nil {
			if !slices.ContainsFunc(out[:4*N], func(b byte) bool { return b != 0 }) {
				return nil, fmt.Errorf("gemv one bench: kernel %s wrote only zeros", name)
			}
			// the copies hold the same weights: the timed output (the last launch's
			// copy) equals copy 0's
			if last := (runs - 1) % copies; last != 0 {
				again, err := rt.launchOut(fn, uint32(blocks), 0, args[0].w, y, 4*N)
				if err != nil {
					return nil, fmt.Errorf("kernel %s: %w", name, err)
				}
				if i := firstDiff(out[:4*N], again); i >= 0 {
					return nil, fmt.Errorf("gemv one bench: %s's output from copy %d of the weights differs from copy 0's at byte %d", name, last, i)
				}
			}
			first = out
		} else if i := firstDiff(first, out); i >= 0 {
			return nil, fmt.Errorf("gemv one bench: %s's outputs differ from %s's at byte %d of %d", name, kernels[0], i, 4*N)
		}
		res = append(res, GemmBenchResult{Kernel: name, M: 1, S: 1, Ms: ms, Bytes: bytes, Copies: copies, Launches: runs})
	}
	return res, nil
}

// launchOut launches fn once on the runtime's stream over a zeroed output y of n bytes
// and returns y's bytes (the stream synchronized).
func (rt *Runtime) launchOut(fn function, blocks, shared uint32, args []uint64, y devptr, n int64) ([]byte, error) {
	d, s := rt.drv, rt.stream
	if err := d.Memset(y, 0, uint64(n), s); err != nil {
		return nil, err
	}
	if err := d.Launch(fn, blocks, launchBlock, shared, s, args); err != nil {
		return nil, err
	}
	return rt.readDev(y, n)
}

// readDev copies n bytes of device memory p to the host on the runtime's stream and
// returns them (the stream synchronized: an earlier launch's fault is reported here).
func (rt *Runtime) readDev(p devptr, n int64) ([]byte, error) {
	out := make([]byte, n)
	if err := rt.drv.DtoH(unsafe.Pointer(unsafe.SliceData(out)), p, uint64(n), rt.stream); err != nil {
		return nil, err
	}
	return out, rt.drv.Sync(rt.stream)
}
