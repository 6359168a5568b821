package cuda

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets"
)

// Runtime is a plan opened on one CUDA device (or on the emulated device). One OS
// thread, locked, makes every driver call; the weights are uploaded once in their
// storage formats; one arena holds every program's slots, the step's parameters, the
// sequence table and the scratch, allocated when the plan is opened and again only if
// a step brings more tokens than any before it; each sequence's state is one block.
type Runtime struct {
	plan   *plan.Plan
	drv    driver
	fake   *fakeDriver // nil on a real device
	dev    int
	w      *worker
	stream stream
	funcs  map[string]function
	hook   targets.Hook

	weights     []Operand // manifest order
	weightMem   devptr
	tableMem    devptr // the instructions' weight tables (Bind.WeightTable)
	weightBytes int64  // the weights' bytes in storage format

	progs map[string]*prog
	// the kernel units' modules and which holds each kernel (nil: one module), for
	// kernels outside the programs (probe.go)
	mods  []module
	where map[string]module
	state stateLayout

	maxT       int64
	maxPos     int64 // the longest sequence a state holds (targets.Options.MaxContext)
	maxShared  int64 // the most dynamic shared memory a launch block may take (sharedMax)
	arena      devptr
	arenaBytes int64
	params     paramBufs
	seqTab     devptr
	invariant  bool // batch-invariant mode (targets.Options.Invariant)
	fast       bool // the fast numerics mode (targets.Options.Numerics), or fp8
	fp8        bool // the fp8 numerics mode: fast, V4.1's MXFP8 products on e4m3 wgmma
	// uniformRoute: targets.Options.UniformRoute or EnvRoute=uniform (ops_moe.go)
	uniformRoute bool
	// fp4Tiled: EnvFP4Tiled set, the FP4 weights that can be are uploaded in the tiled
	// layout (fp4tiled.go), and read by the tiles fp4TiledSuffix names
	fp4Tiled       bool
	fp4TiledSuffix string
	// twice: the kernels EnvTwice names, each launch issued twice (twice.go)
	twice   map[string]bool
	errFlag devptr
	scratch devptr

	info     Info
	prof     profile
	stepping bool
	host     hostStage
	closed   bool

	// the last step's sampled ids, kept on the device for the next step's
	// FromPrevious tokens (in the arena, right after the error flag), and how many
	prevIds    devptr
	prevN      int64
	resolveFn  function
	resolveBuf ArgBuf

	// EnvProfileDecode=1: the profiler's collection started before the first decode
	// step (profDecode), once (profStarted)
	profDecode, profStarted bool

	// packed uploads (packed.go): on unless EnvPacked=0; the staging region in the
	// arena and the kernels that unpack a step and keep its ids
	packed     bool
	stageDev   devptr
	stageBytes int64
	unpackFn   function
	keepFn     function
	unpackBuf  ArgBuf
	keepBuf    ArgBuf

	stepN  int64 // steps run or enqueued
	graphs graphCache
	pipe   pipeline
	tl     timeline
	census census
}

// Info describes an opened runtime.
type Info struct {
	Device      string
	Arch        string
	Driver      int
	Compile     CompileStats
	WeightBytes int64 // device bytes of the weights, in storage format
	ArenaBytes  int64
	StateBytes  int64 // per sequence
	Emulated    bool
}

type paramBufs struct {
	tokens, positions, rows, sample, mask devptr
	maskCols                              int64
}

type prog struct {
	p     *plan.Program
	calls []*call
	// param indices (-1: absent)
	tokens, pos, rows, sample, mask int
	keep                            int64
	slotOff                         []int64 // byte offsets in the arena at maxT
	slotBytes                       int64
	epilogues                       int // bf16 roundings run by their producers (ops_fuse.go)
	quantShares                     int // quantizations left out, their predecessor's read (ops_fuse.go)
}

type call struct {
	in       *plan.Instr
	argRefs  []plan.Operand
	resRefs  []plan.Operand
	argT     []ir.Type
	resT     []ir.Type
	launches []launch
	scratch  []scratchReq
	tables   [][2]int
	step     Step // reused: operands for the current step
	rounds   bool // its binder called RoundsOnStore
	// epilogue: a fake_quant to bf16 that its producer runs (ops_fuse.go): no launches
	epilogue bool
	roundFor int // with step.Round: the index of the rounding it runs
	// quantizes, quantScratch: Bind.Quantizes (ops_fuse.go shareQuants)
	quantizes    string
	quantScratch int
}

type hostStage struct {
	positions []int32
	rows      []int32
	mask      []int32
	seqs      []int64
	tokens    []int32
	pack      []int64    // a synchronous step's packed parameters (packed.go)
	lay       packLayout // the step's packed layout (packed uploads only)
}

// worker runs functions on one locked OS thread.
type worker struct{ ch chan func() }

func newWorker() *worker {
	w := &worker{ch: make(chan func())}
	go func() {
		runtime.LockOSThread()
		for f := range w.ch {
			f()
		}
	}()
	return w
}

func (w *worker) do(f func()) {
	done := make(chan struct{})
	w.ch <- func() { f(); close(done) }
	<-done
}

// Open opens p on the first CUDA device of this machine.
func Open(p *plan.Plan, ws []targets.Weight, o targets.Options) (targets.Runtime, error) {
	drv, cc, err := discover(osFS{})
	if err != nil {
		return nil, err
	}
	return open(drv, cc, p, ws, o)
}

// OpenEmulated opens p on the emulated device: device memory in Go, the kernels built
// by the host C++ compiler from the same sources. total is the device memory it lends.
func OpenEmulated(p *plan.Plan, ws []targets.Weight, o targets.Options, total uint64) (*Runtime, error) {
	cc, err := newHostCompiler()
	if err != nil {
		return nil, err
	}
	return open(newFakeDriver(total), cc, p, ws, o)
}

