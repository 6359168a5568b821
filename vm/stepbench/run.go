package stepbench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"time"

	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
	"deepinfer/vm/sampling"
)

// Config is a benchmark's grid and repetitions.
type Config struct {
	Batches      []int // sequences per decode step
	Contexts     []int // tokens in each sequence's state before the timed steps
	Warmup       int   // untimed decode steps first
	Steps        int   // timed decode steps (the median is reported)
	ProfileSteps int   // steps run again with per-instruction device events (0: none)
	Chunk        int   // prefill tokens per step when building the context
	CopyBytes    int64 // buffer size for the copy-bandwidth measurement (0: 1 GiB)
	Seed         uint64
	Progress     io.Writer // progress lines (nil: quiet)
	// NoGraphs runs the steps without a device runtime's captured graphs (each kernel
	// launched on its own), to compare with the default.
	NoGraphs bool
	// ProfilePrefill builds each context once more, on a fresh sequence, with
	// per-instruction device events, for the prefill's time by kernel class (Report.Prefill).
	ProfilePrefill bool
	// Sampling, when its temperature is above 0, samples every decode row with these
	// parameters (a random number a row and step from Seed) instead of greedily.
	Sampling vm.Sampling
}

// PrefillProfile is one context's build, run again with per-instruction events: the
// whole build's device time by kernel class and by launched kernel (not per step).
type PrefillProfile struct {
	Context  int
	Chunk    int
	Seconds  float64            // wall time of the profiled build (events between instructions add to it)
	ClassMs  map[Class]float64  // the build's device time by kernel class
	LaunchMs map[string]float64 // by "class: launched kernel" (when the runtime times launches)
}

// Point is one (batch, context) measurement.
type Point struct {
	Batch, Context int
	StepMs         []float64          // wall time of each timed step (upload, kernels, read-back)
	MedianMs       float64            // median of StepMs
	Bytes          Bytes              // what a step must read
	ClassMs        map[Class]float64  // per-step device time by kernel class (profiled steps)
	LaunchMs       map[string]float64 // per-step device time by "class: launched kernel" (profiled steps, when the runtime times launches)
	LaunchCalls    map[string]float64 // launches a step of each LaunchMs key (the profiled steps' count over the steps)
	PrefillSeconds float64            // building the context (one sequence; the rest copied)
	PrefillTFLOPS  float64            // its products' rate: PrefillFLOPs over PrefillSeconds (wall time)
	// From the device timeline of the timed steps (a runtime with targets.Timeline):
	// the median device time of a step, and the median idle gap between one step's
	// end and the next one's start on the device (synchronous steps: the host's
	// read-back, bookkeeping and uploads sit in the gap).
	DeviceMs float64
	GapUs    float64
	// From one more step with the expert census on (a runtime with
	// targets.ExpertCensus): the distinct experts each MoE instruction's slots went
	// to, and the step's bytes with those experts' weights counted instead of the
	// expectation for independent tokens (Bytes).
	Experts      []ExpertCount `json:",omitempty"`
	BytesTouched *Bytes        `json:",omitempty"`
}

// ExpertCount is one MoE instruction's experts in a census step.
type ExpertCount struct {
	Instr, Layer, Experts int
	Expected              float64 // distinct experts a batch of independent tokens touches (ExpectedExperts)
	Touched               float64 // distinct experts the step's slots went to
	MaxSlots              int     // the most slots one expert had (an even spread: about batch·k/E)
}

// ExpertsPerLayer is the census's mean distinct experts a MoE instruction and the
// expectation's (zeros without a census).
func (p *Point) ExpertsPerLayer() (touched, expected float64) {
	for _, e := range p.Experts {
		touched += e.Touched
		expected += e.Expected
	}
	if n := float64(len(p.Experts)); n > 0 {
		return touched / n, expected / n
	}
	return 0, 0
}

// Total is the point's bytes: those of the experts touched when a census ran, the
// expectation's otherwise.
func (p *Point) Total() float64 {
	if p.BytesTouched != nil {
		return p.BytesTouched.Total()
	}
	return p.Bytes.Total()
}

