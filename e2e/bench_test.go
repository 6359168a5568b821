package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSynthCompileBench: a user cuts a model to two layers with dic synth, compiles it
// and times decode steps with divm bench — on the cpu target here — and gets the table
// and the JSON report; bad input gets one-line errors.
func TestSynthCompileBench(t *testing.T) {
	dir := t.TempDir()
	ck := filepath.Join(dir, "ck")
	o := run(t, dir, "dic", "synth", "--model", abs(t, "../testdata/tiny-v41-dev2"), "--layers", "4-6", "--out", ck)
	if o.code != 0 {
		t.Fatalf("dic synth: %d\n%s", o.code, o.stderr)
	}
	for _, want := range []string{"now 3 layers", "Engram layers [1 3] dropped", "random values, not a trained model"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("synth output lacks %q:\n%s", want, o.stdout)
		}
	}
	if !strings.Contains(o.stderr, "synth: model-00002-of-") {
		t.Errorf("no per-shard progress on stderr:\n%s", o.stderr)
	}
	if o := run(t, dir, "dic", "compile", "--model", ck, "-o", "p.dip"); o.code != 0 {
		t.Fatalf("dic compile: %s", o.stderr)
	}
	o = run(t, dir, "divm", "bench", "p.dip", "--model", ck, "--batch", "1,3", "--context", "9", "--steps", "2", "--warmup", "1", "--out", "r.json")
	if o.code != 0 {
		t.Fatalf("divm bench: %d\n%s", o.code, o.stderr)
	}
	for _, want := range []string{"batch  context", "bytes a step must read"} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("bench output lacks %q:\n%s", want, o.stdout)
		}
	}
	var rep struct {
		Points []struct {
			Batch, Context int
			StepMs         []float64
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil || json.Unmarshal(b, &rep) != nil || len(rep.Points) != 2 || len(rep.Points[1].StepMs) != 2 || rep.Points[1].Batch != 3 {
		t.Fatalf("report %s (%v)", b, err)
	}

	wantUserError(t, run(t, dir, "dic", "synth", "--model", abs(t, "../testdata/tiny-v41-dev2"), "--layers", "2-4", "--out", filepath.Join(dir, "x")), "Engram")
	wantUserError(t, run(t, dir, "dic", "synth", "--model", abs(t, "../testdata/tiny-v41-dev2"), "--layers", "5-2", "--out", filepath.Join(dir, "y")), "5-2")
	wantUserError(t, run(t, dir, "dic", "synth", "--model", abs(t, "../testdata/tiny-v41-dev2"), "--out", ck), "already holds a checkpoint")
	wantUserError(t, run(t, dir, "dic", "synth", "--out", ck), "--model")
	wantUserError(t, run(t, dir, "divm", "bench", "p.dip", "--model", ck, "--batch", "0"), "--batch")
	wantUserError(t, run(t, dir, "divm", "bench", "p.dip", "--model", ck, "--numerics", "quick"), "--numerics")
	wantUserError(t, run(t, dir, "divm", "bench", "p.dip", "--model", ck, "--context", "100000"), "positions")
}
