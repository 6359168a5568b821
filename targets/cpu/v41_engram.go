package cpu

import (
	"fmt"
	"math"

	"deepinfer/engram"
	"deepinfer/ir"
	"deepinfer/quant"
)

// Engram (MODEL.md §2): engram.py's NgramHashState (the n-gram hashes of each position,
// with each sequence's history of compressed ids across steps) and model.py's Engram
// (table rows → one key per stream and a shared value, gated into the streams).

type engramHash struct {
	lay  *engram.Layout
	pad  int
	keep int
}

func newEngramHash(_, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	layers, _ := a.Ints("layers")
	primes, _ := a.Ints("primes")
	mult, _ := a.Ints("multipliers")
	n, h := attrInt(a, "max_ngram"), attrInt(a, "heads")
	lay := &engram.Layout{MaxNgram: n, Heads: h}
	cols := (n - 1) * h
	for i, id := range layers {
		lay.Layers = append(lay.Layers, int(id))
		p := primes[i*cols : (i+1)*cols]
		offs := make([]int64, cols)
		var off int64
		for c, x := range p {
			if x < 1 || x > 1<<31 {
				return nil, fmt.Errorf("engram_hash: bucket size %d", x)
			}
			offs[c] = off
			off += x
		}
		if off > math.MaxInt32 {
			return nil, fmt.Errorf("engram_hash: layer %d's buckets need %d rows, beyond int32", id, off)
		}
		lay.Primes = append(lay.Primes, p)
		lay.Offsets = append(lay.Offsets, offs)
		lay.Mult = append(lay.Mult, mult[i*n:(i+1)*n])
	}
	return &engramHash{lay: lay, pad: attrInt(a, "pad_token")}, nil
}

// dead marks a position that takes no part in an n-gram (the reference's image spans;
// here token ids past the tokenizer).
const dead = -1

func (k *engramHash) Run(s *Step, a, r []Tensor) error {
	tokens, tmap, out := a[0].I32, a[1].I32, r[0].I32
	lay := k.lay
	ctx := lay.MaxNgram - 1
	cols := lay.Cols()
	width := cols * len(lay.Layers)
	pad := int64(tmap[k.pad])
	toks := make([]int64, lay.MaxNgram)
	for _, v := range views(s, k.keep) {
		hist := v.st.Engram
		comp := make([]int32, v.n)
		for i := range comp {
			t := tokens[v.row+i]
			if t < 0 || int(t) >= len(tmap) {
				return fmt.Errorf("token %d is outside the Engram token map", t)
			}
			comp[i] = tmap[t]
		}
		at := func(q int) int32 { // compressed id at position q ≥ 0
			if q >= v.pos {
				return comp[q-v.pos]
			}
			j := len(hist) - (v.pos - q)
			if j < 0 {
				return dead
			}
			return hist[j]
		}
		for i := 0; i < v.n; i++ {
			p := v.pos + i
			blocked := false
			for sh := range toks {
				if !blocked && (p < sh || at(p-sh) == dead) {
					blocked = true
				}
				if blocked {
					toks[sh] = pad
				} else {
					toks[sh] = int64(at(p - sh))
				}
			}
			row := out[(v.row+i)*width : (v.row+i+1)*width]
			for li := range lay.Layers {
				lay.Hash(li, toks, row[li*cols:(li+1)*cols])
			}
		}
		v.st.PushEngram(comp, ctx)
	}
	return nil
}

func newEngramLookup(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	idx, cols := attrInt(a, "index"), attrInt(a, "cols")
	rows, d := int(args[1].Shape[0].N), int(args[1].Shape[1].N)
	w := int(args[0].Last())
	return kfunc(func(s *Step, in, r []Tensor) error {
		h, table, out := in[0].I32, in[1].F32, r[0].F32
		for t := 0; t < in[0].Rows(); t++ {
			for c := 0; c < cols; c++ {
				e := int(h[t*w+idx*cols+c])
				if e < 0 || e >= rows {
					return fmt.Errorf("engram hash %d is outside the table's %d rows", e, rows)
				}
				copy(out[(t*cols+c)*d:(t*cols+c+1)*d], table[e*d:(e+1)*d])
			}
		}
		return nil
	}), nil
}

// newEngramMix is Engram.forward after the projection: per (token, stream), the gate
// is σ(ssqrt(Σ h·q_w·k_w·key · rstd(h)·rstd(key) / √D)) with ssqrt the signed square
// root of |dot| clamped at 1e-6, and the stream becomes bf16(h + gate·value).
func newEngramMix(args, _ []ir.Type, a ir.Attrs) (Kernel, error) {
	n, d := int(args[0].Shape[1].N), int(args[0].Shape[2].N)
	eps32 := float32(attrFloat(a, "eps"))
	hh, kk, pp := make([]float32, d), make([]float32, d), make([]float32, d)
	return kfunc(func(s *Step, in, r []Tensor) error {
		x, kv, qw, kw, y := in[0].F32, in[1].F32, in[2].F32, in[3].F32, r[0].F32
		first, rows := seqRows(s, in[0].Rows())
		for t := 0; t < in[0].Rows(); t++ {
			row := kv[t*(n+1)*d : (t+1)*(n+1)*d]
			val := row[n*d:]
			for j := 0; j < n; j++ {
				h := x[(t*n+j)*d : (t*n+j+1)*d]
				key := row[j*d : (j+1)*d]
				// fp32 in the reference's order (v41_order.go)
				for i := range h {
					hh[i] = h[i] * h[i]
					kk[i] = key[i] * key[i]
					pp[i] = h[i] * (qw[j*d+i] * kw[j*d+i]) * key[i]
				}
				rh := 1 / float32(math.Sqrt(float64(cascadeSum(hh)/float32(d)+eps32)))
				rk := 1 / float32(math.Sqrt(float64(cascadeSum(kk)/float32(d)+eps32)))
				g := cascadeSum(pp) * (rh * rk) * float32(1/math.Sqrt(float64(d)))
				ag := float32(math.Sqrt(float64(max(float32(math.Abs(float64(g))), 1e-6))))
				gate := sigmoidAt(float32(math.Copysign(float64(ag), float64(g))), (t-first[t])*n+j, rows[t]*n)
				dst := y[(t*n+j)*d : (t*n+j+1)*d]
				for i := range dst {
					dst[i] = quant.BF16(h[i] + gate*val[i])
				}
			}
		}
		return nil
	}), nil
}
