package plan

import (
	"fmt"

	"deepinfer/ir"
	"deepinfer/kvlayout"
)

func kvLayer(d *decoder) kvlayout.LayerLayout {
	l := kvlayout.LayerLayout{Window: int(d.int(1, 1<<20)), Dim: int(d.int(1, 1<<16)), RingCap: int(d.int(0, 1<<20)), RingFmt: d.str()}
	nc := d.arr(-1)
	if nc > 2 {
		d.fail("%d compressor caches in one layer", nc)
		return l
	}
	for j := 0; j < nc && d.err == nil; j++ {
		d.arr(6)
		l.Caches = append(l.Caches, kvlayout.CacheLayout{Ratio: int(d.int(1, 1<<16)), Dim: int(d.int(1, 1<<16)), Overlap: d.bool(),
			Kind: d.str(), Fmt: d.str(), Group: int(d.int(0, 1<<16))})
	}
	return l
}

// Validate checks a plan's internal consistency: every operand refers to an existing
// buffer of exactly the type the instruction expects, every instruction passes its op's
// type rule, slots are written before they are read, and stateful ops name layers that
// the KV layout has.
func Validate(p *Plan) error {
	if p.ModelType == "" || p.Target == "" {
		return fmt.Errorf("missing model type or target")
	}
	switch p.Source.Kind {
	case SourceCheckpoint, SourceSeeded:
	default:
		return fmt.Errorf("unknown weight source %q", p.Source.Kind)
	}
	if len(p.Model.Layers) == 0 || len(p.Model.Layers) > 4096 {
		return fmt.Errorf("model: %d layers", len(p.Model.Layers))
	}
	if err := p.KV.Validate(); err != nil {
		return err
	}
	if len(p.KV.Layers) != len(p.Model.Layers) {
		return fmt.Errorf("kv layout has %d layers, the model %d", len(p.KV.Layers), len(p.Model.Layers))
	}
	if err := validateV41Model(&p.Model); err != nil {
		return err
	}
	names := make(map[string]bool, len(p.Weights))
	wtypes := make([]ir.Type, len(p.Weights))
	for i := range p.Weights {
		w := &p.Weights[i]
		if w.Name == "" || names[w.Name] {
			return fmt.Errorf("weight %d: empty or repeated name %q", i, w.Name)
		}
		names[w.Name] = true
		if w.DType != ir.F32 && w.DType != ir.I32 {
			return fmt.Errorf("weight %q: runtime dtype %s is not f32 or i32", w.Name, w.DType)
		}
		if len(w.Shape) == 0 || len(w.Shape) > 4 {
			return fmt.Errorf("weight %q: rank %d", w.Name, len(w.Shape))
		}
		n := int64(1)
		for _, d := range w.Shape {
			if d < 1 || d > maxDim || n > (1<<40)/d {
				return fmt.Errorf("weight %q: shape %v out of range", w.Name, w.Shape)
			}
			n *= d
		}
		if p.Source.Kind == SourceSeeded || w.Init.Kind == InitTokenMap {
			switch w.Init.Kind {
			case "normal", "const", "expert_table":
			case InitTokenMap:
				if w.DType != ir.I32 || len(w.Shape) != 1 || w.Shape[0] != int64(p.Model.Vocab) {
					return fmt.Errorf("weight %q: a token map is i32[%d], have %s%v", w.Name, p.Model.Vocab, w.DType, w.Shape)
				}
			default:
				return fmt.Errorf("weight %q: unknown init %q", w.Name, w.Init.Kind)
			}
		}
		t := ir.Type{DType: w.DType}
		for _, d := range w.Shape {
			t.Shape = append(t.Shape, ir.Dim{N: d})
		}
		wtypes[i] = t
	}
	if d := p.Deployment; d != nil {
		for _, r := range d.Roles {
			if p.Program(r.Name) == nil {
				return fmt.Errorf("deployment role %q has no program", r.Name)
			}
			for _, lp := range r.Placement {
				if r.EP < 1 || len(lp.Phy2Log)%r.EP != 0 {
					return fmt.Errorf("role %s layer %d: %d expert slots do not split over ep %d", r.Name, lp.Layer, len(lp.Phy2Log), r.EP)
				}
			}
		}
	}
	phases := map[string]bool{}
	for i := range p.Programs {
		pr := &p.Programs[i]
		if phases[pr.Phase] || pr.Phase == "" {
			return fmt.Errorf("program %d: empty or repeated phase %q", i, pr.Phase)
		}
		phases[pr.Phase] = true
		if err := validateProgram(p, pr, wtypes); err != nil {
			return fmt.Errorf("program %s: %w", pr.Phase, err)
		}
	}
	return nil
}

