package placement

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomProblem draws a valid problem and loads of a random shape and kind.
func randomProblem(rng *rand.Rand) (Loads, Problem, string) {
	nodes := []int{1, 1, 2, 3, 4, 8}[rng.IntN(6)]
	gpus := nodes * (1 + rng.IntN(8))
	groups := []int{1, 2, 3, 4, 6, 8, 12, 16}[rng.IntN(8)]
	experts := groups * (1 + rng.IntN(24))
	per := (experts + gpus - 1) / gpus // slots per GPU so that replicas ≥ experts
	per += rng.IntN(3)
	p := Problem{Replicas: gpus * per, Groups: groups, Nodes: nodes, GPUs: gpus}
	layers := 1 + rng.IntN(4)
	kind := []string{"zipf", "uniform", "ties", "zeros", "one-hot"}[rng.IntN(5)]
	var l Loads
	switch kind {
	case "zipf":
		l = Synthetic{Kind: "zipf", S: 0.5 + rng.Float64(), Experts: experts, Layers: layers, Tokens: 1e4}.Generate(rng.Uint64())
	case "uniform":
		l = Uniform(experts, layers, rng.Uint64())
	default:
		l = make(Loads, layers)
		for i := range l {
			l[i] = make([]float64, experts)
			for j := range l[i] {
				switch kind {
				case "ties":
					l[i][j] = float64(rng.IntN(3))
				case "one-hot":
					if j == i%experts {
						l[i][j] = 1000
					}
				}
			}
		}
	}
	return l, p, kind
}

// checkGroupsInNodes verifies the hierarchical constraint: each node holds whole
// groups, G/N of them, and every replica of a group's experts sits in that node.
func checkGroupsInNodes(pl *Placement, p Problem, experts int) error {
	size := experts / p.Groups
	nodeSlots := p.Replicas / p.Nodes
	for l, row := range pl.Phy2Log {
		home := make([]int, p.Groups)
		for g := range home {
			home[g] = -1
		}
		for s, e := range row {
			g, n := e/size, s/nodeSlots
			if home[g] >= 0 && home[g] != n {
				return fmt.Errorf("layer %d: group %d is on nodes %d and %d", l, g, home[g], n)
			}
			home[g] = n
		}
		per := make([]int, p.Nodes)
		for _, n := range home {
			per[n]++
		}
		for n, c := range per {
			if c != p.Groups/p.Nodes {
				return fmt.Errorf("layer %d: node %d holds %d groups, want %d", l, n, c, p.Groups/p.Nodes)
			}
		}
	}
	return nil
}

func TestPolicyProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	n := 300
	if testing.Short() || raceEnabled {
		n = 80
	}
	for i := range n {
		loads, p, kind := randomProblem(rng)
		name := fmt.Sprintf("#%d %s %dx%d %+v", i, kind, loads.Layers(), loads.Experts(), p)
		if err := p.Validate(loads.Experts()); err != nil {
			t.Fatalf("%s: generator made an invalid problem: %v", name, err)
		}
		ref, err := EPLB(loads, p)
		if err != nil {
			t.Fatalf("%s: eplb: %v", name, err)
		}
		for _, pol := range Policies {
			pl, err := pol.Place(loads, p)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, pol.Name, err)
			}
			// Every expert placed, ≥ 1 replica, counts sum to Replicas, Log2Phy and
			// LogCnt agree with Phy2Log; slots per GPU are fixed by the slot index.
			if err := pl.Check(p, loads.Layers(), loads.Experts()); err != nil {
				t.Fatalf("%s: %s: %v", name, pol.Name, err)
			}
			if KeepsGroupsInNodes(pol.Name, p) {
				if err := checkGroupsInNodes(pl, p, loads.Experts()); err != nil {
					t.Fatalf("%s: %s breaks the hierarchical constraint: %v", name, pol.Name, err)
				}
			}
			again, _ := pol.Place(loads, p)
			if !reflect.DeepEqual(pl, again) {
				t.Fatalf("%s: %s is not deterministic", name, pol.Name)
			}
			if pol.Name == "eplb" {
				continue
			}
			// Ours is never worse than eplb, layer by layer.
			mine, theirs := GPULoads(loads, pl, p), GPULoads(loads, ref, p)
			for l := range mine {
				if a, b := maxOf(mine[l]), maxOf(theirs[l]); a > b*(1+1e-12) {
					t.Fatalf("%s: %s layer %d: max GPU load %v > eplb's %v", name, pol.Name, l, a, b)
				}
			}
		}
	}
}

