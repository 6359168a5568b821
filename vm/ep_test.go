package vm_test

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
)

// epSpec is a cpu deploy spec of n in-process ranks (ep = dp = n for both roles), with
// one redundant expert (the planner pads each layer's slots to a multiple of n).
func epSpec(t testing.TB, n int) *deploy.Spec {
	t.Helper()
	red := 1
	if n == 1 {
		red = 0
	}
	src := fmt.Sprintf(`target: cpu
topology: {nodes: 1, devices_per_node: %d}
roles:
  prefill: {dp: %d, ep: %d, max_num_seqs: 64, max_model_len: 128, max_num_batched_tokens: 4096}
  decode: {dp: %d, ep: %d, max_num_seqs: 64, max_model_len: 128, max_num_batched_tokens: 64}
experts: {num_redundant: %d, policy: eplb, synthetic: "zipf:1.1"}
`, n, n, n, n, n, red)
	s, err := deploy.Parse([]byte(src), "ep.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestExpertParallel runs every fixture's requests (greedy and sampled, with every
// logits row kept) on a one-rank deploy spec and on 2, 4 and 8 in-process ranks — attention data parallel, experts
// spread by the plan's EPLB placement with replicas, dispatch and combine as real
// all-to-all exchanges — and on one rank: every token and every logits row is the same
// bits, in the default numerics and in batch-invariant mode, and on V4.1 with DSpark
// speculation too. The exchanges move the planner's bytes: the dispatch payload is
// bytes_per_token per token per MoE layer call (V4.1: MXFP8 rows), the combine payload
// bf16 rows.
func TestExpertParallel(t *testing.T) {
	for _, dir := range modelFixtures() {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			v41 := dir != fixtureDir
			if v41 {
				v41Tokenizer(t)
			}
			reqs := invariantPool(t, dir, 12, 20)
			if raceOn {
				reqs = invariantPool(t, dir, 3, 6)
			}
			for _, inv := range []bool{false, true} {
				one := compileAndLoadWith(t, compiler.Options{ModelDir: dir}, targets.Options{Invariant: inv})
				var spec *vm.Speculation
				if v41 && (inv || !raceOn) { // under the race detector, speculation in one mode
					spec = &vm.Speculation{MaxDraft: 3, Exact: inv}
				}
				want := runAll(t, &vm.Engine{M: one, MaxBatchTokens: 4096}, reqs)
				var wantSpec []vm.Result
				if spec != nil {
					wantSpec = runAll(t, &vm.Engine{M: one, MaxBatchTokens: 4096, Spec: spec}, reqs)
				}
				for _, n := range []int{1, 2, 4, 8} {
					name := fmt.Sprintf("ep%d invariant=%v", n, inv)
					m := compileAndLoadWith(t, compiler.Options{ModelDir: dir, Spec: epSpec(t, n)}, targets.Options{Invariant: inv})
					if got := m.Ranks(); got != n {
						t.Fatalf("%s: the plan opened on %d ranks", name, got)
					}
					sameResults(t, name, runAll(t, &vm.Engine{M: m, MaxBatchTokens: 4096}, reqs), want)
					if spec != nil {
						sameResults(t, name+" speculative", runAll(t, &vm.Engine{M: m, MaxBatchTokens: 4096, Spec: spec}, reqs), wantSpec)
					}
					if n == 1 { // one rank: the spec's plan is the plain one
						continue
					}
					st := m.CommStats()
					checkExchanges(t, name, m, v41, st)
					total := int64(0)
					for _, w := range m.Plan.Weights {
						total += 4 * w.Elems()
					}
					// every rank holds the shared weights and only some experts; together
					// they hold every expert at least once
					routed, held := routedBytes(m), int64(0)
					for r, b := range m.RankWeightBytes() {
						if b >= total || b <= total-routed {
							t.Errorf("%s: rank %d holds %d weight bytes; the model has %d, of which %d in routed experts: a rank holds the rest and only some experts", name, r, b, total, routed)
						}
						held += b - (total - routed)
					}
					if held < routed {
						t.Errorf("%s: the ranks hold %d bytes of routed experts together, fewer than the model's %d", name, held, routed)
					}
					t.Logf("%s: dispatch %+v, combine %+v; weights per rank %v bytes (one rank: %d)", name, st["moe_dispatch"], st["moe_combine"], m.RankWeightBytes(), total)
				}
			}
		})
	}
}

