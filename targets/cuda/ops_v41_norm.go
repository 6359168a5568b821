package cuda

// bindRMSNorm41 is V4.1's RMSNorm (the cpu target's newRMSNormAny): to be ported.
func bindRMSNorm41(b *Bind, g, weighted int64) error {
	if allowUnbound {
		return nil
	}
	return b.Errorf("V4.1 RMSNorm is not ported yet")
}
