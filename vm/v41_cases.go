package vm

import (
	"fmt"
	"sort"
	"strings"

	"deepinfer/safetensors"
)

// RunCasesV41 runs the cases of a DeepSeek-V4.1 fixture (testdata/tiny-v41-dev) one
// sequence at a time, as the reference produced them, and returns every output under
// the fixture's keys:
//
//	prefill_N                 [1,V]   last-position logits after prefilling input_ids
//	NAME (split S)            [n+1,V] after prefilling input_ids[:S], then after each
//	                                  teacher-forced token input_ids[S+i-1]
//	NAME_argmax_tokens        I64     the model's argmax after each of those rows
//	NAME_draft_logits         [n,B,V] DSpark's logits after each decode step (anchor = argmax)
//	NAME_draft_confidence     [n,B]   its confidences (raw logits)
//	NAME_draft_tokens         I64 [n,B+1] the anchor and the drafts
//	greedy_logits             [G,V]   greedy decoding, G = len(generated) rows
//	greedy_generated          I64     the greedy tokens
//	greedy_draft_*            as above, after each of the G-1 decode steps
//	engram_token_map          I64 [V] the Engram compressed id of every token
func RunCasesV41(m *Machine, c *Cases) (map[string]safetensors.Tensor, error) {
	res := map[string]safetensors.Tensor{}
	V := m.Plan.Model.Vocab
	if tm := m.tokenMap; tm != nil {
		ids := make([]int64, len(tm))
		for i, v := range tm {
			ids[i] = int64(v)
		}
		res["engram_token_map"] = safetensors.I64Tensor("engram_token_map", []int64{int64(len(ids))}, ids)
	}
	names := make([]string, 0, len(c.Cases))
	for n := range c.Cases {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		cs := c.Cases[name]
		var err error
		switch {
		case cs.Split != nil:
			err = runDecodeCase(m, name, cs.InputIDs[:*cs.Split], cs.InputIDs[*cs.Split:], false, res)
		case cs.Generated != nil || strings.HasPrefix(name, "greedy"):
			steps := cs.MaxNewTokens
			if steps == 0 {
				steps = len(cs.Generated)
			}
			if steps == 0 {
				steps = 24
			}
			err = runDecodeCase(m, name, cs.InputIDs, make([]int32, steps-1), true, res)
		default:
			var seq *Sequence
			var out []Output
			if seq, err = m.NewSequence(); err == nil {
				out, err = m.Forward([]Chunk{{Seq: seq, Tokens: cs.InputIDs, WantLogits: true}})
				seq.Release()
			}
			if err == nil {
				res[name] = safetensors.F32Tensor(name, []int64{1, int64(V)}, out[0].Logits[0])
			}
		}
		if err != nil {
			return nil, fmt.Errorf("case %s: %w", name, err)
		}
	}
	return res, nil
}

// runDecodeCase prefills prompt, then runs one decode step per entry of next (the
// teacher token, or with greedy the previous step's argmax), drafting after each.
func runDecodeCase(m *Machine, name string, prompt, next []int32, greedy bool, res map[string]safetensors.Tensor) error {
	V := int64(m.Plan.Model.Vocab)
	seq, err := m.NewSequence()
	if err != nil {
		return err
	}
	defer seq.Release()
	out, err := m.Forward([]Chunk{{Seq: seq, Tokens: prompt, WantLogits: true}})
	if err != nil {
		return err
	}
	logits := append([]float32(nil), out[0].Logits[0]...)
	argmax := []int64{int64(out[0].Token)}
	var draftLogits, draftConf []float32
	var draftToks []int64
	B := 0
	for _, teacher := range next {
		tok := teacher
		if greedy {
			tok = int32(argmax[len(argmax)-1])
		}
		out, err = m.Forward([]Chunk{{Seq: seq, Tokens: []int32{tok}, WantLogits: true}})
		if err != nil {
			return err
		}
		logits = append(logits, out[0].Logits[0]...)
		argmax = append(argmax, int64(out[0].Token))
		if !m.CanDraft() {
			continue
		}
		d, err := m.Draft([]*Sequence{seq}, []int32{out[0].Token})
		if err != nil {
			return err
		}
		B = len(d[0].Confidence)
		for _, row := range d[0].Logits {
			draftLogits = append(draftLogits, row...)
		}
		draftConf = append(draftConf, d[0].Confidence...)
		for _, t := range d[0].Tokens {
			draftToks = append(draftToks, int64(t))
		}
	}
	rows := int64(len(argmax))
	key, tokKey := name, name+"_argmax_tokens"
	if greedy {
		key, tokKey = name+"_logits", name+"_generated"
	}
	res[key] = safetensors.F32Tensor(key, []int64{rows, V}, logits)
	res[tokKey] = safetensors.I64Tensor(tokKey, []int64{rows}, argmax)
	if B > 0 {
		n := int64(len(next))
		res[name+"_draft_logits"] = safetensors.F32Tensor(name+"_draft_logits", []int64{n, int64(B), V}, draftLogits)
		res[name+"_draft_confidence"] = safetensors.F32Tensor(name+"_draft_confidence", []int64{n, int64(B)}, draftConf)
		res[name+"_draft_tokens"] = safetensors.I64Tensor(name+"_draft_tokens", []int64{n, int64(B + 1)}, draftToks)
	}
	return nil
}
