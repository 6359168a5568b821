package vm

import (
	"fmt"

	"deepinfer/plan"
	"deepinfer/targets"
)

// Draft is one DSpark proposal: Tokens[0] is the anchor, Tokens[1:] the drafts, each
// with its logits row (V floats, the Markov bias included) and confidence (a raw logit;
// σ of it is the probability the draft survives).
type Draft struct {
	Tokens     []int32
	Logits     [][]float32
	Confidence []float32
}

// CanDraft reports whether the plan has a DSpark drafter.
func (m *Machine) CanDraft() bool {
	return m.rt.HasPhase(plan.PhaseDraft) && m.Plan.Model.DSpark != nil
}

// Draft runs the DSpark drafter for each sequence after a decode step, as the V4.1
// reference's forward_spec does: the block is the anchor (the token just sampled for
// the sequence's next position) followed by noise tokens, at the positions after the
// sequence's last token; the stages attend to their window rings, which the prefill
// and decode steps wrote. It does not change the sequences.
func (m *Machine) Draft(seqs []*Sequence, anchors []int32) ([]Draft, error) {
	want := make([]bool, len(seqs))
	for i := range want {
		want[i] = true
	}
	return m.DraftWant(seqs, anchors, want)
}

// DraftWant is Draft with the drafts' logits rows read back only for the sequences whose
// want is set (a sampled request draws its drafts from them; a greedy one takes the
// drafter's argmax tokens, which the step returns anyway): a Draft without them has nil
// Logits. A logits row is V floats — at batch 256, DSpark's block of 5 and V4.1's
// vocabulary, 660 MB a step from a GPU when every row comes back.
func (m *Machine) DraftWant(seqs []*Sequence, anchors []int32, want []bool) ([]Draft, error) {
	ds := m.Plan.Model.DSpark
	if !m.rt.HasPhase(plan.PhaseDraft) || ds == nil {
		return nil, fmt.Errorf("plan %s has no DSpark draft program", m.Plan.ModelType)
	}
	if len(seqs) != len(anchors) || len(seqs) != len(want) {
		return nil, fmt.Errorf("%d sequences, %d anchors, %d logits flags", len(seqs), len(anchors), len(want))
	}
	V, B := m.Plan.Model.Vocab, ds.Block
	in := &targets.StepIn{Phase: plan.PhaseDraft}
	anyWant := false
	for _, w := range want {
		anyWant = anyWant || w
	}
	for i, s := range seqs {
		if s.broken != nil {
			return nil, fmt.Errorf("sequence %d is unusable after an earlier failure: %w", i, s.broken)
		}
		if s.Len() == 0 {
			return nil, fmt.Errorf("sequence %d has no decoded token to draft after", i)
		}
		if anchors[i] < 0 || int(anchors[i]) >= V {
			return nil, fmt.Errorf("anchor %d is outside the vocabulary", anchors[i])
		}
		if s.Len()+B > m.maxPos {
			return nil, fmt.Errorf("sequence %d: a draft block would pass the %d positions the machine holds", i, m.maxPos)
		}
		for j := 0; j < B; j++ {
			tok := int32(ds.Noise)
			if j == 0 {
				tok = anchors[i]
			}
			in.Tokens = append(in.Tokens, tok)
			in.Rows = append(in.Rows, int32(i*B+j))
			in.Sample = append(in.Sample, 0, 0, 0, 0)
			if anyWant {
				in.Want = append(in.Want, want[i])
			}
		}
		in.Seqs = append(in.Seqs, targets.SeqIn{State: s.state, N: B, Pos: s.Len()})
	}
	var out targets.StepOut
	if err := m.rt.Step(in, &out); err != nil {
		return nil, err
	}
	T := len(seqs) * B
	if len(out.Drafts) != T || len(out.Confidences) != T || (anyWant && len(out.Logits) != T) {
		return nil, fmt.Errorf("draft step returned %d drafts, %d confidences and %d logits rows for %d rows", len(out.Drafts), len(out.Confidences), len(out.Logits), T)
	}
	res := make([]Draft, len(seqs))
	for i := range seqs {
		res[i] = Draft{Tokens: append([]int32{anchors[i]}, out.Drafts[i*B:(i+1)*B]...),
			Confidence: append([]float32(nil), out.Confidences[i*B:(i+1)*B]...)}
		if want[i] {
			res[i].Logits = out.Logits[i*B : (i+1)*B]
			for j, row := range res[i].Logits {
				if len(row) != V {
					return nil, fmt.Errorf("draft step returned a logits row of %d values for sequence %d, row %d; want %d", len(row), i, j, V)
				}
			}
		}
	}
	return res, nil
}
