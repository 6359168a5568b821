package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestIndexScoreTCSameScores runs V4.1's index scores at V4.1-Flash's shape (32 heads of
// 128 values, FP4 index keys with UE8M0 scales in groups of 32, rows of thousands of
// keys) on csa_index_score_tc and on csa_index_score_words and wants every score and key
// bit for bit: queries as V4.1's are (FP4 values, a power of two a group: the sums exact;
// every key settled by the tensor cores), with the scales far apart (sums that round) and
// as bf16 values — with the bounds taken from the operands nearly every key of these two
// has some dot computed in the cpu's order (run 42a on the H200: 13,467 of 13,500 and 8,999
// of 9,000), so on a GPU they check that path. On a GPU this is the tensor
// cores' check at the real shape (the fixtures' indexers are 4 heads of 64 and 2 of 32);
// the emulated device runs the item loop for both, so there it checks the arguments.
// TestTilesDeviceCodeOnHostFibers checks the device code on host fibers with a tensor
// core that truncates.
func TestIndexScoreTCSameScores(t *testing.T) {
	k := newKernels(t)
	const H, D, G = 32, 128, 32
	const rowBytes = D/2 + D/G
	for _, c := range []struct {
		name       string
		rows, pos  int
		qexp, kexp [2]int  // the queries' and keys' scale exponents: [lo, hi)
		bf16       bool    // queries rounded normals, not FP4 values
		settled    float64 // on a GPU, the least share of keys whose every dot the tensor cores settle (runs 41-42: all of V4.1's kind)
		cpuOrder   bool    // on a GPU, some key has a dot in the cpu's order (run 42a: nearly all)
	}{
		{"FP4 queries", 4, 6000, [2]int{-1, 2}, [2]int{-6, -3}, false, 1, false},
		{"FP4 queries, scales far apart", 3, 4500, [2]int{-8, 4}, [2]int{-14, 6}, false, 0, true},
		{"bf16 queries", 3, 3000, [2]int{0, 1}, [2]int{-8, -2}, true, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.pos)))
			ecap := c.pos + 1
			e2m1 := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
			q := make([]float32, c.rows*H*D)
			for i := 0; i < len(q); i += G {
				sc := float32(math.Ldexp(1, c.qexp[0]+rng.IntN(c.qexp[1]-c.qexp[0])))
				for j := i; j < i+G; j++ {
					if c.bf16 {
						q[j] = math.Float32frombits(math.Float32bits(float32(rng.NormFloat64())*sc) &^ 0xffff)
						continue
					}
					q[j] = e2m1[rng.IntN(8)] * sc
					if rng.IntN(2) == 0 {
						q[j] = -q[j]
					}
				}
			}
			w := randRow(rng, c.rows*H)
			seqs := make([]int64, 0, 5*c.rows)
			var states []devptr
			for r := range c.rows {
				st := make([]byte, ecap*rowBytes)
				for e := range ecap {
					row := st[e*rowBytes:]
					for i := range D / 2 {
						row[i] = byte(rng.IntN(256))
					}
					for i := range D / G {
						row[D/2+i] = byte(127 + c.kexp[0] + rng.IntN(c.kexp[1]-c.kexp[0]))
					}
				}
				p := putBytes(k, st)
				states = append(states, p)
				// (row, tokens, position, state, flags): a decode row at position pos - r
				seqs = append(seqs, int64(r), 1, int64(c.pos-r), int64(p), 1)
			}
			qd, wd, sd := put(k, q), put(k, w), put(k, seqs)
			errw := put(k, []int64{0})
			var paths []byte
			run := func(kernel string) []float32 {
				work := put(k, make([]float32, 2*c.rows*ecap))
				kept := put(k, make([]float32, (c.rows*ecap+3)/4))
				defer func() { paths = k.getBytes(kept, c.rows*ecap) }()
				k.run(kernel, func(a *ArgBuf) {
					a.P(qd)
					a.P(wd)
					a.P(0) // cand_in
					a.P(0) // idx_out
					a.P(0) // cand_out
					a.P(sd)
					a.I(int64(c.rows)) // nseq
					a.I(int64(c.rows))
					a.I(0) // keep
					a.I(0) // layer
					a.I(0) // source
					a.I(1) // ratio
					a.I(512)
					a.I(H)
					a.I(D)
					a.F(float64(float32(1 / math.Sqrt(D))))
					a.I(0) // cand_blocks
					a.I(0) // cand_size
					a.I(0) // publish
					a.P(work)
					a.P(0) // bwork
					a.I(int64(ecap))
					a.I(0) // nbcap
					a.I(2) // FP4 + UE8M0
					a.I(G)
					a.I(rowBytes)
					a.I(1) // owners: layer 0, ratio 1, offset 0
					for i := range 3 * csaMaxOwners {
						if i == 1 {
							a.I(1)
						} else {
							a.I(0)
						}
					}
					a.P(errw)
					a.P(0) // cmark
					a.P(kept)
					a.I(0) // lowtie
				})
				return k.get(work, 2*c.rows*ecap)
			}
			want, got := run("csa_index_score_words"), run("csa_index_score_tc_probe")
			if e := k.getI64(errw, 1)[0]; e != 0 {
				t.Fatalf("error word %d", e)
			}
			diff, scored := 0, 0
			for i := 0; i < len(want); i += 2 {
				if math.Float32bits(want[i+1]) != uint32(i/2%ecap) {
					continue // (a key past its row's)
				}
				scored++
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) || math.Float32bits(got[i+1]) != math.Float32bits(want[i+1]) {
					if diff < 5 {
						t.Errorf("row %d key %d: %v (key %d), csa_index_score_words %v (key %d)", i/2/ecap, i/2%ecap,
							got[i], math.Float32bits(got[i+1]), want[i], math.Float32bits(want[i+1]))
					}
					diff++
				}
			}
			if scored < c.rows*(c.pos-c.rows) {
				t.Fatalf("%d keys scored, want at least %d", scored, c.rows*(c.pos-c.rows))
			}
			if diff > 0 {
				t.Fatalf("%d of %d scores differ", diff, scored)
			}
			if k.where == nil {
				t.Logf("%d scores the same bit for bit (the emulated device: the item loop for both)", scored)
				return
			}
			// the probe's paths: keys whose every dot the tensor cores settled, keys with
			// some dot in the cpu's order, keys by the item loop
			var fast, slow, item int
			for r := range c.rows {
				for e := range c.pos - r + 1 {
					switch p := paths[r*ecap+e]; {
					case p == 255:
						item++
					case p > 0:
						slow++
					default:
						fast++
					}
				}
			}
			msg := fmt.Sprintf("%d scores the same bit for bit; keys settled by the tensor cores %d, with some dot in the cpu's order %d, by the item loop %d",
				scored, fast, slow, item)
			t.Log(msg)
			if float64(fast) < c.settled*float64(fast+slow+item) {
				t.Errorf("fewer than %.0f%% of the keys settled by the tensor cores", 100*c.settled)
			}
			if c.cpuOrder && slow == 0 {
				t.Errorf("no key had a dot in the cpu's order: the case does not check that path")
			}
		})
	}
}
