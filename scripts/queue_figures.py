"""Small queues at 60 s: proven-optimal count and mean certified gap of the offline oracle (``cpsat``, ``auto``).

    .venv/bin/python scripts/queue_figures.py --limit 60 --threads 2 --methods cpsat --out runs/queue_figures.jsonl

With several methods they run interleaved per seed (A, B, A, B ...), so that each sees the same machine load.

Instances: the issue's small-queue kind (:func:`evaluation.generators.small_queue_instance`, the families of the
``queue-small`` suite: 8 jobs on 4 GPUs of two types, 12 on 6 of three, 16 on 8 of two; locality penalty 1.3,
variability 0.1), evaluation seeds 10 000-10 009 (the family by seed mod 3). Rows are appended as they finish
and a rerun skips the (seed, method) pairs already in ``--out`` (a killed run resumes).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tqdm import tqdm

from evaluation.generators import small_queue_instance
from jctlab import jsonl
from oracle import solve

METHODS = ("cpsat", "auto")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs=2, default=(10_000, 10_010), metavar=("FIRST", "END"))
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    ap.add_argument("--out", type=Path, default=Path("runs/queue_figures.jsonl"))
    a = ap.parse_args()
    done = {(r["seed"], r["method"]) for r in jsonl.read_all(a.out, repair=True)}
    todo = [(s, v) for s in range(*a.seeds) for v in a.methods if (s, v) not in done]
    for seed, v in tqdm(todo, desc="small queues"):
        inst = small_queue_instance(seed)
        r = solve(inst, method=v, time_limit=a.limit, threads=a.threads, seed=0)
        gap = None if r.objective is None or r.lower_bound is None else (r.objective - r.lower_bound) / r.objective
        row = {"seed": seed, "method": v, "jobs": len(inst.jobs), "status": r.status.value, "objective": r.objective,
               "bound": r.lower_bound, "gap": gap, "runtime_s": r.runtime_s}
        jsonl.append(a.out, row)
    rows = jsonl.read_all(a.out)
    for v in a.methods:
        mine = [r for r in rows if r["method"] == v]
        if mine:
            proven = sum(r["status"] == "optimal" for r in mine)
            gap = sum(1.0 if r["gap"] is None else r["gap"] for r in mine) / len(mine)   # no schedule: 100 %
            print(f"{v:6s} proven {proven}/{len(mine)}  mean certified gap {100 * gap:.2f} %")


if __name__ == "__main__":
    main()
