package cuda

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/targets"
)

// Graphs, pipelined steps and the timeline on the emulated device: the fake driver
// captures launches with their argument words copied at capture and replays them, so
// a replay that read anything but its captured arguments would differ here.

func openFixture(t *testing.T, model string, o targets.Options) *Runtime {
	t.Helper()
	p, ws := fixturePlan(t, model)
	rt, err := OpenEmulated(p, ws, o, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// script is a run of steps over a few sequences: a prefill of sequences of different
// lengths, then decode steps whose batch shrinks and grows, some sampled, some asking
// for logits.
type script struct {
	rt     *Runtime
	states []targets.State
	pos    []int
	last   []int32
}

func newScript(t *testing.T, rt *Runtime, n int) *script {
	s := &script{rt: rt, pos: make([]int, n), last: make([]int32, n)}
	for i := 0; i < n; i++ {
		st, err := rt.NewState()
		if err != nil {
			t.Fatal(err)
		}
		s.states = append(s.states, st)
	}
	return s
}

// prefill builds the prefill step of sequences seqs (lengths 3+2i).
func (s *script) prefill(seqs []int) *targets.StepIn {
	V := int32(s.rt.plan.Model.Vocab)
	in := &targets.StepIn{Phase: plan.PhasePrefill}
	for k, i := range seqs {
		n := 3 + 2*i
		for j := 0; j < n; j++ {
			in.Tokens = append(in.Tokens, int32(7*i+13*j+1)%V)
		}
		in.Seqs = append(in.Seqs, targets.SeqIn{State: s.states[i], N: n, Pos: 0})
		in.Rows = append(in.Rows, int32(len(in.Tokens)-1))
		in.Sample = append(in.Sample, sampling(k)...)
		s.pos[i] = n
	}
	return in
}

// decode builds a decode step of seqs, each fed its last token (or, with prev, the
// token its row of the previous step sampled: FromPrevious(row)).
func (s *script) decode(seqs []int, prevRow func(i int) int, want bool) *targets.StepIn {
	in := &targets.StepIn{Phase: plan.PhaseDecode}
	for k, i := range seqs {
		tok := s.last[i]
		if prevRow != nil {
			tok = targets.FromPrevious(prevRow(i))
		}
		in.Tokens = append(in.Tokens, tok)
		in.Seqs = append(in.Seqs, targets.SeqIn{State: s.states[i], N: 1, Pos: s.pos[i]})
		in.Rows = append(in.Rows, int32(k))
		in.Sample = append(in.Sample, sampling(k+s.pos[i])...)
		if want {
			in.Want = append(in.Want, k%2 == 0)
		}
		s.pos[i]++
	}
	return in
}

// sampling is greedy for even k, else a temperature with a fixed draw.
func sampling(k int) []float32 {
	if k%2 == 0 {
		return []float32{0, 0, 0, 0}
	}
	return []float32{0.8, 0.9, 0, float32(k%7) / 7}
}

func (s *script) took(in *targets.StepIn, out *targets.StepOut) {
	for k, sq := range in.Seqs {
		i := slices.Index(s.states, sq.State)
		s.last[i] = out.Tokens[k]
	}
}

// stepper returns a function that runs a step of the script with Step and takes its
// tokens.
func (s *script) stepper(t *testing.T) func(in *targets.StepIn) {
	var out targets.StepOut
	return func(in *targets.StepIn) {
		t.Helper()
		if err := s.rt.Step(in, &out); err != nil {
			t.Fatal(err)
		}
		s.took(in, &out)
	}
}

// batches are the decode steps' sequences.
var batches = [][]int{{0, 1, 2, 3}, {0, 1, 2, 3}, {1, 3}, {0}, {0, 1, 2, 3}, {1, 3}, {2}, {0, 1, 2, 3}}

type trace struct {
	tokens  [][]int32
	logits  [][][]float32
	digests [][32]byte
}

// runSync runs the script with Step.
func runSync(t *testing.T, rt *Runtime) trace {
	s := newScript(t, rt, 4)
	var tr trace
	var out targets.StepOut
	step := func(in *targets.StepIn) {
		if err := rt.Step(in, &out); err != nil {
			t.Fatal(err)
		}
		s.took(in, &out)
		tr.tokens = append(tr.tokens, slices.Clone(out.Tokens))
		var ls [][]float32
		for _, l := range out.Logits {
			ls = append(ls, slices.Clone(l))
		}
		tr.logits = append(tr.logits, ls)
	}
	step(s.prefill([]int{0, 1, 2, 3}))
	for n, b := range batches {
		step(s.decode(b, nil, n%3 == 1))
	}
	for _, st := range s.states {
		tr.digests = append(tr.digests, st.(targets.SavableState).Digest())
	}
	return tr
}

func sameTrace(t *testing.T, what string, got, want trace) {
	t.Helper()
	if len(got.tokens) != len(want.tokens) {
		t.Fatalf("%s: %d steps, want %d", what, len(got.tokens), len(want.tokens))
	}
	for i := range want.tokens {
		if !slices.Equal(got.tokens[i], want.tokens[i]) {
			t.Errorf("%s: step %d tokens %v, want %v", what, i, got.tokens[i], want.tokens[i])
		}
		if len(got.logits[i]) != len(want.logits[i]) {
			t.Errorf("%s: step %d: %d logits rows, want %d", what, i, len(got.logits[i]), len(want.logits[i]))
			continue
		}
		for r := range want.logits[i] {
			g, w := got.logits[i][r], want.logits[i][r]
			if len(g) != len(w) {
				t.Errorf("%s: step %d row %d: %d logits, want %d", what, i, r, len(g), len(w))
				continue
			}
			for j := range w {
				if math.Float32bits(g[j]) != math.Float32bits(w[j]) {
					t.Errorf("%s: step %d row %d logit %d: %v, want %v", what, i, r, j, g[j], w[j])
					break
				}
			}
		}
	}
	for i := range want.digests {
		if got.digests[i] != want.digests[i] {
			t.Errorf("%s: sequence %d's state differs", what, i)
		}
	}
}

// TestGraphsMatchLaunches: steps replayed from graphs give the tokens, logits and
// states of steps launched kernel by kernel, bit for bit, in both numerics modes.
func TestGraphsMatchLaunches(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
		for _, mode := range []string{targets.NumericsExact, targets.NumericsFast} {
			t.Run(model+"/"+mode, func(t *testing.T) {
				o := targets.Options{MaxTokens: 64, Numerics: mode}
				plain := openFixture(t, model, o)
				if err := plain.SetGraphs(false); err != nil {
					t.Fatal(err)
				}
				graphed := openFixture(t, model, o)
				want := runSync(t, plain)
				before := graphed.fake.stats
				got := runSync(t, graphed)
				sameTrace(t, "graphed", got, want)
				g := graphed.GraphStats()
				// shapes: the prefill, and decode batches of 4, 2 and 1
				if !g.On || g.Captured != 4 || g.Replayed != int64(1+len(batches)) || g.Cached != 4 {
					t.Errorf("graph stats %+v: want 4 captured, %d replayed", g, 1+len(batches))
				}
				fs := graphed.fake.stats
				if fs.Captures-before.Captures != 4 || fs.GraphLaunches-before.GraphLaunches != 1+len(batches) {
					t.Errorf("the driver captured %d graphs and launched %d", fs.Captures-before.Captures, fs.GraphLaunches-before.GraphLaunches)
				}
				if p := plain.GraphStats(); p.On || p.Captured != 0 || plain.fake.stats.GraphLaunches != 0 {
					t.Errorf("graphs off, yet %+v", p)
				}
				if !strings.Contains(graphed.Describe(), "graphs on (4 captured") || !strings.Contains(graphed.Describe(), map[bool]string{true: "; packed uploads", false: "; per-parameter uploads"}[graphed.packed]) {
					t.Errorf("Describe: %s", graphed.Describe())
				}
			})
		}
	}
}

// TestGraphCacheBounds: graphs go with the arena they address, the cache keeps at most
// its limit (least recently replayed dropped), and Close destroys the rest.
func TestGraphCacheBounds(t *testing.T) {
	rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 16})
	if rt.graphs.limit != maxGraphs || maxGraphs != 64 {
		t.Fatalf("graph limit %d", rt.graphs.limit)
	}
	rt.graphs.limit = 3
	s := newScript(t, rt, 7)
	step := s.stepper(t)
	step(s.prefill([]int{0, 1})) // 8 tokens
	step(s.decode([]int{0, 1}, nil, false))
	step(s.decode([]int{0}, nil, false))
	if g := rt.GraphStats(); g.Cached != 3 || g.Dropped != 0 {
		t.Fatalf("three shapes: %+v", g)
	}
	step(s.decode([]int{1}, nil, false)) // the same shape as {0}: replayed
	step(s.decode([]int{0, 1}, nil, false))
	step(s.prefill([]int{2})) // a fourth shape drops the least recently replayed (the prefill)
	g := rt.GraphStats()
	if g.Cached != 3 || g.Dropped != 1 || g.Captured != 4 || rt.fake.stats.GraphExecFrees != 1 {
		t.Fatalf("a fourth shape with a limit of 3: %+v, %d destroyed", g, rt.fake.stats.GraphExecFrees)
	}
	for k := range rt.graphs.m {
		if k.phase == plan.PhasePrefill && k.T == 8 {
			t.Error("the least recently replayed graph was kept")
		}
	}
	// a step larger than the arena drops every graph before it runs
	big := s.prefill([]int{3, 4, 5, 6}) // 9+11+13+15 tokens > 16
	arena := rt.maxT
	step(big)
	g = rt.GraphStats()
	if rt.maxT <= arena || g.Cached != 1 || g.Dropped != 4 || rt.fake.stats.GraphExecFrees != 4 {
		t.Fatalf("after the arena grew from %d to %d tokens: %+v", arena, rt.maxT, g)
	}
	d := rt.fake
	rt.Close()
	if d.stats.GraphExecs != d.stats.GraphExecFrees || d.stats.Captures != d.stats.GraphFrees || d.Pinned() != 0 {
		t.Errorf("after Close: %d executables made, %d destroyed; %d graphs, %d destroyed; %d pinned buffers",
			d.stats.GraphExecs, d.stats.GraphExecFrees, d.stats.Captures, d.stats.GraphFrees, d.Pinned())
	}
}

