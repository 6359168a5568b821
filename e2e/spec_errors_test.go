package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpeculationBadInput: bad speculation settings and a bad --acceptance file are one
// clear line each, with exit code 1 and no panic.
func TestSpeculationBadInput(t *testing.T) {
	dir := t.TempDir()
	if o := run(t, dir, "dic", "compile", "-o", "plan.dip"); o.code != 0 {
		t.Fatal(o.stderr)
	}
	for _, c := range []struct{ env, want string }{
		{"DEEPINFER_USE_NEXTN_DECODE=many", "DEEPINFER_USE_NEXTN_DECODE"},
		{"DEEPINFER_USE_NEXTN_DECODE=99", "[0, 32]"},
		{"DEEPINFER_ENABLE_MTP_VARLEN=maybe", "DEEPINFER_ENABLE_MTP_VARLEN"},
		{"DEEPINFER_MTP_CONFIDENCE_THRESHOLD=2", "DEEPINFER_MTP_CONFIDENCE_THRESHOLD"},
		{"DEEPINFER_BATCH_INVARIANT=yes", "DEEPINFER_BATCH_INVARIANT"},
		{"DEEPINFER_NUMERICS=quick", "DEEPINFER_NUMERICS"},
	} {
		k, v, _ := strings.Cut(c.env, "=")
		t.Setenv(k, v)
		o := run(t, dir, "divm", "run", "plan.dip", "--prompt", "hi", "--max-tokens", "2")
		wantUserError(t, o, c.want)
		os.Unsetenv(k)
	}
	spec, _ := filepath.Abs("../examples/deploy/v41-flash-decode-ep64.yaml")
	cfg, _ := filepath.Abs("../testdata/deepseek-v4.1-flash")
	if o := run(t, dir, "dic", "compile", "--model", cfg, "--spec", spec, "-o", "ep64.dip"); o.code != 0 {
		t.Fatal(o.stderr)
	}
	os.WriteFile(filepath.Join(dir, "empty.json"), []byte(`{"acceptance": []}`), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"acceptance": [0.5, 0.2]}`), 0o644)
	os.WriteFile(filepath.Join(dir, "junk.json"), []byte(`not json`), 0o644)
	for _, c := range []struct{ file, want string }{
		{"empty.json", "no accepted-length distribution"},
		{"bad.json", "sum to"},
		{"junk.json", "junk.json"},
		{"missing.json", "missing.json"},
	} {
		o := run(t, dir, "divm", "simulate", "ep64.dip", "--workload", "concurrency_per_rank=4,requests=8,input_len=fixed:128,output_len=fixed:16", "--acceptance", c.file)
		wantUserError(t, o, c.want)
	}
}