// Report is a benchmark run.
type Report struct {
	Device string    // the machine's description after the run
	Graphs string    // the device runtime's graphs after the run ("" without)
	CopyBW []float64 // bytes/s, read plus written; measured before and after the points
	Points []Point
	// Prefill holds the profiled context builds (Config.ProfilePrefill).
	Prefill []PrefillProfile `json:",omitempty"`
	// Sampling is the decode rows' sampling (Config.Sampling; nil: greedy).
	Sampling *vm.Sampling `json:",omitempty"`
}

// CopyBWMedian is the median of the copy-bandwidth measurements (0 without a device).
func (r *Report) CopyBWMedian() float64 { return median(r.CopyBW) }

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Run measures every point of the grid on the machine (opened with MaxContext at least
// the largest context plus the steps).
func Run(m *vm.Machine, cfg Config) (*Report, error) {
	if len(cfg.Batches) == 0 || len(cfg.Contexts) == 0 || cfg.Steps < 1 {
		return nil, fmt.Errorf("stepbench: needs batches, contexts and at least one timed step")
	}
	for _, c := range cfg.Contexts {
		if c < 1 {
			return nil, fmt.Errorf("stepbench: context %d: a decode step needs at least one token before it", c)
		}
		// (+2: the first decode token, and the expert census's step)
		if need := c + cfg.Warmup + cfg.Steps + cfg.ProfileSteps + 2; need > m.MaxPositions() {
			return nil, fmt.Errorf("stepbench: context %d plus %d steps needs %d positions; the machine holds %d", c, cfg.Warmup+cfg.Steps+cfg.ProfileSteps, need, m.MaxPositions())
		}
	}
	if err := cfg.Sampling.Validate(); err != nil {
		return nil, fmt.Errorf("stepbench: %w", err)
	}
	if cfg.Chunk <= 0 {
		cfg.Chunk = 1024
	}
	if cfg.CopyBytes <= 0 {
		cfg.CopyBytes = 1 << 30
	}
	say := func(format string, a ...any) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "stepbench: "+format+"\n", a...)
		}
	}
	rep := &Report{Device: m.Describe()}
	if cfg.Sampling.Temperature > 0 {
		sp := cfg.Sampling
		rep.Sampling = &sp
	}
	// a device runtime answers for its graphs and timeline through the same value as
	// its profiler
	rtv := any(m.Profiler())
	if g, ok := rtv.(graphSwitch); ok && cfg.NoGraphs {
		if err := g.SetGraphs(false); err != nil {
			return nil, err
		}
	}
	defer func() {
		if g, ok := rtv.(graphSwitch); ok {
			rep.Graphs = g.GraphSummary()
		}
		// described again after the points, so that the counts it carries (graphs
		// captured and replayed) are the run's, not the open's
		rep.Device = m.Describe()
	}()
	dev := m.DeviceBench()
	copyBW := func() error {
		if dev == nil {
			return nil
		}
		bw, err := dev.CopyBandwidth(cfg.CopyBytes, 10)
		if err != nil {
			return err
		}
		rep.CopyBW = append(rep.CopyBW, bw)
		say("device-to-device copy of %d MiB: %.0f GB/s (read + write)", cfg.CopyBytes>>20, bw/1e9)
		return nil
	}
	if err := copyBW(); err != nil {
		return nil, err
	}
	V := m.Plan.Model.Vocab
	// tokens: a source of random tokens for one context's prompt (B 0) or one point's
	// decode rows, drawn from Seed, the context and B only, so that a point reads the same
	// tokens (and, under --route uniform, the same experts) whatever other points the
	// run has: two builds' reports of different batch lists compare step for step
	tokens := func(ctx, B int) func() int32 {
		rng := rand.New(rand.NewPCG(cfg.Seed, 0xbe7c4^uint64(ctx)<<24^uint64(B)))
		return func() int32 { return int32(3 + rng.IntN(max(V-3, 1))) }
	}
	prefill := func(s *vm.Sequence, toks []int32) error {
		for i := 0; i < len(toks); i += cfg.Chunk {
			j := min(i+cfg.Chunk, len(toks))
			if _, err := m.Forward([]vm.Chunk{{Seq: s, Tokens: toks[i:j]}}); err != nil {
				return fmt.Errorf("building the context (tokens %d–%d): %w", i, j, err)
			}
		}
		return nil
	}
	contexts := slices.Sorted(slices.Values(cfg.Contexts))
	for _, ctx := range contexts {
		prompt := make([]int32, ctx)
		token := tokens(ctx, 0)
		for i := range prompt {
			prompt[i] = token()
		}
		tmpl, err := m.NewSequence()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if err := prefill(tmpl, prompt); err != nil {
			tmpl.Release()
			return nil, err
		}
		pre := time.Since(start).Seconds()
		tflops := PrefillFLOPs(m.Plan, ctx) / pre / 1e12
		say("context %d built in %.1f s (chunks of %d): %.2f TFLOP/s of products", ctx, pre, cfg.Chunk, tflops)
		if cfg.ProfilePrefill {
			pp, err := profilePrefill(m, ctx, cfg.Chunk, func(s *vm.Sequence) error { return prefill(s, prompt) })
			if err != nil {
				tmpl.Release()
				return nil, err
			}
			if pp != nil {
				rep.Prefill = append(rep.Prefill, *pp)
				say("context %d built again with per-kernel events in %.1f s", ctx, pp.Seconds)
			}
		}
		for _, B := range cfg.Batches {
			pt, err := runPoint(m, cfg, tmpl, prompt, B, ctx, tokens(ctx, B), prefill, say)
			if err != nil {
				tmpl.Release()
				return nil, err
			}
			pt.PrefillSeconds, pt.PrefillTFLOPS = pre, tflops
			rep.Points = append(rep.Points, *pt)
			line := fmt.Sprintf("batch %d, context %d: median step %.3f ms over %d steps; %.1f MB read, %.0f GB/s", B, ctx, pt.MedianMs, cfg.Steps,
				pt.Total()/1e6, pt.Total()/(pt.MedianMs/1e3)/1e9)
			if bw := rep.CopyBWMedian(); bw > 0 {
				line += fmt.Sprintf(", %.1f%% of the copy bandwidth", 100*pt.Total()/(pt.MedianMs/1e3)/bw)
			}
			if t, e := pt.ExpertsPerLayer(); t > 0 {
				most := 0
				for _, x := range pt.Experts {
					most = max(most, x.MaxSlots)
				}
				line += fmt.Sprintf(" (experts touched %.1f a layer, %.1f expected for independent tokens: %.1f MB by the expectation; at most %d slots an expert)", t, e, pt.Bytes.Total()/1e6, most)
			}
			if pt.DeviceMs > 0 {
				line += fmt.Sprintf("; on the device %.3f ms a step, idle %.1f µs between steps", pt.DeviceMs, pt.GapUs)
			}
			say("%s", line)
		}
		tmpl.Release()
	}
	if err := copyBW(); err != nil {
		return nil, err
	}
	return rep, nil
}