// TestGraphsOff: no graph while a Hook wraps the instructions, while profiling, with
// the kernel timeline, or with DEEPINFER_CUDA_GRAPHS=0.
func TestGraphsOff(t *testing.T) {
	hooked := 0
	for _, c := range []struct {
		name  string
		o     targets.Options
		env   string
		setup func(rt *Runtime)
	}{
		{name: "hook", o: targets.Options{Hook: func(_ string, _ int, _ *plan.Instr, run func() error) error { hooked++; return run() }}},
		{name: "profile", setup: func(rt *Runtime) { rt.SetProfile(true) }},
		{name: "kernel timeline", setup: func(rt *Runtime) { rt.SetTimeline(true, true) }},
		{name: "env", env: "0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(EnvGraphs, c.env)
			}
			c.o.MaxTokens = 32
			rt := openFixture(t, "tiny-v4-dev", c.o)
			if c.setup != nil {
				c.setup(rt)
			}
			s := newScript(t, rt, 2)
			var out targets.StepOut
			for _, in := range []*targets.StepIn{s.prefill([]int{0, 1}), nil} {
				if in == nil {
					in = s.decode([]int{0, 1}, nil, false)
				}
				if err := rt.Step(in, &out); err != nil {
					t.Fatal(err)
				}
				s.took(in, &out)
			}
			if g := rt.GraphStats(); g.Captured != 0 || g.Replayed != 0 || rt.fake.stats.Captures != 0 || rt.fake.stats.Launches == 0 {
				t.Errorf("%+v, %d launches", g, rt.fake.stats.Launches)
			}
			if c.env != "" && rt.GraphStats().On {
				t.Errorf("%s=%s left graphs on", EnvGraphs, c.env)
			}
		})
	}
	if hooked == 0 {
		t.Error("the hook never ran")
	}
}

