package cuda

// bindRMSNorm41 is V4.1's RMSNorm (the cpu target's newRMSNormAny): per chunk of g
// values, the mean of squares summed in ATen's order (cascade_sum), in fp32.
func bindRMSNorm41(b *Bind, g, weighted int64) error {
	eps := b.Float("eps")
	b.Launch("mhc_rmsnorm41", func(s *Step, a *ArgBuf) int64 {
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
