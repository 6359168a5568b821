package cpu

import (
	"fmt"
	"math"

	"deepinfer/ir"
	"deepinfer/kvlayout"
	"deepinfer/quant"
	"deepinfer/targets/cpu/kvstate"
)

// blockSoftmax is the V4.1 reference's sparse attention kernel for one query: the keys
// are a list (nil marks an empty slot, the kernel's -1), processed in blocks of `block`
// as an online softmax — per block the running max, the fp32 probabilities rescaled
// into the running sum, and the probabilities rounded to bf16 before they weight the
// keys (K = V). The per-head sink joins the denominator at the end; the output is bf16.
func blockSoftmax(q []float32, keys [][]float32, sink []float32, heads, dim, block int, scale float32, out []float32, s, acc []float32) {
	for h := 0; h < heads; h++ {
		qh := q[h*dim : (h+1)*dim]
		m := float32(math.Inf(-1))
		var sum float32
		clear(acc)
		for b := 0; b < len(keys); b += block {
			blk := keys[b:min(b+block, len(keys))]
			bm := m
			for e, k := range blk {
				if k == nil {
					s[e] = float32(math.Inf(-1))
					continue
				}
				var dot float32
				for d, v := range k {
					dot += qh[d] * v
				}
				s[e] = dot * scale
				bm = max(bm, s[e])
			}
			if math.IsInf(float64(bm), -1) {
				continue // nothing in this block, nor before it
			}
			sc := float32(math.Exp(float64(m - bm)))
			m = bm
			var bsum float32
			for d := range acc {
				acc[d] *= sc
			}
			for e, k := range blk {
				if k == nil {
					s[e] = 0
					continue
				}
				p := float32(math.Exp(float64(s[e] - m)))
				s[e] = p
				pb := quant.BF16(p)
				for d, v := range k {
					acc[d] += pb * v
				}
			}
			bsum = cascadeSum(s[:len(blk)]) // p.sum(dim=-1), ATen's inner-sum order
			sum = sum*sc + bsum
		}
		sum += float32(math.Exp(float64(sink[h] - m)))
		o := out[h*dim : (h+1)*dim]
		for d := range o {
			o[d] = quant.BF16(acc[d] / sum)
		}
	}
}

// ringReader holds a window ring's rows decoded, by position.
type ringReader struct {
	first int32 // position of the oldest row
	rows  [][]float32
}

func newRingReader(r *kvstate.Ring) *ringReader {
	rr := &ringReader{rows: make([][]float32, r.Len())}
	for i := range rr.rows {
		rr.rows[i] = make([]float32, r.Dim)
		p := r.RowInto(i, rr.rows[i])
		if i == 0 {
			rr.first = p
		}
	}
	return rr
}

// at is the row at position p, nil when the ring does not hold it.
func (rr *ringReader) at(p int32) []float32 {
	i := int(p - rr.first)
	if i < 0 || i >= len(rr.rows) {
		return nil
	}
	return rr.rows[i]
}

// csaAttention is csa_attention: each query's key list is built as the reference's
// index lists (get_window_topk_idxs, then the compressed indices after the window), so
// the 64-key blocks of the online softmax hold the same keys.
type csaAttention struct {
	layer, source, ratio, heads, dim, window, block, keep int
	scale                                                 float32
}

func newCSAAttention(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	k := &csaAttention{layer: attrInt(a, "layer"), source: attrInt(a, "source"), ratio: attrInt(a, "ratio"),
		heads: attrInt(a, "heads"), dim: attrInt(a, "head_dim"), window: attrInt(a, "window"), block: attrInt(a, "block"),
		keep: attrInt(a, "keep"), scale: float32(attrFloat(a, "scale"))}
	if k.ratio > 0 && k.source < 0 {
		return nil, fmt.Errorf("csa_attention: a compressed layer needs its KV source")
	}
	return k, nil
}

