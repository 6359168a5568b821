package cuda

import "os"

func init() { register("rmsnorm", bindRMSNorm) }

// EnvNormOne set to 0 runs the fast RMSNorm as two launches (V4.1: mhc_fast_norm41_part,
// then _apply; V4: mhc_fast_norm_part, then _apply) where mhc_fast_norm41_one or
// mhc_fast_norm_one would run it as one (the same values; for comparisons; read when a
// program is bound); set to 1 it runs the one launch for every step, not only where
// normOne chooses it.
const EnvNormOne = "DEEPINFER_CUDA_NORM_ONE"

// normOne reports whether a step's RMSNorm of chunks rows of g values runs as one launch
// (a launch block a row): for rows of at most normOneShort values at any count, and for
// longer rows from normOneRows of them. Run 31 on the H200 (V4 layers 4-5, V4.1 layers
// 20-23, 4,096, each form in the same call): the one launch won for the q/kv norms (512
// to 1,536 values) at every batch size and for the hidden and mHC norms (4,096 to 20,480
// values) at batch 256, and lost for those at batch 1 (a launch block alone on a long
// row: V4.1's mHC norm 0.133 → 0.206 ms a step) and at 64 (within ±0.02 ms).
func normOne(env string, chunks, g int64) bool {
	switch env {
	case "0":
		return false
	case "1":
		return true
	}
	return g <= normOneShort || chunks >= normOneRows
}

const (
	normOneShort = 2048
	normOneRows  = 128
)

// normOneParts is mhc.cu's NORM_ONE_PARTS: the most parts V4's fast RMSNorm may have for
// mhc_fast_norm_one (its shared memory holds them).
const normOneParts = 256

// norm41OneBlocks is mhc.cu's NORM41_ONE_BLOCKS: the most level-0 blocks a cascade lane
// may have for mhc_fast_norm41_one (its shared memory holds 32 lanes' blocks).
const norm41OneBlocks = 64

// cascadeBlocks is numerics.h's cascade_blocks: the level-0 blocks of each of ATen's
// cascade-sum lanes over n values.
func cascadeBlocks(n int64) int64 {
	sizeILP := n / 8 / 4
	power := 4
	if sizeILP > 1 {
		l := 0
		for int64(1)<<l < sizeILP {
			l++
		}
		if p := l / 4; p > 4 {
			power = p
		}
	}
	step := int64(1) << power
	return (sizeILP + step - 1) / step
}

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
	if b.Fast() && fastNorm(b, g, eps, weighted) {
		return nil
	}
	if isV41(b) {
		b.RoundsOnStore()
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
		if isV41(b) {
			a.I(b2i(s.Round))
		}
		return chunks
	})
	return nil
}

// isV41 reports whether an instruction asks for DeepSeek-V4.1's numerics.
func isV41(b *Bind) bool { return b.Str("numerics") == "v41" }

// fastNorm: RMSNorm in the fast mode (mhc.cu). V4: each chunk's float64 sum of squares
// in fastParts(g) parts, then every value normalized from its chunk's parts. V4.1: the
// 32 lanes of ATen's cascade sum as work items, then every value normalized from its
// chunk's lanes, folded as the serial sum would (the cpu target's values). It adds
// nothing and reports false for an input without exactly one token dimension, which
// keeps the serial kernel.
func fastNorm(b *Bind, g int64, eps float64, weighted int64) bool {
	// the scratch is claimed per token: the chunks of one token's values
	perToken := int64(1)
	syms := 0
	for _, d := range b.Args[0].Shape {
		if d.Sym != "" {
			syms++
			continue
		}
		perToken *= d.N
	}
	if syms != 1 {
		return false
	}
	if isV41(b) {
		part := b.Scratch(4*32*((perToken+g-1)/g), 0)
		fill := func(s *Step, a *ArgBuf) int64 {
			chunks := s.Arg(0).Elems() / g
			a.P(s.Arg(0).Ptr)
			if weighted == 1 {
				a.W(s.Arg(1))
			} else {
				a.W(Operand{})
			}
			a.P(s.Result(0).Ptr)
			a.P(s.Scratch(part))
			a.I(chunks)
			a.I(g)
			a.F(eps)
			a.I(weighted)
			a.I(b2i(s.Round))
			return chunks
		}
		b.RoundsOnStore()
		env := os.Getenv(EnvNormOne)
		oneOK := cascadeBlocks(g) <= norm41OneBlocks
		one := func(s *Step) bool { return oneOK && normOne(env, s.Arg(0).Elems()/g, g) }
		two := func(s *Step) bool { return !one(s) }
		// a launch block a chunk (mhc.cu), or the lanes then the values
		launchWhen(b, "mhc_fast_norm41_one", one, func(s *Step, a *ArgBuf) int64 { return fill(s, a) * rowSpread })
		launchWhen(b, "mhc_fast_norm41_part", two, func(s *Step, a *ArgBuf) int64 { return fill(s, a) * 32 })
		launchWhen(b, "mhc_fast_norm41_apply", two, func(s *Step, a *ArgBuf) int64 { return fill(s, a) * g })
		return true
	}
	P := fastParts(g)
	env := os.Getenv(EnvNormOne)
	oneOK := P <= normOneParts
	one := func(s *Step) bool { return oneOK && normOne(env, s.Arg(0).Elems()/g, g) }
	part := b.Scratch(8*P*((perToken+g-1)/g), 0)
	// mhc_fast_norm_apply's arguments, and mhc_fast_norm_one's (no parts in memory)
	apply := func(s *Step, a *ArgBuf) int64 {
		chunks := s.Arg(0).Elems() / g
		a.P(s.Arg(0).Ptr)
		if weighted == 1 {
			a.W(s.Arg(1))
		} else {
			a.W(Operand{})
		}
		a.P(s.Result(0).Ptr)
		if one(s) {
			a.P(0)
		} else {
			a.P(s.Scratch(part))
		}
		a.I(chunks)
		a.I(g)
		a.I(P)
		a.F(eps)
		a.I(weighted)
		return chunks
	}
	two := func(s *Step) bool { return !one(s) }
	// a launch block a chunk (mhc.cu), or the parts then the values
	launchWhen(b, "mhc_fast_norm_one", one, func(s *Step, a *ArgBuf) int64 { return apply(s, a) * rowSpread })
	launchWhen(b, "mhc_fast_norm_part", two, func(s *Step, a *ArgBuf) int64 {
		chunks := s.Arg(0).Elems() / g
		a.P(s.Arg(0).Ptr)
		a.P(s.Scratch(part))
		a.I(chunks)
		a.I(g)
		a.I(P)
		return chunks * P
	})
	launchWhen(b, "mhc_fast_norm_apply", two, func(s *Step, a *ArgBuf) int64 { return apply(s, a) * g })
	return true
}

// launchWhen adds kernel's launch, made in the steps for which when is true (fill's work
// items; none in the others).
func launchWhen(b *Bind, kernel string, when func(*Step) bool, fill func(*Step, *ArgBuf) int64) {
	b.Launch(kernel, func(s *Step, a *ArgBuf) int64 {
		if !when(s) {
			return 0
		}
		return fill(s, a)
	})
}
