package cuda

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// The emulated device: a driver whose memory is Go memory and whose kernels are the
// same CUDA C sources compiled by the host's C++ compiler (prelude.h, DI_EMULATE). It
// runs the runtime's whole path — buffers, arena, uploads, launches, read-backs, the
// kernel cache — on a machine without a GPU, and computes what the device computes
// wherever a kernel follows the conventions in prelude.h.

// fakeDriver implements driver in Go.
type fakeDriver struct {
	mu      sync.Mutex
	allocs  []fakeAlloc // sorted by base
	live    uint64
	total   uint64
	stats   FakeStats
	modules []fakeModule
	failAt  map[string]int // call name → fail on its n-th use (tests of error paths)
	calls   map[string]int
	events  []time.Time // the host time of each event's last Record (work runs at launch)
	// graphs: the stream being captured (0: none), the launches captured so far, and
	// the captured graphs and their executables (nil once destroyed)
	capturing stream
	captured  []fakeLaunch
	graphs    [][]fakeLaunch
	execs     [][]fakeLaunch
	pinned    map[unsafe.Pointer][]byte
	kernels   map[string]int      // launches run, by kernel name (graph replays included)
	shared    map[function]uint32 // FuncShared's allowances
}

// kernelRuns returns how many times each kernel ran since the driver was made.
func (d *fakeDriver) kernelRuns() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return maps.Clone(d.kernels)
}

// fakeLaunch is a captured launch: its argument bytes as they were at capture.
type fakeLaunch struct {
	f           function
	grid, block uint32
	arg         []uint64
}

// FakeStats counts what the runtime asked of the fake driver.
type FakeStats struct {
	Allocs, Frees, Launches, Syncs, Streams, Modules, Uploads, Downloads int
	PeakBytes                                                            uint64
	// bytes copied host to device and device to host
	UploadBytes, DownloadBytes uint64
	// graphs captured, instantiated executables launched, and those destroyed
	Captures, GraphLaunches, GraphExecs, GraphExecFrees, GraphFrees int
	EventSyncs                                                      int
	// cuProfilerStart calls, and the launches made before the first
	ProfilerStarts, LaunchesBeforeProfiler int
}

type fakeAlloc struct {
	base uintptr
	mem  []byte
}

type fakeModule struct {
	handle uintptr
	file   string
}

func newFakeDriver(total uint64) *fakeDriver {
	return &fakeDriver{total: total, calls: map[string]int{}, failAt: map[string]int{}, pinned: map[unsafe.Pointer][]byte{}}
}

func (d *fakeDriver) fail(call string) error {
	d.calls[call]++
	if n, ok := d.failAt[call]; ok && d.calls[call] == n {
		return &cuError{call: call, code: 2, name: "CUDA_ERROR_OUT_OF_MEMORY (injected)"}
	}
	return nil
}

func (d *fakeDriver) Version() int              { return 13000 }
func (d *fakeDriver) DeviceCount() (int, error) { return 1, nil }
func (d *fakeDriver) DeviceName(int) string     { return "emulated device (host C++ kernels)" }
func (d *fakeDriver) Capability(int) (int, int, error) {
	return 9, 0, nil
}
func (d *fakeDriver) TotalMem(int) uint64 { return d.total }
func (d *fakeDriver) Context(int) error   { return nil }
func (d *fakeDriver) Release(int)         {}
func (d *fakeDriver) MemInfo() (uint64, uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total - d.live, d.total, nil
}

func (d *fakeDriver) Alloc(n uint64) (devptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail("cuMemAlloc"); err != nil {
		return 0, err
	}
	if err := d.duringCapture("cuMemAlloc"); err != nil {
		return 0, err
	}
	if n == 0 || d.live+n > d.total {
		return 0, &cuError{call: "cuMemAlloc", code: 2, name: "CUDA_ERROR_OUT_OF_MEMORY"}
	}
	mem := make([]byte, n+256)
	base := uintptr(unsafe.Pointer(&mem[0]))
	off := (256 - base%256) % 256
	mem = mem[off : off+uintptr(n)]
	base += off
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].base > base })
	d.allocs = append(d.allocs, fakeAlloc{})
	copy(d.allocs[i+1:], d.allocs[i:])
	d.allocs[i] = fakeAlloc{base, mem}
	d.live += n
	d.stats.Allocs++
	d.stats.PeakBytes = max(d.stats.PeakBytes, d.live)
	return devptr(base), nil
}

