package cpu

import (
	"fmt"
	"math"

	"deepinfer/ir"
)

// attnKernel is DeepSeek-V4's shared-KV multi-query attention with sinks (MODEL.md §1).
// The keys of a query at position p are the window (positions in (p-window, p]) and,
// for compressed layers, the compressed entries whose window closed at or before p:
// all of them for HCA, the indexer's top-k for CSA. K = V; the per-head sink logit
// joins the softmax denominator only.
type attnKernel struct {
	layer, heads, dim, window, ratio int
	scale                            float64
	sparse, decode                   bool
}

func newAttention(sparse, decode bool) factory {
	return func(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
		k := &attnKernel{layer: attrInt(a, "layer"), heads: attrInt(a, "heads"), dim: attrInt(a, "head_dim"),
			window: attrInt(a, "window"), ratio: attrInt(a, "ratio"), scale: attrFloat(a, "scale"),
			sparse: sparse, decode: decode}
		if sparse && k.ratio < 1 {
			return nil, fmt.Errorf("sparse attention needs a positive ratio")
		}
		return k, nil
	}
}

// keySet lists a sequence's candidate keys: window rows first (with positions), then
// compressed entries.
type keySet struct {
	rows  [][]float32
	pos   []int32 // window keys: token position; compressed: -1
	entry []int32 // compressed: entry index; window keys: -1
}

func (k *attnKernel) Run(s *Step, a, r []Tensor) error {
	q, kv, pos, sink, out := a[0].F32, a[1].F32, a[2].I32, a[3].F32, r[0].F32
	var idx []int32
	topk := 0
	if k.sparse && len(a) == 5 {
		idx, topk = a[4].I32, a[4].Shape[1]
	}
	hd := k.heads * k.dim
	for si := range s.Seqs {
		seq := &s.Seqs[si]
		if k.layer >= len(seq.State.Layers) {
			return fmt.Errorf("layer %d is missing from the sequence state", k.layer)
		}
		if k.decode && seq.N != 1 {
			return fmt.Errorf("decode attention got %d tokens for one sequence", seq.N)
		}
		st := &seq.State.Layers[k.layer]
		ring := &st.Ring
		var ks keySet
		for i := 0; i < ring.Len(); i++ {
			row, p := ring.Row(i)
			ks.rows, ks.pos, ks.entry = append(ks.rows, row), append(ks.pos, p), append(ks.entry, -1)
		}
		for j := 0; j < seq.N; j++ {
			t := seq.Row + j
			ks.rows, ks.pos, ks.entry = append(ks.rows, kv[t*k.dim:(t+1)*k.dim]), append(ks.pos, pos[t]), append(ks.entry, -1)
		}
		nWindow := len(ks.rows)
		if k.sparse {
			if len(st.Caches) == 0 {
				return fmt.Errorf("layer %d has no compressed cache", k.layer)
			}
			c := &st.Caches[0]
			for e := 0; e < c.N; e++ {
				ks.rows, ks.pos, ks.entry = append(ks.rows, c.Entry(e)), append(ks.pos, -1), append(ks.entry, int32(e))
			}
		}
		parallelFor(seq.N*k.heads, len(ks.rows)*k.dim*2, func(lo, hi int) {
			logits := make([]float64, len(ks.rows))
			use := make([]bool, len(ks.rows))
			acc := make([]float64, k.dim)
			for job := lo; job < hi; job++ {
				t, h := seq.Row+job/k.heads, job%k.heads
				p := pos[t]
				k.visible(ks, nWindow, p, idx, t, topk, use)
				qh := q[t*hd+h*k.dim : t*hd+(h+1)*k.dim]
				mx := float64(sink[h])
				for i, row := range ks.rows {
					if !use[i] {
						continue
					}
					var dot float64
					for d, v := range row {
						dot += float64(qh[d]) * float64(v)
					}
					logits[i] = dot * k.scale
					mx = max(mx, logits[i])
				}
				den := math.Exp(float64(sink[h]) - mx)
				for d := range acc {
					acc[d] = 0
				}
				for i, row := range ks.rows {
					if !use[i] {
						continue
					}
					e := math.Exp(logits[i] - mx)
					den += e
					for d, v := range row {
						acc[d] += e * float64(v)
					}
				}
				o := out[t*hd+h*k.dim : t*hd+(h+1)*k.dim]
				for d := range o {
					o[d] = float32(acc[d] / den)
				}
			}
		})
		ring.Push(kv[seq.Row*k.dim:(seq.Row+seq.N)*k.dim], seq.Pos)
	}
	return nil
}

// visible marks the keys query t (at position p) attends to.
func (k *attnKernel) visible(ks keySet, nWindow int, p int32, idx []int32, t, topk int, use []bool) {
	for i := 0; i < nWindow; i++ {
		kp := ks.pos[i]
		use[i] = k.decode || (kp <= p && kp > p-int32(k.window))
	}
	if nWindow == len(use) {
		return
	}
	comp := use[nWindow:]
	if idx != nil {
		for i := range comp {
			comp[i] = false
		}
		for _, e := range idx[t*topk : (t+1)*topk] {
			if e >= 0 && int(e) < len(comp) {
				comp[e] = true
			}
		}
		return
	}
	closed := int((p + 1) / int32(k.ratio))
	for i := range comp {
		comp[i] = k.decode || i < closed
	}
}
