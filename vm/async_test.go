package vm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
)

// asyncRun is one engine run's observable outcome.
type asyncRun struct {
	results []vm.Result
	streams [][]int32 // OnToken's tokens per request
	stats   vm.Stats
	steps   []int // OnStep's (step, tokens, tokens streamed before it) triples, flattened
}

// workload makes a fresh set of requests (callbacks and contexts are per run) from a
// seed: random prompts, arrivals, budgets, stop tokens, Check stops, cancellations and
// sampling parameters. common are tokens the model produces often (stop candidates).
type workload struct {
	seed           int64
	n              int
	maxSeqs, batch int
	common         []int32
}

func (w workload) requests(V int, streams [][]int32) []vm.Request {
	rng := rand.New(rand.NewSource(w.seed))
	reqs := make([]vm.Request, w.n)
	for i := range reqs {
		prompt := make([]int32, 1+rng.Intn(10))
		for j := range prompt {
			prompt[j] = int32(rng.Intn(V))
		}
		r := vm.Request{ID: fmt.Sprint(i), Prompt: prompt, MaxTokens: 1 + rng.Intn(14), Arrival: rng.Intn(6)}
		switch rng.Intn(3) {
		case 1:
			r.Sampling = vm.Sampling{Temperature: 0.8, Seed: uint64(rng.Intn(1000))}
		case 2:
			r.Sampling = vm.Sampling{Temperature: 1.2, TopP: 0.9, TopK: 5, Seed: uint64(rng.Intn(1000))}
		}
		if len(w.common) > 0 && rng.Intn(2) == 0 {
			r.Stop = []int32{w.common[rng.Intn(len(w.common))]}
		}
		i := i
		switch rng.Intn(5) {
		case 0: // a stop string completed after k tokens
			k := 1 + rng.Intn(6)
			r.Check = func(int32) bool { return len(streams[i]) >= k }
		case 1: // cancelled from the token callback after k tokens
			k := 1 + rng.Intn(6)
			ctx, cancel := context.WithCancel(context.Background())
			r.Ctx = ctx
			r.OnToken = func(tok int32, _ *vm.TokenLogprob) {
				streams[i] = append(streams[i], tok)
				if len(streams[i]) >= k {
					cancel()
				}
			}
		case 2: // cancelled before it starts
			if rng.Intn(3) == 0 {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				r.Ctx = ctx
			}
		}
		if r.OnToken == nil {
			r.OnToken = func(tok int32, _ *vm.TokenLogprob) { streams[i] = append(streams[i], tok) }
		}
		reqs[i] = r
	}
	return reqs
}

func runWorkload(t *testing.T, m *vm.Machine, w workload, sync bool, extra func(*vm.Request, int)) asyncRun {
	t.Helper()
	var run asyncRun
	run.streams = make([][]int32, w.n)
	reqs := w.requests(m.Plan.Model.Vocab, run.streams)
	for i := range reqs {
		if extra != nil {
			extra(&reqs[i], i)
		}
	}
	e := &vm.Engine{M: m, MaxSeqs: w.maxSeqs, MaxBatchTokens: w.batch, Sync: sync,
		OnStep: func(step, tokens int) {
			run.steps = append(run.steps, step, tokens)
			// where the step falls among the streamed tokens
			total := 0
			for _, s := range run.streams {
				total += len(s)
			}
			run.steps = append(run.steps, total)
		}}
	run.results = make([]vm.Result, w.n)
	got := 0
	e.Run(reqs, func(r vm.Result) { run.results[r.Index] = r; got++ })
	if got != w.n {
		t.Fatalf("%d results for %d requests", got, w.n)
	}
	run.stats = e.Stats()
	return run
}

