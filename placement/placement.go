package placement

import (
	"fmt"
	"slices"
)

// Placement is an expert map for every layer, in EPLB's three views.
type Placement struct {
	// Phy2Log[layer][slot] is the logical expert held by a physical slot. Slot r lives on
	// GPU r/(Replicas/GPUs).
	Phy2Log [][]int `json:"phy2log"`
	// Log2Phy[layer][expert] lists the slots holding an expert, by replica rank. It is
	// ragged: len(Log2Phy[l][e]) == LogCnt[l][e]. EPLB's padded tensor is Log2PhyPadded.
	Log2Phy [][][]int `json:"log2phy"`
	// LogCnt[layer][expert] is the number of replicas of an expert.
	LogCnt [][]int `json:"logcnt"`
}

func newPlacement(layers int) *Placement {
	return &Placement{
		Phy2Log: make([][]int, layers),
		Log2Phy: make([][][]int, layers),
		LogCnt:  make([][]int, layers),
	}
}

// setLayer stores one layer's phy2log and derives LogCnt and Log2Phy. rank[slot] is the
// replica rank of the slot (EPLB's phyrank, which orders its log2phy); nil ranks the
// replicas of an expert by slot order.
func (pl *Placement) setLayer(layer int, phy2log, rank []int, experts int) {
	cnt := make([]int, experts)
	for _, e := range phy2log {
		cnt[e]++
	}
	// One backing array for all the lists of this layer.
	back := make([]int, len(phy2log))
	l2p := make([][]int, experts)
	off := 0
	for e, c := range cnt {
		l2p[e] = back[off : off : off+c]
		off += c
	}
	if rank == nil {
		for s, e := range phy2log {
			l2p[e] = append(l2p[e], s)
		}
	} else {
		for e := range l2p {
			l2p[e] = l2p[e][:cnt[e]]
		}
		for s, e := range phy2log {
			l2p[e][rank[s]] = s
		}
	}
	pl.Phy2Log[layer] = phy2log
	pl.LogCnt[layer] = cnt
	pl.Log2Phy[layer] = l2p
}

// Log2PhyPadded is Log2Phy in EPLB's layout: [layers][experts][maxcnt], where maxcnt is
// the largest replica count over all layers and unused entries are -1.
func (pl *Placement) Log2PhyPadded() [][][]int {
	maxc := 0
	for _, row := range pl.LogCnt {
		for _, c := range row {
			maxc = max(maxc, c)
		}
	}
	out := make([][][]int, len(pl.Log2Phy))
	for l, layer := range pl.Log2Phy {
		out[l] = make([][]int, len(layer))
		for e, slots := range layer {
			row := make([]int, maxc)
			for i := range row {
				row[i] = -1
			}
			copy(row, slots)
			out[l][e] = row
		}
	}
	return out
}

// Check verifies the invariants every policy must keep: the shapes fit, every slot holds
// a valid expert, every expert has at least one replica, the counts add up to Replicas,
// and the three views agree. (S = Replicas/GPUs slots per GPU holds by construction:
// the slot index fixes the GPU.)
func (pl *Placement) Check(p Problem, layers, experts int) error {
	if len(pl.Phy2Log) != layers || len(pl.LogCnt) != layers || len(pl.Log2Phy) != layers {
		return fmt.Errorf("placement: %d/%d/%d layers in phy2log/logcnt/log2phy, want %d",
			len(pl.Phy2Log), len(pl.LogCnt), len(pl.Log2Phy), layers)
	}
	for l := range layers {
		phy, cnt, l2p := pl.Phy2Log[l], pl.LogCnt[l], pl.Log2Phy[l]
		if len(phy) != p.Replicas {
			return fmt.Errorf("placement: layer %d has %d slots, want %d", l, len(phy), p.Replicas)
		}
		if len(cnt) != experts || len(l2p) != experts {
			return fmt.Errorf("placement: layer %d has %d counts and %d replica lists, want %d", l, len(cnt), len(l2p), experts)
		}
		seen := make([]int, experts)
		for s, e := range phy {
			if e < 0 || e >= experts {
				return fmt.Errorf("placement: layer %d slot %d holds expert %d, out of range", l, s, e)
			}
			seen[e]++
		}
		sum := 0
		for e := range experts {
			if seen[e] == 0 {
				return fmt.Errorf("placement: layer %d expert %d has no replica", l, e)
			}
			if cnt[e] != seen[e] {
				return fmt.Errorf("placement: layer %d expert %d: logcnt %d, but %d slots hold it", l, e, cnt[e], seen[e])
			}
			if len(l2p[e]) != cnt[e] {
				return fmt.Errorf("placement: layer %d expert %d: log2phy lists %d slots, logcnt says %d", l, e, len(l2p[e]), cnt[e])
			}
			for _, s := range l2p[e] {
				if s < 0 || s >= len(phy) || phy[s] != e {
					return fmt.Errorf("placement: layer %d expert %d: log2phy names slot %d, which does not hold it", l, e, s)
				}
			}
			if sorted := slices.Sorted(slices.Values(l2p[e])); len(slices.Compact(sorted)) != len(l2p[e]) {
				return fmt.Errorf("placement: layer %d expert %d: log2phy repeats a slot", l, e)
			}
			sum += cnt[e]
		}
		if sum != p.Replicas {
			return fmt.Errorf("placement: layer %d: logcnt sums to %d, want %d", l, sum, p.Replicas)
		}
	}
	return nil
}

