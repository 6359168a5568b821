package calib

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"deepinfer/plan"
	"deepinfer/sim"
	"deepinfer/targets/cost"
	"deepinfer/targets/h200"
)

var (
	v4Once sync.Once
	v4Plan *plan.Plan
	v4Err  error
)

// v4 is the plan runs 6, 8 and 9 timed for V4: testdata/deepseek-v4-flash cut to layers 4-5.
func v4(t *testing.T) *plan.Plan {
	t.Helper()
	v4Once.Do(func() { v4Plan, v4Err = SynthPlan("../../testdata/deepseek-v4-flash", "4-5", "h200") })
	if v4Err != nil {
		t.Fatal(v4Err)
	}
	return v4Plan
}

func TestReadBenchErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pt := `{"Batch": 1, "Context": 4096, "MedianMs": 6.5, "ClassMs": {"a": 1}}`
	for _, c := range []struct{ name, path, want string }{
		{"missing file", filepath.Join(dir, "absent.json"), "no such file"},
		{"malformed", write("bad.json", `{"Points": [`), "not a divm bench report"},
		{"not an object", write("arr.json", `[1, 2]`), "not a divm bench report"},
		{"trailing data", write("two.json", `{"Points": [`+pt+`]} {}`), "data after"},
		{"no points", write("empty.json", `{"Device": "x", "Points": []}`), "no points"},
		{"batch 0", write("b0.json", `{"Points": [{"Batch": 0, "Context": 1, "MedianMs": 1}]}`), "batch ≥ 1"},
		{"negative context", write("c.json", `{"Points": [{"Batch": 1, "Context": -1, "MedianMs": 1}]}`), "context ≥ 0"},
		{"no median", write("m.json", `{"Points": [{"Batch": 1, "Context": 1}]}`), "not a positive time"},
		{"negative class", write("n.json", `{"Points": [{"Batch": 1, "Context": 1, "MedianMs": 1, "ClassMs": {"k": -2}}]}`), `class "k"`},
		{"wrong type", write("w.json", `{"Points": [{"Batch": "one"}]}`), "not a divm bench report"},
	} {
		_, err := ReadBench(c.path)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
	if _, err := ReadBench(write("ok.json", `{"Device": "d; fast numerics (x)", "Points": [`+pt+`]}`)); err != nil {
		t.Errorf("a valid report: %v", err)
	}
}

