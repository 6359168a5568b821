package cpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"deepinfer/ir"
	"deepinfer/kvlayout"
	"deepinfer/quant"
	"deepinfer/targets"
	"deepinfer/targets/cpu/kvstate"
)

// CSA2 (MODEL.md §2): a KV source pools every group of `ratio` tokens into one
// compressed entry (Compressor.forward), derives the entry's index key (the key half of
// Indexer.forward), and stores both FP4; the indexers score those keys for each query
// and keep a top-k, optionally inside the candidate source's best blocks.

type csaCompress struct {
	layer, ratio, dim, idim, keep int
	eps                           float64
	rope, krope                   ropeSpec
}

func newCSACompress(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	k := &csaCompress{layer: attrInt(a, "layer"), ratio: attrInt(a, "ratio"), dim: attrInt(a, "head_dim"),
		idim: attrInt(a, "index_head_dim"), eps: attrFloat(a, "eps")}
	k.rope = newRopeSpec(a, k.dim)
	if k.idim > 0 {
		k.krope = newRopeSpec(a, k.idim)
	}
	return k, nil
}

func (k *csaCompress) Run(s *Step, a, r []Tensor) error {
	x := a[0].F32
	D := a[0].Cols()
	wkv := a[2].F32
	i := 3
	var wgate []float32
	if k.ratio > 1 {
		wgate = a[i].F32
		i++
	}
	norm := a[i].F32
	var wk, knorm []float32
	if k.idim > 0 {
		wk, knorm = a[i+1].F32, a[i+2].F32
	}
	d := k.dim
	for _, v := range views(s, k.keep) {
		st := &v.st.Layers[k.layer]
		if len(st.Caches) == 0 || st.Caches[0].Kind != kvlayout.CacheKV || (k.idim > 0 && (len(st.Caches) < 2 || st.Caches[1].Kind != kvlayout.CacheIndexKeys)) {
			return fmt.Errorf("layer %d has no compressed cache (and index keys) in the sequence state", k.layer)
		}
		cache := &st.Caches[0]
		xs := x[v.row*D : (v.row+v.n)*D]
		var latents [][]float32
		var gpos []int
		proj := make([]float32, v.n*d)
		if k.ratio == 1 {
			// a plain bf16 projection per token (wkv is a bf16 Linear)
			xb := make([]float32, len(xs))
			quantizeActs("bf16", 0, D, xs, xb)
			gemmRows(v.n, d, D, xb, wkv, proj)
			quant.BF16Slice(proj)
			for t := 0; t < v.n; t++ {
				lat := make([]float32, d)
				rmsRow(proj[t*d:(t+1)*d], norm, lat, k.eps)
				latents, gpos = append(latents, lat), append(gpos, v.pos+t)
			}
		} else {
			// fp32 projections; a group closes at positions ≡ ratio-1, pooled by a softmax
			// over its rows per channel
			gate := make([]float32, v.n*d)
			v.linearRows(D, d, xs, wkv, proj)
			v.linearRows(D, d, xs, wgate, gate)
			for t := 0; t < v.n; t++ {
				p := v.pos + t
				if len(cache.PendKV) != (p%k.ratio)*d {
					return fmt.Errorf("layer %d: compressor state holds %d rows at position %d (ratio %d)", k.layer, len(cache.PendKV)/d, p, k.ratio)
				}
				cache.PendKV = append(cache.PendKV, proj[t*d:(t+1)*d]...)
				cache.PendGate = append(cache.PendGate, gate[t*d:(t+1)*d]...)
				if (p+1)%k.ratio != 0 {
					continue
				}
				pooled := make([]float32, d)
				for c := 0; c < d; c++ {
					mx := math.Inf(-1)
					for j := 0; j < k.ratio; j++ {
						mx = max(mx, float64(cache.PendGate[j*d+c]))
					}
					var den, num float64
					for j := 0; j < k.ratio; j++ {
						e := math.Exp(float64(cache.PendGate[j*d+c]) - mx)
						den += e
						num += e * float64(cache.PendKV[j*d+c])
					}
					pooled[c] = quant.BF16(float32(num / den))
				}
				cache.PendKV, cache.PendGate = cache.PendKV[:0], cache.PendGate[:0]
				rmsRow(pooled, norm, pooled, k.eps)
				latents, gpos = append(latents, pooled), append(gpos, p+1-k.ratio)
			}
		}
		cos := make([]float64, k.rope.ropeDim/2)
		sin := make([]float64, k.rope.ropeDim/2)
		for j, lat := range latents {
			if cache.N != gpos[j]/k.ratio {
				return fmt.Errorf("layer %d: entry %d would be stored as entry %d", k.layer, gpos[j]/k.ratio, cache.N)
			}
			k.rope.tables(gpos[j], 1, cos, sin)
			if k.idim > 0 {
				// index key: k_norm(wk·latent), RoPE'd, FP4 (UE8M0 per 32) as stored
				key := make([]float32, k.idim)
				gemmNT(1, k.idim, d, lat, d, wk, d, key, k.idim)
				quant.BF16Slice(key)
				rmsRow(key, knorm, key, k.eps)
				k.krope.apply(key, cos, sin)
				quant.BF16Slice(key)
				st.Caches[1].Append(key)
			}
			k.rope.apply(lat, cos, sin)
			quant.BF16Slice(lat)
			cache.Append(lat)
		}
	}
	return nil
}

