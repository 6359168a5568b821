package targets

import (
	"fmt"
	"os"
	"time"

	"deepinfer/plan"
	"deepinfer/quant"
	"deepinfer/safetensors"
)

// The executing side of a target. divm hands an Executor a plan and its weights in their
// checkpoint storage formats; the executor owns everything from then on — the weights
// (widened or kept packed, as it likes), the arena, every sequence's state — and the VM
// only drives steps: it says which sequences advance by which tokens and which logits
// rows it wants back, and reads back the sampled tokens, and logits only for the rows
// that asked. Sampling and grammar masks run where the logits are.

// Executor is a target that runs plans on this machine.
type Executor interface {
	Target
	// Open takes a plan and its weights (manifest order) and prepares every program.
	// The runtime owns the weights' memory afterwards.
	Open(p *plan.Plan, w []Weight, o Options) (Runtime, error)
}

// Hook wraps one kernel call (tracing, profiling). It must call run exactly once and
// return its error. index is the instruction's index in its program.
type Hook func(phase string, index int, in *plan.Instr, run func() error) error

// Options are the VM's requests to a runtime.
type Options struct {
	Hook Hook
	// MaxTokens is the largest step (packed tokens) the VM will send; a device runtime
	// sizes its arena for it when the plan is opened (0: the runtime's default).
	MaxTokens int
	// Invariant is batch-invariant mode (DEEPINFER_BATCH_INVARIANT=1): every row is
	// computed with the reduction orders of a one-row step, so a row's result does not
	// depend on how many rows its sequence or the batch brings to the step (chunked
	// prefill, speculation, batch size). Prompt rows keep prefill's semantics.
	Invariant bool
	// MaxContext is the longest sequence the runtime must hold (0: the model's
	// max_position_embeddings). A device runtime sizes every sequence's state for it,
	// so a benchmark at a 32k context need not reserve the model's million positions.
	MaxContext int
	// Numerics is the arithmetic a device runtime uses: NumericsExact ("" or "exact",
	// the cpu target's values bit for bit), NumericsFast (products on the tensor
	// cores, within a stated tolerance of the exact values; docs/cuda.md) or NumericsFP8
	// (the fast mode with V4.1's MXFP8 products on the tensor cores' FP8 form, each
	// 32-value block summed at the tensor cores' FP8 precision, as DeepSeek's own
	// kernels sum them, and V4's product activations rounded to bf16, one tensor-core
	// pass a product where the fast mode takes two). The cpu target computes exactly
	// whatever it is asked.
	Numerics string
	// UniformRoute (a benchmark setting) replaces every top-k router's expert ids with k
	// distinct experts a token drawn uniformly, as a trained, load-balanced router
	// spreads a batch, where a random-weight model's router sends rows that share a
	// context to a few experts: a full-width step then reads the experts a serving step
	// would. The values are no longer the model's. Only a device runtime takes it (the
	// cuda target; its DEEPINFER_CUDA_ROUTE=uniform does the same); the cpu target
	// refuses it.
	UniformRoute bool
}

// The numerics modes (Options.Numerics).
const (
	NumericsExact = "exact"
	NumericsFast  = "fast"
	NumericsFP8   = "fp8"
)

// EnvIndexTies names the rule by which V4.1's indexer keeps equal scores at its top-k
// cut, on every target alike: unset or "cpu", torch.topk's on the CPU (libstdc++'s heap
// select and introselect, step for step: the order the reference fixtures were computed
// in, and the default); "low", the lower position first among the k-th largest score's
// equals (the set torch.topk keeps on a CUDA device, whose radix select gathers the
// values above the k-th, then its equals in index order). The two differ only in which
// equals of the k-th score a row keeps, and V4.1's bf16 scores tie there often, so the
// rule changes which keys a query attends to: the fixtures' logits are the cpu rule's.
// The cuda target selects by the low rule with a parallel radix select (a row's
// launch block), by the cpu rule with a serial walk of each row (docs/cuda.md). The
// candidate blocks (select_candidate_blocks) keep the cpu rule under both.
const EnvIndexTies = "DEEPINFER_INDEX_TIES"

