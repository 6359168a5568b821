package calib

import (
	"strings"

	"deepinfer/targets/cost"
	"deepinfer/targets/h200"
	"math"
	"testing"

	"deepinfer/vm/stepbench"
)

// TestStepScaledClasses: class times that add up to more than the step are scaled to it,
// each by the same factor; others are returned as they are, and empty or zero data
// divides by nothing.
func TestStepScaledClasses(t *testing.T) {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
	// over the step: 1.5 + 0.5 = 2 ms against a 1.6 ms step → ×0.8
	over := stepbench.Point{Batch: 1, Context: 512, MedianMs: 1.6, ClassMs: map[string]float64{"a": 1.5, "b": 0.5, "c": 0}}
	got, f := StepScaledClasses(over)
	if !near(f, 0.8) || !near(got["a"], 1.2) || !near(got["b"], 0.4) || got["c"] != 0 || len(got) != 3 {
		t.Errorf("over the step: %v ×%g, want a 1.2, b 0.4, c 0 ×0.8", got, f)
	}
	sum := 0.0
	for _, v := range got {
		sum += v
	}
	if !near(sum, over.MedianMs) {
		t.Errorf("scaled classes add up to %g ms, want the step's %g", sum, over.MedianMs)
	}
	if over.ClassMs["a"] != 1.5 || over.ClassMs["b"] != 0.5 {
		t.Errorf("the point's own class times were modified: %v", over.ClassMs)
	}
	// under or at the step: untouched
	for _, pt := range []stepbench.Point{
		{Batch: 64, MedianMs: 3, ClassMs: map[string]float64{"a": 1.5, "b": 0.5}},
		{Batch: 64, MedianMs: 2, ClassMs: map[string]float64{"a": 1.5, "b": 0.5}},
	} {
		got, f := StepScaledClasses(pt)
		if f != 1 || got["a"] != 1.5 || got["b"] != 0.5 || len(got) != 2 {
			t.Errorf("step %g ms: %v ×%g, want the class times as they are", pt.MedianMs, got, f)
		}
	}
	// nothing to scale, or no step to scale to: no division by zero, nothing invented
	for _, pt := range []stepbench.Point{
		{Batch: 1, MedianMs: 2},                                      // no class times
		{Batch: 1, MedianMs: 2, ClassMs: map[string]float64{}},       // an empty map
		{Batch: 1, MedianMs: 2, ClassMs: map[string]float64{"a": 0}}, // every class zero
		{Batch: 1, MedianMs: 0, ClassMs: map[string]float64{"a": 1}}, // a zero step
		{Batch: 1, MedianMs: 0},                                      // both zero
	} {
		got, f := StepScaledClasses(pt)
		if f != 1 || len(got) != len(pt.ClassMs) {
			t.Errorf("%+v: %v ×%g, want the class times as they are, ×1", pt, got, f)
		}
		for k, v := range got {
			if v != pt.ClassMs[k] || math.IsNaN(v) || math.IsInf(v, 0) {
				t.Errorf("%+v: class %s %g", pt, k, v)
			}
		}
	}
}

// TestCompareScaled: Compare sets the simulation against the step-scaled class times,
// keeps the profiled ones, and says so in the printed comparison.
func TestCompareScaled(t *testing.T) {
	p := v4(t)
	r, err := ReadBench("testdata/run9/v4.fast.ctx512.bench.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Compare(p, Fitted["cuda-fast"].mustApply(t, "deepseek_v4"), r, Acceptance)
	if err != nil {
		t.Fatal(err)
	}
	for i, pr := range res {
		want, f := StepScaledClasses(r.Points[i])
		if pr.Scale != f || !(f < 1) {
			t.Errorf("batch %d: scale %g, want %g (< 1: run 9's profiled classes add up to more than each step)", pr.Batch, pr.Scale, f)
		}
		sum := 0.0
		for _, c := range pr.Classes {
			if c.ProfiledMs != r.Points[i].ClassMs[c.Class] || c.MeasuredMs != want[c.Class] {
				t.Errorf("batch %d, %s: measured %g (profiled %g), want %g (profiled %g)", pr.Batch, c.Class, c.MeasuredMs, c.ProfiledMs, want[c.Class], r.Points[i].ClassMs[c.Class])
			}
			sum += c.MeasuredMs
		}
		if math.Abs(sum-pr.MeasuredMs) > 1e-9*pr.MeasuredMs {
			t.Errorf("batch %d: the measured class times add up to %g ms, the step is %g", pr.Batch, sum, pr.MeasuredMs)
		}
	}
	var out strings.Builder
	WriteComparison(&out, "m", "b", res, Acceptance)
	if !strings.Contains(out.String(), "class times scaled ×0.806: the profiled ones add up to 4.525 ms, +24.1% over the step") {
		t.Errorf("the printed comparison does not give batch 1's scaling:\n%s", out.String())
	}
}

func (c *Calibration) mustApply(t *testing.T, modelType string) *cost.Model {
	t.Helper()
	m, err := c.Apply(h200.Model(), modelType)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFitToScaledClasses: a fit on one point whose profiled class times add up to more
// than its step reproduces the step-scaled class times, and so the step, not the
// profiled ones (which add up to 24% more).
func TestFitToScaledClasses(t *testing.T) {
	r, err := ReadBench("testdata/run9/v4.fast.ctx512.bench.json")
	if err != nil {
		t.Fatal(err)
	}
	one := *r
	one.Points = r.Points[:1] // batch 1, context 512
	if one.Points[0].Batch != 1 {
		t.Fatalf("the first point is batch %d, want 1", one.Points[0].Batch)
	}
	data := []Loaded{{Measured: Measured{File: "one point", Numerics: "fast", Run: "test"}, Report: &one, Plan: v4(t)}}
	tab, err := FitClasses(h200.Model(), data, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Evaluate(h200.Model().WithClasses("one point", tab), data, nil, Acceptance)
	if err != nil {
		t.Fatal(err)
	}
	p := res[0]
	if !(p.Scale < 0.9) || math.Abs(p.Err()) > 1e-6 {
		t.Errorf("step: scale %g, simulated %g ms against %g ms (%+.4f%%): want the step reproduced", p.Scale, p.SimulatedMs, p.MeasuredMs, 100*p.Err())
	}
	for _, c := range p.Classes {
		if math.Abs(c.Err()) > 1e-6 {
			t.Errorf("%s: simulated %g ms, scaled measurement %g ms (profiled %g)", c.Class, c.SimulatedMs, c.MeasuredMs, c.ProfiledMs)
		}
	}
}
