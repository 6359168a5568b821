package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
)

// timelineRT is the cpu target's runtime with a device timeline: every step is recorded
// on the host clock (its kernels too, when asked), and a fixed pause between steps makes
// the idle gaps known.
type timelineRT struct {
	targets.Runtime
	mu      sync.Mutex
	on      bool
	kernels bool
	steps   int64
	spans   []targets.DeviceSpan
}

func (r *timelineRT) SetTimeline(on, kernels bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.kernels = on, kernels
}

func (r *timelineRT) TakeTimeline() ([]targets.DeviceSpan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.spans
	r.spans = nil
	return s, nil
}

func (r *timelineRT) Step(in *targets.StepIn, out *targets.StepOut) error {
	time.Sleep(50 * time.Microsecond)
	start := time.Now()
	err := r.Runtime.Step(in, out)
	end := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps++
	if r.on {
		if r.kernels {
			mid := start.Add(end.Sub(start) / 2)
			r.spans = append(r.spans,
				targets.DeviceSpan{Step: r.steps, Phase: in.Phase, Class: "matmul", Kernel: "gemm", Start: start, End: mid},
				targets.DeviceSpan{Step: r.steps, Phase: in.Phase, Class: "sample", Kernel: "sample_rows", Start: mid, End: end})
		}
		r.spans = append(r.spans, targets.DeviceSpan{Step: r.steps, Phase: in.Phase, Start: start, End: end})
	}
	return err
}

type timelineExec struct {
	targets.Executor
	rt *timelineRT
}

func (x timelineExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	rt, err := x.Executor.Open(p, w, o)
	if err != nil {
		return nil, err
	}
	x.rt.Runtime = rt
	return x.rt, nil
}

