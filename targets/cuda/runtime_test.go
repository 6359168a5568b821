package cuda

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	dic "deepinfer/compiler"
	"deepinfer/deploy"
	"deepinfer/ir"
	"deepinfer/plan"
	"deepinfer/targets"
	"deepinfer/vm"
)

// The runtime's bookkeeping on the fake driver: what is allocated when, what a step
// uploads, launches and reads back, what Close frees, the kernel cache, and the error
// paths. (diff_test.go checks what the kernels compute.)

// countingCompiler compiles nothing: its images only count launches on the fake driver.
type countingCompiler struct{ calls int }

func (c *countingCompiler) Version() string { return "counting 1" }
func (c *countingCompiler) Compile(src, name string, opts []string) ([]byte, string, error) {
	c.calls++
	if !strings.Contains(src, "KERNEL(embed") {
		return nil, "", os.ErrInvalid
	}
	return []byte("fake image " + opts[0]), "", nil
}

func defaultPlan(t *testing.T) (*plan.Plan, []targets.Weight) {
	t.Helper()
	out, err := dic.Compile(dic.Options{Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	p := out.Plan
	ws := make([]targets.Weight, len(p.Weights))
	for i, w := range p.Weights {
		ws[i] = targets.Weight{Name: w.Name, Storage: "f32", Shape: make([]int, len(w.Shape))}
		n := 1
		for d, s := range w.Shape {
			ws[i].Shape[d] = int(s)
			n *= int(s)
		}
		if w.DType.String() == "i32" {
			ws[i].I32 = make([]int32, n)
		} else {
			ws[i].F32 = make([]float32, n)
		}
	}
	return p, ws
}

func withCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Setenv(EnvCache, dir)
	return dir
}

func greedyStep(in *targets.StepIn, st targets.State, toks []int32, pos int) {
	*in = targets.StepIn{Phase: plan.PhaseDecode, Tokens: toks, Rows: []int32{int32(len(toks) - 1)}, Sample: []float32{0, 0, 0, 0},
		Seqs: []targets.SeqIn{{State: st, N: len(toks), Pos: pos}}}
	if len(toks) > 1 {
		in.Phase = plan.PhasePrefill
	}
}

func TestRuntimeBookkeeping(t *testing.T) {
	withCache(t)
	p, ws := defaultPlan(t)
	d := newFakeDriver(1 << 30)
	cc := &countingCompiler{}
	rt, err := open(d, cc, p, ws, targets.Options{MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	// at open: the weights, the experts' weight tables and the arena, nothing else
	var want int64
	for i := range ws {
		want += int64(ws[i].Bytes())
	}
	if rt.info.WeightBytes != want {
		t.Errorf("device weights %d bytes, storage %d", rt.info.WeightBytes, want)
	}
	if d.stats.Allocs != 3 || d.stats.Streams != 1 || d.stats.Modules != 1 || cc.calls != 1 {
		t.Errorf("open: %+v, %d compiles; want 3 allocations, 1 stream, 1 module, 1 compile", d.stats, cc.calls)
	}
	live := d.Live()
	st, err := rt.NewState()
	if err != nil {
		t.Fatal(err)
	}
	if rt.state.size > 0 && d.Live() != live+uint64(rt.state.size) {
		t.Errorf("a state of %d bytes moved live memory from %d to %d", rt.state.size, live, d.Live())
	}
	// steps allocate nothing; each launches every kernel of its program once
	allocs := d.stats.Allocs
	var in targets.StepIn
	var out targets.StepOut
	launches := func(phase string) int {
		n := 0
		for _, c := range rt.progs[phase].calls {
			n += len(c.launches)
		}
		return n
	}
	before := d.stats.Launches
	greedyStep(&in, st, []int32{1, 2, 3, 4, 5}, 0)
	if err := rt.Step(&in, &out); err != nil {
		t.Fatal(err)
	}
	if got := d.stats.Launches - before; got > launches(plan.PhasePrefill) || got == 0 {
		t.Errorf("prefill launched %d kernels; its program has %d launches", got, launches(plan.PhasePrefill))
	}
	for i := 0; i < 3; i++ {
		greedyStep(&in, st, []int32{out.Tokens[0]}, 5+i)
		if err := rt.Step(&in, &out); err != nil {
			t.Fatal(err)
		}
	}
	if d.stats.Allocs != allocs || len(out.Tokens) != 1 || out.Logits != nil {
		t.Errorf("steps allocated %d times, returned %d tokens and logits %v", d.stats.Allocs-allocs, len(out.Tokens), out.Logits != nil)
	}
	// logits come back only for the rows that ask
	in.Want = []bool{true}
	if err := rt.Step(&in, &out); err != nil {
		t.Fatal(err)
	}
	if len(out.Logits) != 1 || len(out.Logits[0]) != p.Model.Vocab {
		t.Errorf("asked for one row of logits, got %d rows", len(out.Logits))
	}
	// a step larger than the arena grows it once, before the step
	big := make([]int32, 40)
	st2, _ := rt.NewState()
	greedyStep(&in, st2, big, 0)
	arena := rt.arenaBytes
	if err := rt.Step(&in, &out); err != nil {
		t.Fatal(err)
	}
	stateAllocs := 0
	if rt.state.size > 0 {
		stateAllocs = 1
	}
	if rt.maxT != 40 || rt.arenaBytes <= arena || d.stats.Allocs != allocs+1+stateAllocs || d.stats.Frees != 1 {
		t.Errorf("after a 40-token step: arena for %d tokens (%d bytes, was %d), %d allocations, %d frees", rt.maxT, rt.arenaBytes, arena, d.stats.Allocs-allocs, d.stats.Frees)
	}
	// bad steps are refused before anything runs
	before = d.stats.Launches
	for _, bad := range []targets.StepIn{
		{Phase: "nope", Tokens: []int32{1}, Rows: []int32{0}, Sample: make([]float32, 4), Seqs: []targets.SeqIn{{State: st, N: 1, Pos: 9}}},
		{Phase: plan.PhaseDecode, Tokens: []int32{1}, Rows: []int32{3}, Sample: make([]float32, 4), Seqs: []targets.SeqIn{{State: st, N: 1, Pos: 9}}},
		{Phase: plan.PhaseDecode, Tokens: []int32{1}, Rows: []int32{0}, Sample: make([]float32, 3), Seqs: []targets.SeqIn{{State: st, N: 1, Pos: 9}}},
		{Phase: plan.PhaseDecode, Tokens: []int32{1, 2}, Rows: []int32{0}, Sample: make([]float32, 4), Seqs: []targets.SeqIn{{State: st, N: 1, Pos: 9}}},
		{Phase: plan.PhaseDecode, Tokens: []int32{1}, Rows: []int32{0}, Sample: make([]float32, 4), Seqs: []targets.SeqIn{{State: nil, N: 1, Pos: 9}}},
	} {
		if err := rt.Step(&bad, &out); err == nil {
			t.Errorf("step %+v accepted", bad)
		}
	}
	if d.stats.Launches != before {
		t.Errorf("refused steps launched %d kernels", d.stats.Launches-before)
	}
	st.Release()
	st2.Release()
	st.Release() // twice is harmless
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if d.Live() != 0 {
		t.Errorf("%d bytes still allocated after Close", d.Live())
	}
	if err := rt.Step(&in, &out); err == nil {
		t.Error("a step on a closed runtime ran")
	}
}

func TestKernelCache(t *testing.T) {
	dir := withCache(t)
	p, ws := defaultPlan(t)
	cc := &countingCompiler{}
	for i, wantCached := range []bool{false, true} {
		rt, err := open(newFakeDriver(1<<30), cc, p, ws, targets.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if rt.info.Compile.Cached != wantCached || cc.calls != 1 {
			t.Errorf("open %d: cached %v after %d compiles", i, rt.info.Compile.Cached, cc.calls)
		}
		if !strings.Contains(rt.Describe(), map[bool]string{false: "compiled by counting 1", true: "nothing compiled"}[wantCached]) {
			t.Errorf("open %d: %s", i, rt.Describe())
		}
		rt.Close()
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v", files)
	}
	// another architecture, options or compiler version is another entry
	k := cacheKey(Source(), compileOptions("sm_90a"), "counting 1")
	for _, other := range []string{cacheKey(Source(), compileOptions("sm_100a"), "counting 1"), cacheKey(Source(), compileOptions("sm_90a"), "counting 2"), cacheKey(Source()+" ", compileOptions("sm_90a"), "counting 1")} {
		if other == k {
			t.Error("cache key ignores an input")
		}
	}
	// a damaged (empty) entry is rebuilt, an unwritable cache is not an error
	os.WriteFile(files[0], nil, 0o644)
	if _, err := open(newFakeDriver(1<<30), cc, p, ws, targets.Options{}); err != nil || cc.calls != 2 {
		t.Errorf("empty cache entry: %v, %d compiles", err, cc.calls)
	}
	t.Setenv(EnvCache, filepath.Join(files[0], "not-a-dir"))
	if _, err := open(newFakeDriver(1<<30), cc, p, ws, targets.Options{}); err != nil {
		t.Errorf("unwritable cache: %v", err)
	}
}

func TestOpenFailuresFreeEverything(t *testing.T) {
	withCache(t)
	p, ws := defaultPlan(t)
	for _, c := range []struct {
		call string
		n    int
		want string
	}{{"cuMemAlloc", 1, "weights"}, {"cuMemAlloc", 2, "weight tables"}, {"cuMemAlloc", 3, "arena"}} {
		d := newFakeDriver(1 << 30)
		d.failAt[c.call] = c.n
		_, err := open(d, &countingCompiler{}, p, ws, targets.Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "OUT_OF_MEMORY") {
			t.Errorf("%s #%d failing: %v", c.call, c.n, err)
		}
		if d.Live() != 0 {
			t.Errorf("%s #%d failing: %d bytes left allocated", c.call, c.n, d.Live())
		}
	}
	// too little device memory for the weights
	d := newFakeDriver(1000)
	if _, err := open(d, &countingCompiler{}, p, ws, targets.Options{}); err == nil || !strings.Contains(err.Error(), "weights") {
		t.Errorf("1000-byte device: %v", err)
	}
	// a kernel launch failing mid-step fails the step, and the runtime stays usable
	d = newFakeDriver(1 << 30)
	rt, err := open(d, &countingCompiler{}, p, ws, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	st, _ := rt.NewState()
	var in targets.StepIn
	var out targets.StepOut
	greedyStep(&in, st, []int32{1, 2, 3}, 0)
	d.failAt["cuLaunchKernel"] = d.calls["cuLaunchKernel"] + 3
	if err := rt.Step(&in, &out); err == nil || !strings.Contains(err.Error(), "instr") {
		t.Errorf("failed launch: %v", err)
	}
	st2, _ := rt.NewState()
	greedyStep(&in, st2, []int32{1, 2, 3}, 0)
	if err := rt.Step(&in, &out); err != nil {
		t.Errorf("after a failed step: %v", err)
	}
	// a plan with an op nobody bound is refused at open, naming the op
	bad := *p
	bad.Programs = append([]plan.Program(nil), p.Programs...)
	bad.Programs[0].Instrs = append([]plan.Instr(nil), p.Programs[0].Instrs...)
	bad.Programs[0].Instrs[1].Op = "no_such_op"
	if !allowUnbound {
		if _, err := open(newFakeDriver(1<<30), &countingCompiler{}, &bad, ws, targets.Options{}); err == nil || !strings.Contains(err.Error(), "no_such_op") {
			t.Errorf("unknown op: %v", err)
		}
	}
}

// Discovery order and the no-GPU error, on a fake file system.
type fakeFS struct {
	env   map[string]string
	files map[string]bool
}

func (f fakeFS) Getenv(k string) string { return f.env[k] }
func (f fakeFS) Exists(p string) bool   { return f.files[p] }
func (f fakeFS) Glob(pat string) []string {
	var out []string
	for p := range f.files {
		if ok, _ := filepath.Match(pat, p); ok {
			out = append(out, p)
		}
		if d := filepath.Dir(p); d != p {
			if ok, _ := filepath.Match(pat, d); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

func TestDiscoveryOrder(t *testing.T) {
	fs := fakeFS{
		env: map[string]string{EnvLibs: "/opt/mine", "PATH": "/opt/venv/bin:/usr/bin", "CUDA_HOME": "/opt/cuda"},
		files: map[string]bool{
			"/opt/mine/libnvrtc.so.13": true,
			"/opt/venv/bin/python3":    true,
			"/opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13": true,
			"/opt/cuda/lib64/libnvrtc.so.13":                                        true,
			"/usr/local/nvidia/lib64/libcuda.so.1":                                  true,
		},
	}
	paths, _ := candidates(fs, libNVRTC)
	want := []string{"/opt/mine/libnvrtc.so.13", "/opt/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libnvrtc.so.13",
		"/opt/cuda/lib64/libnvrtc.so.13", "libnvrtc.so.13", "libnvrtc.so"}
	if strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("nvrtc candidates\n%v\nwant\n%v", paths, want)
	}
	paths, _ = candidates(fs, libCUDA)
	if len(paths) < 2 || paths[0] != "/usr/local/nvidia/lib64/libcuda.so.1" || paths[len(paths)-1] != "libcuda.so" {
		t.Errorf("driver candidates %v", paths)
	}
	// a file named in the variable comes first, as is
	fs.env[EnvLibs] = "/x/libcuda.so.1"
	fs.files["/x/libcuda.so.1"] = true
	if paths, _ = candidates(fs, libCUDA); paths[0] != "/x/libcuda.so.1" {
		t.Errorf("a file in %s: %v", EnvLibs, paths)
	}
	// nothing loads: one line naming the library and where it looked
	_, _, err := load(fs, libCUDA, func(string) (int, error) { return 0, os.ErrNotExist })
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "libcuda.so.1") || !strings.HasPrefix(err.Error(), "no GPU:") {
		t.Errorf("error: %v", err)
	}
}

// On this machine: either a GPU is found, or Open says in one line what was not.
func TestOpenWithoutGPU(t *testing.T) {
	p, ws := defaultPlan(t)
	rt, err := Open(p, ws, targets.Options{})
	if err == nil {
		rt.Close()
		t.Logf("a GPU is present: %s", rt.(*Runtime).Describe())
		return
	}
	if !strings.HasPrefix(err.Error(), "no GPU:") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no-GPU error: %q", err)
	}
}

// plannedWeightBytes is the planner's per-rank weight bytes for model on one H200
// (the memory pass of a one-device deployment).
func plannedWeightBytes(t *testing.T, model string) int64 {
	t.Helper()
	spec := "target: h200\ntopology: {nodes: 1, devices_per_node: 1}\nroles:\n  decode: {dp: 1, ep: 1, max_num_seqs: 8, max_model_len: 128, max_num_batched_tokens: 64}\n"
	s, err := deploy.Parse([]byte(spec), "spec.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	out, err := dic.Compile(dic.Options{ModelDir: "../../testdata/" + model, Spec: s})
	if err != nil {
		t.Fatal(err)
	}
	return out.Plan.Deployment.Roles[0].Mem("weights")
}

// fixturePlan compiles a fixture under testdata for h200 and loads its weights.
func fixturePlan(t *testing.T, model string) (*plan.Plan, []targets.Weight) {
	t.Helper()
	return CompileDir(t, "../../testdata/"+model)
}

// CompileDir compiles the model in dir for h200 and loads its weights (the external
// tests call it too).
func CompileDir(t testing.TB, dir string) (*plan.Plan, []targets.Weight) {
	t.Helper()
	out, err := dic.Compile(dic.Options{ModelDir: dir, Target: "h200"})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := vm.LoadWeights(out.Plan, dir)
	if err != nil {
		t.Fatal(err)
	}
	return out.Plan, ws
}

// The weights stay in their storage formats on the device: its bytes are the planner's
// per-rank weight bytes (acceptance: within 2%).
func TestWeightBytesMatchPlanner(t *testing.T) {
	withCache(t)
	for _, model := range []string{"tiny-v4-dev", "tiny-v41-dev", "tiny-v41-dev2"} {
		p, ws := fixturePlan(t, model)
		d := newFakeDriver(1 << 30)
		rt, err := open(d, &countingCompiler{}, p, ws, targets.Options{})
		if err != nil {
			t.Fatal(err)
		}
		dev, planned := rt.Info().WeightBytes, plannedWeightBytes(t, model)
		rt.Close()
		ratio := float64(dev) / float64(planned)
		t.Logf("%s: %d bytes on the device, planner %d (ratio %.4f)", model, dev, planned, ratio)
		if ratio < 0.98 || ratio > 1.02 {
			t.Errorf("%s: device weights %d bytes, planner %d", model, dev, planned)
		}
	}
}

// Every IR op has a binder (ops_*.go): an op added to ir/ops.go without a CUDA kernel
// fails here.
func TestEveryOpHasABinder(t *testing.T) {
	for _, op := range ir.Ops() {
		if binders[op] == nil {
			t.Errorf("op %s has no cuda kernel", op)
		}
	}
}

// unitCounting is countingCompiler as a unitCompiler (as NVRTC is): each unit its own
// program.
type unitCounting struct {
	mu    sync.Mutex
	names []string
}

func (c *unitCounting) Version() string     { return "counting units 1" }
func (c *unitCounting) SeparateUnits() bool { return true }
func (c *unitCounting) Compile(src, name string, opts []string) ([]byte, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.names = append(c.names, name)
	return []byte("fake image " + name), "", nil
}

// TestUnitsPartitionTheKernels: the separately compiled units define every kernel of
// the whole source exactly once, and each compiles alone (host compiler, syntax only,
// both the device's and the emulated device's branches), so none leans on a definition
// in another unit.
func TestUnitsPartitionTheKernels(t *testing.T) {
	all := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^KERNEL\((\w+),`).FindAllStringSubmatch(Source(), -1) {
		all[m[1]]++
	}
	seen := map[string]string{}
	units := Units()
	if len(units) < 8 {
		t.Fatalf("%d units", len(units))
	}
	def := regexp.MustCompile(`(?m)^KERNEL\((\w+),`)
	parted := map[string]int{}
	for _, u := range units {
		for _, k := range u.Kernels {
			if prev, dup := seen[k]; dup {
				t.Errorf("kernel %s in units %s and %s", k, prev, u.Name)
			}
			seen[k] = u.Name
		}
		// what the unit's source defines is what it lists (a unit in parts: its share,
		// the other parts' kernels as KERNEL_SKIP)
		var defs []string
		for _, m := range def.FindAllStringSubmatch(u.Src, -1) {
			defs = append(defs, m[1])
		}
		if !slices.Equal(defs, u.Kernels) {
			t.Errorf("unit %s defines %d kernels, lists %d", u.Name, len(defs), len(u.Kernels))
		}
		if base, _, ok := strings.Cut(u.Name, "."); ok {
			parted[base]++
		}
	}
	// the slowest units as one program compile in parts (source.go's parts)
	for u, n := range map[string]int{"dense41": 6, "tensorcore": 4, "mhc": 3, "csa41": 2} {
		if parted[u] != n {
			t.Errorf("%s in %d parts, want %d", u, parted[u], n)
		}
	}
	for k, n := range all {
		if n != 1 || seen[k] == "" {
			t.Errorf("kernel %s: defined %d times in the source, in unit %q", k, n, seen[k])
		}
	}
	if len(seen) != len(all) {
		t.Errorf("units define %d kernels, the source %d", len(seen), len(all))
	}
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	// the device branch with stand-ins for what NVRTC provides
	stubs := "#define __device__\n#define __global__\n#define __forceinline__ inline\n" +
		"struct dim3_ { unsigned x, y, z; }; static dim3_ blockIdx, threadIdx, gridDim, blockDim;\n" +
		"struct alignas(16) uint4 { unsigned x, y, z, w; }; struct alignas(16) float4 { float x, y, z, w; }; struct alignas(8) float2 { float x, y; }; struct alignas(16) double2 { double x, y; };\n" +
		"#define __align__(n) __attribute__((aligned(n)))\n" +
		"float __uint_as_float(unsigned); unsigned __float_as_uint(float); double __longlong_as_double(long long); long long __double_as_longlong(double);\n" +
		"#define __shared__\n#define __launch_bounds__(t, b)\ninline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }\n" +
		"inline void __syncthreads() {} inline int __any_sync(unsigned, int p) { return p; } inline int min(int a, int b) { return a < b ? a : b; } inline int atomicAdd(int* p, int v) { int o = *p; *p += v; return o; } inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p += v; return o; } inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; } inline unsigned atomicOr(unsigned* p, unsigned v) { unsigned o = *p; *p |= v; return o; }\n" +
		"inline void __syncwarp() {} inline void __syncwarp(unsigned) {} template <class T> T __shfl_sync(unsigned, T v, int) { return v; } template <class T> T __shfl_sync(unsigned, T v, int, int) { return v; }\n" +
		"template <class T> T __shfl_xor_sync(unsigned, T v, int, int = 32) { return v; }\n" +
		"template <class T> T __shfl_down_sync(unsigned, T v, unsigned, int = 32) { return v; }\n" +
		"template <class T> T __shfl_up_sync(unsigned, T v, unsigned, int = 32) { return v; } inline int __ffs(int v) { return v; }\n" +
		"inline unsigned __ballot_sync(unsigned, int p) { return p; } inline int __popc(unsigned v) { return (int)v; }\n" +
		"inline unsigned __byte_perm(unsigned a, unsigned, unsigned) { return a; }\n" +
		"#include <cmath>\n#include <cstring>\n"
	dir := t.TempDir()
	for _, u := range units {
		for _, mode := range []struct{ name, prefix, flag string }{{"device", stubs, "-UDI_EMULATE"}, {"emulated", "", "-DDI_EMULATE"}} {
			f := filepath.Join(dir, u.Name+"-"+mode.name+".cc")
			if err := os.WriteFile(f, []byte(mode.prefix+u.Src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(h.cxx, "-std=c++17", "-fsyntax-only", "-w", mode.flag, f).CombinedOutput()
			if err != nil {
				t.Errorf("unit %s (%s branch) does not compile alone: %v\n%s", u.Name, mode.name, err, firstLines(string(out), 12))
			}
		}
	}
}

func firstLines(s string, n int) string {
	l := strings.SplitN(s, "\n", n+1)
	return strings.Join(l[:min(n, len(l))], "\n")
}

// TestSeparateUnitsOpen: with a compiler that builds units (NVRTC), opening compiles
// each unit once, loads a module per unit, finds every launched kernel in the unit that
// defines it, and a second open compiles nothing.
func TestSeparateUnitsOpen(t *testing.T) {
	dir := withCache(t)
	p, ws := defaultPlan(t)
	cc := &unitCounting{}
	d := newFakeDriver(1 << 30)
	rt, err := open(d, cc, p, ws, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(Units())
	if len(cc.names) != n || d.stats.Modules != n || rt.info.Compile.Units != n || rt.info.Compile.Cached {
		t.Errorf("%d compiles (%v), %d modules, stats %+v; want %d units compiled", len(cc.names), cc.names, d.stats.Modules, rt.info.Compile, n)
	}
	rt.Close()
	cc.names = nil
	rt, err = open(newFakeDriver(1<<30), cc, p, ws, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if len(cc.names) != 0 || !rt.info.Compile.Cached || len(rt.info.Compile.Compiled) != 0 {
		t.Errorf("second open compiled %v (stats %+v)", cc.names, rt.info.Compile)
	}
	// UnitKeys names exactly the entries the opens stored
	var stored, listed []string
	bins, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	for _, b := range bins {
		stored = append(stored, strings.TrimSuffix(filepath.Base(b), ".bin"))
	}
	for _, k := range UnitKeys(rt.info.Compile.Arch, cc.Version()) {
		listed = append(listed, k.Key)
	}
	slices.Sort(stored)
	slices.Sort(listed)
	if len(listed) != n || !slices.Equal(stored, listed) {
		t.Errorf("the cache holds %v, UnitKeys lists %v", stored, listed)
	}
	rt.Close()
	// one unit's entry gone: only it compiles, and the start-up line names it
	u := Units()[n/2]
	key := cacheKey(u.Src, compileOptions(rt.info.Compile.Arch), cc.Version())
	if err := os.Remove(filepath.Join(dir, key+".bin")); err != nil {
		t.Fatal(err)
	}
	cc.names = nil
	rt, err = open(newFakeDriver(1<<30), cc, p, ws, targets.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if len(cc.names) != 1 || rt.info.Compile.Cached || !slices.Equal(rt.info.Compile.Compiled, []string{u.Name}) {
		t.Errorf("third open compiled %v (stats %+v); want only %s", cc.names, rt.info.Compile, u.Name)
	}
	if want := fmt.Sprintf("1 of %d units in parallel (%s; the rest from the cache)", n, u.Name); !strings.Contains(rt.Describe(), want) {
		t.Errorf("Describe: %q lacks %q", rt.Describe(), want)
	}
}

// TestNormOneRule: the fast RMSNorm runs as one launch for rows of at most 2,048 values
// at any count and for longer rows from 128 of them (run 31's measurements), never with
// DEEPINFER_CUDA_NORM_ONE=0 and always with =1.
func TestNormOneRule(t *testing.T) {
	for _, c := range []struct {
		env       string
		chunks, g int64
		want      bool
	}{
		{"", 1, 512, true}, {"", 1, 2048, true}, {"", 1, 2049, false}, {"", 1, 20480, false},
		{"", 64, 5120, false}, {"", 127, 16384, false}, {"", 128, 16384, true}, {"", 256, 5120, true},
		{"0", 256, 512, false}, {"1", 1, 20480, true},
	} {
		if got := normOne(c.env, c.chunks, c.g); got != c.want {
			t.Errorf("normOne(%q, %d rows, %d values) = %v, want %v", c.env, c.chunks, c.g, got, c.want)
		}
	}
}

// TestSharedAllowance: the emulated device, as a GPU, refuses a launch of more than 48 KB
// of dynamic shared memory before its kernel is allowed that much (FuncShared, which
// the runtime calls when a program binds such a launch), and an allowance past sm_90's
// 227 KB.
func TestSharedAllowance(t *testing.T) {
	withCache(t)
	p, ws := defaultPlan(t)
	d := newFakeDriver(1 << 30)
	rt, err := open(d, &countingCompiler{}, p, ws, targets.Options{MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var f function
	for _, fn := range rt.funcs {
		f = fn
		break
	}
	if f == 0 {
		t.Fatal("no kernel resolved")
	}
	args := []uint64{0}
	if err := d.Launch(f, 1, 128, 64<<10, 0, args); err == nil || !strings.Contains(err.Error(), "INVALID_VALUE") {
		t.Errorf("a 64 KB launch before the allowance: %v; want CUDA_ERROR_INVALID_VALUE", err)
	}
	if err := d.FuncShared(f, maxSharedBlock+16); err == nil {
		t.Error("an allowance past 227 KB was granted")
	}
	if err := d.FuncShared(f, 64<<10); err != nil {
		t.Fatal(err)
	}
	if err := d.Launch(f, 1, 128, 96<<10, 0, args); err == nil || !strings.Contains(err.Error(), "INVALID_VALUE") {
		t.Errorf("a 96 KB launch with a 64 KB allowance: %v; want CUDA_ERROR_INVALID_VALUE", err)
	}
	// within the allowance the launch is taken (captured into a graph, not run: its
	// arguments are not a kernel's)
	s, err := d.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.BeginCapture(s); err != nil {
		t.Fatal(err)
	}
	launched := d.Launch(f, 1, 128, 64<<10, s, args)
	if _, err := d.EndCapture(s); err != nil {
		t.Fatal(err)
	}
	if launched != nil {
		t.Errorf("a 64 KB launch with its allowance: %v", launched)
	}
}

// TestFusedAttentionNeedsItsShared: V4.1's fused attention (206 KB a launch block at
// head dim 512) fits the allowance of sm_90 and sm_100 and of no older device, where the
// binder keeps the three launches; the fake driver allows what sm_90 does.
func TestFusedAttentionNeedsItsShared(t *testing.T) {
	need := csaFusedShared(512, csaFusedThreads/32)
	for _, c := range []struct {
		major, minor int
		fits         bool
	}{{9, 0, true}, {10, 0, true}, {8, 0, false}, {8, 6, false}, {8, 9, false}, {7, 5, false}, {12, 0, false}, {6, 1, false}} {
		if got := need <= sharedMax(c.major, c.minor); got != c.fits {
			t.Errorf("sm_%d%d: %d bytes fit its %d: %v, want %v", c.major, c.minor, need, sharedMax(c.major, c.minor), got, c.fits)
		}
	}
	if sharedMax(9, 0) != maxSharedBlock {
		t.Errorf("sharedMax(9, 0) = %d, the fake driver allows %d", sharedMax(9, 0), maxSharedBlock)
	}
}

// TestNativeArch: the emulated device's libraries are built for the architecture GCC
// resolves -march=native to, read from its -Q --help=target listing, and that name is
// in the compiler's version (the kernel cache's key); a listing that does not resolve it
// (another compiler, or "native" itself) builds for the default target.
func TestNativeArch(t *testing.T) {
	for _, c := range []struct{ listing, want string }{
		{"The following options are target specific:\n  -m128bit-long-double        \t[disabled]\n  -march=                     \t\tznver3\n  -masm=                      \t\tatt\n", "znver3"},
		{"  -march=                     \t\tarmv8.2-a+crypto\n", "armv8.2-a+crypto"},
		{"  -march=                     \t\tnative\n", ""},
		{"clang: error: unsupported option '--help=target'\n", ""},
		{"  -march=                     \t\tx86-64 -mtune=generic\n", ""},
	} {
		if got := parseNativeArch(c.listing); got != c.want {
			t.Errorf("listing %q: arch %q, want %q", c.listing, got, c.want)
		}
	}
	h, err := newHostCompiler()
	if err != nil {
		t.Fatal(err)
	}
	if h.arch != "" && !strings.HasSuffix(h.Version(), " -march="+h.arch) {
		t.Errorf("arch %q not in the version %q (the cache key)", h.arch, h.Version())
	}
	t.Logf("host compiler: %s", h.Version())
}

// TestSharedAllowanceIsTheMost: every kernel a program launches with dynamic shared
// memory is allowed the most any of its launches takes, once (a launch taking less never
// lowers another's allowance): on tiny-v41-dev in the fast mode with the FP4 bulk-copy
// tiles (DEEPINFER_CUDA_FP4_TILED=1, whose 34 KB of dynamic shared memory sit beside
// 32 KB of static), the fake driver's allowances against the bound launches.
func TestSharedAllowanceIsTheMost(t *testing.T) {
	withCache(t)
	t.Setenv(EnvFP4Tiled, "1")
	p, ws := fixturePlan(t, "tiny-v41-dev")
	d := newFakeDriver(2 << 30)
	rt, err := open(d, &countingCompiler{}, p, ws, targets.Options{MaxTokens: 16, Numerics: targets.NumericsFast})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	most := map[string]int64{}
	for _, pr := range rt.progs {
		for _, c := range pr.calls {
			for _, l := range c.launches {
				most[l.kernel] = max(most[l.kernel], l.shared)
			}
		}
	}
	if most["fast_moe_up_fp4_regb"] != fp4BulkShared("_regb") {
		t.Fatalf("fast_moe_up_fp4_regb bound with %d bytes of dynamic shared memory, want %d", most["fast_moe_up_fp4_regb"], fp4BulkShared("_regb"))
	}
	for k, n := range most {
		if got := d.shared[rt.funcs[k]]; got != uint32(n) {
			t.Errorf("%s: allowed %d bytes, its launches take at most %d", k, got, n)
		}
	}
}
