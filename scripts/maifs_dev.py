"""Policies side by side on MAIFS-like workload families, against Synergy-TUNE (no oracle: a quick check).

    python scripts/maifs_dev.py --families syn-mixed,syn-queue --split dev --count 12 \
        --methods maifs:runs/maifs/final.pt,maifs-greedy,synergy-tune,fifo-firstfit,optimus
    python scripts/maifs_dev.py --families syn-mixed --split dev --scale 4 --count 6 --methods ...

``--split dev`` (seeds 9,000 + i) is for choosing between checkpoints and settings; the held-apart figures
come from the evaluation suites (``jctlab evaluate --suite maifs-synergy``, seeds >= 10,000). Per method:
valid schedules, mean JCT and makespan over Synergy-TUNE's (mean of per-instance ratios), instances where
its mean JCT is lower, p99 decision latency (ms, as the harness times a ``decide`` call).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from jctlab.registry import policy_factory
from jctlab.replay import replay
from jctlab.simulate import simulate
from rl.maifs_workloads import family_instances


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="syn-small,syn-queue,syn-mixed,syn-pai")
    p.add_argument("--split", default="dev", choices=["dev", "eval"])
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--scale", type=int, default=1)
    p.add_argument("--methods", default="maifs,maifs-greedy,synergy-tune,fifo-firstfit,optimus")
    p.add_argument("--baseline", default="synergy-tune")
    a = p.parse_args(argv)
    methods = [m for m in a.methods.split(",") if m]
    if a.baseline not in methods:
        methods.append(a.baseline)
    for fam in a.families.split(","):
        rows: dict[str, list[tuple[bool, float, float, float]]] = {m: [] for m in methods}
        for inst in family_instances(fam, a.count, a.split, scale=a.scale):
            for m in methods:
                pol = policy_factory(m)(inst)
                lat: list[float] = []
                inner = pol.decide

                def timed(sim, inner=inner, lat=lat):
                    t = time.perf_counter()
                    out = list(inner(sim) or [])
                    lat.append(time.perf_counter() - t)
                    return out

                pol.decide = timed
                sched, rep = simulate(inst, pol)
                ok = replay(inst, sched).valid
                rows[m].append((ok, rep.objective, rep.metrics["makespan"], float(np.percentile(lat, 99)) * 1e3))
        base = np.array([r[1] for r in rows[a.baseline]])
        base_mk = np.array([r[2] for r in rows[a.baseline]])
        print(f"\n{fam} x{a.scale} ({a.split}, {len(base)} instances): method | valid | JCT/{a.baseline} | "
              f"makespan/{a.baseline} | wins | p99 ms")
        for m, r in rows.items():
            jct = np.array([x[1] for x in r])
            mk = np.array([x[2] for x in r])
            print(f"  {m:40s} {sum(x[0] for x in r):3d}/{len(r)}  {np.mean(jct / base):.3f}  {np.mean(mk / base_mk):.3f}"
                  f"  {int((jct < base - 1e-9).sum()):3d}  {np.median([x[3] for x in r]):7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