// csaIndex is csa_index and csa_index_candidates.
type csaIndex struct {
	layer, source, ratio, topk, heads, dim, keep int
	candBlocks, candSize                         int
	scale                                        float32
	publish                                      bool // csa_index_candidates
	lowTie                                       bool // targets.EnvIndexTies=low: lowTieTopK
}

func newCSAIndex(publish bool) factory {
	return func(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
		low, err := targets.IndexTiesLow()
		if err != nil {
			return nil, err
		}
		return &csaIndex{layer: attrInt(a, "layer"), source: attrInt(a, "source"), ratio: attrInt(a, "ratio"),
			topk: attrInt(a, "topk"), heads: attrInt(a, "heads"), dim: attrInt(a, "head_dim"), keep: attrInt(a, "keep"),
			candBlocks: attrInt(a, "cand_blocks"), candSize: attrInt(a, "cand_block_size"),
			scale: float32(attrFloat(a, "scale")), publish: publish, lowTie: low}, nil
	}
}

// topByScore returns the indices of the k highest scores, higher score first and the
// lower index first among equals.
func topByScore(scores []float32, k int, idx []int) []int {
	idx = idx[:0]
	for i := range scores {
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(scores[b], scores[a]) })
	return idx[:min(k, len(idx))]
}

func (k *csaIndex) Run(s *Step, a, r []Tensor) error {
	q, w := a[0].F32, a[1].F32
	var candIn []int32
	if len(a) == 4 { // q, w, pos[, cand]: the state operand passes no buffer
		candIn = a[3].I32
	}
	idxOut := r[0].I32
	var candOut []int32
	if k.publish {
		candOut = r[1].I32
	}
	hd := k.heads * k.dim
	for _, v := range views(s, k.keep) {
		// the keys each row scores: its own source's, or in a decode row the layer
		// publishedKeys names for its position (rows of one group can differ)
		srcs := make([]int, v.n)
		keyOf := map[int][]float32{}
		for i := range srcs {
			src := k.source
			if v.decode {
				src = publishedKeys(v.st, k.layer, v.pos+i)
			}
			srcs[i] = src
			if _, ok := keyOf[src]; ok {
				continue
			}
			st := &v.st.Layers[src]
			if len(st.Caches) < 2 || st.Caches[1].Kind != kvlayout.CacheIndexKeys {
				return fmt.Errorf("layer %d indexes KV source %d, which holds no index keys", k.layer, src)
			}
			keys := &st.Caches[1]
			kv := make([]float32, keys.N*k.dim)
			for e := 0; e < keys.N; e++ {
				keys.EntryInto(e, kv[e*k.dim:(e+1)*k.dim])
			}
			keyOf[src] = kv
		}
		nkeys := 0
		for _, kv := range keyOf {
			nkeys = max(nkeys, len(kv)/k.dim)
		}
		var errs errOnce
		parallelFor(v.n, nkeys*hd, func(lo, hi int) {
			var order []int
			scores := make([]float32, nkeys)
			wts := make([]float32, k.heads)
			for i := lo; i < hi; i++ {
				t, p := v.row+i, v.pos+i
				kv := keyOf[srcs[i]]
				width, clen := compressedWidth(v, p, k.ratio), (p+1)/k.ratio
				if width > len(kv)/k.dim {
					errs.set(fmt.Errorf("layer %d: position %d needs %d index keys, the source holds %d", k.layer, p, width, len(kv)/k.dim))
					return
				}
				for h := range wts {
					wts[h] = quant.BF16(w[t*k.heads+h] * k.scale)
				}
				sc := scores[:width]
				qt := q[t*hd : (t+1)*hd]
				for e := range sc {
					if e >= clen {
						sc[e] = float32(math.Inf(-1))
						continue
					}
					ke := kv[e*k.dim : (e+1)*k.dim]
					var sum float32
					for h := 0; h < k.heads; h++ {
						var dot float32
						for d, x := range qt[h*k.dim : (h+1)*k.dim] {
							dot += x * ke[d]
						}
						sum += quant.BF16(max(quant.BF16(dot), 0) * wts[h])
					}
					sc[e] = quant.BF16(sum)
				}
				if k.publish {
					k.selectBlocks(sc, clen, candOut[t*k.candBlocks:(t+1)*k.candBlocks])
				} else if candIn != nil {
					k.restrict(sc, candIn[t*k.candBlocks:(t+1)*k.candBlocks])
				}
				if k.lowTie {
					order = lowTieTopK(sc, k.topk)
				} else {
					order = torchTopK(sc, k.topk)
				}
				slices.Sort(order)
				out := idxOut[t*k.topk : (t+1)*k.topk]
				for j := range out {
					out[j] = -1
				}
				n := 0
				for _, e := range order {
					if e < clen {
						out[n] = int32(e)
						n++
					}
				}
			}
		})
		if err := errs.get(); err != nil {
			return err
		}
	}
	return nil
}

