package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/plan"
	_ "deepinfer/targets/all"
	"deepinfer/targets/cost"
)

const spec = `target: sm100
topology: {nodes: 1, devices_per_node: 4}
roles:
  prefill: {dp: 2, ep: 2, max_num_seqs: 8, max_model_len: 8192, max_num_batched_tokens: 2048}
  decode: {dp: 2, ep: 2, max_num_seqs: 32, max_model_len: 8192, max_num_batched_tokens: 64}
experts: {num_redundant: 2, policy: default, synthetic: "zipf:1.2"}
`

func simulate(t *testing.T, workload string) *Result {
	t.Helper()
	w, err := ReadWorkload(workload)
	if err != nil {
		t.Fatal(err)
	}
	return simulateW(t, w)
}

func simulateW(t *testing.T, w *Workload) *Result {
	t.Helper()
	s, err := deploy.Parse([]byte(spec), "spec.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	out, err := compiler.Compile(compiler.Options{Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.For("sm100")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(Options{Plan: out.Plan, Workload: w, Model: m.WithLaunch(cost.Device)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func role(r *Result, name string) *RoleResult {
	for i := range r.Roles {
		if r.Roles[i].Role == name {
			return &r.Roles[i]
		}
	}
	return nil
}

func TestConservationAndLatency(t *testing.T) {
	r := simulate(t, "concurrency_per_rank=8,requests=64,input_len=fixed:300,output_len=fixed:20,seed=3")
	d, p := role(r, "decode"), role(r, "prefill")
	if d.Requests != 64 || d.TokensOut != 64*20 || d.TokensIn != 64*300 {
		t.Fatalf("decode served %d requests, %d out, %d in", d.Requests, d.TokensOut, d.TokensIn)
	}
	if p.Requests != 64 || p.TokensIn != 64*300 {
		t.Fatalf("prefill served %d requests, %d tokens", p.Requests, p.TokensIn)
	}
	// with fixed lengths every step of a full batch costs the same: TPOT is the step time
	if math.Abs(d.TPOT.P50-d.StepMS.P50) > 0.05*d.StepMS.P50 {
		t.Errorf("TPOT p50 %.3f ms is not the step time %.3f ms", d.TPOT.P50, d.StepMS.P50)
	}
	if p.TTFT.P50 <= 0 || p.TTFT.Max < p.TTFT.P50 {
		t.Errorf("TTFT %+v", p.TTFT)
	}
	var buf bytes.Buffer
	WriteReport(&buf, r)
	if !strings.Contains(buf.String(), "SIMULATED with cost model sm100") || !strings.Contains(buf.String(), "predictions, not measurements") {
		t.Errorf("report is not labelled as a simulation:\n%s", buf.String())
	}
}

func TestBatchingRaisesThroughput(t *testing.T) {
	small := role(simulate(t, "concurrency_per_rank=2,requests=32,input_len=fixed:256,output_len=fixed:32"), "decode")
	large := role(simulate(t, "concurrency_per_rank=16,requests=32,input_len=fixed:256,output_len=fixed:32"), "decode")
	if !(large.TokensPerSecPerDevice > 2*small.TokensPerSecPerDevice) {
		t.Errorf("8× the batch gives %.0f vs %.0f tokens/s per device", large.TokensPerSecPerDevice, small.TokensPerSecPerDevice)
	}
	if !(large.StepMS.P50 > small.StepMS.P50) {
		t.Errorf("a larger batch should take longer per step: %.3f vs %.3f ms", large.StepMS.P50, small.StepMS.P50)
	}
}

func TestOverlapAndSpeculation(t *testing.T) {
	if got := stepTime(10, 4, false, 4); got != 14 {
		t.Errorf("serial step %g", got)
	}
	if got := stepTime(10, 4, true, 4); got != 10.5 {
		t.Errorf("overlapped step %g, want max + fill (10 + 4/8)", got)
	}
	base := role(simulate(t, "concurrency_per_rank=8,requests=32,input_len=fixed:256,output_len=fixed:64"), "decode")
	if base.Speedup != 0 {
		t.Errorf("speedup reported without speculation")
	}
	// every step accepts both drafts: three tokens per step for the price of verifying three
	w, err := ReadWorkload("concurrency_per_rank=8,requests=32,input_len=fixed:256,output_len=fixed:64")
	if err != nil {
		t.Fatal(err)
	}
	w.Acceptance = []float64{0, 0, 1}
	spec := role(simulateW(t, w), "decode")
	if !(spec.Speedup > 1 && spec.Speedup < 3) {
		t.Errorf("speedup %.2f with two drafts always accepted; want between 1 and 3", spec.Speedup)
	}
	if spec.Steps >= base.Steps || spec.TokensOut != base.TokensOut {
		t.Errorf("speculation: %d steps for %d tokens, plain: %d steps for %d", spec.Steps, spec.TokensOut, base.Steps, base.TokensOut)
	}
}

func TestWorkloadErrors(t *testing.T) {
	for _, bad := range []string{
		"requests=4,input_len=fixed:1,output_len=fixed:1",
		"concurrency_per_rank=2,rate=3,requests=4,input_len=fixed:1,output_len=fixed:1",
		"concurrency_per_rank=2,requests=4,input_len=poisson:3,output_len=fixed:1",
		"concurrency_per_rank=2,requests=4,input_len=uniform:9:3,output_len=fixed:1",
		"concurrency_per_rank=2,requests=4,input_len=fixed:1,output_len=fixed:1,colour=red",
		"concurrency_per_rank=2,requests=4,input_len=fixed:1,output_len=fixed:1,temperature=-1",
		"concurrency_per_rank=2,requests=4,input_len=fixed:1,output_len=fixed:1,temperature=NaN",
		"concurrency_per_rank=2,requests=4,input_len=fixed:1,output_len=fixed:1,temperature=+Inf",
		"concurrency_per_rank=2,requests=4,input_len=fixed:1,output_len=fixed:1,temperature=warm",
	} {
		if _, err := ReadWorkload(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestSampledWorkload: a workload that samples at a temperature prices every decode
// step's rows as sampled (slower steps, the same tokens) and says so in the report.
func TestSampledWorkload(t *testing.T) {
	const wl = "concurrency_per_rank=8,requests=32,input_len=fixed:256,output_len=fixed:64"
	g := simulate(t, wl)
	s := simulate(t, wl+",temperature=0.7")
	gd, sd := role(g, "decode"), role(s, "decode")
	if sd.TokensOut != gd.TokensOut || sd.Steps != gd.Steps {
		t.Errorf("sampled: %d tokens in %d steps, greedy %d in %d", sd.TokensOut, sd.Steps, gd.TokensOut, gd.Steps)
	}
	if !(sd.TPOT.P50 > gd.TPOT.P50) {
		t.Errorf("TPOT p50 sampled %g ms, greedy %g: the sampled rows cost nothing", sd.TPOT.P50, gd.TPOT.P50)
	}
	var b bytes.Buffer
	WriteReport(&b, s)
	if !strings.Contains(b.String(), "sampled at temperature 0.7") {
		t.Errorf("the report does not say the rows are sampled:\n%s", b.String())
	}
	b.Reset()
	WriteReport(&b, g)
	if !strings.Contains(b.String(), ", greedy") {
		t.Errorf("the report does not say the rows are greedy:\n%s", b.String())
	}
	// the file form
	w, err := ParseWorkload([]byte("concurrency_per_rank: 8\nrequests: 32\ninput_len: fixed:256\noutput_len: fixed:64\ntemperature: 1\n"), "w.yaml")
	if err != nil || w.Temperature != 1 {
		t.Fatalf("file form: %v, temperature %v", err, w)
	}
}

// TestSpeculationPricesTheDrafter: with a draft program in the plan (V4.1's DSpark
// drafter) a speculative step also pays the draft step and the rebuild of the groups
// that rejected a draft: every draft accepted, the step is the verify step plus the
// draft step (more than without the draft program, the same tokens); every draft
// rejected, a one-row rebuild a sequence is added; the speed-up falls accordingly, and
// the report says what it includes.
func TestSpeculationPricesTheDrafter(t *testing.T) {
	const v41spec = `target: sm100
topology: {nodes: 1, devices_per_node: 4}
roles:
  decode: {dp: 4, ep: 4, max_num_seqs: 16, max_model_len: 8192, max_num_batched_tokens: 96}
experts: {num_redundant: 0, policy: default, synthetic: "zipf:1.0"}
speculative: {method: dspark, num_speculative_tokens: 5}
`
	s, err := deploy.Parse([]byte(v41spec), "spec.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	out, err := compiler.Compile(compiler.Options{Spec: s, ModelDir: "../testdata/deepseek-v4.1-flash"})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Plan
	if p.Program(plan.PhaseDraft) == nil || p.Model.DSpark == nil {
		t.Fatal("the V4.1 plan has no draft program")
	}
	noDraft := *p
	noDraft.Programs = nil
	for _, pr := range p.Programs {
		if pr.Phase != plan.PhaseDraft {
			noDraft.Programs = append(noDraft.Programs, pr)
		}
	}
	m, err := cost.For("sm100")
	if err != nil {
		t.Fatal(err)
	}
	run := func(pl *plan.Plan, acceptance []float64) *RoleResult {
		t.Helper()
		w, err := ReadWorkload("concurrency_per_rank=16,requests=64,input_len=fixed:1024,output_len=fixed:60")
		if err != nil {
			t.Fatal(err)
		}
		w.Acceptance = acceptance
		r, err := Run(Options{Plan: pl, Workload: w, Model: m.WithLaunch(cost.Device)})
		if err != nil {
			t.Fatal(err)
		}
		return role(r, "decode")
	}
	all, none := []float64{0, 0, 0, 0, 0, 1}, []float64{1, 0, 0, 0, 0, 0}
	accD, accN := run(p, all), run(&noDraft, all)
	if !accD.DrafterPriced || accN.DrafterPriced {
		t.Fatalf("drafter priced: %v with the draft program, %v without", accD.DrafterPriced, accN.DrafterPriced)
	}
	if accD.Steps != accN.Steps || accD.TokensOut != accN.TokensOut {
		t.Errorf("every draft accepted: %d steps for %d tokens with the drafter priced, %d for %d without", accD.Steps, accD.TokensOut, accN.Steps, accN.TokensOut)
	}
	if !(accD.StepMS.P50 > accN.StepMS.P50) || !(accD.Speedup < accN.Speedup) {
		t.Errorf("every draft accepted: step p50 %.3f ms and speed-up %.2f with the drafter, %.3f and %.2f without", accD.StepMS.P50, accD.Speedup, accN.StepMS.P50, accN.Speedup)
	}
	rejD, rejN := run(p, none), run(&noDraft, none)
	if !(rejD.StepMS.P50 > accD.StepMS.P50) || rejN.StepMS.P50 != accN.StepMS.P50 {
		t.Errorf("step p50: every draft rejected %.3f ms, accepted %.3f (drafter priced); %.3f and %.3f without: the rebuild should cost only where the drafter is priced",
			rejD.StepMS.P50, accD.StepMS.P50, rejN.StepMS.P50, accN.StepMS.P50)
	}
	if !(rejD.Speedup < 1) {
		t.Errorf("every draft rejected: speed-up %.2f, want below 1 (one token a step for a verify, a draft and a rebuild)", rejD.Speedup)
	}
	// more drafts a step than the drafter proposes: an error, not a price
	w, err := ReadWorkload("concurrency_per_rank=4,requests=8,input_len=fixed:64,output_len=fixed:8")
	if err != nil {
		t.Fatal(err)
	}
	w.Acceptance = make([]float64, p.Model.DSpark.Block+2)
	w.Acceptance[0] = 1
	if _, err := Run(Options{Plan: p, Workload: w, Model: m.WithLaunch(cost.Device)}); err == nil || !strings.Contains(err.Error(), "proposes at most") {
		t.Errorf("γ = %d with a drafter block of %d: %v", len(w.Acceptance)-1, p.Model.DSpark.Block, err)
	}
	var b bytes.Buffer
	WriteReport(&b, &Result{Model: m.ID(), Target: "sm100", Workload: &Workload{}, Roles: []RoleResult{*accD}})
	if !strings.Contains(b.String(), "the draft step and the rejected groups' rebuild included") {
		t.Errorf("the report does not say the drafter is priced:\n%s", b.String())
	}
}
