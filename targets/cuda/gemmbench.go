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
// of the timed launches and the weight bytes (codes and scales) the product reads;
// Halves: a fast mode kernel on bf16 activations, timed beside the e4m3 forms, its values
// not compared.
type GemmBenchResult struct {
	Kernel string
	M, S   int64
	Ms     float64
	Bytes  int64
	Halves bool
}

// halvesRows is the x rows a launch block of the fast mode's wgmma FP8 products takes
// (fast_gemm_wg_fp8a 128, _fp8n 64: the fp8 mode's kernels above 64 rows and the fast
// mode's up to 64), which E4M3GemmBench times on bf16 activations; 0 for other names.
func halvesRows(name string) int64 {
	switch name {
	case "fast_gemm_wg_fp8a":
		return fastWideRows
	case "fast_gemm_wg_fp8n":
		return 64
	}
	return 0
}

// E4M3GemmBench times the fp8 numerics' e4m3 product kernels named by kernels
// (fast_gemm_wg_e4m3, _e4m3n, _e4m3p, _e4m3q, _e4m3w) on random FP8 weights of N rows ×
// K (32 × 32 blocks) and random MXFP8 activations, each step the median of reps launches
// after one warm-up: a benchmark of the products alone (BenchmarkE4M3Gemm: no
// checkpoint, no program). Every e4m3 form's outputs must equal the first one's bit for
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
	wp, err := up(wc)
	if err != nil {
		return nil, err
	}
	wsp, err := up(ws)
	if err != nil {
		return nil, err
	}
	w := Operand{Ptr: wp, Scales: wsp, Fmt: 2, Cols: K}
	bytes := int64(len(wc) + len(ws))
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
		var first []byte
		firstName := ""
		for _, name := range kernels {
			fn, err := rt.function(name)
			if err != nil {
				return nil, err
			}
			bn, halves, shared := e4m3BlockRows(name), halvesRows(name) > 0, int64(0)
			if halves {
				bn = halvesRows(name)
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
			var a ArgBuf
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
			blocks := (N + 63) / 64 * st.S * ((st.M + bn - 1) / bn)
			if err := d.Memset(y, 0, uint64(outBytes), s); err != nil {
				return nil, err
			}
			ms, err := rt.medianMs(reps, func() error {
				if err := d.Launch(fn, uint32(blocks), launchBlock, uint32(shared), s, a.w); err != nil {
					return fmt.Errorf("kernel %s: %w", name, err)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			out := make([]byte, outBytes)
			if err := d.DtoH(unsafe.Pointer(unsafe.SliceData(out)), y, uint64(outBytes), s); err != nil {
				return nil, err
			}
			if err := d.Sync(s); err != nil {
				return nil, fmt.Errorf("kernel %s: %w", name, err)
			}
			switch {
			case halves: // (other activations and other sums: not compared)
			case first == nil:
				if !slices.ContainsFunc(out, func(b byte) bool { return b != 0 }) {
					return nil, fmt.Errorf("e4m3 gemm bench: kernel %s wrote only zeros (M %d)", name, st.M)
				}
				first, firstName = out, name
			default:
				if i := firstDiff(first, out); i >= 0 {
					return nil, fmt.Errorf("e4m3 gemm bench: %s's outputs differ from %s's at byte %d of %d (M %d)", name, firstName, i, outBytes, st.M)
				}
			}
			res = append(res, GemmBenchResult{Kernel: name, M: st.M, S: st.S, Ms: ms, Bytes: bytes, Halves: halves})
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
// median of reps launches after one warm-up (BenchmarkGemvOne: V4.1's one-row products
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
	var bufs [3]devptr
	for i, b := range [][]byte{wc, ws, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 4*len(x))} {
		p, err := bb.up(b)
		if err != nil {
			return nil, err
		}
		bufs[i] = p
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
	w := Operand{Ptr: bufs[0], Scales: bufs[1], Fmt: 2, Cols: K}
	bytes := int64(len(wc) + len(ws))
	var res []GemmBenchResult
	var first []byte
	for _, name := range kernels {
		fn, err := rt.function(name)
		if err != nil {
			return nil, err
		}
		// (FastGemvArgs: x, rows, xh, weight, y, M, N, K, Kp, ldx, ldy, bf16 out, groups,
		// x's rows, err)
		var a ArgBuf
		a.P(bufs[2])
		a.P(0)
		a.P(0)
		a.W(w)
		a.P(y)
		for _, v := range []int64{1, N, K, K, K, N, 0, 1, 1} {
			a.I(v)
		}
		a.P(errp)
		blocks := gemvItems(N) / launchBlock
		ms, err := rt.medianMs(reps, func() error {
			if err := d.Launch(fn, uint32(blocks), launchBlock, 0, s, a.w); err != nil {
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
			first = out
		} else if i := firstDiff(first, out); i >= 0 {
			return nil, fmt.Errorf("gemv one bench: %s's outputs differ from %s's at byte %d of %d", name, kernels[0], i, 4*N)
		}
		res = append(res, GemmBenchResult{Kernel: name, M: 1, S: 1, Ms: ms, Bytes: bytes})
	}
	return res, nil
}
