package cuda_test

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"deepinfer/internal/vmtest"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
)

// devExec opens plans on the emulated device, or with -device gpu on the GPU.
type devExec struct{ targets.Target }

func (devExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	if *device == "gpu" {
		return cuda.Open(p, w, o)
	}
	return cuda.OpenEmulated(p, w, o, 4<<30)
}

// loadDevice compiles a fixture for h200 and opens it on the device.
func loadDevice(t *testing.T, model string, o targets.Options) *vm.Machine {
	t.Helper()
	return loadWith(t, model, func(tg targets.Target) targets.Executor { return devExec{tg} }, o)
}

// loadWith compiles a fixture for h200 and opens it on the executor exec makes.
func loadWith(t *testing.T, model string, exec func(targets.Target) targets.Executor, o targets.Options) *vm.Machine {
	t.Helper()
	p, ws := cuda.CompileDir(t, "../../testdata/"+model)
	tg, err := targets.Lookup("h200")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.LoadOn(p, ws, exec(tg), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// devRequests are prompts of the fixture's cases as greedy requests keeping every
// logits row, plus seeded sampled ones.
func devRequests(t *testing.T, model string, n, maxTokens int) []vm.Request {
	t.Helper()
	cases, err := vm.ReadCases(filepath.Join("../../testdata", model, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range cases.Cases {
		names = append(names, k)
	}
	slices.Sort(names)
	var reqs []vm.Request
	for i := 0; len(reqs) < n; i++ {
		c := cases.Cases[names[i%len(names)]]
		p := c.InputIDs[:min(len(c.InputIDs), 12+i)]
		r := vm.Request{ID: fmt.Sprintf("r%d", len(reqs)), Prompt: p, MaxTokens: maxTokens, KeepLogits: true}
		if len(reqs)%2 == 1 {
			r.Sampling = vm.Sampling{Temperature: 0.8, TopP: 0.9, Seed: uint64(7 + i)}
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// TestDeviceSpeculation runs DSpark speculation on the device (emulated here; the GPU
// with -device gpu) with forced drafts — a right prefix, then a wrong token — so every
// group is partly rejected and rolled back: every request's tokens and every logits
// row equal plain decoding's bit for bit, greedy and sampled (exact-match
// verification). The state block's raw bytes are not compared: a multi-row step leaves
// dead bytes (open-group slots it never needed) that one-row steps write, so equal
// states can differ there; the cpu target's test compares every kind of state
// logically (vm TestSpeculativeForcedDrafts).
func TestDeviceSpeculation(t *testing.T) {
	for _, model := range []string{"tiny-v41-dev2"} {
		t.Run(model, func(t *testing.T) {
			m := loadDevice(t, model, targets.Options{MaxTokens: 256})
			reqs := devRequests(t, model, 4, 10)
			plain := vmtest.RunAll(t, &vm.Engine{M: m}, reqs)
			groups, partial := 0, 0
			spec := &vm.Speculation{MaxDraft: 4, Exact: true}
			spec.Override = func(r *vm.Request, gen, drafted []int32) []int32 {
				want := plain[slices.IndexFunc(reqs, func(q vm.Request) bool { return q.ID == r.ID })].Tokens
				var d []int32
				for j := len(gen); j < len(want) && len(d) < 4; j++ {
					tok := want[j]
					if len(d) == 2 {
						tok = (tok + 1) % int32(m.Plan.Model.Vocab)
					}
					d = append(d, tok)
				}
				return d
			}
			spec.OnGroup = func(r *vm.Request, drafted, accepted int, s *vm.Sequence) {
				groups++
				if accepted < drafted {
					partial++
				}
			}
			vmtest.SameResults(t, "speculative", vmtest.RunAll(t, &vm.Engine{M: m, Spec: spec}, reqs), plain)
			if groups == 0 || partial == 0 {
				t.Fatalf("%d groups, %d partly accepted: the rollback was not exercised", groups, partial)
			}
			t.Logf("%d verify groups, %d rolled back, on %s", groups, partial, m.Describe())
		})
	}
}

// TestDeviceBatchInvariance: in batch-invariant mode on the device, every request's
// tokens and logits are the same alone and in a batch with chunked prefill (7-token
// steps), with and without speculation, in both numerics modes (the fast mode's
// products slice the reduction by the weight's shape alone).
func TestDeviceBatchInvariance(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
		for _, mode := range []string{targets.NumericsExact, targets.NumericsFast} {
			t.Run(model+"/"+mode, func(t *testing.T) { checkDeviceInvariance(t, model, mode) })
		}
	}
}

func checkDeviceInvariance(t *testing.T, model, mode string) {
	{
		{
			m := loadDevice(t, model, targets.Options{MaxTokens: 256, Invariant: true, Numerics: mode})
			reqs := devRequests(t, model, 6, 6)
			alone := make([]vm.Result, len(reqs))
			for i, r := range reqs {
				alone[i] = vmtest.RunAll(t, &vm.Engine{M: m, MaxSeqs: 1, MaxBatchTokens: 256}, []vm.Request{r})[0]
			}
			schedules := []*vm.Engine{
				{M: m, MaxBatchTokens: 256, MaxSeqs: 64},
				{M: m, MaxBatchTokens: 7, MaxSeqs: 4},
			}
			if m.CanDraft() {
				schedules = append(schedules, &vm.Engine{M: m, MaxBatchTokens: 7, MaxSeqs: 64, Spec: &vm.Speculation{MaxDraft: 3, Exact: true}})
			}
			for i, e := range schedules {
				vmtest.SameResults(t, fmt.Sprintf("schedule %d", i), vmtest.RunAll(t, e, reqs), alone)
			}
		}
	}
}

// capExec opens plans on the emulated device and keeps the runtime, for its driver's
// counts.
type capExec struct {
	targets.Target
	rt **cuda.Runtime
}

func (c capExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	rt, err := cuda.OpenEmulated(p, w, o, 4<<30)
	*c.rt = rt
	return rt, err
}

// TestSpeculationHostTraffic: speculation's rollbacks stay on the device. 16 greedy
// requests whose drafts are all rejected (random fixture weights) run 160 verify groups,
// each saved and restored; the run's host copies and stream waits must not grow with
// the groups (measured: 48 waits and 75 KB for 160 groups of a 22 KB block) — until run 27 each group copied the state block to the host and back with
// a wait each way (on this fixture 368 waits and 7.2 MB for 160 groups; on V4.1 at batch
// 256 on the H200, about 1 MB a sequence each way).
func TestSpeculationHostTraffic(t *testing.T) {
	var rt *cuda.Runtime
	m := loadWith(t, "tiny-v41-dev2", func(tg targets.Target) targets.Executor { return capExec{tg, &rt} }, targets.Options{MaxTokens: 512})
	var reqs []vm.Request
	for _, r := range devRequests(t, "tiny-v41-dev2", 16, 12) {
		r.KeepLogits, r.Sampling = false, vm.Sampling{}
		reqs = append(reqs, r)
	}
	before := cuda.DriverStats(rt)
	e := &vm.Engine{M: m, Spec: &vm.Speculation{MaxDraft: 4}, MaxSeqs: 64}
	vmtest.RunAll(t, e, reqs)
	after := cuda.DriverStats(rt)
	groups := e.SpecStats().Groups
	if groups < 100 || e.SpecStats().Accepted == e.SpecStats().Drafted {
		t.Fatalf("%d verify groups, %d of %d drafts accepted: want many groups rolled back", groups, e.SpecStats().Accepted, e.SpecStats().Drafted)
	}
	syncs := int64(after.Syncs - before.Syncs)
	bytes := int64(after.UploadBytes-before.UploadBytes) + int64(after.DownloadBytes-before.DownloadBytes)
	state := rt.Info().StateBytes
	if syncs >= groups/3 || bytes >= groups*state/40 {
		t.Errorf("%d verify groups (state block %d bytes): %d stream waits, %d bytes copied to and from the host; want fewer waits than a third of the groups and under a 40th of a block a group",
			groups, state, syncs, bytes)
	}
	t.Logf("%d verify groups: %d stream waits, %d bytes to and from the host", groups, syncs, bytes)
}

// TestGraphAfter: with DEEPINFER_CUDA_GRAPH_AFTER=3 a step shape is launched kernel by
// kernel at its first two steps and captured at its third, so speculation's one-off
// shapes (verify and rebuild groups that follow the acceptance) capture nothing; the
// tokens and logits are those of steps launched one by one; a bad value is an error.
func TestGraphAfter(t *testing.T) {
	model := "tiny-v41-dev2"
	o := targets.Options{MaxTokens: 256}
	reqs := devRequests(t, model, 8, 20)
	spec := func(plain []vm.Result) *vm.Speculation {
		s := &vm.Speculation{MaxDraft: 4, Exact: true}
		s.Override = func(r *vm.Request, gen, drafted []int32) []int32 {
			want := plain[slices.IndexFunc(reqs, func(q vm.Request) bool { return q.ID == r.ID })].Tokens
			good := (len(gen)*7 + len(r.ID)) % 5 // a prefix of 0-4 right drafts, then a wrong one
			var d []int32
			for j := len(gen); j < len(want) && len(d) < 4; j++ {
				tok := want[j]
				if len(d) == good {
					tok = (tok + 1) % 100
				}
				d = append(d, tok)
			}
			return d
		}
		return s
	}
	// the machine's description carries the runtime's graph summary
	counts := regexp.MustCompile(`graphs on \((\d+) captured, (\d+) steps replayed(?:; a shape captured at its step (\d+), (\d+) steps launched one by one before)?\)`)
	run := func(after string) (res []vm.Result, captured, replayed, waiting int) {
		t.Setenv(cuda.EnvGraphAfter, after)
		m := loadDevice(t, model, o)
		plain := vmtest.RunAll(t, &vm.Engine{M: m}, reqs)
		res = vmtest.RunAll(t, &vm.Engine{M: m, Spec: spec(plain)}, reqs)
		vmtest.SameResults(t, "speculative, graphs after "+after, res, plain)
		c := counts.FindStringSubmatch(m.Describe())
		if c == nil {
			t.Fatalf("no graph summary in %q", m.Describe())
		}
		atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
		if after != "" && c[3] != after {
			t.Errorf("summary %q: want a shape captured at its step %s", c[0], after)
		}
		return res, atoi(c[1]), atoi(c[2]), atoi(c[4])
	}
	first, c1, r1, w1 := run("")
	third, c3, r3, w3 := run("3")
	vmtest.SameResults(t, "graphs after 3 against 1", third, first)
	// (the counts docs/cuda.md quotes: the same steps, 5 captures against 3)
	if c1 != 5 || r1 != 29 || w1 != 0 || c3 != 3 || r3 != 20 || w3 != 9 {
		t.Errorf("graphs at first sight: %d captured, %d replayed; at the third: %d captured, %d replayed, %d launched one by one; documented 5, 29; 3, 20, 9", c1, r1, c3, r3, w3)
	}
	t.Logf("at first sight: %d captured, %d replayed; at the third: %d captured, %d replayed, %d launched one by one", c1, r1, c3, r3, w3)
	for _, bad := range []string{"0", "x", "-2"} {
		t.Setenv(cuda.EnvGraphAfter, bad)
		p, ws := cuda.CompileDir(t, "../../testdata/"+model)
		if _, err := (devExec{}).Open(p, ws, o); err == nil || !strings.Contains(err.Error(), cuda.EnvGraphAfter) {
			t.Errorf("%s=%s: %v", cuda.EnvGraphAfter, bad, err)
		}
	}
}