// discover loads the driver and NVRTC.
func discover(fs fsys) (driver, compiler, error) {
	drv, _, err := load(fs, libCUDA, func(path string) (*realDriver, error) { return openDriver(path) })
	if err != nil {
		return nil, nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil || n == 0 {
		return nil, nil, fmt.Errorf("no GPU: the CUDA driver (%s) reports no device", drv.lib)
	}
	cc, _, err := load(fs, libNVRTC, func(path string) (*nvrtc, error) { return openNVRTC(path) })
	if err != nil {
		return nil, nil, err
	}
	return drv, cc, nil
}

// function is kernel name of the loaded units (resolved once, then from rt.funcs).
func (rt *Runtime) function(name string) (function, error) {
	if f, ok := rt.funcs[name]; ok {
		return f, nil
	}
	m := rt.mods[0]
	if rt.where != nil {
		var ok bool
		if m, ok = rt.where[name]; !ok {
			return 0, fmt.Errorf("kernel %s is defined in no unit of the kernel sources", name)
		}
	}
	f, err := rt.drv.Function(m, name)
	if err != nil {
		return 0, fmt.Errorf("kernel %s: %w", name, err)
	}
	rt.funcs[name] = f
	return f, nil
}

// allowUnbound lets instructions without a binder run as no-ops (tests of a
// partial port only: diff_test.go's -partial).
var allowUnbound bool

// Options beyond targets.Options.
const (
	defaultMaxTokens = 2048
	launchBlock      = 128
	// rowSpread is kernels/prelude.h's ROW_SPREAD: one launch block a row
	rowSpread = launchBlock
)

func open(drv driver, cc compiler, p *plan.Plan, ws []targets.Weight, o targets.Options) (*Runtime, error) {
	if len(ws) != len(p.Weights) {
		return nil, fmt.Errorf("%d weights for a manifest of %d", len(ws), len(p.Weights))
	}
	if err := targets.CheckNumerics(o.Numerics); err != nil {
		return nil, err
	}
	after, err := graphAfter()
	if err != nil {
		return nil, err
	}
	rt := &Runtime{plan: p, drv: drv, w: newWorker(), funcs: map[string]function{}, progs: map[string]*prog{}, hook: o.Hook, invariant: o.Invariant,
		fast: o.Numerics == targets.NumericsFast || o.Numerics == targets.NumericsFP8, fp8: o.Numerics == targets.NumericsFP8,
		uniformRoute: o.UniformRoute || os.Getenv(EnvRoute) == "uniform"}
	if rt.fp4Tiled, rt.fp4TiledSuffix, err = fp4TiledEnv(); err != nil {
		return nil, err
	}
	if rt.twice, err = twiceEnv(); err != nil {
		return nil, err
	}
	if err := checkWGE4M3Env(); err != nil {
		return nil, err
	}
	if err := checkWGFP8Env(); err != nil {
		return nil, err
	}
	rt.graphs.init(os.Getenv(EnvGraphs) != "0", after)
	rt.packed = os.Getenv(EnvPacked) != "0"
	rt.profDecode = os.Getenv(EnvProfileDecode) == "1"
	rt.fake, _ = drv.(*fakeDriver)
	rt.maxT = int64(o.MaxTokens)
	if rt.maxT <= 0 {
		rt.maxT = int64(min(p.Model.MaxPositions, defaultMaxTokens))
	}
	rt.maxT = max(rt.maxT, 1)
	rt.maxPos = int64(p.Model.MaxPositions)
	if o.MaxContext > 0 {
		rt.maxPos = min(rt.maxPos, int64(o.MaxContext))
	}
	rt.w.do(func() { err = rt.openOnThread(cc, ws) })
	if err != nil {
		rt.Close()
		return nil, err
	}
	return rt, nil
}

func (rt *Runtime) openOnThread(cc compiler, ws []targets.Weight) error {
	d := rt.drv
	if err := d.Context(rt.dev); err != nil {
		return err
	}
	maj, min, err := d.Capability(rt.dev)
	if err != nil {
		return err
	}
	a := arch(maj, min)
	rt.maxShared = sharedMax(maj, min)
	rt.info = Info{Device: d.DeviceName(rt.dev), Arch: a, Driver: d.Version(), Emulated: rt.fake != nil}
	if rt.stream, err = d.NewStream(); err != nil {
		return err
	}
	// bind every instruction first: it checks the plan before anything is uploaded
	for i := range rt.plan.Programs {
		pr, err := rt.bindProgram(&rt.plan.Programs[i])
		if err != nil {
			return err
		}
		rt.progs[pr.p.Phase] = pr
	}
	for _, ph := range []string{plan.PhasePrefill, plan.PhaseDecode} {
		if rt.progs[ph] == nil {
			return fmt.Errorf("plan has no %s program", ph)
		}
	}
	mods, where, st, err := buildModules(d, cc, a)
	if err != nil {
		return err
	}
	rt.mods, rt.where = mods, where
	if err := rt.checkTwice(); err != nil {
		return err
	}
	rt.info.Compile = st
	// each kernel's allowance of dynamic shared memory: the most any of its launches takes
	// (every kernel with some: the driver's default allowance is what static shared
	// memory leaves of 48 KB, which a kernel with both kinds, the FP4 _regb tiles', would
	// exceed below 48 KB of dynamic; one allowance a kernel, so that a launch taking less
	// never lowers another's)
	most := map[string]int64{}
	for _, pr := range rt.progs {
		for _, c := range pr.calls {
			for li := range c.launches {
				l := &c.launches[li]
				f, err := rt.function(l.kernel)
				if err != nil {
					return fmt.Errorf("%w (for %s)", err, c.in.Op)
				}
				l.fn, l.twice = f, rt.twice[l.kernel]
				most[l.kernel] = max(most[l.kernel], l.shared)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(most)) {
		if n := most[k]; n > 0 {
			if err := d.FuncShared(rt.funcs[k], uint32(n)); err != nil {
				return fmt.Errorf("kernel %s: %d bytes of shared memory a block: %w", k, n, err)
			}
		}
	}
	// kernels outside the programs: resolve_prev (pipelined steps' FromPrevious tokens,
	// per-parameter uploads), unpack_step and keep_ids (packed uploads, packed.go)
	for _, k := range []struct {
		name string
		fn   *function
	}{{"resolve_prev", &rt.resolveFn}, {"unpack_step", &rt.unpackFn}, {"keep_ids", &rt.keepFn}} {
		if *k.fn, err = rt.function(k.name); err != nil {
			return err
		}
	}
	if err := rt.uploadWeights(ws); err != nil {
		return err
	}
	if err := rt.uploadTables(); err != nil {
		return err
	}
	if err := rt.allocArena(rt.maxT); err != nil {
		return err
	}
	rt.info.StateBytes = rt.state.size
	return d.Sync(rt.stream)
}

func (rt *Runtime) bindProgram(p *plan.Program) (*prog, error) {
	ix, err := p.Layout()
	if err != nil {
		return nil, err
	}
	pr := &prog{p: p, tokens: ix.Tokens, pos: ix.Positions, rows: ix.Rows, sample: ix.Sample, mask: ix.Mask}
	for i := range p.Instrs {
		in := &p.Instrs[i]
		c := &call{in: in}
		b := &Bind{rt: rt, Phase: p.Phase, In: in, Attrs: in.Attrs}
		for j, o := range in.Args {
			if o.Kind == plan.OpNone {
				continue
			}
			c.argRefs = append(c.argRefs, o)
			c.argT = append(c.argT, in.ArgTypes[j])
			var w *plan.Weight
			if o.Kind == plan.OpWeight {
				w = &rt.plan.Weights[o.Index]
			}
			b.weights = append(b.weights, w)
		}
		for j, o := range in.Results {
			if o.Kind != plan.OpNone {
				c.resRefs = append(c.resRefs, o)
				c.resT = append(c.resT, in.ResultTypes[j])
			}
		}
		b.Args, b.Results = c.argT, c.resT
		if in.Op == "tail_rows" {
			pr.keep = b.Int("keep")
		}
		bf, ok := binders[in.Op]
		if !ok && !allowUnbound {
			return nil, fmt.Errorf("program %s instr %d: the cuda target has no kernel for op %s", p.Phase, i, in.Op)
		}
		if !ok {
			bf = func(*Bind) error { return nil }
		}
		if err := bf(b); err != nil {
			return nil, fmt.Errorf("program %s instr %d (%s): %w", p.Phase, i, in.Op, err)
		}
		if err := rt.checkTiledReaders(b); err != nil {
			return nil, fmt.Errorf("program %s instr %d (%s): %w", p.Phase, i, in.Op, err)
		}
		c.launches, c.scratch, c.tables, c.rounds = b.launches, b.scratch, b.tables, b.rounds
		c.quantizes, c.quantScratch = b.quantizes, b.quantScratch
		c.step.args = make([]Operand, len(c.argRefs))
		c.step.results = make([]Operand, len(c.resRefs))
		c.step.scratch = make([]devptr, len(c.scratch))
		for j := range c.step.args {
			c.step.args[j].Shape = make([]int64, len(c.argT[j].Shape))
		}
		for j := range c.step.results {
			c.step.results[j].Shape = make([]int64, len(c.resT[j].Shape))
		}
		pr.calls = append(pr.calls, c)
	}
	if (rt.hook == nil || epilogueWithHook) && os.Getenv(EnvEpilogue) != "0" {
		fuseEpilogues(pr)
	}
	if rt.hook == nil && os.Getenv(EnvShareQuant) != "0" {
		shareQuants(pr)
	}
	return pr, nil
}

// storageFmt maps a weight's storage to prelude.h's Weight.fmt.
func storageFmt(w *targets.Weight) (int64, error) {
	switch {
	case w.F32 != nil || w.I32 != nil:
		return 0, nil
	case w.Storage == "bf16":
		return 1, nil
	case w.Storage == "fp8_b32_ue8m0":
		return 2, nil
	case w.Storage == "fp8_g32_ue8m0":
		return 3, nil
	case w.Storage == "fp4_g32_ue8m0":
		return 4, nil
	case w.Storage == "fp8_b128_ue8m0":
		return 5, nil
	}
	return 0, fmt.Errorf("weight %q: the cuda target does not hold storage %q", w.Name, w.Storage)
}

func align(n int64) int64 { return (n + 255) &^ 255 }

// uploadTables builds every instruction's weight tables from the uploaded weights, in
// one allocation, and points each call's Step at them.
func (rt *Runtime) uploadTables() error {
	var words []uint64
	type at struct {
		c   *call
		off int64
	}
	var spots []at
	for _, pr := range rt.progs {
		for _, c := range pr.calls {
			for _, t := range c.tables {
				spots = append(spots, at{c, int64(len(words)) * 8})
				for j := t[0]; j < t[0]+t[1]; j++ {
					ref := c.argRefs[j]
					if ref.Kind != plan.OpWeight {
						return fmt.Errorf("%s: operand %d of a weight table is not a weight", c.in.Op, j)
					}
					o := rt.weights[ref.Index]
					words = append(words, uint64(o.Ptr), uint64(o.Scales), uint64(o.Fmt), uint64(o.Cols))
				}
			}
		}
	}
	if len(words) == 0 {
		return nil
	}
	mem, err := rt.drv.Alloc(uint64(8 * len(words)))
	if err != nil {
		return fmt.Errorf("weight tables (%d bytes): %w", 8*len(words), err)
	}
	rt.tableMem = mem
	for _, sp := range spots {
		sp.c.step.tables = append(sp.c.step.tables, mem+devptr(sp.off))
	}
	if err := rt.drv.HtoD(mem, unsafe.Pointer(&words[0]), uint64(8*len(words)), rt.stream); err != nil {
		return err
	}
	err = rt.drv.Sync(rt.stream)
	runtime.KeepAlive(words)
	return err
}

func (rt *Runtime) uploadWeights(ws []targets.Weight) error {
	type part struct {
		off   int64
		bytes []byte
	}
	var total int64
	parts := make([][2]part, len(ws))
	rt.weights = make([]Operand, len(ws))
	for i := range ws {
		w := &ws[i]
		if err := w.Check(); err != nil {
			return err
		}
		f, err := storageFmt(w)
		if err != nil {
			return err
		}
		var codes []byte
		scales := w.Scales
		switch {
		case f == fmtFP4 && rt.fp4Tiled && tiledFP4Shape(w.Storage, w.Shape):
			codes, scales = tileFP4(w.Codes, w.Scales, w.Shape[0], w.Shape[1])
			f = fmtFP4Tiled
		case w.F32 != nil:
			codes = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.F32))), 4*len(w.F32))
		case w.I32 != nil:
			codes = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w.I32))), 4*len(w.I32))
		default:
			codes = w.Codes
		}
		parts[i][0] = part{total, codes}
		total += align(int64(len(codes)))
		parts[i][1] = part{total, scales}
		total += align(int64(len(scales)))
		rt.weightBytes += int64(len(codes) + len(scales))
		op := Operand{Fmt: f, Shape: make([]int64, len(w.Shape))}
		for d, n := range w.Shape {
			op.Shape[d] = int64(n)
		}
		if len(w.Shape) > 0 {
			op.Cols = int64(w.Shape[len(w.Shape)-1])
		}
		rt.weights[i] = op
	}
	rt.info.WeightBytes = rt.weightBytes
	if total == 0 {
		return nil
	}
	mem, err := rt.drv.Alloc(uint64(total))
	if err != nil {
		return fmt.Errorf("weights (%d bytes): %w", total, err)
	}
	rt.weightMem = mem
	for i := range parts {
		rt.weights[i].Ptr = mem + devptr(parts[i][0].off)
		if len(parts[i][1].bytes) > 0 {
			rt.weights[i].Scales = mem + devptr(parts[i][1].off)
		}
		for _, pt := range parts[i] {
			if len(pt.bytes) > 0 {
				if err := rt.drv.HtoD(mem+devptr(pt.off), unsafe.Pointer(&pt.bytes[0]), uint64(len(pt.bytes)), rt.stream); err != nil {
					return err
				}
			}
		}
	}
	// the copies read Go memory: it must stay alive until they are done
	err = rt.drv.Sync(rt.stream)
	runtime.KeepAlive(ws)
	return err
}

