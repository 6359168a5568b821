package main

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
)

// TestBenchSamplingFlags: divm bench refuses sampling flags out of range, a top-p or
// top-k without a temperature (greedy rows take neither) and an unknown --route, as
// usage errors, before it reads the plan.
func TestBenchSamplingFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--temperature", "-1", "x.dip"}, "temperature"},
		{[]string{"--temperature", "1", "--top-p", "1.5", "x.dip"}, "top_p"},
		{[]string{"--temperature", "1", "--top-k", "-2", "x.dip"}, "top_k"},
		{[]string{"--top-p", "0.9", "x.dip"}, "need --temperature"},
		{[]string{"--top-k", "5", "x.dip"}, "need --temperature"},
		{[]string{"--route", "balanced", "x.dip"}, "want model or uniform"},
	} {
		err := benchCmd(c.args, io.Discard)
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("divm bench %s: %v, want a usage error about %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// TestBenchUniformRouteOnCPU: --route uniform on a plan the cpu target runs is refused
// with the reason, not run with the model's routing.
func TestBenchUniformRouteOnCPU(t *testing.T) {
	dir := t.TempDir()
	planPath := filepath.Join(dir, "p.dip")
	out, err := compiler.Compile(compiler.Options{ModelDir: "../../testdata/tiny-v4-dev", Target: "cpu"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan.WriteFile(planPath, out.Plan); err != nil {
		t.Fatal(err)
	}
	err = benchCmd([]string{"--model", "../../testdata/tiny-v4-dev", "--batch", "2", "--context", "8", "--steps", "1", "--route", "uniform", planPath}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "uniform routing is a device benchmark setting") {
		t.Fatalf("divm bench --route uniform on the cpu target: %v", err)
	}
}
