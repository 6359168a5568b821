"""Regenerates eplb_torch_oracle.json.gz: DeepSeek's reference EPLB run on random,
tie-heavy problems, as the outside oracle for placement's eplb policy.

    PYTHONPATH=/path/to/deepseek-ai/EPLB python3 eplb_oracle.py SEED COUNT | gzip -9 > eplb_torch_oracle.json.gz
    PYTHONPATH=/path/to/deepseek-ai/EPLB python3 eplb_oracle.py SEED COUNT global | gzip -9 > eplb_torch_oracle_global.json.gz

The second form draws only problems where num_groups % num_nodes != 0, which EPLB
answers with its global policy whatever else the node count says: num_gpus need not be
a multiple of num_nodes there, nor the expert count a multiple of num_groups.

It needs PyTorch (the checked-in file was made with Debian 12's python3-torch,
1.13, CPU) and eplb.py from github.com/deepseek-ai/EPLB (commit d52c72d). Nothing of
eplb.py is copied here; it is imported and called.
"""
import json
import random
import sys

import torch
import eplb


def problem(rng):
    while True:
        nodes = rng.choice([1, 1, 2, 2, 3, 4, 8])
        gpus = nodes * rng.choice([1, 2, 3, 4, 8])
        groups = rng.choice([1, 2, 3, 4, 6, 8, 12, 16])
        experts = groups * rng.choice([1, 2, 3, 4, 6, 8, 16, 32])
        replicas = gpus * rng.randint(1, 12)
        if experts <= 512 and experts <= replicas <= 1024:
            return replicas, groups, nodes, gpus, experts


def global_problem(rng):
    while True:
        nodes = rng.choice([2, 3, 4, 5, 6, 8])
        groups = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16])
        if groups % nodes == 0:
            continue
        gpus = rng.choice([1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24])
        experts = rng.randint(1, 300)
        replicas = gpus * rng.randint(1, 12)
        if experts <= replicas <= 1024:
            return replicas, groups, nodes, gpus, experts


def loads(rng, kind, layers, experts):
    if kind == "ties":  # tiny integer counts: many equal loads, zeros
        hi = rng.choice([0, 1, 2, 3, 5, 10])
        return [[rng.randint(0, hi) for _ in range(experts)] for _ in range(layers)]
    if kind == "zipf":  # skewed integer counts
        out = []
        for _ in range(layers):
            perm = list(range(experts))
            rng.shuffle(perm)
            s = rng.uniform(0.5, 1.5)
            row = [0] * experts
            for k, e in enumerate(perm):
                row[e] = int(100000 * (k + 1) ** -s) + rng.randint(0, 3)
            out.append(row)
        return out
    return [[round(rng.random() * 1000, 3) for _ in range(experts)] for _ in range(layers)]


def case(rng, kind, draw=problem):
    replicas, groups, nodes, gpus, experts = draw(rng)
    w = loads(rng, kind, rng.randint(1, 4), experts)
    t = torch.tensor(w, dtype=torch.float64 if kind == "real" else torch.int64)
    phy2log, log2phy, logcnt = eplb.rebalance_experts(t, replicas, groups, nodes, gpus)
    return {"kind": kind, "weight": w, "num_replicas": replicas, "num_groups": groups,
            "num_nodes": nodes, "num_gpus": gpus, "phy2log": phy2log.tolist(),
            "log2phy": log2phy.tolist(), "logcnt": logcnt.tolist()}


def main():
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    kinds = ["ties", "ties", "zipf", "real"]
    draw = global_problem if sys.argv[3:] == ["global"] else problem
    cases = [case(rng, kinds[i % len(kinds)], draw) for i in range(count)]
    src = "deepseek-ai/EPLB eplb.py rebalance_experts, torch %s on CPU, seed %d" % (torch.__version__, seed)
    json.dump({"source": src, "cases": cases}, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main()
