"""Learned policies against the oracles and the best baselines, on held-apart instances (seeds >= 10,000).

    python scripts/rl_eval.py --suites small,queue --count 12 --time-limit 60 --out docs/rl_eval
    python scripts/rl_eval.py --suites large --count 4 --time-limit 60 --out docs/rl_eval
    python scripts/rl_eval.py --suites pal --count 3 --out docs/rl_eval        # needs ../shared/data

For every instance of a family (:mod:`rl.suites`, seeds 10,000 + i; ``pal``/``philly``: real-trace
windows, see :func:`real_instances`) the oracle (``oracle.solve(inst, "auto", time_limit, threads=1,
seed=0)``) gives the reference: the proven optimum where its status is ``optimal`` (gap kind ``opt``),
else its bound (kind ``lb``: the gap is then an upper bound on the true gap). Every policy is simulated
(``jctlab.simulate``), its schedule replayed (valid or not), and its gap computed against that
reference. One JSON file per (instance, method) under ``OUT/cells`` makes the run resumable; the tables
(``OUT/<suite>.md``) give, per policy: mean / p90 / worst gap, valid schedules, mean JCT against the best
baseline, on how many instances it beats the best baseline, and the learned policies' decision latency.
The instances are :func:`rl.suites.instances` (``split="eval"``), so a later evaluation suite can list
the same ones.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

import oracle
from jctlab.loaders.pal import load_pal
from jctlab.loaders.philly import load_philly
from jctlab.model import Instance
from jctlab.registry import policy_factory
from jctlab.replay import replay
from jctlab.simulate import simulate
from rl.suites import DEV_SEED, FAMILIES, instances

BASELINES = ("matching", "sjf+packed-sticky", "fifo+pal")
LEARNED = ("ppo", "hrl")


#: windows of the real traces never looked at while the policies were built (the held-apart ones): windows
#: 3-5 of PAL's workload 1 (its jobs of at most 16 GPUs; the first measurement used 0-2), the first 24 jobs of the Philly trace from
#: these dates on (the first measurement used the trace's first 72 jobs, from 2017-09-04)
PAL_FRESH = (3, 4, 5)
PHILLY_FRESH = ("2017-10-02", "2017-10-16", "2017-10-30", "2017-11-13", "2017-11-27", "2017-12-11")


def _window(base: Instance, jobs, name: str) -> Instance:
    t0 = jobs[0].arrival
    return replace(base, name=name, jobs=tuple(replace(j, arrival=j.arrival - t0) for j in jobs))


def real_instances(kind: str, count: int, data_dir: str | None) -> list[Instance]:
    """Windows of 24 jobs of PAL's workloads (4 × 4 V100s, PAL's variability, λ = 1.7) or of the Philly
    trace (4 × 8 V100s, locality penalty 1.3), offline class, arrivals shifted to start at 0. ``pal`` and
    ``philly``: consecutive windows from the start of PAL's workload 1 and of the trace (the first
    measurement; the Philly time scale was fixed on those); ``pal-fresh`` and ``philly-fresh``: the
    held-apart windows of :data:`PAL_FRESH` and :data:`PHILLY_FRESH` (``count`` of them at most)."""
    out = []
    if kind == "pal-fresh":       # the whole workload (it needs 64 GPUs to load), jobs of at most 16 GPUs
        cluster = load_pal(1, data_dir=data_dir, nodes=4, gpus_per_node=4, problem="offline", max_jobs=1)
        whole = load_pal(1, data_dir=data_dir, nodes=16, gpus_per_node=4, problem="offline")
        jobs = sorted((j for j in whole.jobs if max(j.sizes) <= 16), key=lambda j: j.arrival)
        return [_window(cluster, jobs[24 * w: 24 * (w + 1)], f"pal-window{w}") for w in PAL_FRESH[:count]
                if len(jobs) >= 24 * (w + 1)]
    if kind == "philly-fresh":
        for day in PHILLY_FRESH[:count]:
            base = load_philly(None, data_dir=data_dir, nodes=4, gpus_per_node=8, problem="offline", seed=10_000,
                               start=day, max_jobs=24, locality_penalty=1.3)
            out.append(_window(base, sorted(base.jobs, key=lambda j: j.arrival), f"philly-{day}"))
        return out
    if kind == "pal":
        base = load_pal(1, data_dir=data_dir, nodes=4, gpus_per_node=4, problem="offline", max_jobs=24 * count)
    else:
        base = load_philly(None, data_dir=data_dir, nodes=4, gpus_per_node=8, problem="offline", seed=10_000,
                           max_jobs=24 * count, locality_penalty=1.3)
    jobs = sorted(base.jobs, key=lambda j: j.arrival)
    for i in range(count):
        chunk = jobs[24 * i: 24 * (i + 1)]
        if len(chunk) < 8:
            break
        out.append(_window(base, chunk, f"{kind}-window{i}"))
    return out


def cell(out: Path, inst: Instance, method: str, fn) -> dict:
    path = out / "cells" / f"{inst.name}__{method.replace(':', '_').replace('/', '_')}.json"
    if path.exists():
        return json.loads(path.read_text())
    row = fn()
    row.update(instance=inst.name, method=method)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(row))
    return row


def run_oracle(inst: Instance, time_limit: float) -> dict:
    t = time.perf_counter()
    r = oracle.solve(inst, "auto", time_limit=time_limit, threads=1, seed=0)
    obj = None
    if r.schedule is not None:
        rep = replay(inst, r.claimed_schedule())
        obj = rep.objective if rep.valid else None
    return {"status": r.status, "objective": obj, "lower_bound": r.lower_bound, "runtime_s": time.perf_counter() - t}


def run_policy(inst: Instance, name: str) -> dict:
    t = time.perf_counter()
    pol = policy_factory(name)(inst, seed=0)
    try:
        sched, rep = simulate(inst, pol, method=name)
        valid = replay(inst, sched).valid
        obj = rep.objective
    except Exception as e:  # an invalid schedule is a result to report, not a crash of the sweep
        return {"valid": False, "objective": None, "error": str(e), "runtime_s": time.perf_counter() - t}
    return {"valid": valid, "objective": obj, "runtime_s": time.perf_counter() - t,
            "latencies": getattr(pol, "latencies", None), "cpu_latencies": getattr(pol, "cpu_latencies", None)}


def summarize(suite: str, insts: list[Instance], rows: dict, methods: list[str]) -> str:
    ref, kind = {}, {}
    for inst in insts:
        o = rows[(inst.name, "oracle")]
        if o["status"] == "optimal":
            ref[inst.name], kind[inst.name] = o["objective"], "opt"
        elif o["lower_bound"]:
            ref[inst.name], kind[inst.name] = o["lower_bound"], "lb"
    best_base = {}
    for inst in insts:
        vals = [(rows[(inst.name, m)]["objective"], m) for m in BASELINES if (inst.name, m) in rows
                and rows[(inst.name, m)]["objective"] is not None]
        if vals:
            best_base[inst.name] = min(vals)
    # the best baseline of the suite: the lowest mean objective
    base_mean = {m: statistics.mean(rows[(i.name, m)]["objective"] for i in insts) for m in BASELINES
                 if all((i.name, m) in rows and rows[(i.name, m)]["objective"] for i in insts)}
    top = min(base_mean, key=base_mean.get) if base_mean else None
    n_opt = sum(1 for v in kind.values() if v == "opt")
    lines = [f"### {suite}: {len(insts)} instances, {n_opt} proven optimal (gap to `opt`), "
             f"{len(kind) - n_opt} against the bound (`lb`)", "",
             f"Best baseline on mean JCT: `{top}`." if top else "", "",
             "| policy | valid | mean gap | p90 gap | worst gap | mean gap (opt only) | mean JCT / best baseline's "
             "| beats best baseline | decision p50 / p99 (ms) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in methods:
        rs = [rows.get((i.name, m)) for i in insts]
        valid = sum(1 for r in rs if r and r.get("valid"))
        gaps, gaps_opt, ratio, wins = [], [], [], 0
        for inst, r in zip(insts, rs):
            if not r or r["objective"] is None or inst.name not in ref:
                continue
            g = r["objective"] / ref[inst.name] - 1
            gaps.append(g)
            if kind[inst.name] == "opt":
                gaps_opt.append(g)
            if top:
                tb = rows[(inst.name, top)]["objective"]
                ratio.append(r["objective"] / tb)
                wins += r["objective"] < tb * (1 - 1e-9)
        lat = [x for r in rs if r and r.get("latencies") for x in r["latencies"]]
        cpu = [x for r in rs if r and r.get("cpu_latencies") for x in r["cpu_latencies"]]
        lat_s = f"{np.percentile(lat, 50) * 1e3:.1f} / {np.percentile(lat, 99) * 1e3:.1f}" if lat else "—"
        if cpu:
            lat_s += f" (CPU {np.percentile(cpu, 50) * 1e3:.1f} / {np.percentile(cpu, 99) * 1e3:.1f})"
        pct = lambda x: f"{x:.1%}"  # noqa: E731
        lines.append(
            f"| {m} | {valid}/{len(insts)} | {pct(statistics.mean(gaps)) if gaps else '—'} | "
            f"{pct(float(np.percentile(gaps, 90))) if gaps else '—'} | {pct(max(gaps)) if gaps else '—'} | "
            f"{pct(statistics.mean(gaps_opt)) if gaps_opt else '—'} | "
            f"{f'{statistics.mean(ratio):.3f}' if ratio else '—'} | {'—' if m == top or not ratio else f'{wins}/{len(ratio)}'} "
            f"| {lat_s} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", default="small,queue")
    ap.add_argument("--count", type=int, default=12)
    ap.add_argument("--start", type=int, default=0, help="first instance index (seed 10,000 + start)")
    ap.add_argument("--dev", action="store_true",
                    help="development instances instead (seeds 9,000 + start + i: model selection, never trained on)")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--methods", default=",".join(LEARNED + BASELINES))
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--oracle-only", action="store_true", help="solve and cache the references only")
    ap.add_argument("--out", default="rl_eval")
    a = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    out = Path(a.out)
    methods = [m for m in a.methods.split(",") if m]
    text = []
    for suite in a.suites.split(","):
        if suite in FAMILIES:
            insts = (instances(suite, a.count, "train", start=DEV_SEED + a.start) if a.dev
                     else instances(suite, a.count, "eval", start=a.start))
        else:
            try:
                insts = real_instances(suite, a.count, a.data_dir)
            except Exception as e:
                print(f"skip {suite}: {e}", file=sys.stderr)
                continue
        rows = {}
        for inst in insts:
            rows[(inst.name, "oracle")] = cell(out, inst, "oracle", lambda: run_oracle(inst, a.time_limit))
            if a.oracle_only:
                continue
            for m in methods:
                rows[(inst.name, m)] = cell(out, inst, m, lambda: run_policy(inst, m))
            print(inst.name, {m: rows[(inst.name, m)]["objective"] for m in ["oracle"] + methods}, file=sys.stderr,
                  flush=True)
        if a.oracle_only:
            continue
        t = summarize(suite, insts, rows, methods)
        (out / f"{suite}.md").write_text(t)
        text.append(t)
    print("\n".join(text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
