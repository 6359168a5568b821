package sim

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// WriteReport prints the results as text. Every figure is a prediction of r.Model.
func WriteReport(w io.Writer, r *Result) {
	wl := r.Workload
	load := fmt.Sprintf("%d requests in flight per rank", wl.ConcurrencyPerRank)
	if wl.Rate > 0 {
		load = fmt.Sprintf("Poisson arrivals at %g requests/s", wl.Rate)
	}
	fmt.Fprintf(w, "SIMULATED with %s on target %s — predictions, not measurements\n", r.Model, r.Target)
	rows := "greedy"
	if wl.Temperature > 0 {
		rows = fmt.Sprintf("sampled at temperature %g (every logit row priced as a sampled row)", wl.Temperature)
	}
	fmt.Fprintf(w, "workload: %d requests, %s, input %s, output %s, two-batch overlap %v, %s\n",
		wl.Requests, load, wl.in, wl.out, wl.overlap(), rows)
	for i := range r.Roles {
		writeRole(w, &r.Roles[i], r.Model)
	}
}

func writeRole(w io.Writer, rr *RoleResult, model string) {
	fmt.Fprintf(w, "\nrole %s (%d ranks): %.2f s of service in %d steps (simulated)\n",
		rr.Role, rr.Ranks, rr.SimSeconds, rr.Steps)
	unit := "output"
	if rr.Role == "prefill" {
		unit = "input"
	}
	fmt.Fprintf(w, "  throughput: %.0f %s tokens/s per device (%d requests, %d input and %d output tokens)\n",
		rr.TokensPerSecPerDevice, unit, rr.Requests, rr.TokensIn, rr.TokensOut)
	if rr.TTFT.N > 0 {
		fmt.Fprintf(w, "  TTFT ms: p50 %.1f  p90 %.1f  p99 %.1f  max %.1f (prefill queue and compute; KV transfer to decode not modelled)\n",
			rr.TTFT.P50, rr.TTFT.P90, rr.TTFT.P99, rr.TTFT.Max)
	}
	if rr.TPOT.N > 0 {
		fmt.Fprintf(w, "  TPOT ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f\n", rr.TPOT.P50, rr.TPOT.P90, rr.TPOT.P99, rr.TPOT.Max)
	}
	fmt.Fprintf(w, "  step ms: p50 %.2f  p90 %.2f  p99 %.2f; mean %.1f sequences and %.0f tokens per rank per step; %d preemptions\n",
		rr.StepMS.P50, rr.StepMS.P90, rr.StepMS.P99, rr.MeanBatch, rr.MeanTokens, rr.Preemptions)
	fmt.Fprintf(w, "  step time on the slowest rank: %.0f%% compute, %.0f%% exposed communication (all-to-all is %.0f%% of kernel time, the rest hidden by two-batch overlap)\n",
		100*rr.ComputeShare, 100*rr.CommExposedShare, 100*rr.CommShare)
	if rr.Speedup > 0 {
		if rr.DrafterPriced {
			fmt.Fprintf(w, "  speculative decoding: %.2fx tokens/s over plain decoding at this batch (the draft step and the rejected groups' rebuild included)\n", rr.Speedup)
		} else {
			fmt.Fprintf(w, "  speculative decoding: %.2fx tokens/s over plain decoding at this batch (the plan has no draft program: drafter cost not included, an upper bound)\n", rr.Speedup)
		}
	}
	fmt.Fprintf(w, "  bottleneck: %s\n", rr.Bottleneck)
	var bounds []string
	for b, s := range rr.BoundShare {
		bounds = append(bounds, fmt.Sprintf("%s %.0f%%", b, 100*s))
	}
	sort.Strings(bounds)
	fmt.Fprintf(w, "  compute time by bound: %s\n", strings.Join(bounds, ", "))
	fmt.Fprintf(w, "  compute kernels (share of compute time):\n")
	shown := 0
	for _, k := range rr.Kernels {
		if k.Comm {
			continue
		}
		if shown == 12 {
			fmt.Fprintf(w, "    …\n")
			break
		}
		fmt.Fprintf(w, "    %-40s %6.1f%%  %s-bound\n", k.Kernel, 100*k.Share, k.Bound)
		shown++
	}
	for _, k := range rr.Kernels {
		if k.Comm {
			fmt.Fprintf(w, "  collective %-29s %6.1f%% of communication time\n", k.Kernel, 100*k.Share)
		}
	}
}
