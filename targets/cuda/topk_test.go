package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"deepinfer/targets/cpu"
)

// topkCase is a row shape and fill for the selection tests.
type topkCase struct {
	name            string
	n, k, lim, rows int
	fill            func(i, n int) float32
}

// topkCases: rows full of ties (bf16-rounded scores, a few distinct values, NaNs, ±0,
// ±inf, rows mostly -inf, sorted rows) at the sizes of V4.1-Flash's rows at 4,096 and
// 32,768 tokens, with rng's values.
func topkCases(rng *rand.Rand) []topkCase {
	bf16 := func(int, int) float32 {
		return math.Float32frombits(math.Float32bits(float32(4+rng.NormFloat64())) & 0xffff0000)
	}
	few := func(int, int) float32 { return float32(rng.IntN(5)) }
	specials := func(int, int) float32 {
		switch rng.IntN(6) {
		case 0:
			return float32(math.NaN())
		case 1:
			return float32(math.Inf(-1))
		case 2:
			return float32(math.Copysign(0, -1))
		case 3:
			return 0
		case 4:
			return float32(math.Inf(1))
		}
		return float32(rng.IntN(3))
	}
	negInf := func(int, int) float32 {
		if rng.IntN(4) != 0 {
			return float32(math.Inf(-1))
		}
		return float32(rng.IntN(50))
	}
	ascending := func(i, n int) float32 { return float32(i / 3) }
	return []topkCase{
		{"bf16", 1, 1, 1, 3, bf16},
		{"few", 70, 30, 70, 5, few},
		{"bf16 ratio 2 at 4096", 2048, 512, 2048, 4, bf16},
		{"bf16 ratio 1 at 4096", 4096, 512, 4090, 4, bf16},
		{"few 4096", 4096, 512, 4096, 2, few},
		{"specials", 5000, 1200, 5000, 2, specials},
		{"restricted", 8192, 2048, 8192, 2, negInf},
		{"ascending", 3000, 2999, 3000, 1, ascending},
		{"bf16 ratio 2 at 32768", 16384, 512, 16384, 2, bf16},
		{"bf16 ratio 1 at 32768 (heap)", 32768, 512, 32768, 2, bf16},
		{"specials heap", 9000, 100, 9000, 2, specials},
		{"few heap past shared memory", 70000, 1090, 70000, 1, few},
		{"past the masks", 33000, 600, 33000, 1, bf16},
		{"k past n", 9, 20, 9, 2, few},
	}
}

// topkPairs fills c.rows rows of (value, position) pairs, and the values by row.
func topkPairs(c topkCase) (vals [][]float32, pairs []float32) {
	vals = make([][]float32, c.rows)
	pairs = make([]float32, 2*c.rows*c.n)
	for r := range vals {
		vals[r] = make([]float32, c.n)
		for i := range vals[r] {
			v := c.fill(i, c.n)
			vals[r][i] = v
			pairs[2*(r*c.n+i)] = v
			pairs[2*(r*c.n+i)+1] = math.Float32frombits(uint32(i))
		}
	}
	return vals, pairs
}

// runTopKProbe runs a csa_topk_probe kernel over pairs; it returns the pairs after and
// the kept lists.
func runTopKProbe(k *emuKernels, kernel string, c topkCase, pairs []float32) (gq, gout []float32) {
	q := put(k, pairs)
	kept := put(k, make([]float32, (c.rows*c.n+3)/4))
	out := put(k, make([]float32, max(1, c.rows*c.k)))
	k.run(kernel, func(a *ArgBuf) {
		a.P(q)
		a.P(kept)
		a.P(out)
		a.I(int64(c.rows))
		a.I(int64(c.n))
		a.I(int64(c.k))
		a.I(int64(c.lim))
	})
	return k.get(q, 2*c.rows*c.n), k.get(out, c.rows*c.k)
}

