package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"deepinfer/targets"
)

// TestFastModeSplitsReductions: the binders pick the split reductions (mhc.cu's
// mhc_fast_* kernels) in the fast numerics mode and the serial kernels in the exact
// mode, for every phase of the fixture's plan. What the split kernels compute is
// checked against the cpu target by TestFastInstructionsNearCPU.
func TestFastModeSplitsReductions(t *testing.T) {
	cases := []struct {
		model      string
		fast, slow []string // kernels only the fast mode launches, and only the exact mode
	}{
		{"tiny-v4-dev",
			// (the fast mode's compressor projections and decode attention are tensor-core
			// products)
			[]string{"mhc_fast_mix_part", "mhc_fast_mix_tile", "mhc_fast_mix_sum", "mhc_fast_norm_one", "fast_gemm_m1", "fast_split",
				"att_tc_keys", "att_tc_logits", "att_tc_logits_n", "att_tc_softmax", "att_tc_out", "att_tc_out_n"},
			[]string{"mhc_mix_dot", "rmsnorm", "att_cmp_proj", "att_dec_keys", "att_dec_logits", "att_dec_softmax", "att_dec_out", "att_attention"}},
		{"tiny-v41-dev2",
			[]string{"mhc_fast_mix41_part", "mhc_fast_mix41_rows", "mhc_fast_mix41_sum", "moe_fast_gate41_rows", "mhc_fast_norm41_one", "csa_fast_proj_part", "csa_fast_proj_sum", "csa_fast_entry_norm", "csa_fast_key_part", "csa_fast_key_sum", "moe_fast_gate41_part", "moe_fast_gate41_sum", "csa_tc_logits", "csa_tc_logits_n", "csa_tc_out", "csa_tc_out_na",
				"moe_fast_gate41_seq", "mhc_fast_mix41_seq"},
			// (the fast mode binds mhc_mix41_dot and moe_gate_v41 for steps of long
			// sequences only with DEEPINFER_CUDA_SEQ_TILES=0, TestFastV41LongStepsSeqTiles,
			// and its attention's fused multiply-add kernels, csa_fast_*, only with
			// DEEPINFER_CUDA_V41_ATT_TC=0, TestFastV41AttentionKernelsAgree)
			[]string{"mhc_rmsnorm41", "csa_compress_proj", "csa_attn_logits", "csa_attn_out", "mhc_mix41_dot", "moe_gate_v41"}},
	}
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			p, ws := fixturePlan(t, c.model)
			withCache(t)
			for _, mode := range []string{targets.NumericsExact, targets.NumericsFast} {
				rt, err := open(newFakeDriver(1<<30), &countingCompiler{}, p, ws, targets.Options{MaxTokens: 16, Numerics: mode})
				if err != nil {
					t.Fatal(err)
				}
				used := map[string]bool{}
				for _, pr := range rt.progs {
					for _, cl := range pr.calls {
						for _, l := range cl.launches {
							used[l.kernel] = true
						}
					}
				}
				rt.Close()
				want, never := c.fast, c.slow
				if mode == targets.NumericsExact {
					want, never = c.slow, c.fast
				}
				for _, k := range want {
					if !used[k] {
						t.Errorf("%s numerics: no launch of %s", mode, k)
					}
				}
				for _, k := range never {
					if used[k] {
						t.Errorf("%s numerics: %s launched", mode, k)
					}
				}
			}
		})
	}
}

// emuKernels runs single kernels on buffers a test fills: on the emulated device
// (newEmuKernels), or on this machine's GPU when it has one (newKernels).
type emuKernels struct {
	t     *testing.T
	d     driver
	mod   module
	where map[string]module // the GPU's modules by kernel (nil: mod has every kernel)
}

