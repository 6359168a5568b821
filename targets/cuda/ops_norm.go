package cuda

func init() { register("rmsnorm", bindRMSNorm) }

// bindRMSNorm: per chunk of `group` values (default the last dim), weighted when the
// instruction has a weight operand.
func bindRMSNorm(b *Bind) error {
	g := b.Args[0].Last()
	if v, ok := b.Attrs.Int("group"); ok {
		g = v
	}
	if g <= 0 {
		return b.Errorf("group %d", g)
	}
	weighted := int64(0)
	if len(b.Args) == 2 {
		weighted = 1
	}
	eps := b.Float("eps")
	// V4.1 (the cpu target's newRMSNormAny): the mean of squares in fp32, summed in
	// ATen's order (mhc.cu); V4: in float64 (basic.cu). The arguments are the same.
	kernel := "rmsnorm"
	if isV41(b) {
		kernel = "mhc_rmsnorm41"
	}
	b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
		chunks := s.Arg(0).Elems() / g
		a.P(s.Arg(0).Ptr)
		if weighted == 1 {
			a.W(s.Arg(1))
		} else {
			a.W(Operand{})
		}
		a.P(s.Result(0).Ptr)
		a.I(chunks)
		a.I(g)
		a.F(eps)
		a.I(weighted)
		return chunks
	})
	return nil
}

// isV41 reports whether an instruction asks for DeepSeek-V4.1's numerics.
func isV41(b *Bind) bool { return b.Str("numerics") == "v41" }
