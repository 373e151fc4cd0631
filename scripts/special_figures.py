"""The figures of docs/oracle-special.md, on evaluation seeds (≥ 10 000).

    .venv/bin/python scripts/special_figures.py [--limit 5] [--seeds 8]

1. Queues of single-GPU jobs with releases (offline, unrelated GPUs): the offline CP-SAT back end's bound alone
   against the release-shift bound and the oracle's (lifted) bound, same limit, one thread.
2. Preemptive instances with multi-GPU jobs: what ``oracle.solve(..., "cpsat")`` returns (a schedule, status, the
   certified gap) where it used to return ``bound_only``.
"""

from __future__ import annotations

import argparse

import oracle
from formulations.offline import cpsat as offline_cpsat
from formulations.special.bound import release_shift_bound
from jctlab.generators import offline_instance
from jctlab.replay import replay


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=float, default=5.0)
    ap.add_argument("--seeds", type=int, default=8)
    a = ap.parse_args()
    print("| seed | GPUs | jobs | CP-SAT bound alone | release-shift bound | oracle bound | objective | gap |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(10_000, 10_000 + a.seeds):
        gpus = (4, 8)[seed % 2]
        inst = offline_instance(gpus=gpus, nodes=gpus // 4, jobs=14, max_size=1, seed=seed, variability=0.1,
                                interarrival_s=(60, 30)[seed % 2])
        alone = offline_cpsat.solve(inst, time_limit=a.limit, threads=1, seed=0)
        r = oracle.solve(inst, "cpsat", time_limit=a.limit, threads=1, seed=0)
        shift = release_shift_bound(inst)
        print(f"| {seed} | {gpus} | 14 | {alone.lower_bound:.0f} | {shift:.0f} | {r.lower_bound:.0f} | "
              f"{r.objective:.0f} | {(r.objective - r.lower_bound) / r.lower_bound:.1%} |")
    print()
    print("| seed | GPUs | jobs | status | objective | bound | certified gap | best candidate |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in range(10_000, 10_000 + a.seeds // 2):
        gpus = (4, 8)[seed % 2]
        inst = offline_instance(gpus=gpus, nodes=max(1, gpus // 4), jobs=10, max_size=4, seed=seed,
                                problem="preemptive", interarrival_s=300)
        r = oracle.solve(inst, "cpsat", time_limit=2 * a.limit, threads=1, seed=0)
        assert replay(inst, r.claimed_schedule()).valid
        cands = {k: v for k, v in r.params["candidates"].items() if v != "invalid"}
        print(f"| {seed} | {gpus} | 10 | {r.status} | {r.objective:.0f} | {r.lower_bound:.0f} | "
              f"{(r.objective - r.lower_bound) / r.lower_bound:.1%} | {min(cands, key=cands.get)} |")


if __name__ == "__main__":
    main()
