package cpu

import (
	"fmt"
	"os"
	"testing"

	"deepinfer/safetensors"
)

// genProbe regenerates probe_gemm.py's inputs.
func genProbe(rows, cols, seed int, kind string) []float32 {
	out := make([]float32, rows*cols)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			h := (int64(i)*1000003 + int64(j)*7919 + int64(seed)*15485863) % 2147483647
			h = (h * 48271) % 2147483647
			if kind == "x" {
				out[i*cols+j] = float32(h%255-127) / 32
			} else {
				out[i*cols+j] = float32(h%65537-32768) * 0x1p-20
			}
		}
	}
	return out
}

// TestProbeM compares fp32Linear with torch's F.linear outputs recorded by
// tools/v41/probe_gemm.py (V41PROBE names the file; skipped without it) and lists, per
// shape, the row counts whose order it does not reproduce.
func TestProbeM(t *testing.T) {
	p := os.Getenv("V41PROBE")
	if p == "" {
		t.Skip("V41PROBE not set: run tools/v41/probe_gemm.py on the reference's machine type first")
	}
	f, err := safetensors.OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	Ms := []int{}
	for m := 1; m < 70; m++ {
		Ms = append(Ms, m)
	}
	Ms = append(Ms, 96, 100, 127, 128, 129, 150, 200)
	for _, kn := range [][2]int{{1024, 24}, {256, 64}, {256, 512}, {512, 24}, {32, 512}, {288, 1}} {
		K, N := kn[0], kn[1]
		x := genProbe(200, K, K+N, "x")
		w := genProbe(N, K, K*3+N, "w")
		line := ""
		for _, M := range Ms {
			want, _, err := f.ReadFloat32(fmt.Sprintf("y.%d.%d.%d", K, N, M), safetensors.ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			y := make([]float32, M*N)
			fp32Linear(M, K, N, x[:M*K], w, y)
			bad := 0
			for i := range y {
				if y[i] != want[i] {
					bad++
				}
			}
			if bad > 0 {
				line += fmt.Sprintf(" M%d:%d/%d", M, bad, len(y))
				// the mHC mixes' shape is claimed exact (v41_order.go) up to 128 rows
				// but for the row counts listed there
				if K == 1024 && N == 24 && M <= 128 && M != 16 && M != 65 && M != 66 && M != 69 {
					t.Errorf("K=%d N=%d M=%d: %d of %d outputs differ from torch's", K, N, M, bad, len(y))
				}
			}
		}
		t.Logf("K=%d N=%d mismatches:%s", K, N, line)
	}
}
