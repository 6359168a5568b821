package vm

import (
	"fmt"

	"deepinfer/targets"
)

// phaseDraft is DeepSeek-V4.1's DSpark draft program (compiler.PhaseDraft).
const phaseDraft = "draft"

// kept is the symbolic dim K of a step: each chunk's rows, at most keep of them when
// the program replays only a tail (SWA bounded replay).
func (pr *program) kept(chunks []Chunk) int {
	k := 0
	for _, c := range chunks {
		if pr.keep > 0 {
			k += min(len(c.Tokens), pr.keep)
		} else {
			k += len(c.Tokens)
		}
	}
	return k
}

// Draft is one DSpark proposal: Tokens[0] is the anchor, Tokens[1:] the drafts, each
// with its logits row (V floats, the Markov bias included) and confidence (a raw logit;
// σ of it is the probability the draft survives).
type Draft struct {
	Tokens     []int32
	Logits     [][]float32
	Confidence []float32
}

// CanDraft reports whether the plan has a DSpark drafter.
func (m *Machine) CanDraft() bool { return m.progs[phaseDraft] != nil && m.Plan.Model.DSpark != nil }

// Draft runs the DSpark drafter for each sequence after a decode step, as the V4.1
// reference's forward_spec does: the block is the anchor (the token just sampled for
// the sequence's next position) followed by noise tokens, at the positions after the
// sequence's last token; the stages attend to their window rings, which the prefill
// and decode steps wrote. It does not change the sequences.
func (m *Machine) Draft(seqs []*Sequence, anchors []int32) ([]Draft, error) {
	pr := m.progs[phaseDraft]
	ds := m.Plan.Model.DSpark
	if pr == nil || ds == nil {
		return nil, fmt.Errorf("plan %s has no DSpark draft program", m.Plan.ModelType)
	}
	if len(seqs) != len(anchors) {
		return nil, fmt.Errorf("%d sequences, %d anchors", len(seqs), len(anchors))
	}
	V, B := m.Plan.Model.Vocab, ds.Block
	st := &targets.Step{}
	T := len(seqs) * B
	st.T, st.R = T, T
	rows := make([]int32, T)
	params := make([]float32, 4*T)
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
		if s.Len()+B > m.Plan.Model.MaxPositions {
			return nil, fmt.Errorf("sequence %d: a draft block would pass the model's %d positions", i, m.Plan.Model.MaxPositions)
		}
		st.Seqs = append(st.Seqs, targets.Seq{Row: i * B, N: B, Pos: s.Len(), State: s.state})
		for j := 0; j < B; j++ {
			tok := int32(ds.Noise)
			if j == 0 {
				tok = anchors[i]
			}
			st.Tokens = append(st.Tokens, tok)
			st.Positions = append(st.Positions, int32(s.Len()+j))
			rows[i*B+j] = int32(i*B + j)
		}
	}
	pr.params[pr.tokens] = targets.Tensor{I32: st.Tokens, Shape: []int{T}}
	pr.params[pr.pos] = targets.Tensor{I32: st.Positions, Shape: []int{T}}
	pr.params[pr.rows] = targets.Tensor{I32: rows, Shape: []int{T}}
	pr.params[pr.sample] = targets.Tensor{F32: params, Shape: []int{T, 4}}
	pr.bind(T, T, T)
	if err := m.run(pr, st); err != nil {
		return nil, err
	}
	if len(pr.p.Returns) != 3 {
		return nil, fmt.Errorf("draft program returns %d values, want logits, drafts and confidences", len(pr.p.Returns))
	}
	logits := pr.slotF32[pr.p.Returns[0].Index][:T*V]
	ids := pr.slotI32[pr.p.Returns[1].Index][:T]
	conf := pr.slotF32[pr.p.Returns[2].Index][:T]
	out := make([]Draft, len(seqs))
	for i := range seqs {
		d := Draft{Tokens: append([]int32{anchors[i]}, ids[i*B:(i+1)*B]...), Confidence: append([]float32(nil), conf[i*B:(i+1)*B]...)}
		for j := 0; j < B; j++ {
			r := i*B + j
			d.Logits = append(d.Logits, append([]float32(nil), logits[r*V:(r+1)*V]...))
		}
		out[i] = d
	}
	return out, nil
}
