package cuda

import (
	"embed"
	"sort"
	"strings"
)

//go:embed kernels/prelude.h kernels/numerics.h kernels/quant.h kernels/rows.h kernels/*.cu
var kernelFS embed.FS

// Source is the one CUDA C translation unit of every kernel: prelude.h, numerics.h,
// quant.h, rows.h, then each kernels/*.cu in name order. NVRTC compiles it for the device; the host C++ compiler
// compiles it (with DI_EMULATE) for the emulated device.
func Source() string {
	var b strings.Builder
	for _, h := range []string{"prelude.h", "numerics.h", "quant.h", "rows.h"} {
		src, _ := kernelFS.ReadFile("kernels/" + h)
		b.Write(src)
	}
	ents, _ := kernelFS.ReadDir("kernels")
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	for _, n := range names {
		src, _ := kernelFS.ReadFile("kernels/" + n)
		b.WriteString("\n// ---- " + n + " ----\n")
		b.Write(src)
	}
	return b.String()
}