func runPoint(m *vm.Machine, cfg Config, tmpl *vm.Sequence, prompt []int32, B, ctx int, token func() int32,
	prefill func(*vm.Sequence, []int32) error, say func(string, ...any)) (*Point, error) {
	seqs := make([]*vm.Sequence, B)
	defer func() {
		for _, s := range seqs {
			if s != nil {
				s.Release()
			}
		}
	}()
	for i := range seqs {
		s, err := m.NewSequence()
		if err != nil {
			return nil, fmt.Errorf("batch %d: sequence %d: %w", B, i, err)
		}
		seqs[i] = s
		if m.DeviceBench() != nil {
			err = m.CopySequence(s, tmpl)
		} else {
			err = prefill(s, prompt)
		}
		if err != nil {
			return nil, fmt.Errorf("batch %d: sequence %d: %w", B, i, err)
		}
	}
	chunks := make([]vm.Chunk, B)
	for i := range chunks {
		chunks[i] = vm.Chunk{Seq: seqs[i], Tokens: []int32{token()}, Decode: true}
	}
	sp := cfg.Sampling
	urng := rand.New(rand.NewPCG(sp.Seed^cfg.Seed, uint64(B)))
	step := func() (float64, error) {
		sampleRows(chunks, sp, urng)
		t := time.Now()
		_, err := m.Forward(chunks)
		el := time.Since(t).Seconds() * 1e3
		if err != nil {
			return 0, err
		}
		// the next step's tokens drawn at random, not the ones sampled: rows that are
		// copies of one sequence and fed a random-weight model's greedy tokens fall onto
		// the same few tokens, and so the same few experts, which a byte count of
		// independent requests does not describe (run 30: V4.1's experts read "139% of
		// the copy bandwidth" at batch 64 that way)
		for i := range chunks {
			chunks[i].Tokens = []int32{token()}
		}
		return el, nil
	}
	pt := &Point{Batch: B, Context: ctx, Bytes: DecodeBytes(m.Plan, B, ctx)}
	for i := 0; i < cfg.Warmup; i++ {
		if _, err := step(); err != nil {
			return nil, fmt.Errorf("batch %d, context %d, warm-up step: %w", B, ctx, err)
		}
	}
	tl, _ := any(m.Profiler()).(targets.Timeline)
	if tl != nil {
		tl.SetTimeline(true, false)
		if _, err := tl.TakeTimeline(); err != nil {
			tl.SetTimeline(false, false)
			return nil, err
		}
	}
	for i := 0; i < cfg.Steps; i++ {
		ms, err := step()
		if err != nil {
			if tl != nil {
				tl.SetTimeline(false, false)
			}
			return nil, fmt.Errorf("batch %d, context %d, timed step: %w", B, ctx, err)
		}
		pt.StepMs = append(pt.StepMs, ms)
	}
	pt.MedianMs = median(pt.StepMs)
	if tl != nil {
		spans, err := tl.TakeTimeline()
		tl.SetTimeline(false, false)
		if err != nil {
			return nil, fmt.Errorf("batch %d, context %d, device timeline: %w", B, ctx, err)
		}
		pt.DeviceMs, pt.GapUs = stepGaps(spans)
	}
	if prof := m.Profiler(); prof != nil && cfg.ProfileSteps > 0 {
		prof.TakeProfile()
		prof.SetProfile(true)
		for i := 0; i < cfg.ProfileSteps; i++ {
			if _, err := step(); err != nil {
				prof.SetProfile(false)
				return nil, fmt.Errorf("batch %d, context %d, profiled step: %w", B, ctx, err)
			}
		}
		prof.SetProfile(false)
		var launches map[string]time.Duration
		var counts map[string]int
		if lp, ok := prof.(targets.LaunchProfiler); ok {
			launches, counts = lp.TakeLaunchProfile(), lp.TakeLaunchCounts()
		}
		tot, n := prof.TakeProfile()
		if launches != nil {
			pt.LaunchMs = map[string]float64{}
			for k, d := range launches {
				pt.LaunchMs[k] = d.Seconds() * 1e3 / float64(max(n, 1))
			}
			pt.LaunchCalls = map[string]float64{}
			for k, c := range counts {
				pt.LaunchCalls[k] = float64(c) / float64(max(n, 1))
			}
		}
		pt.ClassMs = map[Class]float64{}
		for k, d := range tot {
			pt.ClassMs[k] = d.Seconds() * 1e3 / float64(max(n, 1))
		}
	}
	if ec := m.ExpertCensus(); ec != nil && hasExperts(m) {
		ec.TakeExpertCensus()
		ec.SetExpertCensus(true)
		_, err := step()
		ec.SetExpertCensus(false)
		if err != nil {
			return nil, fmt.Errorf("batch %d, context %d, expert census step: %w", B, ctx, err)
		}
		d, n := ec.TakeExpertCensus()
		pt.Experts, pt.BytesTouched = censusBytes(m, B, ctx, d, n)
	}
	return pt, nil
}

