package passes

import (
	"fmt"
	"math"
	"strings"

	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/kvlayout"
)

// MemoryItems are the per-rank quantities the memory pass records, in bytes unless
// named otherwise; each is stored as module attribute "mem.<role>.<item>".
var MemoryItems = []string{
	"device", "usable", "weights_shared", "weights_experts", "weights_sharded", "weights",
	"arena", "workspace", "kv_budget", "kv_per_token", "kv_per_request_fixed",
	"kv_per_request", "kv_capacity_tokens", "max_requests",
}

// kvBytes is the size of a d-wide K=V or index row in a KV dtype: bf16; fp8 as MXFP8 (a
// power-of-two scale byte per 32); fp4 as FP4 e2m1 with a scale byte per 16 (entries)
// or per 32 (indexer keys), which is how V4.1 stores them (MODEL.md §2: 288 B per
// 512-wide entry, 68 B per 128-wide index key).
func kvBytes(dtype string, d int64, index bool) int64 {
	switch dtype {
	case "bf16":
		return 2 * d
	case "fp4":
		if index {
			return d/2 + d/32
		}
		return d/2 + d/16
	}
	return d + d/32 // fp8
}

// kvFormats resolves kv_cache.dtype "auto" to the formats the model stores natively:
// MXFP8 window rows everywhere; compressed entries and index keys FP4 for V4.1, FP8
// for V4 (an assumption: V4's release does not say, and FP8 is what its kernels read).
func kvFormats(spec string, modelType string) (window, entry, index string) {
	if spec != "auto" && spec != "" {
		return spec, spec, spec
	}
	if strings.HasPrefix(modelType, "deepseek_v41") {
		return "fp8", "fp4", "fp4"
	}
	return "fp8", "fp8", "fp8"
}

// memoryPlan proves each role fits its devices: per rank, the weights it holds
// (replicated dense weights, its expert slots, its share of sharded tables), the
// activation arena at the role's largest step, workspaces, and what is left for KV.
// From the KV bytes per token and per request it derives the KV capacity and the
// number of requests that fit at max_model_len, and refuses a spec that does not fit,
// saying by how much and what would.
func memoryPlan(m *ir.Module, cfg *Config) (bool, error) {
	if cfg.Spec == nil {
		return false, nil
	}
	hw := cfg.Target.Hardware()
	for _, f := range m.Funcs {
		role := cfg.Spec.Role(f.Name)
		if role == nil {
			continue
		}
		r, err := rankMemory(m, f, role, cfg.Spec, cfg.KV, hw.HBMGiB*(1<<30), hw.ActivationBytes)
		if err != nil {
			return false, err
		}
		for _, k := range MemoryItems {
			m.Attrs["mem."+f.Name+"."+k] = r[k]
		}
		if r["device"] == 0 {
			continue // no device memory to check against (cpu)
		}
		if err := feasible(f.Name, role, r); err != nil {
			return false, err
		}
	}
	return true, nil
}

type memory map[string]int64

