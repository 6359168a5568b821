package e2e

import (
	"bytes"
	"deepinfer/internal/testtok"
	"math"
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

// TestEvalV41Fixture runs divm eval on both V4.1 fixtures (tiny-v41-dev and the second
// shape family tiny-v41-dev2) and checks that it writes every key of
// expected.safetensors, each logits row within 1e-5 relative error of the reference and
// each confidence within 1e-5 (vm's TestFixtureV41 checks tokens and argmaxes too), plus
// the token lists as I64.
func TestEvalV41Fixture(t *testing.T) {
	t.Setenv("DEEPINFER_TOKENIZER_DIR", testtok.Need(t)) // the Engram token map needs it
	for _, fixture := range []string{fixtureV41, "../testdata/tiny-v41-dev2"} {
		t.Run(filepath.Base(fixture), func(t *testing.T) { evalV41(t, fixture) })
	}
}

func evalV41(t *testing.T, fixture string) {
	dir := t.TempDir()
	fix, _ := filepath.Abs(fixture)
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
	var V int64
	if wi, ok := want.Info("engram_token_map"); ok {
		V = wi.Shape[0]
	}
	for _, n := range want.Names() {
		wi, _ := want.Info(n)
		gi, ok := got.Info(n)
		if !ok {
			t.Errorf("eval output lacks %s", n)
			continue
		}
		if wi.DType != gi.DType || len(wi.Shape) != len(gi.Shape) {
			t.Errorf("%s: %s%v, expected %s%v", n, gi.DType, gi.Shape, wi.DType, wi.Shape)
			continue
		}
		if n == "engram_token_map" {
			continue
		}
		g, _, err1 := got.ReadFloat32(n, safetensors.ReadOptions{})
		w, _, err2 := want.ReadFloat32(n, safetensors.ReadOptions{})
		if err1 != nil || err2 != nil || len(g) != len(w) {
			t.Errorf("%s: %v %v, %d values, want %d", n, err1, err2, len(g), len(w))
			continue
		}
		if strings.HasSuffix(n, "_confidence") {
			for i := range w {
				if d := math.Abs(float64(g[i] - w[i])); d > 1e-5 {
					t.Errorf("%s[%d]: %g, reference %g", n, i, g[i], w[i])
				}
			}
			continue
		}
		for r := 0; int64(r)*V < int64(len(w)); r++ {
			a, b := g[int64(r)*V:int64(r+1)*V], w[int64(r)*V:int64(r+1)*V]
			var num, den float64
			for i := range b {
				num = math.Max(num, math.Abs(float64(a[i]-b[i])))
				den = math.Max(den, math.Abs(float64(b[i])))
			}
			if num/den > 1e-5 {
				t.Errorf("%s row %d: rel err %.3g > 1e-5", n, r, num/den)
			}
		}
	}
	for _, n := range got.Names() {
		if strings.HasSuffix(n, "_tokens") || strings.HasSuffix(n, "_generated") {
			if gi, _ := got.Info(n); gi.DType != "I64" {
				t.Errorf("%s: want an I64 tensor", n)
			}
		}
	}
}
