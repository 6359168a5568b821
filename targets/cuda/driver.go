package cuda

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// driver is the part of the CUDA driver API the runtime uses. The real one binds
// libcuda at run time (no cgo); the fake one (fake.go) keeps device memory in Go and
// runs kernels on the emulated device, so that everything above it is tested on
// machines without a GPU.
type driver interface {
	Version() int
	DeviceCount() (int, error)
	DeviceName(dev int) string
	Capability(dev int) (major, minor int, err error)
	TotalMem(dev int) uint64
	// Context makes the device's primary context current on the calling thread.
	Context(dev int) error
	Release(dev int)
	MemInfo() (free, total uint64, err error)
	Alloc(bytes uint64) (devptr, error)
	Free(p devptr) error
	HtoD(dst devptr, src unsafe.Pointer, bytes uint64, s stream) error
	DtoH(dst unsafe.Pointer, src devptr, bytes uint64, s stream) error
	DtoD(dst, src devptr, bytes uint64, s stream) error
	Memset(dst devptr, v byte, bytes uint64, s stream) error
	LoadModule(image []byte) (module, error)
	Function(m module, name string) (function, error)
	// Launch runs f over grid×block threads with one argument: the kernel's argument
	// struct, whose words are copied when the launch is made (or captured); shared is
	// the launch's dynamic shared memory in bytes (DYN_SHARED, prelude.h).
	Launch(f function, grid, block, shared uint32, s stream, args []uint64) error
	// FuncShared lets f take up to bytes of dynamic shared memory a launch block (past
	// the 48 KB every kernel may take); called once, when a program is bound.
	FuncShared(f function, bytes uint32) error
	NewStream() (stream, error)
	Sync(s stream) error
	NewEvent() (event, error)
	Record(e event, s stream) error
	// Elapsed is the milliseconds between two recorded events (waits for the second).
	Elapsed(a, b event) (float32, error)
	// EventSync blocks until the work before the event's last record has run.
	EventSync(e event) error
	// AllocHost allocates page-locked host memory (the destination of asynchronous
	// read-backs); FreeHost frees it.
	AllocHost(bytes uint64) (unsafe.Pointer, error)
	FreeHost(p unsafe.Pointer) error
	// BeginCapture starts capturing the stream's launches into a graph (thread-local
	// mode: only this thread's calls are checked); EndCapture ends it and returns the
	// graph. Kernel arguments are copied when a launch is captured.
	BeginCapture(s stream) error
	EndCapture(s stream) (graph, error)
	// Instantiate makes a graph executable; GraphLaunch runs it on a stream.
	Instantiate(g graph) (graphExec, error)
	GraphLaunch(x graphExec, s stream) error
	GraphExecDestroy(x graphExec) error
	GraphDestroy(g graph) error
	// ProfilerStart starts the profiler's collection (cuProfilerStart: a profiler run
	// with collection off from the start, as Nsight Compute's --profile-from-start off,
	// profiles only the launches after it).
	ProfilerStart() error
}

type (
	devptr   uint64
	stream   uintptr
	module   uintptr
	function uintptr
	event    uintptr
	// graph is a captured CUgraph, graphExec its instantiated CUgraphExec.
	graph     uintptr
	graphExec uintptr
)

// cuError is a failed driver call.
type cuError struct {
	call string
	code uintptr
	name string
}

func (e *cuError) Error() string {
	if e.name != "" {
		return fmt.Sprintf("%s: %s (CUresult %d)", e.call, e.name, e.code)
	}
	return fmt.Sprintf("%s: CUresult %d", e.call, e.code)
}

// The driver symbols the runtime resolves, all through cuGetProcAddress at the ABI
// version below (which picks the _v2 entry points where the headers' macros do).
const driverABI = 12000

