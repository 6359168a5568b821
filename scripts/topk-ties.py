#!/usr/bin/env python3
"""Which equals of the k-th value torch.topk keeps on a CUDA device.

DEEPINFER_INDEX_TIES=low (targets/runtime.go) keeps the lower positions first among the
k-th largest value's equals, and its docs say that is the set torch.topk keeps on a CUDA
device. This checks that claim on the GPU it runs on: rows of bf16-rounded scores (ties
at the cut nearly always), rows of a few distinct values, rows with NaN and +-0 and
+-inf, at V4.1's row sizes, each compared with the rule computed on the CPU by a stable
sort (larger first, NaN first, the lower position first among equals). It prints how
many rows agree, and how many had ties at the cut at all, per case; exit status 1 if a
row disagrees.

    python3 scripts/topk-ties.py
"""
import sys

import torch


def low_rule(row, k):
    # the positions of the k largest, the lower position first among equals: a stable
    # descending sort, NaN first (torch.sort puts NaN first in descending order)
    order = torch.sort(row, descending=True, stable=True).indices[:k]
    return set(order.tolist())


def main():
    if not torch.cuda.is_available():
        print("topk-ties: no CUDA device")
        return 2
    dev = torch.device("cuda")
    g = torch.Generator().manual_seed(7)
    bad = 0
    cases = [
        ("bf16 n32768 k512", 32768, 512, lambda n: (4 + torch.randn(n, generator=g)).to(torch.bfloat16).float()),
        ("bf16 relu n32768 k512", 32768, 512,
         lambda n: torch.relu(torch.randn(n, generator=g) - 2.5).to(torch.bfloat16).float()),
        ("bf16 n4096 k512", 4096, 512, lambda n: (4 + torch.randn(n, generator=g)).to(torch.bfloat16).float()),
        ("few n8192 k600", 8192, 600, lambda n: torch.randint(0, 5, (n,), generator=g).float()),
        ("specials n5000 k1200", 5000, 1200, lambda n: torch.tensor(
            [float("nan"), float("-inf"), -0.0, 0.0, float("inf"), 1.0, 2.0])[torch.randint(0, 7, (n,), generator=g)]),
    ]
    for name, n, k, fill in cases:
        rows, agree, tied = 16, 0, 0
        for _ in range(rows):
            row = fill(n)
            for sorted_ in (False, True):
                got = set(torch.topk(row.to(dev), k, sorted=sorted_).indices.cpu().tolist())
                want = low_rule(row, k)
                agree += got == want
            kth = torch.sort(row, descending=True, stable=True).values[k - 1]
            above = (row > kth).sum().item() if not torch.isnan(kth) else 0
            eq = (row == kth).sum().item() if not torch.isnan(kth) else torch.isnan(row).sum().item()
            tied += above + eq > k
        print(f"{name}: {agree} of {2 * rows} topk calls (sorted False and True) keep the low rule's set; "
              f"{tied} of {rows} rows tie at the cut")
        bad += agree != 2 * rows
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