// runPipelined runs runSync's script with Enqueue/Wait, each decode step enqueued
// before the previous one is waited for and fed the previous step's tokens on the
// device wherever its sequences ran in that step.
func runPipelined(t *testing.T, rt *Runtime) trace {
	s := newScript(t, rt, 4)
	var tr trace
	type inflight struct {
		in *targets.StepIn
		p  targets.Pending
	}
	var q []inflight
	wait := func() {
		t.Helper()
		f := q[0]
		q = q[1:]
		var out targets.StepOut
		if err := f.p.Wait(&out); err != nil {
			t.Fatal(err)
		}
		s.took(f.in, &out)
		tr.tokens = append(tr.tokens, slices.Clone(out.Tokens))
		var ls [][]float32
		for _, l := range out.Logits {
			ls = append(ls, slices.Clone(l))
		}
		tr.logits = append(tr.logits, ls)
	}
	enqueue := func(in *targets.StepIn) {
		t.Helper()
		p, err := rt.Enqueue(in)
		if err != nil {
			t.Fatal(err)
		}
		q = append(q, inflight{in, p})
	}
	prev := []int{0, 1, 2, 3}
	enqueue(s.prefill(prev))
	for n, b := range batches {
		// sequences in the previous step take its row; the others were waited for
		if len(q) == 2 {
			wait()
		}
		in := s.decode(b, nil, n%3 == 1)
		for k, i := range b {
			if r := slices.Index(prev, i); r >= 0 {
				in.Tokens[k] = targets.FromPrevious(r)
			}
		}
		enqueue(in)
		prev = b
	}
	for len(q) > 0 {
		wait()
	}
	for _, st := range s.states {
		tr.digests = append(tr.digests, st.(targets.SavableState).Digest())
	}
	return tr
}

