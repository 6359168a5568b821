package compiler

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/tools/txtar"

	"deepinfer/deploy"
	"deepinfer/plan"
	_ "deepinfer/targets/all"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const goldenSpec = `target: sm100
topology: {nodes: 1, devices_per_node: 2}
roles:
  prefill: {dp: 2, ep: 2, max_num_seqs: 4, max_model_len: 4096, max_num_batched_tokens: 512}
experts: {num_redundant: 2, policy: default, synthetic: "zipf:1.2"}
`

// goldenV41Spec plans the tiny V4.1 fixture for a two-rank expert-parallel prefill with
// SWA bounded replay, so every pass (the replay cut included) has work to do.
const goldenV41Spec = `target: sm100
topology: {nodes: 1, devices_per_node: 2}
roles:
  prefill: {dp: 2, ep: 2, max_num_seqs: 4, max_model_len: 128, max_num_batched_tokens: 256}
experts: {num_redundant: 0, policy: default}
swa_replay: {mode: compact, keep_tokens: 16}
`

// TestGoldenPasses compiles a model for a two-rank expert-parallel prefill and compares
// the IR after every pass with a golden txtar: the embedded default model
// (testdata/golden-passes.txtar) and the tiny V4.1 fixture, a V4.1-shaped config
// (testdata/golden-passes-v41.txtar). Run with -update after an intended change, and read
// the diff.
func TestGoldenPasses(t *testing.T) {
	for _, c := range []struct{ golden, model, what, spec string }{
		{"golden-passes.txtar", "", "the embedded default model", goldenSpec},
		{"golden-passes-v41.txtar", "../testdata/tiny-v41-dev", "testdata/tiny-v41-dev (V4.1)", goldenV41Spec},
	} {
		t.Run(c.golden, func(t *testing.T) { checkGolden(t, c.golden, c.model, c.what, c.spec) })
	}
}

func checkGolden(t *testing.T, golden, model, what, specSrc string) {
	spec, err := deploy.Parse([]byte(specSrc), "golden.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Compile(Options{ModelDir: model, Spec: spec, DumpDir: dir, Verify: true}); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.ir"))
	got := &txtar.Archive{Comment: []byte("IR of " + what + " after each pass, for " + specSrc)}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		got.Files = append(got.Files, txtar.File{Name: filepath.Base(n), Data: data})
	}
	path := filepath.Join("testdata", golden)
	if *update {
		if err := os.WriteFile(path, txtar.Format(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := txtar.ParseFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./compiler -run TestGoldenPasses -update to create it)", err)
	}
	if len(want.Files) != len(got.Files) {
		t.Fatalf("%d dumps, golden has %d", len(got.Files), len(want.Files))
	}
	for i := range want.Files {
		w, g := want.Files[i], got.Files[i]
		if w.Name != g.Name || !bytes.Equal(w.Data, g.Data) {
			t.Errorf("%s differs from the golden %s (rerun with -update and review the diff)", g.Name, w.Name)
		}
	}
}

// TestPlanDeterministic compiles the same inputs three times and compares the plan bytes:
// the embedded model with a deploy spec, V4 and V4.1 full-size configs for sm100, and the
// tiny V4.1 fixture with replay.
func TestPlanDeterministic(t *testing.T) {
	spec, err := deploy.Parse([]byte(goldenSpec), "golden.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	v41, err := deploy.Parse([]byte(goldenV41Spec), "golden.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	cases := []Options{{Spec: spec}, {ModelDir: "../testdata/deepseek-v4-flash", Target: "sm100"},
		{ModelDir: "../testdata/deepseek-v4.1-flash", Target: "sm100"}, {ModelDir: "../testdata/tiny-v41-dev", Spec: v41}}
	prev := make([][]byte, len(cases))
	for i := 0; i < 3; i++ {
		for j, opts := range cases {
			out, err := Compile(opts)
			if err != nil {
				t.Fatal(err)
			}
			data, err := plan.Encode(out.Plan)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && !bytes.Equal(data, prev[j]) {
				t.Fatalf("case %d: two compilations of the same inputs differ", j)
			}
			prev[j] = data
		}
	}
}
