package plan_test

import (
	"testing"

	"deepinfer/plan"
)

func BenchmarkDecodeEmbedded(b *testing.B) {
	data, err := plan.Encode(embeddedPlan(b))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := plan.Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}
