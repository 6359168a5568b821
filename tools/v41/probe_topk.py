"""Records torch.topk's choices on CPU for targets/cpu's top-k emulation test.

The V4.1 indexers keep a top-k of bf16 scores in which ties are common, and which of
several equal scores torch keeps decides what a query attends to. The input is a JSON
list of {"v": [values as strings], "k": k}; the output adds, per entry, the indices
torch.topk(k) returns for the values as float32 and as bfloat16 (sorted=True, the
default), and as float32 with sorted=False.

    python3 tools/v41/probe_topk.py IN.json OUT.json
"""
import json
import sys

import torch


def main():
    recs = json.load(open(sys.argv[1]))
    out = []
    for r in recs:
        v = torch.tensor([float(s) for s in r["v"]], dtype=torch.float32)
        k = r["k"]
        out.append({
            "v": r["v"], "k": k,
            "f32": v.topk(k).indices.tolist(),
            "bf16": v.to(torch.bfloat16).topk(k).indices.tolist(),
            "f32_unsorted": v.topk(k, sorted=False).indices.tolist(),
            "f32_2d": v.view(1, -1).topk(k, dim=-1).indices[0].tolist(),
        })
    json.dump({"torch": torch.__version__, "cases": out}, open(sys.argv[2], "w"), separators=(",", ":"))
    print("topk cases", len(out))


if __name__ == "__main__":
    main()
