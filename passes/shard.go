package passes

import (
	"fmt"

	"deepinfer/deploy"
	"deepinfer/ir"
)

// shard rewrites each phase for the deployment role that runs it (a phase and its role
// share a name). Attention is data parallel, so a rank's attention sees only its own
// sequences and needs no change. With ep > 1 the routed experts are spread over the
// role's expert-parallel ranks: the tokens travel to the ranks holding their experts
// (moe_dispatch) and the weighted outputs travel back (moe_combine), DeepEP's
// low-latency mode in decode and its normal mode in prefill. With cp > 1 a long
// prompt's tokens are split over ranks, which then exchange K=V rows (cp_gather).
// Phases that no role runs are dropped. Without a spec nothing changes.
func shard(m *ir.Module, cfg *Config) (bool, error) {
	if cfg.Spec == nil {
		return false, nil
	}
	changed := false
	var kept []*ir.Func
	for _, f := range m.Funcs {
		role := cfg.Spec.Role(f.Name)
		if f.Name == "draft" {
			role = cfg.Spec.Role("decode") // DSpark drafts on the decode ranks, after each decode step
		}
		if role == nil {
			changed = true
			continue
		}
		kept = append(kept, f)
		if role.EP > 1 {
			if err := shardExperts(f, role, cfg.Spec.Experts.NumRedundant); err != nil {
				return false, err
			}
			changed = true
		}
		if role.CP > 1 {
			if f.Name != "prefill" {
				return false, fmt.Errorf("context parallelism applies to prefill; role %s has cp %d", f.Name, role.CP)
			}
			shardContext(f, role)
			changed = true
		}
	}
	if len(kept) == 0 {
		return false, fmt.Errorf("the spec's roles (%v) run none of the module's phases", cfg.Spec.RoleNames())
	}
	m.Funcs = kept
	return changed, nil
}

// FP8 activations with one fp32 scale per 128 values, as DeepEP dispatches them.
func dispatchBytes(hidden, topk int64) int64 { return topk * (hidden + 4*hidden/128) }

// bf16 expert outputs on the way back.
func combineBytes(hidden, topk int64) int64 { return topk * hidden * 2 }

func shardExperts(f *ir.Func, role *deploy.Role, redundant int) error {
	mode := "normal"
	if f.Name == "decode" {
		mode = "low_latency"
	}
	var body []*ir.Instr
	for i := 0; i < len(f.Body); i++ {
		in := f.Body[i]
		if in.Op != "moe_experts" {
			body = append(body, in)
			continue
		}
		x, wts, ids := in.Args[0], in.Args[1], in.Args[2]
		hidden, topk := x.Type.Last(), ids.Type.Last()
		experts, _ := in.Attrs.Int("experts")
		slots := int64(PaddedReplicas(int(experts), redundant, role.EP) / role.EP)
		attrs := ir.Attrs{"ranks": int64(role.EP), "mode": mode, "bytes_per_token": dispatchBytes(hidden, topk)}
		sent := f.NewValue(x.Type)
		d := &ir.Instr{Op: "moe_dispatch", Args: []*ir.Value{x, wts, ids}, Results: []*ir.Value{sent}, Attrs: attrs}
		sent.Def = d
		in.Args[0] = sent
		in.Attrs["ranks"] = int64(role.EP)
		in.Attrs["local_slots"] = slots
		out := in.Results[0]
		back := f.NewValue(out.Type)
		c := &ir.Instr{Op: "moe_combine", Args: []*ir.Value{out, ids}, Results: []*ir.Value{back},
			Attrs: ir.Attrs{"ranks": int64(role.EP), "mode": mode, "bytes_per_token": combineBytes(hidden, topk)}}
		back.Def = c
		replaceUses(f, i+1, out, back)
		body = append(body, d, in, c)
	}
	f.Body = body
	return nil
}

func shardContext(f *ir.Func, role *deploy.Role) {
	var body []*ir.Instr
	for _, in := range f.Body {
		if in.Op == "window_attention" || in.Op == "sparse_attention" {
			kv := in.Args[1]
			g := f.NewValue(kv.Type)
			gi := &ir.Instr{Op: "cp_gather", Args: []*ir.Value{kv}, Results: []*ir.Value{g},
				Attrs: ir.Attrs{"ranks": int64(role.CP), "bytes_per_token": kv.Type.Last() * 2}}
			g.Def = gi
			in.Args[1] = g
			body = append(body, gi)
		}
		body = append(body, in)
	}
	f.Body = body
}

// replaceUses points every use of old in f.Body[from:] and in the returns at new.
func replaceUses(f *ir.Func, from int, old, new *ir.Value) {
	for _, in := range f.Body[from:] {
		for j, a := range in.Args {
			if a == old {
				in.Args[j] = new
			}
		}
	}
	for j, r := range f.Returns {
		if r == old {
			f.Returns[j] = new
		}
	}
}

// PaddedReplicas is the physical expert slots of a MoE layer over ep ranks: the routed
// experts plus the spec's redundant ones, padded with more replicas up to a multiple of
// ep so that every rank holds as many slots (a layer with fewer experts, such as a
// DSpark stage's, is padded more).
func PaddedReplicas(experts, redundant, ep int) int {
	r := experts + redundant
	if ep > 1 && r%ep != 0 {
		r += ep - r%ep
	}
	return r
}
