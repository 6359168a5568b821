package cuda

import (
	"testing"
	"unsafe"
)

// TestLaunchConfigLayout: the Go mirrors of CUlaunchConfig and CUlaunchAttribute have
// cuda.h's field offsets and sizes on a 64-bit host (CUDA 12 and 13: seven 32-bit
// dimensions and the shared-memory size, the stream at 32, the attributes at 40, their
// count at 48; an attribute's 32-bit id padded to 8 bytes, then its 64-byte value), so
// cuLaunchKernelEx reads the launch it is given.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	for _, f := range []struct {
		name      string
		got, want uintptr
	}{
		{"CUlaunchConfig.gridDimX", unsafe.Offsetof(c.gridX), 0},
		{"CUlaunchConfig.blockDimX", unsafe.Offsetof(c.blockX), 12},
		{"CUlaunchConfig.sharedMemBytes", unsafe.Offsetof(c.sharedMem), 24},
		{"CUlaunchConfig.hStream", unsafe.Offsetof(c.stream), 32},
		{"CUlaunchConfig.attrs", unsafe.Offsetof(c.attrs), 40},
		{"CUlaunchConfig.numAttrs", unsafe.Offsetof(c.numAttrs), 48},
		{"sizeof(CUlaunchConfig)", unsafe.Sizeof(c), 56},
		{"CUlaunchAttribute.value", unsafe.Offsetof(a.value), 8},
		{"sizeof(CUlaunchAttribute)", unsafe.Sizeof(a), 72},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, cuda.h has %d", f.name, f.got, f.want)
		}
	}
}