// publishedKeys is the layer whose index keys a decode step's indexer at `layer` scores,
// as the reference's decode path has it: Indexer.forward reads one shared buffer,
// shared_attn.index_k, which a key-owning indexer repoints at its own k_cache only on
// the steps its compressor emits an entry. So an owner of ratio r whose compressor does
// not emit at position p ((p+1) mod r ≠ 0) scores the keys of the last owner that did
// emit: an earlier owner in this step, else the last one of the previous step (for
// DeepSeek-V4.1's layouts, the ratio-1 owner: tiny-v41-dev's layer 3, the full model's
// layer 20). The fixture's decode traces are computed this way; prefill (start_pos 0)
// always publishes before reading, so there every layer reads its own source's keys.
func publishedKeys(st *kvstate.Seq, layer, p int) int {
	emits := func(j, p int) bool {
		if j >= len(st.Layers) || len(st.Layers[j].Caches) < 2 || st.Layers[j].Caches[1].Kind != kvlayout.CacheIndexKeys {
			return false
		}
		r := st.Layers[j].Caches[1].Ratio
		return r > 0 && (p+1)%r == 0
	}
	for j := layer; j >= 0; j-- {
		if emits(j, p) {
			return j
		}
	}
	for j := len(st.Layers) - 1; j >= 0; j-- {
		if emits(j, p-1) {
			return j
		}
	}
	return layer
}

// selectBlocks is select_candidate_blocks for one query: blocks of candSize keys scored
// by their best key, the block holding the newest visible key always kept, the top
// candBlocks that are reachable at all (-1 pads).
func (k *csaIndex) selectBlocks(scores []float32, clen int, out []int32) {
	nb := (len(scores) + k.candSize - 1) / k.candSize
	bs := make([]float32, nb)
	for b := range bs {
		bs[b] = float32(math.Inf(-1))
		for e := b * k.candSize; e < min((b+1)*k.candSize, len(scores)); e++ {
			bs[b] = max(bs[b], scores[e])
		}
	}
	if last := floorDiv(clen-1, k.candSize); last >= 0 && last < nb {
		bs[last] = float32(math.Inf(1))
	}
	for j := range out {
		out[j] = -1
	}
	n := 0
	for _, b := range torchTopK(bs, k.candBlocks) {
		if !math.IsInf(float64(bs[b]), -1) {
			out[n] = int32(b)
			n++
		}
	}
}

// restrict masks every key outside the candidate blocks.
func (k *csaIndex) restrict(scores []float32, cand []int32) {
	for e := range scores {
		in := false
		for _, b := range cand {
			if b >= 0 && e/k.candSize == int(b) {
				in = true
				break
			}
		}
		if !in {
			scores[e] = float32(math.Inf(-1))
		}
	}
}

func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