var driverSymbols = []string{
	"cuInit", "cuDriverGetVersion", "cuDeviceGetCount", "cuDeviceGet", "cuDeviceGetName",
	"cuDeviceGetAttribute", "cuDeviceTotalMem", "cuDevicePrimaryCtxRetain",
	"cuDevicePrimaryCtxRelease", "cuCtxSetCurrent", "cuMemGetInfo", "cuMemAlloc", "cuMemFree",
	"cuMemcpyHtoDAsync", "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8Async", "cuModuleLoadData",
	"cuModuleGetFunction", "cuLaunchKernel", "cuStreamCreate", "cuStreamSynchronize",
	"cuEventCreate", "cuEventRecord", "cuEventSynchronize", "cuEventElapsedTime", "cuGetErrorName",
	"cuMemAllocHost", "cuMemFreeHost", "cuStreamBeginCapture", "cuStreamEndCapture",
	"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy",
	"cuFuncSetAttribute",
}

// optionalSymbols are resolved where the driver has them; a call of one it lacks fails
// when made.
var optionalSymbols = []string{"cuProfilerStart"}

// CUDA enum values used here (cuda.h, CUDA 13.0).
const (
	attrComputeMajor = 75 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
	attrComputeMinor = 76 // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
	// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
	attrMaxDynamicShared = 8
	errNoDevice          = 100
	// CU_STREAM_CAPTURE_MODE_THREAD_LOCAL: one thread makes every driver call, and
	// another thread's unsafe calls need not fail this thread's capture
	captureThreadLocal = 1
)

// realDriver calls libcuda through function pointers.
type realDriver struct {
	lib     string
	version int
	fn      map[string]uintptr
	ctx     map[int]uintptr
}

// openDriver loads libcuda from path, resolves every symbol the runtime needs and
// initializes the driver.
func openDriver(path string) (*realDriver, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, err
	}
	gpa, err := purego.Dlsym(h, "cuGetProcAddress_v2")
	if err != nil {
		return nil, fmt.Errorf("%s has no cuGetProcAddress_v2 (a CUDA 12 or later driver is needed): %v", path, err)
	}
	d := &realDriver{lib: path, fn: map[string]uintptr{}, ctx: map[int]uintptr{}}
	for _, name := range driverSymbols {
		p, r, status := procAddress(gpa, name)
		if r != 0 || p == 0 {
			return nil, fmt.Errorf("%s: cuGetProcAddress(%s) failed (CUresult %d, status %d)", path, name, r, status)
		}
		d.fn[name] = p
	}
	for _, name := range optionalSymbols {
		if p, r, _ := procAddress(gpa, name); r == 0 && p != 0 {
			d.fn[name] = p
		}
	}
	if err := d.call("cuInit", 0); err != nil {
		if ce, ok := err.(*cuError); ok && ce.code == errNoDevice {
			return nil, fmt.Errorf("the CUDA driver (%s) sees no GPU", path)
		}
		return nil, err
	}
	var v int32
	if err := d.call("cuDriverGetVersion", uintptr(unsafe.Pointer(&v))); err != nil {
		return nil, err
	}
	d.version = int(v)
	return d, nil
}

// procAddress resolves a driver symbol through cuGetProcAddress (gpa) at driverABI: its
// address, the call's CUresult and the symbol status.
func procAddress(gpa uintptr, name string) (uintptr, uintptr, int32) {
	var p uintptr
	var status int32
	cname := cstr(name)
	r, _, _ := purego.SyscallN(gpa, uintptr(unsafe.Pointer(&cname[0])), uintptr(unsafe.Pointer(&p)), driverABI, 0, uintptr(unsafe.Pointer(&status)))
	runtime.KeepAlive(cname)
	return p, r, status
}

func cstr(s string) []byte { return append([]byte(s), 0) }

// call invokes a driver function. Arguments that are Go pointers converted to uintptr
// in the call expression are moved to the heap and kept alive for the call.
//
//go:uintptrescapes
func (d *realDriver) call(name string, args ...uintptr) error {
	r, _, _ := purego.SyscallN(d.fn[name], args...)
	if r == 0 {
		return nil
	}
	e := &cuError{call: name, code: r}
	var s *byte
	if purego.SyscallN(d.fn["cuGetErrorName"], r, uintptr(unsafe.Pointer(&s))); s != nil {
		e.name = goString(s)
	}
	return e
}

