"""Markdown table of the static oracles: proven-optimal fraction, mean certified gap, mean solve time
by instance size, for CP-SAT, HiGHS and CBC.

    python scripts/oracle_table.py --sizes 16x4x8,32x4x16,64x8x32 --seeds 3 --time-limit 10 --threads 1 > table.md

A size is GPUSxNODESxJOBS (generator: 3 types, variability 0.05, sizes 1/2/4/8 capped by node size).
"""

from __future__ import annotations

import argparse
import statistics

from jctlab.generators import static_instance
from oracle import methods


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="16x4x8,32x4x16,64x8x32")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", default="cpsat,milp,milp-cbc")
    a = ap.parse_args()
    print("| GPUs/nodes/jobs | method | proven optimal | mean certified gap | mean time (s) |")
    print("|---|---|---|---|---|")
    for size in a.sizes.split(","):
        g, n, j = map(int, size.split("x"))
        sizes = tuple(s for s in (1, 2, 4, 8) if s <= g // n)
        insts = [static_instance(gpus=g, nodes=n, jobs=j, variability=0.05, sizes=sizes, seed=s)
                 for s in range(a.seeds)]
        for m in a.methods.split(","):
            rs = [methods.solve(i, method=m, time_limit=a.time_limit, threads=a.threads, seed=0) for i in insts]
            opt = sum(r.status == "optimal" for r in rs)
            gaps = [(r.objective - r.lower_bound) / r.lower_bound for r in rs
                    if r.objective is not None and r.lower_bound]
            gap = f"{statistics.mean(gaps):.2e}" if gaps else "n/a"
            t = statistics.mean(r.runtime_s for r in rs)
            print(f"| {g}/{n}/{j} | {m} | {opt}/{len(rs)} | {gap} | {t:.2f} |", flush=True)


if __name__ == "__main__":
    main()