// TestPipelinedMatchesSteps: Enqueue/Wait with FromPrevious tokens equals the Step loop
// token for token (logits and states too), with graphs and without.
func TestPipelinedMatchesSteps(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
		t.Run(model, func(t *testing.T) {
			o := targets.Options{MaxTokens: 64}
			ref := openFixture(t, model, o)
			want := runSync(t, ref)
			rt := openFixture(t, model, o)
			got := runPipelined(t, rt)
			sameTrace(t, "pipelined", got, want)
			if rt.fake.stats.EventSyncs == 0 || rt.GraphStats().Replayed == 0 {
				t.Errorf("the pipelined steps synchronized on %d events and replayed %d graphs", rt.fake.stats.EventSyncs, rt.GraphStats().Replayed)
			}
			if err := rt.SetGraphs(false); err != nil {
				t.Fatal(err)
			}
			sameTrace(t, "pipelined without graphs", runPipelined(t, rt), want)
		})
	}
}

// TestPipelineErrors: misuse gives errors, not panics or hangs, and a failed step
// fails the one enqueued after it.
func TestPipelineErrors(t *testing.T) {
	rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 32})
	s := newScript(t, rt, 3)
	var out targets.StepOut
	p1, err := rt.Enqueue(s.prefill([]int{0, 1}))
	if err != nil {
		t.Fatal(err)
	}
	// a FromPrevious row the previous step did not sample
	bad := s.decode([]int{0}, func(int) int { return 2 }, false)
	if _, err := rt.Enqueue(bad); err == nil || !strings.Contains(err.Error(), "row 2") {
		t.Errorf("FromPrevious(2) after a step of 2 rows: %v", err)
	}
	s.pos[0]--
	p2, err := rt.Enqueue(s.decode([]int{0, 1}, func(i int) int { return i }, false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Enqueue(s.decode([]int{0, 1}, func(i int) int { return i }, false)); err == nil || !strings.Contains(err.Error(), "two steps") {
		t.Errorf("a third pending step: %v", err)
	}
	s.pos[0]--
	s.pos[1]--
	if err := p2.Wait(&out); err == nil {
		t.Error("waiting for the second step before the first succeeded")
	}
	if err := p1.Wait(&out); err != nil || len(out.Tokens) != 2 {
		t.Fatalf("first step: %v, %v", err, out.Tokens)
	}
	if err := p1.Wait(&out); err == nil {
		t.Error("waiting twice succeeded")
	}
	if err := p2.Wait(&out); err != nil || len(out.Tokens) != 2 {
		t.Fatalf("second step: %v, %v", err, out.Tokens)
	}
	// a step with a token outside the vocabulary fails; the one enqueued behind it too
	V := int32(rt.plan.Model.Vocab)
	in := s.decode([]int{0, 1}, nil, false)
	in.Tokens[1] = V + 5
	f1, err := rt.Enqueue(in)
	if err != nil {
		t.Fatal(err)
	}
	f2, err := rt.Enqueue(s.decode([]int{0, 1}, func(i int) int { return i }, false))
	if err != nil {
		t.Fatal(err)
	}
	if err := f1.Wait(&out); err == nil || !strings.Contains(err.Error(), "kernel check failed") {
		t.Errorf("the failed step: %v", err)
	}
	if err := f2.Wait(&out); err == nil || !strings.Contains(err.Error(), "after a failed") {
		t.Errorf("the step behind the failed one: %v", err)
	}
	if _, err := rt.Enqueue(s.prefill([]int{2})); err == nil {
		t.Error("enqueue after a failure succeeded")
	}
	// Step is not poisoned: a fresh sequence runs (the failed ones are unusable)
	if err := rt.Step(s.prefill([]int{2}), &out); err != nil || len(out.Tokens) != 1 {
		t.Errorf("a step after the pipeline failed: %v", err)
	}
	// Step keeps refusing negative tokens (FromPrevious is the pipeline's)
	neg := s.decode([]int{2}, func(int) int { return 0 }, false)
	if err := rt.Step(neg, &out); err == nil {
		t.Error("Step took a FromPrevious token")
	}
	rt.Close()
	if _, err := rt.Enqueue(s.prefill([]int{2})); err == nil {
		t.Error("enqueue on a closed runtime")
	}
	if err := f2.Wait(&out); err == nil {
		t.Error("wait on a closed runtime")
	}
}

// TestTimeline: step spans in order, each after the one before, non-negative; kernel
// spans inside their step's span.
func TestTimeline(t *testing.T) {
	rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 32})
	s := newScript(t, rt, 2)
	step := s.stepper(t)
	step(s.prefill([]int{0, 1})) // before recording: no span
	rt.SetTimeline(true, false)
	for i := 0; i < 3; i++ {
		step(s.decode([]int{0, 1}, nil, false))
	}
	in := s.decode([]int{0, 1}, nil, false)
	p, err := rt.Enqueue(in)
	if err != nil {
		t.Fatal(err)
	}
	var out targets.StepOut
	if err := p.Wait(&out); err != nil {
		t.Fatal(err)
	}
	s.took(in, &out)
	spans, err := rt.TakeTimeline()
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) != 4 {
		t.Fatalf("%d spans for 4 steps", len(spans))
	}
	for i, sp := range spans {
		if sp.Kernel != "" || sp.Class != "" || sp.Phase != plan.PhaseDecode || sp.End.Before(sp.Start) {
			t.Errorf("span %d: %+v", i, sp)
		}
		if i > 0 && (sp.Step != spans[i-1].Step+1 || sp.Start.Before(spans[i-1].End)) {
			t.Errorf("span %d (step %d, %v) overlaps or follows out of order span %d (step %d, %v)", i, sp.Step, sp.Start, i-1, spans[i-1].Step, spans[i-1].End)
		}
	}
	if again, err := rt.TakeTimeline(); err != nil || len(again) != 0 {
		t.Errorf("a second take: %d spans, %v", len(again), err)
	}
	pool := len(rt.tl.pool)
	rt.SetTimeline(true, true)
	step(s.decode([]int{0, 1}, nil, false))
	spans, err = rt.TakeTimeline()
	if err != nil {
		t.Fatal(err)
	}
	if len(spans) < 3 || spans[0].Kernel != "" {
		t.Fatalf("%d spans with kernels", len(spans))
	}
	for i, sp := range spans[1:] {
		if sp.Kernel == "" || sp.Class == "" || sp.Step != spans[0].Step || sp.Start.Before(spans[0].Start) || spans[0].End.Before(sp.End) || sp.End.Before(sp.Start) {
			t.Errorf("kernel span %d: %+v in step %+v", i, sp, spans[0])
		}
		if i > 0 && sp.Start.Before(spans[i].End) {
			t.Errorf("kernel span %d starts before the one before it ends", i+1)
		}
	}
	if len(rt.tl.pool) < pool {
		t.Errorf("the event pool shrank from %d to %d", pool, len(rt.tl.pool))
	}
	rt.SetTimeline(false, false)
	step(s.decode([]int{0, 1}, nil, false))
	if spans, _ := rt.TakeTimeline(); len(spans) != 0 {
		t.Errorf("%d spans with the timeline off", len(spans))
	}
}

