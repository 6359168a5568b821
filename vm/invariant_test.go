package vm_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"deepinfer/compiler"
	"deepinfer/targets"
	"deepinfer/vm"
)

// invariantPool is a mix of requests over a fixture's prompts: whole prompts and
// prefixes of them, greedy and sampled (each with its own seed and cuts).
func invariantPool(t testing.TB, dir string, n, maxPrompt int) []vm.Request {
	t.Helper()
	base := specRequests(t, dir, 8)
	var pool []vm.Request
	for i := 0; len(pool) < n; i++ {
		r := base[i%len(base)]
		cut := len(r.Prompt) - (i/len(base))*5
		cut = min(max(cut, 3), maxPrompt)
		r.Prompt = slices.Clone(r.Prompt[:min(cut, len(r.Prompt))])
		r.ID = fmt.Sprintf("r%d", i)
		r.MaxTokens = 4 + i%4
		if i%2 == 1 {
			r.Sampling = vm.Sampling{Temperature: 0.6 + 0.1*float64(i%4), TopP: []float64{1, 0.9}[i/2%2], TopK: []int{0, 20}[i/4%2], Seed: uint64(1000 + i)}
		}
		pool = append(pool, r)
	}
	return pool
}

// TestBatchInvariance runs, in batch-invariant mode, every request of a mixed pool
// alone, then under 22 random schedules: up to 64 requests at once drawn from the pool
// (repeats included; the first schedule runs 64 in one batch; under the race detector
// the others draw up to 12 requests of prompts up to 6 tokens) in random order with random arrivals, step budgets from 3 to
// 4,096 tokens (chunked prefill at several chunk sizes), 1 to 64 running sequences,
// and on V4.1 with DSpark speculation on or off (random γ, fixed or varlen). Every
// request's tokens and every logits row must equal its solo run bit for bit. (Under
// the race detector: V4 and tiny-v41-dev2, modelFixtures.)
func TestBatchInvariance(t *testing.T) {
	for _, dir := range modelFixtures() {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			if dir != fixtureDir {
				v41Tokenizer(t)
			}
			m := compileAndLoadWith(t, compiler.Options{ModelDir: dir}, targets.Options{Invariant: true})
			maxPrompt, maxN := 16, 64
			if raceOn {
				maxPrompt, maxN = 6, 12 // schedule 0 still runs 64 requests
			}
			pool := invariantPool(t, dir, 24, maxPrompt)
			alone := make([]vm.Result, len(pool))
			for i, r := range pool {
				alone[i] = runAll(t, &vm.Engine{M: m, MaxSeqs: 1, MaxBatchTokens: 4096}, []vm.Request{r})[0]
			}
			rng := rand.New(rand.NewPCG(11, uint64(len(dir))))
			budgets := []int{3, 7, 16, 61, 4096}
			specRuns, groups := 0, int64(0)
			for sch := 0; sch < 22; sch++ {
				n := 1 + rng.IntN(maxN)
				if sch == 0 {
					n = 64
				}
				picks := make([]int, n)
				reqs := make([]vm.Request, n)
				for i := range picks {
					picks[i] = rng.IntN(len(pool))
					reqs[i] = pool[picks[i]]
					reqs[i].Arrival = rng.IntN(6)
				}
				e := &vm.Engine{M: m, MaxBatchTokens: budgets[rng.IntN(len(budgets))], MaxSeqs: []int{1, 3, 8, 64}[rng.IntN(4)]}
				if sch == 0 {
					e.MaxBatchTokens, e.MaxSeqs = 4096, 64 // all 64 in one batch
				}
				if m.CanDraft() && sch%2 == 0 {
					e.Spec = &vm.Speculation{MaxDraft: 1 + rng.IntN(5), Varlen: rng.IntN(2) == 0, Threshold: 0.3, Exact: true}
				}
				got := runAll(t, e, reqs)
				name := fmt.Sprintf("schedule %d (%d requests, budget %d, %d seqs, spec %v)", sch, n, e.MaxBatchTokens, e.MaxSeqs, e.Spec != nil)
				want := make([]vm.Result, n)
				for i, p := range picks {
					want[i] = alone[p]
				}
				sameResults(t, name, got, want)
				if e.Spec != nil {
					groups += e.SpecStats().Groups
					specRuns++
				}
			}
			if m.CanDraft() && (specRuns < 10 || groups == 0) {
				t.Errorf("only %d schedules speculated, %d verify groups", specRuns, groups)
			}
			t.Logf("%d schedules, %d with speculation (%d verify groups)", 22, specRuns, groups)
		})
	}
}

// modelFixtures are the fixtures the heaviest tests run on: V4 and both V4.1 fixtures,
// or under the race detector V4 and tiny-v41-dev2 (the second V4.1 shape family).
func modelFixtures() []string {
	if raceOn {
		return []string{fixtureDir, fixturesV41[1]}
	}
	return append([]string{fixtureDir}, fixturesV41...)
}
