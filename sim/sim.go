package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"

	"deepinfer/plan"
	"deepinfer/targets/cost"
)

// Options configure a simulation.
type Options struct {
	Plan     *plan.Plan
	Workload *Workload
	Model    *cost.Model // device-launch model of the plan's target
	// MaxSteps bounds each role's simulation (default 1e6).
	MaxSteps int
}

// Percentiles of a latency sample, milliseconds.
type Percentiles struct {
	N                  int
	P50, P90, P99, Max float64
}

func percentiles(xs []float64) Percentiles {
	if len(xs) == 0 {
		return Percentiles{}
	}
	sort.Float64s(xs)
	at := func(q float64) float64 { return xs[min(len(xs)-1, int(q*float64(len(xs))))] }
	return Percentiles{N: len(xs), P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: xs[len(xs)-1]}
}

// KernelShare is one kernel's share of a role's simulated device time.
type KernelShare struct {
	Kernel string
	US     float64 // total over the run, per rank on the critical path
	Share  float64 // of compute time, or for a collective of communication time
	Bound  cost.Bound
	Comm   bool
}

// RoleResult is one role's simulated service.
type RoleResult struct {
	Role       string
	Ranks      int
	Steps      int
	SimSeconds float64
	Requests   int
	TokensIn   int64
	TokensOut  int64
	// TokensPerSecPerDevice: prefill counts input tokens, decode output tokens.
	TokensPerSecPerDevice float64
	TTFT, TPOT            Percentiles // ms; TTFT only for prefill, TPOT only for decode
	StepMS                Percentiles
	MeanBatch             float64 // sequences per rank per step
	MeanTokens            float64 // tokens per rank per step
	Preemptions           int
	ComputeShare          float64 // of step time on the critical rank
	CommExposedShare      float64 // communication not hidden by two-batch overlap
	CommShare             float64 // communication's share of all kernel time (hidden or not)
	Kernels               []KernelShare
	BoundShare            map[cost.Bound]float64
	Bottleneck            string
	// LayerUS is the time per model layer of one step at the mean batch (-1: embedding
	// and head), for the time-per-layer plot.
	LayerUS map[int]float64
	// Roofline holds one step's calls at the mean batch: FLOPs, bytes and time each.
	Roofline []kernelCall
	// Speedup is the decode speedup from speculation (tokens per step over the step
	// time ratio against non-speculative decoding); 0 without speculation.
	Speedup float64
	// DrafterPriced: the speculative steps include the plan's draft program (the
	// drafter's block of rows a sequence) and the rebuild of groups that rejected a
	// draft; otherwise the drafter is not counted and Speedup is an upper bound.
	DrafterPriced bool
	Trace         []TraceEvent
}

// Result is a whole simulation.
type Result struct {
	Model    string // the cost model's name and version
	Target   string
	Workload *Workload
	Roles    []RoleResult
}

type request struct {
	id        int
	in, out   int
	ctx       int // tokens in the KV
	generated int
	arrival   float64
	firstTok  float64
	lastTok   float64
	fed       int // prompt tokens prefilled (prefill role)
	accepted  int // drafts accepted in this step (decode role with speculation)
}

type rankState struct {
	waiting []*request
	running []*request
	kvUsed  int64
}

// Run simulates every role of the plan's deployment.
func Run(o Options) (*Result, error) {
	p := o.Plan
	if p.Deployment == nil || len(p.Deployment.Roles) == 0 {
		return nil, fmt.Errorf("the plan has no deployment: compile it with --spec to simulate")
	}
	if o.MaxSteps == 0 {
		o.MaxSteps = 1_000_000
	}
	res := &Result{Model: o.Model.ID(), Target: p.Target, Workload: o.Workload}
	for i := range p.Deployment.Roles {
		role := &p.Deployment.Roles[i]
		if hi := o.Workload.in.upper() + o.Workload.out.upper(); hi > float64(role.MaxModelLen) {
			return nil, fmt.Errorf("role %s: the workload's requests reach %g tokens (input %s + output %s), beyond max_model_len %d",
				role.Name, hi, o.Workload.in, o.Workload.out, role.MaxModelLen)
		}
		prog := p.Program(role.Name)
		pr := newPricer(o.Model, p, prog, role)
		var rr *RoleResult
		var err error
		if role.Name == "prefill" {
			rr, err = simPrefill(o, role, pr)
		} else {
			var draft *pricer
			if dp := p.Program(plan.PhaseDraft); dp != nil {
				draft = newPricer(o.Model, p, dp, role)
			}
			rr, err = simDecode(o, role, pr, draft)
		}
		if err != nil {
			return nil, fmt.Errorf("role %s: %w", role.Name, err)
		}
		res.Roles = append(res.Roles, *rr)
	}
	return res, nil
}

// stepTime combines a rank's compute and communication: serial, or with two-batch
// overlap, where the step is two half batches whose all-to-all runs under the other
// half's compute, leaving exposed only the pipeline's fill and drain (half a layer's
// share of the smaller of the two).
func stepTime(compute, comm float64, overlap bool, moeLayers int) float64 {
	if !overlap || comm == 0 {
		return compute + comm
	}
	return math.Max(compute, comm) + math.Min(compute, comm)/float64(2*max(1, moeLayers))
}

type generator struct {
	w     *Workload
	rng   *rand.Rand
	made  int
	clock float64
	next  float64 // open loop: next arrival time
}