func rankMemory(m *ir.Module, f *ir.Func, role *deploy.Role, spec *deploy.Spec, kv *kvlayout.Layout, deviceBytes float64, actBytes int) (memory, error) {
	r := memory{}
	r["device"] = int64(deviceBytes)
	r["usable"] = int64(deviceBytes * spec.KVCache.MemoryFraction)
	// experts per layer on this rank come from the moe_experts attributes
	slots := map[string]int64{} // layer prefix → local slots
	for _, in := range f.Body {
		if in.Op == "moe_experts" {
			s, ok := in.Attrs.Int("local_slots")
			if !ok {
				e, _ := in.Attrs.Int("experts")
				s = e
			}
			if len(in.Args) > 3 {
				slots[expertPrefix(in.Args[3].Name)] = s
			}
		}
	}
	perExpert := map[string]int64{}
	// the weights this role's ranks hold: its program's, and on decode ranks the DSpark
	// drafter's too (its draft program runs there after every decode step)
	used := map[*ir.Value]bool{}
	bodies := [][]*ir.Instr{f.Body}
	if f.Name == "decode" {
		for _, g := range m.Funcs {
			if g.Name == "draft" {
				bodies = append(bodies, g.Body)
			}
		}
	}
	for _, body := range bodies {
		for _, in := range body {
			for _, a := range in.Args {
				if a.Weight {
					used[a] = true
				}
			}
		}
	}
	for _, w := range m.Weights {
		if !used[w] {
			continue
		}
		st := w.Storage
		if st == "" {
			st = w.Type.DType.String()
		}
		b, _, err := ir.StorageBytes(st, w.Type)
		if err != nil {
			return nil, fmt.Errorf("weight %s: %w", w.Name, err)
		}
		switch {
		case strings.Contains(w.Name, ".experts.") && !strings.Contains(w.Name, "shared_experts"):
			perExpert[expertPrefix(w.Name)] += b
		case strings.Contains(w.Name, "engram.embed"):
			// hashed n-gram tables are split by rows over the role's ranks
			r["weights_sharded"] += ceil64(b, int64(role.EP))
		default:
			r["weights_shared"] += b
		}
	}
	for prefix, total := range perExpert {
		n := countExperts(m, prefix)
		if n == 0 {
			continue
		}
		s := slots[prefix]
		if s == 0 {
			s = n
		}
		r["weights_experts"] += total / n * s
	}
	r["weights"] = r["weights_shared"] + r["weights_experts"] + r["weights_sharded"]

	// the arena at the role's largest step
	tokens := int64(role.MaxNumBatchedTokens)
	rows := int64(role.MaxNumSeqs)
	if f.Name == "decode" {
		tokens = min(tokens, int64(role.MaxNumSeqs)*int64(1+spec.Speculative.NumSpeculativeTokens))
		rows = tokens
	}
	for _, s := range f.Slots {
		c, sym, _ := s.Elems()
		switch sym {
		case ir.SymTokens:
			c *= tokens
		case ir.SymRows:
			c *= rows
		case ir.SymKept:
			// SWA bounded replay keeps each sequence's last `keep` rows of the step
			keep, _ := m.Attrs.Int(AttrReplayKeep)
			c *= min(tokens, int64(role.MaxNumSeqs)*max(keep, 1))
		}
		r["arena"] += c * int64(actBytes)
	}
	// workspaces: expert-parallel send/receive buffers (double-buffered, FP8 out and
	// BF16 back for every routed copy) and a fixed reserve for the runtime (graphs,
	// GEMM workspaces, allocator slack).
	// The buffers are reused layer after layer, so the largest of each kind counts.
	const reserve = 1 << 30
	largest := map[string]int64{}
	for _, in := range f.Body {
		if in.Op == "moe_dispatch" || in.Op == "moe_combine" {
			b, _ := in.Attrs.Int("bytes_per_token")
			largest[in.Op] = max(largest[in.Op], 2*b*tokens)
		}
	}
	r["workspace"] = reserve + largest["moe_dispatch"] + largest["moe_combine"]
	// KV: compressed caches grow per token; window rings and compressor buffers are a
	// fixed cost per request.
	window, entry, index := kvFormats(spec.KVCache.DType, m.Name)
	if kv != nil {
		r["kv_per_mtok"], r["kv_per_request_fixed"] = kvFromLayout(kv, spec.KVCache.DType, m.Name)
	}
	for _, in := range f.Body {
		if kv != nil {
			break
		}
		switch in.Op {
		case "window_attention", "sparse_attention":
			w, _ := in.Attrs.Int("window")
			d, _ := in.Attrs.Int("head_dim")
			r["kv_per_request_fixed"] += w * kvBytes(window, d, false)
		case "compress":
			ratio, _ := in.Attrs.Int("ratio")
			d, _ := in.Attrs.Int("head_dim")
			cache, _ := in.Attrs.Int("cache")
			isIndex := cache == 1
			fmtName := entry
			if isIndex {
				fmtName = index
			}
			// bytes per token as a fraction: keep it exact by accumulating per 1M tokens
			r["kv_per_mtok"] += kvBytes(fmtName, d, isIndex) * (1 << 20) / ratio
			width := d
			if ov, _ := in.Attrs.Bool("overlap"); ov {
				width = 2 * d
			}
			r["kv_per_request_fixed"] += 2 * ratio * width * 4 // open window: kv and gate rows, fp32
		}
	}
	r["kv_per_token"] = ceil64(r["kv_per_mtok"], 1<<20)
	maxLen := int64(role.MaxModelLen)
	r["kv_per_request"] = ceil64(r["kv_per_mtok"]*maxLen, 1<<20) + r["kv_per_request_fixed"]
	delete(r, "kv_per_mtok")
	r["kv_budget"] = r["usable"] - r["weights"] - r["arena"] - r["workspace"]
	if r["kv_budget"] > 0 && r["kv_per_token"] > 0 {
		r["kv_capacity_tokens"] = r["kv_budget"] / r["kv_per_token"]
	}
	if r["kv_budget"] > 0 && r["kv_per_request"] > 0 {
		r["max_requests"] = r["kv_budget"] / r["kv_per_request"]
	}
	return r, nil
}