// GPULoads returns [layer][gpu] loads: each slot carries its expert's load divided by
// the expert's replica count (tokens of an expert split evenly over its replicas).
// It panics if the placement does not fit the loads and problem (see Check).
func GPULoads(loads Loads, pl *Placement, p Problem) [][]float64 {
	s := p.SlotsPerGPU()
	out := make([][]float64, len(loads))
	for l, w := range loads {
		cnt := make([]int, len(w))
		for _, e := range pl.Phy2Log[l] {
			cnt[e]++
		}
		g := make([]float64, p.GPUs)
		for slot, e := range pl.Phy2Log[l] {
			g[slot/s] += w[e] / float64(cnt[e])
		}
		out[l] = g
	}
	return out
}

// LayerBalancedness returns mean(GPU load)/max(GPU load) for each layer; a layer with no
// load at all counts as perfectly balanced (1).
func LayerBalancedness(loads Loads, pl *Placement, p Problem) []float64 {
	g := GPULoads(loads, pl, p)
	out := make([]float64, len(g))
	for l, row := range g {
		out[l] = balance(row)
	}
	return out
}

func balance(gpuLoads []float64) float64 {
	sum, mx := 0.0, 0.0
	for _, v := range gpuLoads {
		sum += v
		mx = max(mx, v)
	}
	if mx == 0 {
		return 1
	}
	return sum / float64(len(gpuLoads)) / mx
}

// Balancedness is the figure of merit of BENCHMARKS.md §5: the mean over layers of
// mean(GPU load)/max(GPU load). It panics if the placement does not fit (see Check).
func Balancedness(loads Loads, pl *Placement, p Problem) float64 {
	per := LayerBalancedness(loads, pl, p)
	sum := 0.0
	for _, b := range per {
		sum += b
	}
	return sum / float64(len(per))
}

// Policy is one placement algorithm.
type Policy struct {
	Name  string
	Doc   string
	Place func(Loads, Problem) (*Placement, error)
	// Flat policies ignore groups and nodes: they never keep a group inside a node.
	Flat bool
}

// Policies lists the policies by name; the first is the reference, "default" is ours.
var Policies = []Policy{
	{"eplb", "DeepSeek's EPLB, bit for bit (hierarchical when groups%nodes == 0, else global)", EPLB, false},
	{"default", "ours: eplb's constraints, minimum of the most loaded GPU by local search; never worse than eplb", Default, false},
	{"default-global", "ours without the node constraint (one node, one group): best balance, no group locality", DefaultGlobal, true},
}

// KeepsGroupsInNodes reports whether the named policy's placements for p keep every
// group, with all its replicas, inside one node (the hierarchical policy).
func KeepsGroupsInNodes(policy string, p Problem) bool {
	for _, pol := range Policies {
		if pol.Name == policy {
			return !pol.Flat && p.Hierarchical()
		}
	}
	return false
}

// PolicyNames lists the names in Policies.
func PolicyNames() []string {
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = p.Name
	}
	return names
}

// Place runs the named policy.
func Place(policy string, loads Loads, p Problem) (*Placement, error) {
	for _, pol := range Policies {
		if pol.Name == policy {
			return pol.Place(loads, p)
		}
	}
	return nil, fmt.Errorf("placement: unknown policy %q (have %v)", policy, PolicyNames())
}

// check validates the inputs shared by every policy.
func check(loads Loads, p Problem) error {
	if err := loads.Validate(); err != nil {
		return err
	}
	return p.Validate(loads.Experts())
}
