// Package plan is the compiled artifact that dic writes and divm runs: a versioned,
// checksummed msgpack file holding everything the VM needs except weight bytes.
//
// A plan names its model (type, config hash, per-layer structure), where its weights
// come from (a checkpoint directory, or a seed for the embedded default), the weight
// manifest by checkpoint name, the per-sequence KV layout, and one kernel-call program
// per phase. Instructions are "call kernel K on these buffers": operands are weights,
// program parameters, or arena slots whose sizes the compiler's memory plan fixed.
// encode.go documents the byte layout; decode.go validates all of it.
package plan

import (
	"fmt"

	"deepinfer/ir"
	"deepinfer/kvlayout"
)

// Magic starts every plan file.
const Magic = "DIPLAN\r\n"

// Version is the format version this build writes and reads.
// Version is the plan format version: 2 added V4.1 layer roles, DSpark, vision, KV
// ring/cache formats and the Engram context; 3 the V4.1 numerics attributes (a float32
// router, float32 RoPE angles, oneDNN-ordered bf16 matmuls, swa_replay keeps on them),
// so that a plan compiled before them is refused rather than run with older numerics.
const Version uint32 = 3

// Plan is a decoded plan.
type Plan struct {
	ModelType  string
	ConfigHash string
	Target     string
	Compiler   string
	Model      Model
	Source     WeightSource
	Weights    []Weight
	KV         kvlayout.Layout
	Programs   []Program
	Deployment *Deployment
}

// Model summarizes the model's structure for the VM and for inspection.
type Model struct {
	Vocab        int
	Hidden       int
	BOS, EOS     int
	MaxPositions int
	MTPLayers    int
	// Layers are the backbone's, then (V4.1) the DSpark stages', which have KV state.
	Layers []Layer
	DSpark *DSpark // V4.1 drafter, nil without one
	Vision *Vision // V4.1 vision tower (shapes only: image inputs are not served), nil without one
}

// DSpark describes V4.1's drafter: Stages draft stages (Model.Layers after the
// backbone), proposing Block tokens per step after the sampled anchor, with Noise as
// the token id of the block's other rows.
type DSpark struct {
	Block, Noise, Stages, MarkovRank int
	Targets                          []int // layers whose input streams the drafter reads
}

// Vision is a vision tower's configuration. It is carried so that inspection can say
// what the checkpoint holds; DeepInfer (Go) does not serve image inputs yet.
type Vision struct {
	Layers, Hidden, Heads, Intermediate, PatchSize, MaxImageTokens int
}

// Layer is one layer's structure, in the names the model's config uses.
type Layer struct {
	Attn  string // e.g. sliding_attention, compressed_sparse_attention, heavily_compressed_attention
	Ratio int    // compress ratio (0: window only)
	MLP   string // e.g. moe, hash_moe
	// V4.1 (MODEL.md §2): Role is window, full (KV source), reuse, reindex or dspark;
	// KVSource the layer whose compressed cache it reads and IndexSource the layer whose
	// top-k it uses (-1: none); Candidate "source" or "restricted" for the two-level
	// indexer; Engram and DSparkTarget mark the layers those features touch.
	Role                  string
	KVSource, IndexSource int
	Candidate             string
	Engram, DSparkTarget  bool
}

// Weight sources.
const (
	SourceCheckpoint = "checkpoint" // safetensors in a model directory given at run time
	SourceSeeded     = "seeded"     // generated from Seed with each weight's Init
)

// WeightSource says where the weights come from.
type WeightSource struct {
	Kind string
	Seed uint64
}

// InitTokenMap marks a derived weight: the Engram compressed id of every token id, which
// divm builds from the model's tokenizer.json instead of reading the checkpoint.
const InitTokenMap = "engram_token_map"

// Init is how a seeded weight is generated (or, InitTokenMap, derived).
type Init struct {
	Kind string  // "normal", "const", "expert_table" (distinct random experts per row), or InitTokenMap
	Mean float64 // normal mean, or the constant
	Std  float64
}

// Weight is one manifest entry: the checkpoint name, the runtime type the program
// expects (a checkpoint may store another dtype that converts to it), and the
// checkpoint's storage format (ir.StorageBytes), "" when it is the runtime type.
type Weight struct {
	Name    string
	DType   ir.DType
	Shape   []int64
	Init    Init
	Storage string
}

