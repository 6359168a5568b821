package engram

import (
	"math/bits"
)

// The Engram hash multipliers come from numpy: np.random.default_rng(10007·layer)
// .integers(0, bound, size=max_ngram, dtype=int64). Reproducing them needs numpy's
// SeedSequence (entropy mixing into a 4-word pool), its PCG64 bit generator (128-bit LCG
// with the XSL-RR output) and Generator.integers' bounded draw (Lemire's method). These
// are numpy's published algorithms; the tests pin values numpy printed.

const (
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
	ssPoolSize = 4
)

// seedSequenceState is SeedSequence(entropy).generate_state(n, uint64) for a
// non-negative entropy integer.
func seedSequenceState(entropy uint64, n int) []uint64 {
	// the entropy as little-endian 32-bit words (one zero word for 0)
	var words []uint32
	for e := entropy; ; {
		words = append(words, uint32(e))
		e >>= 32
		if e == 0 {
			break
		}
	}
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		r ^= r >> ssXShift
		return r
	}
	var pool [ssPoolSize]uint32
	for i := range pool {
		if i < len(words) {
			pool[i] = hashmix(words[i])
		} else {
			pool[i] = hashmix(0)
		}
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	for src := ssPoolSize; src < len(words); src++ {
		for dst := range pool {
			pool[dst] = mix(pool[dst], hashmix(words[src]))
		}
	}
	out32 := make([]uint32, 2*n)
	hc := uint32(ssInitB)
	for i := range out32 {
		v := pool[i%ssPoolSize]
		v ^= hc
		hc *= ssMultB
		v *= hc
		v ^= v >> ssXShift
		out32[i] = v
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(out32[2*i]) | uint64(out32[2*i+1])<<32
	}
	return out
}

// pcg64 is numpy's PCG64 (setseq 128-bit LCG, XSL-RR 64-bit output).
type pcg64 struct {
	stateHi, stateLo uint64
	incHi, incLo     uint64
	hasU32           bool
	u32              uint32
}

const (
	pcgMultHi = 0x2360ED051FC65DA4
	pcgMultLo = 0x4385DF649FCCF645
)

func (p *pcg64) step() {
	hi, lo := bits.Mul64(p.stateLo, pcgMultLo)
	hi += p.stateHi*pcgMultLo + p.stateLo*pcgMultHi
	var c uint64
	lo, c = bits.Add64(lo, p.incLo, 0)
	hi, _ = bits.Add64(hi, p.incHi, c)
	p.stateHi, p.stateLo = hi, lo
}

// newPCG64 seeds as numpy does: seed = words 0,1 (high, low), inc = words 2,3.
func newPCG64(seed uint64) *pcg64 {
	v := seedSequenceState(seed, 4)
	p := &pcg64{}
	// inc = (initseq << 1) | 1
	p.incHi = v[2]<<1 | v[3]>>63
	p.incLo = v[3]<<1 | 1
	p.step()
	var c uint64
	p.stateLo, c = bits.Add64(p.stateLo, v[1], 0)
	p.stateHi, _ = bits.Add64(p.stateHi, v[0], c)
	p.step()
	return p
}

func (p *pcg64) next64() uint64 {
	p.step()
	return bits.RotateLeft64(p.stateHi^p.stateLo, -int(p.stateHi>>58))
}

func (p *pcg64) next32() uint32 {
	if p.hasU32 {
		p.hasU32 = false
		return p.u32
	}
	n := p.next64()
	p.hasU32 = true
	p.u32 = uint32(n >> 32)
	return uint32(n)
}

// integers is Generator.integers(0, high, size=n, dtype=int64) for high ≥ 1.
func (p *pcg64) integers(high int64, n int) []int64 {
	out := make([]int64, n)
	rng := uint64(high - 1)
	for i := range out {
		switch {
		case rng == 0:
			out[i] = 0
		case rng <= 0xffffffff:
			if rng == 0xffffffff {
				out[i] = int64(p.next32())
				continue
			}
			excl := uint32(rng) + 1
			m := uint64(p.next32()) * uint64(excl)
			if uint32(m) < excl {
				threshold := (^uint32(0) - uint32(rng)) % excl
				for uint32(m) < threshold {
					m = uint64(p.next32()) * uint64(excl)
				}
			}
			out[i] = int64(m >> 32)
		default:
			excl := rng + 1
			hi, lo := bits.Mul64(p.next64(), excl)
			if lo < excl {
				threshold := (^uint64(0) - rng) % excl
				for lo < threshold {
					hi, lo = bits.Mul64(p.next64(), excl)
				}
			}
			out[i] = int64(hi)
		}
	}
	return out
}
