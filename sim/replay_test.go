package sim

import (
	"math"
	"os"
	"strings"
	"testing"

	"deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/targets/cost"
)

const v41Prefill = `target: sm100
topology: {nodes: 1, devices_per_node: 4}
roles:
  prefill: {dp: 4, ep: 4, max_num_seqs: 16, max_model_len: 131072, max_num_batched_tokens: 16384}
experts: {num_redundant: 0, policy: default}
swa_replay: {mode: %s, keep_tokens: 140}
`

// simulateV41Prefill compiles the full-size V4.1-Flash config for a 4-device prefill with
// SWA bounded replay in the given mode and simulates a fixed workload.
func simulateV41Prefill(t *testing.T, mode string, workload string) (*RoleResult, int) {
	t.Helper()
	src := []byte(strings.Replace(v41Prefill, "%s", mode, 1))
	s, err := deploy.Parse(src, "spec.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	out, err := compiler.Compile(compiler.Options{ModelDir: "../testdata/deepseek-v4.1-flash", Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	m, err := cost.For("sm100")
	if err != nil {
		t.Fatal(err)
	}
	w, err := ReadWorkload(workload)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(Options{Plan: out.Plan, Workload: w, Model: m.WithLaunch(cost.Device)})
	if err != nil {
		t.Fatal(err)
	}
	// the cut: the layer of the first weight read after the first tail_rows
	first := -1
	prog := out.Plan.Program("prefill")
	pr := newPricer(m, out.Plan, prog, &out.Plan.Deployment.Roles[0])
	for i, in := range prog.Instrs {
		if in.Op == "tail_rows" {
			for j := i + 1; j < len(prog.Instrs) && first < 0; j++ {
				if pr.layer[j] > pr.layer[i] {
					first = pr.layer[j]
				}
			}
			break
		}
	}
	return role(r, "prefill"), first
}

// TestReplaySavingIsTheRemovedRows: with SWA bounded replay (compact, keep 140) the layers
// after the last KV source run on each sequence's last 140 rows of the step instead of all
// of them. The simulated prefill step must shrink by what those rows cost: the cut layers'
// time without replay, scaled by the share of rows removed, give or take the kernels whose
// cost does not scale with rows (launch floors, weights read once per step).
func TestReplaySavingIsTheRemovedRows(t *testing.T) {
	const w = "concurrency_per_rank=1,requests=8,input_len=fixed:16384,output_len=fixed:1,seed=1"
	off, _ := simulateV41Prefill(t, "off", w)
	on, first := simulateV41Prefill(t, "compact", w)
	if first < 0 {
		t.Fatal("compact replay compiled no cut")
	}
	T, K := 16384.0, 140.0 // one sequence's chunk per rank per step
	// compute time per side of the cut (communication runs under two-batch overlap)
	split := func(r *RoleResult) (cut, rest float64, layers map[int]float64) {
		layers = map[int]float64{}
		for _, c := range r.Roofline {
			if c.Comm {
				continue
			}
			layers[c.Layer] += c.US
			if c.Layer >= first {
				cut += c.US
			} else {
				rest += c.US
			}
		}
		return cut, rest, layers
	}
	cutOff, _, lOff := split(off)
	cutOn, _, lOn := split(on)
	// before the cut nothing changes but the cut itself (tail_rows, in the layer before)
	for l := range lOff {
		if l >= 0 && l < first-1 && math.Abs(lOff[l]-lOn[l]) > 1e-9*lOff[l] {
			t.Errorf("layer %d, before the cut, changed: %.1f -> %.1f µs", l, lOff[l], lOn[l])
		}
	}
	cutOp := lOn[first-1] - lOff[first-1]
	head := lOff[-1] - lOn[-1] // the final norm and mHC head run on the kept rows too
	// linear in rows, the cut layers would shrink by the share of rows removed
	linear := cutOff * (1 - K/T)
	saved := (off.StepMS.P50 - on.StepMS.P50) * 1e3
	t.Logf("simulated prefill step (sm100, 4 ranks, 16,384-token chunk): %.2f ms off -> %.2f ms compact: %.2f ms saved (%.1f%%)",
		off.StepMS.P50, on.StepMS.P50, saved/1e3, 100*saved/(off.StepMS.P50*1e3))
	t.Logf("layers from %d on, compute: %.2f ms -> %.2f ms; linear in rows (x %.4f) predicts %.2f ms saved; the %.2f ms left at %v rows is per-layer cost that does not scale with rows (weight reads, launch floors)",
		first, cutOff/1e3, cutOn/1e3, 1-K/T, linear/1e3, (cutOn-cutOff*K/T)/1e3, K)
	before := 0.0
	for l := 0; l < first-1; l++ {
		before += lOff[l]
	}
	t.Logf("head after the cut: %.2f ms saved; the cut itself (tail_rows): %.3f ms; layers 0-%d: %.2f ms both ways",
		head/1e3, cutOp/1e3, first-2, before/1e3)
	if head <= 0 || cutOp <= 0 {
		t.Errorf("head saving %.1f µs and cut cost %.1f µs should both be positive", head, cutOp)
	}
	// the step's saving is the cut layers' saving plus the head's, less the cut
	want := cutOff - cutOn + head - cutOp
	if math.Abs(saved-want) > 0.01*want {
		t.Errorf("step saved %.1f µs; the cut layers, head and cut account for %.1f µs", saved, want)
	}
	// and rows explain it: within 8%% of linear, never more than linear
	if saved > linear+head || saved < 0.92*linear {
		t.Errorf("replay saved %.1f µs of the step; removing %.0f of %.0f rows from layers %d.. predicts %.1f µs", saved, T-K, T, first, linear)
	}
	if os.Getenv("DEEPINFER_SIM_VERBOSE") != "" {
		for l := 0; l < 43; l++ {
			t.Logf("layer %2d: off %8.1f µs  on %8.1f µs", l, lOff[l], lOn[l])
		}
	}
}

// TestEveryOpHasACost: every op the IR declares is priced by the simulator, so a new op
// fails here instead of being priced silently as something else.
func TestEveryOpHasACost(t *testing.T) {
	explicit := map[string]bool{}
	for _, op := range []string{"linear", "qlinear", "lm_head", "grouped_linear", "rmsnorm", "hc_mix", "hc_head",
		"moe_route", "moe_experts", "dspark_attention", "dspark_head", "window_attention", "sparse_attention",
		"csa_attention", "index_topk", "csa_index", "csa_index_candidates", "compress", "csa_compress",
		"engram_lookup", "moe_dispatch", "moe_combine", "cp_gather"} {
		explicit[op] = true
	}
	for _, op := range ir.Ops() {
		if !explicit[op] && !elementwiseOps[op] {
			t.Errorf("op %s has no cost mapping in the simulator", op)
		}
	}
}
