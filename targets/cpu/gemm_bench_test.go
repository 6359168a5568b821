package cpu

import (
	"fmt"
	"testing"
)

// BenchmarkGEMM reports the cpu target's matmul rate (y = x·Wᵀ) in GFLOP/s.
func BenchmarkGEMM(b *testing.B) {
	for _, s := range [][3]int{{1, 4096, 4096}, {64, 4096, 4096}, {512, 1024, 1024}, {1024, 4096, 4096}} {
		m, n, k := s[0], s[1], s[2]
		b.Run(fmt.Sprintf("m%d_n%d_k%d", m, n, k), func(b *testing.B) {
			a := make([]float32, m*k)
			w := make([]float32, n*k)
			c := make([]float32, m*n)
			for i := range a {
				a[i] = float32(i%7) * 0.1
			}
			for i := range w {
				w[i] = float32(i%5) * 0.1
			}
			b.ResetTimer()
			for b.Loop() {
				gemmNT(m, n, k, a, k, w, k, c, n)
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