// goString copies a NUL-terminated C string that the driver owns.
func goString(p *byte) string {
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

func (d *realDriver) Version() int { return d.version }

func (d *realDriver) DeviceCount() (int, error) {
	var n int32
	err := d.call("cuDeviceGetCount", uintptr(unsafe.Pointer(&n)))
	return int(n), err
}

func (d *realDriver) handle(dev int) (int32, error) {
	var h int32
	err := d.call("cuDeviceGet", uintptr(unsafe.Pointer(&h)), uintptr(dev))
	return h, err
}

func (d *realDriver) DeviceName(dev int) string {
	h, err := d.handle(dev)
	if err != nil {
		return "?"
	}
	buf := make([]byte, 256)
	if d.call("cuDeviceGetName", uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(h)) != nil {
		return "?"
	}
	for i, c := range buf {
		if c == 0 {
			return string(buf[:i])
		}
	}
	return string(buf)
}

func (d *realDriver) Capability(dev int) (int, int, error) {
	h, err := d.handle(dev)
	if err != nil {
		return 0, 0, err
	}
	var maj, min int32
	if err := d.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&maj)), attrComputeMajor, uintptr(h)); err != nil {
		return 0, 0, err
	}
	err = d.call("cuDeviceGetAttribute", uintptr(unsafe.Pointer(&min)), attrComputeMinor, uintptr(h))
	return int(maj), int(min), err
}

func (d *realDriver) TotalMem(dev int) uint64 {
	h, err := d.handle(dev)
	if err != nil {
		return 0
	}
	var n uint64
	if d.call("cuDeviceTotalMem", uintptr(unsafe.Pointer(&n)), uintptr(h)) != nil {
		return 0
	}
	return n
}

func (d *realDriver) Context(dev int) error {
	ctx, ok := d.ctx[dev]
	if !ok {
		h, err := d.handle(dev)
		if err != nil {
			return err
		}
		if err := d.call("cuDevicePrimaryCtxRetain", uintptr(unsafe.Pointer(&ctx)), uintptr(h)); err != nil {
			return err
		}
		d.ctx[dev] = ctx
	}
	return d.call("cuCtxSetCurrent", ctx)
}

func (d *realDriver) Release(dev int) {
	if _, ok := d.ctx[dev]; !ok {
		return
	}
	if h, err := d.handle(dev); err == nil {
		_ = d.call("cuDevicePrimaryCtxRelease", uintptr(h))
	}
	delete(d.ctx, dev)
}

func (d *realDriver) MemInfo() (uint64, uint64, error) {
	var free, total uint64
	err := d.call("cuMemGetInfo", uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total)))
	return free, total, err
}