// TestPipelineArenaGrowth: a step enqueued behind a pending one that needs a larger
// arena (its FromPrevious token reading the pending step's ids, which move to the new
// arena), and a Step run while a pipelined step is pending, give the Step loop's tokens.
func TestPipelineArenaGrowth(t *testing.T) {
	run := func(rt *Runtime, pipelined bool) [][]int32 {
		s := newScript(t, rt, 4)
		var got [][]int32
		var out targets.StepOut
		pre := s.prefill([]int{0, 1}) // 3 + 5 tokens: the arena's 8
		if err := rt.Step(pre, &out); err != nil {
			t.Fatal(err)
		}
		s.took(pre, &out)
		got = append(got, slices.Clone(out.Tokens))
		d1 := s.decode([]int{0, 1}, nil, false)
		// then sequence 0's next token and sequence 3's 9-token prompt: 10 tokens > 8
		mixed := func(tok int32) *targets.StepIn {
			in := s.decode([]int{0}, nil, false)
			in.Phase = plan.PhasePrefill
			in.Tokens[0] = tok
			p := s.prefill([]int{3})
			in.Tokens = append(in.Tokens, p.Tokens...)
			in.Seqs = append(in.Seqs, p.Seqs...)
			in.Rows = append(in.Rows, p.Rows[0]+1)
			in.Sample = append(in.Sample, p.Sample...)
			return in
		}
		if !pipelined {
			if err := rt.Step(d1, &out); err != nil {
				t.Fatal(err)
			}
			got = append(got, slices.Clone(out.Tokens))
			s.took(d1, &out)
			if err := rt.Step(mixed(s.last[0]), &out); err != nil {
				t.Fatal(err)
			}
			got = append(got, slices.Clone(out.Tokens))
			return got
		}
		p1, err := rt.Enqueue(d1)
		if err != nil {
			t.Fatal(err)
		}
		arena := rt.maxT
		p2, err := rt.Enqueue(mixed(targets.FromPrevious(0)))
		if err != nil {
			t.Fatal(err)
		}
		if rt.maxT <= arena {
			t.Fatalf("the arena did not grow (%d tokens)", rt.maxT)
		}
		// a synchronous step of a fresh sequence while p2 is pending
		st, _ := rt.NewState()
		extra := &targets.StepIn{Phase: plan.PhasePrefill, Tokens: []int32{5, 6, 7}, Rows: []int32{2}, Sample: make([]float32, 4),
			Seqs: []targets.SeqIn{{State: st, N: 3}}}
		if err := rt.Step(extra, &out); err != nil || len(out.Tokens) != 1 {
			t.Fatalf("a Step while a step is pending: %v", err)
		}
		for _, p := range []targets.Pending{p1, p2} {
			if err := p.Wait(&out); err != nil {
				t.Fatal(err)
			}
			got = append(got, slices.Clone(out.Tokens))
		}
		return got
	}
	want := run(openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 8}), false)
	got := run(openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 8}), true)
	if len(got) != 3 || len(want) != 3 {
		t.Fatalf("%d and %d steps", len(got), len(want))
	}
	for i := range want {
		if !slices.Equal(got[i], want[i]) {
			t.Errorf("step %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestGraphCaptureFailureFallsBack: a driver that cannot capture or instantiate a graph
// turns graphs off for the runtime with the reason kept, and every step (the failing one
// too) runs launch by launch with the same results; a launch that fails inside a
// capture is still the step's error.
func TestGraphCaptureFailureFallsBack(t *testing.T) {
	plain := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 64})
	if err := plain.SetGraphs(false); err != nil {
		t.Fatal(err)
	}
	want := runSync(t, plain)
	for _, call := range []string{"cuStreamBeginCapture", "cuGraphInstantiateWithFlags"} {
		t.Run(call, func(t *testing.T) {
			rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 64})
			rt.fake.failAt[call] = rt.fake.calls[call] + 1
			sameTrace(t, "after a failed capture", runSync(t, rt), want)
			g := rt.GraphStats()
			if g.On || g.Captured != 0 || g.Replayed != 0 || !strings.Contains(g.Failed, call) {
				t.Errorf("graph stats %+v: want graphs off with the failure named", g)
			}
			if !strings.Contains(rt.GraphSummary(), "failed capture") {
				t.Errorf("summary: %s", rt.GraphSummary())
			}
		})
	}
	rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 64})
	s := newScript(t, rt, 2)
	rt.fake.failAt["cuLaunchKernel"] = rt.fake.calls["cuLaunchKernel"] + 3
	var out targets.StepOut
	if err := rt.Step(s.prefill([]int{0, 1}), &out); err == nil || !strings.Contains(err.Error(), "instr") {
		t.Errorf("a launch failing in a capture: %v", err)
	}
	if !rt.GraphStats().On {
		t.Errorf("a failed launch turned graphs off: %+v", rt.GraphStats())
	}
}

