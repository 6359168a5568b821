package passes

import (
	"deepinfer/ir"
	"deepinfer/targets"
)

// fuse applies the target's fusion rules (targets.Fuser): it finds chains of
// instructions matching a rule's ops, where each link's result has exactly one use —
// the next link, or a bf16 fake_quant whose one use is the next link — and marks them as
// one group. Rules are tried in the target's order and
// an instruction joins at most one group. Lowering then gives every member the rule's
// kernel (lowering keeps it); a cost model charges the group's elementwise links no memory traffic of their
// own (their intermediates never leave the chip).
func fuse(m *ir.Module, cfg *Config) (bool, error) {
	f, ok := cfg.Target.(targets.Fuser)
	if !ok || len(f.Fusions()) == 0 {
		return false, nil
	}
	changed := false
	group := int64(0)
	for _, fn := range m.Funcs {
		uses := fn.Uses()
		users := map[*ir.Value]*ir.Instr{}
		for _, in := range fn.Body {
			for _, a := range in.Args {
				users[a] = in
			}
		}
		taken := map[*ir.Instr]bool{}
		for _, rule := range f.Fusions() {
			for _, start := range fn.Body {
				chain := matchChain(start, rule.Ops, uses, users, taken)
				if chain == nil {
					continue
				}
				for _, in := range chain {
					taken[in] = true
					in.Attrs["fusion"] = group
					in.Attrs["kernel"] = rule.Kernel
				}
				group++
				changed = true
			}
		}
	}
	return changed, nil
}

// matchChain returns the chain of instructions starting at start whose ops are ops, or
// nil.
func matchChain(start *ir.Instr, ops []string, uses map[*ir.Value]int, users map[*ir.Value]*ir.Instr, taken map[*ir.Instr]bool) []*ir.Instr {
	var chain []*ir.Instr
	in := start
	for i, op := range ops {
		if in == nil || in.Op != op || taken[in] {
			return nil
		}
		chain = append(chain, in)
		if i == len(ops)-1 {
			break
		}
		if len(in.Results) != 1 || uses[in.Results[0]] != 1 {
			return nil
		}
		in = users[in.Results[0]]
		// a bf16 rounding between two links is the earlier link's output dtype on a
		// device: it joins the chain
		for in != nil && roundsToBF16(in) && !taken[in] && uses[in.Results[0]] == 1 {
			chain = append(chain, in)
			in = users[in.Results[0]]
		}
	}
	return chain
}

// roundsToBF16 reports a fake_quant to bf16 (V4.1's reference numerics).
func roundsToBF16(in *ir.Instr) bool {
	f, _ := in.Attrs.Str("format")
	return in.Op == "fake_quant" && f == "bf16"
}
