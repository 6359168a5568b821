// Package synth writes synthetic checkpoints: a model's config cut down to chosen layers,
// and random weights for it in the real checkpoint's tensor names, dtypes and storage
// formats (FP8 blocks and FP4 experts with their UE8M0 scales). They exist to time
// full-width layers without the real weights: the bytes a step reads are the real
// model's, the values are not.
package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseLayers reads a layer list such as "2-9" or "20-23,37": ascending, distinct
// layer ids.
func ParseLayers(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("layer list %q: %q is not a layer id or a range A-B", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("layer list %q: %q is not a range A-B with A ≤ B", s, part)
			}
		}
		for i := a; i <= b; i++ {
			if len(out) > 0 && i <= out[len(out)-1] {
				return nil, fmt.Errorf("layer list %q: layers must be ascending and distinct (%d after %d)", s, i, out[len(out)-1])
			}
			out = append(out, i)
		}
	}
	return out, nil
}

// TrimConfig returns the config (config.json's bytes) cut down to the given layers of
// the original (ascending ids; renumbered from 0), with every per-layer field cut to
// match, and notes saying what it changed beyond dropping layers. V4 (top-level fields)
// and V4.1 (text_config) are understood.
func TrimConfig(raw []byte, layers []int) ([]byte, []string, error) {
	var top map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return nil, nil, fmt.Errorf("config.json: %v", err)
	}
	cfg := top
	if tc, ok := top["text_config"].(map[string]any); ok {
		cfg = tc
	}
	n, err := intField(cfg, "num_hidden_layers")
	if err != nil {
		return nil, nil, err
	}
	if len(layers) == 0 {
		return nil, nil, fmt.Errorf("no layers chosen")
	}
	if last := layers[len(layers)-1]; last >= n {
		return nil, nil, fmt.Errorf("layer %d: the model has layers 0–%d", last, n-1)
	}
	t := trimmer{cfg: cfg, keep: layers, n: n, newID: map[int]int{}}
	for j, i := range layers {
		t.newID[i] = j
	}
	var notes []string
	if mt, _ := top["model_type"].(string); mt == "deepseek_v41" || cfg["kv_source_layer_ids"] != nil {
		notes, err = t.v41()
	} else {
		err = t.v4()
	}
	if err != nil {
		return nil, nil, err
	}
	cfg["num_hidden_layers"] = len(layers)
	out, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return append(out, '\n'), notes, nil
}

type trimmer struct {
	cfg   map[string]any
	keep  []int
	n     int
	newID map[int]int
}

func intField(m map[string]any, k string) (int, error) {
	v, ok := m[k].(json.Number)
	if !ok {
		return 0, fmt.Errorf("config.json: %s is missing or not a number", k)
	}
	i, err := v.Int64()
	if err != nil {
		return 0, fmt.Errorf("config.json: %s = %s is not an integer", k, v)
	}
	return int(i), nil
}

func ints(m map[string]any, k string) ([]int, bool, error) {
	raw, ok := m[k]
	if !ok || raw == nil {
		return nil, false, nil
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, true, fmt.Errorf("config.json: %s is not a list", k)
	}
	out := make([]int, len(list))
	for i, x := range list {
		num, ok := x.(json.Number)
		v, err := num.Int64()
		if !ok || err != nil {
			return nil, true, fmt.Errorf("config.json: %s[%d] is not an integer", k, i)
		}
		out[i] = int(v)
	}
	return out, true, nil
}

// perLayer cuts a list of n (plus extra trailing) per-layer entries to the kept layers,
// keeping the trailing entries (MTP stages) as they are.
func (t *trimmer) perLayer(k string) error {
	raw, ok := t.cfg[k].([]any)
	if !ok {
		return nil
	}
	if len(raw) < t.n {
		return fmt.Errorf("config.json: %s has %d entries for %d layers", k, len(raw), t.n)
	}
	out := make([]any, 0, len(t.keep)+len(raw)-t.n)
	for _, i := range t.keep {
		out = append(out, raw[i])
	}
	t.cfg[k] = append(out, raw[t.n:]...)
	return nil
}