// TestStateSaveOnDevice: a sequence's state is saved to a second device block and
// restored from it in stream order — no host copy and no wait for the stream — and
// the restore gives back the saved bytes exactly; a restore after a later save is an
// error, and releasing the state frees both blocks.
func TestStateSaveOnDevice(t *testing.T) {
	rt := openFixture(t, "tiny-v41-dev2", targets.Options{MaxTokens: 64})
	live := rt.fake.Live()
	s := newScript(t, rt, 2)
	step := s.stepper(t)
	step(s.prefill([]int{0, 1}))
	st := s.states[0].(*devState)
	before := st.Digest()
	fs := rt.fake.stats
	restore, err := st.Save()
	if err != nil {
		t.Fatal(err)
	}
	step(s.decode([]int{0, 1}, nil, false))
	step(s.decode([]int{0, 1}, nil, false))
	moved := st.Digest()
	if moved == before {
		t.Fatal("two decode steps left the state as it was")
	}
	fs2 := rt.fake.stats
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	fs3 := rt.fake.stats
	if got := st.Digest(); got != before {
		t.Fatal("the restored state differs from the saved one")
	}
	// the save and the restore themselves: no host copies, no waits (the steps between
	// them upload their inputs and read back their tokens)
	if fs3.Uploads != fs2.Uploads || fs3.Downloads != fs2.Downloads || fs3.Syncs != fs2.Syncs {
		t.Errorf("the restore copied %d up, %d down and waited %d times", fs3.Uploads-fs2.Uploads, fs3.Downloads-fs2.Downloads, fs3.Syncs-fs2.Syncs)
	}
	if fs.Allocs+1 > fs2.Allocs {
		t.Errorf("the save allocated no device block")
	}
	fs4 := rt.fake.stats
	again, err := st.Save()
	if err != nil {
		t.Fatal(err)
	}
	if f := rt.fake.stats; f.Uploads != fs4.Uploads || f.Downloads != fs4.Downloads || f.Syncs != fs4.Syncs || f.Allocs != fs4.Allocs {
		t.Errorf("a second save: %+v after %+v (want no host copy, wait or allocation)", f, fs4)
	}
	if err := restore(); err == nil || !strings.Contains(err.Error(), "later save") {
		t.Errorf("restoring a replaced save: %v", err)
	}
	if err := again(); err != nil {
		t.Fatal(err)
	}
	for _, x := range s.states {
		x.Release()
	}
	if got := rt.fake.Live(); got != live {
		t.Errorf("%d bytes live after the states' release, %d before them", got, live)
	}
}

