package quant

import (
	"fmt"
	"math"
)

// Block formats: a row is cut into groups of Group values that share one scale.
//
//	MXFP8       E4M3 codes, UE8M0 scale 2^⌈log2(max(amax, 1e-4)/448)⌉ (act_quant)
//	FP4UE8M0    E2M1 codes, UE8M0 scale 2^⌈log2(max(amax, 6·2^-126)/6)⌉ (indexer q, k)
//	FP4E4M3     E2M1 codes, E4M3 scale e4m3(max(amax, 6·2^-9)/6) (compressed KV)
//
// A code is q = clamp(x/s, ±max) rounded to the element format; the value is q·s.
type Format uint8

// Block formats.
const (
	MXFP8 Format = iota + 1
	FP4UE8M0
	FP4E4M3
)

func (f Format) String() string {
	switch f {
	case MXFP8:
		return "mxfp8"
	case FP4UE8M0:
		return "fp4_ue8m0"
	case FP4E4M3:
		return "fp4_e4m3"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat is the inverse of Format.String.
func ParseFormat(s string) (Format, bool) {
	for _, f := range []Format{MXFP8, FP4UE8M0, FP4E4M3} {
		if f.String() == s {
			return f, true
		}
	}
	return 0, false
}

// CodeBits is the size of one element code.
func (f Format) CodeBits() int {
	if f == MXFP8 {
		return 8
	}
	return 4
}

// RowBytes is the packed size of an n-value row in groups of g: codes plus one scale
// byte per group.
func (f Format) RowBytes(n, g int) int { return n*f.CodeBits()/8 + n/g }

const (
	fp8MaxInv = float32(1.0 / 448)
	fp4MaxInv = float32(1.0 / 6)
)

// Scale is the group scale for a group whose largest magnitude is amax.
func (f Format) Scale(amax float32) float32 {
	switch f {
	case MXFP8:
		return Pow2Ceil(max(amax, 1e-4) * fp8MaxInv)
	case FP4UE8M0:
		return Pow2Ceil(max(amax, 6*0x1p-126) * fp4MaxInv)
	case FP4E4M3:
		return DecodeE4M3(EncodeE4M3(max(amax, 6*0x1p-9) / 6))
	}
	panic("quant: unknown format")
}

func (f Format) scaleByte(s float32) byte {
	if f == FP4E4M3 {
		return EncodeE4M3(s)
	}
	return UE8M0(s)
}

func (f Format) decodeScale(b byte) float32 {
	if f == FP4E4M3 {
		return DecodeE4M3(b)
	}
	return DecodeUE8M0(b)
}

func absMax(x []float32) float32 {
	var m float32
	for _, v := range x {
		m = max(m, float32(math.Abs(float64(v))))
	}
	return m
}

// RoundE4M3 rounds v (|v| ≤ 448) to the nearest E4M3 value, ties to even; the same
// value EncodeE4M3 then DecodeE4M3 give, computed on the float's bits.
func RoundE4M3(v float32) float32 {
	b := math.Float32bits(v)
	a := b & 0x7fffffff
	if a < 0x3c800000 { // below 2^-6: multiples of 2^-9
		return float32(math.RoundToEven(float64(v)*512) / 512)
	}
	a += 0x7ffff + (a>>20)&1
	a &^= 0xfffff
	if a > 0x43e00000 { // past 448
		a = 0x43e00000
	}
	return math.Float32frombits(b&0x80000000 | a)
}

// FakeQuant replaces every group of g values of x by its quantized value q·s.
func (f Format) FakeQuant(x []float32, g int) {
	for c := 0; c+g <= len(x); c += g {
		grp := x[c : c+g]
		s := f.Scale(absMax(grp))
		for i, v := range grp {
			grp[i] = f.roundScaled(v, s) * s
		}
	}
}

// roundScaled is the element code's value for v in units of s.
func (f Format) roundScaled(v, s float32) float32 {
	if f == MXFP8 {
		return RoundE4M3(min(max(v/s, -E4M3Max), E4M3Max))
	}
	return DecodeE2M1(EncodeE2M1(min(max(v/s, -E2M1Max), E2M1Max)))
}

// Pack quantizes row (len n, a multiple of g) into dst, which must hold RowBytes(n, g):
// the codes (FP4: two per byte, the even element in the low nibble) then the scales.
func (f Format) Pack(row []float32, g int, dst []byte) {
	n := len(row)
	codes, scales := dst[:n*f.CodeBits()/8], dst[n*f.CodeBits()/8:]
	for gi := 0; gi*g < n; gi++ {
		grp := row[gi*g : (gi+1)*g]
		s := f.Scale(absMax(grp))
		scales[gi] = f.scaleByte(s)
		for i, v := range grp {
			j := gi*g + i
			if f == MXFP8 {
				codes[j] = EncodeE4M3(min(max(v/s, -E4M3Max), E4M3Max))
				continue
			}
			c := EncodeE2M1(min(max(v/s, -E2M1Max), E2M1Max))
			if j%2 == 0 {
				codes[j/2] = codes[j/2]&0xf0 | c
			} else {
				codes[j/2] = codes[j/2]&0x0f | c<<4
			}
		}
	}
}

// Unpack decodes a packed row of len(dst) values in groups of g into dst.
func (f Format) Unpack(src []byte, g int, dst []float32) {
	n := len(dst)
	codes, scales := src[:n*f.CodeBits()/8], src[n*f.CodeBits()/8:]
	for j := range dst {
		s := f.decodeScale(scales[j/g])
		if f == MXFP8 {
			dst[j] = DecodeE4M3(codes[j]) * s
			continue
		}
		c := codes[j/2]
		if j%2 == 1 {
			c >>= 4
		}
		dst[j] = DecodeE2M1(c&0xf) * s
	}
}

// DequantFP4 expands a checkpoint FP4 matrix: packed holds rows×cols/2 bytes (the even
// element of each pair in the low nibble), scales rows×cols/g UE8M0 bytes. It returns
// the rows×cols values.
func DequantFP4(packed, scales []byte, rows, cols, g int) ([]float32, error) {
	if rows < 0 || cols <= 0 || g <= 0 || cols%2 != 0 || cols%g != 0 {
		return nil, fmt.Errorf("fp4: bad geometry %d×%d in groups of %d", rows, cols, g)
	}
	if len(packed) != rows*cols/2 || len(scales) != rows*cols/g {
		return nil, fmt.Errorf("fp4: %d code bytes and %d scales for %d×%d in groups of %d (want %d and %d)",
			len(packed), len(scales), rows, cols, g, rows*cols/2, rows*cols/g)
	}
	out := make([]float32, rows*cols)
	for i := range out {
		c := packed[i/2]
		if i%2 == 1 {
			c >>= 4
		}
		out[i] = DecodeE2M1(c&0xf) * DecodeUE8M0(scales[i/g])
	}
	return out, nil
}
