"""Small queues at 60 s: proven-optimal count and mean certified gap of the offline CP-SAT oracle, with and without
the partition bound phase, interleaved (A, B, A, B ...) so that both see the same machine load.

    .venv/bin/python scripts/queue_bound_figures.py --limit 60 --threads 2 --out runs/queue_bounds.jsonl

Instances: the issue's small-queue kind (:func:`evaluation.generators.bursty_instance`, the families of the
``queue-small`` suite: 8 jobs on 4 GPUs of two types, 12 on 6 of three, 16 on 8 of two; locality penalty 1.3,
variability 0.1), evaluation seeds 10 000-10 009 (the family by seed mod 3). Rows are appended as they finish
and a rerun skips the (seed, variant) pairs already in ``--out`` (a killed run resumes).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tqdm import tqdm

from evaluation.generators import bursty_instance
from formulations.offline import cpsat as offline_cpsat
from formulations.offline.cpsat import CpsatParams

FAMILIES = ({"gpus": 4, "nodes": 2, "jobs": 8, "types": ("v100", "p100"), "bursts": 2},
            {"gpus": 6, "nodes": 3, "jobs": 12, "types": ("v100", "p100", "k80"), "bursts": 3},
            {"gpus": 8, "nodes": 2, "jobs": 16, "types": ("v100", "p100"), "bursts": 4})
VARIANTS = {"before": CpsatParams(), "partition": CpsatParams(partition_share=0.1)}


def instance(seed: int):
    return bursty_instance(seed=seed, **FAMILIES[seed % 3])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, nargs=2, default=(10_000, 10_010), metavar=("FIRST", "END"))
    ap.add_argument("--out", type=Path, default=Path("runs/queue_bounds.jsonl"))
    a = ap.parse_args()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if a.out.exists():
        done = {(r["seed"], r["variant"]) for r in map(json.loads, a.out.read_text().splitlines())}
    todo = [(s, v) for s in range(*a.seeds) for v in VARIANTS if (s, v) not in done]
    for seed, v in tqdm(todo, desc="queue bounds"):
        inst = instance(seed)
        r = offline_cpsat.solve(inst, time_limit=a.limit, threads=a.threads, seed=0, params=VARIANTS[v])
        gap = None if r.objective is None or r.lower_bound is None else (r.objective - r.lower_bound) / r.objective
        row = {"seed": seed, "variant": v, "jobs": len(inst.jobs), "status": r.status.value, "objective": r.objective,
               "bound": r.lower_bound, "gap": gap, "runtime_s": r.runtime_s,
               "partition": next((p["bound"] for p in r.params.get("phases", []) if p["phase"] == "partition-bound"),
                                 None)}
        with a.out.open("a") as f:
            f.write(json.dumps(row) + "\n")
    rows = [json.loads(x) for x in a.out.read_text().splitlines()]
    for v in VARIANTS:
        mine = [r for r in rows if r["variant"] == v]
        if mine:
            proven = sum(r["status"] == "optimal" for r in mine)
            print(f"{v:10s} proven {proven}/{len(mine)}  mean certified gap {100 * sum(1.0 if r['gap'] is None else r['gap'] for r in mine) / len(mine):.2f} % (none: 100 %)")


if __name__ == "__main__":
    main()