// readTrace parses a trace file and checks that every event is well formed: metadata
// or a complete event with a name, a track, a non-negative start and duration, and each
// track's complete events in start order.
func readTrace(t *testing.T, path string) []traceEvent {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		TraceEvents []traceEvent `json:"traceEvents"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&struct {
		TraceEvents     *[]traceEvent `json:"traceEvents"`
		DisplayTimeUnit string        `json:"displayTimeUnit"`
	}{TraceEvents: &f.TraceEvents}); err != nil {
		t.Fatalf("trace does not parse: %v", err)
	}
	last := map[int]float64{}
	for i, e := range f.TraceEvents {
		switch e.Ph {
		case "M":
			if e.Args["name"] == nil {
				t.Fatalf("event %d: metadata without a name: %+v", i, e)
			}
		case "X":
			if e.Name == "" || e.Pid != tracePid || e.Tid < tidHost || e.Tid > tidDevIdle || e.Ts < 0 || e.Dur < 0 {
				t.Fatalf("event %d is malformed: %+v", i, e)
			}
			if e.Ts < last[e.Tid] {
				t.Fatalf("event %d starts at %.3f µs, before the one before it on track %d (%.3f)", i, e.Ts, e.Tid, last[e.Tid])
			}
			last[e.Tid] = e.Ts
		default:
			t.Fatalf("event %d: phase %q", i, e.Ph)
		}
	}
	return f.TraceEvents
}

func byTrack(evs []traceEvent, tid int) []traceEvent {
	var out []traceEvent
	for _, e := range evs {
		if e.Ph == "X" && e.Tid == tid {
			out = append(out, e)
		}
	}
	return out
}

func TestDeviceGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	dev := []targets.DeviceSpan{
		{Step: 1, Phase: plan.PhasePrefill, Start: at(0), End: at(100)},
		{Step: 2, Phase: plan.PhaseDecode, Start: at(130), End: at(200)},
		{Step: 2, Phase: plan.PhaseDecode, Class: "matmul", Kernel: "gemm", Start: at(140), End: at(190)},
		{Step: 4, Phase: plan.PhaseDecode, Start: at(250), End: at(300)}, // out of order on purpose
		{Step: 3, Phase: plan.PhaseDecode, Start: at(210), End: at(240)},
		{Step: 5, Phase: plan.PhaseDecode, Start: at(295), End: at(330)}, // overlaps the step before
	}
	gaps := deviceGaps(dev)
	want := []struct {
		after, before int64
		us            int
		decode        bool
	}{{1, 2, 30, false}, {2, 3, 10, true}, {3, 4, 10, true}, {4, 5, 0, true}}
	if len(gaps) != len(want) {
		t.Fatalf("%d gaps, want %d", len(gaps), len(want))
	}
	for i, w := range want {
		g := gaps[i]
		if g.after != w.after || g.before != w.before || g.end.Sub(g.start) != time.Duration(w.us)*time.Microsecond || g.decode != w.decode {
			t.Fatalf("gap %d: %+v (%s), want %+v", i, g, g.end.Sub(g.start), w)
		}
	}
	f, sum := buildTrace(nil, dev, true, vm.Stats{Steps: 5})
	if sum.Gaps != 3 || sum.GapP50 != 10*time.Microsecond || sum.GapP90 != 10*time.Microsecond {
		t.Fatalf("summary %+v", sum)
	}
	idle := byTrack(f.TraceEvents, tidDevIdle)
	if len(idle) != 4 || idle[0].Ts != 100 || idle[0].Dur != 30 || idle[3].Dur != 0 {
		t.Fatalf("idle events %+v", idle)
	}
	if k := byTrack(f.TraceEvents, tidDevKernels); len(k) != 1 || k[0].Name != "gemm" || k[0].Ts != 140 || k[0].Dur != 50 {
		t.Fatalf("kernel events %+v", k)
	}
	if !strings.Contains(sum.String(), "median 10.0 µs, p90 10.0 µs (3 gaps)") {
		t.Fatalf("summary line %q", sum.String())
	}
	sum.Overlaps, sum.AsyncSteps, sum.Hidden = true, 4, 100*time.Microsecond
	if !strings.Contains(sum.String(), "hidden by the overlap 100.0 µs in all (25.0 µs per async step)") {
		t.Fatalf("summary line with an overlap: %q", sum.String())
	}
	if _, sum := buildTrace(nil, nil, false, vm.Stats{}); !strings.Contains(sum.String(), "device idle gaps unavailable") || !strings.Contains(sum.String(), "nothing hidden") {
		t.Fatalf("summary line without a timeline: %q", sum.String())
	}
}

// compileDefault writes the embedded default model's plan (cpu target) to a file.
func compileDefault(t *testing.T) (string, *plan.Plan) {
	t.Helper()
	out, err := compiler.Compile(compiler.Options{Target: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	data, err := plan.Encode(out.Plan)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "plan.dip")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, out.Plan
}

// timelineMachine loads the embedded default model on the cpu target behind a runtime
// with a device timeline (timelineRT: at least 50 µs a step).
func timelineMachine(t *testing.T) *vm.Machine {
	t.Helper()
	_, p := compileDefault(t)
	w, err := vm.LoadWeights(p, "")
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := targets.Lookup("cpu")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.LoadOn(p, w, timelineExec{Executor: tgt.(targets.Executor), rt: &timelineRT{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestTraceTimeline runs a batch on a runtime with a device timeline and checks the
// trace: host spans for every step, one device span per step with its kernels, and
// idle gaps that are exactly the time between consecutive device steps.
// TestTraceKernelSummary: with kernel spans (--trace-kernels), the summary names the
// last decode step's launches and kernel time and its longest kernels by name (a span
// without a kernel name by its class; the steps' own spans and the prefill's kernels
// not counted), at most traceTopKernels of them; without kernel spans, no such line.
func TestTraceKernelSummary(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	k := func(step int64, phase, class, kernel string, from, to int) targets.DeviceSpan {
		return targets.DeviceSpan{Step: step, Phase: phase, Class: class, Kernel: kernel, Start: at(from), End: at(to)}
	}
	dev := []targets.DeviceSpan{
		k(4, plan.PhaseDecode, "", "", 0, 100),
		k(4, plan.PhaseDecode, "matmul", "gemm", 0, 10),
		k(4, plan.PhaseDecode, "matmul", "gemm", 10, 30),
		k(4, plan.PhaseDecode, "attention", "attn", 30, 55),
		k(5, plan.PhaseDecode, "", "", 200, 300), // the step itself: not a kernel
		k(5, plan.PhaseDecode, "matmul", "gemm", 200, 205),
		k(5, plan.PhaseDecode, "norm", "rms", 205, 245),
		k(5, plan.PhaseDecode, "matmul", "gemm", 245, 250),
		k(5, plan.PhaseDecode, "rope", "", 250, 257), // named by its class
		k(5, plan.PhaseDecode, "matmul", "gemm", 257, 262),
		k(6, plan.PhasePrefill, "matmul", "gemm", 400, 900), // a later prefill: not counted
	}
	_, sum := buildTrace(nil, dev, true, vm.Stats{Steps: 6})
	want := "\ntrace kernels: decode step 5, 5 launches, 62.0 µs of kernel time; longest: rms 40.0 µs (1), gemm 15.0 µs (3), rope 7.0 µs (1)"
	if got := sum.String(); !strings.HasSuffix(got, want) {
		t.Fatalf("summary %q, want it to end with %q", got, want)
	}
	// more kernels than the line names: the longest traceTopKernels, ties by name
	var many []targets.DeviceSpan
	for i := 0; i < traceTopKernels+3; i++ {
		many = append(many, k(2, plan.PhaseDecode, "c", fmt.Sprintf("k%d", i), 0, 10+i%2))
	}
	_, sum = buildTrace(nil, many, true, vm.Stats{Steps: 2})
	got := sum.String()
	if n := strings.Count(got[strings.Index(got, "longest:"):], "µs ("); n != traceTopKernels {
		t.Fatalf("%d kernels named, want %d: %q", n, traceTopKernels, got)
	}
	if !strings.Contains(got, "longest: k1 11.0 µs (1), k3 11.0 µs (1), k5 11.0 µs (1), k7 11.0 µs (1), k0 10.0 µs (1), k2 10.0 µs (1)") {
		t.Fatalf("order of the named kernels: %q", got)
	}
	// no kernel spans (a plain --trace): no kernel line
	if _, sum := buildTrace(nil, dev[:1], true, vm.Stats{}); strings.Contains(sum.String(), "trace kernels") {
		t.Fatalf("kernel line without kernel spans: %q", sum.String())
	}
}

func TestTraceTimeline(t *testing.T) {
	m := timelineMachine(t)
	path := filepath.Join(t.TempDir(), "trace.json")
	ro := promptRun{ids: []int32{5, 6, 7}, n: 8, maxTokens: 12, maxSeqs: 8, batchTokens: 64, trace: path, kernels: true}
	if _, _, lines, err := runPrompts(m, ro); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(strings.Join(lines, "\n"), "device idle between decode steps median") {
		t.Fatalf("summary: %q", lines)
	}
	evs := readTrace(t, path)
	steps := byTrack(evs, tidDevSteps)
	if len(steps) != 12 || steps[0].Name != "prefill step" || steps[1].Name != "decode step" {
		t.Fatalf("%d device steps (%v), want the prompts' and 11 decode steps", len(steps), steps)
	}
	if k := byTrack(evs, tidDevKernels); len(k) != 2*len(steps) {
		t.Fatalf("%d kernel events for %d steps", len(k), len(steps))
	}
	idle := byTrack(evs, tidDevIdle)
	if len(idle) != len(steps)-1 {
		t.Fatalf("%d idle events for %d steps", len(idle), len(steps))
	}
	for i, g := range idle {
		want := steps[i+1].Ts - (steps[i].Ts + steps[i].Dur)
		if d, e := g.Dur-want, g.Ts-(steps[i].Ts+steps[i].Dur); d > 0.01 || d < -0.01 || e > 0.01 || e < -0.01 {
			t.Fatalf("gap %d: %+v, want %.3f µs from the end of step %d", i, g, want, i)
		}
		if g.Dur < 50 {
			t.Fatalf("gap %d is %.1f µs, under the runtime's 50 µs pause", i, g.Dur)
		}
	}
	names := map[string]int{}
	for _, e := range byTrack(evs, tidHost) {
		names[e.Name]++
	}
	for _, n := range []string{"schedule", "prepare", "step", "wait", "tokens"} {
		if names[n] == 0 {
			t.Fatalf("no %q host span: %v", n, names)
		}
	}
	if names["tokens"] != 12 {
		t.Fatalf("%d tokens spans for 12 steps", names["tokens"])
	}
}

// TestRunTraceCPU drives divm run with --trace on the cpu target, which records no
// device timeline: the trace holds host spans only and the summary says so.
func TestRunTraceCPU(t *testing.T) {
	path, _ := compileDefault(t)
	tr := filepath.Join(t.TempDir(), "t.json")
	var out bytes.Buffer
	err := runCmd([]string{path, "--prompt-ids", "1,2,3", "--repeat", "6", "--max-tokens", "10", "--ignore-eos", "--trace", tr}, &out)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"finish: 6 requests", "60 generated tokens", "scheduler: 10 steps, 8 async and 2 synchronous",
		"device idle gaps unavailable", "engine host time per step median"} {
		if !strings.Contains(s, want) {
			t.Fatalf("output lacks %q:\n%s", want, s)
		}
	}
	evs := readTrace(t, tr)
	if len(byTrack(evs, tidDevSteps))+len(byTrack(evs, tidDevIdle))+len(byTrack(evs, tidDevKernels)) != 0 {
		t.Fatal("device events in a cpu-target trace")
	}
	if host := byTrack(evs, tidHost); len(host) < 30 {
		t.Fatalf("%d host spans for 10 steps", len(host))
	}
	t.Setenv("DEEPINFER_ASYNC", "0")
	out.Reset()
	if err := runCmd([]string{path, "--prompt-ids", "1,2,3", "--repeat", "6", "--max-tokens", "10", "--ignore-eos"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "0 async and 10 synchronous") {
		t.Fatalf("DEEPINFER_ASYNC=0:\n%s", out.String())
	}
	t.Setenv("DEEPINFER_ASYNC", "maybe")
	if err := runCmd([]string{path, "--prompt-ids", "1"}, &out); err == nil || !strings.Contains(err.Error(), "DEEPINFER_ASYNC") {
		t.Fatalf("a bad DEEPINFER_ASYNC: %v", err)
	}
	if err := runCmd([]string{path, "--prompt-ids", "1", "--trace-kernels"}, &out); err == nil || !strings.Contains(err.Error(), "--trace") {
		t.Fatalf("--trace-kernels without --trace: %v", err)
	}
}

// lockedBuffer is a bytes.Buffer safe for a writer goroutine and a reader.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRunProgress: divm run reports a run that is still going — a line each interval
// with the steps run so far — and stops reporting when the run ends.
func TestRunProgress(t *testing.T) {
	if got, want := progressLine(vm.Stats{Running: 3, Queued: 2, Steps: 40, Tokens: 90}, 18*time.Second, 8),
		"divm run: 18s: 40 steps, 90 tokens run (5.0 a second); 3 requests running, 2 waiting, 3 of 8 done"; got != want {
		t.Fatalf("progress line %q, want %q", got, want)
	}
	m := timelineMachine(t) // 50 µs a step at least
	var buf lockedBuffer
	ro := promptRun{ids: []int32{5, 6, 7}, n: 8, maxTokens: 12, maxSeqs: 8, batchTokens: 64, progress: &buf, progressEvery: 100 * time.Microsecond}
	if _, _, _, err := runPrompts(m, ro); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "divm run: ") || !strings.Contains(lines[0], " steps, ") || !strings.Contains(lines[0], "of 8 done") {
		t.Fatalf("progress: %q", buf.String())
	}
	after := buf.String()
	time.Sleep(5 * time.Millisecond)
	if buf.String() != after {
		t.Fatal("progress lines after the run ended")
	}
}
