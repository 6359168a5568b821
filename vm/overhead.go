package vm

import (
	"fmt"
	"sort"
	"time"

	"deepinfer/plan"
	"deepinfer/targets/cpu"
)

// LoadOverheadProbe opens a plan of any target on a probe runtime (kernels that do
// nothing, no weights, no per-sequence state), so that running it costs only what the
// VM and a runtime do around the kernels: scheduling, batch preparation, binding the
// arena, dispatching calls, drawing sampling randoms and handling outputs. This is how
// the VM's step overhead is measured for targets whose kernels run elsewhere (a real
// device, or the simulator).
func LoadOverheadProbe(p *plan.Plan) (*Machine, error) {
	rt, err := cpu.OpenProbe(p)
	if err != nil {
		return nil, err
	}
	return open(p, rt, &Machine{})
}

// StepOverhead is the distribution of a decode step's wall time with no-op kernels.
type StepOverhead struct {
	Batch, Steps, Calls int
	P50, P90, Max       time.Duration
}

// MeasureStepOverhead decodes batch sequences for steps steps on a probe machine and
// returns the per-step times (the first step, which allocates the arena, excluded).
func MeasureStepOverhead(m *Machine, batch, steps int) (*StepOverhead, error) {
	reqs := make([]Request, batch)
	for i := range reqs {
		reqs[i] = Request{ID: fmt.Sprint(i), Prompt: []int32{int32(i % m.Plan.Model.Vocab)}, MaxTokens: steps + 1,
			Sampling: Sampling{Temperature: 0.7, TopP: 0.9, Seed: uint64(i)}}
	}
	var times []time.Duration
	last := time.Now()
	e := &Engine{M: m, MaxSeqs: batch, MaxBatchTokens: batch, OnStep: func(step, tokens int) {
		now := time.Now()
		if step > 0 && tokens == batch {
			times = append(times, now.Sub(last))
		}
		last = now
	}}
	var firstErr error
	e.Run(reqs, func(r Result) {
		if r.Err != nil && firstErr == nil {
			firstErr = r.Err
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	if len(times) == 0 {
		return nil, fmt.Errorf("no full decode steps measured")
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return &StepOverhead{Batch: batch, Steps: len(times), Calls: len(m.Plan.Program(plan.PhaseDecode).Instrs),
		P50: times[len(times)/2], P90: times[len(times)*9/10], Max: times[len(times)-1]}, nil
}