// hasExperts reports whether the machine's decode program routes tokens to experts.
func hasExperts(m *vm.Machine) bool {
	for _, pr := range m.Plan.Programs {
		if pr.Phase == plan.PhaseDecode {
			for _, in := range pr.Instrs {
				if in.Op == "moe_experts" {
					return true
				}
			}
		}
	}
	return false
}

// censusBytes turns a census of n steps (distinct experts summed by instruction) into
// the point's expert counts and its bytes with the experts touched.
func censusBytes(m *vm.Machine, B, ctx int, d map[int]targets.ExpertTally, n int) ([]ExpertCount, *Bytes) {
	if n <= 0 || len(d) == 0 {
		return nil, nil
	}
	var pr *plan.Program
	for i := range m.Plan.Programs {
		if m.Plan.Programs[i].Phase == plan.PhaseDecode {
			pr = &m.Plan.Programs[i]
		}
	}
	if pr == nil {
		return nil, nil
	}
	// each moe_experts instruction's top-k: the router's before it (as DecodeBytes reads it)
	topks := map[int]int{}
	topk := 0
	for i, in := range pr.Instrs {
		switch in.Op {
		case "moe_route":
			if k, ok := in.Attrs.Int("topk"); ok {
				topk = int(k)
			}
		case "moe_experts":
			topks[i] = topk
		}
	}
	touched := map[int]float64{}
	var out []ExpertCount
	for i, v := range d {
		if i < 0 || i >= len(pr.Instrs) {
			continue
		}
		in := &pr.Instrs[i]
		E, _ := in.Attrs.Int("experts")
		layer, ok := in.Attrs.Int("layer")
		if !ok {
			layer = -1
		}
		touched[i] = float64(v.Distinct) / float64(n)
		out = append(out, ExpertCount{Instr: i, Layer: int(layer), Experts: int(E),
			Expected: ExpectedExperts(int(E), topks[i], B), Touched: touched[i], MaxSlots: int(v.MaxSlots)})
	}
	slices.SortFunc(out, func(a, b ExpertCount) int { return a.Instr - b.Instr })
	b := DecodeBytesTouched(m.Plan, B, ctx, touched)
	return out, &b
}

