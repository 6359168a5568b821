package cuda

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestMoEGroupChunks: moe_count, moe_count_sum and moe_group (a work item per chunk of
// moeChunk slots and expert) against a count and a stable grouping done here: each
// expert's count, its offset (the counts of the experts before it) and its slots in
// slot order, for slot counts below, at and past a chunk (experts with no slots, with
// slots in every chunk), and a bad id flagged as error 202.
func TestMoEGroupChunks(t *testing.T) {
	k := newKernels(t)
	rng := rand.New(rand.NewPCG(7, 3))
	for _, c := range []struct{ slots, E int }{{1, 4}, {255, 37}, {256, 8}, {257, 300}, {1000, 37}, {3 * moeChunk, 1}} {
		t.Run(fmt.Sprintf("%d slots, %d experts", c.slots, c.E), func(t *testing.T) {
			ids := make([]int32, c.slots)
			for i := range ids {
				ids[i] = int32(rng.IntN(c.E))
				if c.E > 4 && i%3 == 0 {
					ids[i] = int32(c.E / 2) // one expert with many slots in every chunk
				}
			}
			nch := (c.slots + moeChunk - 1) / moeChunk
			idsF := make([]float32, c.slots)
			for i, v := range ids {
				idsF[i] = math.Float32frombits(uint32(v))
			}
			idp := put(k, idsF)
			counts, off, list := put(k, make([]int64, c.E)), put(k, make([]int64, c.E)), put(k, make([]float32, c.slots))
			part, errp := put(k, make([]int64, c.E*nch)), put(k, make([]int64, 1))
			count := func(a *ArgBuf) {
				a.P(idp)
				a.I(int64(c.slots))
				a.I(int64(c.E))
				a.P(counts)
				a.P(errp)
				a.P(part)
				a.P(off)
			}
			k.run("moe_count", count)
			k.run("moe_count_sum", count)
			k.run("moe_group", func(a *ArgBuf) {
				a.P(idp)
				a.P(counts)
				a.P(off)
				a.P(list)
				a.I(int64(c.slots))
				a.I(int64(c.E))
				a.P(part)
			})
			gc, goff, gl := k.getI64(counts, c.E), k.getI64(off, c.E), k.get(list, c.slots)
			var want []int32
			o := int64(0)
			for e := 0; e < c.E; e++ {
				n := int64(0)
				for s, v := range ids {
					if int(v) == e {
						n++
						want = append(want, int32(s))
					}
				}
				if gc[e] != n || goff[e] != o {
					t.Fatalf("expert %d: count %d offset %d, want %d and %d", e, gc[e], goff[e], n, o)
				}
				o += n
			}
			for i, w := range want {
				if got := int32(math.Float32bits(gl[i])); got != w {
					t.Fatalf("list[%d] = %d, want %d", i, got, w)
				}
			}
			if e := k.getI64(errp, 1)[0]; e != 0 {
				t.Fatalf("error %d on good ids", e)
			}
			// a bad id in the last chunk
			idsF[c.slots-1] = math.Float32frombits(uint32(c.E))
			k.run("moe_count", func(a *ArgBuf) {
				a.P(put(k, idsF))
				a.I(int64(c.slots))
				a.I(int64(c.E))
				a.P(counts)
				a.P(errp)
				a.P(part)
				a.P(off)
			})
			if e := k.getI64(errp, 1)[0]; e != 202 {
				t.Fatalf("error %d on a bad id, want 202", e)
			}
		})
	}
}
