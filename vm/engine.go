package vm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"deepinfer/targets"
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
	// Logprobs asks for the log-probability of every generated token, and of the
	// TopLogprobs most likely tokens at its step (Result.Logprobs, OnToken).
	Logprobs    bool
	TopLogprobs int
	// OnToken, when set, is called from the engine's loop with every generated token as
	// it is appended (and its log-probabilities when asked for).
	OnToken func(tok int32, lp *TokenLogprob)
	// Ctx, when set, cancels the request: within one step of Ctx ending, the request
	// finishes with Ctx's error and its sequence is released.
	Ctx context.Context
}

// TokenLogprob is a generated token's log-probability under the model's distribution
// (before temperature and cuts) and the most likely tokens at that step.
type TokenLogprob struct {
	Token   int32
	Logprob float64
	Top     []TokenProb
}

// TokenProb is one candidate token and its log-probability.
type TokenProb struct {
	Token   int32
	Logprob float64
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
	Logprobs     []TokenLogprob
	Finish       string // "stop", "length", "forced" or "cancelled"
	PromptTokens int
	Logits       [][]float32
	// FirstStep is the engine step at which the request was admitted (or, cancelled
	// while queued, left the queue); LastStep the step whose output finished it, or at
	// whose start it was cancelled or failed to start. With the async scheduler a
	// finished request's state may be released a step later; these stay the same.
	FirstStep int
	LastStep  int
	Err       error
}

// Engine runs requests with continuous batching: every step carries one token for each
// decoding sequence plus prompt chunks of waiting sequences, up to a token budget
// (chunked prefill); sequences join when there is room and leave when they finish.
// Run executes a fixed list of requests; Start runs the same loop for requests that
// keep arriving (a server's).
type Engine struct {
	M              *Machine
	MaxBatchTokens int // per step; default 2048
	MaxSeqs        int // running at once; default 64
	// OnStep, when set, is called after every step with the number of tokens it ran.
	OnStep func(step, tokens int)
	// Spec turns on DSpark speculative decoding for the requests that can use it
	// (plans with a draft program; requests without a grammar or forced tokens).
	Spec *Speculation
	// Sync turns the async scheduler off (as DEEPINFER_ASYNC=0 does): every step is
	// waited for before the next is prepared.
	Sync bool
	// Trace, when set, is called from the loop with each stretch of the engine's host
	// work (TraceSpan).
	Trace func(TraceSpan)

	stats engineStats
	spec  specCounters
}

// engineStats are read by other goroutines while the loop runs.
type engineStats struct {
	running, queued atomic.Int64
	heldTokens      atomic.Int64 // positions held by running sequences
	maskNanos       atomic.Int64 // time spent filling grammar masks
	steps, tokens   atomic.Int64
	asyncSteps      atomic.Int64 // steps enqueued before the step before them was back
	discarded       atomic.Int64 // rows run for sequences that had already finished
	hiddenNanos     atomic.Int64 // host time while a step ran on the device, outside waits
}

// TraceSpan is one stretch of the engine's host work in step Step: "schedule"
// (cancellations, admissions, building a step's chunks), "mask" (one grammar mask
// fill, within schedule), "step" (a synchronous step: packing, the runtime's step and
// the read-back), "prepare" (building the next step's chunks while this one runs),
// "enqueue" (packing and handing a step to the runtime's queue; "step" on a runtime
// without a queue, which runs the step there), "wait" (blocked until the step's tokens
// are back) and "tokens" (taking the tokens: appending, stop checks, callbacks,
// finishing requests).
type TraceSpan struct {
	Name       string
	Step       int
	Start, End time.Time
}

// asyncOn says whether the async scheduler runs: on unless Engine.Sync or
// DEEPINFER_ASYNC is 0 or false.
func (e *Engine) asyncOn() bool {
	switch os.Getenv("DEEPINFER_ASYNC") {
	case "0", "false":
		return false
	}
	return !e.Sync
}

// Stats is a snapshot of the engine's counters.
type Stats struct {
	Running, Queued int   // sequences running, requests waiting to start
	HeldTokens      int64 // positions the running sequences hold in their state
	MaskTime        time.Duration
	// Steps run and tokens they carried, since the engine began, as the synchronous
	// loop counts them: a row run ahead for a sequence that had finished is not counted
	// (Discarded), nor a step that carried only such rows.
	Steps, Tokens int64
	// AsyncSteps of them were enqueued before the step before them was back (the async
	// scheduler); Discarded rows were run for sequences that had finished meanwhile.
	AsyncSteps, Discarded int64
	// Hidden is the host time spent while a step was on the device, outside waiting
	// for it (preparing the next step, taking the last one's tokens): work the overlap
	// hid. It is 0 on a runtime without a device queue (the cpu target), which runs each
	// step inside Enqueue.
	Hidden time.Duration
}

