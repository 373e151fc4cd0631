"""Where the time-indexed LP bound loses on small queues: its gap to the proven optimum with and without multi-GPU jobs.

    .venv/bin/python scripts/queue_bound_diagnosis.py --seeds 9000 9003 9006 --slots 400

For each seed of the small-queue families (`scripts/queue_figures.py`; use development seeds, < 10 000,
and families whose optimum the branch and bound proves: the 8-job one, seed mod 3 = 0), two instances: the
instance itself, and the same jobs made single-GPU (``sizes=(1,)``). Per instance, the branch and bound's optimum
(``formulations.offline.bnb``, ``--bnb-limit`` s) and the time-indexed LP over every allocation
(:mod:`formulations.offline.time_indexed_bound`, ``--slots`` slots, the optimum as its incumbent), and the LP's gap.
``--slots`` may list several counts (how the bound converges as the grid gets finer). One thread; the LP's time
is printed (wall clock: re-measure on a quiet machine).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from evaluation.generators import small_queue_instance
from formulations.offline import bnb
from formulations.offline import time_indexed_bound as tib
from formulations.offline.concrete import concrete_options
from formulations.offline.options import binding_resources, capacities


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[9000, 9003, 9006])
    ap.add_argument("--slots", type=int, nargs="+", default=[400])
    ap.add_argument("--bnb-limit", type=float, default=120.0)
    a = ap.parse_args()
    print("| seed | jobs | optimum (bnb) | slots | TI LP | LP gap | LP s |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for seed in a.seeds:
        base = small_queue_instance(seed)
        single = base.replace_jobs([dataclasses.replace(j, sizes=(1,)) for j in base.jobs])
        for tag, inst in (("as generated", base), ("single-GPU", single)):
            r = bnb.solve(inst, time_limit=a.bnb_limit)
            if r.objective is None:
                print(f"| {seed} | {tag} | {r.status.value} | | | | |")
                continue
            opts = concrete_options(inst)[0]
            res = {x for x in capacities(inst) if x[0] == "g"} | binding_resources(inst, opts)
            opt = f"{r.objective:.1f}" + ("" if r.status.value == "optimal" else f" ({r.status.value})")
            for k in a.slots:
                t = time.perf_counter()
                lp = tib.lower_bound(inst, opts, res, incumbent=r.objective, slots=k)
                print(f"| {seed} | {tag} | {opt} | {k} | {lp:.1f} | {100 * (r.objective - lp) / r.objective:.2f} % "
                      f"| {time.perf_counter() - t:.1f} |", flush=True)


if __name__ == "__main__":
    main()
