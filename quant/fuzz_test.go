package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

var e4m3Grid = func() (g []float32) {
	for _, v := range finiteE4M3() {
		if v >= 0 {
			g = append(g, v)
		}
	}
	return g
}()

// FuzzE4M3 checks the FP8 encoder and the bit rounding against the nearest-value oracle
// for any float32, and that decoding any byte then encoding it is stable.
func FuzzE4M3(f *testing.F) {
	for _, x := range []float32{0, 1, 448, 449, 464, 1.0 / 1024, 0.0146484375, 0.01513671875, float32(math.Inf(1))} {
		f.Add(math.Float32bits(x), byte(0))
	}
	f.Fuzz(func(t *testing.T, bits uint32, code byte) {
		checkE4M3(t, math.Float32frombits(bits), e4m3Grid)
		if x := DecodeE4M3(code); x == x && DecodeE4M3(EncodeE4M3(x)) != x {
			t.Fatalf("code %#x: %v does not survive a round trip", code, x)
		}
	})
}

// FuzzE2M1 checks the FP4 encoder against the nearest-value oracle (saturating at 6).
func FuzzE2M1(f *testing.F) {
	for _, x := range []float32{0, 0.25, 0.75, 2.5, 5, 6, 7, -1.25} {
		f.Add(math.Float32bits(x))
	}
	f.Fuzz(func(t *testing.T, bits uint32) {
		x := math.Float32frombits(bits)
		if x != x {
			return
		}
		a := math.Min(math.Abs(float64(x)), 6)
		want := nearest(a, e2m1Values[:], e2m1Code)
		got := DecodeE2M1(EncodeE2M1(x))
		if math.Abs(float64(got)) != float64(want) || (got != 0 && math.Signbit(float64(got)) != math.Signbit(float64(x))) {
			t.Fatalf("EncodeE2M1(%v) → %v, want ±%v", x, got, want)
		}
	})
}

// FuzzDequantFP4 feeds the checkpoint FP4 decoder arbitrary bytes and geometry: it must
// refuse what does not fit and otherwise decode every element as code × 2^(scale−127).
func FuzzDequantFP4(f *testing.F) {
	f.Add([]byte{0xA1, 0x07}, []byte{128, 126}, uint8(1), uint8(4), uint8(2))
	f.Add(make([]byte, 16), make([]byte, 1), uint8(1), uint8(32), uint8(32))
	f.Fuzz(func(t *testing.T, packed, scales []byte, rows, cols, g uint8) {
		out, err := DequantFP4(packed, scales, int(rows), int(cols), int(g))
		if err != nil {
			return
		}
		if len(out) != int(rows)*int(cols) {
			t.Fatalf("%d values for %d×%d", len(out), rows, cols)
		}
		for i, v := range out {
			c := packed[i/2] >> (4 * (i % 2)) & 0xf
			want := DecodeE2M1(c) * DecodeUE8M0(scales[i/int(g)])
			if math.Float32bits(v) != math.Float32bits(want) && !(v != v && want != want) {
				t.Fatalf("elem %d: %v, want %v", i, v, want)
			}
		}
	})
}

// FuzzPackUnpack: for any finite row, each block format's packed bytes decode to what
// FakeQuant computes, and Unpack of arbitrary bytes never panics.
func FuzzPackUnpack(f *testing.F) {
	f.Add(make([]byte, 4*32), uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, which uint8) {
		n := len(raw) / 4 / 32 * 32
		if n == 0 || n > 4096 {
			return
		}
		row := make([]float32, n)
		for i := range row {
			row[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			if row[i] != row[i] || math.IsInf(float64(row[i]), 0) || math.Abs(float64(row[i])) > 1e30 {
				return
			}
		}
		fm := []Format{MXFP8, FP4UE8M0, FP4E4M3}[int(which)%3]
		g := []int{16, 32}[int(which/3)%2]
		fq := append([]float32(nil), row...)
		fm.FakeQuant(fq, g)
		buf := make([]byte, fm.RowBytes(n, g))
		fm.Pack(row, g, buf)
		got := make([]float32, n)
		fm.Unpack(buf, g, got)
		for i := range got {
			if got[i] != fq[i] {
				t.Fatalf("%s g%d elem %d (%v): unpacked %v, fake-quantized %v", fm, g, i, row[i], got[i], fq[i])
			}
		}
		fm.Unpack(raw[:fm.RowBytes(n, g)], g, got) // arbitrary codes and scales
	})
}
