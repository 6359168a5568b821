package cpu

import (
	"fmt"
	"math"

	"deepinfer/ir"
	"deepinfer/targets/cpu/kvstate"
)

// compressKernel is the KV compressor of HCA and CSA (MODEL.md §1, "Compressors").
// Each closed window of `ratio` source rows becomes one entry:
//
//	entry = RMSNorm(Σ_r softmax_r(gate_r + ape_r) ⊙ kv_r), then RoPE at the window's first position.
//
// With overlap (CSA) the projections are two series Ca | Cb of width dim each, and entry w
// pools window w-1's Ca rows with window w's Cb rows (width 2·ratio, stride ratio); the
// first window has no predecessor, which is a softmax weight of zero.
type compressKernel struct {
	layer, cache, ratio, dim, width, in int
	overlap                             bool
	eps                                 float64
	rope                                ropeSpec
	kv, gate                            []float32 // scratch [T, width]
}

func newCompress(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	k := &compressKernel{layer: attrInt(a, "layer"), cache: attrInt(a, "cache"), ratio: attrInt(a, "ratio"),
		dim: attrInt(a, "head_dim"), overlap: attrBool(a, "overlap"), eps: attrFloat(a, "eps"),
		in: int(args[0].Last())}
	k.width = k.dim
	if k.overlap {
		k.width = 2 * k.dim
	}
	k.rope = newRopeSpec(a, k.dim)
	return k, nil
}

func stateCache(seq *Seq, layer, cache int) (*kvstate.Compressed, error) {
	if layer >= len(seq.State.Layers) || cache >= len(seq.State.Layers[layer].Caches) {
		return nil, fmt.Errorf("layer %d has no compressor cache %d in the sequence state", layer, cache)
	}
	return &seq.State.Layers[layer].Caches[cache], nil
}

func (k *compressKernel) Run(s *Step, a, _ []Tensor) error {
	t := a[0].Rows()
	if cap(k.kv) < t*k.width {
		k.kv = make([]float32, t*k.width)
		k.gate = make([]float32, t*k.width)
	}
	kv, gate := k.kv[:t*k.width], k.gate[:t*k.width]
	gemmNT(t, k.width, k.in, a[0].F32, k.in, a[2].F32, k.in, kv, k.width)
	gemmNT(t, k.width, k.in, a[0].F32, k.in, a[3].F32, k.in, gate, k.width)
	ape, norm := a[4].F32, a[5].F32
	var errs errOnce
	parallelFor(len(s.Seqs), k.ratio*k.width*8, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			seq := &s.Seqs[i]
			c, err := stateCache(seq, k.layer, k.cache)
			if err == nil && c.N*k.ratio+c.Pending() != seq.Pos {
				err = fmt.Errorf("layer %d compressor %d has seen %d tokens but the sequence continues at position %d",
					k.layer, k.cache, c.N*k.ratio+c.Pending(), seq.Pos)
			}
			if err != nil {
				errs.set(err)
				return
			}
			rows := seq.Row * k.width
			k.absorb(c, kv[rows:rows+seq.N*k.width], gate[rows:rows+seq.N*k.width], ape, norm)
		}
	})
	return errs.get()
}

// absorb appends a sequence's new rows and emits every window they close.
func (k *compressKernel) absorb(c *kvstate.Compressed, kv, gate, ape, norm []float32) {
	c.PendKV = append(c.PendKV, kv...)
	c.PendGate = append(c.PendGate, gate...)
	win := k.ratio * k.width
	closed := 0
	entry := make([]float64, k.dim)
	out := make([]float32, k.dim)
	cos := make([]float64, k.rope.ropeDim/2)
	sin := make([]float64, k.rope.ropeDim/2)
	for len(c.PendKV)-closed >= win {
		wkv, wg := c.PendKV[closed:closed+win], c.PendGate[closed:closed+win]
		k.pool(c, wkv, wg, ape, entry)
		var ss float64
		for _, v := range entry {
			ss += v * v
		}
		inv := 1 / math.Sqrt(ss/float64(k.dim)+k.eps)
		for d, v := range entry {
			out[d] = float32(v*inv) * norm[d]
		}
		k.rope.tables(c.N*k.ratio, 1, cos, sin)
		k.rope.apply(out, cos, sin)
		c.Entries = append(c.Entries, out...)
		c.N++
		closed += win
	}
	if closed > 0 {
		n := copy(c.PendKV, c.PendKV[closed:])
		c.PendKV = c.PendKV[:n]
		n = copy(c.PendGate, c.PendGate[closed:])
		c.PendGate = c.PendGate[:n]
	}
}

// pool computes the softmax-gated sum of one window into entry, and for CSA saves the
// window's Ca slice for the next one.
func (k *compressKernel) pool(c *kvstate.Compressed, kv, gate, ape []float32, entry []float64) {
	r, w, dim := k.ratio, k.width, k.dim
	off := 0 // the series this window contributes to its own entry: Cb with overlap
	if k.overlap {
		off = dim
	}
	for d := 0; d < dim; d++ {
		mx := math.Inf(-1)
		for j := 0; j < r; j++ {
			mx = max(mx, float64(gate[j*w+off+d])+float64(ape[j*w+off+d]))
			if c.HasPrev {
				mx = max(mx, float64(c.PrevGate[j*dim+d]))
			}
		}
		var num, den float64
		for j := 0; j < r; j++ {
			e := math.Exp(float64(gate[j*w+off+d]) + float64(ape[j*w+off+d]) - mx)
			num += e * float64(kv[j*w+off+d])
			den += e
			if c.HasPrev {
				e = math.Exp(float64(c.PrevGate[j*dim+d]) - mx)
				num += e * float64(c.PrevKV[j*dim+d])
				den += e
			}
		}
		entry[d] = num / den
	}
	if k.overlap {
		if c.PrevKV == nil {
			c.PrevKV = make([]float32, r*dim)
			c.PrevGate = make([]float32, r*dim)
		}
		for j := 0; j < r; j++ {
			for d := 0; d < dim; d++ {
				c.PrevKV[j*dim+d] = kv[j*w+d]
				c.PrevGate[j*dim+d] = gate[j*w+d] + ape[j*w+d]
			}
		}
		c.HasPrev = true
	}
}
