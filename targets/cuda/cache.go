package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// EnvCache overrides the kernel cache directory (default: the user cache directory's
// deepinfer/cuda-kernels).
const EnvCache = "DEEPINFER_KERNEL_CACHE"

// kernelCache keeps compiled module images on disk, keyed by everything that decides
// their bytes: the source, the options (the architecture among them) and the
// compiler's version.
type kernelCache struct {
	dir string
}

// CompileStats says what building the kernel modules cost.
type CompileStats struct {
	Units    int    // modules compiled or loaded (the kernels' translation units)
	Slowest  string // with units: the unit that took longest, and its time
	Key      string
	Arch     string
	Compiler string
	Cached   bool     // the image came from the disk cache: nothing was compiled
	Compiled []string // with units: the units compiled (not found in the cache), in Units' order
	Took     time.Duration
	Bytes    int
}

func defaultCacheDir() string {
	if d := os.Getenv(EnvCache); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "deepinfer", "cuda-kernels")
	}
	return filepath.Join(os.TempDir(), "deepinfer-cuda-kernels")
}

func cacheKey(src string, opts []string, version string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", version, strings.Join(opts, "\x01"))
	h.Write([]byte(src))
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// UnitKey is a kernel unit's name and the key of its cache entry (KEY.bin).
type UnitKey struct{ Name, Key string }

// UnitKeys lists the cache keys the kernel units (Units) have for an architecture and a
// compiler version ("nvrtc 13.0"), with the options a build would use: the entries a
// machine's kernel cache needs so that nothing compiles (tools/kernelkeys).
func UnitKeys(arch, compilerVersion string) []UnitKey {
	var ks []UnitKey
	for _, u := range Units() {
		ks = append(ks, UnitKey{u.Name, cacheKey(u.Src, compileOptions(arch), compilerVersion)})
	}
	return ks
}

// build returns the module image for src, from the cache or compiled (and stored).
// A cache that cannot be written is not an error: the image is still returned.
func (c *kernelCache) build(cc compiler, src, name string, opts []string, arch string) ([]byte, CompileStats, error) {
	start := time.Now()
	st := CompileStats{Key: cacheKey(src, opts, cc.Version()), Arch: arch, Compiler: cc.Version()}
	path := ""
	if c.dir != "" {
		path = filepath.Join(c.dir, st.Key+".bin")
		if img, err := os.ReadFile(path); err == nil && len(img) > 0 {
			st.Cached, st.Took, st.Bytes = true, time.Since(start), len(img)
			return img, st, nil
		}
	}
	img, log, err := cc.Compile(src, name, opts)
	if err != nil {
		if log != "" {
			return nil, st, fmt.Errorf("compiling the %s kernels for %s: %v\n%s", name, arch, err, strings.TrimSpace(log))
		}
		return nil, st, fmt.Errorf("compiling the %s kernels for %s: %v", name, arch, err)
	}
	if path != "" {
		if err := os.MkdirAll(c.dir, 0o755); err == nil {
			tmp, err := os.CreateTemp(c.dir, ".tmp-*")
			if err == nil {
				_, werr := tmp.Write(img)
				cerr := tmp.Close()
				if werr == nil && cerr == nil {
					_ = os.Rename(tmp.Name(), path)
				} else {
					_ = os.Remove(tmp.Name())
				}
				if strings.TrimSpace(log) != "" {
					_ = os.WriteFile(strings.TrimSuffix(path, ".bin")+".log", []byte(log), 0o644)
				}
			}
		}
	}
	st.Took, st.Bytes = time.Since(start), len(img)
	return img, st, nil
}

// unitCompiler is a compiler that builds the kernels as separate translation units
// (Units), concurrently: NVRTC compiles one program on one thread, and the whole source
// as one program takes minutes.
type unitCompiler interface {
	compiler
	SeparateUnits() bool
}

// buildModules compiles (or loads from the cache) and loads the kernels: one module of
// Source, or with a unitCompiler one module per unit, built concurrently. It returns
// the modules, the module defining each kernel (units only), and the summed stats
// (Key: the whole source's key with one module, else a hash of the units' keys; Took:
// the wall time of the builds).
func buildModules(d driver, cc compiler, arch string) ([]module, map[string]module, CompileStats, error) {
	cache := &kernelCache{dir: defaultCacheDir()}
	opts := compileOptions(arch)
	if uc, ok := cc.(unitCompiler); !ok || !uc.SeparateUnits() {
		img, st, err := cache.build(cc, Source(), "deepinfer", opts, arch)
		if err != nil {
			return nil, nil, st, err
		}
		st.Units = 1
		m, err := d.LoadModule(img)
		if err != nil {
			return nil, nil, st, err
		}
		return []module{m}, nil, st, nil
	}
	units := Units()
	type built struct {
		img []byte
		st  CompileStats
		err error
	}
	res := make([]built, len(units))
	start := time.Now()
	var wg sync.WaitGroup
	for i := range units {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i].img, res[i].st, res[i].err = cache.build(cc, units[i].Src, "deepinfer_"+units[i].Name, opts, arch)
		}()
	}
	wg.Wait()
	total := CompileStats{Arch: arch, Compiler: cc.Version(), Cached: true, Units: len(units)}
	h := sha256.New()
	for i, r := range res {
		if r.err != nil {
			return nil, nil, total, fmt.Errorf("unit %s: %w", units[i].Name, r.err)
		}
		h.Write([]byte(r.st.Key))
		total.Cached = total.Cached && r.st.Cached
		if !r.st.Cached {
			total.Compiled = append(total.Compiled, units[i].Name)
		}
		total.Bytes += r.st.Bytes
	}
	total.Key = hex.EncodeToString(h.Sum(nil))[:32]
	slow := 0
	for i, r := range res {
		if r.st.Took > res[slow].st.Took {
			slow = i
		}
	}
	total.Slowest = fmt.Sprintf("%s %s", units[slow].Name, res[slow].st.Took.Round(time.Millisecond))
	total.Took = time.Since(start)
	mods := make([]module, len(units))
	where := map[string]module{}
	for i := range units {
		m, err := d.LoadModule(res[i].img)
		if err != nil {
			return nil, nil, total, fmt.Errorf("unit %s: %w", units[i].Name, err)
		}
		mods[i] = m
		for _, k := range units[i].Kernels {
			where[k] = m
		}
	}
	return mods, where, total, nil
}
