#!/usr/bin/env python3
"""The GPU's dense GEMM rate, the yardstick for prefill (issue 12): bf16 and, where
torch has it, FP8 (e4m3, per-tensor scales) matrix products of N x N x N, timed with
CUDA events after a warm-up; prints the median TFLOP/s of each.

    python3 scripts/gemm-rate.py [--n 8192] [--reps 20]
"""
import argparse
import statistics
import sys

try:
    import torch
except ImportError:
    print("gemm-rate: no torch here", file=sys.stderr)
    sys.exit(2)


def rate(fn, flops, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return flops / statistics.median(times) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gemm-rate: no CUDA device", file=sys.stderr)
        sys.exit(2)
    n = args.n
    flops = 2.0 * n * n * n
    x = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    print(f"gemm rate: bf16 {n}x{n}x{n}: {rate(lambda: x @ y, flops, args.reps):.1f} TFLOP/s (median of {args.reps})")
    if hasattr(torch, "_scaled_mm") and hasattr(torch, "float8_e4m3fn"):
        xf = x.to(torch.float8_e4m3fn)
        yf = y.t().contiguous().t().to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda", dtype=torch.float32)
        try:
            r = rate(lambda: torch._scaled_mm(xf, yf, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), flops, args.reps)
            print(f"gemm rate: fp8 e4m3 {n}x{n}x{n}: {r:.1f} TFLOP/s (median of {args.reps})")
        except Exception as e:  # an older torch's signature
            print(f"gemm rate: fp8 not timed: {e}")


if __name__ == "__main__":
    main()
