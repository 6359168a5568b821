package calib

import (
	"math"
	"os"
	"testing"
)

// FuzzParseBench: any input gives a report that keeps ParseBench's promises, or an
// error; never a panic.
func FuzzParseBench(f *testing.F) {
	for _, p := range []string{"testdata/small.bench.json", "testdata/beyond.bench.json", "testdata/run8/v4.fast.long.bench.json", "testdata/run8/v4.fast.nographs.bench.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"Points": [{"Batch": 1, "Context": 0, "MedianMs": 1e308, "ClassMs": {"": 0}}]}`))
	f.Add([]byte(`{"Points": null}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseBench(data)
		if err != nil {
			if r != nil {
				t.Fatal("a report with an error")
			}
			return
		}
		if len(r.Points) == 0 {
			t.Fatal("accepted a report without points")
		}
		for _, p := range r.Points {
			if p.Batch < 1 || p.Context < 0 || !(p.MedianMs > 0) || math.IsInf(p.MedianMs, 0) {
				t.Fatalf("accepted point %+v", p)
			}
			for k, v := range p.ClassMs {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("accepted class %q = %g", k, v)
				}
			}
		}
		_ = Numerics(r)
	})
}