func newEmuKernels(t *testing.T) *emuKernels {
	t.Helper()
	cc, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	img, _, err := (&kernelCache{dir: defaultCacheDir()}).build(cc, Source(), "deepinfer", compileOptions("sm_90a"), "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	d := newFakeDriver(1 << 30)
	mod, err := d.LoadModule(img)
	if err != nil {
		t.Fatal(err)
	}
	return &emuKernels{t: t, d: d, mod: mod}
}

// newKernels is newEmuKernels on a machine without a GPU; with one, the kernels are
// NVRTC's for the device and run on it (so a test of a kernel's device branch, a warp's
// lanes say, checks that branch there). It logs which.
func newKernels(t *testing.T) *emuKernels {
	t.Helper()
	drv, cc, err := discover(osFS{})
	if err != nil {
		t.Logf("the emulated device (%v)", err)
		return newEmuKernels(t)
	}
	d := &threadDriver{driver: drv, w: newWorker()}
	var where map[string]module
	var mods []module
	var name string
	d.w.do(func() {
		if err = drv.Context(0); err != nil {
			return
		}
		var maj, min int
		if maj, min, err = drv.Capability(0); err != nil {
			return
		}
		name = drv.DeviceName(0)
		mods, where, _, err = buildModules(drv, cc, arch(maj, min))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the GPU: %s", name)
	return &emuKernels{t: t, d: d, mod: mods[0], where: where}
}

// threadDriver makes the calls a kernel test makes on the worker thread that holds the
// device's context, and waits for the device before a copy to the host.
type threadDriver struct {
	driver
	w *worker
}

func (d *threadDriver) Alloc(n uint64) (p devptr, err error) {
	d.w.do(func() { p, err = d.driver.Alloc(n) })
	return p, err
}

func (d *threadDriver) HtoD(dst devptr, src unsafe.Pointer, n uint64, s stream) (err error) {
	d.w.do(func() {
		if err = d.driver.HtoD(dst, src, n, s); err == nil {
			err = d.driver.Sync(s)
		}
	})
	return err
}

func (d *threadDriver) DtoH(dst unsafe.Pointer, src devptr, n uint64, s stream) (err error) {
	d.w.do(func() {
		if err = d.driver.Sync(s); err == nil {
			err = d.driver.DtoH(dst, src, n, s)
		}
		if err == nil {
			err = d.driver.Sync(s)
		}
	})
	return err
}

func (d *threadDriver) DtoD(dst, src devptr, n uint64, s stream) (err error) {
	d.w.do(func() { err = d.driver.DtoD(dst, src, n, s) })
	return err
}

func (d *threadDriver) Function(m module, name string) (f function, err error) {
	d.w.do(func() { f, err = d.driver.Function(m, name) })
	return f, err
}

func (d *threadDriver) Launch(f function, grid, block, shared uint32, s stream, args []uint64) (err error) {
	d.w.do(func() { err = d.driver.Launch(f, grid, block, shared, s, args) })
	return err
}

func (d *threadDriver) FuncShared(f function, bytes uint32) (err error) {
	d.w.do(func() { err = d.driver.FuncShared(f, bytes) })
	return err
}

// put uploads 4- or 8-byte values and returns their device address.
func put[V float32 | int64 | float64 | uint32](k *emuKernels, v []V) devptr {
	k.t.Helper()
	n := uint64(len(v)) * uint64(unsafe.Sizeof(v[0]))
	p, err := k.d.Alloc(max(n, 8))
	if err != nil {
		k.t.Fatal(err)
	}
	if err := k.d.HtoD(p, unsafe.Pointer(&v[0]), n, 0); err != nil {
		k.t.Fatal(err)
	}
	return p
}

func (k *emuKernels) get(p devptr, n int) []float32 {
	k.t.Helper()
	v := make([]float32, n)
	if err := k.d.DtoH(unsafe.Pointer(&v[0]), p, uint64(4*n), 0); err != nil {
		k.t.Fatal(err)
	}
	return v
}

func (k *emuKernels) run(name string, fill func(a *ArgBuf)) {
	k.t.Helper()
	k.runShared(name, launchBlock, 0, fill)
}

// runShared is run in launch blocks of block threads with shared bytes of dynamic shared
// memory each (the driver's limit raised first where it is not 0, as Bind.LaunchShared's
// launches have it).
func (k *emuKernels) runShared(name string, block, shared uint32, fill func(a *ArgBuf)) {
	k.t.Helper()
	m := k.mod
	if k.where != nil {
		var ok bool
		if m, ok = k.where[name]; !ok {
			k.t.Fatalf("no kernel %s", name)
		}
	}
	f, err := k.d.Function(m, name)
	if err != nil {
		k.t.Fatal(err)
	}
	if shared > 0 {
		if err := k.d.FuncShared(f, shared); err != nil {
			k.t.Fatal(err)
		}
	}
	var a ArgBuf
	fill(&a)
	// the emulated device runs a launch's work items in order, so one block's grid
	// stride covers them; on a GPU, enough blocks for the kernels that give each row
	// a launch block of its own (att_index_select) and take no stride, as the runtime's
	// grid of one work item a thread would
	grid := uint32(1)
	if k.where != nil {
		grid = 4096
	}
	if err := k.d.Launch(f, grid, block, shared, 0, a.w); err != nil {
		k.t.Fatal(err)
	}
}

// randWeight puts a random rows × cols weight on the device in prelude.h's format f: 0
// float32, 1 bf16, or an FP8 block format (randFP8's codes and scales).
func randWeight(k *emuKernels, rng *rand.Rand, rows, cols, f int64) Operand {
	k.t.Helper()
	switch f {
	case 0:
		return Operand{Ptr: put(k, randRow(rng, int(rows*cols))), Fmt: 0, Cols: cols}
	case 1:
		b := make([]byte, 2*rows*cols)
		for i := range rows * cols {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(math.Float32bits(float32(rng.NormFloat64()))>>16))
		}
		return Operand{Ptr: putBytes(k, b), Fmt: 1, Cols: cols}
	default:
		codes, scales, _ := randFP8(rng, rows, cols, f)
		return Operand{Ptr: putBytes(k, codes), Scales: putBytes(k, scales), Fmt: f, Cols: cols}
	}
}

func randRow(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: value %d is %g, want %g", what, i, got[i], want[i])
		}
	}
}