// IndexTiesLow reports whether EnvIndexTies asks for the low rule; an unknown value is
// an error.
func IndexTiesLow() (bool, error) {
	switch v := os.Getenv(EnvIndexTies); v {
	case "", "cpu":
		return false, nil
	case "low":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: want cpu (the default) or low", EnvIndexTies, v)
	}
}

// CheckNumerics refuses an unknown numerics mode.
func CheckNumerics(mode string) error {
	switch mode {
	case "", NumericsExact, NumericsFast, NumericsFP8:
		return nil
	}
	return fmt.Errorf("numerics %q: want %q, %q or %q", mode, NumericsExact, NumericsFast, NumericsFP8)
}

// Runtime is an opened plan.
type Runtime interface {
	// NewState allocates an empty sequence state (window rings, compressed caches,
	// index keys, Engram history, DSpark rings) wherever the runtime keeps it.
	NewState() (State, error)
	// HasPhase reports whether the plan has a program for phase.
	HasPhase(phase string) bool
	// Step runs one program over a batch: it uploads the step's inputs, runs the
	// program, and fills out with the sampled token of every logits row, the logits
	// of the rows that asked, and the program's extra outputs (the DSpark draft's).
	// A failed step leaves the states of its sequences unusable.
	Step(in *StepIn, out *StepOut) error
	// Close releases everything the runtime holds.
	Close() error
}

// State is one sequence's state, owned by the runtime that made it.
type State interface {
	// Release frees the state's memory; the state must not be used again.
	Release()
}

// SavableState is a State that can be rolled back (speculative decoding): Save records
// its content, and the returned function puts it back — every row a later step wrote
// undone, whatever kind of state it wrote (rings, compressor groups, compressed
// entries, index keys, Engram history, DSpark rings). The restore function may be
// called more than once; when it fails the state is unusable.
type SavableState interface {
	State
	Save() (restore func() error, err error)
	// Digest hashes the state's logical content: equal digests, equal values bit for bit.
	Digest() [32]byte
}

// Profiler is a runtime that can time its instructions, for benchmarks.
type Profiler interface {
	// SetProfile turns per-instruction timing on or off; on a device it adds an event
	// between instructions, so steps timed as a whole should run with it off.
	SetProfile(on bool)
	// TakeProfile returns the time each kernel (the plan's kernel name of an
	// instruction) took since the last call, summed over its instructions and steps (a
	// device's event times), and how many steps that covers, and starts again.
	TakeProfile() (map[string]time.Duration, int)
}

// LaunchProfiler is a Profiler that also times each kernel launch of the profiled
// steps (an instruction may launch several kernels).
type LaunchProfiler interface {
	// TakeLaunchProfile returns the time of each (kernel class, launched kernel) pair
	// since the last call, keyed "class: kernel", over the same steps as TakeProfile,
	// and starts again. Call it before TakeProfile.
	TakeLaunchProfile() map[string]time.Duration
	// TakeLaunchCounts returns how many launches of each pair the same steps made, keyed
	// as TakeLaunchProfile, and starts again. Call it with TakeLaunchProfile.
	TakeLaunchCounts() map[string]int
}

// ExpertCensus is a runtime that counts, on the decode steps it runs with the census
// on, how many distinct routed experts each moe_experts instruction's slots went to:
// the experts whose weights the step reads, against a byte count's expectation for
// independent tokens. A device runtime reads each such instruction's expert ids back
// after it runs (a synchronization a layer), so steps timed as a whole run with the
// census off.
type ExpertCensus interface {
	SetExpertCensus(on bool)
	// TakeExpertCensus returns, per moe_experts instruction of the decode program (by
	// its index in the program), its tally over the census steps, and how many steps
	// that covers; and starts again.
	TakeExpertCensus() (map[int]ExpertTally, int)
}

// ExpertTally is one instruction's census.
type ExpertTally struct {
	Distinct int64 // distinct experts its slots went to, summed over the steps
	MaxSlots int64 // the most slots one expert had in one step
}

// add adds one step's ids (each slot's expert; ids outside [0, E) are not counted) to
// the tally; count is scratch of at least E entries, left zero.
func (t *ExpertTally) add(ids []int32, E int, count []int32) {
	for _, id := range ids {
		if id >= 0 && int(id) < E {
			if count[id] == 0 {
				t.Distinct++
			}
			count[id]++
			t.MaxSlots = max(t.MaxSlots, int64(count[id]))
		}
	}
	for _, id := range ids {
		if id >= 0 && int(id) < E {
			count[id] = 0
		}
	}
}

