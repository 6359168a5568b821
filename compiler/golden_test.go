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

// TestGoldenPasses compiles the embedded model for a two-rank expert-parallel prefill
// and compares the IR after every pass with testdata/golden-passes.txtar. Run with
// -update after an intended change, and read the diff.
func TestGoldenPasses(t *testing.T) {
	spec, err := deploy.Parse([]byte(goldenSpec), "golden.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Compile(Options{Spec: spec, DumpDir: dir, Verify: true}); err != nil {
		t.Fatal(err)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*.ir"))
	got := &txtar.Archive{Comment: []byte("IR of the embedded default model after each pass, for " + goldenSpec)}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		got.Files = append(got.Files, txtar.File{Name: filepath.Base(n), Data: data})
	}
	path := filepath.Join("testdata", "golden-passes.txtar")
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

// TestPlanDeterministic compiles the same inputs twice and compares the plan bytes.
func TestPlanDeterministic(t *testing.T) {
	spec, err := deploy.Parse([]byte(goldenSpec), "golden.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var prev []byte
	for i := 0; i < 3; i++ {
		for _, opts := range []Options{{Spec: spec}, {ModelDir: "../testdata/deepseek-v4-flash", Target: "sm100"}} {
			out, err := Compile(opts)
			if err != nil {
				t.Fatal(err)
			}
			data, err := plan.Encode(out.Plan)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && opts.Spec != nil && !bytes.Equal(data, prev) {
				t.Fatal("two compilations of the same inputs differ")
			}
			if opts.Spec != nil {
				prev = data
			}
		}
	}
}
