#!/usr/bin/env python
"""Reproduce Liu et al. (TPDS'24) sampling-based multi-job placement on real Gavel throughputs.

Static suite (matching.suite): N instances, 8..64 GPUs of K80/P100/V100 on 4-GPU servers, 4..16 Gavel
jobs with sizes 1/2/4/8, proportional split + ring all-reduce. For each method: mean / max gap to the
proven optimum (CP-SAT oracle when it proves optimality, else the exhaustive DP where exact), Jain's
index of slowdowns, mean runtime and the runtime ratio oracle / method on instances of 32+ GPUs.

    python scripts/reproduce_sampling.py --instances 60 --out docs/matching_table.md
"""

from __future__ import annotations

import argparse
import statistics as stt
import sys
import time

from jctlab.replay import replay
from matching.methods import exhaustive, matching, unaware
from matching.suite import suite
from samplers.methods import sampling


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--instances", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--samples", default="4,16,64")
    ap.add_argument("--oracle-time-limit", type=float, default=60.0)
    ap.add_argument("--no-oracle", action="store_true")
    ap.add_argument("--measured", action="store_true", help="keep Gavel's measured whole-job tables")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    oracle = None
    if not a.no_oracle:
        try:
            from oracle.methods import solve

            oracle = lambda inst: solve(inst, method="cpsat", time_limit=a.oracle_time_limit, threads=1)
        except ImportError:
            oracle = None
    methods = {"exhaustive": exhaustive, "matching": matching}
    for n in [int(x) for x in a.samples.split(",")]:
        methods[f"sampling N={n}"] = (lambda n: lambda inst: sampling(inst, samples=n, seed=a.seed))(n)
    methods["unaware"] = unaware
    if oracle is not None:
        methods = {"cpsat (oracle)": oracle, **methods}
    rows = {m: {"gap": [], "jain": [], "rt": [], "ratio": [], "opt": 0} for m in methods}
    insts = suite(a.instances, a.seed, a.measured)
    no_ref = 0
    for k, inst in enumerate(insts):
        res = {}
        for m, fn in methods.items():
            t = time.perf_counter()
            r = fn(inst)
            wall = time.perf_counter() - t
            rep = replay(inst, r.claimed_schedule()) if r.schedule is not None else None
            if rep is None or not rep.valid:
                print(f"{inst.name} {m}: no valid schedule ({r.status})", file=sys.stderr)
                continue
            assert abs(rep.objective - r.objective) <= 1e-6 * rep.objective, (m, inst.name)
            res[m] = (r, rep, wall)
        ref = None
        if "cpsat (oracle)" in res and res["cpsat (oracle)"][0].status == "optimal":
            ref = res["cpsat (oracle)"][0].objective
        elif res.get("exhaustive") and res["exhaustive"][0].status == "optimal":
            ref = res["exhaustive"][0].objective
        if ref is None:
            no_ref += 1
            continue
        o_time = res["cpsat (oracle)"][2] if "cpsat (oracle)" in res else None
        for m, (r, rep, wall) in res.items():
            row = rows[m]
            row["gap"].append((r.objective - ref) / ref)
            row["jain"].append(rep.metrics["jain_slowdown"])
            row["rt"].append(wall)
            row["opt"] += r.objective <= ref * (1 + 1e-6)
            if o_time is not None and len(inst.cluster.gpus) >= 32:
                row["ratio"].append(o_time / wall)
        print(f"[{k + 1}/{len(insts)}] {inst.name} ref={ref:.1f}", file=sys.stderr)
    n = len(insts) - no_ref
    lines = [f"Suite: {len(insts)} static instances from Gavel throughputs (8-64 GPUs, 4-16 jobs, sizes 1/2/4/8, "
             f"{'measured tables kept' if a.measured else 'proportional split + ring all-reduce'}); "
             f"reference = proven optimum ({'CP-SAT' if oracle else 'exhaustive DP'}) on {n} instances.", "",
             "| method | mean gap | max gap | optimal | mean Jain (slowdown) | mean runtime (s) | oracle/method runtime, 32+ GPUs (geo-mean) |",
             "|---|---|---|---|---|---|---|"]
    for m, row in rows.items():
        if not row["gap"]:
            continue
        ratio = "-"
        if row["ratio"]:
            import math
            ratio = f"{math.exp(stt.mean(math.log(x) for x in row['ratio'])):.1f}x"
        lines.append(f"| {m} | {100 * stt.mean(row['gap']):.3f}% | {100 * max(row['gap']):.3f}% | "
                     f"{row['opt']}/{len(row['gap'])} | {stt.mean(row['jain']):.3f} | {stt.mean(row['rt']):.4f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