func validType(t ir.Type) bool {
	if t.DType != ir.F32 && t.DType != ir.I32 {
		return false
	}
	_, _, ok := t.Elems()
	return ok
}

func validateProgram(p *Plan, pr *Program, wtypes []ir.Type) error {
	for j, pa := range pr.Params {
		if pa.Name == "" || !validType(pa.Type) {
			return fmt.Errorf("param %d (%q): bad type %s", j, pa.Name, pa.Type)
		}
	}
	for j, s := range pr.Slots {
		if !validType(s) {
			return fmt.Errorf("slot %d: bad type %s", j, s)
		}
	}
	written := make([]bool, len(pr.Slots))
	check := func(o Operand, t ir.Type, write bool) error {
		switch o.Kind {
		case OpNone:
			if t.DType != ir.State {
				return fmt.Errorf("an ordering operand has tensor type %s", t)
			}
			return nil
		case OpWeight:
			if write || o.Index >= len(wtypes) || !wtypes[o.Index].Equal(t) {
				return fmt.Errorf("weight operand %d does not match %s", o.Index, t)
			}
		case OpParam:
			if write || o.Index >= len(pr.Params) || !pr.Params[o.Index].Type.Equal(t) {
				return fmt.Errorf("param operand %d does not match %s", o.Index, t)
			}
		case OpSlot:
			if o.Index >= len(pr.Slots) {
				return fmt.Errorf("slot %d does not exist", o.Index)
			}
			s := pr.Slots[o.Index]
			vc, vs, ok := t.Elems()
			sc, ss, _ := s.Elems()
			if !ok || s.DType != t.DType || vs != ss || vc > sc {
				return fmt.Errorf("value %s does not fit slot %d (%s)", t, o.Index, s)
			}
			if write {
				written[o.Index] = true
			} else if !written[o.Index] {
				return fmt.Errorf("slot %d is read before it is written", o.Index)
			}
		default:
			return fmt.Errorf("operand kind %d", o.Kind)
		}
		return nil
	}
	for j := range pr.Instrs {
		in := &pr.Instrs[j]
		bad := func(err error) error { return fmt.Errorf("instr %d (%s): %w", j, in.Op, err) }
		if in.Kernel == "" {
			return bad(fmt.Errorf("no kernel"))
		}
		if len(in.Args) != len(in.ArgTypes) || len(in.Results) != len(in.ResultTypes) {
			return bad(fmt.Errorf("operand and type counts differ"))
		}
		if err := ir.CheckInstr(in.Op, in.ArgTypes, in.ResultTypes, in.Attrs); err != nil {
			return bad(err)
		}
		for k, o := range in.Args {
			if err := check(o, in.ArgTypes[k], false); err != nil {
				return bad(err)
			}
		}
		for k, o := range in.Results {
			if o.Kind != OpSlot && o.Kind != OpNone {
				return bad(fmt.Errorf("result %d is not a slot", k))
			}
			if err := check(o, in.ResultTypes[k], true); err != nil {
				return bad(err)
			}
		}
		if l, ok := in.Attrs.Int("layer"); ok {
			if l >= int64(len(p.KV.Layers)) {
				return bad(fmt.Errorf("layer %d is not in the kv layout", l))
			}
			if c, ok := in.Attrs.Int("cache"); ok && (c < 0 || c >= int64(len(p.KV.Layers[l].Caches))) {
				return bad(fmt.Errorf("layer %d has no cache %d", l, c))
			}
		}
	}
	if len(pr.Returns) == 0 {
		return fmt.Errorf("no returns")
	}
	for _, o := range pr.Returns {
		if o.Kind != OpSlot || o.Index >= len(pr.Slots) || !written[o.Index] {
			return fmt.Errorf("returns an unwritten or non-slot buffer")
		}
	}
	return nil
}
