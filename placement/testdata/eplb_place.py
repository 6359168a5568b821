"""Prints DeepSeek's EPLB answer for a loads file in `dic place --loads` JSON form.

    PYTHONPATH=/path/to/deepseek-ai/EPLB python3 eplb_place.py LOADS.json R G N P

It imports eplb.py and calls rebalance_experts; nothing of it is copied here.
"""
import json
import sys

import torch
import eplb


def main():
    w = json.load(open(sys.argv[1]))["weight"]
    r, g, n, p = (int(a) for a in sys.argv[2:6])
    phy2log, log2phy, logcnt = eplb.rebalance_experts(torch.tensor(w, dtype=torch.float64), r, g, n, p)
    json.dump({"phy2log": phy2log.tolist(), "logcnt": logcnt.tolist(), "log2phy": log2phy.tolist()},
              sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
