package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// finiteE4M3 lists the finite E4M3 values (both zeros included).
func finiteE4M3() []float32 {
	var v []float32
	for c := 0; c < 256; c++ {
		if x := DecodeE4M3(byte(c)); x == x {
			v = append(v, x)
		}
	}
	return v
}

// nearest returns the value of grid nearest to x, ties to the one whose code is even
// (codeOf gives it); the oracle the encoders are checked against.
func nearest(x float64, grid []float32, codeOf func(float32) byte) float32 {
	best := grid[0]
	bd := math.Inf(1)
	for _, g := range grid {
		d := math.Abs(float64(g) - x)
		switch {
		case d < bd:
			best, bd = g, d
		case d == bd && codeOf(g)&1 == 0 && codeOf(best)&1 == 1:
			best = g
		}
	}
	return best
}

func TestE4M3Codes(t *testing.T) {
	nan := 0
	for c := 0; c < 256; c++ {
		x := DecodeE4M3(byte(c))
		if x != x {
			nan++
			if c&0x7f != 0x7f {
				t.Errorf("code %#x decodes to NaN", c)
			}
			continue
		}
		if back := EncodeE4M3(x); back != byte(c) {
			t.Errorf("code %#x = %v encodes back to %#x", c, x, back)
		}
		if RoundE4M3(x) != x {
			t.Errorf("RoundE4M3(%v) = %v", x, RoundE4M3(x))
		}
	}
	if nan != 2 || DecodeE4M3(0x7e) != 448 || DecodeE4M3(0x01) != 1.0/512 || DecodeE4M3(0x08) != 1.0/64 {
		t.Fatalf("E4M3 table: %d NaNs, max %v, min subnormal %v, min normal %v", nan, DecodeE4M3(0x7e), DecodeE4M3(1), DecodeE4M3(8))
	}
}

func e4m3Code(x float32) byte { return EncodeE4M3(x) &^ 0x80 }

// checkE4M3 compares the encoder and the bit rounding with the nearest-value oracle.
func checkE4M3(t *testing.T, x float32, grid []float32) {
	t.Helper()
	if x != x {
		if EncodeE4M3(x) != 0x7f {
			t.Fatalf("NaN encodes to %#x", EncodeE4M3(x))
		}
		return
	}
	a := math.Abs(float64(x))
	want := float32(448)
	if a < 448 {
		want = nearest(a, grid, e4m3Code)
	}
	if math.Signbit(float64(x)) {
		want = -want
	}
	if got := DecodeE4M3(EncodeE4M3(x)); got != want {
		t.Fatalf("EncodeE4M3(%v) → %v, want %v", x, got, want)
	}
	if a <= 448 {
		if got := RoundE4M3(x); got != want {
			t.Fatalf("RoundE4M3(%v) = %v, want %v", x, got, want)
		}
	}
}

func TestE4M3Rounding(t *testing.T) {
	var grid []float32
	for _, v := range finiteE4M3() {
		if v >= 0 {
			grid = append(grid, v)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		checkE4M3(t, float32(r.NormFloat64()*math.Exp2(float64(r.IntN(30)-20))), grid)
	}
	// every midpoint between neighbours, and just either side of it
	for i := 0; i+1 < len(grid); i++ {
		m := (grid[i] + grid[i+1]) / 2
		for _, x := range []float32{m, math.Nextafter32(m, 0), math.Nextafter32(m, 1000)} {
			checkE4M3(t, x, grid)
			checkE4M3(t, -x, grid)
		}
	}
}

func e2m1Code(x float32) byte { return EncodeE2M1(x) & 7 }

func TestE2M1(t *testing.T) {
	grid := e2m1Values[:]
	for c := 0; c < 16; c++ {
		x := DecodeE2M1(byte(c))
		if EncodeE2M1(x) != byte(c) && !(x == 0 && c == 8) {
			t.Errorf("nibble %#x = %v encodes back to %#x", c, x, EncodeE2M1(x))
		}
	}
	for i := 0; i <= 1400; i++ {
		x := float32(i) / 200 // 0..7 in steps of 0.005, hitting every midpoint
		want := nearest(float64(min(x, 6)), grid, e2m1Code)
		if got := DecodeE2M1(EncodeE2M1(x)); got != want {
			t.Fatalf("EncodeE2M1(%v) → %v, want %v", x, got, want)
		}
		if got := DecodeE2M1(EncodeE2M1(-x)); got != -want {
			t.Fatalf("EncodeE2M1(%v) → %v, want %v", -x, got, -want)
		}
	}
}

func TestBF16(t *testing.T) {
	for _, c := range []struct{ in, want float32 }{
		{1, 1}, {1 + 1.0/256, 1}, {1 + 3.0/256, 1 + 1.0/64}, {1 + 1.0/128, 1 + 1.0/128}, {-2.00390625, -2},
	} {
		if got := BF16(c.in); got != c.want {
			t.Errorf("BF16(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	if x := BF16(float32(math.NaN())); x == x {
		t.Error("BF16(NaN) is not NaN")
	}
}

func TestPow2CeilAndUE8M0(t *testing.T) {
	for _, c := range []struct{ in, want float32 }{{1, 1}, {1.5, 2}, {0.3, 0.5}, {448, 512}, {1e-45, 0x1p-126}} {
		if got := Pow2Ceil(c.in); got != c.want {
			t.Errorf("Pow2Ceil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	for b := 1; b < 255; b++ {
		s := DecodeUE8M0(byte(b))
		if UE8M0(s) != byte(b) || s != float32(math.Exp2(float64(b-127))) {
			t.Errorf("UE8M0 byte %d: %v", b, s)
		}
	}
}

// TestPackUnpack: a packed row decodes to exactly what FakeQuant leaves in place.
func TestPackUnpack(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, f := range []Format{MXFP8, FP4UE8M0, FP4E4M3} {
		for _, g := range []int{16, 32} {
			row := make([]float32, 128)
			for i := range row {
				row[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(12)-6)))
			}
			fq := append([]float32(nil), row...)
			f.FakeQuant(fq, g)
			buf := make([]byte, f.RowBytes(len(row), g))
			f.Pack(row, g, buf)
			got := make([]float32, len(row))
			f.Unpack(buf, g, got)
			for i := range got {
				if got[i] != fq[i] {
					t.Fatalf("%s g%d elem %d: unpacked %v, fake-quantized %v", f, g, i, got[i], fq[i])
				}
			}
			// idempotent: quantizing a quantized row changes nothing
			again := append([]float32(nil), fq...)
			f.FakeQuant(again, g)
			for i := range again {
				if again[i] != fq[i] {
					t.Fatalf("%s g%d: FakeQuant not idempotent at %d: %v then %v", f, g, i, fq[i], again[i])
				}
			}
		}
	}
}

func TestDequantFP4(t *testing.T) {
	// 1×4 in groups of 2: codes 1 (0.5), 0xA (-1), 7 (6), 0 ; scales 2^1, 2^-1
	out, err := DequantFP4([]byte{0xA1, 0x07}, []byte{128, 126}, 1, 4, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, -2, 3, 0}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("DequantFP4 = %v, want %v", out, want)
		}
	}
	for _, bad := range [][3]int{{1, 3, 1}, {1, 4, 3}, {-1, 4, 2}, {1, 0, 2}, {2, 4, 2}} {
		if _, err := DequantFP4([]byte{0xA1, 0x07}, []byte{128, 126}, bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("geometry %v accepted", bad)
		}
	}
}
