package cuda

import "deepinfer/quant"

// Binders of misc41.cu's kernels: V4.1's small ops (targets/cpu/v41_numerics.go).

func init() {
	registerError(100, "a logit row lies before the tail rows its sequence keeps (SWA bounded replay)")
	registerError(101, "a logit row is outside the step")
	register("hc_select", bindHCSelect)
	register("hc_mean", bindHCMean)
	register("fake_quant", bindFakeQuant)
	register("concat", bindConcat)
	register("tail_rows", bindTailRows)
	register("tail_index", bindTailIndex)
}

func bindHCSelect(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	j := b.Int("index")
	if j < 0 || j >= n {
		return b.Errorf("index %d of %d streams", j, n)
	}
	launchStreams(b, "mhc_select", n, d, j)
	return nil
}

func bindHCMean(b *Bind) error {
	n, d, err := streamDims(b)
	if err != nil {
		return err
	}
	launchStreams(b, "mhc_mean", n, d)
	return nil
}

// bindFakeQuant: bf16 per value, or a quant.Format (mhc_fake_quant's fmt is its
// number) per group of `group` values along the last dim.
func bindFakeQuant(b *Bind) error {
	format := b.Str("format")
	g, f := int64(1), int64(0)
	if format != "bf16" {
		qf, ok := quant.ParseFormat(format)
		if !ok {
			return b.Errorf("unknown format %q", format)
		}
		f, g = int64(qf), b.Int("group")
		if last := b.Args[0].Last(); g <= 0 || last%g != 0 {
			return b.Errorf("group %d does not divide %d", g, last)
		}
	}
	b.Launch("mhc_fake_quant", func(s *Step, a *ArgBuf) int64 {
		groups := s.Arg(0).Elems() / g
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(groups)
		a.I(g)
		a.I(f)
		// bf16 of a multiple of four values: four a work item (16-byte accesses; the
		// operands are allocated 16-byte aligned)
		vec := f == 0 && groups%4 == 0 && s.Arg(0).Ptr%16 == 0 && s.Result(0).Ptr%16 == 0
		a.I(b2i(vec))
		if vec {
			return groups / 4
		}
		if f != 0 && g >= 2 && g <= 32 && g&(g-1) == 0 {
			// a value a work item, rounded up to whole warps (misc41.cu mhc_fq_lanes)
			return (groups*g + 31) / 32 * 32
		}
		return groups
	})
	return nil
}

// bindConcat: one copy per operand into its columns of the result.
func bindConcat(b *Bind) error {
	var total int64
	offs := make([]int64, len(b.Args))
	for i, t := range b.Args {
		offs[i] = total
		total += t.Last()
	}
	for i := range b.Args {
		w, off := b.Args[i].Last(), offs[i]
		b.Launch("mhc_copy_cols", func(s *Step, a *ArgBuf) int64 {
			rows := s.Result(0).Rows()
			a.P(s.Arg(i).Ptr)
			a.P(s.Result(0).Ptr)
			a.I(rows)
			a.I(w)
			a.I(total)
			a.I(off)
			return rows * w
		})
	}
	return nil
}

func bindTailRows(b *Bind) error {
	keep := b.Int("keep")
	if keep < 1 {
		return b.Errorf("keep %d", keep)
	}
	w := int64(1)
	for d := 1; d < len(b.Args[0].Shape); d++ {
		n := Dim(b.Args[0], d)
		if n < 0 {
			return b.Errorf("x %s: want fixed dims after T", b.Args[0])
		}
		w *= n
	}
	b.Launch("mhc_tail_rows", func(s *Step, a *ArgBuf) int64 {
		K := s.Result(0).Shape[0]
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(K)
		a.I(w)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(keep)
		return K * w
	})
	return nil
}

func bindTailIndex(b *Bind) error {
	keep := b.Int("keep")
	if keep < 1 {
		return b.Errorf("keep %d", keep)
	}
	b.Launch("mhc_tail_index", func(s *Step, a *ArgBuf) int64 {
		R := s.Arg(0).Elems()
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(R)
		a.P(s.Seqs)
		a.I(s.NSeq)
		a.I(keep)
		a.P(s.Err)
		return R
	})
	return nil
}
