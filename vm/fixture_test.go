package vm_test

import (
	"flag"
	"math"
	"path/filepath"
	"testing"

	"deepinfer/compiler"
	"deepinfer/plan"
	"deepinfer/safetensors"
	"deepinfer/targets"
	_ "deepinfer/targets/cpu"
	"deepinfer/vm"
)

const fixtureDir = "../testdata/tiny-v4-dev"

// The fixture tests run on the cpu target; scripts/gpu-test.sh runs the same tests on a
// GPU with -target h200, and may widen every tolerance by -tol-scale (it reports the
// errors reached either way).
var (
	targetFlag = flag.String("target", "cpu", "target to compile the fixtures for (h200, sm100: run on this machine's GPU)")
	tolScale   = flag.Float64("tol-scale", 1, "multiply every fixture tolerance by this")
)

// compileAndLoad compiles a fixture directory, round-trips the plan through its file
// format (as dic compile and divm run do) and loads it with the fixture's weights.
func compileAndLoad(t *testing.T, opts compiler.Options) *vm.Machine {
	t.Helper()
	return compileAndLoadWith(t, opts, targets.Options{})
}

// compileAndLoadWith is compileAndLoad with runtime options (batch-invariant mode).
func compileAndLoadWith(t testing.TB, opts compiler.Options, ro targets.Options) *vm.Machine {
	t.Helper()
	opts.Verify = true
	if opts.Target == "" {
		opts.Target = *targetFlag
	}
	out, err := compiler.Compile(opts)
	if err != nil {
		t.Fatal(err)
	}
	if !out.WeightsChecked {
		t.Fatal("fixture weights were not checked at compile time")
	}
	data, err := plan.Encode(out.Plan)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := vm.LoadWeights(p, opts.ModelDir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := vm.Load(p, w, ro)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func loadFixture(t *testing.T) (*vm.Machine, *vm.Cases) {
	t.Helper()
	m := compileAndLoad(t, compiler.Options{ModelDir: fixtureDir})
	cases, err := vm.ReadCases(filepath.Join(fixtureDir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	return m, cases
}

// relErr is max|a−b| / max|b| over one row.
func relErr(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		num = math.Max(num, math.Abs(float64(a[i])-float64(b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / den
}

func f32(t *testing.T, tn safetensors.Tensor) []float32 {
	t.Helper()
	v := make([]float32, len(tn.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(uint32(tn.Data[4*i]) | uint32(tn.Data[4*i+1])<<8 | uint32(tn.Data[4*i+2])<<16 | uint32(tn.Data[4*i+3])<<24)
	}
	return v
}

// TestFixtureLogits checks every prefill and incremental row against transformers'
// float64 logits (rel err ≤ 1e-4) and the greedy continuation token for token.
func TestFixtureLogits(t *testing.T) {
	m, cases := loadFixture(t)
	got, err := vm.RunCases(&vm.Engine{M: m}, cases, 0)
	if err != nil {
		t.Fatal(err)
	}
	exp, err := safetensors.OpenFile(filepath.Join(fixtureDir, "expected_logits.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	V := m.Plan.Model.Vocab
	for _, name := range exp.Names() {
		want, shape, err := exp.ReadFloat32(name, safetensors.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: not produced", name)
			continue
		}
		have := f32(t, g)
		if len(have) != len(want) {
			t.Errorf("%s: %d values, want %d (%v)", name, len(have), len(want), shape)
			continue
		}
		worst := 0.0
		for r := 0; r < len(want)/V; r++ {
			e := relErr(have[r*V:(r+1)*V], want[r*V:(r+1)*V])
			worst = math.Max(worst, e)
			if e > 1e-4**tolScale {
				t.Errorf("%s row %d: rel err %.3g > %g", name, r, e, 1e-4**tolScale)
			}
		}
		t.Logf("%-22s rows %3d  worst rel err %.3g", name, len(want)/V, worst)
	}
	want := cases.Cases["greedy"].Generated
	g := got["greedy"]
	n := len(g.Data) / 8
	if n != len(want) {
		t.Fatalf("greedy: %d tokens, want %d", n, len(want))
	}
	for i := 0; i < n; i++ {
		v := int32(g.Data[8*i]) | int32(g.Data[8*i+1])<<8
		if v != want[i] {
			t.Fatalf("greedy token %d: %d, want %d", i, v, want[i])
		}
	}
}

// TestContinuousBatch runs all cases of every fixture together — staggered arrivals,
// chunked prefill under a small token budget, sequences of different lengths joining
// and leaving — and checks each sequence's logits against its solo run.
func TestContinuousBatch(t *testing.T) {
	for _, dir := range append([]string{fixtureDir}, fixturesV41...) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if dir != fixtureDir {
				v41Tokenizer(t)
			}
			m := compileAndLoad(t, compiler.Options{ModelDir: dir})
			cases, err := vm.ReadCases(filepath.Join(dir, "cases.json"))
			if err != nil {
				t.Fatal(err)
			}
			checkBatching(t, m, cases, dir != fixtureDir)
		})
	}
}

type schedule struct {
	name         string
	budget, seqs int
	stagger      int
}

// checkBatching runs the cases under four schedules. V4.1's numerics follow the rows a
// sequence brings to a step (the reference's MKL orders depend on them: docs/v41.md),
// so a prompt split over steps is not its solo run; its schedules keep prompts whole.
func checkBatching(t *testing.T, m *vm.Machine, cases *vm.Cases, wholePrompts bool) {
	solo, err := vm.RunCasesBatched(&vm.Engine{M: m, MaxSeqs: 1}, cases, 0)
	if err != nil {
		t.Fatal(err)
	}
	schedules := []schedule{
		{"all-at-once", 4096, 64, 0},
		{"staggered", 4096, 64, 3},
		{"chunked-prefill", 7, 64, 1},
		{"few-slots", 16, 3, 2},
	}
	if wholePrompts {
		longest := 0
		for _, c := range cases.Cases {
			longest = max(longest, len(c.InputIDs))
		}
		// room for the longest prompt beside one decode token of every other request
		schedules[2] = schedule{"tight-budget", longest + 2*len(cases.Cases), 64, 1}
		schedules[3] = schedule{"few-slots", longest + 3, 3, 2}
	}
	for _, cfg := range schedules {
		t.Run(cfg.name, func(t *testing.T) {
			steps, maxBatch := 0, 0
			e := &vm.Engine{M: m, MaxBatchTokens: cfg.budget, MaxSeqs: cfg.seqs,
				OnStep: func(_, n int) { steps++; maxBatch = max(maxBatch, n) }}
			got, err := vm.RunCasesBatched(e, cases, cfg.stagger)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(solo) {
				t.Fatalf("%d outputs, solo has %d", len(got), len(solo))
			}
			var all float64
			for k, want := range solo {
				if want.DType == safetensors.I64 {
					if string(got[k].Data) != string(want.Data) {
						t.Errorf("%s: greedy ids differ from the solo run", k)
					}
					continue
				}
				a, b := f32(t, got[k]), f32(t, want)
				var worst float64
				for i := range b {
					worst = math.Max(worst, math.Abs(float64(a[i])-float64(b[i])))
				}
				all = math.Max(all, worst)
				if worst != 0 {
					t.Errorf("%s: max |batch - solo| = %.3g; every order follows a sequence's own rows, so it must be 0", k, worst)
				}
			}
			t.Logf("%d steps, largest step %d tokens, on %s: max |batch - solo| %.3g", steps, maxBatch, m.Plan.Target, all)
		})
	}
}