func maxOf(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	return m
}

// Balancedness by hand: 2 GPUs × 2 slots, expert 0 (load 6) twice, experts 1 and 2.
func TestBalancednessByHand(t *testing.T) {
	loads := Loads{{6, 2, 4}}
	p := Problem{Replicas: 4, Groups: 1, Nodes: 1, GPUs: 2}
	pl := newPlacement(1)
	pl.setLayer(0, []int{0, 1, 0, 2}, nil, 3)
	if err := pl.Check(p, 1, 3); err != nil {
		t.Fatal(err)
	}
	// GPU 0: 3 + 2 = 5, GPU 1: 3 + 4 = 7; mean 6, max 7.
	if g := GPULoads(loads, pl, p); !reflect.DeepEqual(g, [][]float64{{5, 7}}) {
		t.Fatalf("GPU loads %v", g)
	}
	if b := Balancedness(loads, pl, p); math.Abs(b-6.0/7) > 1e-15 {
		t.Fatalf("balancedness %v, want 6/7", b)
	}
	if !reflect.DeepEqual(pl.Log2Phy, [][][]int{{{0, 2}, {1}, {3}}}) || !reflect.DeepEqual(pl.LogCnt, [][]int{{2, 1, 1}}) {
		t.Fatalf("views %v %v", pl.Log2Phy, pl.LogCnt)
	}
	if got := pl.Log2PhyPadded(); !reflect.DeepEqual(got, [][][]int{{{0, 2}, {1, -1}, {3, -1}}}) {
		t.Fatalf("padded %v", got)
	}
	// No load at all is perfectly balanced.
	if b := Balancedness(Loads{{0, 0, 0}}, pl, p); b != 1 {
		t.Fatalf("zero loads: %v", b)
	}
}

func TestCheckCatchesBrokenPlacements(t *testing.T) {
	p := Problem{Replicas: 4, Groups: 1, Nodes: 1, GPUs: 2}
	good := func() *Placement {
		pl := newPlacement(1)
		pl.setLayer(0, []int{0, 1, 0, 2}, nil, 3)
		return pl
	}
	for _, c := range []struct {
		name   string
		mutate func(*Placement)
	}{
		{"expert out of range", func(pl *Placement) { pl.Phy2Log[0][1] = 7 }},
		{"expert without replica", func(pl *Placement) { pl.Phy2Log[0][1] = 2; pl.LogCnt[0] = []int{2, 0, 2} }},
		{"logcnt disagrees", func(pl *Placement) { pl.LogCnt[0][0] = 3 }},
		{"log2phy names a wrong slot", func(pl *Placement) { pl.Log2Phy[0][0][1] = 1 }},
		{"log2phy repeats", func(pl *Placement) { pl.Log2Phy[0][0][1] = 0 }},
		{"short layer", func(pl *Placement) { pl.Phy2Log[0] = pl.Phy2Log[0][:3] }},
	} {
		pl := good()
		c.mutate(pl)
		if err := pl.Check(p, 1, 3); err == nil {
			t.Errorf("%s: Check passed", c.name)
		}
	}
	if err := good().Check(p, 1, 3); err != nil {
		t.Fatal(err)
	}
}

func TestPlaceUnknownPolicy(t *testing.T) {
	if _, err := Place("lpt", Loads{{1}}, Problem{1, 1, 1, 1}); err == nil {
		t.Fatal("unknown policy accepted")
	}
}