func sameRuns(t *testing.T, what string, got, want asyncRun) {
	t.Helper()
	for i := range want.results {
		g, x := got.results[i], want.results[i]
		ge, xe := fmt.Sprint(g.Err), fmt.Sprint(x.Err)
		g.Err, x.Err = nil, nil
		if !reflect.DeepEqual(g, x) || ge != xe {
			t.Fatalf("%s: request %d:\nasync %+v (err %s)\nsync  %+v (err %s)", what, i, g, ge, x, xe)
		}
		if !slices.Equal(got.streams[i], want.streams[i]) {
			t.Fatalf("%s: request %d streamed %v, synchronously %v", what, i, got.streams[i], want.streams[i])
		}
	}
	if !slices.Equal(got.steps, want.steps) {
		t.Fatalf("%s: OnStep saw %v, synchronously %v", what, got.steps, want.steps)
	}
	gs, ws := got.stats, want.stats
	if gs.Steps != ws.Steps || gs.Tokens != ws.Tokens || gs.Running != 0 || gs.Queued != 0 || gs.HeldTokens != 0 || ws.HeldTokens != 0 {
		t.Fatalf("%s: stats %+v, synchronously %+v", what, gs, ws)
	}
}

// TestAsyncEqualsSync runs random workloads with the async scheduler and without: every
// result (tokens, finish, steps, errors), every streamed token, every OnStep call and
// the step and token counters must be the same.
func TestAsyncEqualsSync(t *testing.T) {
	m := compileAndLoad(t, compiler.Options{ModelDir: fixtureDir})
	checkAsyncEqualsSync(t, m, 40)
}

// TestAsyncEqualsSyncV41 is the same on V4.1's fixture (Engram history, index keys), without
// speculation.
func TestAsyncEqualsSyncV41(t *testing.T) {
	m := loadV41(t, compiler.Options{})
	checkAsyncEqualsSync(t, m, 8)
}

func checkAsyncEqualsSync(t *testing.T, m *vm.Machine, n int) {
	// tokens the model produces often, so that stop tokens are hit
	probe := runWorkload(t, m, workload{seed: 99, n: 12, maxSeqs: 12, batch: 256}, true, nil)
	count := map[int32]int{}
	for _, r := range probe.results {
		for _, tok := range r.Tokens {
			count[tok]++
		}
	}
	var common []int32
	for tok, c := range count {
		if c >= 3 {
			common = append(common, tok)
		}
	}
	slices.Sort(common)
	var async, steps, discarded int64
	rng := rand.New(rand.NewSource(1))
	if testing.Short() {
		n = max(n/4, 2)
	}
	for k := 0; k < n; k++ {
		w := workload{seed: int64(k), n: 1 + rng.Intn(16), maxSeqs: 1 + rng.Intn(12), batch: 4 + rng.Intn(60), common: common}
		what := fmt.Sprintf("workload %d (%d requests, %d seqs, budget %d)", k, w.n, w.maxSeqs, w.batch)
		want := runWorkload(t, m, w, true, nil)
		got := runWorkload(t, m, w, false, nil)
		sameRuns(t, what, got, want)
		if want.stats.AsyncSteps != 0 || want.stats.Discarded != 0 {
			t.Fatalf("%s: the synchronous engine counted %d async steps, %d discarded rows", what, want.stats.AsyncSteps, want.stats.Discarded)
		}
		async += got.stats.AsyncSteps
		steps += got.stats.Steps
		discarded += got.stats.Discarded
		if got.stats.Hidden != 0 {
			t.Fatalf("%s: %s hidden on the cpu target, which has no device queue", what, got.stats.Hidden)
		}
	}
	t.Logf("%d of %d steps async, %d rows discarded", async, steps, discarded)
	if async == 0 || discarded == 0 {
		t.Fatalf("the workloads exercised too little: %d async steps, %d discarded rows", async, discarded)
	}
}

