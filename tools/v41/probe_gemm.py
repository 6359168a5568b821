"""Records torch's fp32 F.linear results for targets/cpu's GEMM-order emulation test.

DeepSeek-V4.1's reference computes its mHC mixes (and a few heads) with fp32 F.linear on
CPU, and the model is chaotic enough that MKL's summation order shows in the logits.
targets/cpu/v41_order.go reproduces that order; TestProbeM (targets/cpu/v41_probe_test.go)
checks it against the file this writes:

    python3 tools/v41/probe_gemm.py OUTDIR      # on the reference's machine type
    V41PROBE=OUTDIR/probe_m.safetensors go test ./targets/cpu -run TestProbeM -v

Inputs are generated from integer hashes that the Go test regenerates exactly, so only
the outputs are stored.
"""
import os
import sys

import torch
from safetensors.torch import save_file


def gen(rows, cols, seed, kind):
    i = torch.arange(rows, dtype=torch.int64).view(-1, 1)
    j = torch.arange(cols, dtype=torch.int64).view(1, -1)
    h = (i * 1000003 + j * 7919 + seed * 15485863) % 2147483647
    h = (h * 48271) % 2147483647
    if kind == "x":  # bf16-exact activations
        return ((h % 255) - 127).float() / 32
    return ((h % 65537) - 32768).float() * 2.0**-20


def main():
    out = {}
    ms = list(range(1, 70)) + [96, 100, 127, 128, 129, 150, 200]
    for k, n in [(1024, 24), (256, 64), (256, 512), (512, 24), (32, 512), (288, 1)]:
        x = gen(max(ms), k, k + n, "x")
        w = gen(n, k, k * 3 + n, "w")
        for m in ms:
            out[f"y.{k}.{n}.{m}"] = torch.nn.functional.linear(x[:m], w).contiguous()
    save_file(out, os.path.join(sys.argv[1], "probe_m.safetensors"))
    print("torch", torch.__version__, "threads", torch.get_num_threads())


if __name__ == "__main__":
    main()
