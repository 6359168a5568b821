"""Records torch's fp32 F.linear results for targets/cpu's GEMM-order emulation test.

DeepSeek-V4.1's reference computes its mHC mixes (and a few heads) with fp32 F.linear on
CPU, and the model is chaotic enough that MKL's summation order shows in the logits.
targets/cpu/v41_order.go reproduces that order; TestProbeM (targets/cpu/v41_probe_test.go)
checks it against the file this writes (testdata/v41/probe_m.safetensors):

    python3 tools/v41/probe_gemm.py OUTDIR      # on the reference's machine type

Inputs are generated from integer hashes that the Go test regenerates exactly, so only
the outputs are stored. Keys are y.K.N.M (torch's default thread count) and
y.K.N.M.tT (T threads), for the shapes in SHAPES.
"""
import os
import sys

import torch
from safetensors.torch import save_file

# (K, N, row counts, thread counts): the mHC mixes of tiny-v41-dev (K = 4·256, N = 24)
# and tiny-v41-dev2 (K = 2·192, N = 8); the ratio-2 compressors' projections; the heads.
ALL = list(range(1, 131))
SHAPES = [
    (1024, 24, ALL, [0, 1, 4, 8]),
    (384, 8, ALL, [0, 1, 4, 8]),
    (256, 64, list(range(1, 101)), [0]),
    (192, 64, list(range(1, 101)), [0]),
    (256, 512, list(range(1, 9)), [0]),
    (192, 448, list(range(1, 9)), [0]),
    (192, 5, ALL, [0]),
]


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
    default = torch.get_num_threads()
    for k, n, ms, threads in SHAPES:
        x = gen(max(ms), k, k + n, "x")
        w = gen(n, k, k * 3 + n, "w")
        for t in threads:
            torch.set_num_threads(t or default)
            for m in ms:
                key = f"y.{k}.{n}.{m}" + (f".t{t}" if t else "")
                out[key] = torch.nn.functional.linear(x[:m], w).contiguous()
    torch.set_num_threads(default)
    save_file(out, os.path.join(sys.argv[1], "probe_m.safetensors"),
              metadata={"torch": torch.__version__, "threads": str(default)})
    print("torch", torch.__version__, "threads", default)


if __name__ == "__main__":
    main()