// TestAsyncFallbacks: requests that make the next step unpredictable (a grammar, logits,
// log-probabilities, forced tokens) keep the engine synchronous while they run, with the
// same results; a workload of plain decoders is mostly async.
func TestAsyncFallbacks(t *testing.T) {
	m := compileAndLoad(t, compiler.Options{ModelDir: fixtureDir})

	w := workload{seed: 7, n: 6, maxSeqs: 6, batch: 256}
	for _, c := range []struct {
		name string
		set  func(r *vm.Request)
	}{
		{"grammar", func(r *vm.Request) { r.Constraint = &onlyAllowed{ids: []int32{3, 5, 7}} }},
		{"logits", func(r *vm.Request) { r.KeepLogits = true }},
		{"logprobs", func(r *vm.Request) { r.Logprobs, r.TopLogprobs = true, 2 }},
		{"forced", func(r *vm.Request) { r.Forced = []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			extra := func(r *vm.Request, i int) {
				r.Arrival, r.Ctx, r.Check = 0, nil, nil
				r.MaxTokens = 12
				if i == 0 {
					c.set(r)
				}
			}
			want := runWorkload(t, m, w, true, extra)
			got := runWorkload(t, m, w, false, extra)
			sameRuns(t, c.name, got, want)
			// while request 0 runs (its last step included), every step is synchronous
			last := got.results[0].LastStep
			if got.results[0].Err != nil || last < 3 {
				t.Fatalf("request 0: %+v", got.results[0])
			}
			if got.stats.AsyncSteps > got.stats.Steps-int64(last)-1 {
				t.Fatalf("%d async steps of %d, though request 0 ran until step %d", got.stats.AsyncSteps, got.stats.Steps, last)
			}
		})
	}
	t.Run("plain", func(t *testing.T) {
		extra := func(r *vm.Request, i int) { r.Arrival, r.Ctx, r.Check, r.MaxTokens = 0, nil, nil, 12 }
		want := runWorkload(t, m, w, true, extra)
		got := runWorkload(t, m, w, false, extra)
		sameRuns(t, "plain", got, want)
		// the prompts' step and the step that starts the pipeline are synchronous
		if got.stats.AsyncSteps < got.stats.Steps-2 {
			t.Fatalf("%d async steps of %d", got.stats.AsyncSteps, got.stats.Steps)
		}
	})
	t.Run("off", func(t *testing.T) {
		t.Setenv("DEEPINFER_ASYNC", "0")
		got := runWorkload(t, m, w, false, nil)
		if got.stats.AsyncSteps != 0 {
			t.Fatalf("DEEPINFER_ASYNC=0: %d async steps", got.stats.AsyncSteps)
		}
	})

}

// failing is a runtime whose pipeline fails at a chosen enqueue or wait.
type failing struct {
	targets.Runtime
	enqueues, failEnqueue, failWait int
	pending                         []targets.Pending
	inner                           targets.Pipelined
}

type failPending struct {
	targets.Pending
	fail bool
}

func (p failPending) Wait(out *targets.StepOut) error {
	err := p.Pending.Wait(out)
	if p.fail {
		return errors.New("device fault (injected)")
	}
	return err
}

func (f *failing) Enqueue(in *targets.StepIn) (targets.Pending, error) {
	f.enqueues++
	if f.enqueues == f.failEnqueue {
		return nil, errors.New("launch failed (injected)")
	}
	p, err := f.inner.Enqueue(in)
	if err != nil {
		return nil, err
	}
	return failPending{Pending: p, fail: f.enqueues == f.failWait}, nil
}

type failingExec struct {
	targets.Executor
	f *failing
}

func (x failingExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	rt, err := x.Executor.Open(p, w, o)
	if err != nil {
		return nil, err
	}
	x.f.Runtime, x.f.inner = rt, targets.Pipeline(rt)
	return x.f, nil
}