// profilePrefill builds the context on a fresh sequence with the profiler on (nil
// without a profiler).
func profilePrefill(m *vm.Machine, ctx, chunk int, build func(*vm.Sequence) error) (*PrefillProfile, error) {
	prof := m.Profiler()
	if prof == nil {
		return nil, nil
	}
	s, err := m.NewSequence()
	if err != nil {
		return nil, err
	}
	defer s.Release()
	prof.TakeProfile()
	if lp, ok := prof.(targets.LaunchProfiler); ok {
		lp.TakeLaunchProfile()
		lp.TakeLaunchCounts()
	}
	prof.SetProfile(true)
	start := time.Now()
	err = build(s)
	prof.SetProfile(false)
	if err != nil {
		return nil, fmt.Errorf("context %d, profiled build: %w", ctx, err)
	}
	pp := &PrefillProfile{Context: ctx, Chunk: chunk, Seconds: time.Since(start).Seconds(), ClassMs: map[Class]float64{}}
	if lp, ok := prof.(targets.LaunchProfiler); ok {
		pp.LaunchMs = map[string]float64{}
		for k, d := range lp.TakeLaunchProfile() {
			pp.LaunchMs[k] = d.Seconds() * 1e3
		}
		lp.TakeLaunchCounts() // (not kept for a build)
	}
	tot, _ := prof.TakeProfile()
	for k, d := range tot {
		pp.ClassMs[k] = d.Seconds() * 1e3
	}
	return pp, nil
}

