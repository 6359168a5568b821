package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// CompileStats says what building the kernel module cost.
type CompileStats struct {
	Key      string
	Arch     string
	Compiler string
	Cached   bool // the image came from the disk cache: nothing was compiled
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
