//go:build gpu

package cuda

import (
	"strings"
	"testing"
	"time"

	"deepinfer/targets"
)

// Tests that need the GPU machine (scripts/gpu-test.sh builds them with -tags gpu).

// Every kernel compiles with NVRTC for Hopper (sm_90a, which runs here) and Blackwell
// (sm_100a, which cannot run here): SM100 plans are one driver away from running.
func TestGPUCompileArchs(t *testing.T) {
	cc, path, err := load(osFS{}, libNVRTC, func(p string) (*nvrtc, error) { return openNVRTC(p) })
	if err != nil {
		t.Fatal(err)
	}
	src := Source()
	kernels := strings.Count(src, "KERNEL(") - 1 // the macro's own definition lines
	for _, a := range []string{"sm_90a", "sm_100a"} {
		start := time.Now()
		img, log, err := cc.Compile(src, "deepinfer", compileOptions(a))
		if err != nil {
			t.Fatalf("%s: %v\n%s", a, err, log)
		}
		t.Logf("%s: %s (%s) compiled %d-line source (%d KERNEL uses) to a %d-byte cubin in %s", a, cc.Version(), path,
			strings.Count(src, "\n"), kernels, len(img), time.Since(start).Round(time.Millisecond))
	}
}

// The weights on the device, in storage format, against the planner's per-rank bytes.
func TestGPUWeightBytes(t *testing.T) {
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev", "tiny-v41-dev2"} {
		p, ws := fixturePlan(t, model)
		r, err := Open(p, ws, targets.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rt := r.(*Runtime)
		var free0, free1 uint64
		rt.w.do(func() { free0, _, _ = rt.drv.MemInfo() })
		dev, planned := rt.Info().WeightBytes, plannedWeightBytes(t, model)
		t.Logf("%s on %s: weights %d bytes on the device in storage format, planner %d per rank (ratio %.4f); %s",
			model, rt.Info().Device, dev, planned, float64(dev)/float64(planned), rt.Describe())
		rt.Close()
		r2, err := Open(p, ws, targets.Options{})
		if err == nil {
			rt2 := r2.(*Runtime)
			rt2.w.do(func() { free1, _, _ = rt2.drv.MemInfo() })
			t.Logf("%s: device free memory %d before the first close, %d with a second runtime open", model, free0, free1)
			rt2.Close()
		}
		if r := float64(dev) / float64(planned); r < 0.98 || r > 1.02 {
			t.Errorf("%s: %d bytes on the device, planner %d", model, dev, planned)
		}
	}
}
