package cuda_test

import (
	"testing"

	"deepinfer/targets/cuda"
)

func TestZZCount(t *testing.T) {
	for _, dir := range []string{"../../../shared/fixtures/tiny-v4-dev", "../../../shared/fixtures/tiny-v41-dev"} {
		p, ws := cuda.CompileDir(t, dir)
		_, k1 := prefillAndDecode(t, p, ws, 1)
		tot := 0
		for _, v := range k1 {
			tot += v
		}
		t.Logf("%s: 3 single-token steps: %d launches; %v", dir, tot, k1)
	}
}
