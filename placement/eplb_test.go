package placement

import (
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"testing"
)

// vectorFile is EPLB's published example with its expected outputs, in the format of
// shared/data/eplb_readme_vector.json.
type vectorFile struct {
	Kind     string      `json:"kind"`
	Weight   [][]float64 `json:"weight"`
	Replicas int         `json:"num_replicas"`
	Groups   int         `json:"num_groups"`
	Nodes    int         `json:"num_nodes"`
	GPUs     int         `json:"num_gpus"`
	Phy2Log  [][]int     `json:"phy2log"`
	Log2Phy  [][][]int   `json:"log2phy"` // EPLB's padded layout; absent in the README vector
	LogCnt   [][]int     `json:"logcnt"`
}

func (v vectorFile) problem() Problem { return Problem{v.Replicas, v.Groups, v.Nodes, v.GPUs} }

// TestEPLBReadmeVector is the acceptance test of BENCHMARKS.md §5: the eplb policy
// reproduces DeepSeek's published example exactly.
func TestEPLBReadmeVector(t *testing.T) {
	data, err := os.ReadFile("testdata/eplb_readme_vector.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectorFile
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	p := v.problem()
	if !p.Hierarchical() {
		t.Fatalf("the README example runs the hierarchical policy; %+v is not", p)
	}
	pl, err := EPLB(v.Weight, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pl.Phy2Log, v.Phy2Log) {
		t.Errorf("phy2log\n got %v\nwant %v", pl.Phy2Log, v.Phy2Log)
	}
	if !reflect.DeepEqual(pl.LogCnt, v.LogCnt) {
		t.Errorf("logcnt\n got %v\nwant %v", pl.LogCnt, v.LogCnt)
	}
	if err := pl.Check(p, len(v.Weight), len(v.Weight[0])); err != nil {
		t.Error(err)
	}
	// log2phy as the reference computes it from these (phyrank = order of creation).
	want := [][][]int{
		{{12, -1}, {15, 13}, {11, -1}, {6, -1}, {7, 5}, {0, 2}, {1, -1}, {3, -1}, {4, -1}, {9, -1}, {8, 10}, {14, -1}},
		{{13, -1}, {15, 11}, {8, -1}, {14, -1}, {9, -1}, {10, 12}, {2, 4}, {0, -1}, {6, 3}, {7, -1}, {1, -1}, {5, -1}},
	}
	if got := pl.Log2PhyPadded(); !reflect.DeepEqual(got, want) {
		t.Errorf("log2phy\n got %v\nwant %v", got, want)
	}
}

// TestEPLBTorchOracle compares against DeepSeek's eplb.py itself, run under PyTorch on
// random problems built to be full of ties (testdata/eplb_oracle.py made the files):
// phy2log, logcnt and the padded log2phy must all match exactly, hierarchical and
// global, integer and real-valued loads. The second file holds only problems EPLB
// answers with its global policy although their GPUs do not split evenly over the
// nodes or their experts over the groups (torch 2.11).
func TestEPLBTorchOracle(t *testing.T) {
	for _, name := range []string{"testdata/eplb_torch_oracle.json.gz", "testdata/eplb_torch_oracle_global.json.gz"} {
		t.Run(name, func(t *testing.T) { checkEPLBOracle(t, name) })
	}
}

func checkEPLBOracle(t *testing.T, name string) {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var oracle struct {
		Source string       `json:"source"`
		Cases  []vectorFile `json:"cases"`
	}
	if err := json.NewDecoder(zr).Decode(&oracle); err != nil {
		t.Fatal(err)
	}
	if len(oracle.Cases) < 100 {
		t.Fatalf("oracle has %d cases", len(oracle.Cases))
	}
	kinds := map[string]int{}
	hier := 0
	for i, c := range oracle.Cases {
		p := c.problem()
		pl, err := EPLB(c.Weight, p)
		if err != nil {
			t.Fatalf("case %d (%s, %+v): %v", i, c.Kind, p, err)
		}
		if !reflect.DeepEqual(pl.Phy2Log, c.Phy2Log) {
			t.Errorf("case %d (%s, %+v, %d experts): phy2log differs\n got %v\nwant %v", i, c.Kind, p, len(c.Weight[0]), pl.Phy2Log, c.Phy2Log)
			continue
		}
		if !reflect.DeepEqual(pl.LogCnt, c.LogCnt) {
			t.Errorf("case %d: logcnt differs", i)
		}
		if !reflect.DeepEqual(pl.Log2PhyPadded(), c.Log2Phy) {
			t.Errorf("case %d (%s, %+v): log2phy differs\n got %v\nwant %v", i, c.Kind, p, pl.Log2PhyPadded(), c.Log2Phy)
		}
		kinds[c.Kind]++
		if p.Hierarchical() {
			hier++
		}
	}
	t.Logf("%s: %d cases %v, %d hierarchical", oracle.Source, len(oracle.Cases), kinds, hier)
}

// For up to 16 items std::sort is an insertion sort: equal loads keep index order.
func TestTorchSortSmallIsStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 + rng.IntN(16)
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.IntN(4))
		}
		got, want := seqInts(n), seqInts(n)
		torchSortDesc(got, w)
		slices.SortStableFunc(want, func(a, b int) int { return cmpDesc(w[a], w[b]) })
		if !slices.Equal(got, want) {
			t.Fatalf("w=%v: got %v, stable %v", w, got, want)
		}
	}
}