// TestFastV41LanesAreExact: V4.1's fast-mode reductions (the lanes of ATen's cascade sum
// and of MKL's dot orders as separate work items, then folded) reproduce the serial
// kernels bit for bit, over lengths that reach every level of the cascade and row
// counts that pick each of MKL's orders (gemv, small, split2, split4, sequential): the
// same order. (MKL's lanes round each fused multiply-add once, fma_fast, where the serial
// kernels round twice, fma32; the two differ only on inputs these rows do not hold,
// TestFastGate41SingleRounding.)
func TestFastV41LanesAreExact(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const eps = 1e-6
	// RMSNorm over chunks of g values, weighted
	for _, g := range []int{1, 7, 8, 33, 100, 257, 512, 1000, 4096, 4100, 16384, 70001} {
		const chunks = 16
		x, w := put(k, randRow(rng, chunks*g)), put(k, randRow(rng, g))
		wt := Operand{Ptr: w, Cols: int64(g)}
		y1, y2 := put(k, make([]float32, chunks*g)), put(k, make([]float32, chunks*g))
		part := put(k, make([]float32, chunks*32))
		k.run("mhc_rmsnorm41", func(a *ArgBuf) {
			a.P(x)
			a.W(wt)
			a.P(y1)
			a.I(chunks)
			a.I(int64(g))
			a.F(eps)
			a.I(1)
			a.I(0) // round
		})
		for _, name := range []string{"mhc_fast_norm41_part", "mhc_fast_norm41_apply"} {
			k.run(name, func(a *ArgBuf) {
				a.P(x)
				a.W(wt)
				a.P(y2)
				a.P(part)
				a.I(chunks)
				a.I(int64(g))
				a.F(eps)
				a.I(1)
				a.I(0) // round
			})
		}
		sameBits(t, fmt.Sprintf("rmsnorm41, g %d", g), k.get(y2, chunks*g), k.get(y1, chunks*g))
	}
	// the mixes of T rows of one sequence: n = 4 streams, m = 24 mix rows of K
	const n, m = 4, 24
	base, scale := put(k, randRow(rng, m)), put(k, randRow(rng, 3))
	for _, K := range []int{7, 64, 255, 384, 1000, 4096, 16384} {
		fn := put(k, randRow(rng, m*K))
		for _, T := range []int{1, 6, 15, 16, 17, 40, 129} {
			x := put(k, randRow(rng, T*K))
			seqs := put(k, []int64{0, int64(T), 0, 0, 0})
			split := func(mix, rs devptr) []float32 {
				out := put(k, make([]float32, T*(2*n+n*n)))
				k.run("mhc_mix41_split", func(a *ArgBuf) {
					a.P(x)
					a.P(mix)
					a.W(Operand{Ptr: base, Cols: m})
					a.W(Operand{Ptr: scale, Cols: 3})
					a.P(out)
					a.P(out + devptr(4*T*n))
					a.P(out + devptr(8*T*n))
					a.I(int64(T))
					a.I(n)
					a.I(int64(K))
					a.F(eps)
					a.F(eps)
					a.I(20)
					a.P(seqs)
					a.I(1)
					a.I(0)
					a.P(rs)
					a.W(Operand{}) // fn, part and fold: the mixes given
					a.P(0)
					a.I(0)
				})
				return k.get(out, T*(2*n+n*n))
			}
			mix1, mix2 := put(k, make([]float32, T*m)), put(k, make([]float32, T*m))
			// (mhc_mix41_split scales the mixes it is given in place: exact runs the
			// exact kernel again before each comparison)
			exact := func(seqs devptr, nseq int64) {
				k.run("mhc_mix41_dot", func(a *ArgBuf) {
					a.P(x)
					a.W(Operand{Ptr: fn, Cols: int64(K)})
					a.P(mix1)
					a.I(int64(T))
					a.I(m)
					a.I(int64(K))
					a.P(seqs)
					a.I(nseq)
					a.I(0)
				})
			}
			exact(seqs, 1)
			part, rs := put(k, make([]float32, T*(m*16+32))), put(k, make([]float32, T))
			fast := func(kernels []string, seqs devptr, nseq int64) {
				for _, name := range kernels {
					k.run(name, func(a *ArgBuf) {
						a.P(x)
						a.W(Operand{Ptr: fn, Cols: int64(K)})
						a.P(part)
						a.P(mix2)
						a.P(rs)
						a.I(int64(T))
						a.I(m)
						a.I(int64(K))
						a.F(eps)
						a.P(seqs)
						a.I(nseq)
						a.I(0)
					})
				}
			}
			what := fmt.Sprintf("mix41, K %d, %d rows", K, T)
			fast([]string{"mhc_fast_mix41_part", "mhc_fast_mix41_sum"}, seqs, 1)
			sameBits(t, what, k.get(mix2, T*m), k.get(mix1, T*m))
			sameBits(t, what+", split", split(mix2, rs), split(mix1, 0))
			// the staged kernel: here its fallback (MKL's orders for T rows), unless T
			// is 1
			exact(seqs, 1)
			fast([]string{"mhc_fast_mix41_rows", "mhc_fast_mix41_sum"}, seqs, 1)
			sameBits(t, what+", staged rows", k.get(mix2, T*m), k.get(mix1, T*m))
			sameBits(t, what+", staged rows, split", split(mix2, rs), split(mix1, 0))
			// T sequences of one row (decode): the GEMV order, staged, against the
			// exact kernel with the same table
			one := make([]int64, 0, 5*T)
			for i := range T {
				one = append(one, int64(i), 1, 0, 0, 0)
			}
			oneSeqs := put(k, one)
			exact(oneSeqs, int64(T))
			fast([]string{"mhc_fast_mix41_rows", "mhc_fast_mix41_sum"}, oneSeqs, int64(T))
			sameBits(t, what+", one a sequence, staged rows", k.get(mix2, T*m), k.get(mix1, T*m))
		}
	}
}

