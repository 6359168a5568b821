package passes

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"deepinfer/ir"
)

// SWA bounded replay ("YOCO prefill truncation"). DeepSeek-V4.1 is a causal
// encoder–decoder: every layer after the last KV source reads its global context from
// the sources' shared compressed caches and keeps only a sliding window of its own. So
// a prefill step can run those layers on each sequence's last `keep` rows alone: the
// compressed caches are complete (their owners ran on every row), the trailing layers'
// window rings end up holding exactly the rows decode will need (keep ≥ window), and
// only the first window−1 kept rows see a window cut short at the tail's start — the
// approximation, measured in docs/v41.md. keep ≥ a prompt's length changes nothing.
//
// The pass rewrites the prefill function at the cut (the first instruction that uses
// a weight of the module's replay_first_layer): every value with leading dim T that is
// defined before the cut and read after it goes through tail_rows, logit_rows through
// tail_index, and every instruction after the cut is re-typed (T → K) and, where its op
// declares it, told keep (the kernels then map rows to sequences by their tails).

// Replay modes.
const (
	ReplayOff     = "off"
	ReplayCompact = "compact"
)

// DefaultReplayKeep is the keep count when nothing sets one.
const DefaultReplayKeep = 140

// Replay configures the pass: Mode off or compact, Keep the rows kept per sequence.
type Replay struct {
	Mode string
	Keep int
}

// Environment variables read when neither Config.Replay nor a deploy spec sets the mode.
const (
	EnvReplayMode = "DEEPINFER_YOCO_PREFILL_TRUNCATION_MODE"
	EnvReplayKeep = "DEEPINFER_YOCO_PREFILL_KEEP_TOKENS"
)

// AttrReplayFirstLayer is the module attribute naming the first layer the pass may
// truncate (set by the V4.1 lowering: the layer after the last KV source).
const AttrReplayFirstLayer = "replay_first_layer"

// AttrWindow is the module attribute holding the sliding window: the smallest keep
// that leaves every trailing layer's window ring whole for decode.
const AttrWindow = "window"

// AttrReplayKeep is the module attribute the pass leaves: the keep it applied.
const AttrReplayKeep = "replay_keep"

// replayConfig resolves the pass's settings: Config.Replay, else the deploy spec's
// swa_replay (which already folds in the environment), else the environment, else off.
func replayConfig(cfg *Config) (Replay, error) {
	var r Replay
	switch {
	case cfg != nil && cfg.Replay != nil:
		r = *cfg.Replay
	case cfg != nil && cfg.Spec != nil:
		r = Replay{Mode: cfg.Spec.SWAReplay.Mode, Keep: cfg.Spec.SWAReplay.KeepTokens}
	default:
		r.Mode = os.Getenv(EnvReplayMode)
		if v := os.Getenv(EnvReplayKeep); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return r, fmt.Errorf("%s=%q: not an integer", EnvReplayKeep, v)
			}
			r.Keep = n
		}
	}
	if r.Mode == "" {
		r.Mode = ReplayOff
	}
	if r.Keep == 0 {
		r.Keep = DefaultReplayKeep
	}
	switch r.Mode {
	case ReplayOff, ReplayCompact:
	default:
		return r, fmt.Errorf("swa_replay mode %q: want off or compact", r.Mode)
	}
	if r.Keep < 1 {
		return r, fmt.Errorf("swa_replay keep %d: must be positive", r.Keep)
	}
	return r, nil
}

// swaReplay is the pass.
func swaReplay(m *ir.Module, cfg *Config) (bool, error) {
	r, err := replayConfig(cfg)
	if err != nil {
		return false, err
	}
	first, ok := m.Attrs.Int(AttrReplayFirstLayer)
	if r.Mode == ReplayOff || !ok {
		return false, nil
	}
	if w, ok := m.Attrs.Int(AttrWindow); ok && int64(r.Keep) < w {
		return false, fmt.Errorf("swa_replay keep %d is below the sliding window %d: decode would find the trailing layers' windows incomplete", r.Keep, w)
	}
	f := m.Func("prefill")
	if f == nil {
		return false, nil
	}
	prefix := fmt.Sprintf("layers.%d.", first)
	cut := -1
	for i, in := range f.Body {
		for _, a := range in.Args {
			if a.Weight && strings.HasPrefix(a.Name, prefix) {
				cut = i
				break
			}
		}
		if cut >= 0 {
			break
		}
	}
	if cut < 0 {
		return false, nil // no such layer in this phase
	}
	keep := int64(r.Keep)
	before := map[*ir.Value]bool{}
	for _, p := range f.Params {
		before[p] = true
	}
	for _, in := range f.Body[:cut] {
		for _, v := range in.Results {
			before[v] = true
		}
	}
	// values crossing the cut, in first-use order
	tail := map[*ir.Value]*ir.Value{}
	var inserted []*ir.Instr
	cross := func(v *ir.Value) (*ir.Value, error) {
		if v.Weight || !before[v] {
			return v, nil
		}
		if t, ok := tail[v]; ok {
			return t, nil
		}
		var op string
		switch {
		case v.Name == "logit_rows":
			op = "tail_index"
		case v.Type.DType != ir.State && v.Type.Rank() >= 1 && v.Type.Shape[0].Sym == ir.SymTokens:
			op = "tail_rows"
		default:
			tail[v] = v // state, or not per row: read as is
			return v, nil
		}
		attrs := ir.Attrs{"keep": keep}
		rt, err := ir.Lookup(op).Infer([]ir.Type{v.Type}, attrs)
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", op, v.Ref(), err)
		}
		nv := f.NewValue(rt[0])
		in := &ir.Instr{Op: op, Args: []*ir.Value{v}, Results: []*ir.Value{nv}, Attrs: attrs}
		nv.Def = in
		inserted = append(inserted, in)
		tail[v] = nv
		return nv, nil
	}
	post := f.Body[cut:]
	for _, in := range post {
		for i, a := range in.Args {
			nv, err := cross(a)
			if err != nil {
				return false, err
			}
			in.Args[i] = nv
		}
		info := ir.Lookup(in.Op)
		for _, s := range info.Attrs {
			if s.Name == "keep" {
				if in.Attrs == nil {
					in.Attrs = ir.Attrs{}
				}
				in.Attrs["keep"] = keep
			}
		}
		types := make([]ir.Type, len(in.Args))
		for i, a := range in.Args {
			types[i] = a.Type
		}
		rt, err := info.Infer(types, in.Attrs)
		if err != nil {
			return false, fmt.Errorf("after the replay cut, %s: %w", in.Op, err)
		}
		for i, v := range in.Results {
			v.Type = rt[i]
		}
	}
	for i, v := range f.Returns {
		nv, err := cross(v)
		if err != nil {
			return false, err
		}
		f.Returns[i] = nv
	}
	body := append([]*ir.Instr{}, f.Body[:cut]...)
	body = append(body, inserted...)
	f.Body = append(body, post...)
	m.Attrs[AttrReplayKeep] = keep
	return true, nil
}
