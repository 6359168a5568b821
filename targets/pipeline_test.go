package targets_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"deepinfer/targets"
)

// echo is a runtime without a device queue: each step samples, for every logits row,
// its input token plus 100, and records the tokens it was given. Step failN fails.
type echo struct {
	seen  [][]int32
	steps int
	failN int
}

func (e *echo) NewState() (targets.State, error) { return nil, nil }
func (e *echo) HasPhase(string) bool             { return true }
func (e *echo) Close() error                     { return nil }
func (e *echo) Step(in *targets.StepIn, out *targets.StepOut) error {
	e.steps++
	e.seen = append(e.seen, slices.Clone(in.Tokens))
	if e.steps == e.failN {
		return errors.New("step failed (injected)")
	}
	out.Tokens = out.Tokens[:0]
	for _, r := range in.Rows {
		out.Tokens = append(out.Tokens, in.Tokens[r]+100)
	}
	return nil
}

func TestFromPrevious(t *testing.T) {
	for j := 0; j < 5; j++ {
		tok := targets.FromPrevious(j)
		if tok >= 0 {
			t.Fatalf("FromPrevious(%d) = %d, not negative", j, tok)
		}
		if r, ok := targets.PreviousRow(tok); !ok || r != j {
			t.Fatalf("PreviousRow(FromPrevious(%d)) = %d, %v", j, r, ok)
		}
	}
	if _, ok := targets.PreviousRow(0); ok {
		t.Fatal("token 0 read as a previous row")
	}
}

func TestHostPipeline(t *testing.T) {
	rt := &echo{}
	p := targets.Pipeline(rt)
	in := &targets.StepIn{Phase: "decode", Tokens: []int32{1, 2, 3}, Rows: []int32{0, 1, 2}}
	a, err := p.Enqueue(in)
	if err != nil {
		t.Fatal(err)
	}
	// the next step reads rows 2 and 0 of the first; the caller's input is not changed
	in2 := &targets.StepIn{Phase: "decode", Tokens: []int32{targets.FromPrevious(2), 7, targets.FromPrevious(0)}, Rows: []int32{0, 1, 2}}
	b, err := p.Enqueue(in2)
	if err != nil {
		t.Fatal(err)
	}
	if in2.Tokens[0] != targets.FromPrevious(2) {
		t.Fatal("Enqueue changed the caller's tokens")
	}
	if _, err := p.Enqueue(in); err == nil || !strings.Contains(err.Error(), "two steps") {
		t.Fatalf("a third pending step: err %v", err)
	}
	var out targets.StepOut
	if err := a.Wait(&out); err != nil || !slices.Equal(out.Tokens, []int32{101, 102, 103}) {
		t.Fatalf("first step: %v, %v", out.Tokens, err)
	}
	if err := a.Wait(&out); err == nil {
		t.Fatal("a step waited for twice")
	}
	if err := b.Wait(&out); err != nil || !slices.Equal(out.Tokens, []int32{203, 107, 201}) {
		t.Fatalf("second step: %v, %v", out.Tokens, err)
	}
	if !slices.Equal(rt.seen[1], []int32{103, 7, 101}) {
		t.Fatalf("the runtime saw %v", rt.seen[1])
	}
	// a row the previous step did not sample
	if _, err := p.Enqueue(&targets.StepIn{Tokens: []int32{targets.FromPrevious(3)}, Rows: []int32{0}}); err == nil || !strings.Contains(err.Error(), "row 3") {
		t.Fatalf("a missing previous row: err %v", err)
	}
}

func TestHostPipelineFailure(t *testing.T) {
	rt := &echo{failN: 2}
	p := targets.Pipeline(rt)
	in := &targets.StepIn{Tokens: []int32{1}, Rows: []int32{0}}
	a, err := p.Enqueue(in)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Enqueue(&targets.StepIn{Tokens: []int32{targets.FromPrevious(0)}, Rows: []int32{0}})
	if err != nil {
		t.Fatal(err)
	}
	var out targets.StepOut
	if err := a.Wait(&out); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(&out); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("the failed step's wait: %v", err)
	}
	if _, err := p.Enqueue(in); err == nil || !strings.Contains(err.Error(), "after a failed step") {
		t.Fatalf("an enqueue after the failure: %v", err)
	}
	if rt.steps != 2 {
		t.Fatalf("the runtime ran %d steps, want 2", rt.steps)
	}
}

// A runtime with its own queue is its own pipeline.
type queued struct{ echo }

func (q *queued) Enqueue(*targets.StepIn) (targets.Pending, error) { return nil, nil }

func TestPipelineOwnQueue(t *testing.T) {
	q := &queued{}
	if p, ok := targets.Pipeline(q).(*queued); !ok || p != q {
		t.Fatal("Pipeline wrapped a runtime that has its own queue")
	}
}
