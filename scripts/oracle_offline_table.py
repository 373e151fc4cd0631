"""Table of the offline oracles by instance size: proven-optimal fraction, mean certified gap, time.

    python scripts/oracle_offline_table.py --sizes 4x4,8x6,16x10 --seeds 3 --time-limit 10 --out table.md

A size ``GxJ`` is G GPUs (G/4 nodes, at least 1) and J jobs of
``jctlab.generators.offline_instance(interarrival_s=900, duration_h=(0.1, 2), max_size=min(8, G),
variability=0.05, locality_penalty=1.2)``. Certified gap = (objective − lower bound) / lower bound.
``--interarrival 300`` makes queues (jobs wait for GPUs): the loaded rows of docs/benchmarks.md.
``--cells FILE`` (JSON lines, one per instance and method) makes a long table resumable: a rerun with the same
file skips what it holds, so a killed run loses at most the solve it was in.
``--variability 0`` makes identical nodes (same GPU types, no per-GPU variability), ``--ps`` gives odd
jobs parameter servers, ``--cpu-mem`` every job a CPU/memory sensitivity table, ``--gpus-per-node 8`` the
benchmark's node shape.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import warnings

from tqdm import tqdm

import oracle
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from jctlab import jsonl
from jctlab.generators import offline_instance
from jctlab.replay import replay

METHODS = {
    "cpsat": lambda inst, tl, th: offline_cpsat.solve(inst, time_limit=tl, threads=th),
    "highs": lambda inst, tl, th: offline_milp.solve(inst, time_limit=tl, threads=th, backend="highs"),
    "cbc": lambda inst, tl, th: offline_milp.solve(inst, time_limit=tl, threads=th, backend="cbc"),
    "auto": lambda inst, tl, th: oracle.solve(inst, "auto", time_limit=tl, threads=th),
}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4x4,8x6,16x10,32x20")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed … first-seed + seeds − 1 (10 000 and above: evaluation)")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", default="cpsat,highs,cbc")
    ap.add_argument("--interarrival", type=float, default=900.0, help="mean seconds between arrivals")
    ap.add_argument("--variability", type=float, default=0.05, help="per-GPU variability (0: identical GPUs)")
    ap.add_argument("--ps", action="store_true", help="odd jobs use parameter servers")
    ap.add_argument("--cpu-mem", action="store_true", help="every job has a CPU/memory sensitivity table")
    ap.add_argument("--gpus-per-node", type=int, default=None,
                    help="GPUs per node (default: 4, 2 below 8 GPUs)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--cells", default=None, help="JSON lines of finished solves: resumes from it")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    methods = a.methods.split(",")
    # everything that sets a solve's result is in its key, so one cells file can hold several tables
    setting = {k: getattr(a, k) for k in ("time_limit", "threads", "interarrival", "variability", "ps", "cpu_mem",
                                            "gpus_per_node")}
    done = {} if a.cells is None else {r["key"]: r for r in jsonl.read_all(a.cells, repair=True)}
    todo = [(size, seed, m) for size in a.sizes.split(",") for m in methods
            for seed in range(a.first_seed, a.first_seed + a.seeds)]
    cells = {}
    for size, seed, m in tqdm(todo, desc="offline oracles", unit="solve", file=sys.stderr):
        key = json.dumps({"size": size, "seed": seed, "method": m, **setting}, sort_keys=True)
        if key not in done:
            done[key] = {"key": key, **solve_one(a, size, seed, m)}
            if a.cells is not None:
                jsonl.append(a.cells, done[key])
        cells[size, seed, m] = done[key]
    rows = ["| GPUs | jobs | method | proven optimal | mean certified gap | max gap | mean time (s) |",
            "|---:|---:|---|---:|---:|---:|---:|"]
    for size in a.sizes.split(","):
        g, j = (int(x) for x in size.lower().split("x"))
        for m in methods:
            mine = [cells[size, s, m] for s in range(a.first_seed, a.first_seed + a.seeds)]
            gaps = [math.inf if c["gap"] is None else c["gap"] for c in mine]
            opt = sum(c["optimal"] for c in mine)
            rows.append(f"| {g} | {j} | {m} | {opt}/{len(mine)} | {statistics.mean(gaps):.2%} | {max(gaps):.2%} | "
                        f"{statistics.mean(c['runtime_s'] for c in mine):.1f} |")
    text = "\n".join(rows) + "\n"
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)
    return 0


def solve_one(a: argparse.Namespace, size: str, seed: int, method: str) -> dict:
    """One instance of the table solved by one method: its certified gap (None: no schedule), whether it is
    proven optimal, and the solve's time; the schedule is replayed first."""
    g, j = (int(x) for x in size.lower().split("x"))
    per = a.gpus_per_node or (4 if g >= 8 else 2)
    inst = offline_instance(gpus=g, nodes=max(1, g // per), jobs=j, interarrival_s=a.interarrival,
                            duration_h=(0.1, 2), max_size=min(8, g), variability=a.variability, locality_penalty=1.2,
                            ps=a.ps, cpu_mem=a.cpu_mem, seed=seed)
    r = METHODS[method](inst, a.time_limit, a.threads)
    gap = None
    if r.schedule is not None:
        assert replay(inst, r.claimed_schedule()).valid
        gap = (r.objective - r.lower_bound) / r.lower_bound
    return {"gap": gap, "optimal": r.status == "optimal", "runtime_s": r.runtime_s}


if __name__ == "__main__":
    raise SystemExit(main())
