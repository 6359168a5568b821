package cpu

import (
	"container/heap"

	"deepinfer/ir"
)

// indexKernel is the lightning indexer's selection (MODEL.md §1): query t scores every
// indexer entry s whose window closed at or before its position,
//
//	score(t,s) = scale · Σ_h w_{t,h} · ReLU(q_{t,h} · k_s),
//
// and keeps the top k. Slots past the number of visible entries hold -1.
type indexKernel struct {
	layer, ratio, topk, heads, dim int
	scale                          float64
}

func newIndexTopK(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	return &indexKernel{layer: attrInt(a, "layer"), ratio: attrInt(a, "ratio"), topk: attrInt(a, "topk"),
		heads: attrInt(a, "heads"), dim: attrInt(a, "head_dim"), scale: attrFloat(a, "scale")}, nil
}

type scored struct {
	idx   int32
	score float64
}

// minHeap keeps the k best scores seen so far, worst on top.
type minHeap []scored

func (h minHeap) Len() int { return len(h) }
func (h minHeap) Less(i, j int) bool {
	if h[i].score != h[j].score {
		return h[i].score < h[j].score
	}
	return h[i].idx > h[j].idx
}
func (h minHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(x any)   { *h = append(*h, x.(scored)) }
func (h *minHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (k *indexKernel) Run(s *Step, a, r []Tensor) error {
	q, w, pos, out := a[0].F32, a[1].F32, a[2].I32, r[0].I32
	hd := k.heads * k.dim
	for si := range s.Seqs {
		seq := &s.Seqs[si]
		c, err := stateCache(seq, k.layer, 1)
		if err != nil {
			return err
		}
		parallelFor(seq.N, c.N*hd, func(lo, hi int) {
			h := make(minHeap, 0, k.topk+1)
			for t := seq.Row + lo; t < seq.Row+hi; t++ {
				visible := min(c.N, (int(pos[t])+1)/k.ratio)
				h = h[:0]
				qt, wt := q[t*hd:(t+1)*hd], w[t*k.heads:(t+1)*k.heads]
				for e := 0; e < visible; e++ {
					key := c.Entry(e)
					var sc float64
					for hh := 0; hh < k.heads; hh++ {
						qh := qt[hh*k.dim : (hh+1)*k.dim]
						var dot float64
						for i, v := range key {
							dot += float64(qh[i]) * float64(v)
						}
						if dot > 0 {
							sc += float64(wt[hh]) * dot
						}
					}
					item := scored{int32(e), sc * k.scale}
					if len(h) < k.topk {
						heap.Push(&h, item)
					} else if item.score > h[0].score || (item.score == h[0].score && item.idx < h[0].idx) {
						h[0] = item
						heap.Fix(&h, 0)
					}
				}
				row := out[t*k.topk : (t+1)*k.topk]
				for i := range row {
					row[i] = -1
				}
				for i := len(h) - 1; i >= 0; i-- {
					row[i] = heap.Pop(&h).(scored).idx
				}
			}
		})
	}
	return nil
}