// concreteBytes is a type's byte size for a step of T tokens (R, K ≤ T).
func concrete(t ir.Type, T, R, K int64, dst []int64) {
	for i, d := range t.Shape {
		switch d.Sym {
		case "":
			dst[i] = d.N
		case ir.SymTokens:
			dst[i] = T
		case ir.SymRows:
			dst[i] = R
		case ir.SymKept:
			dst[i] = K
		}
	}
}

func typeBytes(t ir.Type, T int64) int64 {
	n := int64(4)
	for _, d := range t.Shape {
		if d.Sym != "" {
			n *= T
		} else {
			n *= d.N
		}
	}
	return n
}

// allocArena lays out and allocates the arena for steps of up to maxT tokens.
func (rt *Runtime) allocArena(maxT int64) error {
	// the captured graphs hold the old arena's addresses
	if err := rt.graphs.clear(rt.drv); err != nil {
		return err
	}
	var prev []int32
	if rt.arena != 0 {
		// enqueued steps still use the arena; the last one's sampled ids move along
		if err := rt.drv.Sync(rt.stream); err != nil {
			return err
		}
		if rt.prevN > 0 {
			prev = make([]int32, rt.prevN)
			if err := rt.drv.DtoH(unsafe.Pointer(&prev[0]), rt.prevIds, uint64(4*rt.prevN), rt.stream); err != nil {
				return err
			}
			if err := rt.drv.Sync(rt.stream); err != nil {
				return err
			}
		}
		if err := rt.drv.Free(rt.arena); err != nil {
			return err
		}
		rt.arena = 0
	}
	V := int64(rt.plan.Model.Vocab)
	cols := ir.MaskCols(V)
	var off int64
	take := func(n int64) int64 {
		o := off
		off += align(n)
		return o
	}
	pTok, pPos, pRows := take(4*maxT), take(4*maxT), take(4*maxT)
	pSample, pMask := take(16*maxT), take(4*maxT*cols)
	pSeq := take(40 * maxT) // SeqRec: 5 × i64
	// the read-back region: the error flag, then the last step's sampled ids (one
	// device-to-host copy brings both)
	pErr := take(8 + 4*maxT)
	var pStage, stageBytes int64
	if rt.packed {
		stageBytes = stageRegionBytes(maxT, cols)
		pStage = take(stageBytes)
	}
	var slots, scratch int64
	for _, pr := range rt.progs {
		pr.slotOff = make([]int64, len(pr.p.Slots))
		var so int64
		for i, s := range pr.p.Slots {
			pr.slotOff[i] = so
			so += align(typeBytes(s, maxT))
		}
		pr.slotBytes = so
		slots = max(slots, so)
		for _, c := range pr.calls {
			var need int64
			for _, r := range c.scratch {
				need += align(r.perToken*maxT + r.fixed)
			}
			scratch = max(scratch, need)
		}
	}
	pSlots := take(slots)
	pScratch := take(scratch)
	mem, err := rt.drv.Alloc(uint64(max(off, 256)))
	if err != nil {
		return fmt.Errorf("arena for %d tokens (%d bytes): %w", maxT, off, err)
	}
	rt.arena, rt.arenaBytes, rt.maxT = mem, off, maxT
	rt.info.ArenaBytes = off
	rt.params = paramBufs{tokens: mem + devptr(pTok), positions: mem + devptr(pPos), rows: mem + devptr(pRows),
		sample: mem + devptr(pSample), mask: mem + devptr(pMask), maskCols: cols}
	rt.seqTab, rt.errFlag, rt.scratch = mem+devptr(pSeq), mem+devptr(pErr), mem+devptr(pScratch)
	rt.prevIds = rt.errFlag + 8
	rt.stageDev, rt.stageBytes = mem+devptr(pStage), stageBytes
	base := mem + devptr(pSlots)
	// operand addresses are fixed from here on; only shapes change step to step
	for _, pr := range rt.progs {
		for _, c := range pr.calls {
			rt.resolve(pr, base, c)
		}
	}
	if len(prev) > 0 {
		if err := rt.drv.HtoD(rt.prevIds, unsafe.Pointer(&prev[0]), uint64(4*len(prev)), rt.stream); err != nil {
			return err
		}
		if err := rt.drv.Sync(rt.stream); err != nil {
			return err
		}
	}
	return rt.drv.Memset(rt.errFlag, 0, 8, rt.stream)
}

