package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"deepinfer/quant"
)

// BF16ToFloat32 converts a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// F16ToFloat32 converts an IEEE 754 binary16 bit pattern to float32 (exact),
// including subnormals, infinities and NaN payloads.
func F16ToFloat32(v uint16) float32 {
	sign := uint32(v>>15) << 31
	exp := uint32(v>>10) & 0x1f
	mant := uint32(v) & 0x3ff
	switch {
	case exp == 0: // zero or subnormal: mant × 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		return math.Float32frombits(math.Float32bits(f) | sign)
	case exp == 0x1f: // infinity or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
	}
}

// E4M3ToFloat32 converts an OCP FP8 E4M3FN byte (bias 7, subnormals, no
// infinities, 0x7F and 0xFF are NaN) to float32.
func E4M3ToFloat32(b byte) float32 { return quant.DecodeE4M3(b) }

// E5M2ToFloat32 converts an OCP FP8 E5M2 byte, which is the high byte of a binary16, to float32.
func E5M2ToFloat32(b byte) float32 { return F16ToFloat32(uint16(b) << 8) }

// E8M0ToFloat32 converts an unsigned E8M0 scale byte to 2^(b-127); 0xFF is NaN.
func E8M0ToFloat32(b byte) float32 {
	switch b {
	case 0xff:
		return float32(math.NaN())
	case 0: // 2^-127 is a float32 subnormal
		return math.Float32frombits(1 << 22)
	}
	return math.Float32frombits(uint32(b) << 23)
}

var le = binary.LittleEndian

// floatDecoders decode one little-endian element of a float dtype.
var floatDecoders = map[DType]func([]byte) float32{
	F64:     func(p []byte) float32 { return float32(math.Float64frombits(le.Uint64(p))) },
	F32:     func(p []byte) float32 { return math.Float32frombits(le.Uint32(p)) },
	F16:     func(p []byte) float32 { return F16ToFloat32(le.Uint16(p)) },
	BF16:    func(p []byte) float32 { return BF16ToFloat32(le.Uint16(p)) },
	F8_E4M3: func(p []byte) float32 { return E4M3ToFloat32(p[0]) },
	F8_E5M2: func(p []byte) float32 { return E5M2ToFloat32(p[0]) },
	F8_E8M0: func(p []byte) float32 { return E8M0ToFloat32(p[0]) },
	U64:     func(p []byte) float32 { return float32(le.Uint64(p)) },
}

// intDecoders decode one little-endian element of an integer dtype.
var intDecoders = map[DType]func([]byte) int64{
	I64:  func(p []byte) int64 { return int64(le.Uint64(p)) },
	I32:  func(p []byte) int64 { return int64(int32(le.Uint32(p))) },
	I16:  func(p []byte) int64 { return int64(int16(le.Uint16(p))) },
	I8:   func(p []byte) int64 { return int64(int8(p[0])) },
	U32:  func(p []byte) int64 { return int64(le.Uint32(p)) },
	U16:  func(p []byte) int64 { return int64(le.Uint16(p)) },
	U8:   func(p []byte) int64 { return int64(p[0]) },
	BOOL: func(p []byte) int64 { return int64(min(p[0], 1)) },
}

// decodeAll applies dec to each size-byte element of b.
func decodeAll[T any](b []byte, size int, dec func([]byte) T) []T {
	out := make([]T, len(b)/size)
	for i := range out {
		out[i] = dec(b[i*size:])
	}
	return out
}

// toFloat32 converts raw data of dtype dt; len(b) is a multiple of dt.Size().
func toFloat32(dt DType, b []byte) ([]float32, error) {
	if dt == F32 { // fast path for the common case
		out := make([]float32, len(b)/4)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return out, nil
	}
	if dec := floatDecoders[dt]; dec != nil {
		return decodeAll(b, dt.Size(), dec), nil
	}
	if dec := intDecoders[dt]; dec != nil {
		return decodeAll(b, dt.Size(), func(p []byte) float32 { return float32(dec(p)) }), nil
	}
	return nil, fmt.Errorf("cannot convert %s to float32", dt)
}

// toInt64 converts raw data of integer dtype dt; len(b) is a multiple of dt.Size().
func toInt64(dt DType, b []byte) ([]int64, error) {
	if dec := intDecoders[dt]; dec != nil {
		return decodeAll(b, dt.Size(), dec), nil
	}
	return nil, fmt.Errorf("cannot convert %s to int64", dt)
}

