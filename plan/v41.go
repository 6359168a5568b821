package plan

import "fmt"

// Encoding and checks of what DeepSeek-V4.1 adds to the model section (encode.go
// documents the layout).

func (w *encoder) dspark(d *DSpark) {
	if d == nil {
		if w.err == nil {
			w.err = w.e.EncodeNil()
		}
		return
	}
	w.arr(5)
	for _, n := range []int{d.Block, d.Noise, d.Stages, d.MarkovRank} {
		w.int(int64(n))
	}
	w.arr(len(d.Targets))
	for _, t := range d.Targets {
		w.int(int64(t))
	}
}

func (w *encoder) vision(v *Vision) {
	if v == nil {
		if w.err == nil {
			w.err = w.e.EncodeNil()
		}
		return
	}
	w.arr(6)
	for _, n := range []int{v.Layers, v.Hidden, v.Heads, v.Intermediate, v.PatchSize, v.MaxImageTokens} {
		w.int(int64(n))
	}
}

// nilNext consumes a msgpack nil if one comes next.
func (d *decoder) nilNext() bool {
	if d.err != nil {
		return true
	}
	c, err := d.d.PeekCode()
	if err != nil {
		d.fail("%v", err)
		return true
	}
	if c == 0xc0 {
		_ = d.d.DecodeNil()
		return true
	}
	return false
}

func decodeDSpark(d *decoder) *DSpark {
	if d.nilNext() {
		return nil
	}
	d.arr(5)
	s := &DSpark{Block: int(d.int(1, 64)), Noise: int(d.int(0, 1<<24)), Stages: int(d.int(1, 64)), MarkovRank: int(d.int(1, 1<<16))}
	n := d.arr(-1)
	for i := 0; i < n && d.err == nil; i++ {
		s.Targets = append(s.Targets, int(d.int(0, 1<<16)))
	}
	return s
}

func decodeVision(d *decoder) *Vision {
	if d.nilNext() {
		return nil
	}
	d.arr(6)
	return &Vision{Layers: int(d.int(0, 1<<16)), Hidden: int(d.int(1, 1<<20)), Heads: int(d.int(1, 1<<16)),
		Intermediate: int(d.int(1, 1<<24)), PatchSize: int(d.int(1, 1<<16)), MaxImageTokens: int(d.int(0, 1<<24))}
}

var roles = map[string]bool{"": true, "window": true, "full": true, "reuse": true, "reindex": true, "dspark": true}

// validateV41Model checks the V4.1 roles refer to layers that exist and have the roles
// they need, and that the DSpark stages are where the drafter says.
func validateV41Model(m *Model) error {
	n := len(m.Layers)
	for i, l := range m.Layers {
		if !roles[l.Role] {
			return fmt.Errorf("model: layer %d: unknown role %q", i, l.Role)
		}
		if l.Candidate != "" && l.Candidate != "source" && l.Candidate != "restricted" {
			return fmt.Errorf("model: layer %d: unknown candidate role %q", i, l.Candidate)
		}
		if l.Role == "" {
			continue // a V4 layer
		}
		for _, s := range []int{l.KVSource, l.IndexSource} {
			if s >= i+1 || s >= n || (s >= 0 && m.Layers[s].Role != "full" && m.Layers[s].Role != "reindex") {
				return fmt.Errorf("model: layer %d names source %d, which is not an earlier source layer", i, s)
			}
		}
	}
	if ds := m.DSpark; ds != nil {
		if ds.Stages != m.MTPLayers || ds.Stages >= n {
			return fmt.Errorf("model: %d DSpark stages, %d MTP layers of %d", ds.Stages, m.MTPLayers, n)
		}
		if ds.Noise >= m.Vocab {
			return fmt.Errorf("model: DSpark noise token %d is outside the vocabulary", ds.Noise)
		}
		for _, l := range m.Layers[n-ds.Stages:] {
			if l.Role != "dspark" {
				return fmt.Errorf("model: the last %d layers must be DSpark stages", ds.Stages)
			}
		}
		for _, t := range ds.Targets {
			if t >= n-ds.Stages {
				return fmt.Errorf("model: DSpark target %d is not a backbone layer", t)
			}
		}
	}
	return nil
}