// checkExchanges ties the bytes the exchanges moved to the planner's: every (token,
// slot) pair carries one row, so the dispatch payload is pairs × bytes_per_token/topk
// on V4.1 (MXFP8 rows: the planner's FP8 count) and the combine payload pairs × 2 ×
// hidden (bf16); V4's fixture experts compute in fp32, so its rows travel as fp32.
// Some rows must cross ranks.
func checkExchanges(t *testing.T, name string, m *vm.Machine, v41 bool, st map[string]targets.CommBytes) {
	t.Helper()
	d := int64(m.Plan.Model.Hidden)
	var perPair int64
	for _, pr := range m.Plan.Programs {
		for _, in := range pr.Instrs {
			if in.Op == "moe_dispatch" {
				b, _ := in.Attrs.Int("bytes_per_token")
				perPair = b / in.ArgTypes[2].Shape[1].N
			}
		}
	}
	disp, comb := st["moe_dispatch"], st["moe_combine"]
	pairs := disp.Header / 16
	wantIn, wantOut := pairs*perPair, pairs*2*d
	if !v41 {
		wantIn, wantOut = pairs*4*d, pairs*4*d
	}
	if pairs == 0 || disp.Remote == 0 || comb.Remote == 0 {
		t.Errorf("%s: no rows crossed ranks: %+v, %+v", name, disp, comb)
	}
	if disp.Remote+disp.Local != wantIn || comb.Remote+comb.Local != wantOut || comb.Header != disp.Header {
		t.Errorf("%s: %d pairs moved %d bytes out and %d back; want %d and %d", name, pairs, disp.Remote+disp.Local, comb.Remote+comb.Local, wantIn, wantOut)
	}
}

// routedBytes is the float32 bytes of the plan's routed-expert weights.
func routedBytes(m *vm.Machine) int64 {
	seen := map[int]bool{}
	var n int64
	for _, pr := range m.Plan.Programs {
		for _, in := range pr.Instrs {
			if in.Op != "moe_experts" {
				continue
			}
			for j, a := range in.Args {
				if j >= 3 && a.Kind == plan.OpWeight && !seen[a.Index] {
					seen[a.Index] = true
					n += 4 * m.Plan.Weights[a.Index].Elems()
				}
			}
		}
	}
	return n
}

// TestExpertParallelFailedStep: when one rank fails inside a step, the other ranks,
// waiting in an exchange, are released with the error instead of hanging; the step's
// sequences are given up, and the next requests run normally.
func TestExpertParallelFailedStep(t *testing.T) {
	var fails atomic.Int32
	hook := func(phase string, i int, in *plan.Instr, run func() error) error {
		if in.Op == "moe_experts" && phase == plan.PhasePrefill && fails.Add(1) == 1 {
			return errors.New("injected failure")
		}
		return run()
	}
	m := compileAndLoadWith(t, compiler.Options{ModelDir: fixtureDir, Spec: epSpec(t, 4)}, targets.Options{Hook: hook})
	reqs := invariantPool(t, fixtureDir, 8, 12)
	done := make(chan []vm.Result)
	go func() {
		var out []vm.Result
		(&vm.Engine{M: m}).Run(reqs, func(r vm.Result) { out = append(out, r) })
		done <- out
	}()
	var out []vm.Result
	select {
	case out = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the ranks hung after a failure")
	}
	failed := 0
	for _, r := range out {
		if r.Err != nil {
			failed++
			if !strings.Contains(r.Err.Error(), "injected failure") && !strings.Contains(r.Err.Error(), "another rank failed") {
				t.Errorf("request %s: %v", r.ID, r.Err)
			}
		}
	}
	if failed == 0 || len(out) != len(reqs) {
		t.Fatalf("%d results, %d failed: the injected failure did not fail the step's requests", len(out), failed)
	}
	// the group runs again
	want := runAll(t, &vm.Engine{M: compileAndLoad(t, compiler.Options{ModelDir: fixtureDir})}, reqs)
	sameResults(t, "after a failed step", runAll(t, &vm.Engine{M: m}, reqs), want)
}