// TestAsyncEnqueueFails: a runtime whose pipeline fails mid-run (at an enqueue, or a
// step that fails on the device) gives the sequences in those steps a clear error; the
// others finish, and later requests run on the synchronous path.
func TestAsyncEnqueueFails(t *testing.T) {
	out, err := compiler.Compile(compiler.Options{ModelDir: fixtureDir, Target: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := vm.LoadWeights(out.Plan, fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := targets.Lookup("cpu")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		enqueue, wait int
		want          string
	}{
		{"enqueue", 4, 0, "launch failed (injected)"},
		{"wait", 0, 3, "device fault (injected)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &failing{failEnqueue: c.enqueue, failWait: c.wait}
			m, err := vm.LoadOn(out.Plan, w, failingExec{Executor: tgt.(targets.Executor), f: f})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			reqs := []vm.Request{
				{ID: "a", Prompt: []int32{1, 2, 3}, MaxTokens: 20},
				{ID: "b", Prompt: []int32{4, 5}, MaxTokens: 20},
				{ID: "late", Prompt: []int32{6}, MaxTokens: 3, Arrival: 30},
			}
			res := make([]vm.Result, len(reqs))
			(&vm.Engine{M: m}).Run(reqs, func(r vm.Result) { res[r.Index] = r })
			for i := 0; i < 2; i++ {
				if res[i].Err == nil || !strings.Contains(res[i].Err.Error(), c.want) || !strings.Contains(res[i].Err.Error(), "step ") {
					t.Fatalf("request %s: err %v, want one naming the step and %q", res[i].ID, res[i].Err, c.want)
				}
			}
			if res[2].Err != nil || len(res[2].Tokens) != 3 {
				t.Fatalf("the late request after the failure: %+v", res[2])
			}
			if m.Pipelined() {
				t.Fatal("the machine still pipelines after a failed step")
			}
		})
	}
}

// queueRT is the cpu target's runtime behind a device-like queue: Enqueue copies the
// step and returns, a worker goroutine runs the steps in order, substituting the
// previous step's sampled tokens, and Wait blocks for the worker.
type queueRT struct {
	targets.Runtime
	jobs chan *qjob
	prev []int32
}

type qjob struct {
	in   targets.StepIn
	out  targets.StepOut
	err  error
	done chan struct{}
}

func (q *queueRT) work() {
	for j := range q.jobs {
		for i, t := range j.in.Tokens {
			if r, ok := targets.PreviousRow(t); ok {
				j.in.Tokens[i] = q.prev[r]
			}
		}
		time.Sleep(200 * time.Microsecond) // the device is slower than the host
		j.err = q.Runtime.Step(&j.in, &j.out)
		q.prev = slices.Clone(j.out.Tokens)
		close(j.done)
	}
}

func (q *queueRT) Enqueue(in *targets.StepIn) (targets.Pending, error) {
	j := &qjob{done: make(chan struct{}), in: targets.StepIn{Phase: in.Phase, Seqs: slices.Clone(in.Seqs),
		Tokens: slices.Clone(in.Tokens), Rows: slices.Clone(in.Rows), Sample: slices.Clone(in.Sample)}}
	if in.Masks != nil {
		j.in.Masks = make([][]uint64, len(in.Masks))
		for i, mk := range in.Masks {
			j.in.Masks[i] = slices.Clone(mk)
		}
	}
	j.in.Want = slices.Clone(in.Want)
	q.jobs <- j
	return j, nil
}

func (j *qjob) Wait(out *targets.StepOut) error {
	<-j.done
	*out = j.out
	return j.err
}

func (q *queueRT) Close() error {
	close(q.jobs)
	return q.Runtime.Close()
}

type queueExec struct{ targets.Executor }

func (x queueExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	rt, err := x.Executor.Open(p, w, o)
	if err != nil {
		return nil, err
	}
	q := &queueRT{Runtime: rt, jobs: make(chan *qjob, 2)}
	go q.work()
	return q, nil
}

// TestAsyncQueueRuntime runs random workloads on a runtime whose steps run on another
// goroutine (as a device's do) against the synchronous engine on the plain cpu target:
// the same results, and the host time the overlap hid is measured.
func TestAsyncQueueRuntime(t *testing.T) {
	plain := compileAndLoad(t, compiler.Options{ModelDir: fixtureDir})
	w, err := vm.LoadWeights(plain.Plan, fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := targets.Lookup("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.LoadOn(plain.Plan, w, queueExec{tgt.(targets.Executor)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !m.Overlaps() {
		t.Fatal("a runtime with its own queue does not overlap")
	}
	var hidden time.Duration
	var async int64
	for k := 0; k < 8; k++ {
		wl := workload{seed: int64(100 + k), n: 4 + k, maxSeqs: 3 + k, batch: 64}
		want := runWorkload(t, plain, wl, true, nil)
		got := runWorkload(t, m, wl, false, nil)
		sameRuns(t, fmt.Sprintf("workload %d", k), got, want)
		hidden += got.stats.Hidden
		async += got.stats.AsyncSteps
	}
	if async == 0 || hidden <= 0 {
		t.Fatalf("%d async steps hid %s", async, hidden)
	}
	t.Logf("%d async steps hid %s of host time", async, hidden)
}