// Stats reads the engine's counters (safe while it runs).
func (e *Engine) Stats() Stats {
	return Stats{Running: int(e.stats.running.Load()), Queued: int(e.stats.queued.Load()),
		HeldTokens: e.stats.heldTokens.Load(), MaskTime: time.Duration(e.stats.maskNanos.Load()),
		Steps: e.stats.steps.Load(), Tokens: e.stats.tokens.Load(),
		AsyncSteps: e.stats.asyncSteps.Load(), Discarded: e.stats.discarded.Load(), Hidden: time.Duration(e.stats.hiddenNanos.Load())}
}

type active struct {
	idx     int
	req     *Request
	emit    func(Result)
	seq     *Sequence
	fed     int // prompt tokens fed so far
	pending int32
	forced  int
	mask    []uint64
	maskErr error
	vocab   int
	res     Result
	done    bool     // finished in the current step
	next    [1]int32 // the decode step's one token (reused: a chunk is not kept past its step)
	stats   *engineStats
	// speculation: spec says the request drafts; prop is its drafts for the next step;
	// group and restore are the verify group in flight and its state's saved copy
	spec    bool
	prop    *proposal
	group   []int32
	restore func() error
	// the group verified in this step: drafts and accepted (drafted 0: none)
	drafted, accepted int
	// async scheduler: finished says the result was emitted; lastRow is the last step
	// enqueued with a row for the sequence (-1: none); ahead is that row's token
	finished bool
	lastRow  int
	ahead    [1]int32
	onMask   func(t0, t1 time.Time) // tracing
}

