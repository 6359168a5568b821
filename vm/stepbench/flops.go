package stepbench

import (
	"strings"

	"deepinfer/plan"
)

// PrefillFLOPs counts the multiply-adds (×2) of the products in a prefill of one
// sequence of tokens, from the plan's prefill program: every matrix weight is a product
// over each token's row (2·tokens·rows·cols), except lookups (embed, Engram tables),
// the LM head (one logits row: 2·rows·cols) and the routed experts (each token's
// k-of-E share: 2·tokens·rows·cols·k/E per expert matrix). Attention's own products
// (queries against keys, probabilities against values) are not counted.
func PrefillFLOPs(p *plan.Plan, tokens int) float64 {
	var pr *plan.Program
	for i := range p.Programs {
		if p.Programs[i].Phase == plan.PhasePrefill {
			pr = &p.Programs[i]
		}
	}
	if pr == nil {
		return 0
	}
	T := float64(tokens)
	var flops float64
	moeK := 0.0
	for i := range pr.Instrs {
		in := &pr.Instrs[i]
		if in.Op == "moe_route" {
			if k, ok := in.Attrs.Int("topk"); ok {
				moeK = float64(k)
			}
		}
		for _, a := range in.Args {
			if a.Kind != plan.OpWeight {
				continue
			}
			w := &p.Weights[a.Index]
			if len(w.Shape) != 2 {
				continue
			}
			mat := 2 * float64(w.Shape[0]) * float64(w.Shape[1])
			switch {
			case in.Op == "embed" || in.Op == "engram_lookup":
			case in.Op == "lm_head":
				flops += mat
			case in.Op == "moe_experts" && strings.Contains(w.Name, ".experts."):
				if E, ok := in.Attrs.Int("experts"); ok && E > 0 {
					flops += mat * T * moeK / float64(E)
				}
			default:
				flops += mat * T
			}
		}
	}
	return flops
}
