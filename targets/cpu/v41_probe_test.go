package cpu

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"deepinfer/internal/probedata"
)

// The tests in this file check the V4.1 numerics emulations against what PyTorch did on
// the reference's machine type (16 threads, AVX-512, MKL 2024.2), recorded by
// tools/v41/probe_*.py and condensed into testdata by tools/v41/probesum.

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// TestProbeM: fp32Linear reproduces torch's F.linear bit for bit for every probed shape
// and row count except the ones fp32Linear's comment names, and those still differ.
func TestProbeM(t *testing.T) {
	var f struct {
		Sums map[string]string `json:"sha256_128"`
	}
	readJSON(t, "testdata/v41_probe_m.json", &f)
	if len(f.Sums) != 606 {
		t.Fatalf("%d probes, want the 606 of probe_gemm.py", len(f.Sums))
	}
	known := map[string]bool{"1024.24.16": true, "1024.24.129": true, "1024.24.130": true}
	inputs := map[[2]int][2][]float32{}
	var differ []string
	for key, want := range f.Sums {
		var K, N, M int
		if _, err := fmt.Sscanf(strings.ReplaceAll(key, ".", " "), "%d %d %d", &K, &N, &M); err != nil {
			t.Fatalf("key %q", key)
		}
		in, ok := inputs[[2]int{K, N}]
		if !ok {
			in = [2][]float32{probedata.Matrix(130, K, K+N, "x"), probedata.Matrix(N, K, K*3+N, "w")}
			inputs[[2]int{K, N}] = in
		}
		y := make([]float32, M*N)
		fp32Linear(M, K, N, in[0][:M*K], in[1], y)
		if probedata.Digest(y) != want {
			differ = append(differ, key)
			if !known[key] {
				t.Errorf("K=%d N=%d M=%d (%s order): differs from torch", K, N, M, []string{"seq", "gemv", "small", "split2", "split4"}[mklOrder(M, K, N)])
			}
		}
	}
	sort.Strings(differ)
	for k := range known {
		if !slices.Contains(differ, k) {
			t.Errorf("%s now matches torch: update fp32Linear's comment and this list", k)
		}
	}
	t.Logf("%d probes, %d reproduced; differing as documented: %v", len(f.Sums), len(f.Sums)-len(differ), differ)
}

// TestTorchTopKProbe: every top-k the V4.1 fixtures ask for (the indexers' scores and the
// candidate blocks, ties and -inf included) keeps the same set torch.topk kept.
func TestTorchTopKProbe(t *testing.T) {
	fh, err := os.Open("testdata/v41_torch_topk.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Torch string `json:"torch"`
		Cases []struct {
			V   []string `json:"v"`
			K   int      `json:"k"`
			F32 []int    `json:"f32"`
		} `json:"cases"`
	}
	if err := json.NewDecoder(zr).Decode(&f); err != nil {
		t.Fatal(err)
	}
	if len(f.Cases) < 1000 {
		t.Fatalf("%d cases", len(f.Cases))
	}
	ties := 0
	for i, c := range f.Cases {
		v := make([]float32, len(c.V))
		seen := map[float32]int{}
		for j, s := range c.V {
			x, err := strconv.ParseFloat(s, 32)
			if err != nil {
				t.Fatalf("case %d: %v", i, err)
			}
			v[j] = float32(x)
			seen[v[j]]++
		}
		if len(seen) < len(v) {
			ties++
		}
		got := torchTopK(v, c.K)
		slices.Sort(got)
		want := slices.Clone(c.F32)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("case %d (n=%d, k=%d): kept %v, torch %v", i, len(v), c.K, got, want)
		}
	}
	t.Logf("torch %s: %d top-k calls (%d with ties) keep torch's sets", f.Torch, len(f.Cases), ties)
}

// TestElementwiseProbe: sigmoidAt is torch.sigmoid bit for bit (its vector body and
// scalar tail), and torch.exp (MKL VML) differs from the correctly rounded exp the
// emulation uses only for inputs whose exact exp lies within 0.05 ulp of a rounding
// midpoint (docs/v41.md).
func TestElementwiseProbe(t *testing.T) {
	var f struct {
		Sig map[string]string `json:"sigmoid_sha256_128"`
		Exp map[string][]struct {
			I    int    `json:"i"`
			Bits uint32 `json:"bits"`
		} `json:"exp_not_correctly_rounded"`
	}
	readJSON(t, "testdata/v41_probe_ew.json", &f)
	differ, total := 0, 0
	for n := 1; n <= 200; n++ {
		x := probedata.Elementwise(n)
		y := make([]float32, n)
		for i := range x {
			y[i] = sigmoidAt(x[i], i, n)
		}
		if probedata.Digest(y) != f.Sig[strconv.Itoa(n)] {
			t.Errorf("sigmoid over %d elements differs from torch", n)
		}
		total += n
		for _, d := range f.Exp[strconv.Itoa(n)] {
			differ++
			exact := math.Exp(float64(x[d.I]))
			cr := expScalar(x[d.I])
			lo, hi := math.Nextafter32(cr, float32(math.Inf(-1))), math.Nextafter32(cr, float32(math.Inf(1)))
			ulp := float64(hi-lo) / 2
			if dist := math.Abs(exact-float64(cr)) / ulp; dist < 0.45 {
				t.Errorf("exp(%g): torch %g, correctly rounded %g, %.3f ulp from it — not near a midpoint", x[d.I], math.Float32frombits(d.Bits), cr, dist)
			}
		}
	}
	if differ == 0 || differ > total/50 {
		t.Errorf("torch.exp differs from the correctly rounded exp on %d of %d inputs", differ, total)
	}
	t.Logf("sigmoid: 200 lengths identical; exp: %d of %d inputs differ from correctly rounded, all near a midpoint", differ, total)
}