func (d *fakeDriver) find(p devptr, n uint64) ([]byte, error) {
	i := sort.Search(len(d.allocs), func(i int) bool { return d.allocs[i].base > uintptr(p) }) - 1
	if i < 0 {
		return nil, fmt.Errorf("address %#x is not device memory", p)
	}
	a := d.allocs[i]
	off := uintptr(p) - a.base
	if off+uintptr(n) > uintptr(len(a.mem)) {
		return nil, fmt.Errorf("%d bytes at %#x overrun an allocation of %d", n, p, len(a.mem))
	}
	return a.mem[off : off+uintptr(n)], nil
}

func (d *fakeDriver) Free(p devptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, a := range d.allocs {
		if a.base == uintptr(p) {
			d.live -= uint64(len(a.mem))
			d.allocs = append(d.allocs[:i], d.allocs[i+1:]...)
			d.stats.Frees++
			return nil
		}
	}
	return &cuError{call: "cuMemFree", code: 1, name: "CUDA_ERROR_INVALID_VALUE"}
}

// Live is the device memory allocated and not freed.
func (d *fakeDriver) Live() uint64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.live
}

// duringCapture refuses a call the runtime must not make while it captures a graph
// (the real driver would capture copies and memsets into the graph, with their host
// pointers, and fails synchronizations and allocations).
func (d *fakeDriver) duringCapture(call string) error {
	if d.capturing != 0 {
		return &cuError{call: call, code: 900, name: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (the emulated device captures launches only)"}
	}
	return nil
}

func (d *fakeDriver) HtoD(dst devptr, src unsafe.Pointer, n uint64, _ stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.duringCapture("cuMemcpyHtoDAsync"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := d.fail("cuMemcpyHtoDAsync"); err != nil {
		return err
	}
	m, err := d.find(dst, n)
	if err != nil {
		return &cuError{call: "cuMemcpyHtoDAsync", code: 1, name: err.Error()}
	}
	copy(m, unsafe.Slice((*byte)(src), n))
	d.stats.Uploads++
	d.stats.UploadBytes += n
	return nil
}

func (d *fakeDriver) DtoH(dst unsafe.Pointer, src devptr, n uint64, _ stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.duringCapture("cuMemcpyDtoHAsync"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if err := d.fail("cuMemcpyDtoHAsync"); err != nil {
		return err
	}
	m, err := d.find(src, n)
	if err != nil {
		return &cuError{call: "cuMemcpyDtoHAsync", code: 1, name: err.Error()}
	}
	copy(unsafe.Slice((*byte)(dst), n), m)
	d.stats.Downloads++
	d.stats.DownloadBytes += n
	return nil
}

func (d *fakeDriver) DtoD(dst, src devptr, n uint64, _ stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.duringCapture("cuMemcpyDtoDAsync"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	to, err := d.find(dst, n)
	if err == nil {
		var from []byte
		if from, err = d.find(src, n); err == nil {
			copy(to, from)
			return nil
		}
	}
	return &cuError{call: "cuMemcpyDtoDAsync", code: 1, name: err.Error()}
}

func (d *fakeDriver) Memset(dst devptr, v byte, n uint64, _ stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.duringCapture("cuMemsetD8Async"); err != nil {
		return err
	}
	m, err := d.find(dst, n)
	if err != nil {
		return &cuError{call: "cuMemsetD8Async", code: 1, name: err.Error()}
	}
	for i := range m {
		m[i] = v
	}
	return nil
}

// emuMagic starts an emulated module image (a host shared library).
var emuMagic = []byte("\x7fELF")

func (d *fakeDriver) LoadModule(image []byte) (module, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Modules++
	if !strings.HasPrefix(string(image), string(emuMagic)) {
		// not an emulated image: a module whose functions only count launches
		d.modules = append(d.modules, fakeModule{})
		return module(len(d.modules)), nil
	}
	f, err := os.CreateTemp("", "deepinfer-emu-*.so")
	if err != nil {
		return 0, err
	}
	_, werr := f.Write(image)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return 0, werr
	}
	h, err := purego.Dlopen(f.Name(), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		os.Remove(f.Name())
		return 0, &cuError{call: "cuModuleLoadData", code: 200, name: "CUDA_ERROR_INVALID_IMAGE: " + err.Error()}
	}
	d.modules = append(d.modules, fakeModule{handle: h, file: f.Name()})
	return module(len(d.modules)), nil
}

// fakeFunction is a function of an emulated module: its kernel's name and host symbol
// (0 for a module that only counts).
type fakeFunction struct {
	name string
	sym  uintptr
	size int64 // its argument struct's bytes (0: not known)
}

var (
	fakeFuncMu sync.Mutex
	fakeFuncs  []fakeFunction
)

func (d *fakeDriver) Function(m module, name string) (function, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m == 0 || int(m) > len(d.modules) {
		return 0, &cuError{call: "cuModuleGetFunction", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	var sym uintptr
	var size int64
	if h := d.modules[m-1].handle; h != 0 {
		s, err := purego.Dlsym(h, "emu_"+name)
		if err != nil {
			return 0, &cuError{call: "cuModuleGetFunction", code: 500, name: "CUDA_ERROR_NOT_FOUND: " + name}
		}
		sym = s
		if z, err := purego.Dlsym(h, "emusize_"+name); err == nil {
			r, _, _ := purego.SyscallN(z)
			size = int64(r)
		}
	}
	fakeFuncMu.Lock()
	defer fakeFuncMu.Unlock()
	fakeFuncs = append(fakeFuncs, fakeFunction{name, sym, size})
	return function(len(fakeFuncs)), nil
}

// maxSharedBlock is the most shared memory a launch block may take on sm_90 (227 KB;
// the emulated device refuses more, as the GPU would).
const maxSharedBlock = 232448

func (d *fakeDriver) FuncShared(f function, bytes uint32) error {
	if f == 0 || bytes > maxSharedBlock {
		return &cuError{call: "cuFuncSetAttribute", code: 1, name: "CUDA_ERROR_INVALID_VALUE"}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.shared == nil {
		d.shared = map[function]uint32{}
	}
	d.shared[f] = bytes
	return nil
}

func (d *fakeDriver) Launch(f function, grid, block, shared uint32, s stream, args []uint64) error {
	d.mu.Lock()
	if err := d.fail("cuLaunchKernel"); err != nil {
		d.mu.Unlock()
		return err
	}
	if grid == 0 || block == 0 || (shared > 48<<10 && shared > d.shared[f]) {
		// (past 48 KB a launch needs FuncShared's allowance first)
		d.mu.Unlock()
		return &cuError{call: "cuLaunchKernel", code: 1, name: "CUDA_ERROR_INVALID_VALUE"}
	}
	// the argument words must fill the kernel's struct exactly: a binder (or a test)
	// that passes fewer would have the kernel read past them, as a GPU would
	fakeFuncMu.Lock()
	fn := fakeFuncs[f-1]
	fakeFuncMu.Unlock()
	if fn.size > 0 && int64(8*len(args)) != fn.size {
		d.mu.Unlock()
		return fmt.Errorf("kernel %s: %d bytes of arguments for its %d-byte argument struct", fn.name, 8*len(args), fn.size)
	}
	if d.capturing != 0 && s == d.capturing {
		// captured, not run: the argument struct is copied now, as the driver does
		d.captured = append(d.captured, fakeLaunch{f: f, grid: grid, block: block, arg: append([]uint64(nil), args...)})
		d.mu.Unlock()
		return nil
	}
	d.stats.Launches++
	d.mu.Unlock()
	return d.run(f, grid, block, unsafe.Pointer(&args[0]))
}

// run executes one launch on the emulated device.
func (d *fakeDriver) run(f function, grid, block uint32, arg unsafe.Pointer) error {
	fakeFuncMu.Lock()
	fn := fakeFuncs[f-1]
	fakeFuncMu.Unlock()
	d.mu.Lock()
	if d.kernels == nil {
		d.kernels = map[string]int{}
	}
	d.kernels[fn.name]++
	d.mu.Unlock()
	if fn.sym != 0 {
		purego.SyscallN(fn.sym, uintptr(arg), uintptr(grid)*uintptr(block))
	}
	return nil
}

func (d *fakeDriver) NewStream() (stream, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stats.Streams++
	return stream(d.stats.Streams), nil
}

func (d *fakeDriver) ProfilerStart() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capturing != 0 {
		return &cuError{call: "cuProfilerStart", code: 900, name: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"}
	}
	if d.stats.ProfilerStarts == 0 {
		d.stats.LaunchesBeforeProfiler = d.stats.Launches
	}
	d.stats.ProfilerStarts++
	return nil
}

func (d *fakeDriver) Sync(stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capturing != 0 {
		return &cuError{call: "cuStreamSynchronize", code: 900, name: "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"}
	}
	d.stats.Syncs++
	return nil
}

func (d *fakeDriver) EventSync(e event) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e < 1 || int(e) > len(d.events) {
		return &cuError{call: "cuEventSynchronize", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	d.stats.EventSyncs++
	return nil
}

func (d *fakeDriver) AllocHost(n uint64) (unsafe.Pointer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail("cuMemAllocHost"); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &cuError{call: "cuMemAllocHost", code: 1, name: "CUDA_ERROR_INVALID_VALUE"}
	}
	b := make([]byte, n)
	p := unsafe.Pointer(&b[0])
	d.pinned[p] = b
	return p, nil
}

func (d *fakeDriver) FreeHost(p unsafe.Pointer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.pinned[p]; !ok {
		return &cuError{call: "cuMemFreeHost", code: 1, name: "CUDA_ERROR_INVALID_VALUE"}
	}
	delete(d.pinned, p)
	return nil
}

// Pinned is the page-locked host memory allocated and not freed (allocations).
func (d *fakeDriver) Pinned() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.pinned)
}

func (d *fakeDriver) BeginCapture(s stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail("cuStreamBeginCapture"); err != nil {
		return err
	}
	if d.capturing != 0 {
		return &cuError{call: "cuStreamBeginCapture", code: 900, name: "CUDA_ERROR_ILLEGAL_STATE (already capturing)"}
	}
	d.capturing, d.captured = s, nil
	return nil
}

func (d *fakeDriver) EndCapture(s stream) (graph, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.capturing == 0 || d.capturing != s {
		return 0, &cuError{call: "cuStreamEndCapture", code: 901, name: "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"}
	}
	d.capturing = 0
	d.graphs = append(d.graphs, d.captured)
	d.captured = nil
	d.stats.Captures++
	return graph(len(d.graphs)), nil
}

func (d *fakeDriver) Instantiate(g graph) (graphExec, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.fail("cuGraphInstantiateWithFlags"); err != nil {
		return 0, err
	}
	if g < 1 || int(g) > len(d.graphs) || d.graphs[g-1] == nil {
		return 0, &cuError{call: "cuGraphInstantiateWithFlags", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	d.execs = append(d.execs, append([]fakeLaunch{}, d.graphs[g-1]...))
	d.stats.GraphExecs++
	return graphExec(len(d.execs)), nil
}

func (d *fakeDriver) GraphLaunch(x graphExec, s stream) error {
	d.mu.Lock()
	if err := d.fail("cuGraphLaunch"); err != nil {
		d.mu.Unlock()
		return err
	}
	if d.capturing != 0 || x < 1 || int(x) > len(d.execs) || d.execs[x-1] == nil {
		d.mu.Unlock()
		return &cuError{call: "cuGraphLaunch", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	ls := d.execs[x-1]
	d.stats.GraphLaunches++
	d.stats.Launches += len(ls)
	d.mu.Unlock()
	for i := range ls {
		l := &ls[i]
		// each replay reads its own copy of the captured words: a kernel may not
		// write its argument struct, and the capture's copy must stay as it was
		arg := append([]uint64(nil), l.arg...)
		if err := d.run(l.f, l.grid, l.block, unsafe.Pointer(&arg[0])); err != nil {
			return err
		}
	}
	return nil
}

func (d *fakeDriver) GraphExecDestroy(x graphExec) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if x < 1 || int(x) > len(d.execs) || d.execs[x-1] == nil {
		return &cuError{call: "cuGraphExecDestroy", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	d.execs[x-1] = nil
	d.stats.GraphExecFrees++
	return nil
}

func (d *fakeDriver) GraphDestroy(g graph) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if g < 1 || int(g) > len(d.graphs) || d.graphs[g-1] == nil {
		return &cuError{call: "cuGraphDestroy", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	d.graphs[g-1] = nil
	d.stats.GraphFrees++
	return nil
}

// Events: the emulated device runs each launch when it is made, so an event's time is
// the host clock when it was recorded.
func (d *fakeDriver) NewEvent() (event, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.events = append(d.events, time.Time{})
	return event(len(d.events)), nil
}

func (d *fakeDriver) Record(e event, _ stream) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if e < 1 || int(e) > len(d.events) {
		return &cuError{call: "cuEventRecord", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	d.events[e-1] = time.Now()
	return nil
}

func (d *fakeDriver) Elapsed(a, b event) (float32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a < 1 || b < 1 || int(a) > len(d.events) || int(b) > len(d.events) || d.events[a-1].IsZero() || d.events[b-1].IsZero() {
		return 0, &cuError{call: "cuEventElapsedTime", code: 400, name: "CUDA_ERROR_INVALID_HANDLE"}
	}
	return float32(d.events[b-1].Sub(d.events[a-1]).Seconds() * 1e3), nil
}

func (d *fakeDriver) close() {
	for _, m := range d.modules {
		if m.file != "" {
			os.Remove(m.file)
		}
	}
}

// hostCompiler compiles the kernel sources for the emulated device with the host's
// C++ compiler ($CXX, else c++), for the host's own instruction set where the compiler
// names it (arch: fused multiply-adds in hardware for the sources' fmaf, wider vectors;
// the same values, since -ffp-contract=off and no fast math leave every operation the
// source writes as it is, and about a fifth less time in the emulated kernels). The
// architecture is part of the version, so of the kernel cache's key: a cache shared with
// another host never hands it a library built for other instructions.
type hostCompiler struct{ cxx, version, arch string }

func newHostCompiler() (*hostCompiler, error) {
	cxx := os.Getenv("CXX")
	if cxx == "" {
		cxx = "c++"
	}
	out, err := exec.Command(cxx, "-dumpfullversion", "-dumpversion").Output()
	if err != nil {
		return nil, fmt.Errorf("the emulated device needs a host C++ compiler (%s): %v", cxx, err)
	}
	h := &hostCompiler{cxx: cxx, version: cxx + " " + strings.TrimSpace(string(out))}
	if h.arch = nativeArch(cxx); h.arch != "" {
		h.version += " -march=" + h.arch
	}
	return h, nil
}

// nativeArchLine finds GCC's resolved -march=native in -Q --help=target's listing.
var nativeArchLine = regexp.MustCompile(`(?m)^\s+-march=\s+([A-Za-z0-9_.+-]+)\s*$`)

// nativeArch is the architecture cxx resolves -march=native to (GCC), or "" where it
// does not say (then the libraries are built for the compiler's default target).
func nativeArch(cxx string) string {
	out, err := exec.Command(cxx, "-march=native", "-Q", "--help=target").Output()
	if err != nil {
		return ""
	}
	return parseNativeArch(string(out))
}

// parseNativeArch reads nativeArch's listing.
func parseNativeArch(listing string) string {
	if m := nativeArchLine.FindStringSubmatch(listing); m != nil && m[1] != "native" {
		return m[1]
	}
	return ""
}

func (h *hostCompiler) Version() string { return "emulated (argument sizes) " + h.version }

// kernelArgs finds each kernel's name and argument struct in the sources.
var kernelArgs = regexp.MustCompile(`(?m)^KERNEL\((\w+),\s*(\w+)\)`)

func (h *hostCompiler) Compile(src, name string, _ []string) ([]byte, string, error) {
	dir, err := os.MkdirTemp("", "deepinfer-emu-build-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)
	in, out := dir+"/"+name+".cc", dir+"/"+name+".so"
	// each kernel's argument struct size, for the launches' check (fakeDriver.Launch)
	var sizes strings.Builder
	for _, m := range kernelArgs.FindAllStringSubmatch(src, -1) {
		fmt.Fprintf(&sizes, "extern \"C\" long long emusize_%s(void) { return (long long)sizeof(%s); }\n", m[1], m[2])
	}
	src += "\n" + sizes.String()
	if err := os.WriteFile(in, []byte(src), 0o644); err != nil {
		return nil, "", err
	}
	args := []string{"-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math", "-DDI_EMULATE", "-o", out, in}
	if h.arch != "" {
		args = append([]string{"-march=" + h.arch}, args...)
	}
	cmd := exec.Command(h.cxx, args...)
	log, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(log), fmt.Errorf("%s: %v", h.cxx, err)
	}
	img, err := os.ReadFile(out)
	return img, string(log), err
}
