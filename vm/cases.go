package vm

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"deepinfer/safetensors"
)

// Cases is a reference-case file in the fixture format (testdata/tiny-v4-dev/cases.json):
//
//	prefill_N        logits of every row of one pass over input_ids
//	incremental_L_S  row 0: last logits after prefilling input_ids[:S]; row i: after then
//	                 feeding input_ids[S+i-1]; NAME_full: the same positions from one pass
//	greedy           greedy continuation of input_ids (len(generated) tokens, default 24)
type Cases struct {
	Cases map[string]Case `json:"cases"`
}

// Case is one entry.
type Case struct {
	InputIDs     []int32 `json:"input_ids"`
	Split        *int    `json:"split"`
	Generated    []int32 `json:"generated"`
	MaxNewTokens int     `json:"max_new_tokens"`
	// V4.1 fixture (testdata/tiny-v41-dev): the reference's argmax after each row, its
	// DSpark drafts (anchor first) after each decode step, and a prefill's next token.
	NextToken    *int32    `json:"next_token"`
	ArgmaxTokens []int32   `json:"argmax_tokens"`
	DraftTokens  [][]int32 `json:"draft_tokens"`
}

// ReadCases parses a cases file.
func ReadCases(path string) (*Cases, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c Cases
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(c.Cases) == 0 {
		return nil, fmt.Errorf("%s: no cases", path)
	}
	for name, cs := range c.Cases {
		if len(cs.InputIDs) == 0 {
			return nil, fmt.Errorf("%s: case %s: empty input_ids", path, name)
		}
		if cs.Split != nil && (*cs.Split < 1 || *cs.Split > len(cs.InputIDs)) {
			return nil, fmt.Errorf("%s: case %s: split %d is outside [1, %d]", path, name, *cs.Split, len(cs.InputIDs))
		}
	}
	return &c, nil
}

// caseOutput maps a request to the output key it fills, and which rows it keeps.
type caseOutput struct {
	key      string
	from     int // first logits row kept
	greedy   bool
	maxSteps int
}

// Requests turns the cases into engine requests (sorted by case name), with the output
// key each one fills. stagger > 0 makes request i arrive at step i·stagger, so the
// batch changes while it runs.
func (c *Cases) Requests(eos int32, stagger int) ([]Request, []caseOutput) {
	names := make([]string, 0, len(c.Cases))
	for n := range c.Cases {
		names = append(names, n)
	}
	sort.Strings(names)
	var reqs []Request
	var outs []caseOutput
	add := func(r Request, o caseOutput) {
		r.Arrival = len(reqs) * stagger
		r.ID = o.key
		reqs = append(reqs, r)
		outs = append(outs, o)
	}
	for _, n := range names {
		cs := c.Cases[n]
		ids := cs.InputIDs
		switch {
		case cs.Split != nil:
			s := *cs.Split
			add(Request{Prompt: ids[:s], Forced: ids[s:], KeepLogits: true}, caseOutput{key: n})
			add(Request{Prompt: ids, Forced: []int32{}, PromptLogits: true}, caseOutput{key: n + "_full", from: s - 1})
		case cs.Generated != nil || strings.HasPrefix(n, "greedy"):
			steps := cs.MaxNewTokens
			if steps == 0 {
				steps = len(cs.Generated)
			}
			if steps == 0 {
				steps = 24
			}
			add(Request{Prompt: ids, MaxTokens: steps, Stop: []int32{eos}}, caseOutput{key: n, greedy: true})
		default:
			add(Request{Prompt: ids, Forced: []int32{}, PromptLogits: true}, caseOutput{key: n})
		}
	}
	return reqs, outs
}

// RunCases runs every case through the engine as one continuous batch and returns the
// output tensors under the fixture's keys: logits as F32 [rows, V], greedy ids as I64.
func RunCases(e *Engine, c *Cases, stagger int) (map[string]safetensors.Tensor, error) {
	if e.M.CanDraft() {
		return RunCasesV41(e.M, c) // v41_cases.go
	}
	return RunCasesBatched(e, c, stagger)
}

// RunCasesBatched is RunCases through the engine whatever the model: a DSpark model's
// cases run as plain requests (no drafts), so that batching can be checked on it too.
func RunCasesBatched(e *Engine, c *Cases, stagger int) (map[string]safetensors.Tensor, error) {
	reqs, outs := c.Requests(int32(e.M.Plan.Model.EOS), stagger)
	V := e.M.Plan.Model.Vocab
	res := map[string]safetensors.Tensor{}
	var firstErr error
	e.Run(reqs, func(r Result) {
		if r.Err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("case %s: %w", r.ID, r.Err)
			}
			return
		}
		o := outs[r.Index]
		if o.greedy {
			ids := make([]int64, len(r.Tokens))
			for i, t := range r.Tokens {
				ids[i] = int64(t)
			}
			res[o.key] = safetensors.I64Tensor(o.key, []int64{int64(len(ids))}, ids)
			return
		}
		rows := r.Logits[o.from:]
		flat := make([]float32, 0, len(rows)*V)
		for _, row := range rows {
			flat = append(flat, row...)
		}
		res[o.key] = safetensors.F32Tensor(o.key, []int64{int64(len(rows)), int64(V)}, flat)
	})
	return res, firstErr
}
