package cuda

import (
	"strings"
	"testing"
	"unsafe"

	"deepinfer/targets"
)

// TestLaunchStructsMatchCUDA: cuLaunchKernelEx reads launchConfig and launchAttr as
// cuda.h's CUlaunchConfig and CUlaunchAttribute on a 64-bit host: the attribute's
// value union at byte 8 and 72 bytes in all; the config's shared bytes at 24, the
// stream at 32, the attributes at 40, their count at 48, 56 bytes in all.
func TestLaunchStructsMatchCUDA(t *testing.T) {
	var a launchAttr
	var c launchConfig
	for _, f := range []struct {
		what      string
		got, want uintptr
	}{
		{"CUlaunchAttribute.value", unsafe.Offsetof(a.value), 8},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
		{"CUlaunchConfig.blockDimX", unsafe.Offsetof(c.block), 12},
		{"CUlaunchConfig.sharedMemBytes", unsafe.Offsetof(c.shared), 24},
		{"CUlaunchConfig.hStream", unsafe.Offsetof(c.stream), 32},
		{"CUlaunchConfig.attrs", unsafe.Offsetof(c.attrs), 40},
		{"CUlaunchConfig.numAttrs", unsafe.Offsetof(c.numAttrs), 48},
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, cuda.h has %d", f.what, f.got, f.want)
		}
	}
}

// TestOverlapSetting: DEEPINFER_CUDA_PDL=1 sends every launch (graph captures
// included) through cuLaunchKernelEx, says so in the runtime's description and gives
// the tokens and logits of plain launches; 0 launches plainly; another value, or a
// driver without programmatic launches, fails the open naming the variable and leaves
// nothing allocated.
func TestOverlapSetting(t *testing.T) {
	run := func(env string) (trace, *Runtime) {
		t.Helper()
		t.Setenv(EnvOverlap, env)
		rt := openFixture(t, "tiny-v4-dev", targets.Options{MaxTokens: 32})
		return runSync(t, rt), rt
	}
	plain, rt0 := run("0")
	if n := rt0.fake.calls["cuLaunchKernelEx"]; n != 0 || rt0.fake.calls["cuLaunchKernel"] == 0 {
		t.Errorf("%s=0: %d cuLaunchKernelEx, %d cuLaunchKernel", EnvOverlap, n, rt0.fake.calls["cuLaunchKernel"])
	}
	if strings.Contains(rt0.Describe(), "programmatic") {
		t.Errorf("%s=0 described as %q", EnvOverlap, rt0.Describe())
	}
	over, rt1 := run("1")
	sameTrace(t, EnvOverlap+"=1", over, plain)
	if n := rt1.fake.calls["cuLaunchKernel"]; n != 0 || rt1.fake.calls["cuLaunchKernelEx"] == 0 {
		t.Errorf("%s=1: %d cuLaunchKernel, %d cuLaunchKernelEx", EnvOverlap, n, rt1.fake.calls["cuLaunchKernelEx"])
	}
	if g := rt1.GraphStats(); g.Captured == 0 || g.Replayed == 0 {
		t.Errorf("%s=1: graphs %+v, want captures and replays", EnvOverlap, g)
	}
	if d := rt1.Describe(); !strings.Contains(d, "programmatic dependent launches ("+EnvOverlap+"=1)") {
		t.Errorf("%s=1 described as %q", EnvOverlap, d)
	}

	p, ws := fixturePlan(t, "tiny-v4-dev")
	t.Setenv(EnvOverlap, "yes")
	if _, err := OpenEmulated(p, ws, targets.Options{}, 2<<30); err == nil || !strings.Contains(err.Error(), EnvOverlap+`="yes"`) {
		t.Errorf("%s=yes: %v", EnvOverlap, err)
	}
	t.Setenv(EnvOverlap, "1")
	d := newFakeDriver(2 << 30)
	d.failAt["cuLaunchKernelEx"] = 1
	if _, err := open(d, &countingCompiler{}, p, ws, targets.Options{}); err == nil || !strings.Contains(err.Error(), EnvOverlap+"=1") {
		t.Errorf("a driver without programmatic launches: %v", err)
	}
	if d.Live() != 0 {
		t.Errorf("a failed open left %d bytes allocated", d.Live())
	}
}