// Census is the state an ExpertCensus runtime keeps (the cpu and cuda targets'):
// whether it is on, and the tallies since the last Take.
type Census struct {
	On     bool
	tally  map[int]ExpertTally
	steps  int
	counts []int32
}

// Step counts one more census step.
func (c *Census) Step() { c.steps++ }

// Add adds the ids of instruction i (each slot's expert among E) to its tally.
func (c *Census) Add(i int, ids []int32, E int) {
	if len(c.counts) < E {
		c.counts = make([]int32, E)
	}
	if c.tally == nil {
		c.tally = map[int]ExpertTally{}
	}
	t := c.tally[i]
	t.add(ids, E, c.counts)
	c.tally[i] = t
}

// Take returns the tallies and the steps they cover, and starts again.
func (c *Census) Take() (map[int]ExpertTally, int) {
	d, n := c.tally, c.steps
	c.tally, c.steps = nil, 0
	return d, n
}

// DeviceBench is a device runtime's measurements of its own machine.
type DeviceBench interface {
	// CopyBandwidth copies a buffer of the given bytes device to device reps times and
	// returns the median rate, counting bytes read plus bytes written.
	CopyBandwidth(bytes int64, reps int) (float64, error)
	// CopyState makes dst's content a copy of src's (two states of this runtime).
	CopyState(dst, src State) error
}

// Ranked is a runtime that runs a plan's expert-parallel ranks (the cpu target's
// in-process ranks): how many, what each holds in weights, and what the collectives
// moved so far, by op.
type Ranked interface {
	Ranks() int
	RankWeightBytes() []int64
	CommStats() map[string]CommBytes
}

// CommBytes is what one collective op moved, summed over its calls.
type CommBytes struct {
	Calls                 int64 // calls (each on every rank)
	Remote, Local, Header int64 // payload to other ranks, payload a rank kept, pair descriptors
}

// StepIn is one step's batch, laid out as the arrays a device uploads: sequences advance
// by their tokens, packed row-wise in Seqs order; logits rows are named by their token
// row.
type StepIn struct {
	Phase  string
	Seqs   []SeqIn
	Tokens []int32 // the step's tokens, packed: Seqs[i]'s are the next Seqs[i].N
	// Rows are the token rows whose logits are computed and sampled from, in order.
	Rows []int32
	// Sample is, per logits row, (temperature, top-p, top-k, uniform draw).
	Sample []float32
	// Masks is nil when no row is constrained, else one entry per row: nil, or the
	// row's grammar mask (⌈V/64⌉ words, bit i%64 of word i/64 set for allowed ids).
	Masks [][]uint64
	// Want is nil when no row's logits are read back, else one flag per row.
	Want []bool
}

// SeqIn is one sequence's part of a step.
type SeqIn struct {
	State State
	N     int // tokens this step
	Pos   int // position of the sequence's first token this step
	// Decode marks generated tokens (a decode step's one token, or a speculative
	// verify group): each row is computed as a one-row decode step would compute it,
	// whatever the number of rows — the summation orders of one row and the decode
	// path's semantics (V4.1's published index keys). Without it a one-row step after
	// position 0 is a decode row and a longer one a prefill chunk.
	Decode bool
}

// StepOut is what a step returns.
type StepOut struct {
	Tokens []int32     // the sampled token of each logits row
	Logits [][]float32 // per logits row, its logits when StepIn.Want asked (else nil)
	// The DSpark draft program's outputs, one per token row: the greedy draft token
	// and its confidence.
	Drafts      []int32
	Confidences []float32
}

// Weight is one manifest tensor in its checkpoint storage format.
type Weight struct {
	Name    string
	Storage string // plan.Weight.Storage: "f32", "bf16", "i32", "fp8_b32_ue8m0", "fp8_g32_ue8m0", "fp8_b128_ue8m0", "fp4_g32_ue8m0"
	Shape   []int
	// Host values, for f32 and i32 storage (and weights widened at load: V4's FP8
	// checkpoints, seeded and derived weights).
	F32 []float32
	I32 []int32
	// Packed values for the other formats: bf16 (2 bytes a value), FP8 e4m3 codes (1)
	// or FP4 e2m1 codes (two a byte, the even element low); Scales are UE8M0 bytes, one
	// per 32×32 block (fp8_b32), per 32 values of a row (fp8_g32, fp4_g32), per 128×128
	// block (fp8_b128).
	Codes, Scales []byte
}

