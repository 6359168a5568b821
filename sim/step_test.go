package sim

import (
	"math"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/targets/cost"
)

// h200Default is the embedded default model compiled for h200 (no deployment) and the
// h200 cost model in device-launch mode.
func h200Default(t *testing.T) (*plan.Plan, *cost.Model) {
	t.Helper()
	out, err := compiler.Compile(compiler.Options{Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.For("h200")
	if err != nil {
		t.Fatal(err)
	}
	return out.Plan, m.WithLaunch(cost.Device)
}

// TestDecodeStep prices one step of a plan compiled without a deployment: the step is
// the sum of its classes, grows with the batch, and the routed experts are priced for
// the experts the batch touches.
func TestDecodeStep(t *testing.T) {
	p, m := h200Default(t)
	var prev *StepCost
	for _, b := range []int{1, 8, 64} {
		sc, err := DecodeStep(p, m, b, 100)
		if err != nil {
			t.Fatal(err)
		}
		var sum float64
		calls := 0
		for k, us := range sc.ByClass {
			sum += us
			calls += sc.ClassCalls[k]
		}
		if math.Abs(sum-sc.US) > 1e-9*sc.US || calls != sc.Calls || sc.US <= 0 {
			t.Errorf("batch %d: classes sum to %g us over %d calls; step %g us, %d calls", b, sum, calls, sc.US, sc.Calls)
		}
		if prev != nil && !(sc.US > prev.US) {
			t.Errorf("batch %d: step %g us not above the smaller batch's %g", b, sc.US, prev.US)
		}
		prev = sc
	}
	// the experts: a batch of one token touches k experts, not all of them
	var moe string
	for _, in := range p.Program("decode").Instrs {
		if in.Op == "moe_experts" {
			moe = in.Kernel
		}
	}
	if moe == "" {
		t.Fatal("the default model's decode program has no moe_experts")
	}
	one, _ := DecodeStep(p, m, 1, 100)
	many, _ := DecodeStep(p, m, 64, 100)
	if !(many.ClassBytes[moe] > 4*one.ClassBytes[moe]) {
		t.Errorf("expert bytes: batch 1 %g, batch 64 %g: want batch 1 to read only the experts it picks", one.ClassBytes[moe], many.ClassBytes[moe])
	}
	for _, c := range []struct {
		b, ctx int
		want   string
	}{{0, 10, "batch ≥ 1"}, {1, -1, "context ≥ 0"}, {1, p.Model.MaxPositions, "positions"}} {
		if _, err := DecodeStep(p, m, c.b, c.ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("batch %d context %d: %v, want %q", c.b, c.ctx, err, c.want)
		}
	}
}

// TestHeapSelectCount: V4.1's index selection is priced with the heap select's
// replacements (cost.Kernel.Heap) only where it runs one — k·64 ≤ n, a ratio-1 layer's
// 32,768 entries for k = 512, not 4,096 — about k·ln(n/k) a row and call.
func TestHeapSelectCount(t *testing.T) {
	out, err := compiler.Compile(compiler.Options{ModelDir: "../testdata/deepseek-v4.1-flash", Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.For("h200")
	if err != nil {
		t.Fatal(err)
	}
	heapAt := func(ctx int) (h float64, calls int) {
		sc, err := DecodeStep(out.Plan, m, 1, ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range sc.ClassHeap {
			if v != 0 && !strings.HasPrefix(k, "deepselect.") {
				t.Errorf("class %s has %g heap replacements", k, v)
			}
			h += v
		}
		for k, n := range sc.ClassCalls {
			if strings.HasPrefix(k, "deepselect.") {
				calls += n
			}
		}
		return h, calls
	}
	if h, _ := heapAt(4096); h != 0 {
		t.Errorf("at 4,096: %g heap replacements, want 0 (introselect)", h)
	}
	// V4.1-Flash's five ratio-1 index layers (20, 24, 28, 32, 36) select over every
	// entry of the step's context bucket; no other call runs a heap select
	h, calls := heapAt(32768)
	n := ctxBucket(32768)
	if want := 5 * heapReplacements(512, n); calls < 5 || math.Abs(h-want) > 1e-9*want {
		t.Errorf("at 32,768 (bucket %d): %g heap replacements over %d index calls, want 5 × 512·ln(%d/512) = %g", n, h, calls, n, want)
	}
	per := 512 * math.Log(64)
	if got := heapReplacements(512, 32767); got != 0 {
		t.Errorf("k·64 > n: %g replacements, want 0", got)
	}
	if got := heapReplacements(512, 32768); math.Abs(got-per) > 1e-9 {
		t.Errorf("k·64 = n: %g replacements, want %g", got, per)
	}
}

// TestDecodeStepSampled: a step whose rows are sampled prices its sampler under
// SampledClass, with sampledPasses more float32 passes over each row's logits and a
// wave of the vocabulary a multiprocessor walks for every ComputeUnits rows; the other
// classes are the greedy step's. A class calibration charges the waves.
func TestDecodeStepSampled(t *testing.T) {
	p, m := h200Default(t)
	var sampler string
	vocab := 0
	for _, in := range p.Program("decode").Instrs {
		if in.Op == "sample" {
			sampler, vocab = in.Kernel, int(in.ArgTypes[0].Last())
		}
	}
	if sampler == "" || vocab < 2 {
		t.Fatalf("no sampler in the decode program (kernel %q, vocabulary %d)", sampler, vocab)
	}
	cu := m.Rates.ComputeUnits
	if cu < 2 {
		t.Fatalf("h200 has %d compute units", cu)
	}
	cal := m.WithClasses("test", map[string]cost.ClassCal{SampledClass(sampler): {FloorUS: 10, ScanNS: 1}})
	for _, c := range []struct{ batch, waves int }{{1, 1}, {cu, 1}, {cu + 1, 2}, {2*cu + 1, 3}} {
		g, err := DecodeStep(p, m, c.batch, 100)
		if err != nil {
			t.Fatal(err)
		}
		s, err := DecodeStepSampled(p, m, c.batch, 100, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.ByClass[sampler]; ok {
			t.Errorf("batch %d: the sampled step still prices %s as greedy", c.batch, sampler)
		}
		if s.ClassCalls[SampledClass(sampler)] != g.ClassCalls[sampler] || g.ClassCalls[sampler] != 1 {
			t.Errorf("batch %d: %d sampled calls, %d greedy ones", c.batch, s.ClassCalls[SampledClass(sampler)], g.ClassCalls[sampler])
		}
		if want := g.ClassBytes[sampler] + float64(c.batch*vocab*4*sampledPasses); s.ClassBytes[SampledClass(sampler)] != want {
			t.Errorf("batch %d: the sampled sampler moves %g bytes, want %g", c.batch, s.ClassBytes[SampledClass(sampler)], want)
		}
		if got := s.ClassScan[SampledClass(sampler)]; got != float64(c.waves*vocab) {
			t.Errorf("batch %d: scan %g entries, want %d waves of %d", c.batch, got, c.waves, vocab)
		}
		for k, us := range g.ByClass {
			if k != sampler && s.ByClass[k] != us {
				t.Errorf("batch %d: %s priced %g us sampled, %g greedy", c.batch, k, s.ByClass[k], us)
			}
		}
		if !(s.US > g.US) {
			t.Errorf("batch %d: sampled step %g us, greedy %g", c.batch, s.US, g.US)
		}
		cs, err := DecodeStepSampled(p, cal, c.batch, 100, true)
		if err != nil {
			t.Fatal(err)
		}
		wantUS := 10 + float64(c.waves*vocab)/1e3
		if got := cs.ByClass[SampledClass(sampler)]; math.Abs(got-wantUS) > 1e-9*wantUS {
			t.Errorf("batch %d: calibrated sampled sampler %g us, want %g (floor + waves × vocabulary × 1 ns)", c.batch, got, wantUS)
		}
	}
	if !IsSampledClass(SampledClass(sampler)) || IsSampledClass(sampler) {
		t.Errorf("IsSampledClass does not tell %q from %q", SampledClass(sampler), sampler)
	}
}