// Elems is the element count.
func (w *Weight) Elems() int64 {
	n := int64(1)
	for _, d := range w.Shape {
		n *= d
	}
	return n
}

// Operand kinds.
const (
	OpWeight uint8 = iota
	OpParam
	OpSlot
	OpNone // an ordering edge (ir.State): no buffer
)

// Operand refers to a buffer.
type Operand struct {
	Kind  uint8
	Index int
}

// Param is a program input the VM fills each step.
type Param struct {
	Name string
	Type ir.Type
}

// Instr is one kernel call.
type Instr struct {
	Op          string
	Kernel      string
	Args        []Operand
	ArgTypes    []ir.Type
	Results     []Operand
	ResultTypes []ir.Type
	Attrs       ir.Attrs
}

// Program is one phase.
type Program struct {
	Phase   string
	Params  []Param
	Slots   []ir.Type
	Instrs  []Instr
	Returns []Operand
}

// Deployment is what the planner decided for a deploy spec (absent without one).
type Deployment struct {
	Spec  string // the spec as compiled, canonical JSON
	Roles []Role
}

// Role is one serving role: its parallel layout, its per-rank memory plan and the
// expert placement its ranks share (rank r holds Placement[l][r*slots:(r+1)*slots]).
type Role struct {
	Name                string
	DP, EP, CP, TP      int
	MaxNumSeqs          int
	MaxModelLen         int
	MaxNumBatchedTokens int
	Memory              []MemoryItem
	Placement           []LayerPlacement
	Balancedness        float64
}

// MemoryItem is one line of a rank's memory plan.
type MemoryItem struct {
	Name  string
	Bytes int64
}

// LayerPlacement maps a MoE layer's physical expert slots to logical experts.
type LayerPlacement struct {
	Layer   int
	Phy2Log []int
}

// Mem returns a memory item by name (0 if absent).
func (r *Role) Mem(name string) int64 {
	for _, m := range r.Memory {
		if m.Name == name {
			return m.Bytes
		}
	}
	return 0
}

// The programs' phases. PhaseDraft is DeepSeek-V4.1's DSpark draft step: after a decode
// step, every sequence's block of dspark_block_size rows (the sampled anchor, then noise
// tokens) runs the stages and the head; it returns logits f32[T,V], draft ids i32[T] and
// confidences f32[T], and leaves the sequences' lengths as they were.
const (
	PhasePrefill = "prefill"
	PhaseDecode  = "decode"
	PhaseDraft   = "draft"
)

// ParamIndex is where a program's parameters are among its Params (-1: absent; only
// the grammar mask may be).
type ParamIndex struct{ Tokens, Positions, Rows, Sample, Mask int }

// Layout locates a program's parameters and checks its returns: logits and sampled
// tokens, and for the draft program the confidences too.
func (p *Program) Layout() (ParamIndex, error) {
	ix := ParamIndex{-1, -1, -1, -1, -1}
	for i, pa := range p.Params {
		switch pa.Name {
		case "tokens":
			ix.Tokens = i
		case "positions":
			ix.Positions = i
		case "logit_rows":
			ix.Rows = i
		case "sample_params":
			ix.Sample = i
		case "sample_mask":
			ix.Mask = i
		default:
			return ix, fmt.Errorf("program %s: unknown parameter %q", p.Phase, pa.Name)
		}
	}
	if ix.Tokens < 0 || ix.Positions < 0 || ix.Rows < 0 || ix.Sample < 0 {
		return ix, fmt.Errorf("program %s: needs tokens, positions, logit_rows and sample_params parameters", p.Phase)
	}
	want := 2
	if p.Phase == PhaseDraft {
		want = 3
	}
	if len(p.Returns) != want {
		return ix, fmt.Errorf("program %s: returns %d values, want %d", p.Phase, len(p.Returns), want)
	}
	return ix, nil
}

// Program returns the program of a phase, or nil.
func (p *Plan) Program(phase string) *Program {
	for i := range p.Programs {
		if p.Programs[i].Phase == phase {
			return &p.Programs[i]
		}
	}
	return nil
}
