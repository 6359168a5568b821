package main

import (
	"fmt"
	"io"

	"deepinfer/plan"
)

// memoryLines are the rows of a rank's memory table, in the order they add up.
var memoryLines = []struct{ item, label string }{
	{"weights_shared", "weights, replicated"},
	{"weights_experts", "weights, local expert slots"},
	{"weights_sharded", "weights, sharded tables"},
	{"arena", "activation arena (largest step)"},
	{"workspace", "workspaces"},
	{"kv_budget", "left for KV"},
}

func writeDeployment(w io.Writer, p *plan.Plan) {
	h := p.Account()
	fmt.Fprintf(w, "checkpoint: %d tensors, %s at storage formats\n", h.Tensors, humanBytes(h.Bytes))
	d := p.Deployment
	if d == nil {
		return
	}
	for _, r := range h.Roles {
		fmt.Fprintf(w, "  held by role %s's ranks, each tensor once: %s (%.2f%% of the checkpoint; replicated %s, experts %s, sharded tables %s); %d tensors; %d routed experts unplaced\n",
			r.Role, humanBytes(r.Bytes()), 100*float64(r.Bytes())/float64(max(h.Bytes, 1)), humanBytes(r.Shared), humanBytes(r.Experts), humanBytes(r.Sharded), r.Tensors, r.Missing)
	}
	for i := range d.Roles {
		writeRole(w, &d.Roles[i])
	}
}

func writeRole(w io.Writer, r *plan.Role) {
	ranks := r.DP * r.CP * r.TP
	fmt.Fprintf(w, "role %s: %d ranks (attention dp %d × cp %d × tp %d, experts ep %d); per rank: max_num_seqs %d, max_model_len %d, max_num_batched_tokens %d\n",
		r.Name, ranks, r.DP, r.CP, r.TP, r.EP, r.MaxNumSeqs, r.MaxModelLen, r.MaxNumBatchedTokens)
	if dev := r.Mem("device"); dev > 0 {
		fmt.Fprintf(w, "  memory per rank (of %s device, %s usable):\n", humanBytes(dev), humanBytes(r.Mem("usable")))
		for _, l := range memoryLines {
			fmt.Fprintf(w, "    %-34s %12s\n", l.label, humanBytes(r.Mem(l.item)))
		}
		fmt.Fprintf(w, "  KV: %d B per token + %s per request fixed (window rings, open compressor windows); %s per request at max_model_len\n",
			r.Mem("kv_per_token"), humanBytes(r.Mem("kv_per_request_fixed")), humanBytes(r.Mem("kv_per_request")))
		fmt.Fprintf(w, "  capacity: %d KV tokens; %d requests at max_model_len (asked: %d)\n",
			r.Mem("kv_capacity_tokens"), r.Mem("max_requests"), r.MaxNumSeqs)
	} else {
		fmt.Fprintf(w, "  memory per rank: weights %s, arena %s (this target has no device memory limit to check)\n",
			humanBytes(r.Mem("weights")), humanBytes(r.Mem("arena")))
	}
	if len(r.Placement) > 0 {
		slots := len(r.Placement[0].Phy2Log) / r.EP
		fmt.Fprintf(w, "  experts: %d MoE layers placed, %d slots per rank, balancedness %.4f (mean/max rank load, averaged over layers)\n",
			len(r.Placement), slots, r.Balancedness)
	}
}