func (k *emuKernels) get64(p devptr, n int) []float64 {
	k.t.Helper()
	v := make([]float64, n)
	if err := k.d.DtoH(unsafe.Pointer(&v[0]), p, uint64(8*n), 0); err != nil {
		k.t.Fatal(err)
	}
	return v
}

// TestFastV4PartsNearSerial: V4's fast-mode float64 sums in parts against the serial
// kernels at V4-Flash's sizes (the fixtures' K of 256 splits into 16 parts, 32 for the
// mixes; V4-Flash's 16,384 into 128, 256 for the mixes): the mixes within 1e-13 of the
// largest mix, RMSNorm within an ulp.
func TestFastV4PartsNearSerial(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const eps = 1e-6
	const T, m = 3, 24
	for _, K := range []int64{7, 1000, 16384} {
		x, fn := put(k, randRow(rng, T*int(K))), put(k, randRow(rng, m*int(K)))
		P := fastMixParts(K)
		mix1, mix2 := put(k, make([]float32, 2*T*m)), put(k, make([]float32, 2*T*m))
		part := put(k, make([]float32, 2*T*(m+1)*int(P)))
		k.run("mhc_mix_dot", func(a *ArgBuf) {
			a.P(x)
			a.W(Operand{Ptr: fn, Cols: K})
			a.P(mix1)
			a.I(T)
			a.I(m)
			a.I(K)
			a.F(eps)
		})
		k.run("mhc_fast_mix_part", func(a *ArgBuf) {
			a.P(x)
			a.W(Operand{Ptr: fn, Cols: K})
			a.P(part)
			a.I(T)
			a.I(m)
			a.I(K)
			a.I(P)
		})
		k.run("mhc_fast_mix_sum", func(a *ArgBuf) {
			a.P(part)
			a.P(mix2)
			a.I(T)
			a.I(m)
			a.I(K)
			a.I(P)
			a.F(eps)
		})
		want, got := k.get64(mix1, T*m), k.get64(mix2, T*m)
		var d, top float64
		for i := range want {
			d = max(d, math.Abs(got[i]-want[i]))
			top = max(top, math.Abs(want[i]))
		}
		if top == 0 || d/top > 1e-13 {
			t.Errorf("mixes, K %d (%d parts): %.3g off, largest %.3g", K, P, d, top)
		}
		t.Logf("mixes, K %d (%d parts): worst %.3g of the largest", K, P, d/top)
	}
	for _, g := range []int64{100, 4096, 16384} {
		const chunks = 8
		x, w := put(k, randRow(rng, chunks*int(g))), put(k, randRow(rng, int(g)))
		y1, y2 := put(k, make([]float32, chunks*g)), put(k, make([]float32, chunks*g))
		P := fastParts(g)
		part := put(k, make([]float32, 2*chunks*int(P)))
		k.run("rmsnorm", func(a *ArgBuf) {
			a.P(x)
			a.W(Operand{Ptr: w, Cols: g})
			a.P(y1)
			a.I(chunks)
			a.I(g)
			a.F(eps)
			a.I(1)
		})
		k.run("mhc_fast_norm_part", func(a *ArgBuf) {
			a.P(x)
			a.P(part)
			a.I(chunks)
			a.I(g)
			a.I(P)
		})
		k.run("mhc_fast_norm_apply", func(a *ArgBuf) {
			a.P(x)
			a.W(Operand{Ptr: w, Cols: g})
			a.P(y2)
			a.P(part)
			a.I(chunks)
			a.I(g)
			a.I(P)
			a.F(eps)
			a.I(1)
		})
		want, got := k.get(y1, int(chunks*g)), k.get(y2, int(chunks*g))
		differ := 0
		for i := range want {
			if want[i] == 0 || math.Abs(float64(got[i]-want[i])) > ulp32(want[i]) {
				t.Fatalf("rmsnorm, g %d: value %d is %g, the serial kernel's %g", g, i, got[i], want[i])
			}
			if got[i] != want[i] {
				differ++
			}
		}
		t.Logf("rmsnorm, g %d (%d parts): %d of %d values an ulp off", g, P, differ, len(want))
	}
}