func (rt *Runtime) resolve(pr *prog, slotBase devptr, c *call) {
	opnd := func(o plan.Operand) Operand {
		switch o.Kind {
		case plan.OpWeight:
			return rt.weights[o.Index]
		case plan.OpSlot:
			return Operand{Ptr: slotBase + devptr(pr.slotOff[o.Index])}
		case plan.OpParam:
			switch o.Index {
			case pr.tokens:
				return Operand{Ptr: rt.params.tokens}
			case pr.pos:
				return Operand{Ptr: rt.params.positions}
			case pr.rows:
				return Operand{Ptr: rt.params.rows}
			case pr.sample:
				return Operand{Ptr: rt.params.sample}
			case pr.mask:
				return Operand{Ptr: rt.params.mask}
			}
		}
		return Operand{}
	}
	for j, o := range c.argRefs {
		sh := c.step.args[j].Shape
		c.step.args[j] = opnd(o)
		if o.Kind != plan.OpWeight {
			c.step.args[j].Shape = sh
		}
	}
	for j, o := range c.resRefs {
		sh := c.step.results[j].Shape
		c.step.results[j] = opnd(o)
		c.step.results[j].Shape = sh
	}
	off := rt.scratch
	for i, r := range c.scratch {
		c.step.scratch[i] = off
		off += devptr(align(r.perToken*rt.maxT + r.fixed))
	}
}

// Info describes the runtime.
func (rt *Runtime) Info() Info { return rt.info }

// Describe is Info in one line.
func (rt *Runtime) Describe() string {
	i := rt.info
	units := ""
	if i.Compile.Units > 1 {
		units = fmt.Sprintf("%d units in parallel, ", i.Compile.Units)
		if n := len(i.Compile.Compiled); n > 0 && n < i.Compile.Units {
			units = fmt.Sprintf("%d of %d units in parallel (%s; the rest from the cache), ", n, i.Compile.Units, strings.Join(i.Compile.Compiled, ", "))
		}
	}
	k := fmt.Sprintf("kernels compiled by %s in %s (%s%d bytes, now in the kernel cache)", i.Compile.Compiler, i.Compile.Took.Round(time.Millisecond), units, i.Compile.Bytes)
	if i.Compile.Cached {
		k = fmt.Sprintf("kernels loaded from the kernel cache in %s (nothing compiled)", i.Compile.Took.Round(time.Microsecond))
	}
	num := "exact numerics (the cpu target's values)"
	if rt.fp8 {
		num = "fp8 numerics (tensor-core products, V4.1's MXFP8 products on the FP8 tensor cores, V4's activations rounded to bf16 at its products)"
	} else if rt.fast {
		num = "fast numerics (tensor-core products)"
	}
	if n := rt.Epilogues(plan.PhaseDecode); n > 0 {
		num += fmt.Sprintf(", %d bf16 roundings of a decode step stored by their producers", n)
	}
	if n := rt.QuantShares(plan.PhaseDecode); n > 0 {
		num += fmt.Sprintf(", %d activation quantizations of a decode step shared with the product before", n)
	}
	if len(rt.twice) > 0 {
		num += "; every launch of " + strings.Join(rt.twiceNames(), ", ") + " issued twice (" + EnvTwice + ", a timing tool: a kernel that updates its operands in place no longer gives the model's values)"
	}
	if rt.uniformRoute {
		num += "; routing uniform (" + EnvRoute + "=uniform: every top-k router's expert ids replaced by distinct uniform draws, a benchmark setting; the values are not the model's)"
	}
	graphs := rt.GraphSummary()
	uploads := "packed uploads (one copy each way a pipelined step)"
	if !rt.packed {
		uploads = "per-parameter uploads (" + EnvPacked + "=0)"
	}
	return fmt.Sprintf("cuda: %s (%s, driver %d.%d); %s; weights %s, arena %s, state %s per sequence; %s; %s; %s",
		i.Device, i.Arch, i.Driver/1000, i.Driver%1000/10, k, human(i.WeightBytes), human(i.ArenaBytes), human(i.StateBytes), num, graphs, uploads)
}

