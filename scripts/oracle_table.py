"""Markdown table of the static oracles: proven-optimal fraction, mean certified gap, mean solve time
by instance size, for CP-SAT, HiGHS and CBC.

    python scripts/oracle_table.py --sizes 16x4x8,32x4x16,64x8x32 --seeds 3 --time-limit 10 --threads 1 > table.md

A size is GPUSxNODESxJOBS (generator: 3 types, variability 0.05, sizes 1/2/4/8 capped by node size).
``--cells FILE`` (JSON lines, one per instance and method) makes a long table resumable: a rerun with the same
file skips what it holds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

from tqdm import tqdm

from jctlab import jsonl
from jctlab.generators import static_instance
from oracle import methods


def solve_one(a: argparse.Namespace, size: str, seed: int, method: str) -> dict:
    """One instance solved by one method: its certified gap (None without a schedule or a positive bound),
    whether it is proven optimal, and the solve's time."""
    g, n, j = map(int, size.split("x"))
    sizes = tuple(s for s in (1, 2, 4, 8) if s <= g // n)
    inst = static_instance(gpus=g, nodes=n, jobs=j, variability=0.05, sizes=sizes, seed=seed)
    r = methods.solve(inst, method=method, time_limit=a.time_limit, threads=a.threads, seed=0)
    gap = ((r.objective - r.lower_bound) / r.lower_bound
           if r.objective is not None and r.lower_bound else None)
    return {"gap": gap, "optimal": r.status == "optimal", "runtime_s": r.runtime_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16x4x8,32x4x16,64x8x32")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", default="cpsat,milp,milp-cbc")
    ap.add_argument("--cells", default=None, help="JSON lines of finished solves: resumes from it")
    a = ap.parse_args()
    done = {} if a.cells is None else {r["key"]: r for r in jsonl.read_all(a.cells, repair=True)}
    todo = [(size, m, s) for size in a.sizes.split(",") for m in a.methods.split(",") for s in range(a.seeds)]
    cells = {}
    for size, m, seed in tqdm(todo, desc="static oracles", unit="solve", file=sys.stderr):
        key = json.dumps({"size": size, "seed": seed, "method": m, "time_limit": a.time_limit,
                          "threads": a.threads}, sort_keys=True)
        if key not in done:
            done[key] = {"key": key, **solve_one(a, size, seed, m)}
            if a.cells is not None:
                jsonl.append(a.cells, done[key])
        cells[size, m, seed] = done[key]
    print("| GPUs/nodes/jobs | method | proven optimal | mean certified gap | mean time (s) |")
    print("|---|---|---|---|---|")
    for size in a.sizes.split(","):
        g, n, j = map(int, size.split("x"))
        for m in a.methods.split(","):
            rs = [cells[size, m, s] for s in range(a.seeds)]
            gaps = [r["gap"] for r in rs if r["gap"] is not None]
            gap = f"{statistics.mean(gaps):.2e}" if gaps else "n/a"
            t = statistics.mean(r["runtime_s"] for r in rs)
            print(f"| {g}/{n}/{j} | {m} | {sum(r['optimal'] for r in rs)}/{len(rs)} | {gap} | {t:.2f} |")


if __name__ == "__main__":
    main()
