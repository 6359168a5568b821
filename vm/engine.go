package vm

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"deepinfer/vm/sampling"
)

// Request is one sequence to run.
type Request struct {
	ID        string
	Prompt    []int32
	MaxTokens int      // tokens to generate (ignored when Forced is set)
	Sampling  Sampling // temperature 0: greedy
	Stop      []int32  // token ids that end generation; not included in the output
	// Forced, when set, is fed token by token after the prompt instead of sampling
	// (teacher forcing); the request ends after the last one.
	Forced []int32
	// PromptLogits records the logits of every prompt row; otherwise, with KeepLogits,
	// only the last prompt row's.
	PromptLogits bool
	// KeepLogits records the logits row of every step after the prompt.
	KeepLogits bool
	// Arrival is the first engine step at which the request may start.
	Arrival int
	// Check, when set, sees every generated token after it is appended; returning true
	// ends the request with finish "stop" (a stop string completed, say).
	Check func(tok int32) bool
	// Constraint, when set, restricts every sampled token (a grammar's matcher). Its
	// mask must allow the stop token only where the output may end.
	Constraint Constraint
}

// Constraint restricts the tokens a request may produce.
type Constraint interface {
	// FillMask sets the bits of the ids allowed next (⌈V/64⌉ words).
	FillMask(mask []uint64) error
	// Accept advances past a produced token.
	Accept(tok int32) error
}

// Result is a finished request.
type Result struct {
	Index        int // position in the Run input
	ID           string
	Tokens       []int32 // generated tokens
	Finish       string  // "stop", "length" or "forced"
	PromptTokens int
	Logits       [][]float32
	FirstStep    int
	LastStep     int
	Err          error
}

// Engine runs requests with continuous batching: every step carries one token for each
// decoding sequence plus prompt chunks of waiting sequences, up to a token budget
// (chunked prefill); sequences join when there is room and leave when they finish.
type Engine struct {
	M              *Machine
	MaxBatchTokens int // per step; default 2048
	MaxSeqs        int // running at once; default 64
	// OnStep, when set, is called after every step with the number of tokens it ran.
	OnStep func(step, tokens int)
}

type active struct {
	idx     int
	req     *Request
	seq     *Sequence
	fed     int // prompt tokens fed so far
	pending int32
	forced  int
	random  *rand.Rand
	mask    []uint64
	maskErr error
	vocab   int
	res     Result
	done    bool     // finished in the current step
	next    [1]int32 // the decode step's one token (reused: a chunk is not kept past its step)
}

func (e *Engine) validate(i int, r *Request) error {
	V := e.M.Plan.Model.Vocab
	if len(r.Prompt) == 0 {
		return fmt.Errorf("request %q: empty prompt", r.ID)
	}
	for j, t := range r.Prompt {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("request %q: prompt token %d at index %d is outside the vocabulary [0,%d)", r.ID, t, j, V)
		}
	}
	for j, t := range r.Forced {
		if t < 0 || int(t) >= V {
			return fmt.Errorf("request %q: forced token %d at index %d is outside the vocabulary [0,%d)", r.ID, t, j, V)
		}
	}
	if r.Forced == nil && r.MaxTokens < 1 {
		return fmt.Errorf("request %q: max_tokens must be at least 1", r.ID)
	}
	n := len(r.Prompt) + len(r.Forced) + r.MaxTokens
	if n > e.M.Plan.Model.MaxPositions {
		return fmt.Errorf("request %q: prompt plus output (%d tokens) exceeds the model's %d positions", r.ID, n, e.M.Plan.Model.MaxPositions)
	}
	return r.Sampling.Validate()
}