func human(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// HasPhase implements targets.Runtime.
func (rt *Runtime) HasPhase(phase string) bool { return rt.progs[phase] != nil }

// devState is one sequence's state block.
type devState struct {
	rt  *Runtime
	mem devptr
	// saved is the device copy Save keeps (allocated at the first save, reused, freed
	// with the state); gen counts the saves, so that only the latest one restores.
	saved devptr
	gen   uint64
}

// NewState implements targets.Runtime: one zeroed block of the state layout.
func (rt *Runtime) NewState() (targets.State, error) {
	s := &devState{rt: rt}
	if rt.state.size == 0 {
		return s, nil
	}
	var err error
	rt.w.do(func() {
		if s.mem, err = rt.drv.Alloc(uint64(rt.state.size)); err != nil {
			return
		}
		if err = rt.drv.Memset(s.mem, 0, uint64(rt.state.size), rt.stream); err == nil {
			err = rt.drv.Sync(rt.stream)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("sequence state (%d bytes): %w", rt.state.size, err)
	}
	return s, nil
}

// SeqRec flags (kernels/prelude.h).
const (
	seqDecode    = 1
	seqRows      = 2
	seqInvariant = 4
)

// Save implements targets.SavableState: the whole state block is copied to a second
// device block of the sequence, in stream order (no host copy, no wait: the copy runs
// after the steps already enqueued and before the next), and the restore copies it
// back the same way — O(block) device bandwidth, where the cpu target copies only the
// bounded parts (rings, open groups) and truncates the append-only ones. Each save
// replaces the last one; a restore of an earlier save is an error. Where the device
// cannot hold the second block, the copy goes through the host (saveHost).
func (s *devState) Save() (func() error, error) {
	rt := s.rt
	if s.mem == 0 || rt.state.size == 0 {
		return func() error { return nil }, nil
	}
	n := uint64(rt.state.size)
	var err error
	rt.w.do(func() {
		if s.saved == 0 {
			if s.saved, err = rt.drv.Alloc(n); err != nil {
				s.saved = 0
				return
			}
		}
		err = rt.drv.DtoD(s.saved, s.mem, n, rt.stream)
	})
	if s.saved == 0 {
		return s.saveHost()
	}
	if err != nil {
		return nil, fmt.Errorf("saving the sequence state: %w", err)
	}
	s.gen++
	gen := s.gen
	return func() error {
		if s.mem == 0 || s.saved == 0 {
			return fmt.Errorf("restoring the sequence state: the state was released")
		}
		if s.gen != gen {
			return fmt.Errorf("restoring the sequence state: a later save replaced this one")
		}
		var err error
		rt.w.do(func() { err = rt.drv.DtoD(s.mem, s.saved, n, rt.stream) })
		return err
	}, nil
}

// saveHost is Save through the host: the block is read back, and the restore copies
// it to the device again.
func (s *devState) saveHost() (func() error, error) {
	rt := s.rt
	buf, err := s.read()
	if err != nil {
		return nil, err
	}
	s.gen++
	gen := s.gen
	return func() error {
		if s.mem == 0 || len(buf) == 0 {
			return nil
		}
		if s.gen != gen {
			return fmt.Errorf("restoring the sequence state: a later save replaced this one")
		}
		var err error
		rt.w.do(func() {
			if err = rt.drv.HtoD(s.mem, unsafe.Pointer(unsafe.SliceData(buf)), uint64(len(buf)), rt.stream); err == nil {
				err = rt.drv.Sync(rt.stream)
			}
		})
		return err
	}, nil
}

// Digest implements targets.SavableState: a hash of the state block's raw bytes, so
// equal digests mean equal states. The converse holds only for states built by steps
// of the same shapes: a multi-row step leaves dead bytes (open-group slots it did not
// need) that one-row steps write. A read failure hashes as an empty block.
func (s *devState) Digest() [32]byte {
	buf, _ := s.read()
	return sha256.Sum256(buf)
}

// read copies the state block to the host.
func (s *devState) read() ([]byte, error) {
	rt := s.rt
	if s.mem == 0 || rt.state.size == 0 {
		return nil, nil
	}
	buf := make([]byte, rt.state.size)
	var err error
	rt.w.do(func() {
		if err = rt.drv.DtoH(unsafe.Pointer(unsafe.SliceData(buf)), s.mem, uint64(len(buf)), rt.stream); err == nil {
			err = rt.drv.Sync(rt.stream)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("reading the sequence state: %w", err)
	}
	return buf, nil
}

// Release implements targets.State.
func (s *devState) Release() {
	if s.mem == 0 || s.rt.closed {
		return
	}
	m, sv := s.mem, s.saved
	s.mem, s.saved = 0, 0
	s.rt.w.do(func() {
		_ = s.rt.drv.Free(m)
		if sv != 0 {
			_ = s.rt.drv.Free(sv)
		}
	})
}

// Close implements targets.Runtime.
func (rt *Runtime) Close() error {
	if rt.closed {
		return nil
	}
	rt.closed = true
	rt.w.do(func() {
		// enqueued steps finish before their memory goes
		_ = rt.drv.Sync(rt.stream)
		_ = rt.graphs.clear(rt.drv)
		rt.pipe.free(rt.drv)
		if rt.arena != 0 {
			_ = rt.drv.Free(rt.arena)
		}
		if rt.weightMem != 0 {
			_ = rt.drv.Free(rt.weightMem)
		}
		if rt.tableMem != 0 {
			_ = rt.drv.Free(rt.tableMem)
		}
		rt.drv.Release(rt.dev)
		if rt.fake != nil {
			rt.fake.close()
		}
	})
	close(rt.w.ch)
	return nil
}

// Step implements targets.Runtime.
func (rt *Runtime) Step(in *targets.StepIn, out *targets.StepOut) error {
	if rt.closed {
		return fmt.Errorf("runtime is closed")
	}
	var err error
	rt.w.do(func() { err = rt.step(in, out) })
	return err
}

func (rt *Runtime) step(in *targets.StepIn, out *targets.StepOut) error {
	pr, st, err := rt.stage(in)
	if err != nil {
		return err
	}
	lay, err := rt.upload(pr, in, st, false, nil)
	if err != nil {
		return err
	}
	evs, err := rt.run(pr, st, lay)
	if err != nil {
		return err
	}
	if err := rt.readBack(pr, in, out, st.R); err != nil {
		return err
	}
	if evs != nil {
		return rt.collect(pr, evs)
	}
	return nil
}

// stage checks a step and lays out its host-side parameters (rt.host, the packed
// layout among them); it touches nothing on the device.
func (rt *Runtime) stage(in *targets.StepIn) (*prog, Step, error) {
	pr := rt.progs[in.Phase]
	if pr == nil {
		return nil, Step{}, fmt.Errorf("plan has no %s program", in.Phase)
	}
	T, R := int64(len(in.Tokens)), int64(len(in.Rows))
	if int64(len(in.Sample)) != 4*R || (in.Masks != nil && int64(len(in.Masks)) != R) || (in.Want != nil && int64(len(in.Want)) != R) {
		return nil, Step{}, fmt.Errorf("step of %d logits rows with %d sampling values, %d masks and %d logits flags", R, len(in.Sample), len(in.Masks), len(in.Want))
	}
	if T == 0 {
		return nil, Step{}, fmt.Errorf("a step with no tokens")
	}
	h := &rt.host
	h.positions, h.seqs = h.positions[:0], h.seqs[:0]
	var K, row int64
	alone := true
	for i, s := range in.Seqs {
		ds, ok := s.State.(*devState)
		if !ok || ds.rt != rt || (ds.mem == 0 && rt.state.size > 0) {
			return nil, Step{}, fmt.Errorf("sequence %d: not a live state of this runtime", i)
		}
		for j := 0; j < s.N; j++ {
			h.positions = append(h.positions, int32(s.Pos+j))
		}
		// the cpu target's rule (targets/cpu Seq.Decode, RowOrders, Invariant)
		var flags int64
		decode := s.Decode || (!rt.invariant && s.N == 1 && s.Pos > 0)
		if decode {
			flags |= seqDecode
		}
		if decode || rt.invariant {
			flags |= seqRows
		}
		if rt.invariant {
			flags |= seqInvariant
		}
		alone = alone && (s.N == 1 || flags&seqRows != 0)
		// (the sequences' rows in order from row 0, each after the last: the kernels'
		// row → sequence lookups rely on it, prelude.h seq_find's binary search)
		h.seqs = append(h.seqs, row, int64(s.N), int64(s.Pos), int64(ds.mem), flags)
		row += int64(s.N)
		if pr.keep > 0 {
			K += min(int64(s.N), pr.keep)
		} else {
			K += int64(s.N)
		}
	}
	if row != T {
		return nil, Step{}, fmt.Errorf("sequences of %d tokens, %d tokens given", row, T)
	}
	for _, r := range in.Rows {
		if r < 0 || int64(r) >= T {
			return nil, Step{}, fmt.Errorf("logits row %d is outside the step's %d tokens", r, T)
		}
	}
	if pr.mask < 0 && in.Masks != nil {
		for i, m := range in.Masks {
			if m != nil {
				return nil, Step{}, fmt.Errorf("row %d: this plan's %s program cannot apply grammar masks", i, in.Phase)
			}
		}
	}
	if pr.mask >= 0 && in.Masks != nil {
		for i, m := range in.Masks {
			if m != nil && int64(len(m))*2 != rt.params.maskCols-1 {
				return nil, Step{}, fmt.Errorf("row %d: a mask of %d words for a vocabulary of %d", i, len(m), rt.plan.Model.Vocab)
			}
		}
	}
	st := Step{T: T, R: R, K: K, NSeq: int64(len(in.Seqs)), Phase: in.Phase, RowsAlone: alone}
	if rt.packed {
		h.lay = rt.packFor(pr, in, st)
	}
	return pr, st, nil
}

// upload grows the arena when the step needs it and copies the step's parameters to
// the device (ahead of its kernels on the stream): from Go memory, or, given a
// page-locked staging buffer (a pipelined step's), through it, so that the copies need
// not wait for the steps queued before. Packed (packed.go), that is one copy, and it
// returns the layout run hands unpack_step, which replaces FromPrevious tokens with
// resolve. Otherwise it is one copy per parameter (the layout is nil), and with resolve
// tokens that stand for the previous step's sampled tokens (targets.FromPrevious) are
// replaced on the device by resolve_prev, outside any graph.
func (rt *Runtime) upload(pr *prog, in *targets.StepIn, st Step, resolve bool, stage []byte) (*packLayout, error) {
	// the arena holds maxT tokens, logits rows and sequences
	if need := max(st.T, st.R, st.NSeq); need > rt.maxT {
		if err := rt.allocArena(need); err != nil {
			return nil, err
		}
	}
	if rt.packed {
		l := rt.host.lay // stage's
		return &l, rt.uploadPacked(in, &l, resolve, stage)
	}
	return nil, rt.uploadParams(pr, in, st, resolve, stage)
}

// uploadParams is upload with one copy per parameter.
func (rt *Runtime) uploadParams(pr *prog, in *targets.StepIn, st Step, resolve bool, stage []byte) error {
	h := &rt.host
	d, s := rt.drv, rt.stream
	off := 0
	up := func(dst devptr, p unsafe.Pointer, n int) error {
		if n == 0 {
			return nil
		}
		if stage != nil {
			if off+n > len(stage) {
				return fmt.Errorf("upload staging: %d bytes past a buffer of %d", off+n, len(stage))
			}
			copy(stage[off:off+n], unsafe.Slice((*byte)(p), n))
			p = unsafe.Pointer(&stage[off])
			off += (n + 7) &^ 7
		}
		return d.HtoD(dst, p, uint64(n), s)
	}
	if err := up(rt.params.tokens, unsafe.Pointer(unsafe.SliceData(in.Tokens)), 4*len(in.Tokens)); err != nil {
		return err
	}
	if err := up(rt.params.positions, unsafe.Pointer(unsafe.SliceData(h.positions)), 4*len(h.positions)); err != nil {
		return err
	}
	if err := up(rt.params.rows, unsafe.Pointer(unsafe.SliceData(in.Rows)), 4*len(in.Rows)); err != nil {
		return err
	}
	if err := up(rt.params.sample, unsafe.Pointer(unsafe.SliceData(in.Sample)), 4*len(in.Sample)); err != nil {
		return err
	}
	if err := up(rt.seqTab, unsafe.Pointer(unsafe.SliceData(h.seqs)), 8*len(h.seqs)); err != nil {
		return err
	}
	if pr.mask >= 0 {
		buf := rt.maskWords(in, st.R)
		if err := up(rt.params.mask, unsafe.Pointer(unsafe.SliceData(buf)), 4*len(buf)); err != nil {
			return err
		}
	}
	if resolve && slices.ContainsFunc(in.Tokens, func(t int32) bool { return t < 0 }) {
		a := &rt.resolveBuf
		a.reset()
		a.P(rt.params.tokens)
		a.P(rt.prevIds)
		a.I(st.T)
		a.I(rt.prevN)
		a.P(rt.errFlag)
		grid := (st.T + launchBlock - 1) / launchBlock
		if err := d.Launch(rt.resolveFn, uint32(grid), launchBlock, 0, s, a.w); err != nil {
			return fmt.Errorf("kernel resolve_prev: %w", err)
		}
	}
	return nil
}

// run launches the step's program — its captured graph when graphs are on, else
// kernel by kernel — between the timeline's step events, then keeps the step's
// sampled ids on the device for the next step's FromPrevious tokens. With a packed
// layout (upload's), unpack_step comes first and keep_ids last, both in the graph;
// without, the ids are kept by a device-to-device copy. It returns the profile's events
// when profiling.
func (rt *Runtime) run(pr *prog, st Step, lay *packLayout) (_ []event, err error) {
	d, s := rt.drv, rt.stream
	rt.stepN++
	st.Seqs, st.Err = rt.seqTab, rt.errFlag
	span := -1
	if rt.tl.on {
		if span, err = rt.tl.begin(rt, rt.stepN, pr.p.Phase); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				rt.tl.drop(span)
			}
		}()
	}
	if rt.profDecode && !rt.profStarted && pr.p.Phase == plan.PhaseDecode {
		if err := d.ProfilerStart(); err != nil {
			return nil, fmt.Errorf("%s=1: %w", EnvProfileDecode, err)
		}
		rt.profStarted = true
	}
	var evs []event
	if rt.prof.on {
		var err error
		if evs, err = rt.profEvents(pr); err != nil {
			return nil, err
		}
	}
	graphed := false
	if rt.graphable() {
		var ce *captureError
		switch ok, err := rt.runGraph(pr, st, lay); {
		case err == nil:
			graphed = ok
		case errors.As(err, &ce):
			rt.graphFailed(err)
		default:
			return nil, fmt.Errorf("%s step (graph): %w", pr.p.Phase, err)
		}
	}
	if !graphed {
		if lay != nil {
			if err := rt.unpack(lay); err != nil {
				return nil, fmt.Errorf("%s step: %w", pr.p.Phase, err)
			}
		}
		rt.stepping = true
		defer func() { rt.stepping = false }()
		census := rt.censusOn(pr)
		if census {
			rt.census.Step()
		}
		for i, c := range pr.calls {
			if evs != nil {
				if err := d.Record(evs[i], s); err != nil {
					return nil, err
				}
			}
			rt.setShapes(c, st)
			var err error
			if rt.hook != nil {
				err = rt.hook(pr.p.Phase, i, c.in, func() error { return rt.launch(c) })
			} else {
				err = rt.launch(c)
			}
			if err == nil && census {
				err = rt.countExperts(i, c)
			}
			if err != nil {
				return nil, fmt.Errorf("%s step, instr %d (%s): %w", pr.p.Phase, i, c.in.Op, err)
			}
		}
		if evs != nil {
			if err := d.Record(evs[len(pr.calls)], s); err != nil {
				return nil, err
			}
		}
		if lay != nil {
			if err := rt.keepIds(rt.sampledIds(pr), st.R); err != nil {
				return nil, fmt.Errorf("%s step: %w", pr.p.Phase, err)
			}
		}
	}
	if lay == nil && st.R > 0 {
		if err := d.DtoD(rt.prevIds, rt.sampledIds(pr), uint64(4*st.R), s); err != nil {
			return nil, err
		}
	}
	rt.prevN = st.R
	if span >= 0 {
		if err := rt.tl.end(rt, span); err != nil {
			return nil, err
		}
	}
	return evs, nil
}

// setShapes writes the step's shapes into c's operands.
func (rt *Runtime) setShapes(c *call, st Step) {
	T, R, K := st.T, st.R, st.K
	c.step.T, c.step.R, c.step.K, c.step.NSeq, c.step.Phase, c.step.Seqs, c.step.Err = T, R, K, st.NSeq, st.Phase, st.Seqs, st.Err
	c.step.RowsAlone = st.RowsAlone
	for j := range c.step.args {
		if c.argRefs[j].Kind != plan.OpWeight {
			concrete(c.argT[j], T, R, K, c.step.args[j].Shape)
			c.step.args[j].Cols = lastDim(c.step.args[j].Shape)
		}
	}
	for j := range c.step.results {
		concrete(c.resT[j], T, R, K, c.step.results[j].Shape)
		c.step.results[j].Cols = lastDim(c.step.results[j].Shape)
	}
}

func lastDim(s []int64) int64 {
	if len(s) == 0 {
		return 1
	}
	return s[len(s)-1]
}

func (rt *Runtime) launch(c *call) error {
	for li := range c.launches {
		l := &c.launches[li]
		l.buf.reset()
		n := l.fill(&c.step, &l.buf)
		if n <= 0 {
			continue
		}
		block := int64(launchBlock)
		if l.block > 0 {
			block = l.block
		}
		grid := (n + block - 1) / block
		if grid > 1<<31-1 {
			return fmt.Errorf("kernel %s: %d work items", l.kernel, n)
		}
		if rt.prof.on {
			if err := rt.launchEvent(c, l.kernel, false); err != nil {
				return err
			}
		}
		span := -1
		if rt.tl.on && rt.tl.kernels {
			var err error
			if span, err = rt.tl.beginKernel(rt, c, l.kernel); err != nil {
				return err
			}
		}
		if err := rt.drv.Launch(l.fn, uint32(grid), uint32(block), uint32(l.shared), rt.stream, l.buf.w); err != nil {
			return fmt.Errorf("kernel %s: %w", l.kernel, err)
		}
		if l.twice {
			// (EnvTwice: the same launch again, a timing tool)
			if err := rt.drv.Launch(l.fn, uint32(grid), uint32(block), uint32(l.shared), rt.stream, l.buf.w); err != nil {
				return fmt.Errorf("kernel %s, launched twice (%s): %w", l.kernel, EnvTwice, err)
			}
		}
		if span >= 0 {
			if err := rt.tl.end(rt, span); err != nil {
				return err
			}
		}
		if rt.prof.on {
			if err := rt.launchEvent(c, l.kernel, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// maskWords lays out the mask parameter as the cpu target does: per logits row a flag
// word, then the row's mask as int32 halves.
func (rt *Runtime) maskWords(in *targets.StepIn, R int64) []int32 {
	cols := rt.params.maskCols
	h := &rt.host
	if int64(cap(h.mask)) < R*cols {
		h.mask = make([]int32, R*cols)
	}
	buf := h.mask[:R*cols]
	for i := int64(0); i < R; i++ {
		row := buf[i*cols : (i+1)*cols]
		row[0] = 0
		if in.Masks == nil || in.Masks[i] == nil {
			continue
		}
		m := in.Masks[i]
		row[0] = 1
		for j, w := range m {
			row[1+2*j], row[2+2*j] = int32(uint32(w)), int32(uint32(w>>32))
		}
	}
	return buf
}

// readBack copies the step's outputs the VM asked for and checks the error flag.
func (rt *Runtime) readBack(pr *prog, in *targets.StepIn, out *targets.StepOut, R int64) error {
	d, s := rt.drv, rt.stream
	slot := func(i int) devptr {
		ret := pr.p.Returns[i]
		return rt.arenaSlot(pr, ret.Index)
	}
	V := int64(rt.plan.Model.Vocab)
	var flag int64
	if err := d.DtoH(unsafe.Pointer(&flag), rt.errFlag, 8, s); err != nil {
		return err
	}
	ids := make([]int32, R)
	if R > 0 {
		if err := d.DtoH(unsafe.Pointer(&ids[0]), slot(1), uint64(4*R), s); err != nil {
			return err
		}
	}
	out.Logits = out.Logits[:0]
	if in.Want != nil {
		for i, w := range in.Want {
			var row []float32
			if w {
				row = make([]float32, V)
				if err := d.DtoH(unsafe.Pointer(&row[0]), slot(0)+devptr(int64(i)*V*4), uint64(4*V), s); err != nil {
					return err
				}
			}
			out.Logits = append(out.Logits, row)
		}
	}
	var conf []float32
	if in.Phase == plan.PhaseDraft && R > 0 {
		conf = make([]float32, R)
		if err := d.DtoH(unsafe.Pointer(&conf[0]), slot(2), uint64(4*R), s); err != nil {
			return err
		}
	}
	if err := d.Sync(s); err != nil {
		return err
	}
	if flag != 0 {
		_ = d.Memset(rt.errFlag, 0, 8, s)
		return kernelError(flag)
	}
	if in.Phase == plan.PhaseDraft {
		out.Tokens = out.Tokens[:0]
		out.Drafts = append(out.Drafts[:0], ids...)
		out.Confidences = append(out.Confidences[:0], conf...)
		return nil
	}
	out.Tokens = append(out.Tokens[:0], ids...)
	return nil
}

// sampledIds is the slot of the program's sampled ids (its second return).
func (rt *Runtime) sampledIds(pr *prog) devptr {
	return rt.arenaSlot(pr, pr.p.Returns[1].Index)
}

func (rt *Runtime) arenaSlot(pr *prog, slot int) devptr {
	// slots start after the fixed parameter region; resolve() put every slot operand
	// at the same base, so any call's view of the slot gives it
	for _, c := range pr.calls {
		for j, o := range c.resRefs {
			if o.Kind == plan.OpSlot && o.Index == slot {
				return c.step.results[j].Ptr
			}
		}
	}
	return 0
}

// Result copies result j of the instruction being run by a Hook (call it from the Hook,
// after run): float32 or int32 values, by the result's type.
func (rt *Runtime) Result(phase string, index, j int) ([]float32, []int32, error) {
	if !rt.stepping {
		return nil, nil, fmt.Errorf("Result is for Hooks, during a step")
	}
	pr := rt.progs[phase]
	if pr == nil || index < 0 || index >= len(pr.calls) || j < 0 || j >= len(pr.calls[index].resRefs) {
		return nil, nil, fmt.Errorf("no result %d of %s instr %d", j, phase, index)
	}
	c := pr.calls[index]
	o := c.step.results[j]
	n := o.Elems()
	if n == 0 || c.resT[j].DType == ir.State {
		return nil, nil, nil
	}
	var f []float32
	var i []int32
	var p unsafe.Pointer
	if c.resT[j].DType == ir.I32 {
		i = make([]int32, n)
		p = unsafe.Pointer(&i[0])
	} else {
		f = make([]float32, n)
		p = unsafe.Pointer(&f[0])
	}
	if err := rt.drv.DtoH(p, o.Ptr, uint64(4*n), rt.stream); err != nil {
		return nil, nil, err
	}
	return f, i, rt.drv.Sync(rt.stream)
}

// SetArg overwrites argument j of the instruction a Hook is about to run (call it from
// the Hook, before run) with the given values: how a test feeds each instruction the
// reference's inputs. Weights cannot be set.
func (rt *Runtime) SetArg(phase string, index, j int, f []float32, i []int32) error {
	if !rt.stepping {
		return fmt.Errorf("SetArg is for Hooks, during a step")
	}
	pr := rt.progs[phase]
	if pr == nil || index < 0 || index >= len(pr.calls) || j < 0 || j >= len(pr.calls[index].argRefs) {
		return fmt.Errorf("no argument %d of %s instr %d", j, phase, index)
	}
	c := pr.calls[index]
	if c.argRefs[j].Kind == plan.OpWeight {
		return fmt.Errorf("argument %d of %s instr %d is a weight", j, phase, index)
	}
	o := c.step.args[j]
	n := o.Elems()
	var p unsafe.Pointer
	switch {
	case c.argT[j].DType == ir.State:
		return nil
	case c.argT[j].DType == ir.I32 && int64(len(i)) == n:
		if n == 0 {
			return nil
		}
		p = unsafe.Pointer(&i[0])
	case c.argT[j].DType != ir.I32 && int64(len(f)) == n:
		if n == 0 {
			return nil
		}
		p = unsafe.Pointer(&f[0])
	default:
		return fmt.Errorf("argument %d of %s instr %d holds %d values; %d/%d given", j, phase, index, n, len(f), len(i))
	}
	if err := rt.drv.HtoD(o.Ptr, p, uint64(4*n), rt.stream); err != nil {
		return err
	}
	return rt.drv.Sync(rt.stream)
}

// kernelError turns the device error flag into an error (errors.go lists the codes).
func kernelError(code int64) error {
	if msg, ok := kernelErrors[code]; ok {
		return fmt.Errorf("kernel check failed: %s", msg)
	}
	return fmt.Errorf("kernel check failed (code %d)", code)
}

var kernelErrors = map[int64]string{}

// registerError names a kernel error code; ops_*.go call it from init.
func registerError(code int64, msg string) {
	if _, dup := kernelErrors[code]; dup {
		panic(fmt.Sprintf("cuda: error code %d registered twice", code))
	}
	kernelErrors[code] = msg
}
