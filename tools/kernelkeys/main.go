// Command kernelkeys prints the kernel cache keys of this tree's CUDA kernel units, one
// "UNIT KEY" line each, for an architecture and an NVRTC version: the KEY.bin entries a
// GPU machine's kernel cache (DEEPINFER_KERNEL_CACHE) needs so that divm compiles
// nothing. scripts/gpu-bench.sh build uses it to gather, from the kernel archives of
// earlier runs (build/kernels*.tgz, SAVE_KERNELS), the entries that still match.
//
//	go run ./tools/kernelkeys [-arch sm_90a] [-compiler "nvrtc 13.0"]
package main

import (
	"flag"
	"fmt"
	"os"

	"deepinfer/targets/cuda"
)

func main() {
	arch := flag.String("arch", "sm_90a", "the NVRTC architecture (sm_90a: H100/H200)")
	compiler := flag.String("compiler", "nvrtc 13.0", "the compiler version as divm reports it")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: kernelkeys [-arch sm_90a] [-compiler \"nvrtc 13.0\"]")
		os.Exit(2)
	}
	for _, k := range cuda.UnitKeys(*arch, *compiler) {
		fmt.Printf("%s %s\n", k.Name, k.Key)
	}
}
