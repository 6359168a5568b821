package main

import (
	"path/filepath"
	"strings"
	"testing"

	"deepinfer/plan"
	"deepinfer/sim/calib"
)

// TestCompareRun10: divm simulate --compare with the shipped cuda-fast calibration (fitted
// on run 30c's V4 and V4.1 reports) on run 10's V4 report (the kernels between runs 9 and 11, not fitted: slower
// than run 14's, so every step misses) prints the figures
// docs/perf/simulator.md quotes, the class times scaled to each step.
func TestCompareRun10(t *testing.T) {
	p, err := calib.SynthPlan("../../testdata/deepseek-v4-flash", "4-5", "h200")
	if err != nil {
		t.Fatal(err)
	}
	planPath := filepath.Join(t.TempDir(), "v4.dip")
	if err := plan.WriteFile(planPath, p); err != nil {
		t.Fatal(err)
	}
	bench := "../../sim/calib/testdata/run10/v4.fast.bench.json"
	var out strings.Builder
	if err := compareCmd(&out, planPath, bench, "cuda-fast"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"SIMULATED with", "cuda-fast",
		"with class calibration cuda-fast (run 30 (H200, 2026-12-04))",
		"batch 1, context 4096: step measured 2.961 ms, simulated 1.368 ms, error -53.8% MISS",
		"class times scaled ×0.780: the profiled ones add up to 3.799 ms, +28.3% over the step",
		"batch 64, context 4096: step measured 9.848 ms, simulated 5.924 ms, error -39.9% MISS",
		"batch 256, context 4096: step measured 21.388 ms, simulated 12.181 ms, error -43.0% MISS",
		"3 of 3 steps and 39 of 60 class times outside the bounds",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the comparison lacks %q:\n%s", want, out.String())
		}
	}
	if err := compareCmd(&out, planPath, bench, "cuda-slow"); err == nil || !strings.Contains(err.Error(), `no calibration "cuda-slow"`) {
		t.Errorf("an unknown calibration: %v", err)
	}
	// a report of sampled rows (divm bench --temperature): the sampler priced sampled
	out.Reset()
	if err := compareCmd(&out, planPath, "../../sim/calib/testdata/run30/v4.fast.30e.sample.bench.json", "auto"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"batch 1, context 4096: step measured 1.668 ms, simulated 1.483 ms, error -11.1% ok",
		"tilekernels.sampling (sampled)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the sampled comparison lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "tilekernels.sampling   ") {
		t.Errorf("the sampled comparison still lists the greedy sampler class:\n%s", out.String())
	}
}