// Elems is the value count.
func (w *Weight) Elems() int {
	n := 1
	for _, d := range w.Shape {
		n *= d
	}
	return n
}

// Bytes is what the weight occupies in its storage format.
func (w *Weight) Bytes() int {
	return 4*len(w.F32) + 4*len(w.I32) + len(w.Codes) + len(w.Scales)
}

// Packed reports whether the values are held in a packed format (Codes).
func (w *Weight) Packed() bool { return w.Codes != nil }

// Check verifies that the weight's values fill its shape in its storage format.
func (w *Weight) Check() error {
	n := w.Elems()
	want := func(what string, have, need int) error {
		if have != need {
			return fmt.Errorf("weight %q (%s %v): %d %s, want %d", w.Name, w.Storage, w.Shape, have, what, need)
		}
		return nil
	}
	switch {
	case w.F32 != nil:
		return want("values", len(w.F32), n)
	case w.I32 != nil:
		return want("values", len(w.I32), n)
	case w.Storage == "bf16":
		return want("bf16 bytes", len(w.Codes), 2*n)
	case w.Storage == "fp4_g32_ue8m0", w.Storage == "fp8_b32_ue8m0", w.Storage == "fp8_g32_ue8m0", w.Storage == "fp8_b128_ue8m0":
		if len(w.Shape) != 2 {
			return fmt.Errorf("weight %q: %s needs a matrix, not %v", w.Name, w.Storage, w.Shape)
		}
		rows, cols := w.Shape[0], w.Shape[1]
		codes, scales := n, rows*((cols+31)/32)
		switch w.Storage {
		case "fp4_g32_ue8m0":
			codes = (n + 1) / 2
		case "fp8_b32_ue8m0":
			scales = ((rows + 31) / 32) * ((cols + 31) / 32)
		case "fp8_b128_ue8m0":
			scales = ((rows + 127) / 128) * ((cols + 127) / 128)
		}
		if err := want("code bytes", len(w.Codes), codes); err != nil {
			return err
		}
		return want("scale bytes", len(w.Scales), scales)
	}
	return fmt.Errorf("weight %q: no values for storage %q", w.Name, w.Storage)
}

