package cuda

import (
	"fmt"
	"math"

	"deepinfer/ir"
	"deepinfer/plan"
)

// Binding an instruction to its kernels. Every IR op has a binder, registered from the
// file that holds its kernels (ops_*.go beside kernels/*.cu). A binder runs once per
// instruction when a plan is opened: it checks the instruction's types and attributes,
// claims per-sequence state and scratch, and adds launches. Every step, each launch's
// fill writes the kernel's argument struct for that step's shapes and returns how many
// work items the kernel's grid-stride loop covers.

type binder func(b *Bind) error

var binders = map[string]binder{}

// register names op's binder; ops_*.go call it from init.
func register(op string, f binder) {
	if _, dup := binders[op]; dup {
		panic("cuda: op bound twice: " + op)
	}
	binders[op] = f
}

// Bind is what a binder sees of one instruction.
type Bind struct {
	rt      *Runtime
	Phase   string
	In      *plan.Instr
	Args    []ir.Type // the present operands' types, in order
	Results []ir.Type
	Attrs   ir.Attrs
	// weight operands: for Args[j], the manifest weight (nil when it is not a weight)
	weights  []*plan.Weight
	launches []launch
	scratch  []scratchReq
	tables   [][2]int // weight tables: first operand, count
	rounds   bool     // RoundsOnStore
	// quantizes: the launch that writes operand 0's quantized values into scratch
	// buffer quantScratch (Quantizes; "" when none)
	quantizes    string
	quantScratch int
	// fp4TiledArgs: the operands [lo, hi) whose FP4 weights the instruction's kernels
	// read in the tiled layout (fastExperts on the _regt tiles; fp4tiled.go)
	fp4TiledArgs [2]int
}

// RoundsOnStore declares that every launch of the instruction passes Step.Round to its
// kernel, which then stores each value of result 0 rounded to bf16: the runtime may run
// a fake_quant to bf16 of that result as this instruction's epilogue (ops_fuse.go).
func (b *Bind) RoundsOnStore() { b.rounds = true }

// Quantizes declares that the instruction's launch of kernel writes its operand 0's
// quantized activations (all of them, nothing else) into scratch buffer i, that no other
// launch of it writes that buffer, and that its other launches read the activations only
// from there: an instruction marked quant_shared right after one that declares the same
// may leave its own launch out and read the buffer its predecessor wrote (ops_fuse.go).
func (b *Bind) Quantizes(kernel string, i int) { b.quantizes, b.quantScratch = kernel, i }

type launch struct {
	kernel string
	fill   func(s *Step, a *ArgBuf) int64
	block  int64 // threads a launch block (0: launchBlock)
	shared int64 // dynamic shared memory a launch block (bytes)
	fn     function
	twice  bool // EnvTwice names the kernel: each launch issued twice (set when bound)
	buf    ArgBuf
}

type scratchReq struct{ perToken, fixed int64 }

// Int, Float, Bool read attributes (zero when absent).
func (b *Bind) Int(k string) int64     { v, _ := b.Attrs.Int(k); return v }
func (b *Bind) Float(k string) float64 { v, _ := b.Attrs.Float(k); return v }
func (b *Bind) Bool(k string) bool     { v, _ := b.Attrs.Bool(k); return v }
func (b *Bind) Str(k string) string    { v, _ := b.Attrs.Str(k); return v }

// Plan is the plan being opened (model facts, the KV layout).
func (b *Bind) Plan() *plan.Plan { return b.rt.plan }

// MaxPositions is the longest sequence the state must hold.
func (b *Bind) MaxPositions() int64 { return b.rt.maxPos }

// SharedMax is the most dynamic shared memory a launch block of this device may take
// (Bind.LaunchShared; sharedMax).
func (b *Bind) SharedMax() int64 { return b.rt.maxShared }

// Fast reports the fast numerics mode (targets.Options.Numerics).
func (b *Bind) Fast() bool { return b.rt.fast }

// Weight is the manifest entry of weight operand j, or nil.
func (b *Bind) Weight(j int) *plan.Weight { return b.weights[j] }

// Errorf reports a bad instruction.
func (b *Bind) Errorf(format string, args ...any) error {
	return fmt.Errorf("%s: %s", b.In.Op, fmt.Sprintf(format, args...))
}

// Dim is dimension d of a fixed shape (the symbolic T, R, K dims read as -1).
func Dim(t ir.Type, d int) int64 {
	if d < 0 {
		d += len(t.Shape)
	}
	if d < 0 || d >= len(t.Shape) || t.Shape[d].Sym != "" {
		return -1
	}
	return t.Shape[d].N
}

// State claims a per-sequence state region named key of bytes bytes and returns its
// offset in every sequence's state block. Instructions that name the same key share
// the region (a compressor and the attention reading its cache); they must agree on
// its size. Regions start zeroed.
func (b *Bind) State(key string, bytes int64) (int64, error) {
	return b.rt.state.claim(key, bytes)
}

// Scratch claims device scratch for this instruction of perToken·T + fixed bytes, valid
// during its launches only (every instruction's scratch shares one region), and returns
// its index for Step.Scratch.
func (b *Bind) Scratch(perToken, fixed int64) int {
	b.scratch = append(b.scratch, scratchReq{perToken, fixed})
	return len(b.scratch) - 1
}

