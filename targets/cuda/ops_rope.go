package cuda

import (
	"os"

	"deepinfer/targets/ropefreq"
)

// Binder of rope.cu's kernel, and the RoPE tables every rotating kernel takes (the
// compressor rotates its entries too).

func init() { register("rope", bindRope) }

// ropeMaxFreqs is the most frequencies a RopeSpec (attention.cu) carries: rope_dim ≤ 128.
const ropeMaxFreqs = 64

// ropeSpec is attention.cu's struct RopeSpec: the inverse frequencies of the interleaved
// partial RoPE, computed here exactly as the cpu target computes them (targets/cpu/rope.go:
// inverseFrequencies, or inverseFrequencies32 under rope_fp32), so that the kernels only
// evaluate the angles.
type ropeSpec struct {
	headDim, ropeDim int64
	fp32             bool
	attnFactor       float64
	inv              []float64 // rope_fp32: float32 values, widened
}

func newRopeSpec(b *Bind, headDim int64) (ropeSpec, error) {
	rd := b.Int("rope_dim")
	if rd <= 0 || rd%2 != 0 || rd > headDim || rd/2 > ropeMaxFreqs {
		return ropeSpec{}, b.Errorf("rope_dim %d for heads of %d (at most %d)", rd, headDim, 2*ropeMaxFreqs)
	}
	r := ropeSpec{headDim: headDim, ropeDim: rd, attnFactor: 1}
	if v, ok := b.Attrs.Float("attn_factor"); ok {
		r.attnFactor = v
	}
	theta := b.Float("theta")
	if b.Bool("rope_fp32") {
		r.fp32 = true
		for _, f := range ropefreq.Inverse32(int(rd), float32(theta), b.Attrs) {
			r.inv = append(r.inv, float64(f))
		}
	} else {
		r.inv = ropefreq.Inverse(int(rd), theta, b.Attrs)
	}
	return r, nil
}

// put appends struct RopeSpec {head_dim, rope_dim, fp32, attn, inv[ropeMaxFreqs]}.
func (r *ropeSpec) put(a *ArgBuf) {
	a.I(r.headDim)
	a.I(r.ropeDim)
	if r.fp32 {
		a.I(1)
	} else {
		a.I(0)
	}
	a.F(r.attnFactor)
	for i := 0; i < ropeMaxFreqs; i++ {
		if i < len(r.inv) {
			a.F(r.inv[i])
		} else {
			a.F(0)
		}
	}
}

// bindRope: rope(x[T, H·head_dim], pos[T]), every head of every row rotated at its
// token's position (inverse: by -θ).
func bindRope(b *Bind) error {
	hd := b.Int("head_dim")
	W := b.Args[0].Last()
	if hd <= 0 || W%hd != 0 {
		return b.Errorf("head_dim %d does not split rows of %d", hd, W)
	}
	spec, err := newRopeSpec(b, hd)
	if err != nil {
		return err
	}
	sign := 1.0
	if b.Bool("inverse") {
		sign = -1
	}
	H := W / hd
	args := func(s *Step, a *ArgBuf) {
		a.P(s.Arg(0).Ptr)
		a.P(s.Arg(1).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(s.Arg(0).Rows())
		a.I(H)
		a.F(sign)
		a.I(b2i(s.Round))
		spec.put(a)
	}
	b.RoundsOnStore()
	// the channels before the rotated ones, when the result is not the input: four a
	// work item where they are whole aligned float4s (rope_copy4), else one
	keep := hd - spec.ropeDim
	copies := func(s *Step) bool { return (s.Result(0).Ptr != s.Arg(0).Ptr || s.Round) && keep > 0 }
	vecOK := hd%4 == 0 && keep%4 == 0 && os.Getenv(EnvRopeCopy4) != "0"
	vec := func(s *Step) bool { return vecOK && s.Arg(0).Ptr%16 == 0 && s.Result(0).Ptr%16 == 0 }
	// a work item per (token, group of ropeHeads heads, channel pair)
	applyItems := func(s *Step) int64 { return s.Arg(0).Rows() * ((H + ropeHeads - 1) / ropeHeads) * (spec.ropeDim / 2) }
	// rope_one: the copies' items and the rotations' in one launch (EnvRopeOne=0: two)
	one := os.Getenv(EnvRopeOne) != "0"
	b.Launch("rope_one", func(s *Step, a *ArgBuf) int64 {
		if !one {
			return 0
		}
		args(s, a)
		c4, nc := vec(s), int64(0)
		if copies(s) {
			nc = s.Arg(0).Rows() * H * keep
			if c4 {
				nc /= 4
			}
		}
		a.I(hd / 4)
		a.I(keep / 4)
		a.I(b2i(c4))
		a.I(nc)
		return nc + applyItems(s)
	})
	b.Launch("rope_copy4", func(s *Step, a *ArgBuf) int64 {
		if one || !copies(s) || !vec(s) {
			return 0
		}
		a.P(s.Arg(0).Ptr)
		a.P(s.Result(0).Ptr)
		a.I(s.Arg(0).Rows() * H)
		a.I(hd / 4)
		a.I(keep / 4)
		a.I(b2i(s.Round))
		return s.Arg(0).Rows() * H * keep / 4
	})
	b.Launch("rope_copy", func(s *Step, a *ArgBuf) int64 {
		if one || !copies(s) || vec(s) {
			return 0
		}
		args(s, a)
		return s.Arg(0).Rows() * H * keep
	})
	b.Launch("rope_apply", func(s *Step, a *ArgBuf) int64 {
		if one {
			return 0
		}
		args(s, a)
		return applyItems(s)
	})
	return nil
}

// EnvRopeOne set to 0 runs rope's copies of the kept channels (rope_copy4, rope_copy) and
// its rotations (rope_apply) as two launches instead of one (rope_one: the same items,
// the same values; for comparisons; read when a program is bound).
const EnvRopeOne = "DEEPINFER_CUDA_ROPE_ONE"

// EnvRopeCopy4 set to 0 copies rope's kept channels one a work item (rope_copy) even
// where rope_copy4 could copy four (the same values; for comparisons; read when a
// program is bound).
const EnvRopeCopy4 = "DEEPINFER_CUDA_ROPE_COPY4"

// ropeHeads is rope.cu's ROPE_HG: the heads one rope_apply work item rotates.
const ropeHeads = 8
