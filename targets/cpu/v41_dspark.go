package cpu

import (
	"fmt"
	"math"

	"deepinfer/ir"
)

// DSpark (MODEL.md §2): the drafter's stages keep a window ring of K=V rows projected
// from the main model's hidden state, written at every prefill and decode step
// (dspark_push); a draft block attends to that ring and to itself, not causally
// (dspark_attention); the last stage's head adds the Markov head's bias of the previous
// token, picks each draft greedily, and scores a confidence per row (dspark_head).

func newDSparkPush(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	layer, keep := attrInt(a, "layer"), attrInt(a, "keep")
	return kfunc(func(s *Step, in, r []Tensor) error {
		d := in[0].Cols()
		for _, v := range views(s, keep) {
			if layer >= len(v.st.Layers) {
				return fmt.Errorf("DSpark stage %d is missing from the sequence state", layer)
			}
			v.st.Layers[layer].Ring.Push(in[0].F32[v.row*d:(v.row+v.n)*d], v.pos)
		}
		return nil
	}), nil
}

type dsparkAttention struct {
	layer, heads, dim, window, block int
	scale                            float32
}

func newDSparkAttention(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	return &dsparkAttention{layer: attrInt(a, "layer"), heads: attrInt(a, "heads"), dim: attrInt(a, "head_dim"),
		window: attrInt(a, "window"), block: attrInt(a, "block"), scale: float32(attrFloat(a, "scale"))}, nil
}

// Run: a sequence's block starts at the position after its last decoded token p; its
// keys are the ring's slots 0..min(window, p+1)-1 in slot order (slot j holds the
// latest position ≡ j mod window), as get_dspark_topk_idxs lists them, then the block.
func (k *dsparkAttention) Run(s *Step, a, r []Tensor) error {
	q, kv, sink, out := a[0].F32, a[1].F32, a[3].F32, r[0].F32
	hd := k.heads * k.dim
	for _, v := range views(s, 0) {
		if k.layer >= len(v.st.Layers) {
			return fmt.Errorf("DSpark stage %d is missing from the sequence state", k.layer)
		}
		rr := newRingReader(&v.st.Layers[k.layer].Ring)
		p := v.pos - 1
		if p < 0 {
			return fmt.Errorf("a draft block needs a decoded token before it")
		}
		var keys [][]float32
		for j := 0; j < min(k.window, p+1); j++ {
			row := rr.at(int32(p - (p-j)%k.window))
			if row == nil {
				return fmt.Errorf("DSpark stage %d's window ring lacks position %d", k.layer, p-(p-j)%k.window)
			}
			keys = append(keys, row)
		}
		for i := 0; i < v.n; i++ {
			keys = append(keys, kv[(v.row+i)*k.dim:(v.row+i+1)*k.dim])
		}
		sc := make([]float32, k.block)
		acc := make([]float32, k.dim)
		for i := 0; i < v.n; i++ {
			t := v.row + i
			blockSoftmax(q[t*hd:(t+1)*hd], keys, sink, k.heads, k.dim, k.block, k.scale, out[t*hd:(t+1)*hd], sc, acc)
		}
	}
	return nil
}

type dsparkHead struct {
	block int
}

func newDSparkHead(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	return &dsparkHead{block: attrInt(a, "block")}, nil
}

// Run is DSparkBlock.forward_head: logits = head·hn (fp32); row i adds the Markov head
// of the block's token i (the anchor, then each greedy draft) and drafts argmax; the
// confidence of row i is conf·[x_i, markov_embed(token i)].
func (k *dsparkHead) Run(s *Step, a, r []Tensor) error {
	hn, x, tokens := a[0].F32, a[1].F32, a[2].I32
	head, membed, mhead, conf := a[3].F32, a[4].F32, a[5].F32, a[6].F32
	logits, ids, confOut := r[0].F32, r[1].I32, r[2].F32
	t, D := a[0].Rows(), a[0].Cols()
	V, R := a[3].Rows(), a[4].Cols()
	if t%k.block != 0 {
		return fmt.Errorf("%d draft rows are not whole blocks of %d", t, k.block)
	}
	gemmRows(t, V, D, hn, head, logits)
	bias := make([]float32, V)
	for b := 0; b < t; b += k.block {
		tok := tokens[b]
		for i := 0; i < k.block; i++ {
			if tok < 0 || int(tok) >= V {
				return fmt.Errorf("draft token %d is outside the vocabulary", tok)
			}
			emb := membed[int(tok)*R : (int(tok)+1)*R]
			gemmNT(1, V, R, emb, R, mhead, R, bias, V)
			row := logits[(b+i)*V : (b+i+1)*V]
			best := 0
			for j := range row {
				row[j] += bias[j]
				if row[j] > row[best] || (math.IsNaN(float64(row[j])) && !math.IsNaN(float64(row[best]))) {
					best = j
				}
			}
			var c float64
			xi := x[(b+i)*D : (b+i+1)*D]
			for j, v := range xi {
				c += float64(v) * float64(conf[j])
			}
			for j, v := range emb {
				c += float64(v) * float64(conf[D+j])
			}
			confOut[b+i] = float32(c)
			ids[b+i] = int32(best)
			tok = int32(best)
		}
	}
	return nil
}