func (e *Engine) validate(r *Request) error {
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
	if n > e.M.MaxPositions() {
		return fmt.Errorf("request %q: prompt plus output (%d tokens) exceeds the %d positions the machine holds", r.ID, n, e.M.MaxPositions())
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > 20 {
		return fmt.Errorf("request %q: top logprobs %d is outside [0, 20]", r.ID, r.TopLogprobs)
	}
	return r.Sampling.Validate()
}

// queued is a request waiting to start.
type queued struct {
	idx  int
	req  *Request
	emit func(Result) // the request's own, or the loop's
}

// source gives the loop its requests. pull adds the requests available now to q; when
// idle is set (nothing runs and nothing in q may start yet) it may block until one
// arrives. It returns false when no request will arrive any more.
type source interface {
	pull(q *[]queued, idle bool) bool
}

// Run executes reqs and calls emit once per request, as each finishes (errors
// included). It returns only when every request has been emitted.
func (e *Engine) Run(reqs []Request, emit func(Result)) {
	var q []queued
	for i := range reqs {
		if err := e.validate(&reqs[i]); err != nil {
			emit(Result{Index: i, ID: reqs[i].ID, Err: err})
			continue
		}
		q = append(q, queued{idx: i, req: &reqs[i], emit: emit})
	}
	slices.SortStableFunc(q, func(a, b queued) int { return a.req.Arrival - b.req.Arrival })
	e.loop(fixedSource{}, q)
}

type fixedSource struct{}

func (fixedSource) pull(*[]queued, bool) bool { return false }

// loop is the scheduler: it runs steps until the source is exhausted and every request
// has finished.
//
// With the async scheduler on (the default; Engine.Sync or DEEPINFER_ASYNC=0 turn it
// off), a step whose successor is predictable is enqueued on the machine's pipeline and
// the successor is prepared and enqueued before the step's tokens are waited for: its
// input tokens name the rows of the step before (targets.FromPrevious), and its sampling
// randoms are drawn for the next token index. The successor is predictable when every
// running sequence decodes one token with no grammar, no logits, no forced tokens and no
// speculation, and no queued request may start at that step; a sequence whose output
// would reach MaxTokens gets no row. Otherwise the loop waits and runs the next step
// synchronously. A sequence that finishes (stop token, Check, cancellation) while its
// row in the successor is already enqueued keeps that row: its token is discarded and the
// state, advanced one position past the result, is released once the successor is
// waited for (it is being released, so nothing reads it). Results, step numbers and
// counters are those of the synchronous loop.
func (e *Engine) loop(src source, q []queued) {
	budget := e.MaxBatchTokens
	if budget <= 0 {
		budget = 2048
	}
	maxSeqs := e.MaxSeqs
	if maxSeqs <= 0 {
		maxSeqs = 64
	}
	async := e.asyncOn()
	overlaps := e.M.Overlaps()
	enqueueSpan := "enqueue"
	if !overlaps {
		enqueueSpan = "step" // the runtime runs the step inside the enqueue
	}
	var running []*active
	// the step's chunks and their owners, reused step after step
	var chunks []Chunk
	var owners []*active
	more := true
	// inflight is the step enqueued and not yet waited for (its step is the loop's);
	// waited is the last step whose output is back
	var inflight *flight
	waited := -1
	// host time while a step was on the device, outside Wait (overlaps only)
	var busy bool
	var busySince time.Time
	startBusy := func() {
		if overlaps && !busy {
			busy, busySince = true, time.Now()
		}
	}
	stopBusy := func() {
		if busy {
			e.stats.hiddenNanos.Add(int64(time.Since(busySince)))
			busy = false
		}
	}
	release := func(a *active) {
		a.seq.Release()
		e.stats.heldTokens.Add(-int64(a.seq.Len()))
	}
	// finish emits a's result; its state is released now, or, when an enqueued step
	// still carries a row for it, after that step is waited for
	finish := func(a *active) {
		a.finished = true
		if a.lastRow <= waited {
			release(a)
		}
		a.emit(a.res)
	}
	trace := e.Trace
	span := func(name string, step int, t0 time.Time) time.Time {
		t1 := time.Now()
		if trace != nil {
			trace(TraceSpan{Name: name, Step: step, Start: t0, End: t1})
		}
		return t1
	}
	var curStep int
	for step := 0; ; step++ {
		curStep = step
		t0 := time.Now()
		idle := inflight == nil && len(running) == 0 && (len(q) == 0 || q[0].req.Arrival > step)
		if more {
			more = src.pull(&q, idle && len(q) == 0)
			if idle {
				t0 = time.Now() // blocking for arrivals is not the engine's work
			}
		}
		if !more && len(q) == 0 && len(running) == 0 && inflight == nil {
			return
		}
		// cancelled requests leave before the step
		q = slices.DeleteFunc(q, func(w queued) bool {
			if err := ctxErr(w.req.Ctx); err != nil {
				w.emit(Result{Index: w.idx, ID: w.req.ID, PromptTokens: len(w.req.Prompt), Finish: "cancelled", Err: err, FirstStep: step, LastStep: step})
				return true
			}
			return false
		})
		running = slices.DeleteFunc(running, func(a *active) bool {
			if err := ctxErr(a.req.Ctx); err != nil {
				a.res.Err, a.res.Finish, a.res.LastStep = err, "cancelled", step
				finish(a)
				return true
			}
			return false
		})
		for inflight == nil && len(running) < maxSeqs && len(q) > 0 && q[0].req.Arrival <= step {
			w := q[0]
			q = q[1:]
			r := w.req
			a := &active{idx: w.idx, req: r, emit: w.emit, vocab: e.M.Plan.Model.Vocab, stats: &e.stats, lastRow: -1,
				res: Result{Index: w.idx, ID: r.ID, PromptTokens: len(r.Prompt), FirstStep: step}}
			if trace != nil {
				a.onMask = func(t0, t1 time.Time) { trace(TraceSpan{Name: "mask", Step: curStep, Start: t0, End: t1}) }
			}
			var err error
			if a.seq, err = e.M.NewSequence(); err != nil {
				a.res.Err = fmt.Errorf("request %s: no sequence state: %w", r.ID, err)
				a.res.LastStep = step
				a.emit(a.res)
				continue
			}
			a.spec = e.Spec != nil && e.Spec.MaxDraft > 0 && e.M.CanDraft() && r.Forced == nil && r.Constraint == nil
			if _, ok := a.seq.state.(targets.SavableState); !ok {
				a.spec = false
			}
			running = append(running, a)
		}
		e.stats.running.Store(int64(len(running)))
		e.stats.queued.Store(int64(len(q)))
		if inflight == nil {
			chunks, owners = chunks[:0], owners[:0]
			left := budget
			for _, a := range running {
				if a.fed == len(a.req.Prompt) {
					a.next[0] = a.pending
					toks := a.next[:]
					if a.prop != nil && left > 1 {
						d := a.prop.drafts[:min(len(a.prop.drafts), left-1)]
						if restore, err := a.seq.Save(); err == nil {
							a.restore = restore
							a.group = append(append(a.group[:0], a.pending), d...)
							toks = a.group
						}
					}
					c := a.chunk(toks, true)
					c.Decode = true
					if len(toks) > 1 {
						c.AllRows = true
						c.WantLogits = c.WantLogits || a.req.KeepLogits || a.req.Sampling.Temperature > 0
					}
					chunks = append(chunks, c)
					owners = append(owners, a)
					left -= len(toks)
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
			if async && e.M.Pipelined() && len(owners) == len(running) && plainStep(chunks, owners) && canAhead(q, step+1, owners) {
				// the first step of a pipelined run: enqueued like the ones after it
				f := &flight{step: step, chunks: slices.Clone(chunks), owners: slices.Clone(owners)}
				t1 := span("schedule", step, t0)
				e.enqueue(f)
				t0 = span(enqueueSpan, step, t1)
				if f.err == nil {
					startBusy()
				}
				inflight = f
			} else {
				t1 := span("schedule", step, t0)
				e.syncStep(step, budget-left, chunks, owners, running)
				t0 = span("step", step, t1)
				running = e.retire(running, finish)
				span("tokens", step, t0)
				e.stats.running.Store(int64(len(running)))
				continue
			}
		}
		// inflight is this step: prepare and enqueue the next while it runs
		var next *flight
		t0 = span("schedule", step, t0)
		if async && e.M.Pipelined() && canAhead(q, step+1, running) {
			next = &flight{step: step + 1, ahead: true}
			for j, a := range inflight.owners {
				if a.finished || len(a.res.Tokens)+1 >= a.req.MaxTokens {
					continue // finished, or finishes with this step's token
				}
				a.ahead[0] = targets.FromPrevious(j)
				s := a.req.Sampling
				c := Chunk{Seq: a.seq, Tokens: a.ahead[:], Decode: true,
					Sample: sampling.Params{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK,
						U: sampling.Uniform(s.Seed, len(a.res.Tokens)+1, sampling.StreamSample)}}
				next.chunks = append(next.chunks, c)
				next.owners = append(next.owners, a)
			}
			t0 = span("prepare", step+1, t0)
			if len(next.chunks) == 0 {
				next = nil
			} else {
				e.enqueue(next)
				t0 = span(enqueueSpan, step+1, t0)
			}
		}
		stopBusy()
		outs, err := inflight.wait()
		waited = step
		t0 = span("wait", step, t0)
		if next != nil && next.err == nil {
			startBusy()
		}
		// the step as the synchronous loop counts it: without the discarded rows
		counted := 0
		for _, a := range inflight.owners {
			if !a.finished {
				counted++
			}
		}
		if counted > 0 {
			e.stats.steps.Add(1)
			if inflight.ahead {
				e.stats.asyncSteps.Add(1)
			}
			e.stats.tokens.Add(int64(counted))
			if e.OnStep != nil {
				e.OnStep(step, counted)
			}
		}
		for ci, a := range inflight.owners {
			if a.finished {
				// finished at the step before, or cancelled: its row is discarded
				release(a)
				e.stats.discarded.Add(1)
				continue
			}
			if err != nil {
				a.res.Err = err
				a.done = true
			} else {
				a.done = e.advance(a, inflight.chunks[ci], outs[ci])
			}
			if a.done {
				a.res.LastStep = step
			}
		}
		running = e.retire(running, finish)
		span("tokens", step, t0)
		e.stats.running.Store(int64(len(running)))
		inflight = next
	}
}

// flight is a step enqueued on the machine's pipeline.
type flight struct {
	step   int
	p      *Pending
	err    error // the enqueue failed: the step's outcome
	ahead  bool  // enqueued before the step before it was waited for
	chunks []Chunk
	owners []*active
}

// enqueue puts f on the machine's pipeline; a failure becomes the step's outcome.
func (e *Engine) enqueue(f *flight) {
	f.p, f.err = e.M.Enqueue(f.chunks)
	if f.err != nil {
		f.err = fmt.Errorf("step %d: %w", f.step, f.err)
		return
	}
	for _, a := range f.owners {
		a.lastRow = f.step
	}
	e.stats.heldTokens.Add(int64(len(f.chunks))) // the sequences advanced at the enqueue
}

func (f *flight) wait() ([]Output, error) {
	if f.err != nil {
		return nil, f.err
	}
	outs, err := f.p.Wait()
	if err != nil {
		err = fmt.Errorf("step %d: %w", f.step, err)
	}
	return outs, err
}

// plainStep reports whether a step is one decode token for each owner, none of which
// needs logits, a grammar mask, forced tokens or speculation: the step after it is
// then predictable.
func plainStep(chunks []Chunk, owners []*active) bool {
	for i, a := range owners {
		r := a.req
		if len(chunks[i].Tokens) != 1 || !chunks[i].Decode || a.spec || r.Forced != nil || r.Constraint != nil || r.KeepLogits || r.Logprobs {
			return false
		}
	}
	return true
}

// canAhead reports whether the step after one with these sequences may be enqueued
// before the step's tokens are back: no queued request may start at it, and some
// sequence continues past this step's token.
func canAhead(q []queued, next int, seqs []*active) bool {
	if slices.ContainsFunc(q, func(w queued) bool { return w.req.Arrival <= next }) {
		return false
	}
	return slices.ContainsFunc(seqs, func(a *active) bool { return !a.finished && len(a.res.Tokens)+1 < a.req.MaxTokens })
}

// syncStep runs one step with Forward and takes its outputs (speculation included).
func (e *Engine) syncStep(step, tokens int, chunks []Chunk, owners, running []*active) {
	outs, err := e.M.Forward(chunks)
	e.stats.steps.Add(1)
	e.stats.tokens.Add(int64(tokens))
	if err == nil {
		e.stats.heldTokens.Add(int64(tokens))
	}
	if e.OnStep != nil {
		e.OnStep(step, tokens)
	}
	var replays []Chunk
	var replayOwners []*active
	for ci, a := range owners {
		if err != nil {
			a.res.Err = err
			a.done = true
			continue
		}
		a.drafted = 0
		if c := chunks[ci]; c.AllRows {
			var keep int
			a.done, keep = e.verify(a, c, outs[ci])
			if !a.done && keep < len(c.Tokens) {
				replays = append(replays, Chunk{Seq: a.seq, Tokens: c.Tokens[:keep], Decode: true})
				replayOwners = append(replayOwners, a)
			}
		} else {
			a.done = e.advance(a, chunks[ci], outs[ci])
		}
		if a.done {
			a.res.LastStep = step
		}
	}
	if len(replays) > 0 {
		// rebuild the accepted rows' state after the rollback
		_, rerr := e.M.Forward(replays)
		rows := 0
		for i, a := range replayOwners {
			rows += len(replays[i].Tokens)
			if rerr != nil {
				a.res.Err, a.done, a.res.LastStep = rerr, true, step
			}
		}
		e.spec.add(func(s *SpecStats) { s.ReplayRows += int64(rows) })
	}
	if e.Spec != nil && e.Spec.OnGroup != nil {
		for _, a := range owners {
			if a.drafted > 0 && !a.done {
				e.Spec.OnGroup(a.req, a.drafted, a.accepted, a.seq)
			}
		}
	}
	e.propose(running)
}

// retire finishes the sequences that are done and returns the rest.
func (e *Engine) retire(running []*active, finish func(*active)) []*active {
	kept := running[:0]
	for _, a := range running {
		if a.done {
			finish(a)
		} else {
			kept = append(kept, a)
		}
	}
	return kept
}

func ctxErr(c context.Context) error {
	if c == nil {
		return nil
	}
	return c.Err()
}

// chunk builds a step chunk for this request; produces says whether the step's last
// row yields the request's next token (then it draws the row's random number).
func (a *active) chunk(tokens []int32, produces bool) Chunk {
	c := Chunk{Seq: a.seq, Tokens: tokens, WantLogits: a.req.KeepLogits || (produces && a.req.Logprobs)}
	s := a.req.Sampling
	c.Sample = sampling.Params{Temperature: s.Temperature, TopP: s.TopP, TopK: s.TopK}
	if produces && a.req.Forced == nil {
		c.Sample.U = sampling.Uniform(s.Seed, len(a.res.Tokens), sampling.StreamSample)
		if a.req.Constraint != nil {
			if a.mask == nil {
				a.mask = make([]uint64, (a.vocab+63)/64)
			}
			clear(a.mask)
			t0 := time.Now()
			err := a.req.Constraint.FillMask(a.mask)
			t1 := time.Now()
			a.stats.maskNanos.Add(int64(t1.Sub(t0)))
			if a.onMask != nil {
				a.onMask(t0, t1)
			}
			if err != nil {
				a.maskErr = err
			} else if !slices.ContainsFunc(a.mask, func(w uint64) bool { return w != 0 }) {
				a.maskErr = fmt.Errorf("the grammar allows no token after %d generated (a dead end in the grammar)", len(a.res.Tokens))
			}
			c.Mask = a.mask
		}
	}
	return c
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
	if a.maskErr != nil {
		a.res.Err = fmt.Errorf("grammar: %w", a.maskErr)
		return true
	}
	var row []float32
	if len(o.Logits) > 0 {
		row = o.Logits[len(o.Logits)-1]
	}
	return a.commit(o.Token, row)
}

// commit takes one generated token (row: the logits it was sampled from, when the
// step returned them) and reports whether the request is finished.
func (a *active) commit(tok int32, row []float32) bool {
	r := a.req
	if slices.Contains(r.Stop, tok) {
		a.res.Finish = "stop"
		return true
	}
	a.res.Tokens = append(a.res.Tokens, tok)
	var lp *TokenLogprob
	if r.Logprobs && row != nil {
		l := logprobOf(row, tok, r.TopLogprobs)
		a.res.Logprobs = append(a.res.Logprobs, l)
		lp = &a.res.Logprobs[len(a.res.Logprobs)-1]
	}
	if r.OnToken != nil {
		r.OnToken(tok, lp)
	}
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

// logprobOf is token tok's log-probability in a logits row (log-softmax in float64) and
// the top most likely tokens, most likely first (ties: lower id first).
func logprobOf(row []float32, tok int32, top int) TokenLogprob {
	mx := math.Inf(-1)
	for _, v := range row {
		mx = max(mx, float64(v))
	}
	var sum float64
	for _, v := range row {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	l := TokenLogprob{Token: tok, Logprob: float64(row[tok]) - lse}
	if top > 0 {
		idx := make([]int32, 0, top+1)
		for i, v := range row {
			pos := len(idx)
			for pos > 0 && v > row[idx[pos-1]] {
				pos--
			}
			if pos < top {
				idx = slices.Insert(idx, pos, int32(i))
				if len(idx) > top {
					idx = idx[:top]
				}
			}
		}
		for _, i := range idx {
			l.Top = append(l.Top, TokenProb{Token: i, Logprob: float64(row[i]) - lse})
		}
	}
	return l
}

// Errors of a live engine's Submit.
var (
	ErrQueueFull = errors.New("the engine's queue is full")
	ErrStopped   = errors.New("the engine is stopping")
)

// Live is an engine whose loop runs on its own goroutine for requests that keep
// arriving (Start): a server's. Submitted requests join the same continuous batch.
type Live struct {
	e        *Engine
	in       chan queued
	stop     chan struct{}
	done     chan struct{}
	maxQueue int
	mu       sync.Mutex
	stopped  bool
	next     int
}

// Start runs the engine's loop for requests submitted later. maxQueue bounds the
// requests waiting to start: beyond it Submit answers ErrQueueFull.
func (e *Engine) Start(maxQueue int) *Live {
	maxQueue = max(maxQueue, 1)
	l := &Live{e: e, in: make(chan queued, maxQueue), stop: make(chan struct{}), done: make(chan struct{}), maxQueue: maxQueue}
	go func() {
		defer close(l.done)
		e.loop(l, nil)
	}()
	return l
}

// Submit validates r and queues it. done is called once, from the engine's loop, when
// the request finishes (cancelled, failed or complete); it must not block.
func (l *Live) Submit(r Request, done func(Result)) error {
	if err := l.e.validate(&r); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return ErrStopped
	}
	if int(l.e.stats.queued.Load())+len(l.in) >= l.maxQueue {
		return ErrQueueFull
	}
	l.next++
	select {
	case l.in <- queued{idx: l.next, req: &r, emit: done}:
		return nil
	default:
		return ErrQueueFull
	}
}

// pull implements source.
func (l *Live) pull(q *[]queued, idle bool) bool {
	for {
		select {
		case w := <-l.in:
			*q = append(*q, w)
			idle = false
			continue
		default:
		}
		if !idle {
			return true
		}
		select {
		case w := <-l.in:
			*q = append(*q, w)
			idle = false
		case <-l.stop:
			// drain what was submitted before the stop
			for {
				select {
				case w := <-l.in:
					*q = append(*q, w)
				default:
					return false
				}
			}
		}
	}
}

// Stop refuses new requests and returns once every submitted one has finished (cancel
// their contexts to hurry them).
func (l *Live) Stop() {
	l.mu.Lock()
	if !l.stopped {
		l.stopped = true
		close(l.stop)
	}
	l.mu.Unlock()
	<-l.done
}