// WeightTable asks for a device array of the Weight descriptors (prelude.h) of operands
// first..first+n-1, all weights, built once when the plan is opened; it returns its
// index for Step.Table. (An instruction with more weights than one kernel's arguments
// hold passes them this way.)
func (b *Bind) WeightTable(first, n int) int {
	b.tables = append(b.tables, [2]int{first, n})
	return len(b.tables) - 1
}

// Launch adds a launch of kernel to the instruction. fill writes the argument struct
// for a step and returns the work items (0 skips the launch).
func (b *Bind) Launch(kernel string, fill func(s *Step, a *ArgBuf) int64) {
	b.launches = append(b.launches, launch{kernel: kernel, fill: fill})
}

// LaunchBlocks is Launch with launch blocks of block threads instead of launchBlock's
// (a kernel whose block shares one row's passes: its source's launch bounds must allow
// block threads).
func (b *Bind) LaunchBlocks(kernel string, block int64, fill func(s *Step, a *ArgBuf) int64) {
	b.launches = append(b.launches, launch{kernel: kernel, fill: fill, block: block})
}

// LaunchShared is LaunchBlocks with shared bytes of dynamic shared memory a launch block
// (the kernel's DYN_SHARED array; fixed when the program is bound).
func (b *Bind) LaunchShared(kernel string, block, shared int64, fill func(s *Step, a *ArgBuf) int64) {
	b.launches = append(b.launches, launch{kernel: kernel, fill: fill, block: block, shared: shared})
}

// Step is what a launch's fill sees of the running step.
type Step struct {
	T, R, K int64 // tokens, logits rows, rows kept by SWA bounded replay
	NSeq    int64
	Phase   string
	// RowsAlone: every row is summed as in a one-row step (its sequence has one row,
	// or its rows are flagged so: speculation's verify groups, batch-invariant mode;
	// SeqRec's SEQ_ROWS); a decode step of one row a sequence is one. Kernels of
	// one-row orders (V4.1's router and mix tiles) may take such a step whatever its
	// rows a sequence.
	RowsAlone bool
	// Round: store result 0 rounded to bf16 (the instruction runs the bf16 rounding
	// that follows it as its epilogue; ops_fuse.go). Set once when a program is bound.
	Round bool
	// Seqs is the device table of SeqRec (prelude.h) for the step's sequences.
	Seqs devptr
	// Err is a device i64 a kernel sets nonzero on bad input (see errors.go).
	Err     devptr
	args    []Operand
	results []Operand
	scratch []devptr
	tables  []devptr
}

// Arg and Result are the instruction's operands for this step.
func (s *Step) Arg(j int) Operand    { return s.args[j] }
func (s *Step) Result(j int) Operand { return s.results[j] }

// Table is the device address of weight table i (Bind.WeightTable).
func (s *Step) Table(i int) devptr { return s.tables[i] }

// Scratch is the device address of scratch buffer i for this step.
func (s *Step) Scratch(i int) devptr { return s.scratch[i] }

// Operand is one operand's device memory and its shape this step.
type Operand struct {
	Ptr    devptr
	Scales devptr // block formats' scales
	Fmt    int64  // prelude.h's Weight.fmt: 0 f32 (and activations), 1 bf16, 2 fp8_b32, 3 fp8_g32, 4 fp4_g32, 5 fp8_b128
	Cols   int64  // the last dim
	Shape  []int64
}

// Rows is the product of all but the last dim.
func (o Operand) Rows() int64 {
	n := int64(1)
	for _, d := range o.Shape[:max(len(o.Shape)-1, 0)] {
		n *= d
	}
	return n
}

// Elems is the product of the dims.
func (o Operand) Elems() int64 {
	n := int64(1)
	for _, d := range o.Shape {
		n *= d
	}
	return n
}

// ArgBuf is a kernel's argument struct under construction: 8-byte fields in order.
type ArgBuf struct{ w []uint64 }

func (a *ArgBuf) reset() { a.w = a.w[:0] }

// P appends a device address.
func (a *ArgBuf) P(p devptr) { a.w = append(a.w, uint64(p)) }

// I appends a long long.
func (a *ArgBuf) I(v int64) { a.w = append(a.w, uint64(v)) }

// F appends a double.
func (a *ArgBuf) F(v float64) { a.w = append(a.w, math.Float64bits(v)) }

// W appends a struct Weight {p, s, fmt, cols}.
func (a *ArgBuf) W(o Operand) {
	a.w = append(a.w, uint64(o.Ptr), uint64(o.Scales), uint64(o.Fmt), uint64(o.Cols))
}

// stateLayout is the per-sequence state block: named regions, 256-byte aligned.
type stateLayout struct {
	regions map[string][2]int64 // key → offset, bytes
	size    int64
}

func (l *stateLayout) claim(key string, bytes int64) (int64, error) {
	if bytes < 0 {
		return 0, fmt.Errorf("state %s: %d bytes", key, bytes)
	}
	if r, ok := l.regions[key]; ok {
		if r[1] != bytes {
			return 0, fmt.Errorf("state %s claimed as %d and %d bytes", key, r[1], bytes)
		}
		return r[0], nil
	}
	if l.regions == nil {
		l.regions = map[string][2]int64{}
	}
	off := l.size
	l.regions[key] = [2]int64{off, bytes}
	l.size += (bytes + 255) &^ 255
	return off, nil
}
