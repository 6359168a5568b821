package stepbench_test

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets"
	_ "deepinfer/targets/all"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
	"deepinfer/vm/stepbench"
)

func compile(t *testing.T, fixture, target string) *plan.Plan {
	t.Helper()
	out, err := compiler.Compile(compiler.Options{ModelDir: "../../testdata/" + fixture, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	return out.Plan
}

// TestDecodeBytesTinyV4 checks the byte count against the fixture's config, counted by
// hand: 4 layers (HCA rate 8, CSA rate 4, HCA, CSA), window 8 (a ring of 7 rows),
// head_dim 32 and index_head_dim 16 in float32, index top-4, 8 experts top-2.
func TestDecodeBytesTinyV4(t *testing.T) {
	p := compile(t, "tiny-v4-dev", "h200")
	const ctx = 64
	// per sequence: rings 4·7·32·4; HCA 2·(64/8)·128; CSA attends min(16, 4)·128 and
	// scores 16 index keys of 64 bytes, twice
	kvPerSeq := 4*7*128 + 2*(ctx/8)*128 + 2*(4*128+(ctx/4)*64)
	var all, experts, embedRow float64
	for i := range p.Weights {
		w := &p.Weights[i]
		n := float64(w.Elems() * int64(w.DType.Size()))
		all += n
		switch {
		case strings.Contains(w.Name, ".experts."):
			experts += n
		case strings.Contains(w.Name, "embed_tokens"):
			embedRow = n / float64(w.Shape[0])
			all -= n
		}
	}
	for _, B := range []int{1, 3, 50} {
		b := stepbench.DecodeBytes(p, B, ctx)
		var kv, wt float64
		for _, v := range b.KV {
			kv += v
		}
		for _, v := range b.Weights {
			wt += v
		}
		if want := float64(B * kvPerSeq); kv != want {
			t.Errorf("batch %d: KV %v bytes, want %v", B, kv, want)
		}
		touched := 1 - math.Pow(1-2.0/8, float64(B)) // expected share of the 8 experts
		want := all - experts + experts*touched + float64(B)*embedRow
		if math.Abs(wt-want) > 1e-6*want {
			t.Errorf("batch %d: weights %v bytes, want %v", B, wt, want)
		}
		if got := b.Total(); math.Abs(got-(kv+wt)) > 1e-9*got {
			t.Errorf("Total %v != %v", got, kv+wt)
		}
	}
	if e := stepbench.ExpectedExperts(256, 6, 1); e != 6 {
		t.Errorf("one token touches %v of 256 experts top-6, want 6", e)
	}
	if e := stepbench.ExpectedExperts(256, 6, 256); e < 255.3 || e > 255.5 {
		t.Errorf("256 tokens touch %v of 256 experts top-6, want 256·(1−(250/256)^256) ≈ 255.4", e)
	}
}

type emulated struct{ targets.Target }

func (emulated) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	return cuda.OpenEmulated(p, w, o, 4<<30)
}

// TestRunOnEmulatedDevice runs the grid on the emulated device: contexts copied from
// one prefilled sequence, the copy bandwidth and per-kernel times measured, and a
// batch's steps equal to what the same sequences give when each is prefilled alone.
func TestRunOnEmulatedDevice(t *testing.T) {
	m := emulatedMachine(t)
	var progress bytes.Buffer
	cfg := stepbench.Config{Batches: []int{1, 3}, Contexts: []int{12, 30}, Warmup: 1, Steps: 3, ProfileSteps: 2, Chunk: 8,
		CopyBytes: 1 << 20, Seed: 5, Progress: &progress}
	rep, err := stepbench.Run(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 4 || len(rep.CopyBW) != 2 || rep.CopyBWMedian() <= 0 {
		t.Fatalf("%d points, copy bandwidth %v", len(rep.Points), rep.CopyBW)
	}
	for _, pt := range rep.Points {
		if len(pt.StepMs) != 3 || pt.MedianMs <= 0 {
			t.Errorf("batch %d context %d: steps %v", pt.Batch, pt.Context, pt.StepMs)
		}
		if pt.ClassMs["deepgemm.m_grouped_fp8_gemm_nt_masked"] <= 0 || pt.ClassMs["flashmla.sparse_decode"] <= 0 {
			t.Errorf("batch %d context %d: no time for the expert GEMM or attention: %v", pt.Batch, pt.Context, pt.ClassMs)
		}
		if pt.Bytes.Total() <= 0 {
			t.Errorf("no bytes")
		}
		checkCensus(t, m, &pt)
		// the device timeline of the timed steps: steps of some length, gaps between
		if pt.DeviceMs <= 0 || pt.DeviceMs > pt.MedianMs*10 || pt.GapUs < 0 {
			t.Errorf("batch %d context %d: device step %.3f ms, idle gap %.1f µs (step %.3f ms)", pt.Batch, pt.Context, pt.DeviceMs, pt.GapUs, pt.MedianMs)
		}
		// every launch of the experts' instruction is timed, and each class's launches
		// fit in the class's own time (they are intervals inside it)
		if pt.LaunchMs["deepgemm.m_grouped_fp8_gemm_nt_masked: moe_out"] <= 0 {
			t.Errorf("batch %d context %d: no launch time for moe_out: %v", pt.Batch, pt.Context, pt.LaunchMs)
		}
		// each timed launch has its count a step: the same launches every decode step of
		// a point, so whole numbers over the two profiled steps
		if len(pt.LaunchCalls) != len(pt.LaunchMs) {
			t.Errorf("batch %d context %d: %d launch counts for %d launch times", pt.Batch, pt.Context, len(pt.LaunchCalls), len(pt.LaunchMs))
		}
		for k := range pt.LaunchMs {
			if c := pt.LaunchCalls[k]; c < 1 || c != math.Round(c) {
				t.Errorf("batch %d context %d: %s launched %v times a step", pt.Batch, pt.Context, k, c)
			}
		}
		perClass := map[string]float64{}
		for k, ms := range pt.LaunchMs {
			c, _, _ := strings.Cut(k, ": ")
			perClass[c] += ms
		}
		for c, ms := range perClass {
			if ms > pt.ClassMs[c]*1.0001 {
				t.Errorf("batch %d context %d: launches of %s take %.3f ms, the class %.3f ms", pt.Batch, pt.Context, c, ms, pt.ClassMs[c])
			}
		}
	}
	var table bytes.Buffer
	rep.Table(&table)
	for _, pt := range rep.Points {
		if pt.PrefillSeconds <= 0 || math.Abs(pt.PrefillTFLOPS-stepbench.PrefillFLOPs(m.Plan, pt.Context)/pt.PrefillSeconds/1e12) > 1e-9*pt.PrefillTFLOPS {
			t.Errorf("batch %d context %d: prefill %g s, %g TFLOP/s", pt.Batch, pt.Context, pt.PrefillSeconds, pt.PrefillTFLOPS)
		}
	}
	if !strings.HasPrefix(rep.Graphs, "graphs on (") || strings.Contains(rep.Graphs, " 0 steps replayed") {
		t.Errorf("graphs: %q", rep.Graphs)
	}
	// the device's description is the run's too (it was the open's: "0 captured")
	if !strings.Contains(rep.Device, rep.Graphs) {
		t.Errorf("device %q does not carry the run's graphs %q", rep.Device, rep.Graphs)
	}
	for _, want := range []string{"graphs on", "idle gap us", "experts touched", "copy bandwidth", "of copy", "deepgemm.m_grouped_fp8_gemm_nt_masked", "sum of kernels", "longest launched kernels", "launches a step, ", "TFLOP/s of products"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// the prefill profile: every context built again with events, its classes' device
	// times inside the build's wall time, the attention and expert kernels among them
	pcfg := cfg
	pcfg.Batches, pcfg.ProfileSteps, pcfg.ProfilePrefill = []int{1}, 0, true
	prep, err := stepbench.Run(m, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(prep.Prefill) != 2 || prep.Prefill[0].Context != 12 || prep.Prefill[1].Context != 30 {
		t.Fatalf("prefill profiles %+v", prep.Prefill)
	}
	for _, pp := range prep.Prefill {
		var sum float64
		for _, ms := range pp.ClassMs {
			sum += ms
		}
		if pp.ClassMs["flashmla.sparse_prefill"] <= 0 || pp.ClassMs["deepgemm.m_grouped_fp8_gemm_nt_contiguous"] <= 0 || sum > pp.Seconds*1e3 || pp.Chunk != 8 {
			t.Errorf("context %d: classes %v (sum %.3f ms) in a %.3f s build", pp.Context, pp.ClassMs, sum, pp.Seconds)
		}
		if pp.LaunchMs["deepgemm.m_grouped_fp8_gemm_nt_contiguous: moe_out"] <= 0 {
			t.Errorf("context %d: no launch time for moe_out: %v", pp.Context, pp.LaunchMs)
		}
	}
	var ptable bytes.Buffer
	prep.Table(&ptable)
	if !strings.Contains(ptable.String(), "prefill of one 30-token sequence in chunks of 8, by kernel class") {
		t.Errorf("table lacks the prefill profile:\n%s", ptable.String())
	}
	if len(rep.Prefill) != 0 {
		t.Errorf("prefill profiles without ProfilePrefill: %d", len(rep.Prefill))
	}
	// --graphs=false: the same steps without graphs
	off := cfg
	off.NoGraphs, off.Batches, off.Contexts, off.ProfileSteps = true, []int{2}, []int{12}, 0
	rep, err = stepbench.Run(m, off)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Graphs, "graphs off") {
		t.Errorf("with NoGraphs: %q", rep.Graphs)
	}
	// a context past what the machine holds is refused before anything runs
	cfg.Contexts = []int{58}
	if _, err := stepbench.Run(m, cfg); err == nil || !strings.Contains(err.Error(), "holds 60") {
		t.Errorf("context past MaxContext: err %v", err)
	}
}

// checkCensus: the point's expert census names every moe_experts instruction of the
// decode program, each token's top-k experts distinct (one token: exactly k), at most
// min(E, batch·k) in all, the most slots an expert had between ⌈batch·k/E⌉ and batch; its bytes differ from the expectation's only in the experts'
// class, by the experts' weights at the touched count.
func checkCensus(t *testing.T, m *vm.Machine, pt *stepbench.Point) {
	t.Helper()
	pr := m.Plan.Program(plan.PhaseDecode)
	var moe []int
	k := 0
	for i, in := range pr.Instrs {
		switch in.Op {
		case "moe_experts":
			moe = append(moe, i)
		case "moe_route":
			v, _ := in.Attrs.Int("topk")
			k = int(v)
		}
	}
	if len(pt.Experts) != len(moe) || pt.BytesTouched == nil || k == 0 {
		t.Fatalf("batch %d: census %+v for moe_experts instructions %v (top-%d), bytes %v", pt.Batch, pt.Experts, moe, k, pt.BytesTouched)
	}
	touched := map[int]float64{}
	for j, e := range pt.Experts {
		if e.Instr != moe[j] || e.Touched != math.Round(e.Touched) || e.Touched < float64(k) || e.Touched > float64(min(e.Experts, pt.Batch*k)) ||
			(pt.Batch == 1 && e.Touched != float64(k)) || e.Expected != stepbench.ExpectedExperts(e.Experts, k, pt.Batch) ||
			e.MaxSlots < (pt.Batch*k+e.Experts-1)/e.Experts || e.MaxSlots > pt.Batch {
			t.Errorf("batch %d: census entry %+v (top-%d)", pt.Batch, e, k)
		}
		touched[e.Instr] = e.Touched
	}
	want := stepbench.DecodeBytesTouched(m.Plan, pt.Batch, pt.Context, touched)
	if !reflect.DeepEqual(want, *pt.BytesTouched) {
		t.Errorf("batch %d: bytes with the experts touched %v, want %v", pt.Batch, *pt.BytesTouched, want)
	}
	for c, v := range pt.Bytes.Weights {
		if c != "deepgemm.m_grouped_fp8_gemm_nt_masked" && pt.BytesTouched.Weights[c] != v {
			t.Errorf("batch %d: class %s's bytes moved with the census: %g → %g", pt.Batch, c, v, pt.BytesTouched.Weights[c])
		}
	}
	if pt.Batch == 1 && pt.BytesTouched.Total() != pt.Bytes.Total() {
		t.Errorf("batch 1: one token's experts are the expectation's, bytes %g against %g", pt.BytesTouched.Total(), pt.Bytes.Total())
	}
}

// TestCopySequence: a copied sequence continues exactly as its source does.
func TestCopySequence(t *testing.T) {
	p := compile(t, "tiny-v4-dev", "h200")
	ws, err := vm.LoadWeights(p, "../../testdata/tiny-v4-dev")
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := targets.Lookup("h200")
	m, err := vm.LoadOn(p, ws, emulated{tg}, targets.Options{MaxTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	a, _ := m.NewSequence()
	b, _ := m.NewSequence()
	defer a.Release()
	defer b.Release()
	if _, err := m.Forward([]vm.Chunk{{Seq: a, Tokens: []int32{5, 6, 7, 8, 9, 10, 11, 12, 13}}}); err != nil {
		t.Fatal(err)
	}
	if err := m.CopySequence(b, a); err != nil {
		t.Fatal(err)
	}
	if a.Len() != b.Len() {
		t.Fatalf("lengths %d and %d", a.Len(), b.Len())
	}
	out, err := m.Forward([]vm.Chunk{{Seq: a, Tokens: []int32{20}, WantLogits: true, Decode: true}, {Seq: b, Tokens: []int32{20}, WantLogits: true, Decode: true}})
	if err != nil {
		t.Fatal(err)
	}
	for i, x := range out[0].Logits[0] {
		if x != out[1].Logits[0][i] {
			t.Fatalf("logit %d: %v (source) vs %v (copy)", i, x, out[1].Logits[0][i])
		}
	}
	cpu, err := vm.Load(compile(t, "tiny-v4-dev", "cpu"), ws)
	if err != nil {
		t.Fatal(err)
	}
	defer cpu.Close()
	c, _ := cpu.NewSequence()
	d, _ := cpu.NewSequence()
	if err := cpu.CopySequence(d, c); err == nil {
		t.Errorf("the cpu target copied a state; want the error saying it cannot")
	}
}

// TestPrefillFLOPs: the product count of a prefill, against a count of the manifest's
// matrices by name (each weight's share: every token's row, the routed experts' k of
// E, the LM head once, the embeddings none), and linear in the tokens but for the head.
func TestPrefillFLOPs(t *testing.T) {
	for _, fixture := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
		p := compile(t, fixture, "h200")
		k, E := 0.0, 0.0
		for _, pr := range p.Programs {
			if pr.Phase != plan.PhasePrefill {
				continue
			}
			for _, in := range pr.Instrs {
				if in.Op == "moe_route" {
					v, _ := in.Attrs.Int("topk")
					k = float64(v)
				}
				if in.Op == "moe_experts" {
					v, _ := in.Attrs.Int("experts")
					E = float64(v)
				}
			}
		}
		if k == 0 || E == 0 {
			t.Fatalf("%s: no routed experts found", fixture)
		}
		// the matrices the prefill program reads
		used := map[int]bool{}
		for _, pr := range p.Programs {
			if pr.Phase != plan.PhasePrefill {
				continue
			}
			for _, in := range pr.Instrs {
				for _, a := range in.Args {
					if a.Kind == plan.OpWeight {
						used[a.Index] = true
					}
				}
			}
		}
		const T = 100
		want := 0.0
		for i, w := range p.Weights {
			if !used[i] || len(w.Shape) != 2 {
				continue
			}
			m := 2 * float64(w.Shape[0]*w.Shape[1])
			switch {
			case strings.Contains(w.Name, "embed"):
			case w.Name == "head.weight":
				want += m
			case strings.Contains(w.Name, ".experts."):
				want += m * T * k / E
			default:
				want += m * T
			}
		}
		got := stepbench.PrefillFLOPs(p, T)
		if math.Abs(got-want) > 1e-9*want || got <= 0 {
			t.Errorf("%s: %g FLOPs, the manifest's matrices give %g", fixture, got, want)
		}
		f1, f2, f3 := stepbench.PrefillFLOPs(p, 1000), stepbench.PrefillFLOPs(p, 2000), stepbench.PrefillFLOPs(p, 3000)
		if d1, d2 := f2-f1, f3-f2; math.Abs(d1-d2) > 1e-9*d1 || d1 <= 0 {
			t.Errorf("%s: not linear in the tokens: %g, %g, %g", fixture, f1, f2, f3)
		}
	}
}

// TestRunSampledRows: Config.Sampling samples the decode rows (the report says so and
// its table prints it), every step still timed; sampling parameters out of range are an
// error before anything runs.
func TestRunSampledRows(t *testing.T) {
	m := emulatedMachine(t)
	cfg := stepbench.Config{Batches: []int{3}, Contexts: []int{12}, Steps: 2, Chunk: 8, CopyBytes: 1 << 20, Seed: 5,
		Sampling: vm.Sampling{Temperature: 0.8, TopP: 0.9, TopK: 7, Seed: 2}}
	rep, err := stepbench.Run(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sampling == nil || *rep.Sampling != cfg.Sampling || len(rep.Points) != 1 || len(rep.Points[0].StepMs) != 2 {
		t.Fatalf("sampling %+v, points %+v", rep.Sampling, rep.Points)
	}
	var tab bytes.Buffer
	rep.Table(&tab)
	if !strings.Contains(tab.String(), "decode rows sampled: temperature 0.8, top-p 0.9, top-k 7") {
		t.Errorf("the table does not say the rows were sampled:\n%s", tab.String())
	}
	cfg.Sampling = vm.Sampling{Temperature: -1}
	if _, err := stepbench.Run(m, cfg); err == nil || !strings.Contains(err.Error(), "temperature") {
		t.Errorf("a negative temperature: %v", err)
	}
}

// emulatedMachine loads tiny-v41-dev2 compiled for h200 on the emulated device (closed
// when the test ends).
func emulatedMachine(t *testing.T) *vm.Machine {
	t.Helper()
	return machineOn(t, func(tg targets.Target) targets.Executor { return emulated{tg} })
}

// machineOn loads tiny-v41-dev2 compiled for h200 on the executor exec makes of the h200
// target (closed when the test ends).
func machineOn(t *testing.T, exec func(targets.Target) targets.Executor) *vm.Machine {
	t.Helper()
	p := compile(t, "tiny-v41-dev2", "h200")
	ws, err := vm.LoadWeights(p, "../../testdata/tiny-v41-dev2")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := targets.Lookup("h200")
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.LoadOn(p, ws, exec(tg), targets.Options{MaxTokens: 64, MaxContext: 60})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// recording is the emulated device with every decode step's input tokens and sampled
// tokens kept (the runtime wrapped, so the bench prefills each sequence itself).
type recording struct {
	targets.Target
	fed, got *[][]int32
}

func (r recording) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	rt, err := cuda.OpenEmulated(p, w, o, 4<<30)
	return &recorded{Runtime: rt, fed: r.fed, got: r.got}, err
}

type recorded struct {
	targets.Runtime
	fed, got *[][]int32
}

func (r *recorded) Step(in *targets.StepIn, out *targets.StepOut) error {
	err := r.Runtime.Step(in, out)
	if in.Phase == plan.PhaseDecode {
		*r.fed = append(*r.fed, append([]int32(nil), in.Tokens...))
		*r.got = append(*r.got, append([]int32(nil), out.Tokens...))
	}
	return err
}

// TestDecodeRowsFedRandomTokens: each decode step feeds every row a fresh random token,
// not the token the row sampled the step before (run 30: rows copied from one sequence
// and fed a random-weight model's greedy tokens route to the same few experts).
func TestDecodeRowsFedRandomTokens(t *testing.T) {
	var fed, got [][]int32
	m := machineOn(t, func(tg targets.Target) targets.Executor { return recording{tg, &fed, &got} })
	cfg := stepbench.Config{Batches: []int{4}, Contexts: []int{12}, Warmup: 1, Steps: 4, Chunk: 8, CopyBytes: 1 << 20, Seed: 5}
	if _, err := stepbench.Run(m, cfg); err != nil {
		t.Fatal(err)
	}
	if len(fed) != 5 || len(fed[0]) != 4 {
		t.Fatalf("%d decode steps recorded (rows %v), want 5 of 4 rows (1 warm-up, 4 timed)", len(fed), fed)
	}
	for s := 1; s < len(fed); s++ {
		same := 0
		for i := range fed[s] {
			if fed[s][i] == got[s-1][i] {
				same++
			}
		}
		if same == len(fed[s]) {
			t.Errorf("step %d fed every row the token it sampled the step before: %v", s, fed[s])
		}
		if slices.Equal(fed[s], fed[s-1]) {
			t.Errorf("steps %d and %d fed the same tokens %v", s-1, s, fed[s])
		}
	}
}

// TestPointTokensIndependentOfOtherPoints: a point's decode rows are fed the same tokens
// whatever other points the run has (a batch list of 2 and 4 against 4 alone, the same
// seed), so that two builds' reports of different batch lists read the same experts
// step for step; another seed feeds other tokens.
func TestPointTokensIndependentOfOtherPoints(t *testing.T) {
	fedFor := func(batches []int, seed uint64) [][]int32 {
		var fed, got [][]int32
		m := machineOn(t, func(tg targets.Target) targets.Executor { return recording{tg, &fed, &got} })
		cfg := stepbench.Config{Batches: batches, Contexts: []int{12}, Warmup: 1, Steps: 3, Chunk: 8, CopyBytes: 1 << 20, Seed: seed}
		if _, err := stepbench.Run(m, cfg); err != nil {
			t.Fatal(err)
		}
		var four [][]int32
		for _, f := range fed {
			if len(f) == 4 {
				four = append(four, f)
			}
		}
		return four
	}
	a, b := fedFor([]int{2, 4}, 5), fedFor([]int{4}, 5)
	if len(a) == 0 || len(a) != len(b) {
		t.Fatalf("%d and %d decode steps of 4 rows", len(a), len(b))
	}
	for s := range a {
		if !slices.Equal(a[s], b[s]) {
			t.Errorf("step %d of batch 4: fed %v after batch 2, %v alone", s, a[s], b[s])
		}
	}
	if c := fedFor([]int{4}, 6); slices.Equal(c[0], a[0]) {
		t.Errorf("seeds 5 and 6 fed the same first tokens %v", c[0])
	}
}