// Table writes the report as text: per point the step time, the bytes and their rate
// over the copy bandwidth; per kernel class the same from the profiled steps.
func (r *Report) Table(w io.Writer) {
	bw := r.CopyBWMedian()
	frac := func(bytes, ms float64) string {
		if bw <= 0 || ms <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*bytes/(ms/1e3)/bw)
	}
	if bw > 0 {
		var each []string
		for _, b := range r.CopyBW {
			each = append(each, fmt.Sprintf("%.0f", b/1e9))
		}
		fmt.Fprintf(w, "copy bandwidth (device to device, read + write): median %.0f GB/s (%s)\n", bw/1e9, strings.Join(each, ", "))
	}
	if sp := r.Sampling; sp != nil {
		fmt.Fprintf(w, "decode rows sampled: temperature %g, top-p %g, top-k %d (not greedy)\n", sp.Temperature, sp.TopP, sp.TopK)
	}
	if r.Graphs != "" {
		fmt.Fprintf(w, "%s\n", r.Graphs)
	}
	census := false
	for _, p := range r.Points {
		census = census || p.BytesTouched != nil
	}
	if census {
		fmt.Fprintf(w, "bytes: the routed experts' weights of the experts a census step's slots went to; experts touched a MoE layer: census / expectation for independent tokens; expected MB: the bytes with the expectation\n")
	}
	fmt.Fprintf(w, "%-6s %-8s %12s %12s %10s %10s %12s %12s %16s %14s\n", "batch", "context", "step ms", "bytes MB", "GB/s", "of copy", "device ms", "idle gap us", "experts touched", "expected MB")
	for _, p := range r.Points {
		t := p.Total()
		dev, gap := "-", "-"
		if p.DeviceMs > 0 {
			dev, gap = fmt.Sprintf("%.3f", p.DeviceMs), fmt.Sprintf("%.1f", p.GapUs)
		}
		ex, exMB := "-", "-"
		if tc, e := p.ExpertsPerLayer(); tc > 0 {
			ex, exMB = fmt.Sprintf("%.1f / %.1f", tc, e), fmt.Sprintf("%.1f", p.Bytes.Total()/1e6)
		}
		fmt.Fprintf(w, "%-6d %-8d %12.3f %12.1f %10.1f %10s %12s %12s %16s %14s\n", p.Batch, p.Context, p.MedianMs, t/1e6, t/(p.MedianMs/1e3)/1e9, frac(t, p.MedianMs), dev, gap, ex, exMB)
	}
	seen := map[int]bool{}
	for _, p := range r.Points {
		if !seen[p.Context] && p.PrefillSeconds > 0 {
			seen[p.Context] = true
			fmt.Fprintf(w, "prefill of one %d-token sequence: %.3f s, %.2f TFLOP/s of products (wall time; attention's products not counted)\n", p.Context, p.PrefillSeconds, p.PrefillTFLOPS)
		}
	}
	for _, pp := range r.Prefill {
		fmt.Fprintf(w, "prefill of one %d-token sequence in chunks of %d, by kernel class (profiled build, %.3f s; event times, whole build):\n", pp.Context, pp.Chunk, pp.Seconds)
		writeSorted(w, pp.ClassMs, len(pp.ClassMs), "  %-40s %10.3f ms %5.1f%%\n", true)
		if len(pp.LaunchMs) > 0 {
			fmt.Fprintf(w, "prefill of %d tokens, the %d longest launched kernels (class: kernel; event times, whole build):\n", pp.Context, min(len(pp.LaunchMs), launchRows))
			writeSorted(w, pp.LaunchMs, launchRows, "  %-60s %10.3f ms %5.1f%%\n", false)
		}
	}
	for _, p := range r.Points {
		if p.ClassMs == nil {
			continue
		}
		fmt.Fprintf(w, "batch %d, context %d, by kernel class (profiled steps; event times):\n", p.Batch, p.Context)
		classes := map[Class]bool{}
		for k := range p.ClassMs {
			classes[k] = true
		}
		for k := range p.Bytes.Weights {
			classes[k] = true
		}
		for k := range p.Bytes.KV {
			classes[k] = true
		}
		keys := make([]string, 0, len(classes))
		for k := range classes {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return p.ClassMs[keys[i]] > p.ClassMs[keys[j]] })
		var sum float64
		for _, k := range keys {
			sum += p.ClassMs[k]
		}
		by := p.Bytes
		if p.BytesTouched != nil {
			by = *p.BytesTouched
		}
		for _, k := range keys {
			ms, b := p.ClassMs[k], by.Class(k)
			fmt.Fprintf(w, "  %-40s %10.3f ms %5.1f%% %10.1f MB %8s of copy\n", k, ms, 100*ms/max(sum, 1e-9), b/1e6, frac(b, ms))
		}
		fmt.Fprintf(w, "  %-40s %10.3f ms\n", "sum of kernels", sum)
		if len(p.LaunchMs) > 0 {
			lk := make([]string, 0, len(p.LaunchMs))
			for k := range p.LaunchMs {
				lk = append(lk, k)
			}
			sort.Slice(lk, func(i, j int) bool { return p.LaunchMs[lk[i]] > p.LaunchMs[lk[j]] })
			calls := 0.0
			for _, c := range p.LaunchCalls {
				calls += c
			}
			fmt.Fprintf(w, "batch %d, context %d, the %d longest launched kernels (class: kernel; event times; launches a step, %.0f in all):\n", p.Batch, p.Context, min(len(lk), launchRows), calls)
			for _, k := range lk[:min(len(lk), launchRows)] {
				fmt.Fprintf(w, "  %-60s %10.3f ms %6.1f\n", k, p.LaunchMs[k], p.LaunchCalls[k])
			}
		}
	}
}

