// Package quant holds the number formats DeepSeek-V4.1's reference code computes in, as
// exact scalar codecs: bfloat16 rounding, FP8 E4M3 (OCP "fn": no infinities), FP4 E2M1,
// and the UE8M0 power-of-two scale byte.
//
// The reference rounds through these formats at every step (MODEL.md §2,
// "Quantization"): activations are quantized to MXFP8 (E4M3 with one power-of-two scale
// per 32 values) before every FP8/FP4 GEMM, the window KV is fake-quantized the same
// way, compressed KV entries are FP4 with an E4M3 scale per 16 values, indexer queries
// and keys FP4 with a UE8M0 scale per 32. Every conversion here rounds to nearest, ties
// to even, which is what the GPU conversions (and torch's casts) do.
package quant

import "math"

// BF16 rounds x to the nearest bfloat16 value (ties to even) and returns it as float32.
// NaN stays NaN; values past the bfloat16 range round to ±Inf.
func BF16(x float32) float32 {
	b := math.Float32bits(x)
	if b&0x7fffffff > 0x7f800000 {
		return x
	}
	b += 0x7fff + (b>>16)&1
	return math.Float32frombits(b &^ 0xffff)
}

// BF16Slice rounds every element of x in place.
func BF16Slice(x []float32) {
	for i, v := range x {
		x[i] = BF16(v)
	}
}

// E4M3Max is the largest finite FP8 E4M3 magnitude.
const E4M3Max = 448

var e4m3Table = func() (t [256]float32) {
	for i := range t {
		t[i] = decodeE4M3(byte(i))
	}
	return t
}()

func decodeE4M3(b byte) float32 {
	sign := uint32(b>>7) << 31
	exp := uint32(b>>3) & 0xf
	mant := uint32(b) & 7
	switch {
	case exp == 0xf && mant == 7:
		return float32(math.NaN())
	case exp == 0:
		f := float32(mant) * (1.0 / 512)
		return math.Float32frombits(math.Float32bits(f) | sign)
	}
	return math.Float32frombits(sign | (exp+127-7)<<23 | mant<<20)
}

// DecodeE4M3 converts an FP8 E4M3FN byte to float32 (0x7F and 0xFF are NaN).
func DecodeE4M3(b byte) float32 { return e4m3Table[b] }

// EncodeE4M3 rounds x to the nearest E4M3 value, ties to even. Magnitudes at or past
// 448 saturate to ±448 (callers clamp first, as the reference does); NaN maps to 0x7F.
func EncodeE4M3(x float32) byte {
	if x != x {
		return 0x7f
	}
	var sign byte
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	if a >= E4M3Max {
		return sign | 0x7e
	}
	if a < 1.0/64 { // subnormal range: multiples of 2^-9
		q := math.RoundToEven(a * 512) // 0..8; 8 is the smallest normal
		return sign | byte(q)
	}
	frac, exp := math.Frexp(a) // a = frac·2^exp, frac in [0.5, 1)
	e := exp - 1               // a = (2·frac)·2^e, 2·frac in [1, 2)
	m := math.RoundToEven((2*frac - 1) * 8)
	if m == 8 {
		m = 0
		e++
	}
	if e+7 > 15 || (e+7 == 15 && m == 7) {
		return sign | 0x7e
	}
	return sign | byte(e+7)<<3 | byte(m)
}

// e2m1Values are the FP4 E2M1 magnitudes of codes 0..7.
var e2m1Values = [8]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}

// E2M1Max is the largest FP4 E2M1 magnitude.
const E2M1Max = 6

// DecodeE2M1 converts the low nibble of c (sign bit 3, exponent bits 2-1, mantissa bit
// 0) to float32.
func DecodeE2M1(c byte) float32 {
	v := e2m1Values[c&7]
	if c&8 != 0 {
		return -v
	}
	return v
}

// EncodeE2M1 rounds x to the nearest E2M1 value, ties to even (to the code with a zero
// mantissa bit); magnitudes past 6 saturate. The result is a nibble.
func EncodeE2M1(x float32) byte {
	var sign byte
	if math.Signbit(float64(x)) {
		sign = 8
	}
	a := math.Abs(float64(x))
	var code float64
	switch {
	case a != a:
		return sign | 7
	case a >= 6:
		code = 7
	case a < 2: // codes 0..4 step 0.5
		code = math.RoundToEven(a * 2)
	case a < 4: // codes 4..6 step 1
		code = 4 + math.RoundToEven(a-2)
	default: // codes 6..7 step 2
		code = 6 + math.RoundToEven((a-4)/2)
	}
	return sign | byte(code)
}

// Pow2Ceil is the smallest power of two at or above x for positive normal x, computed
// from the float's bits as the reference kernels do (exponent plus one when any mantissa
// bit is set). x at or below 2^-126 gives 2^-126.
func Pow2Ceil(x float32) float32 {
	b := math.Float32bits(x)
	e := int32(b>>23&0xff) - 127
	if b&0x7fffff != 0 {
		e++
	}
	if e < -126 {
		e = -126
	}
	if e > 127 {
		e = 127
	}
	return math.Float32frombits(uint32(e+127) << 23)
}

// UE8M0 is the scale byte of a power-of-two scale s (its biased exponent).
func UE8M0(s float32) byte { return byte(math.Float32bits(s) >> 23) }

// DecodeUE8M0 converts a UE8M0 scale byte to 2^(b-127); 0xFF is NaN.
func DecodeUE8M0(b byte) float32 {
	switch b {
	case 0xff:
		return float32(math.NaN())
	case 0:
		return math.Float32frombits(1 << 22)
	}
	return math.Float32frombits(uint32(b) << 23)
}