// Beyond 16 items it is introsort: a permutation, sorted, ties in its own order.
func TestTorchSortLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	unstable := 0
	for range 500 {
		n := 17 + rng.IntN(400)
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.IntN(1 + rng.IntN(8)))
		}
		got := seqInts(n)
		torchSortDesc(got, w)
		checkSortedPerm(t, got, w)
		stable := seqInts(n)
		slices.SortStableFunc(stable, func(a, b int) int { return cmpDesc(w[a], w[b]) })
		if !slices.Equal(got, stable) {
			unstable++
		}
	}
	if unstable == 0 {
		t.Error("introsort never reordered ties; the emulation is not exercised")
	}
}

// The heap-sort fallback (depth limit exhausted) must sort too.
func TestTorchSortHeapFallback(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 200 {
		n := 2 + rng.IntN(200)
		w := make([]float32, n)
		for i := range w {
			w[i] = float32(rng.IntN(10))
		}
		got := seqInts(n)
		s := stdSorter{idx: got, w: w}
		s.heapSort(0, n)
		checkSortedPerm(t, got, w)
	}
}

func checkSortedPerm(t *testing.T, got []int, w []float32) {
	t.Helper()
	seen := make([]bool, len(w))
	for i, x := range got {
		if seen[x] {
			t.Fatalf("index %d twice", x)
		}
		seen[x] = true
		if i > 0 && w[got[i-1]] < w[x] {
			t.Fatalf("not descending at %d: %v", i, got)
		}
	}
}

func seqInts(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func cmpDesc(a, b float32) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// TestEPLBGlobalWhenNodesDoNotDivide is `dic place --loads testdata/global_loads_64.json
// --replicas 80 --groups 8 --nodes 3 --gpus 16`: 16 GPUs do not split over 3 nodes, yet
// 8 groups % 3 nodes != 0 sends EPLB to its global policy, which answers it
// (testdata/eplb_place.py made eplb_place_80_8_3_16.json with eplb.py under torch 2.11).
// eplb must return that answer, and default must accept the problem too.
func TestEPLBGlobalWhenNodesDoNotDivide(t *testing.T) {
	loads, _, err := ReadFile("testdata/global_loads_64.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/eplb_place_80_8_3_16.json")
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Phy2Log [][]int   `json:"phy2log"`
		LogCnt  [][]int   `json:"logcnt"`
		Log2Phy [][][]int `json:"log2phy"`
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	p := Problem{Replicas: 80, Groups: 8, Nodes: 3, GPUs: 16}
	pl, err := EPLB(loads, p)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pl.Phy2Log, want.Phy2Log) || !reflect.DeepEqual(pl.LogCnt, want.LogCnt) || !reflect.DeepEqual(pl.Log2PhyPadded(), want.Log2Phy) {
		t.Fatalf("eplb differs from eplb.py on %+v", p)
	}
	def, err := Default(loads, p)
	if err != nil {
		t.Fatal(err)
	}
	eb, db := Balancedness(loads, pl, p), Balancedness(loads, def, p)
	if db < eb {
		t.Errorf("default balancedness %.6f below eplb's %.6f", db, eb)
	}
	t.Logf("eplb balancedness %.6f, default %.6f", eb, db)
}
