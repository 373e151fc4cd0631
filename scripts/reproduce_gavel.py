#!/usr/bin/env python
"""Reproduce Gavel's simulator figures on medium_test (4 V100 + 4 P100 + 4 K80) with jctlab.

    python scripts/reproduce_gavel.py [--trace FILE] [--cluster 4:4:4] [--gpus-per-server 4,4,8]
                                      [--repeat 5] [--json]

Builds the instance with the Gavel loader (``jctlab make-instance gavel`` does the same), runs the
four Gavel policies through jctlab's simulator, and prints each policy's average JCT next to
Gavel's own figure (gavel_traces/SOURCE.md: Gavel's simulator, ECOS, 360 s rounds, seed 0) and the
best-of-N wall time against Gavel's 2-4 s. Needs the public data directory (JCTLAB_DATA or
../shared/data) unless --trace is given.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from baselines.gavel import resolve
from jctlab.loaders import default_data_dir
from jctlab.loaders import gavel as gl
from jctlab.simulate import simulate

GAVEL_H = {"gavel-max-min-fairness-perf": 4.04, "gavel-max-min-fairness": 4.60, "gavel-fifo-perf": 3.95,
           "gavel-finish-time-fairness-perf": 4.06}
GAVEL_WALL = (2.0, 4.0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=None)
    ap.add_argument("--cluster", default="4:4:4")
    ap.add_argument("--gpus-per-server", default="4,4,8")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    trace = a.trace
    if trace is None:
        data = default_data_dir()
        if data is None:
            print("no data directory: set JCTLAB_DATA or pass --trace", file=sys.stderr)
            return 2
        trace = data / "gavel_traces" / "medium_test.trace"
    t0 = time.perf_counter()
    inst = gl.load_trace(trace, a.cluster, a.gpus_per_server)
    load_s = time.perf_counter() - t0
    rows = []
    for name, ref in GAVEL_H.items():
        best, rep, pol = float("inf"), None, None
        for _ in range(max(1, a.repeat)):
            t = time.perf_counter()
            pol = resolve(name)(inst, seed=a.seed)
            _, rep = simulate(inst, pol, round_s=pol.round_s)
            best = min(best, time.perf_counter() - t)
        h = rep.objective / 3600
        rows.append({"policy": name, "mean_jct_h": round(h, 3), "gavel_h": ref, "rel_diff": round(h / ref - 1, 4),
                     "wall_s": round(best, 4), "speedup_vs_gavel": [round(GAVEL_WALL[0] / best, 1), round(GAVEL_WALL[1] / best, 1)],
                     "lp_solves": pol.lp_solves, "allocations": pol.recomputes,
                     "preemptions": rep.metrics.get("preemptions"), "valid": rep.valid})
    if a.json:
        print(json.dumps({"instance": inst.name, "load_s": round(load_s, 4), "rows": rows}))
        return 0
    print(f"{inst.name}: {len(inst.jobs)} jobs, {len(inst.cluster.gpus)} GPUs (loaded in {load_s:.3f} s)")
    print(f"{'policy':34s} {'JCT h':>7s} {'Gavel h':>8s} {'diff':>7s} {'wall s':>8s} {'speedup':>12s}")
    for r in rows:
        sp = r["speedup_vs_gavel"]
        print(f"{r['policy']:34s} {r['mean_jct_h']:7.3f} {r['gavel_h']:8.2f} {r['rel_diff']:+7.1%} "
              f"{r['wall_s']:8.4f} {sp[0]:5.0f}-{sp[1]:<5.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
