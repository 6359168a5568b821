package sim

import (
	"fmt"

	"deepinfer/plan"
	"deepinfer/targets/cost"
)

// StepCost is one decode step's predicted device time on one rank, by plan kernel class.
type StepCost struct {
	Model   string             // the cost model's name, version and fit
	US      float64            // the step: compute plus communication (serial, no overlap)
	CommUS  float64            // collectives, included in US
	ByClass map[string]float64 // µs per plan kernel class (Instr.Kernel), collectives included
	Calls   int                // kernel calls priced
	// Per class, the model's counts behind its time: calls, bytes moved, FLOPs.
	ClassCalls map[string]int
	ClassBytes map[string]float64
	ClassFLOPs map[string]float64
	// Per class, the model's terms summed over its calls: floors, memory and compute
	// time (µs; a class's US is not their sum where the model blends the two).
	ClassFloorUS, ClassMemoryUS, ClassComputeUS map[string]float64
	ClassScan                                   map[string]float64 // entries in view (cost.Kernel.Scan)
	ClassHeap                                   map[string]float64 // heap-select replacements (cost.Kernel.Heap)
}

// DecodeStep prices one decode step of batch sequences, each ctx tokens into its
// context, on one rank: the plan's decode role when it has a deployment, else (a plan
// compiled without a spec, as divm bench runs) its decode program on one device with
// every expert local. The step is the sum of its kernels, as on a device that runs
// them one after another; communication, if any, is added without overlap.
func DecodeStep(p *plan.Plan, m *cost.Model, batch, ctx int) (*StepCost, error) {
	return DecodeStepSampled(p, m, batch, ctx, false)
}

// DecodeStepSampled is DecodeStep with every row sampled at a temperature when sampled
// is set (the sampler priced as SampledClass of its kernel), greedy otherwise.
func DecodeStepSampled(p *plan.Plan, m *cost.Model, batch, ctx int, sampled bool) (*StepCost, error) {
	if batch < 1 || ctx < 0 {
		return nil, fmt.Errorf("decode step of batch %d at context %d: needs batch ≥ 1 and context ≥ 0", batch, ctx)
	}
	role := &plan.Role{Name: "decode", DP: 1, EP: 1, CP: 1, TP: 1}
	if p.Deployment != nil {
		for i := range p.Deployment.Roles {
			if r := &p.Deployment.Roles[i]; r.Name == "decode" {
				role = r
			}
		}
	}
	if limit := p.Model.MaxPositions; limit > 0 && ctx+1 > limit {
		return nil, fmt.Errorf("a decode step at context %d reaches position %d, beyond the model's %d positions", ctx, ctx+1, limit)
	}
	if role.MaxModelLen > 0 && ctx+1 > role.MaxModelLen {
		return nil, fmt.Errorf("a decode step at context %d reaches %d tokens, beyond role %s's max_model_len %d", ctx, ctx+1, role.Name, role.MaxModelLen)
	}
	prog := p.Program(role.Name)
	if prog == nil {
		return nil, fmt.Errorf("the plan has no %s program", role.Name)
	}
	pr := newPricer(m, p, prog, role)
	shape := stepShape{T: batch, R: batch, Ctx: float64(ctx)}
	if sampled {
		shape.S = batch
	}
	static, dynamic, err := pr.price(shape)
	if err != nil {
		return nil, err
	}
	sc := &StepCost{Model: m.ID(), ByClass: map[string]float64{}, ClassCalls: map[string]int{},
		ClassBytes: map[string]float64{}, ClassFLOPs: map[string]float64{}, ClassFloorUS: map[string]float64{},
		ClassMemoryUS: map[string]float64{}, ClassComputeUS: map[string]float64{}, ClassScan: map[string]float64{}, ClassHeap: map[string]float64{}}
	for _, sp := range []*stepPrice{static, dynamic} {
		sc.US += sp.ComputeUS + sp.CommUS
		sc.CommUS += sp.CommUS
		for _, c := range sp.Calls {
			sc.ByClass[c.Kernel] += c.US
			sc.ClassCalls[c.Kernel]++
			sc.ClassBytes[c.Kernel] += c.Bytes
			sc.ClassFLOPs[c.Kernel] += c.FLOPs
			sc.ClassFloorUS[c.Kernel] += c.FloorUS
			sc.ClassMemoryUS[c.Kernel] += c.MemoryUS
			sc.ClassComputeUS[c.Kernel] += c.ComputeUS
			sc.ClassScan[c.Kernel] += c.Scan
			sc.ClassHeap[c.Kernel] += c.Heap
			sc.Calls++
		}
	}
	return sc, nil
}
