package cuda

import "math"

// Binders of engram41.cu's kernels: DeepSeek-V4.1's Engram (cpu:
// targets/cpu/v41_engram.go). engram_hash runs in the prefill and decode programs; it
// reads each sequence's n-gram history, then stores the step's last ids in it.

// engramTab is engram41.cu's ENGRAM_TAB.
const engramTab = 448

func init() {
	registerError(510, "a token is outside the Engram token map")
	registerError(511, "an Engram hash is outside the table's rows")
	register("engram_hash", bindEngramHash)
	register("engram_lookup", bindEngramLookup)
	register("engram_mix", bindEngramMix)
}

func bindEngramHash(b *Bind) error {
	layers, _ := b.Attrs.Ints("layers")
	primes, _ := b.Attrs.Ints("primes")
	mult, _ := b.Attrs.Ints("multipliers")
	n, heads, pad := b.Int("max_ngram"), b.Int("heads"), b.Int("pad_token")
	L := int64(len(layers))
	cols := (n - 1) * heads
	if n < 2 || n > 16 || heads < 1 || L == 0 || int64(len(primes)) != L*cols || int64(len(mult)) != L*n {
		return b.Errorf("%d layers, max_ngram %d, %d heads, %d primes, %d multipliers", L, n, heads, len(primes), len(mult))
	}
	V := Dim(b.Args[1], 0)
	if pad < 0 || pad >= V {
		return b.Errorf("pad token %d is outside the token map of %d", pad, V)
	}
	// per layer: cols words prime | offset<<32, then the n multipliers
	if L*(cols+n) > engramTab {
		return b.Errorf("%d layers of %d hash columns take %d constants, more than the kernel's %d", L, cols, L*(cols+n), engramTab)
	}
	tab := make([]int64, engramTab)
	for li := int64(0); li < L; li++ {
		w := tab[li*(cols+n):]
		var off int64
		for c := int64(0); c < cols; c++ {
			p := primes[li*cols+c]
			if p < 1 || p > 1<<31 {
				return b.Errorf("bucket size %d", p)
			}
			w[c] = p | off<<32
			off += p
		}
		if off > math.MaxInt32 {
			return b.Errorf("layer %d's buckets need %d rows, beyond int32", layers[li], off)
		}
		copy(w[cols:cols+n], mult[li*n:(li+1)*n])
	}
	ctx := n - 1
	off, err := b.State("engram.history", 4*ctx)
	if err != nil {
		return err
	}
	b.Launch("engram_hash", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Result(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(s.T)
		a.I(V)
		a.I(pad)
		a.I(n)
		a.I(heads)
		a.I(L)
		a.I(ctx)
		a.I(off)
		a.P(s.Err)
		for _, v := range tab {
			a.I(v)
		}
		return s.T
	})
	b.Launch("engram_push", func(s *Step, a *ArgBuf) int64 {
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(V)
		a.I(ctx)
		a.I(off)
		return s.NSeq
	})
	return nil
}

func bindEngramLookup(b *Bind) error {
	idx, cols := b.Int("index"), b.Int("cols")
	rows, d := Dim(b.Args[1], 0), Dim(b.Args[1], 1)
	w := Dim(b.Args[0], -1)
	if cols <= 0 || idx < 0 || (idx+1)*cols > w || rows <= 0 || d <= 0 {
		return b.Errorf("layer index %d of %d columns, hashes %s, table %s", idx, cols, b.Args[0], b.Args[1])
	}
	b.Launch("engram_lookup", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.W(s.Arg(1))
		a.P(s.Result(0).Ptr)
		a.I(T)
		a.I(w)
		a.I(idx)
		a.I(cols)
		a.I(rows)
		a.I(d)
		a.P(s.Err)
		return T * cols * d
	})
	return nil
}

func bindEngramMix(b *Bind) error {
	n, d := Dim(b.Args[0], 1), Dim(b.Args[0], 2)
	if n <= 0 || d <= 0 {
		return b.Errorf("streams %s", b.Args[0])
	}
	eps := b.Float("eps")
	b.Launch("engram_mix", func(s *Step, a *ArgBuf) int64 {
		T := s.Arg(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.W(s.Arg(2))
		a.W(s.Arg(3))
		a.P(s.Result(0).Ptr)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(T)
		a.I(n)
		a.I(d)
		a.F(eps)
		return T * n
	})
	return nil
}
