package cuda_test

import (
	"fmt"
	"testing"

	"deepinfer/internal/vmtest"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/targets/cpu"
	"deepinfer/targets/cuda"
	"deepinfer/vm"
)

// cpuExec opens a device plan with the cpu target's kernels (the reference).
type cpuExec struct{ targets.Target }

func (cpuExec) Open(p *plan.Plan, w []targets.Weight, o targets.Options) (targets.Runtime, error) {
	return cpu.OpenAny(p, w, o)
}

// TestDeviceEngineAsync runs the engine's async scheduler on the device (emulated here;
// the GPU with -device gpu) — steps enqueued before the last one's tokens are back, the
// tokens fed on the device, CUDA graphs on — against the same engine with the scheduler
// off and against the cpu target: every request's tokens equal, greedy and seeded, stop
// tokens and uneven lengths included, and the async path actually taken; with packed
// uploads (the default) and with the per-parameter copies (cuda.EnvPacked=0).
func TestDeviceEngineAsync(t *testing.T) {
	for _, mode := range []string{"packed", "per-parameter"} {
		for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev2"} {
			t.Run(mode+"/"+model, func(t *testing.T) {
				t.Setenv(cuda.EnvPacked, map[string]string{"packed": "1", "per-parameter": "0"}[mode])
				deviceEngineAsync(t, model)
			})
		}
	}
}

func deviceEngineAsync(t *testing.T, model string) {
	m := loadDevice(t, model, targets.Options{MaxTokens: 256})
	reqs := devRequests(t, model, 6, 14)
	for i := range reqs {
		reqs[i].KeepLogits = false // a step that returns logits is not overlapped
		reqs[i].MaxTokens = 6 + 3*i
	}
	// a stop token the first greedy request produces, so one sequence ends early
	// while another row of it is already queued
	probe := vmtest.RunAll(t, &vm.Engine{M: m, Sync: true}, reqs[:1])
	reqs[0].Stop = []int32{probe[0].Tokens[3]}

	async := &vm.Engine{M: m}
	got := vmtest.RunAll(t, async, reqs)
	st := async.Stats()
	if st.AsyncSteps == 0 {
		t.Fatalf("no step ran async (stats %+v)", st)
	}
	t.Logf("%s: %d of %d steps async, %d rows discarded, %v host time hidden", model, st.AsyncSteps, st.Steps, st.Discarded, st.Hidden)
	sync := vmtest.RunAll(t, &vm.Engine{M: m, Sync: true}, reqs)
	vmtest.SameResults(t, "async vs sync, device", got, sync)

	cm := loadWith(t, model, func(tg targets.Target) targets.Executor { return cpuExec{tg} }, targets.Options{MaxTokens: 256})
	vmtest.SameResults(t, "device async vs cpu", got, vmtest.RunAll(t, &vm.Engine{M: cm, Sync: true}, reqs))
	if len(got[0].Tokens) != 3 || got[0].Finish != "stop" {
		t.Errorf("request 0 with stop token %d: %d tokens, finish %q; want 3, stop", reqs[0].Stop[0], len(got[0].Tokens), got[0].Finish)
	}
}

// TestDeviceIndexSelection: prompts long enough that a prefill step's rows see more
// compressed entries than the indexer's top-k (tiny-v4-dev: ratio 4, topk 4), prefilled
// in one step of 16 rows or more, so the indexer ranks by selection (att_index_select,
// whose device path differs from the emulated one), then decoded; in the exact mode
// every token and logit equals the cpu target's (emulated here; the GPU with -device gpu).
func TestDeviceIndexSelection(t *testing.T) {
	const model = "tiny-v4-dev"
	m := loadDevice(t, model, targets.Options{MaxTokens: 256})
	cm := loadWith(t, model, func(tg targets.Target) targets.Executor { return cpuExec{tg} }, targets.Options{MaxTokens: 256})
	var reqs []vm.Request
	for i, n := range []int{80, 41, 23} {
		p := make([]int32, n)
		for j := range p {
			p[j] = int32((j*389 + i*97 + 11) % m.Plan.Model.Vocab)
		}
		reqs = append(reqs, vm.Request{ID: fmt.Sprint("r", i), Prompt: p, MaxTokens: 4, KeepLogits: true})
	}
	e := func(mm *vm.Machine) *vm.Engine { return &vm.Engine{M: mm, Sync: true, MaxBatchTokens: 256, MaxSeqs: 8} }
	vmtest.SameResults(t, "device vs cpu", vmtest.RunAll(t, e(m), reqs), vmtest.RunAll(t, e(cm), reqs))
}