// TestTorchTopKBlock runs csa_topk_probe (V4.1's indexer selection as
// csa_index_select runs it: torch.topk's libstdc++ order, then the kept keys in
// position order) against the cpu target's torchTopK (checked against torch itself by
// TestTorchTopKProbe) on rows full of ties: bf16-rounded scores, a few distinct values,
// NaNs, ±0, ±inf, rows mostly -inf (restricted to candidate blocks), sorted rows, and
// the sizes of V4.1-Flash's rows at 4,096 and 32,768 tokens (introselect, and the heap
// select at k·64 ≤ n). On a GPU the rows run on launch blocks (csa_topk_blk: the
// partitions and the heap select's scan in parallel); the emulated device runs the
// serial loop. The first k pairs must be torchTopK's list in its order, and the kept
// list its keys below lim, sorted; csa_topk_probe_u (the heap select's elements left
// unsorted, csa_index_select's form) must give the same kept list.
func TestTorchTopKBlock(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range topkCases(rng) {
		t.Run(fmt.Sprintf("%s n%d k%d", c.name, c.n, c.k), func(t *testing.T) {
			vals, pairs := topkPairs(c)
			probe := func(kernel string) (gq, gout []float32) { return runTopKProbe(k, kernel, c, pairs) }
			gq, gout := probe("csa_topk_probe")
			// csa_topk_probe_u: the heap select left unsorted, as csa_index_select runs
			// it; only its kept list is compared
			_, uout := probe("csa_topk_probe_u")
			for r := range vals {
				want := cpu.TorchTopK(vals[r], c.k)
				for j, w := range want {
					if got := int(math.Float32bits(gq[2*(r*c.n+j)+1])); got != w {
						t.Fatalf("row %d: place %d holds key %d, torch.topk's %d", r, j, got, w)
					}
				}
				list := sortedCopy(want)
				checkKeptList(t, "", r, gout, c, list)
				checkKeptList(t, "unsorted probe's ", r, uout, c, list)
			}
		})
	}
}

// TestLowTieTopK runs csa_topk_probe_t, V4.1's indexer selection under
// DEEPINFER_INDEX_TIES=low (a radix select on the block's warps on a GPU, the serial
// passes on the emulated device; csa41.cu csa_lowtie_kept), against the cpu target's
// lowTieTopK on TestTorchTopKBlock's rows full of ties and on rows of distinct values,
// where its kept set must also be torch.topk's on the cpu (cpu.TorchTopK): the two rules
// differ only in which equals of the k-th value they keep. Its kept list (positions below
// lim in order, -1 past them) must be lowTieTopK's, and the pairs must not move.
func TestLowTieTopK(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(23, 24))
	distinct := func(int, int) float32 { return float32(rng.NormFloat64()) }
	cases := append(topkCases(rng),
		topkCase{"distinct at 32768", 32768, 512, 32768, 2, distinct},
		topkCase{"distinct, lim < n", 5000, 700, 4000, 3, distinct},
		topkCase{"k of n", 300, 300, 300, 2, distinct})
	sawTie := false
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s n%d k%d", c.name, c.n, c.k), func(t *testing.T) {
			vals, pairs := topkPairs(c)
			gq, gout := runTopKProbe(k, "csa_topk_probe_t", c, pairs)
			for i := range pairs {
				if math.Float32bits(gq[i]) != math.Float32bits(pairs[i]) {
					t.Fatalf("the pairs changed at %d", i)
				}
			}
			for r := range vals {
				want := cpu.LowTieTopK(vals[r], c.k)
				list := slices.Clone(want)
				slices.Sort(list)
				ties := !slices.Equal(list, sortedCopy(cpu.TorchTopK(vals[r], c.k)))
				sawTie = sawTie || ties
				if strings.HasPrefix(c.name, "distinct") && ties {
					t.Fatalf("row %d: distinct values, yet the rule's set is not torch.topk's", r)
				}
				checkKeptList(t, "", r, gout, c, list)
			}
		})
	}
	if !sawTie {
		t.Error("no row had ties at the cut: the tie rule went untested")
	}
}

// checkKeptList: row r's kept list in gout (c.k slots a row, as int32 bits) must be the
// sorted keys list below c.lim, then -1.
func checkKeptList(t *testing.T, what string, r int, gout []float32, c topkCase, list []int) {
	t.Helper()
	for j := range c.k {
		w := -1
		if j < len(list) && list[j] < c.lim {
			w = list[j]
		}
		if got := int(int32(math.Float32bits(gout[r*c.k+j]))); got != w {
			t.Fatalf("row %d: %skept list slot %d is %d, want %d", r, what, j, got, w)
		}
	}
}

func sortedCopy(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