// expertPrefix cuts "...ffn.experts.17.w1.weight" to "...ffn.experts.".
func expertPrefix(name string) string {
	i := strings.Index(name, ".experts.")
	if i < 0 {
		return name
	}
	return name[:i+len(".experts.")]
}

func countExperts(m *ir.Module, prefix string) int64 {
	var n int64
	for {
		if _, ok := m.LookupWeight(fmt.Sprintf("%s%d.w1.weight", prefix, n)); !ok {
			return n
		}
		n++
	}
}

func ceil64(a, b int64) int64 { return (a + b - 1) / b }

func gib(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// InfeasibleError is a spec that does not fit; it says by how much and what would.
type InfeasibleError struct {
	Role string
	Msg  string
}

func (e *InfeasibleError) Error() string {
	return fmt.Sprintf("role %s does not fit: %s", e.Role, e.Msg)
}

func feasible(name string, role *deploy.Role, r memory) error {
	fixed := r["weights"] + r["arena"] + r["workspace"]
	if fixed > r["usable"] {
		// how many expert-parallel ranks would fit the weights?
		need := r["weights_shared"] + r["arena"] + r["workspace"]
		spread := r["weights_experts"]*int64(role.EP) + r["weights_sharded"]*int64(role.EP)
		ep := int64(0)
		if room := r["usable"] - need; room > 0 {
			ep = ceil64(spread, room)
		}
		hint := "no expert-parallel width helps: the replicated weights alone exceed a device"
		if ep > 0 {
			hint = fmt.Sprintf("it would take about ep %d to fit", ep)
		}
		return &InfeasibleError{Role: name, Msg: fmt.Sprintf(
			"each rank needs %s for weights (%s replicated, %s experts, %s sharded tables) + %s arena + %s workspace = %s, but only %s of the device is usable (memory_fraction); %d more GiB missing; %s",
			gib(r["weights"]), gib(r["weights_shared"]), gib(r["weights_experts"]), gib(r["weights_sharded"]),
			gib(r["arena"]), gib(r["workspace"]), gib(fixed), gib(r["usable"]),
			int64(math.Ceil(float64(fixed-r["usable"])/(1<<30))), hint)}
	}
	if r["max_requests"] < int64(role.MaxNumSeqs) {
		lenFit := int64(0)
		if r["kv_per_token"] > 0 {
			lenFit = (r["kv_budget"]/int64(role.MaxNumSeqs) - r["kv_per_request_fixed"]) * (1 << 20) / max(r["kv_per_token"]*(1<<20), 1)
		}
		return &InfeasibleError{Role: name, Msg: fmt.Sprintf(
			"KV for %d requests × %d tokens needs %s per rank, %s is left after weights, arena and workspace (short by %s); at this length %d requests fit, or %d requests fit up to max_model_len %d",
			role.MaxNumSeqs, role.MaxModelLen, gib(r["kv_per_request"]*int64(role.MaxNumSeqs)), gib(r["kv_budget"]),
			gib(r["kv_per_request"]*int64(role.MaxNumSeqs)-r["kv_budget"]), r["max_requests"], role.MaxNumSeqs, max(lenFit, 0))}
	}
	return nil
}
