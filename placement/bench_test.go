package placement

import (
	"fmt"
	"testing"
)

// BenchmarkPlace times BENCHMARKS.md §5's case, 61 layers × 256 experts onto 288 slots
// (Zipf 1.1 loads), for every policy, hierarchical (8 groups, 4 nodes, 32 GPUs) and
// global (32 GPUs):
//
//	go test -run '^$' -bench Place -benchtime 20x ./placement/
func BenchmarkPlace(b *testing.B) {
	loads := Zipf(1.1, 256, 61, 1)
	for _, p := range []Problem{
		{Replicas: 288, Groups: 8, Nodes: 4, GPUs: 32},
		{Replicas: 288, Groups: 1, Nodes: 1, GPUs: 32},
	} {
		for _, pol := range Policies {
			b.Run(fmt.Sprintf("%s/g%d-n%d-p%d", pol.Name, p.Groups, p.Nodes, p.GPUs), func(b *testing.B) {
				for b.Loop() {
					if _, err := pol.Place(loads, p); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