// Run executes reqs and calls emit once per request, as each finishes (errors
// included). It returns only when every request has been emitted.
func (e *Engine) Run(reqs []Request, emit func(Result)) {
	budget := e.MaxBatchTokens
	if budget <= 0 {
		budget = 2048
	}
	maxSeqs := e.MaxSeqs
	if maxSeqs <= 0 {
		maxSeqs = 64
	}
	var waiting []int
	for i := range reqs {
		if err := e.validate(i, &reqs[i]); err != nil {
			emit(Result{Index: i, ID: reqs[i].ID, Err: err})
			continue
		}
		waiting = append(waiting, i)
	}
	slices.SortStableFunc(waiting, func(a, b int) int { return reqs[a].Arrival - reqs[b].Arrival })
	var running []*active
	// the step's chunks and their owners, reused step after step
	var chunks []Chunk
	var owners []*active
	for step := 0; len(waiting) > 0 || len(running) > 0; step++ {
		for len(running) < maxSeqs && len(waiting) > 0 && reqs[waiting[0]].Arrival <= step {
			i := waiting[0]
			waiting = waiting[1:]
			r := &reqs[i]
			a := &active{idx: i, req: r, vocab: e.M.Plan.Model.Vocab,
				res: Result{Index: i, ID: r.ID, PromptTokens: len(r.Prompt), FirstStep: step}}
			var err error
			if a.seq, err = e.M.NewSequence(); err != nil {
				a.res.Err = fmt.Errorf("request %s: no sequence state: %w", r.ID, err)
				a.res.LastStep = step
				emit(a.res)
				continue
			}
			running = append(running, a)
		}
		chunks, owners = chunks[:0], owners[:0]
		left := budget
		for _, a := range running {
			if a.fed == len(a.req.Prompt) {
				a.next[0] = a.pending
				chunks = append(chunks, a.chunk(a.next[:], true))
				owners = append(owners, a)
				left--
			}
		}
		for _, a := range running {
			if a.fed < len(a.req.Prompt) && left > 0 {
				n := min(len(a.req.Prompt)-a.fed, left)
				c := a.chunk(a.req.Prompt[a.fed:a.fed+n], a.fed+n == len(a.req.Prompt))
				c.AllLogits = a.req.PromptLogits
				chunks = append(chunks, c)
				owners = append(owners, a)
				left -= n
			}
		}
		if len(chunks) == 0 {
			continue // nothing has arrived yet
		}
		outs, err := e.M.Forward(chunks)
		if e.OnStep != nil {
			e.OnStep(step, budget-left)
		}
		for ci, a := range owners {
			if err != nil {
				a.res.Err = err
				a.done = true
				continue
			}
			if a.done = e.advance(a, chunks[ci], outs[ci]); a.done {
				a.res.LastStep = step
			}
		}
		kept := running[:0]
		for _, a := range running {
			if a.done {
				a.seq.Release()
				emit(a.res)
			} else {
				kept = append(kept, a)
			}
		}
		running = kept
	}
}

// chunk builds a step chunk for this request; produces says whether the step's last
// row yields the request's next token (then it draws the row's random number).
func (a *active) chunk(tokens []int32, produces bool) Chunk {
	c := Chunk{Seq: a.seq, Tokens: tokens, WantLogits: a.req.KeepLogits}
	s := a.req.Sampling
	c.Sample = sampling.Params{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK}
	if produces && a.req.Forced == nil {
		c.Sample.U = a.rng().Float64()
		if a.req.Constraint != nil {
			if a.mask == nil {
				a.mask = make([]uint64, (a.vocab+63)/64)
			}
			clear(a.mask)
			if err := a.req.Constraint.FillMask(a.mask); err != nil {
				a.maskErr = err
			} else if !slices.ContainsFunc(a.mask, func(w uint64) bool { return w != 0 }) {
				a.maskErr = fmt.Errorf("the grammar allows no token after %d generated (a dead end in the grammar)", len(a.res.Tokens))
			}
			c.Mask = a.mask
		}
	}
	return c
}

func (a *active) rng() *rand.Rand {
	if a.random == nil {
		a.random = rand.New(rand.NewPCG(a.req.Sampling.Seed, 0x9e3779b97f4a7c15))
	}
	return a.random
}

// advance takes a step's output for one sequence and decides its next token; it reports
// whether the request is finished.
func (e *Engine) advance(a *active, c Chunk, o Output) bool {
	r := a.req
	if a.fed < len(r.Prompt) {
		a.fed += len(c.Tokens)
		if r.PromptLogits {
			a.res.Logits = append(a.res.Logits, o.Logits...)
		}
		if a.fed < len(r.Prompt) {
			return false
		}
		if !r.PromptLogits && r.KeepLogits {
			a.res.Logits = append(a.res.Logits, o.Logits[len(o.Logits)-1])
		}
	} else if r.KeepLogits {
		a.res.Logits = append(a.res.Logits, o.Logits[len(o.Logits)-1])
	}
	if r.Forced != nil {
		if a.forced == len(r.Forced) {
			a.res.Finish = "forced"
			return true
		}
		a.pending = r.Forced[a.forced]
		a.forced++
		return false
	}
	tok := o.Token
	if a.maskErr != nil {
		a.res.Err = fmt.Errorf("grammar: %w", a.maskErr)
		return true
	}
	if slices.Contains(r.Stop, tok) {
		a.res.Finish = "stop"
		return true
	}
	a.res.Tokens = append(a.res.Tokens, tok)
	if r.Constraint != nil {
		if err := r.Constraint.Accept(tok); err != nil {
			a.res.Err = fmt.Errorf("grammar refused token %d: %w", tok, err)
			return true
		}
	}
	if r.Check != nil && r.Check(tok) {
		a.res.Finish = "stop"
		return true
	}
	if len(a.res.Tokens) >= r.MaxTokens {
		a.res.Finish = "length"
		return true
	}
	a.pending = tok
	return false
}
