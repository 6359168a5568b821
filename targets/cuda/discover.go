package cuda

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Finding the CUDA libraries, in this order:
//
//  1. the directories in DEEPINFER_CUDA_LIBS (colon-separated), or a file path there;
//  2. the CUDA 13 libraries that pip's nvidia-* wheels install
//     (site-packages/nvidia/cu13/lib) in the Python environments on this machine:
//     $VIRTUAL_ENV, $CONDA_PREFIX, the prefix of every python3 on PATH, /usr/local,
//     /usr and ~/.local;
//  3. the toolkit's lib64 ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda);
//  4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache), by soname.
//
// libcuda belongs to the driver, not to the toolkit or the wheels: it is looked for in
// DEEPINFER_CUDA_LIBS, then the driver's usual directories, then by soname.

// EnvLibs names the directories searched first.
const EnvLibs = "DEEPINFER_CUDA_LIBS"

// library is one shared library the target loads.
type library struct {
	what   string   // for messages
	names  []string // file names, preferred first
	driver bool     // libcuda: not in wheels or the toolkit
}

var (
	libCUDA  = library{what: "the CUDA driver library", names: []string{"libcuda.so.1", "libcuda.so"}, driver: true}
	libNVRTC = library{what: "NVRTC (CUDA 13)", names: []string{"libnvrtc.so.13", "libnvrtc.so"}}
)

// fsys is the file system discovery looks at (a fake one in tests).
type fsys interface {
	Getenv(string) string
	Exists(string) bool
	Glob(string) []string
}

type osFS struct{}

func (osFS) Getenv(k string) string { return os.Getenv(k) }
func (osFS) Exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
func (osFS) Glob(p string) []string {
	m, _ := filepath.Glob(p)
	sort.Strings(m)
	return m
}

// candidates lists where to try lib, in order: existing files first, then the bare
// sonames for the loader. It also returns the directories it looked in, for the error
// message when nothing loads.
func candidates(fs fsys, lib library) (paths []string, looked []string) {
	var dirs []string
	for _, d := range strings.Split(fs.Getenv(EnvLibs), ":") {
		if d == "" {
			continue
		}
		if fs.Exists(d) { // a file named directly
			paths = append(paths, d)
			continue
		}
		dirs = append(dirs, d)
	}
	if lib.driver {
		dirs = append(dirs, "/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib")
	} else {
		dirs = append(dirs, wheelDirs(fs)...)
		for _, e := range []string{"CUDA_HOME", "CUDA_PATH"} {
			if v := fs.Getenv(e); v != "" {
				dirs = append(dirs, filepath.Join(v, "lib64"), filepath.Join(v, "targets/x86_64-linux/lib"))
			}
		}
		dirs = append(dirs, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib")
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		looked = append(looked, d)
		for _, n := range lib.names {
			if p := filepath.Join(d, n); fs.Exists(p) {
				paths = append(paths, p)
			}
		}
	}
	paths = append(paths, lib.names...)
	return paths, looked
}

// wheelDirs are the nvidia/cu13/lib directories of the Python environments found.
func wheelDirs(fs fsys) []string {
	var prefixes []string
	for _, e := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if v := fs.Getenv(e); v != "" {
			prefixes = append(prefixes, v)
		}
	}
	for _, d := range strings.Split(fs.Getenv("PATH"), ":") {
		if d != "" && (fs.Exists(filepath.Join(d, "python3")) || fs.Exists(filepath.Join(d, "python"))) {
			prefixes = append(prefixes, filepath.Dir(d))
		}
	}
	prefixes = append(prefixes, "/usr/local", "/usr")
	if h := fs.Getenv("HOME"); h != "" {
		prefixes = append(prefixes, filepath.Join(h, ".local"))
	}
	var dirs []string
	for _, p := range prefixes {
		for _, sp := range []string{"site-packages", "dist-packages"} {
			for _, lib := range fs.Glob(filepath.Join(p, "lib", "python3*", sp, "nvidia", "cu13", "lib")) {
				dirs = append(dirs, lib)
			}
		}
	}
	return dirs
}

// load tries lib's candidates in order with open and returns the first that opens.
func load[T any](fs fsys, lib library, open func(string) (T, error)) (T, string, error) {
	paths, looked := candidates(fs, lib)
	var zero T
	var errs []string
	for _, p := range paths {
		v, err := open(p)
		if err == nil {
			return v, p, nil
		}
		if filepath.IsAbs(p) || strings.Contains(err.Error(), "GPU") {
			errs = append(errs, fmt.Sprintf("%s: %v", p, err))
		}
	}
	msg := fmt.Sprintf("no GPU: %s (%s) was not found", lib.what, strings.Join(lib.names, " or "))
	if len(errs) > 0 {
		msg = fmt.Sprintf("no GPU: %s did not load (%s)", lib.what, strings.Join(errs, "; "))
	}
	return zero, "", fmt.Errorf("%s; looked in %s=%q, %s and the loader path", msg, EnvLibs, fs.Getenv(EnvLibs), strings.Join(looked, ", "))
}