// ReadOptions adjusts ReadFloat32.
type ReadOptions struct {
	// Block is the FP8 dequantization block [rows, cols]. The zero value
	// infers it from the weight and scale shapes.
	Block [2]int
	// NoDequant decodes F8_E4M3 values without applying a companion scale.
	NoDequant bool
}

// ReadFloat32 returns the named tensor converted to float32, with its shape.
// All float dtypes, the integer dtypes and BOOL are accepted. An F8_E4M3
// tensor with a companion scale tensor — name+"_scale_inv" (HF), or for a
// name ending in ".weight" the prefix+".scale" (DeepSeek) — is block
// dequantized: w[i][j] = fp8[i][j] × scale[i/b0][j/b1] with the block
// [b0, b1] from opt.Block or inferred as [ceil(out/so), ceil(in/si)].
// Without a companion the FP8 values are decoded as they are.
func (c *Checkpoint) ReadFloat32(name string, opt ReadOptions) ([]float32, []int64, error) {
	t, raw, err := c.readRaw(name)
	if err != nil {
		return nil, nil, err
	}
	vals, err := toFloat32(t.DType, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %q: %v", t.File, name, err)
	}
	if t.DType == F8_E4M3 && !opt.NoDequant {
		if s, ok := c.scaleFor(name); ok {
			if err := c.dequantize(vals, t, s, opt.Block); err != nil {
				return nil, nil, err
			}
		}
	}
	return vals, slices.Clone(t.Shape), nil
}

// ReadInt64 returns the named integer tensor (I64, I32, I16, I8, U32, U16,
// U8 or BOOL) converted to int64, with its shape.
func (c *Checkpoint) ReadInt64(name string) ([]int64, []int64, error) {
	t, raw, err := c.readRaw(name)
	if err != nil {
		return nil, nil, err
	}
	vals, err := toInt64(t.DType, raw)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %q: %v", t.File, name, err)
	}
	return vals, slices.Clone(t.Shape), nil
}

// scaleFor finds the block-scale companion of an FP8 weight.
func (c *Checkpoint) scaleFor(name string) (TensorInfo, bool) {
	if s, ok := c.tensors[name+"_scale_inv"]; ok {
		return s, true
	}
	if prefix, ok := strings.CutSuffix(name, ".weight"); ok {
		s, ok := c.tensors[prefix+".scale"]
		return s, ok
	}
	return TensorInfo{}, false
}

// ceilDiv returns ⌈a/b⌉ for a ≥ 0 and b ≥ 1 without overflowing.
func ceilDiv(a, b int64) int64 {
	if a == 0 {
		return 0
	}
	return (a-1)/b + 1
}

// dequantize multiplies the decoded FP8 weight w in place by its block scales.
func (c *Checkpoint) dequantize(w []float32, t, s TensorInfo, block [2]int) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s: dequantizing %q %v with scale %q %v: %s", t.File, t.Name, t.Shape, s.Name, s.Shape, fmt.Sprintf(format, args...))
	}
	if len(t.Shape) != 2 || len(s.Shape) != 2 {
		return fail("block scaling needs a 2-D weight and a 2-D scale")
	}
	switch s.DType {
	case F32, BF16, F16, F8_E8M0:
	default:
		return fail("scale dtype %s is not F32, BF16, F16 or F8_E8M0", s.DType)
	}
	out, in, so, si := t.Shape[0], t.Shape[1], s.Shape[0], s.Shape[1]
	if out == 0 || in == 0 {
		return nil // nothing to scale
	}
	var b0, b1 int64
	if block == [2]int{} {
		if so < 1 || si < 1 {
			return fail("scale has an empty dimension")
		}
		b0, b1 = ceilDiv(out, so), ceilDiv(in, si)
		if ceilDiv(out, b0) != so || ceilDiv(in, b1) != si {
			return fail("no block size maps the weight onto the scale shape")
		}
	} else {
		b0, b1 = int64(block[0]), int64(block[1])
		if b0 < 1 || b1 < 1 {
			return fail("invalid block %v", block)
		}
		if so != ceilDiv(out, b0) || si != ceilDiv(in, b1) {
			return fail("block %v needs scale shape [%d %d]", block, ceilDiv(out, b0), ceilDiv(in, b1))
		}
	}
	raw, err := c.files[s.File].read(s)
	if err != nil {
		return err
	}
	scale, err := toFloat32(s.DType, raw)
	if err != nil {
		return fail("%v", err)
	}
	for i := range out {
		row, srow := w[i*in:(i+1)*in], scale[(i/b0)*si:]
		for j := range row {
			row[j] *= srow[int64(j)/b1]
		}
	}
	return nil
}