// writeSorted writes up to n of the times, longest first, each with its share of all
// of them, and their sum when total is set.
func writeSorted(w io.Writer, ms map[string]float64, n int, format string, total bool) {
	keys := make([]string, 0, len(ms))
	var sum float64
	for k, v := range ms {
		keys = append(keys, k)
		sum += v
	}
	sort.Slice(keys, func(i, j int) bool {
		if ms[keys[i]] != ms[keys[j]] {
			return ms[keys[i]] > ms[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys[:min(len(keys), n)] {
		fmt.Fprintf(w, format, k, ms[k], 100*ms[k]/max(sum, 1e-9))
	}
	if total {
		fmt.Fprintf(w, "  %-40s %10.3f ms\n", "sum of kernels", sum)
	}
}

// launchRows is how many launched kernels the table lists per point.
const launchRows = 15

// graphSwitch is a device runtime with captured graphs (the cuda target's).
type graphSwitch interface {
	SetGraphs(on bool) error
	GraphSummary() string
}

// stepGaps is the median device time of the timeline's steps and the median idle
// gap, in µs, between consecutive steps.
func stepGaps(spans []targets.DeviceSpan) (stepMs, gapUs float64) {
	var steps, gaps []float64
	var last *targets.DeviceSpan
	for i := range spans {
		sp := &spans[i]
		if sp.Kernel != "" {
			continue
		}
		steps = append(steps, sp.End.Sub(sp.Start).Seconds()*1e3)
		if last != nil {
			gaps = append(gaps, sp.Start.Sub(last.End).Seconds()*1e6)
		}
		last = sp
	}
	return median(steps), median(gaps)
}

// sampleRows sets every decode row's sampling for the next step: sp's parameters with a
// fresh random number a row; greedy rows (temperature 0) are left as they are.
func sampleRows(chunks []vm.Chunk, sp vm.Sampling, rng *rand.Rand) {
	if sp.Temperature <= 0 {
		return
	}
	for i := range chunks {
		chunks[i].Sample = sampling.Params{Temperature: sp.Temperature, TopP: sp.TopP, TopK: sp.TopK, U: rng.Float64()}
	}
}