// ulp32 is the spacing of float32 values at v.
func ulp32(v float32) float64 {
	a := math.Abs(float64(v))
	return float64(math.Nextafter32(float32(a), float32(math.Inf(1)))) - a
}

// TestIndexSelectMatchesRank: the indexer's selection for many-row steps
// (att_index_select + att_index_order) lists the same entries in the same order as
// att_index_rank, on rows whose scores have ties, both zeros, NaNs and infinities, for
// entry counts below, at and above topk.
func TestIndexSelectMatchesRank(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const T, topk = 5, 16
	for _, V := range []int{1, 9, 16, 17, 40, 300, 5000} {
		sc := make([]int64, T*V) // the scores scratch: doubles, as bits
		for r := 0; r < T; r++ {
			for e := 0; e < V; e++ {
				var v float64
				switch rng.IntN(8) {
				case 0:
					v = float64(rng.IntN(3)) // ties
				case 1:
					v = math.Copysign(0, -1)
				case 2:
					v = math.NaN()
				case 3:
					v = math.Inf(2*rng.IntN(2) - 1)
				default:
					v = rng.NormFloat64()
				}
				if r == 0 {
					v = 1 // a row of one value: ties everywhere
				}
				sc[r*V+e] = int64(math.Float64bits(v))
			}
		}
		pos := make([]float32, T)
		for i := range pos {
			pos[i] = math.Float32frombits(uint32(V - 1))
		}
		posP, scP := put(k, pos), put(k, sc)
		seqs := put(k, []int64{0, T, int64(V - T), 0, 0})
		sel := put(k, make([]int64, T*(2*topk+1)))
		lists := [2][]float32{}
		for i, kernels := range [][]string{{"att_index_pad", "att_index_rank"}, {"att_index_pad", "att_index_select", "att_index_order"}} {
			out := put(k, make([]float32, T*topk))
			for _, name := range kernels {
				k.run(name, func(a *ArgBuf) {
					a.P(0)
					a.P(0)
					a.P(posP)
					a.P(out)
					a.P(scP)
					a.P(seqs)
					a.I(1)
					a.I(T)
					a.I(0)
					a.I(1)
					a.I(1)
					a.I(1)
					a.I(1)
					a.I(1)
					a.I(topk)
					a.F(1)
					a.I(int64(V))
					a.P(0)
					a.P(sel)
					a.P(0) // vis (att_index_qd's; these kernels do not read it)
				})
			}
			lists[i] = k.get(out, T*topk)
		}
		for j := range lists[0] {
			a, b := int32(math.Float32bits(lists[0][j])), int32(math.Float32bits(lists[1][j]))
			if a != b {
				t.Fatalf("%d entries: row %d, place %d: rank lists %d, select %d", V, j/topk, j%topk, a, b)
			}
			if j%topk < min(topk, V) && a < 0 {
				t.Fatalf("%d entries: row %d, place %d empty", V, j/topk, j%topk)
			}
		}
	}
}

