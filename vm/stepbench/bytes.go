// Package stepbench times decode steps of a plan on its target at chosen batch sizes and
// contexts, and sets each against the bytes the step must read: the weights it touches
// and the KV it attends, over the device's own copy bandwidth measured in the same run.
package stepbench

import (
	"math"
	"strings"

	"deepinfer/kvlayout"
	"deepinfer/plan"
)

// Class is a kernel class: the plan's kernel name (deepgemm.fp8_gemm_nt, ...).
type Class = string

// Bytes is what one decode step must read from device memory, by kernel class.
type Bytes struct {
	Weights map[Class]float64 // weights touched (routed experts: the expected distinct experts of the batch)
	KV      map[Class]float64 // state read: window rings, compressed entries attended, index keys scored
}

// Total is the step's bytes.
func (b Bytes) Total() float64 {
	var t float64
	for _, v := range b.Weights {
		t += v
	}
	for _, v := range b.KV {
		t += v
	}
	return t
}

// Class is one class's bytes.
func (b Bytes) Class(c Class) float64 { return b.Weights[c] + b.KV[c] }

// ExpectedExperts is the expected number of distinct experts a batch of tokens touches
// when each picks k of E experts uniformly: E·(1 − (1 − k/E)^tokens).
func ExpectedExperts(E, k, tokens int) float64 {
	if E <= 0 || k <= 0 {
		return 0
	}
	return float64(E) * (1 - math.Pow(1-float64(k)/float64(E), float64(tokens)))
}

// DecodeBytes counts the bytes of one decode step of batch sequences, each at context
// ctx (tokens already in its state), from the plan's decode program and KV layout. KV
// is counted in the plan's layout formats (what this plan's state stores).
func DecodeBytes(p *plan.Plan, batch, ctx int) Bytes { return DecodeBytesTouched(p, batch, ctx, nil) }

// DecodeBytesTouched is DecodeBytes with the routed experts' weights counted for the
// experts a step's slots went to (touched: distinct experts by the decode program's
// instruction index, an ExpertCensus's per-step mean) where touched has the
// instruction, the expectation elsewhere.
func DecodeBytesTouched(p *plan.Plan, batch, ctx int, touched map[int]float64) Bytes {
	b := Bytes{Weights: map[Class]float64{}, KV: map[Class]float64{}}
	var pr *plan.Program
	for i := range p.Programs {
		if p.Programs[i].Phase == plan.PhaseDecode {
			pr = &p.Programs[i]
		}
	}
	if pr == nil {
		return b
	}
	attr := func(in *plan.Instr, k string) int {
		v, ok := in.Attrs.Int(k)
		if !ok {
			return -1
		}
		return int(v)
	}
	// the index sizes: top-k entries attended, and the candidate pool of restricted indexers
	topk, candPool := 0, 0
	for i := range pr.Instrs {
		in := &pr.Instrs[i]
		if strings.Contains(in.Op, "index") {
			topk = max(topk, attr(in, "topk"))
		}
		if in.Op == "csa_index_candidates" {
			candPool = attr(in, "cand_blocks") * attr(in, "cand_block_size")
		}
	}
	moeK := 0
	kv := p.KV.Layers
	entries := func(ratio int) int {
		if ratio <= 0 {
			return 0
		}
		return ctx / ratio
	}
	// cache finds a layer's cache: by kind (V4.1) or by width (V4).
	cache := func(layer int, kind string, dim int) *kvlayout.CacheLayout {
		if layer < 0 || layer >= len(kv) {
			return nil
		}
		for j := range kv[layer].Caches {
			c := &kv[layer].Caches[j]
			if (kind != "" && c.Kind == kind) || (kind == "" && (dim <= 0 || c.Dim == dim)) {
				return c
			}
		}
		return nil
	}
	for i := range pr.Instrs {
		in := &pr.Instrs[i]
		cls := in.Kernel
		if cls == "" {
			cls = in.Op
		}
		if in.Op == "moe_route" {
			moeK = attr(in, "topk")
		}
		for _, a := range in.Args {
			if a.Kind != plan.OpWeight {
				continue
			}
			w := &p.Weights[a.Index]
			n, _ := w.StorageBytes()
			if w.Storage == "" {
				n = w.Elems() * int64(w.DType.Size())
			}
			switch {
			case in.Op == "embed":
				b.Weights[cls] += float64(n) / float64(w.Shape[0]) * float64(batch)
			case in.Op == "moe_experts" && strings.Contains(w.Name, ".experts."):
				E := attr(in, "experts")
				x, ok := touched[i]
				if !ok {
					x = ExpectedExperts(E, moeK, batch)
				}
				b.Weights[cls] += float64(n) * x / float64(max(E, 1))
			default:
				b.Weights[cls] += float64(n)
			}
		}
		layer := attr(in, "layer")
		per := 0.0 // bytes per sequence
		switch in.Op {
		case "sparse_attention", "csa_attention", "attention":
			if layer >= 0 && layer < len(kv) {
				ll := &kv[layer]
				per += float64(min(ctx, ll.RingRows()) * ll.RingRowBytes())
			}
			ratio, src := attr(in, "ratio"), attr(in, "source")
			if ratio > 0 {
				var c *kvlayout.CacheLayout
				if src >= 0 { // V4.1: the KV source's entries
					c = cache(src, kvlayout.CacheKV, 0)
				} else {
					c = cache(layer, "", attr(in, "head_dim"))
				}
				if c != nil {
					n := entries(ratio)
					if src >= 0 || len(kv[layer].Caches) > 1 { // an indexed layer attends its top-k
						n = min(n, topk)
					}
					per += float64(n * c.EntryBytes())
				}
			}
		case "index_topk", "csa_index", "csa_index_candidates":
			ratio, src := attr(in, "ratio"), attr(in, "source")
			var c *kvlayout.CacheLayout
			if src >= 0 {
				c = cache(src, kvlayout.CacheIndexKeys, 0)
			} else {
				c = cache(layer, "", attr(in, "head_dim"))
			}
			if c != nil {
				n := entries(ratio)
				if layer >= 0 && layer < len(p.Model.Layers) && p.Model.Layers[layer].Candidate == "restricted" && candPool > 0 {
					n = min(n, candPool)
				}
				per += float64(n * c.EntryBytes())
			}
		}
		if per > 0 {
			b.KV[cls] += per * float64(batch)
		}
	}
	return b
}