// TestProfileDecodeRange: with EnvProfileDecode=1 the profiler's collection starts once,
// after the prefill's launches and before the first decode step's (graphed or not);
// without it, never.
func TestProfileDecodeRange(t *testing.T) {
	for _, c := range []struct {
		env, graphs string
		starts      int
	}{{"1", "1", 1}, {"1", "0", 1}, {"", "1", 0}} {
		t.Run(fmt.Sprintf("env %q graphs %s", c.env, c.graphs), func(t *testing.T) {
			t.Setenv(EnvProfileDecode, c.env)
			t.Setenv(EnvGraphs, c.graphs)
			rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 32})
			s := newScript(t, rt, 2)
			var out targets.StepOut
			in := s.prefill([]int{0, 1})
			if err := rt.Step(in, &out); err != nil {
				t.Fatal(err)
			}
			s.took(in, &out)
			prefill := rt.fake.stats.Launches
			if rt.fake.stats.ProfilerStarts != 0 || prefill == 0 {
				t.Fatalf("after the prefill: %d starts, %d launches", rt.fake.stats.ProfilerStarts, prefill)
			}
			for range 3 {
				in := s.decode([]int{0, 1}, nil, false)
				if err := rt.Step(in, &out); err != nil {
					t.Fatal(err)
				}
				s.took(in, &out)
			}
			st := rt.fake.stats
			if st.ProfilerStarts != c.starts {
				t.Fatalf("%d profiler starts, want %d", st.ProfilerStarts, c.starts)
			}
			if c.starts > 0 && (st.LaunchesBeforeProfiler != prefill || st.Launches <= prefill) {
				t.Fatalf("started after %d launches (the prefill made %d), %d in all", st.LaunchesBeforeProfiler, prefill, st.Launches)
			}
		})
	}
}
