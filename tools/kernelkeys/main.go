// Command kernelkeys prints the kernel cache keys of this tree's CUDA kernel units, one
// "UNIT KEY" line each, for an architecture and an NVRTC version: the KEY.bin entries a
// GPU machine's kernel cache (DEEPINFER_KERNEL_CACHE) needs so that divm compiles
// nothing. scripts/gpu-bench.sh build uses it to gather, from the kernel archives of
// earlier runs (build/kernels*.tgz, SAVE_KERNELS), the entries that still match. With
// -src DIR it writes each unit's source as DIR/UNIT.cu instead (what NVRTC compiles:
// scripts/sass-report.sh builds them with a local nvcc for registers, spills and SASS).
//
//	go run ./tools/kernelkeys [-arch sm_90a] [-compiler "nvrtc 13.0"]
//	go run ./tools/kernelkeys -src DIR
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"deepinfer/targets/cuda"
)

func main() {
	arch := flag.String("arch", "sm_90a", "the NVRTC architecture (sm_90a: H100/H200)")
	compiler := flag.String("compiler", "nvrtc 13.0", "the compiler version as divm reports it")
	src := flag.String("src", "", "write each unit's source into this directory (UNIT.cu) instead of printing keys")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kernelkeys [-arch sm_90a] [-compiler \"nvrtc 13.0\"] | kernelkeys -src DIR")
		os.Exit(2)
	}
	if *src != "" {
		if err := os.MkdirAll(*src, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "kernelkeys:", err)
			os.Exit(1)
		}
		for _, u := range cuda.Units() {
			if err := os.WriteFile(filepath.Join(*src, u.Name+".cu"), []byte(u.Src), 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "kernelkeys:", err)
				os.Exit(1)
			}
		}
		return
	}
	for _, k := range cuda.UnitKeys(*arch, *compiler) {
		fmt.Printf("%s %s\n", k.Name, k.Key)
	}
}
