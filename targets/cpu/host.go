package cpu

import "deepinfer/targets/cpu/kvstate"

// The cpu target's kernel interface: Go functions over host slices. A kernel is
// prepared once per instruction of a plan (its types and attributes checked then) and
// run every step over the arena slices its operands occupy for that step.

// Tensor is a kernel operand: one of F32 or I32 is set, with its concrete shape.
type Tensor struct {
	F32   []float32
	I32   []int32
	Shape []int
}

// Rows is the leading dim; Cols the product of the rest.
func (t *Tensor) Rows() int { return t.Shape[0] }

// Cols is the product of all but the leading dim.
func (t *Tensor) Cols() int {
	n := 1
	for _, d := range t.Shape[1:] {
		n *= d
	}
	return n
}

// Seq is one sequence's slice of a step.
type Seq struct {
	Row   int // first row of the step that belongs to it
	N     int // number of its rows (new tokens)
	Pos   int // position of its first new token
	State *kvstate.Seq
	// Decode: every row is a decode row (targets.SeqIn.Decode); RowOrders: every row
	// is summed in a one-row step's order (Decode, or batch-invariant mode);
	// Invariant: batch-invariant mode, where a prompt from position 0 in one step is
	// computed as the same prompt in chunks would be.
	Decode, RowOrders, Invariant bool
}

// Step is the batch a program runs on: all sequences' new tokens packed row-wise.
type Step struct {
	T, R      int
	Seqs      []Seq
	Tokens    []int32
	Positions []int32
}

// Kernel is one prepared kernel call.
type Kernel interface {
	Run(s *Step, args, results []Tensor) error
}
