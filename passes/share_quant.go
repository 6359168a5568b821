package passes

import (
	"fmt"

	"deepinfer/ir"
)

// shareQuant places qlinear instructions that quantize the same activation the same way
// next to each other and marks each but the first quant_shared: a target may quantize
// the activation once for the run of them (V4.1's attn.wq_a and attn.wkv read the same
// normed input, the shared expert's w1 and w3 another, attn.wq_b and
// attn.indexer.wq_b the query's low-rank value). Moving a qlinear earlier is always
// legal here: its operands are the activation, defined before the first of the run,
// and a weight; its users all come after its old place. Nothing else moves, and no
// value changes: a target that ignores the mark quantizes each time, as before.
func shareQuant(m *ir.Module, _ *Config) (bool, error) {
	changed := false
	for _, f := range m.Funcs {
		// the qlinears of each key (activation, act, block, keep) in program order
		runs := map[string][]*ir.Instr{}
		var keys []string
		for _, in := range f.Body {
			k, ok := quantKey(in)
			if !ok {
				continue
			}
			if runs[k] == nil {
				keys = append(keys, k)
			}
			runs[k] = append(runs[k], in)
		}
		pos := make(map[*ir.Instr]int, len(f.Body))
		for i, in := range f.Body {
			pos[in] = i
		}
		moved := map[*ir.Instr]bool{}
		after := map[*ir.Instr][]*ir.Instr{} // the run's first → the ones placed after it
		for _, k := range keys {
			r := runs[k]
			for _, in := range r[1:] {
				if !definedBefore(in, pos[r[0]], pos) {
					continue // (a weight operand computed in between: it stays)
				}
				moved[in] = true
				in.Attrs["quant_shared"] = true
				after[r[0]] = append(after[r[0]], in)
				changed = true
			}
		}
		if len(after) == 0 {
			continue
		}
		body := make([]*ir.Instr, 0, len(f.Body))
		for _, in := range f.Body {
			if moved[in] {
				continue
			}
			body = append(body, in)
			body = append(body, after[in]...)
		}
		f.Body = body
	}
	return changed, nil
}

// definedBefore reports whether every operand of in is a parameter, a weight or the
// result of an instruction before position at.
func definedBefore(in *ir.Instr, at int, pos map[*ir.Instr]int) bool {
	for _, a := range in.Args {
		if a.Def != nil && pos[a.Def] >= at {
			return false
		}
	}
	return true
}

// quantKey identifies what a qlinear quantizes: its activation value and the act,
// block and keep attributes (ok false for other instructions and for act f32, which
// quantizes nothing).
func quantKey(in *ir.Instr) (string, bool) {
	if in.Op != "qlinear" || len(in.Args) == 0 {
		return "", false
	}
	act, _ := in.Attrs.Str("act")
	if act == "" || act == "f32" {
		return "", false
	}
	block, _ := in.Attrs.Int("block")
	keep, _ := in.Attrs.Int("keep")
	return fmt.Sprintf("%p/%s/%d/%d", in.Args[0], act, block, keep), true
}