// TestPartTilesSameValues: V4's fast router and mixes summed in tiles of 4 tokens × 4
// rows (moe_fast_gate_tile, mhc_fast_mix_tile; rows.h part_dots_tile) must write every
// part of moe_fast_gate_part and mhc_fast_mix_part bit for bit: tokens and rows that
// are not multiples of 4 (a partial tile each way), reductions whose parts end unevenly
// (K not a multiple of 4·P) and V4-Flash's sizes, the mixes' sum of squares in a tile of
// its own and in one with mix rows. Also run with -device gpu.
func TestPartTilesSameValues(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(11, 12))
	same := func(name string, a, b []float64) {
		t.Helper()
		bad := 0
		for i := range a {
			if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
				if bad < 3 {
					t.Errorf("%s: part %d: %v by the tiles, %v by a sum a work item", name, i, b[i], a[i])
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d parts differ", name, bad, len(a))
		}
	}
	// the router: T tokens × E experts × moe.cu's 32 parts
	for _, c := range []struct{ T, E, D, fmt int64 }{{37, 10, 1000, 0}, {5, 7, 129, 1}, {9, 6, 320, 2}, {64, 256, 4096, 1}} {
		x, w := put(k, randRow(rng, int(c.T*c.D))), randWeight(k, rng, c.E, c.D, c.fmt)
		n := int(c.T * c.E * 32)
		p1, p2 := put(k, make([]float64, n)), put(k, make([]float64, n))
		for i, kern := range []string{"moe_fast_gate_part", "moe_fast_gate_tile"} {
			k.run(kern, func(a *ArgBuf) {
				a.P(x)
				a.W(w)
				a.P(0) // scratch: only the sums write it
				a.P([]devptr{p1, p2}[i])
				a.I(c.T)
				a.I(c.E)
				a.I(c.D)
				a.I(6)
			})
		}
		same(fmt.Sprintf("router %d×%d×%d format %d", c.T, c.E, c.D, c.fmt), k.get64(p1, n), k.get64(p2, n))
	}
	// the mixes: T tokens × (m mix rows + the sum of squares) × P parts
	for _, c := range []struct{ T, m, K, fmt int64 }{{37, 24, 1000, 0}, {6, 3, 300, 1}, {5, 4, 64, 2}, {64, 24, 16384, 0}} {
		x, fn := put(k, randRow(rng, int(c.T*c.K))), randWeight(k, rng, c.m, c.K, c.fmt)
		P := fastMixParts(c.K)
		n := int(c.T * (c.m + 1) * P)
		p1, p2 := put(k, make([]float64, n)), put(k, make([]float64, n))
		for i, kern := range []string{"mhc_fast_mix_part", "mhc_fast_mix_tile"} {
			k.run(kern, func(a *ArgBuf) {
				a.P(x)
				a.W(fn)
				a.P([]devptr{p1, p2}[i])
				a.I(c.T)
				a.I(c.m)
				a.I(c.K)
				a.I(P)
			})
		}
		same(fmt.Sprintf("mixes %d×%d×%d format %d", c.T, c.m+1, c.K, c.fmt), k.get64(p1, n), k.get64(p2, n))
	}
}
