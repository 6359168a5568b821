package passes

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"deepinfer/ir"
	"deepinfer/plan"
)

// Expert placements are recorded as module attributes "place.<role>.<layer>" (phy2log)
// and "place.<role>.balancedness" (×1e6), so that dumps show them.
func placeKey(role string, layer int) string { return fmt.Sprintf("place.%s.%d", role, layer) }

// PlacementOf reads back a role's placement.
func PlacementOf(m *ir.Module, role string) ([]plan.LayerPlacement, float64) {
	var out []plan.LayerPlacement
	prefix := "place." + role + "."
	for _, k := range m.Attrs.Keys() { // sorted: "place.decode.10" < "place.decode.2", so sort by layer below
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		l, err := strconv.Atoi(rest)
		if err != nil {
			continue
		}
		v, _ := m.Attrs.Ints(k)
		lp := plan.LayerPlacement{Layer: l, Phy2Log: make([]int, len(v))}
		for i, e := range v {
			lp.Phy2Log[i] = int(e)
		}
		out = append(out, lp)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Layer < out[j].Layer })
	b, _ := m.Attrs.Int("place." + role + ".balancedness_ppm")
	return out, float64(b) / 1e6
}
