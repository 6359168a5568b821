package sim

import (
	"math"
	"strings"
	"testing"
)

// FuzzWorkload feeds the workload parsers (a file's YAML/JSON and the inline key=value
// form): they return a workload that passes its checks or an error, never panic.
func FuzzWorkload(f *testing.F) {
	f.Add([]byte("concurrency_per_rank: 256\nrequests: 16384\ninput_len: fixed:130560\noutput_len: fixed:512\nseed: 1\n"))
	f.Add([]byte(`{"rate": 3.5, "requests": 10, "input_len": "uniform:1:9", "output_len": "normal:100:20", "acceptance": [0.5, 0.5]}`))
	f.Add([]byte("concurrency_per_rank=4,requests=8,input_len=fixed:16,output_len=uniform:1:4,seed=7"))
	f.Add([]byte("rate=1e308,requests=1,input_len=normal:1:1e9,output_len=fixed:0"))
	f.Add([]byte("concurrency_per_rank=4,requests=8,input_len=fixed:16,output_len=fixed:4,temperature=0.7"))
	f.Add([]byte("concurrency_per_rank: 2\nrequests: 3\ninput_len: fixed:5\noutput_len: fixed:5\ntemperature: -0.0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var w *Workload
		var err error
		if s := string(data); strings.Contains(s, "=") && !strings.ContainsAny(s, "/{") {
			w, err = ReadWorkload(s)
		} else {
			w, err = ParseWorkload(data, "workload.yaml")
		}
		if err != nil {
			return
		}
		if w.check() != nil {
			t.Fatalf("accepted a workload its own check refuses: %+v", w)
		}
		if w.in.upper() > 1<<26 || w.out.upper() > 1<<26 || len(w.Acceptance) > 33 || w.ConcurrencyPerRank > 1<<20 ||
			!(w.Temperature >= 0) || math.IsInf(w.Temperature, 0) {
			t.Fatalf("accepted an unbounded workload: %+v", w)
		}
	})
}