// Float32 widens the weight to float32 values (the cpu target's view of it).
func (w *Weight) Float32() ([]float32, error) {
	if err := w.Check(); err != nil {
		return nil, err
	}
	n := w.Elems()
	switch {
	case w.F32 != nil:
		return w.F32, nil
	case w.I32 != nil:
		return nil, fmt.Errorf("weight %q is integer", w.Name)
	case w.Storage == "bf16":
		out := make([]float32, n)
		for i := range out {
			out[i] = safetensors.BF16ToFloat32(uint16(w.Codes[2*i]) | uint16(w.Codes[2*i+1])<<8)
		}
		return out, nil
	case w.Storage == "fp4_g32_ue8m0":
		return quant.DequantFP4(w.Codes, w.Scales, w.Shape[0], w.Shape[1], 32)
	case w.Storage == "fp8_b32_ue8m0" || w.Storage == "fp8_g32_ue8m0" || w.Storage == "fp8_b128_ue8m0":
		rows, cols := w.Shape[0], w.Shape[1]
		sc := (cols + 31) / 32
		out := make([]float32, n)
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				si := r*sc + c/32
				switch w.Storage {
				case "fp8_b32_ue8m0":
					si = r/32*sc + c/32
				case "fp8_b128_ue8m0":
					si = r/128*((cols+127)/128) + c/128
				}
				out[r*cols+c] = quant.DecodeE4M3(w.Codes[r*cols+c]) * quant.DecodeUE8M0(w.Scales[si])
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("weight %q: no values for storage %q", w.Name, w.Storage)
}

// Pipelined is a runtime that takes a step before the previous step's tokens are back:
// the async scheduler enqueues step n+1 while the device runs step n, and step n+1 reads
// step n's sampled tokens where they are (FromPrevious), so only the tokens come back to
// the host, after the device has moved on.
type Pipelined interface {
	// Enqueue starts a step and returns without waiting for it to run. in is read before
	// Enqueue returns (the caller may reuse it). A token equal to FromPrevious(j) stands
	// for the token sampled for logits row j of the step enqueued just before this one.
	// Pending steps are waited for in the order they were enqueued, and at most two are
	// pending at once; a step enqueued after a failed one fails too.
	Enqueue(in *StepIn) (Pending, error)
}

// Pending is a step that was enqueued and not yet waited for.
type Pending interface {
	// Wait blocks until the step has run and fills out as Step would have.
	Wait(out *StepOut) error
}

// FromPrevious is the input token that stands for the token sampled for logits row j of
// the previous step (Pipelined.Enqueue).
func FromPrevious(j int) int32 { return -1 - int32(j) }

// PreviousRow is the logits row a FromPrevious token names, and whether t is one.
func PreviousRow(t int32) (int, bool) {
	if t >= 0 {
		return 0, false
	}
	return int(-1 - t), true
}

// Pipeline is rt's own Pipelined, or, for a runtime without a device queue (the cpu
// target), one that runs each step inside Enqueue, substituting the previous step's
// sampled tokens on the host: the same values, without the overlap.
func Pipeline(rt Runtime) Pipelined {
	if p, ok := rt.(Pipelined); ok {
		return p
	}
	return &hostPipeline{rt: rt}
}

type hostPipeline struct {
	rt      Runtime
	prev    []int32 // the last step's sampled tokens
	failed  error
	pending int
	in      StepIn
}

type hostPending struct {
	p   *hostPipeline
	out StepOut
	err error
}

func (p *hostPipeline) Enqueue(in *StepIn) (Pending, error) {
	if p.pending >= 2 {
		return nil, fmt.Errorf("enqueue: two steps are already pending")
	}
	if p.failed != nil {
		return nil, fmt.Errorf("enqueue after a failed step: %w", p.failed)
	}
	cp := p.in
	cp.Phase, cp.Seqs, cp.Rows, cp.Sample, cp.Masks, cp.Want = in.Phase, in.Seqs, in.Rows, in.Sample, in.Masks, in.Want
	cp.Tokens = append(cp.Tokens[:0], in.Tokens...)
	for i, t := range cp.Tokens {
		if j, ok := PreviousRow(t); ok {
			if j >= len(p.prev) {
				return nil, fmt.Errorf("token %d stands for row %d of the previous step, which sampled %d", i, j, len(p.prev))
			}
			cp.Tokens[i] = p.prev[j]
		}
	}
	p.in.Tokens = cp.Tokens
	h := &hostPending{p: p}
	if h.err = p.rt.Step(&cp, &h.out); h.err != nil {
		p.failed = h.err
	}
	p.prev = append(p.prev[:0], h.out.Tokens...)
	p.pending++
	return h, nil
}

func (h *hostPending) Wait(out *StepOut) error {
	if h.p == nil {
		return fmt.Errorf("wait: this step was already waited for")
	}
	h.p.pending--
	h.p = nil
	if h.err != nil {
		return h.err
	}
	*out = h.out
	return nil
}

// Timeline is a device runtime that records when its steps ran on the device, for a
// trace: the device's idle gaps between steps come from it.
type Timeline interface {
	// SetTimeline turns recording on or off: an event before and after every step,
	// and with kernels also around every kernel launch (which times each kernel and
	// therefore runs steps without their captured graphs).
	SetTimeline(on, kernels bool)
	// TakeTimeline returns the spans recorded since the last call, oldest first, and
	// starts again.
	TakeTimeline() ([]DeviceSpan, error)
}

// DeviceSpan is one stretch of device time: a whole step (Kernel "") or one kernel
// launch within it, on the host's clock (device events mapped through an anchor event
// recorded when the runtime opened or recording began).
type DeviceSpan struct {
	Step       int64  // the runtime's step counter
	Phase      string // the step's program
	Class      string // the plan's kernel class of the launching instruction ("" for a step)
	Kernel     string // the launched kernel ("" for a whole step)
	Start, End time.Time
}
