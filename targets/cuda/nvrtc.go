package cuda

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// compiler turns kernel sources into a module image for one architecture. The real one
// is NVRTC (a cubin for sm_90a or sm_100a); the emulated one is the host C++ compiler
// (a shared library the fake driver loads).
type compiler interface {
	// Version names the compiler, for the kernel cache's key.
	Version() string
	Compile(src, name string, opts []string) (image []byte, log string, err error)
}

var nvrtcSymbols = []string{
	"nvrtcVersion", "nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetProgramLogSize",
	"nvrtcGetProgramLog", "nvrtcGetCUBINSize", "nvrtcGetCUBIN", "nvrtcDestroyProgram",
	"nvrtcGetErrorString",
}

type nvrtc struct {
	lib          string
	major, minor int32
	fn           map[string]uintptr
}

func openNVRTC(path string) (*nvrtc, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	n := &nvrtc{lib: path, fn: map[string]uintptr{}}
	for _, s := range nvrtcSymbols {
		p, err := purego.Dlsym(h, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
		n.fn[s] = p
	}
	if err := n.call("nvrtcVersion", uintptr(unsafe.Pointer(&n.major)), uintptr(unsafe.Pointer(&n.minor))); err != nil {
		return nil, err
	}
	return n, nil
}

//go:uintptrescapes
func (n *nvrtc) call(name string, args ...uintptr) error {
	r, _, _ := purego.SyscallN(n.fn[name], args...)
	if r == 0 {
		return nil
	}
	msg := ""
	if p, _, _ := purego.SyscallN(n.fn["nvrtcGetErrorString"], r); p != 0 {
		msg = goString(*(**byte)(unsafe.Pointer(&p)))
	}
	return fmt.Errorf("%s: %s (nvrtcResult %d)", name, msg, r)
}

// SeparateUnits: NVRTC builds the kernels' units concurrently (unitCompiler).
func (n *nvrtc) SeparateUnits() bool { return true }

func (n *nvrtc) Version() string { return fmt.Sprintf("nvrtc %d.%d", n.major, n.minor) }

func (n *nvrtc) Compile(src, name string, opts []string) ([]byte, string, error) {
	var prog uintptr
	csrc, cname := cstr(src), cstr(name)
	if err := n.call("nvrtcCreateProgram", uintptr(unsafe.Pointer(&prog)), uintptr(unsafe.Pointer(&csrc[0])),
		uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); err != nil {
		return nil, "", err
	}
	defer n.call("nvrtcDestroyProgram", uintptr(unsafe.Pointer(&prog)))
	copts := make([][]byte, len(opts))
	ptrs := make([]uintptr, len(opts)+1)
	for i, o := range opts {
		copts[i] = cstr(o)
		ptrs[i] = uintptr(unsafe.Pointer(&copts[i][0]))
	}
	cerr := n.call("nvrtcCompileProgram", prog, uintptr(len(opts)), uintptr(unsafe.Pointer(&ptrs[0])))
	runtime.KeepAlive(copts)
	runtime.KeepAlive(csrc)
	var logSize uintptr
	log := ""
	if n.call("nvrtcGetProgramLogSize", prog, uintptr(unsafe.Pointer(&logSize))) == nil && logSize > 1 {
		buf := make([]byte, logSize)
		if n.call("nvrtcGetProgramLog", prog, uintptr(unsafe.Pointer(&buf[0]))) == nil {
			log = string(buf[:logSize-1])
		}
	}
	if cerr != nil {
		return nil, log, cerr
	}
	var size uintptr
	if err := n.call("nvrtcGetCUBINSize", prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, log, err
	}
	if size == 0 {
		return nil, log, fmt.Errorf("nvrtc produced no cubin (is the architecture a real sm_ one?)")
	}
	img := make([]byte, size)
	if err := n.call("nvrtcGetCUBIN", prog, uintptr(unsafe.Pointer(&img[0]))); err != nil {
		return nil, log, err
	}
	return img, log, nil
}

// arch is the NVRTC architecture for a compute capability: the architecture-specific
// targets (sm_90a, sm_100a) where DeepSeek's kernels need them, else sm_XY.
func arch(major, minor int) string {
	switch {
	case major == 9 && minor == 0:
		return "sm_90a"
	case major == 10 && minor == 0:
		return "sm_100a"
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}

// sharedMax is the most shared memory a launch block may take on a device of compute
// capability major.minor once allowed (CUDA's opt-in maximum per block: 227 KB on
// sm_90 and sm_100, 163 KB on sm_80 and sm_87, 99 KB on sm_86, sm_89 and sm_120, 96 KB on
// sm_70, 64 KB on sm_75); 48 KB, which every device allows, for the others.
func sharedMax(major, minor int) int64 {
	switch major*10 + minor {
	case 90, 100:
		return 232448
	case 80, 87:
		return 166912
	case 86, 89, 120:
		return 101376
	case 70:
		return 98304
	case 75:
		return 65536
	}
	return 49152
}

// compileOptions are the NVRTC options of every kernel module: no contraction of a*b+c
// into one rounding, as the cpu target computes.
func compileOptions(a string) []string {
	opts := []string{"--gpu-architecture=" + a, "--std=c++17", "--fmad=false", "-default-device", "-lineinfo"}
	// DEEPINFER_NVRTC_OPTIONS adds options (space-separated), e.g. --ptxas-options=-v for
	// the registers, stack and spills of every kernel (kept in the cache as KEY.log)
	return append(opts, strings.Fields(os.Getenv("DEEPINFER_NVRTC_OPTIONS"))...)
}