func newGenerator(w *Workload, salt uint64) *generator {
	g := &generator{w: w, rng: rand.New(rand.NewPCG(w.Seed, salt))}
	if w.Rate > 0 {
		g.next = g.rng.ExpFloat64() / w.Rate
	}
	return g
}

func (g *generator) make(at float64) *request {
	g.made++
	return &request{id: g.made, in: g.w.in.Sample(g.rng), out: g.w.out.Sample(g.rng), arrival: at}
}

// arrivals returns the requests that arrive by time t (open loop).
func (g *generator) arrivals(t float64) []*request {
	var out []*request
	for g.w.Rate > 0 && g.made < g.w.Requests && g.next <= t {
		out = append(out, g.make(g.next))
		g.next += g.rng.ExpFloat64() / g.w.Rate
	}
	return out
}

func leastLoaded(ranks []*rankState) *rankState {
	best := ranks[0]
	for _, r := range ranks[1:] {
		if len(r.waiting)+len(r.running) < len(best.waiting)+len(best.running) {
			best = r
		}
	}
	return best
}

// kvPerToken is the role's KV bytes per token (from the plan's memory plan).
func kvCapacity(role *plan.Role) (perToken, capacity int64) {
	perToken = role.Mem("kv_per_token")
	capacity = role.Mem("kv_budget")
	if perToken <= 0 {
		perToken = 1
	}
	if capacity <= 0 {
		capacity = math.MaxInt64 / 4 // no device limit known
	}
	return perToken, capacity
}

type accumulator struct {
	kernels  map[string]*KernelShare
	bounds   map[cost.Bound]float64
	total    float64
	compute  float64
	exposed  float64
	steps    int
	batch    float64
	tokens   float64
	stepMS   []float64
	trace    []TraceEvent
	maxTrace int
}

func newAccumulator() *accumulator {
	return &accumulator{kernels: map[string]*KernelShare{}, bounds: map[cost.Bound]float64{}, maxTrace: 2000}
}

func (a *accumulator) add(role string, t0 float64, prices []*stepPrice, step, compute float64, batch, tokens int) {
	for _, sp := range prices {
		for _, c := range sp.Calls {
			k := a.kernels[c.Kernel]
			if k == nil {
				k = &KernelShare{Kernel: c.Kernel, Bound: c.Bound, Comm: c.Comm}
				a.kernels[c.Kernel] = k
			}
			k.US += c.US
			if !c.Comm {
				a.bounds[c.Bound] += c.US
			}
		}
	}
	a.total += step
	a.compute += compute
	a.exposed += step - compute
	a.steps++
	a.batch += float64(batch)
	a.tokens += float64(tokens)
	a.stepMS = append(a.stepMS, step/1e3)
	if len(a.trace) < a.maxTrace {
		a.trace = append(a.trace, TraceEvent{Name: fmt.Sprintf("%s step: %d seqs, %d tokens", role, batch, tokens),
			Cat: role, Ph: "X", TS: t0 * 1e6, Dur: step, PID: 1, TID: role})
	}
}

func (a *accumulator) finish(rr *RoleResult) {
	rr.Steps = a.steps
	if a.steps > 0 {
		rr.MeanBatch = a.batch / float64(a.steps)
		rr.MeanTokens = a.tokens / float64(a.steps)
	}
	if a.total > 0 {
		rr.ComputeShare = a.compute / a.total
		rr.CommExposedShare = a.exposed / a.total
	}
	var sum, comm float64
	for _, k := range a.kernels {
		if k.Comm {
			comm += k.US
		} else {
			sum += k.US
		}
	}
	for _, k := range a.kernels {
		if k.Comm {
			k.Share = k.US / comm
		} else {
			k.Share = k.US / sum
		}
		rr.Kernels = append(rr.Kernels, *k)
	}
	sort.Slice(rr.Kernels, func(i, j int) bool { return rr.Kernels[i].US > rr.Kernels[j].US })
	rr.BoundShare = map[cost.Bound]float64{}
	for b, us := range a.bounds {
		rr.BoundShare[b] = us / sum
	}
	if sum+comm > 0 {
		rr.CommShare = comm / (sum + comm)
	}
	rr.StepMS = percentiles(a.stepMS)
	rr.Trace = a.trace
	rr.Bottleneck = bottleneck(rr)
}

func bottleneck(rr *RoleResult) string {
	if rr.CommExposedShare > 0.3 {
		return fmt.Sprintf("communication: %.0f%% of the step is all-to-all not hidden by compute", 100*rr.CommExposedShare)
	}
	var best cost.Bound
	for b, s := range rr.BoundShare {
		if best == "" || s > rr.BoundShare[best] {
			best = b
		}
	}
	top := ""
	for _, k := range rr.Kernels {
		if !k.Comm {
			top = fmt.Sprintf("; largest: %s, %.0f%% of compute", k.Kernel, 100*k.Share)
			break
		}
	}
	return fmt.Sprintf("compute (%.0f%% of the step); %s-bound kernels are %.0f%% of it%s", 100*rr.ComputeShare, best, 100*rr.BoundShare[best], top)
}

// representative prices one step at the role's mean shape for the per-layer and
// roofline views.
func representative(rr *RoleResult, pr *pricer, s stepShape) error {
	static, dynamic, err := pr.price(s)
	if err != nil {
		return err
	}
	rr.LayerUS = map[int]float64{}
	for _, sp := range []*stepPrice{static, dynamic} {
		for _, c := range sp.Calls {
			rr.LayerUS[c.Layer] += c.US
			rr.Roofline = append(rr.Roofline, c)
		}
	}
	return nil
}
