package cuda

import (
	"embed"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

//go:embed kernels/prelude.h kernels/numerics.h kernels/quant.h kernels/rows.h kernels/*.cu
var kernelFS embed.FS

// Source is the one CUDA C translation unit of every kernel: prelude.h, numerics.h,
// quant.h, rows.h, then each kernels/*.cu in name order. The host C++ compiler compiles
// it (with DI_EMULATE) for the emulated device; NVRTC compiles it in Units.
func Source() string {
	head, names := kernelFiles()
	var b strings.Builder
	b.WriteString(head)
	for _, n := range names {
		b.WriteString(cuFile(n))
	}
	return b.String()
}

// kernelFiles returns the headers, concatenated, and the .cu files' names in order.
func kernelFiles() (string, []string) {
	var head strings.Builder
	for _, h := range []string{"prelude.h", "numerics.h", "quant.h", "rows.h"} {
		src, _ := kernelFS.ReadFile("kernels/" + h)
		head.Write(src)
	}
	ents, _ := kernelFS.ReadDir("kernels")
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".cu") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return head.String(), names
}

// cuFile is one .cu file as it joins a translation unit, after a line naming it.
func cuFile(name string) string {
	src, _ := kernelFS.ReadFile("kernels/" + name)
	return "\n// ---- " + name + " ----\n" + string(src)
}

// joins names the .cu files compiled in another file's unit because they use its
// definitions (rope.cu: attention.cu's RopeSpec; moe.cu: dense41.cu's dense_view;
// tensorcore_fp4.cu, tensorcore_attn.cu: tensorcore.cu's mma and argument structs).
var joins = map[string]string{"rope.cu": "attention.cu", "moe.cu": "dense41.cu", "tensorcore_fp4.cu": "tensorcore.cu",
	"tensorcore_attn.cu": "tensorcore.cu"}

// parts names the units compiled as several programs, each defining an equal share of
// the unit's kernels (every n-th in source order) and keeping the others' bodies as
// templates it never instantiates (prelude.h's KERNEL_SKIP): NVRTC compiles a program on
// one thread, so the slowest unit is the wait before anything runs on a fresh GPU
// machine. With CUDA 12.4's nvcc for sm_90a (2026-12-07), as one program each: dense41
// (with moe.cu) 143 s, tensorcore (with tensorcore_fp4.cu and tensorcore_attn.cu) 107 s,
// mhc 72 s, csa41 54 s, basic 31 s, the rest under 6 s; in these parts the slowest part
// took 44 s (dense41's: 40, 28, 44, 10, 39 and 8 s; tensorcore's 31, 32, 26 and 23;
// mhc's 28, 26 and 24; csa41's 23 and 35).
var parts = map[string]int{"dense41.cu": 6, "tensorcore.cu": 4, "mhc.cu": 3, "csa41.cu": 2}

// Unit is one separately compiled part of the kernels: the headers, then its .cu files.
type Unit struct {
	Name    string
	Src     string
	Kernels []string // the kernels it defines
}

var kernelDef = regexp.MustCompile(`(?m)^KERNEL\((\w+),`)

// Units splits the kernels into translation units that a device's compiler builds in
// parallel: one per .cu file (a joined file with the file it uses), each after the
// headers, and a unit of parts as that many programs named UNIT.1, UNIT.2, ... (the
// same source, each with its share of the kernels). Together they define every kernel
// of Source once.
func Units() []Unit {
	head, names := kernelFiles()
	unitOf := func(n string) string {
		if j, ok := joins[n]; ok {
			return j
		}
		return n
	}
	byName := map[string]*Unit{}
	var order []string
	for _, n := range names {
		if u := unitOf(n); byName[u] == nil {
			byName[u] = &Unit{Name: strings.TrimSuffix(u, ".cu"), Src: head}
			order = append(order, u)
		}
	}
	for _, n := range names {
		u := byName[unitOf(n)]
		src := cuFile(n)
		u.Src += src
		for _, m := range kernelDef.FindAllStringSubmatch(src, -1) {
			u.Kernels = append(u.Kernels, m[1])
		}
	}
	out := make([]Unit, 0, len(order))
	for _, u := range order {
		n := parts[u]
		if n < 2 {
			out = append(out, *byName[u])
			continue
		}
		for k := range n {
			out = append(out, unitPart(*byName[u], k, n))
		}
	}
	return out
}

// unitPart is part k of n of unit u: the kernels whose place in u's source is k modulo
// n defined, every other KERNEL( line a KERNEL_SKIP(.
func unitPart(u Unit, k, n int) Unit {
	p := Unit{Name: fmt.Sprintf("%s.%d", u.Name, k+1)}
	i := 0
	p.Src = kernelDef.ReplaceAllStringFunc(u.Src, func(def string) string {
		mine := i%n == k
		i++
		if mine {
			p.Kernels = append(p.Kernels, kernelDef.FindStringSubmatch(def)[1])
			return def
		}
		return "KERNEL_SKIP" + strings.TrimPrefix(def, "KERNEL")
	})
	return p
}