func (d *realDriver) Alloc(n uint64) (devptr, error) {
	var p devptr
	err := d.call("cuMemAlloc", uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *realDriver) Free(p devptr) error { return d.call("cuMemFree", uintptr(p)) }

func (d *realDriver) HtoD(dst devptr, src unsafe.Pointer, n uint64, s stream) error {
	return d.call("cuMemcpyHtoDAsync", uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

func (d *realDriver) DtoH(dst unsafe.Pointer, src devptr, n uint64, s stream) error {
	return d.call("cuMemcpyDtoHAsync", uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

func (d *realDriver) DtoD(dst, src devptr, n uint64, s stream) error {
	return d.call("cuMemcpyDtoDAsync", uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
}

func (d *realDriver) Memset(dst devptr, v byte, n uint64, s stream) error {
	return d.call("cuMemsetD8Async", uintptr(dst), uintptr(v), uintptr(n), uintptr(s))
}

func (d *realDriver) LoadModule(image []byte) (module, error) {
	var m module
	err := d.call("cuModuleLoadData", uintptr(unsafe.Pointer(&m)), uintptr(unsafe.Pointer(&image[0])))
	runtime.KeepAlive(image)
	return m, err
}

func (d *realDriver) Function(m module, name string) (function, error) {
	var f function
	c := cstr(name)
	err := d.call("cuModuleGetFunction", uintptr(unsafe.Pointer(&f)), uintptr(m), uintptr(unsafe.Pointer(&c[0])))
	runtime.KeepAlive(c)
	return f, err
}

func (d *realDriver) Launch(f function, grid, block, shared uint32, s stream, args []uint64) error {
	params := [1]unsafe.Pointer{unsafe.Pointer(&args[0])}
	err := d.call("cuLaunchKernel", uintptr(f), uintptr(grid), 1, 1, uintptr(block), 1, 1, uintptr(shared), uintptr(s),
		uintptr(unsafe.Pointer(&params[0])), 0)
	runtime.KeepAlive(params)
	runtime.KeepAlive(args)
	return err
}

func (d *realDriver) FuncShared(f function, bytes uint32) error {
	return d.call("cuFuncSetAttribute", uintptr(f), attrMaxDynamicShared, uintptr(bytes))
}

func (d *realDriver) NewStream() (stream, error) {
	var s stream
	err := d.call("cuStreamCreate", uintptr(unsafe.Pointer(&s)), 1) // CU_STREAM_NON_BLOCKING
	return s, err
}

func (d *realDriver) Sync(s stream) error { return d.call("cuStreamSynchronize", uintptr(s)) }

func (d *realDriver) NewEvent() (event, error) {
	var e event
	err := d.call("cuEventCreate", uintptr(unsafe.Pointer(&e)), 0)
	return e, err
}

func (d *realDriver) Record(e event, s stream) error {
	return d.call("cuEventRecord", uintptr(e), uintptr(s))
}

func (d *realDriver) Elapsed(a, b event) (float32, error) {
	if err := d.call("cuEventSynchronize", uintptr(b)); err != nil {
		return 0, err
	}
	var ms float32
	err := d.call("cuEventElapsedTime", uintptr(unsafe.Pointer(&ms)), uintptr(a), uintptr(b))
	return ms, err
}

func (d *realDriver) EventSync(e event) error { return d.call("cuEventSynchronize", uintptr(e)) }

func (d *realDriver) AllocHost(n uint64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	err := d.call("cuMemAllocHost", uintptr(unsafe.Pointer(&p)), uintptr(n))
	return p, err
}

func (d *realDriver) FreeHost(p unsafe.Pointer) error { return d.call("cuMemFreeHost", uintptr(p)) }

func (d *realDriver) BeginCapture(s stream) error {
	return d.call("cuStreamBeginCapture", uintptr(s), captureThreadLocal)
}

func (d *realDriver) EndCapture(s stream) (graph, error) {
	var g graph
	err := d.call("cuStreamEndCapture", uintptr(s), uintptr(unsafe.Pointer(&g)))
	return g, err
}

func (d *realDriver) Instantiate(g graph) (graphExec, error) {
	var x graphExec
	err := d.call("cuGraphInstantiateWithFlags", uintptr(unsafe.Pointer(&x)), uintptr(g), 0)
	return x, err
}

func (d *realDriver) GraphLaunch(x graphExec, s stream) error {
	return d.call("cuGraphLaunch", uintptr(x), uintptr(s))
}

func (d *realDriver) GraphExecDestroy(x graphExec) error {
	return d.call("cuGraphExecDestroy", uintptr(x))
}

func (d *realDriver) GraphDestroy(g graph) error { return d.call("cuGraphDestroy", uintptr(g)) }

func (d *realDriver) ProfilerStart() error {
	if d.fn["cuProfilerStart"] == 0 {
		return fmt.Errorf("%s has no cuProfilerStart", d.lib)
	}
	return d.call("cuProfilerStart")
}
