package plan

import (
	"strings"

	"deepinfer/ir"
)

// Holdings is the checkpoint accounting of a plan: how many tensors and bytes its weight
// manifest holds at the checkpoint's storage formats, and for each role how much of it
// the role's ranks hold together, counting a replicated tensor once.
type Holdings struct {
	Tensors int
	Bytes   int64
	Roles   []RoleHoldings
}

// RoleHoldings is one role's share of the checkpoint.
type RoleHoldings struct {
	Role            string
	Shared, Experts int64 // bytes: replicated weights; routed experts placed at least once
	Sharded         int64 // bytes: tables split over the ranks (all shards together)
	Missing         int   // routed experts no rank holds
	Tensors         int
}

// Bytes is the role's total.
func (r RoleHoldings) Bytes() int64 { return r.Shared + r.Experts + r.Sharded }

// derived weights are built at load time, not read from the checkpoint.
func derived(w *Weight) bool { return w.Init.Kind == "engram_token_map" }

// StorageBytes is a weight's checkpoint size and tensor count.
func (w *Weight) StorageBytes() (int64, int) {
	t := ir.Type{DType: w.DType}
	for _, d := range w.Shape {
		t.Shape = append(t.Shape, ir.Dim{N: d})
	}
	st := w.Storage
	if st == "" {
		st = w.DType.String()
	}
	b, n, err := ir.StorageBytes(st, t)
	if err != nil {
		return 0, 0
	}
	return b, n
}

// expertOf parses "…experts.E.wN…" into (layer prefix, E); ok is false for other weights
// (the shared expert included).
func expertOf(name string) (string, int, bool) {
	i := strings.Index(name, ".experts.")
	if i < 0 || strings.Contains(name, "shared_experts") {
		return "", 0, false
	}
	rest := name[i+len(".experts."):]
	e, j := 0, 0
	for ; j < len(rest) && rest[j] >= '0' && rest[j] <= '9'; j++ {
		e = e*10 + int(rest[j]-'0')
	}
	if j == 0 {
		return "", 0, false
	}
	return name[:i], e, true
}

// layerIndexOf reads the layer number from an expert weight prefix ("…layers.N.ffn").
func layerIndexOf(prefix string) int {
	i := strings.LastIndex(prefix, "layers.")
	if i < 0 {
		return -1
	}
	n, j := 0, i+len("layers.")
	for ; j < len(prefix) && prefix[j] >= '0' && prefix[j] <= '9'; j++ {
		n = n*10 + int(prefix[j]-'0')
	}
	return n
}

// Account sums the manifest and, per role, what its ranks hold: every non-expert weight
// is on every rank (counted once), a routed expert counts if the role's placement puts it
// in at least one slot (all of them without a placement), and sharded tables count whole.
func (p *Plan) Account() Holdings {
	var h Holdings
	for i := range p.Weights {
		w := &p.Weights[i]
		if derived(w) {
			continue
		}
		b, n := w.StorageBytes()
		h.Bytes += b
		h.Tensors += n
	}
	if p.Deployment == nil {
		return h
	}
	for _, r := range p.Deployment.Roles {
		placed := map[int]map[int]bool{} // layer → logical experts placed
		for _, lp := range r.Placement {
			set := map[int]bool{}
			for _, e := range lp.Phy2Log {
				set[e] = true
			}
			placed[lp.Layer] = set
		}
		rh := RoleHoldings{Role: r.Name}
		type expert struct {
			layer string
			id    int
		}
		missing := map[expert]bool{}
		for i := range p.Weights {
			w := &p.Weights[i]
			if derived(w) {
				continue
			}
			b, n := w.StorageBytes()
			prefix, e, isExpert := expertOf(w.Name)
			switch {
			case isExpert:
				set, ok := placed[layerIndexOf(prefix)]
				if ok && !set[e] {
					missing[expert{prefix, e}] = true
					continue
				}
				rh.Experts += b
			case strings.Contains(w.Name, "engram.embed"):
				rh.Sharded += b
			default:
				rh.Shared += b
			}
			rh.Tensors += n
		}
		rh.Missing = len(missing)
		h.Roles = append(h.Roles, rh)
	}
	return h
}
