package e2e

import (
	"bytes"
	"deepinfer/internal/testtok"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"deepinfer/safetensors"
)

const fixtureV41 = "../testdata/tiny-v41-dev"

// TestInspectV41FullSize compiles the full-size DeepSeek-V4.1-Flash config (no weights)
// with the bounded replay on (through its environment variable) and checks that
// dic inspect shows MODEL.md §2's structure.
func TestInspectV41FullSize(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := filepath.Abs("../testdata/deepseek-v4.1-flash")
	cmd := exec.Command(filepath.Join(binDir, "dic"), "compile", "--model", cfg, "-o", "v41.dip")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEEPINFER_HF_MODEL_DIR=", "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE=compact",
		"DEEPINFER_YOCO_PREFILL_KEEP_TOKENS=140")
	var se bytes.Buffer
	cmd.Stderr = &se
	if err := cmd.Run(); err != nil {
		t.Fatalf("dic compile: %v: %s", err, se.String())
	}
	o := run(t, dir, "dic", "inspect", "v41.dip")
	if o.code != 0 {
		t.Fatalf("dic inspect: %s", o.stderr)
	}
	for _, want := range []string{
		"Full (KV source) 2, 8, 14, 20; Reuse 3–7, 9–13, 15–19, 21–23, 25–27, 29–31, 33–35, 37–39; Reindex (own indexer) 24, 28, 32, 36; Window 0–1; DSpark stages 40–42",
		"engram layers: 1, 14",
		"dspark: 3 stages (layers 40–42), block 5",
		"swa_replay: compact, keep 140: prefill runs layers 21–39 on each sequence's last 140 rows",
		"image inputs are NOT served",
		"checkpoint: 95733 tensors",
	} {
		if !strings.Contains(o.stdout, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, o.stdout)
		}
	}
}

// TestEvalV41Fixture runs divm eval on the V4.1 fixture and checks it writes every key
// of expected.safetensors (the numbers themselves are vm's TestFixtureV41) plus the
// token lists as I64.
func TestEvalV41Fixture(t *testing.T) {
	t.Setenv("DEEPINFER_TOKENIZER_DIR", testtok.Need(t)) // the Engram token map needs it
	dir := t.TempDir()
	fix, _ := filepath.Abs(fixtureV41)
	o := run(t, dir, "divm", "eval", "--model", fix, "--cases", filepath.Join(fix, "cases.json"), "--out", "out.safetensors")
	if o.code != 0 {
		t.Fatalf("divm eval: %s", o.stderr)
	}
	got, err := safetensors.OpenFile(filepath.Join(dir, "out.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	want, err := safetensors.OpenFile(filepath.Join(fix, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	for _, n := range want.Names() {
		wi, _ := want.Info(n)
		gi, ok := got.Info(n)
		if !ok {
			t.Errorf("eval output lacks %s", n)
			continue
		}
		if wi.DType != gi.DType || len(wi.Shape) != len(gi.Shape) {
			t.Errorf("%s: %s%v, expected %s%v", n, gi.DType, gi.Shape, wi.DType, wi.Shape)
		}
	}
	for _, n := range []string{"decode_37_30_argmax_tokens", "decode_37_30_draft_tokens", "greedy_generated", "greedy_draft_tokens"} {
		if gi, ok := got.Info(n); !ok || gi.DType != "I64" {
			t.Errorf("%s: want an I64 tensor", n)
		}
	}
}
