package vm_test

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"deepinfer/compiler"
	"deepinfer/passes"
	"deepinfer/vm"
)

// replayRun prefills prompt, then decodes the forced tokens one step at a time (or,
// with forced nil, greedily for steps steps). It returns the prefill's last logits row,
// the decode rows and the tokens decode chose.
func replayRun(t *testing.T, m *vm.Machine, prompt, forced []int32, steps int) (pre []float32, rows [][]float32, toks []int32) {
	t.Helper()
	seq := newSequence(t, m)
	out, err := m.Forward([]vm.Chunk{{Seq: seq, Tokens: prompt, WantLogits: true}})
	if err != nil {
		t.Fatal(err)
	}
	pre = append([]float32(nil), out[0].Logits[0]...)
	next := out[0].Token
	if forced != nil {
		steps = len(forced)
	}
	for i := 0; i < steps; i++ {
		tok := next
		if forced != nil {
			tok = forced[i]
		}
		out, err = m.Forward([]vm.Chunk{{Seq: seq, Tokens: []int32{tok}, WantLogits: true}})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, append([]float32(nil), out[0].Logits[0]...))
		next = out[0].Token
		toks = append(toks, tok)
	}
	return pre, rows, toks
}

func sameF32(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// TestV41Replay checks the SWA bounded-replay pass end to end on tiny-v41-dev: with
// keep ≥ the prompt, prefill and the decode after it are bit-identical to a full
// prefill; with smaller keeps it reports the error (docs/v41.md quotes this table).
func TestV41Replay(t *testing.T) {
	full := loadV41(t, compiler.Options{})
	cases, err := vm.ReadCases(filepath.Join(fixtureV41, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	long := cases.Cases["prefill_100"].InputIDs // 6 windows of 16
	const steps = 24
	type prompt struct {
		name string
		ids  []int32
	}
	prompts := []prompt{{"len 64", long[:64]}, {"len 96", long[:96]}}
	type ref struct {
		pre    []float32
		rows   [][]float32
		forced []int32
		greedy []int32
	}
	refs := map[string]ref{}
	for _, p := range prompts {
		pre, rows, toks := replayRun(t, full, p.ids, nil, steps)
		refs[p.name] = ref{pre: pre, rows: rows, forced: toks, greedy: toks}
	}
	window := 16
	keeps := []int{window, window + 2, window + 4, 2 * window, passes.DefaultReplayKeep}
	if testing.Short() {
		keeps = []int{window, passes.DefaultReplayKeep}
	}
	t.Logf("%-7s %5s  %-12s %-14s %-14s %s", "prompt", "keep", "prefill err", "decode max err", "decode mean", "greedy")
	for _, keep := range keeps {
		m := loadV41(t, compiler.Options{Replay: &passes.Replay{Mode: passes.ReplayCompact, Keep: keep}})
		for _, p := range prompts {
			r := refs[p.name]
			pre, rows, _ := replayRun(t, m, p.ids, r.forced, 0)
			worst, sum := 0.0, 0.0
			for i := range rows {
				e := relErr(rows[i], r.rows[i])
				worst = math.Max(worst, e)
				sum += e
			}
			_, _, greedy := replayRun(t, m, p.ids, nil, steps)
			div := "identical"
			for i := range greedy {
				if greedy[i] != r.greedy[i] {
					div = fmt.Sprintf("first differs at step %d", i)
					break
				}
			}
			t.Logf("%-7s %5d  %-12.3g %-14.3g %-14.3g %s", p.name, keep, relErr(pre, r.pre), worst, sum/float64(len(rows)), div)
			if keep >= len(p.ids) {
				if !sameF32(pre, r.pre) {
					t.Errorf("%s, keep %d ≥ prompt: prefill logits differ from full prefill", p.name, keep)
				}
				for i := range rows {
					if !sameF32(rows[i], r.rows[i]) {
						t.Errorf("%s, keep %d ≥ prompt: decode step %d differs from full prefill", p.name, keep, i)
						break
					}
				}
			}
		}
	}
}

// TestV41ReplayRejectsShortKeep: a keep below the window would leave the trailing
// layers' window rings short for decode.
func TestV41ReplayRejectsShortKeep(t *testing.T) {
	_, err := compiler.Compile(compiler.Options{ModelDir: fixtureV41, Replay: &passes.Replay{Mode: passes.ReplayCompact, Keep: 8}})
	if err == nil {
		t.Fatal("keep 8 < window 16 compiled")
	}
}

// TestV41BatchedEqualsSolo: sequences prefilled and decoded together in one step get
// the logits they get alone, bit for bit (every order the cpu target emulates follows
// each sequence's own rows).
func TestV41BatchedEqualsSolo(t *testing.T) {
	m := loadV41(t, compiler.Options{})
	cases, err := vm.ReadCases(filepath.Join(fixtureV41, "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{cases.Cases["prefill_9"].InputIDs, cases.Cases["prefill_40"].InputIDs, cases.Cases["prefill_1"].InputIDs}
	const steps = 6
	solo := make([][][]float32, len(prompts))
	for i, p := range prompts {
		pre, rows, _ := replayRun(t, m, p, nil, steps)
		solo[i] = append([][]float32{pre}, rows...)
	}
	seqs := make([]*vm.Sequence, len(prompts))
	chunks := make([]vm.Chunk, len(prompts))
	for i, p := range prompts {
		seqs[i] = newSequence(t, m)
		chunks[i] = vm.Chunk{Seq: seqs[i], Tokens: p, WantLogits: true}
	}
	for step := 0; step <= steps; step++ {
		out, err := m.Forward(chunks)
		if err != nil {
			t.Fatal(err)
		}
		for i := range prompts {
			if !sameF32(out[i].Logits[0], solo[i][step]) {
				t.Fatalf("sequence %d, step %d: batched logits differ from solo (rel err %.3g)", i, step, relErr(out[i].Logits[0], solo[i][step]))
			}
			chunks[i].Tokens = []int32{out[i].Token}
		}
	}
}

func newSequence(t *testing.T, m *vm.Machine) *vm.Sequence {
	t.Helper()
	s, err := m.NewSequence()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
