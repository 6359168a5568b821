package vm_test

import (
	"deepinfer/internal/testtok"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/safetensors"
	"deepinfer/vm"
)

const fixtureV41 = "../testdata/tiny-v41-dev"

// fixturesV41 are the two V4.1 oracles from DeepSeek's reference code: tiny-v41-dev and
// tiny-v41-dev2, a second shape family (README of ../shared/fixtures).
var fixturesV41 = []string{fixtureV41, "../testdata/tiny-v41-dev2"}

// v41RowTol is the per-row bound on max|a−b|/max|b| against the fixtures, and
// v41ConfTol the bound on each DSpark confidence's absolute error. Both fixtures are
// matched to about 7e-7 (docs/v41.md), so a regression of any one rounding fails.
const (
	v41RowTol  = 1e-5
	v41ConfTol = 1e-5
)

// v41Tokenizer makes DeepSeek's tokenizer.json available for the Engram token map
// (internal/testtok: fails under CI, skips otherwise).
func v41Tokenizer(t *testing.T) {
	t.Helper()
	t.Setenv(vm.TokenizerDirEnv, testtok.Need(t))
}

// loadV41 compiles the V4.1 fixture (with any compile options), round-trips the plan
// through its file format and loads it with its weights.
func loadV41(t *testing.T, opts compiler.Options) *vm.Machine {
	t.Helper()
	v41Tokenizer(t)
	if opts.ModelDir == "" {
		opts.ModelDir = fixtureV41
	}
	return compileAndLoad(t, opts)
}

func readExpected(t *testing.T, dir string) map[string][]float32 {
	t.Helper()
	ck, err := safetensors.OpenFile(filepath.Join(dir, "expected.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := map[string][]float32{}
	for _, n := range ck.Names() {
		v, _, err := ck.ReadFloat32(n, safetensors.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[n] = v
	}
	return out
}

func i64s(tn safetensors.Tensor) []int64 {
	v := make([]int64, len(tn.Data)/8)
	for i := range v {
		for b := 0; b < 8; b++ {
			v[i] |= int64(tn.Data[8*i+b]) << (8 * b)
		}
	}
	return v
}

func argmaxMargin(row []float32) (int, float64) {
	best, second := 0, -1
	for i, v := range row {
		if v > row[best] {
			best, second = i, best
		} else if i != best && (second < 0 || v > row[second]) {
			second = i
		}
	}
	var mx float64
	for _, v := range row {
		mx = math.Max(mx, math.Abs(float64(v)))
	}
	return best, float64(row[best]-row[second]) / mx
}

// TestFixtureV41 checks every logits row of both V4.1 fixtures — prefill, decode trace,
// greedy, DSpark drafts — against DeepSeek's reference code: rel err ≤ 1e-5 per row,
// the reference's argmax in every row, confidences within 1e-5, greedy, argmax and
// draft tokens identical, and the Engram token map exact.
func TestFixtureV41(t *testing.T) {
	for _, dir := range fixturesV41 {
		t.Run(filepath.Base(dir), func(t *testing.T) { checkFixtureV41(t, dir) })
	}
}

func checkFixtureV41(t *testing.T, dir string) {
	m := loadV41(t, compiler.Options{ModelDir: dir})
	cases, err := vm.ReadCases(filepath.Join(dir, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := vm.RunCasesV41(m, cases)
	if err != nil {
		t.Fatal(err)
	}
	exp := readExpected(t, dir)
	V := m.Plan.Model.Vocab
	names := make([]string, 0, len(exp))
	for n := range exp {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		want := exp[name]
		g, ok := got[name]
		if !ok {
			t.Errorf("%s: not produced", name)
			continue
		}
		if name == "engram_token_map" {
			have := i64s(g)
			for i := range want {
				if have[i] != int64(want[i]) {
					t.Fatalf("engram_token_map[%d] = %d, want %v", i, have[i], want[i])
				}
			}
			t.Logf("%-32s %d ids identical (built from tokenizer.json)", name, len(want))
			continue
		}
		have := f32(t, g)
		if len(have) != len(want) {
			t.Errorf("%s: %d values, want %d", name, len(have), len(want))
			continue
		}
		if strings.HasSuffix(name, "_confidence") {
			var worst float64
			for i := range want {
				worst = math.Max(worst, math.Abs(float64(have[i]-want[i])))
			}
			if worst > v41ConfTol**tolScale {
				t.Errorf("%s: max |Δ| %.3g > %g", name, worst, v41ConfTol**tolScale)
			}
			t.Logf("%-32s max abs err %.3g", name, worst)
			continue
		}
		worst, argOK, argN := 0.0, 0, 0
		for r := 0; r < len(want)/V; r++ {
			a, b := have[r*V:(r+1)*V], want[r*V:(r+1)*V]
			e := relErr(a, b)
			worst = math.Max(worst, e)
			if e > v41RowTol**tolScale {
				t.Errorf("%s row %d: rel err %.3g > %g", name, r, e, v41RowTol**tolScale)
			}
			wa, margin := argmaxMargin(b)
			ga, _ := argmaxMargin(a)
			argN++
			if wa == ga {
				argOK++
			} else {
				t.Errorf("%s row %d: argmax %d, reference %d (margin %.3g of max)", name, r, ga, wa, margin)
			}
		}
		t.Logf("%-32s rows %3d  worst rel err %.3g  argmax %d/%d", name, len(want)/V, worst, argOK, argN)
	}
	for name, cs := range cases.Cases {
		switch {
		case cs.Generated != nil:
			checkTokens(t, name+"_generated", i64s(got[name+"_generated"]), cs.Generated, exp[name+"_logits"], V)
		case cs.ArgmaxTokens != nil:
			checkTokens(t, name+"_argmax_tokens", i64s(got[name+"_argmax_tokens"]), cs.ArgmaxTokens, exp[name], V)
		}
		if cs.DraftTokens != nil {
			have := i64s(got[name+"_draft_tokens"])
			w := len(cs.DraftTokens[0])
			same, n := 0, 0
			for i, row := range cs.DraftTokens {
				for j, tok := range row {
					n++
					if have[i*w+j] == int64(tok) {
						same++
					}
				}
			}
			t.Logf("%s draft tokens: %d/%d identical", name, same, n)
			if same != n {
				t.Errorf("%s: %d of %d draft tokens differ from the reference's", name, n-same, n)
			}
		}
	}
}

// checkTokens compares token lists; a difference is reported with the reference's
// top-2 margin at that row.
func checkTokens(t *testing.T, what string, have []int64, want []int32, logits []float32, V int) {
	t.Helper()
	for i := range want {
		if i >= len(have) || have[i] != int64(want[i]) {
			_, margin := argmaxMargin(logits[i*V : (i+1)*V])
			t.Errorf("%s: first divergence at %d: %d, reference %d (reference top-2 margin %.3g of max)", what, i, have[i], want[i], margin)
			return
		}
	}
	t.Logf("%s: %d tokens identical", what, len(want))
}