func TestNumerics(t *testing.T) {
	for _, f := range []struct{ file, want string }{
		{"run8/v4.fast.bench.json", "fast"}, {"run8/v41.exact.bench.json", "exact"}, {"run9/v4.fast.ctx512.bench.json", "fast"}, {"small.bench.json", ""},
	} {
		r, err := ReadBench(filepath.Join("testdata", f.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := Numerics(r); got != f.want {
			t.Errorf("%s: numerics %q, want %q", f.file, got, f.want)
		}
	}
}

// TestCompareSmall checks the comparison on a small committed report against the
// simulator's own step price.
func TestCompareSmall(t *testing.T) {
	p := v4(t)
	r, err := ReadBench("testdata/small.bench.json")
	if err != nil {
		t.Fatal(err)
	}
	m := h200.Model()
	res, err := Compare(p, m, r, Acceptance)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	sc, err := sim.DecodeStep(p, m.WithLaunch(cost.Device), 1, 4096)
	if err != nil {
		t.Fatal(err)
	}
	pr := res[0]
	if pr.MeasuredMs != r.Points[0].MedianMs || math.Abs(pr.SimulatedMs-sc.US/1e3) > 1e-12 {
		t.Errorf("step: measured %g simulated %g; want %g and %g", pr.MeasuredMs, pr.SimulatedMs, r.Points[0].MedianMs, sc.US/1e3)
	}
	// the default model prices this project's kernels far below their time (docs/perf)
	if !pr.Miss || pr.Err() > -0.5 {
		t.Errorf("step error %+.2f, miss %v: want the default model far under the measured step", pr.Err(), pr.Miss)
	}
	byName := map[string]ClassResult{}
	for _, c := range pr.Classes {
		byName[c.Class] = c
	}
	if len(byName) != len(sc.ByClass)+1 {
		t.Errorf("%d classes, want the plan's %d and the made-up one", len(byName), len(sc.ByClass))
	}
	up := byName["made.up_class"]
	if up.MeasuredMs != 0.05 || up.SimulatedMs != 0 || !up.Miss || up.Err() != -1 {
		t.Errorf("a class only measured: %+v (err %g)", up, up.Err())
	}
	swi := byName["tilekernels.swiglu"] // simulated, not in the small report
	if swi.MeasuredMs != 0 || swi.SimulatedMs <= 0 || !swi.Miss || !math.IsInf(swi.Err(), 1) {
		t.Errorf("a class only simulated: %+v", swi)
	}
	bf := byName["deepgemm.bf16_gemm_nt"]
	if want := sc.ByClass["deepgemm.bf16_gemm_nt"] / 1e3; bf.SimulatedMs != want || bf.MeasuredMs != r.Points[0].ClassMs["deepgemm.bf16_gemm_nt"] {
		t.Errorf("bf16_gemm_nt: %+v, want simulated %g", bf, want)
	}
	if got := math.Abs(bf.Err()) > Acceptance.Class; got != bf.Miss {
		t.Errorf("bf16_gemm_nt: error %+.3f flagged %v", bf.Err(), bf.Miss)
	}
	var out strings.Builder
	WriteComparison(&out, m.ID(), "small", res, Acceptance)
	for _, want := range []string{"batch 1, context 4096", "MISS", "meas only", "sim only", "made.up_class", "outside the bounds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the printed comparison lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCompareBadPoints(t *testing.T) {
	p := v4(t)
	r, err := ReadBench("testdata/beyond.bench.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compare(p, h200.Model(), r, Acceptance); err == nil || !strings.Contains(err.Error(), "cannot be simulated") || !strings.Contains(err.Error(), "positions") {
		t.Errorf("a point beyond the model's positions: got %v", err)
	}
	noDecode := *p
	noDecode.Programs = nil
	r, _ = ReadBench("testdata/small.bench.json")
	if _, err := Compare(&noDecode, h200.Model(), r, Acceptance); err == nil || !strings.Contains(err.Error(), "no decode program") {
		t.Errorf("a plan without a decode program: got %v", err)
	}
}

func TestCalibrationLookup(t *testing.T) {
	r, err := ReadBench("testdata/run9/v41.fast.bench.json")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ForReport("auto", r)
	if err != nil || c.Name != "cuda-fast" {
		t.Fatalf("auto for a fast report: %v, %v", c, err)
	}
	small, _ := ReadBench("testdata/small.bench.json")
	if _, err := ForReport("auto", small); err == nil || !strings.Contains(err.Error(), "does not say") {
		t.Errorf("auto without a numerics mode: %v", err)
	}
	if _, err := ForReport("cuda-slow", r); err == nil || !strings.Contains(err.Error(), "cuda-exact, cuda-fast") {
		t.Errorf("an unknown calibration: %v", err)
	}
	if _, err := c.Apply(h200.Model(), "deepseek_v3"); err == nil || !strings.Contains(err.Error(), "no table for model type") {
		t.Errorf("a model type without a table: %v", err)
	}
	m, err := c.Apply(h200.Model(), "deepseek_v41")
	if err != nil || !strings.Contains(m.ID(), "cuda-fast") {
		t.Errorf("apply: %v %v", m, err)
	}
}

func TestFromDir(t *testing.T) {
	ms, err := FromDir("testdata/run8", "4-5", "20-23")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(Run8) {
		t.Errorf("%d reports, want %d (the graphs-off report left out)", len(ms), len(Run8))
	}
	for _, m := range ms {
		if strings.Contains(m.File, "nographs") {
			t.Errorf("FromDir listed the graphs-off report %s", m.File)
		}
	}
	data, err := Load("../..", ms)
	if err != nil {
		t.Fatal(err)
	}
	modes := map[string]int{}
	for _, d := range data {
		modes[d.Numerics+" "+d.Plan.ModelType]++
	}
	if modes["fast deepseek_v4"] != 2 || modes["exact deepseek_v41"] != 1 {
		t.Errorf("reports by mode and model: %v", modes)
	}
	if _, err := FitCalibrations(h200.Model(), data, ShippedTrain); err == nil || !strings.Contains(err.Error(), "names no run") {
		t.Errorf("a fit on reports that name no run: %v", err)
	}
	ms9, err := FromDir("testdata/run9", "4-5", "20-23")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms9) != len(Run9) {
		t.Errorf("run 9: %d reports, want %d", len(ms9), len(Run9))
	}
	if _, err := FromDir(t.TempDir(), "4-5", "20-23"); err == nil || !strings.Contains(err.Error(), "no v4") {
		t.Errorf("an empty directory: %v", err)
	}
	if _, err := Load("../..", []Measured{{File: "sim/calib/testdata/small.bench.json", Config: "testdata/deepseek-v4-flash", Layers: "4-5"}}); err == nil || !strings.Contains(err.Error(), "numerics") {
		t.Errorf("a report without a numerics mode and none listed: %v", err)
	}
}

// TestFromDirTakesSampled: a directory's sampled-rows report (SAMPLE_COMPARE's
// *.sample.bench.json) is listed, and a fit of the directory takes the sampler's sampled
// class from it (FitCalibrations) for every model type.
func TestFromDirTakesSampled(t *testing.T) {
	dir := t.TempDir()
	for name, from := range map[string]string{
		"v4.fast.bench.json":        "testdata/run30/v4.fast.30c.bench.json",
		"v4.fast.sample.bench.json": "testdata/run30/v4.fast.30e.sample.bench.json",
		"v41.fast.bench.json":       "testdata/run30/v41.fast.30c.bench.json",
	} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := FromDir(dir, "4-5", "20-23")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 3 {
		t.Fatalf("FromDir listed %v, want the three reports", ms)
	}
	for i := range ms {
		ms[i].Run = "test run"
	}
	data, err := Load("../..", ms)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := FitCalibrations(h200.Model(), data, ShippedTrain)
	if err != nil {
		t.Fatal(err)
	}
	const class = "tilekernels.sampling (sampled)"
	c := cs["cuda-fast"]
	if c == nil || len(cs) != 1 {
		t.Fatalf("fitted %v", cs)
	}
	for _, mt := range []string{"deepseek_v4", "deepseek_v41"} {
		got, want := c.Models[mt][class], Fitted["cuda-fast"].Models[mt][class]
		near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-5*math.Abs(b) }
		if !near(got.FloorUS, want.FloorUS) || !near(got.GBps, want.GBps) || !near(got.ScanNS, want.ScanNS) || want.FloorUS == 0 {
			t.Errorf("%s: %s fitted %+v, want the shipped fit's %+v (the same report)", mt, class, got, want)
		}
	}
	// a sampled report alone: nothing to fit the other kernels on
	if _, err := FitCalibrations(h200.Model(), data[1:2], ShippedTrain); err == nil || !strings.Contains(err.Error(), "no greedy report") {
		t.Errorf("a fit on a sampled report alone: %v", err)
	}
}