func (t *trimmer) v4() error {
	for _, k := range []string{"compress_ratios", "layer_types", "mlp_layer_types"} {
		if err := t.perLayer(k); err != nil {
			return err
		}
	}
	if _, ok := t.cfg["num_hash_layers"]; ok {
		h, err := intField(t.cfg, "num_hash_layers")
		if err != nil {
			return err
		}
		kept := 0
		for _, i := range t.keep {
			if i < h {
				kept++
			}
		}
		t.cfg["num_hash_layers"] = kept
	}
	return nil
}

// v41 cuts V4.1's layer roles. A kept layer whose KV (or index) source was dropped
// becomes a source itself, the candidate source is dropped unless kept, and the
// DSpark stages read the streams entering the last kept layers.
func (t *trimmer) v41() ([]string, error) {
	ratios, _, err := ints(t.cfg, "compress_ratios")
	if err != nil {
		return nil, err
	}
	if len(ratios) < t.n {
		return nil, fmt.Errorf("config.json: compress_ratios has %d entries for %d layers", len(ratios), t.n)
	}
	var notes []string
	engram, _, err := ints(t.cfg, "engram_layer_ids")
	if err != nil {
		return nil, err
	}
	for _, e := range engram {
		if _, kept := t.newID[e]; kept {
			return nil, fmt.Errorf("layer %d has Engram: synthetic Engram tables are not written; choose layers without Engram (%v)", e, engram)
		}
	}
	if len(engram) > 0 {
		notes = append(notes, fmt.Sprintf("Engram layers %v dropped with their tables", engram))
	}
	t.cfg["engram_layer_ids"] = []int{}
	t.cfg["engram_num_embeddings"] = []int{}
	var newKV, newIdx []int
	for _, field := range []struct {
		key string
		out *[]int
	}{{"kv_source_layer_ids", &newKV}, {"index_source_layer_ids", &newIdx}} {
		src, _, err := ints(t.cfg, field.key)
		if err != nil {
			return nil, err
		}
		isSrc := map[int]bool{}
		for _, s := range src {
			isSrc[s] = true
		}
		latest := -1 // the original source the next compressed layer reads
		covered := map[int]bool{}
		for i := 0; i < t.n; i++ {
			if isSrc[i] {
				latest = i
			}
			j, kept := t.newID[i]
			if !kept || ratios[i] == 0 {
				continue
			}
			switch {
			case latest >= 0 && t.keepsLayer(latest):
				if latest == i {
					*field.out = append(*field.out, j)
				}
			case !covered[latest]:
				covered[latest] = true
				*field.out = append(*field.out, j)
				notes = append(notes, fmt.Sprintf("layer %d (now %d) owns its %s: its source %d was dropped", i, j, strings.TrimSuffix(field.key, "_layer_ids"), latest))
			}
		}
		t.cfg[field.key] = *field.out
	}
	if c, err := intField(t.cfg, "candidate_source_layer_id"); err == nil && c >= 0 {
		if j, kept := t.newID[c]; kept {
			t.cfg["candidate_source_layer_id"] = j
		} else {
			t.cfg["candidate_source_layer_id"] = -1
			notes = append(notes, fmt.Sprintf("candidate pre-filtering off: its source layer %d was dropped", c))
		}
	}
	if targets, ok, err := ints(t.cfg, "dspark_target_layer_ids"); err != nil {
		return nil, err
	} else if ok && len(targets) > 0 {
		if len(targets) > len(t.keep) {
			return nil, fmt.Errorf("the DSpark drafter reads %d layers' streams: keep at least %d layers", len(targets), len(targets))
		}
		nt := make([]int, len(targets))
		for k := range nt {
			nt[k] = len(t.keep) - len(targets) + k
		}
		if !slices.Equal(nt, targets) {
			notes = append(notes, fmt.Sprintf("the DSpark drafter reads the streams entering layers %v (was %v)", nt, targets))
		}
		t.cfg["dspark_target_layer_ids"] = nt
	}
	return notes, t.perLayer("compress_ratios")
}

func (t *trimmer) keepsLayer(i int) bool { _, ok := t.newID[i]; return ok }