// windowList appends the window keys of the query at position p: for a prefill from
// position 0, min(n, window) slots starting at max(0, p-window+1) (later ones empty);
// otherwise the window ring's slots oldest first (positions p-window+1 .. p, empty
// before the sequence start), from this step's rows or the ring.
func windowList(dst [][]float32, fromZero bool, p, pos0, n, window int, chunk func(i int) []float32, ring *ringReader) [][]float32 {
	if fromZero {
		start := max(0, p-window+1)
		for i := 0; i < min(n, window); i++ {
			q := start + i
			if q > p {
				dst = append(dst, nil)
			} else {
				dst = append(dst, chunk(q-pos0))
			}
		}
		return dst
	}
	for q := p - window + 1; q <= p; q++ {
		switch {
		case q < 0:
			dst = append(dst, nil)
		case q >= pos0:
			dst = append(dst, chunk(q-pos0))
		default:
			dst = append(dst, ring.at(int32(q)))
		}
	}
	return dst
}

// compressedWidth is how many compressed entries the reference's index list spans for
// a query at position p: the prefill's whole chunk, or what position p closed.
func compressedWidth(v seqView, p, ratio int) int {
	if v.fromZero {
		return (v.pos + v.n) / ratio
	}
	return (p + 1) / ratio
}

func (k *csaAttention) Run(s *Step, a, r []Tensor) error {
	q, kv, sink, out := a[0].F32, a[1].F32, a[3].F32, r[0].F32
	var idx []int32
	topk := 0
	if k.ratio > 0 { // the state operand orders the call, it passes no buffer
		idx, topk = a[4].I32, a[4].Shape[1]
	}
	hd := k.heads * k.dim
	for _, v := range views(s, k.keep) {
		if k.layer >= len(v.st.Layers) || k.source >= len(v.st.Layers) {
			return fmt.Errorf("layer %d is missing from the sequence state", k.layer)
		}
		ring := &v.st.Layers[k.layer].Ring
		rr := newRingReader(ring)
		chunk := func(i int) []float32 { return kv[(v.row+i)*k.dim : (v.row+i+1)*k.dim] }
		var cache *kvstate.Compressed
		entries := map[int32][]float32{}
		if k.ratio > 0 {
			st := &v.st.Layers[k.source]
			if len(st.Caches) == 0 || st.Caches[0].Kind != kvlayout.CacheKV {
				return fmt.Errorf("layer %d reads KV source %d, which has no compressed cache", k.layer, k.source)
			}
			cache = &st.Caches[0]
			for i := 0; i < v.n; i++ {
				for _, e := range idx[(v.row+i)*topk : (v.row+i+1)*topk] {
					if e >= 0 && entries[e] == nil {
						if int(e) >= cache.N {
							return fmt.Errorf("index %d names entry %d of %d", i, e, cache.N)
						}
						buf := make([]float32, k.dim)
						cache.EntryInto(int(e), buf)
						entries[e] = buf
					}
				}
			}
		}
		parallelFor(v.n, k.window*hd*2, func(lo, hi int) {
			var keys [][]float32
			sc := make([]float32, k.block)
			acc := make([]float32, k.dim)
			for i := lo; i < hi; i++ {
				p := v.pos + i
				keys = windowList(keys[:0], v.fromZero, p, v.pos, v.n, k.window, chunk, rr)
				if k.ratio > 0 {
					width := compressedWidth(v, p, k.ratio)
					row := idx[(v.row+i)*topk : (v.row+i+1)*topk]
					for j := 0; j < min(topk, width); j++ {
						if e := row[j]; e >= 0 {
							keys = append(keys, entries[e])
						} else {
							keys = append(keys, nil)
						}
					}
				}
				t := v.row + i
				blockSoftmax(q[t*hd:(t+1)*hd], keys, sink, k.heads, k.dim, k.block, k.scale, out[t*hd:(t+1)*hd], sc, acc)
			}
		})
		ring.Push(kv[v.row*k.dim:(v.row+v.n)*k.dim], v.pos)
	}
	return nil
}
