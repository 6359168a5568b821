package cost_test

import (
	"bytes"
	"math"
	"testing"

	_ "deepinfer/targets/all"
	"deepinfer/targets/cost"
)

// FuzzReadTable feeds the kernel-table reader (what `dic cost --csv` reads) and prices
// every kernel it accepts with the h200 model: an error or a finite, non-negative
// prediction, never a panic.
func FuzzReadTable(f *testing.F) {
	f.Add([]byte("op,dtype,m,n,k,groups,extra,median_us\ngemm,bf16,128,4096,7168,1,,21.5\n"))
	f.Add([]byte("op,dtype,m,n,k,groups,extra\ngrouped_gemm,fp8e4m3,64,4096,7168,8,masked\nflash_mqa_decode,bf16,32,8192,512,64,\n"))
	f.Add([]byte("op,dtype,m,n,k,groups,extra\ncopy,bf16,1,1,1,1,\"a,b\"\n"))
	f.Add([]byte("op,dtype,m,n,k,groups,extra\ngemm,bf16,-1,99999999999999999999,0,0,\n"))
	m, err := cost.For("h200")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tb, err := cost.ReadTable("fuzz.csv", bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, k := range tb.Kernels {
			us, _, err := m.Predict(k)
			if err != nil {
				continue
			}
			if math.IsNaN(us) || math.IsInf(us, 0) || us < 0 {
				t.Fatalf("%+v: predicted %g µs", k, us)
			}
		}
	})
}
