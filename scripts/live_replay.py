"""The live scheduler's loop replayed on Philly slices, against the baselines and the offline oracle's bound.

    python scripts/live_replay.py [--data-dir DIR] [--out runs/live_replay] [--time-limit 2] [--oracle-limit 300]
                                  [--slices VC:INDEX:JOBS:GPUS:SEED ...] [--quick]

Each slice is ``JOBS`` consecutive jobs of one Philly virtual cluster from job ``INDEX`` on (arrivals,
durations and GPU counts from the trace; Gavel job types drawn with ``SEED``; ``jctlab.loaders.philly``) on
``GPUS`` V100s (8 per node), as an ``offline`` (non-preemptive) instance. On it run, through the core
simulator (every schedule replayed):

* ``live``: the rolling-horizon planner (``jctlab simulate --policy live``: CP-SAT within ``--time-limit`` per
  decision, heuristics as fallback), and ``live-heuristics`` (the same loop with ``--method none``);
* FIFO+packed and SRTF+packed (``fifo+packed-sticky``, ``srtf+packed-sticky``: event-driven, so sticky or
  not is the same) and the other baselines of ``BASELINES``; "best baseline" is the best of them all, per slice;
* the offline oracle (``auto``, ``--oracle-limit`` seconds) on the whole slice, given the best baseline's
  schedule as a hint (with ``--preemptive``, the best of those run on the preemptive instance, not ``/event``'s):
  a clairvoyant schedule no worse than that baseline's (column "clairvoyant vs best": what a scheduler that knew
  every arrival reaches) and a lower bound on every schedule of the slice's class, the live loop's included.

Default slices (``--slices`` not given), chosen from the trace alone: in each virtual cluster with at least
900 jobs other than 103959 (the one used while developing), the first ``--per-vc`` windows of 300 jobs
(starting at jobs 300, 600, ...) whose offered load (Σ GPUs × duration / (GPUs × span)) is within 0.8-1.3 on
the one of 16/32/64 GPUs that holds the window's largest job with the load closest to 1; job-type seeds
10000 + k (held-out seeds). ``--rule waiting`` instead takes, on the same GPU count, the first windows where
jobs wait under FIFO+packed for at least a quarter of their JCT on average (seeds 10100 + k): slices where a
scheduler has something to decide, chosen by a baseline's schedule, never by the live loop's. (A first
rule, load at most 1 on the smallest such cluster, picked windows where no job waits and every policy
ties; it was replaced before these slices were run.)
With ``--cluster mixed`` the default slices run on a cluster of the same size whose nodes are V100, P100 and
K80 (a third each; :func:`mixed`): the same arrivals and jobs, where the choice of GPU type matters. With
``--preemptive RESTART_S`` the slices are ``preemptive`` instances (a resumed job loses ``RESTART_S`` s): the
loop may preempt (``preemption=true``), the baselines run as the preemptive class runs them (rounds of 360 s,
and of 60 s), joined by the policies that preempt at their rounds (``PREEMPTING``) and by the event-driven
schedules of the non-preemptive class (``/event``: valid preemptive schedules too); the oracle's bound is then
the preemptive one.
Results go to ``OUT/<slice>.json`` (a slice already there is not run again: a killed run resumes) and
``OUT/table.md``. Needs the Philly trace (``../shared/data`` or ``--data-dir``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from tqdm import tqdm

from jctlab import registry
from jctlab.loaders._common import node_dicts
from jctlab.loaders.philly import load_philly, read_trace
from jctlab.metrics import ReferenceDurations
from jctlab.model import Instance, Schedule, instance_to_dict
from jctlab.simulate import simulate
from live.policy import factory as live_policy
from oracle.methods import solve

BASELINES = ("fifo+packed-sticky", "srtf+packed-sticky", "fifo-firstfit", "fifo+pm-first", "srtf+pm-first",
             "srtf+random-sticky", "matching")
BACKFILL = ("fifo+packed-sticky", "srtf+packed-sticky")   # also run with backfill=True
#: with --preemptive: the same (round-based there), and the policies that preempt at their rounds; each also
#: with rounds of SHORT_ROUND_S (the mechanism's own 360 s rounds delay every start by up to a round)
PREEMPTING = ("srtf+packed-nonsticky", "las+packed-nonsticky", "gittins+packed-nonsticky", "srtf+pm-first")
SHORT_ROUND_S = 60.0
DEV_VC = "103959"
WINDOW = 300
GPU_CHOICES = (16, 32, 64)
LOAD = (0.8, 1.3)   # offered load of a slice on its GPUs: queues form, the cluster is not swamped
MIXED = ("v100", "p100", "k80")   # node types of the mixed cluster, in turn
WAITING = 0.25      # rule `waiting`: under FIFO+packed, jobs wait on average at least this share of their JCT


def default_slices(data_dir: str | None, per_vc: int = 1, rule: str = "load", skip: int = 0,
                   seed_base: int | None = None) -> list[str]:
    """The rules of the module docstring: per virtual cluster, the first ``per_vc`` windows that qualify after
    the first ``skip`` that do (on inputs only, or on FIFO's schedule for ``waiting``: nothing here looks at
    the live loop); job-type seeds from ``seed_base`` (default 10000, 10100 for ``waiting``)."""
    if seed_base is None:
        seed_base = 10100 if rule == "waiting" else 10000
    df = read_trace(data_dir=data_dir)
    out = []
    for vc, g in sorted(df.groupby("cluster"), key=lambda x: x[0]):
        if vc == DEV_VC or len(g) < 900:
            continue
        g = g.sort_values(["ts", "duration"], kind="stable")
        found = skipped = 0
        for start in range(WINDOW, len(g) - WINDOW + 1, WINDOW):
            w = g.iloc[start:start + WINDOW]
            span = (w.ts.iloc[-1] - w.ts.iloc[0]).total_seconds()
            work = float((w.num_gpus * w.duration).sum())
            loads = {n: work / (n * span) for n in GPU_CHOICES if w.num_gpus.max() <= n}
            if not loads:
                continue
            gpus = min(loads, key=lambda n: abs(loads[n] - 1.0))
            spec = f"{vc}:{start}:{WINDOW}:{gpus}:{seed_base + len(out)}"
            if rule == "load":
                ok = LOAD[0] <= loads[gpus] <= LOAD[1]
            else:
                inst = build(spec, data_dir)
                _, rep = simulate(inst, registry.policy_factory("fifo+packed-sticky")(inst), method="fifo")
                ok = rep.metrics["mean_queueing_delay"] >= WAITING * rep.objective
            if ok and skipped < skip:
                skipped += 1
            elif ok:
                out.append(spec)
                found += 1
                if found == per_vc:
                    break
    return out


def build(spec: str, data_dir: str | None, restart_s: float | None = None) -> Instance:
    """The slice ``VC:INDEX:JOBS:GPUS:SEED``, or ``...:SEED:mixed`` on the mixed cluster (:func:`mixed`); an
    ``offline`` instance, or with ``restart_s`` a ``preemptive`` one whose preempted jobs lose that many seconds."""
    vc, start, jobs, gpus, seed, *kind = spec.split(":")
    g = read_trace(data_dir=data_dir, vc=vc)
    ts = str(g.ts.iloc[int(start)])
    pre = restart_s is not None
    inst = load_philly(data_dir=data_dir, vc=vc, start=ts, max_jobs=int(jobs), nodes=int(gpus) // 8, gpus_per_node=8,
                       seed=int(seed), problem="preemptive" if pre else "offline", restart_s=restart_s or 0.0,
                       name=f"philly-{vc}-{start}-{jobs}-{gpus}g-s{seed}" + (f"-pre{restart_s:g}" if pre else ""))
    if kind == ["mixed"]:
        return mixed(inst)
    if kind:
        raise SystemExit(f"--slices {spec}: the sixth field is 'mixed' or absent")
    return inst


def mixed(inst: Instance) -> Instance:
    """The same jobs on a cluster of the same size, a third of its 8-GPU nodes V100, P100 and K80 each (V100 first;
    Gavel's heterogeneous spec for these traces, 300 of each, rounded to whole nodes): each job's speed on each
    type is its Gavel type's measured throughput, so where a job runs matters and the baselines that ignore types
    lose to those that price them."""
    d = instance_to_dict(inst)
    n = len(inst.cluster.gpus) // 8
    counts = {t: len(range(k, n, len(MIXED))) for k, t in enumerate(MIXED)}
    d["cluster"]["nodes"] = node_dicts([(t, c, 8) for t, c in counts.items() if c])
    d["name"] += "-mixed"
    return Instance.from_dict(d, source=inst.name)


def offered_load(inst: Instance) -> float:
    ref = ReferenceDurations(inst.cluster)
    work = sum(ref(j) * j.sizes[0] for j in inst.jobs)
    span = max(j.arrival for j in inst.jobs) - min(j.arrival for j in inst.jobs)
    return work / (len(inst.cluster.gpus) * span)


def run_slice(spec: str, a: argparse.Namespace) -> dict:
    inst = build(spec, a.data_dir, a.preemptive)
    pre = a.preemptive is not None
    row: dict = {"slice": spec, "instance": inst.name, "jobs": len(inst.jobs), "gpus": len(inst.cluster.gpus),
                 "load": offered_load(inst), "policies": {}}
    # (label suffix, instance, policy, options)
    variants = [("", inst, name, {}) for name in BASELINES]
    variants += [("/backfill", inst, name, {"backfill": True}) for name in BACKFILL if not pre]
    variants += [("", inst, name, {}) for name in PREEMPTING if pre]
    variants += [(f"/{SHORT_ROUND_S:g}s", inst, name, {"round_s": SHORT_ROUND_S}) for name in BACKFILL + PREEMPTING if pre]
    if pre:   # the event-driven (non-preemptive) schedules are preemptive schedules too
        twin = build(spec, a.data_dir)
        variants += [("/event", twin, name, {}) for name in BACKFILL]
    own: dict[str, Schedule] = {}   # the baselines' schedules of ``inst`` (not the twin's): the oracle's hint
    for suffix, on, name, opts in variants:
        t = time.perf_counter()
        sched, rep = simulate(on, registry.policy_factory(name)(on, **opts), method=name)
        assert rep.valid
        row["policies"][name + suffix] = {"mean_jct": rep.objective, "runtime_s": time.perf_counter() - t}
        if on is inst:
            own[name + suffix] = sched
    hint = min(own, key=lambda k: row["policies"][k]["mean_jct"])
    for label, method in (("live-heuristics", "none"), ("live", a.method)) if a.loop else ():
        if label == "live" and method == "none":   # the same loop again
            row["policies"]["live"] = row["policies"]["live-heuristics"]
            break
        pol = live_policy(inst, time_limit=a.time_limit, method=method, max_oracle_jobs=a.max_oracle_jobs,
                          max_evaluations=a.max_evaluations, preemption=pre, preempt_gain=a.preempt_gain,
                          arrivals=a.arrivals)
        t = time.perf_counter()
        try:
            sched, rep = simulate(inst, pol, method=label)
        finally:
            pol.close()
        assert rep.valid
        lat = sorted(p.latency_s for p in pol.plans)
        row["policies"][label] = {
            "mean_jct": rep.objective, "runtime_s": time.perf_counter() - t, "decisions": len(pol.plans),
            "oracle_solves": pol.planner.solves, "holds": pol.planner.holds,
            "oracle_won": sum(p.source == method for p in pol.plans),
            "latency_p50_s": statistics.median(lat) if lat else None,
            "latency_max_s": lat[-1] if lat else None,
            # each decision's plan against its state's lower bound (live.bounds: the whole queue, closed form)
            "plan_gap_mean": statistics.fmean(gaps) if (gaps := [p.objective / p.lower_bound - 1 for p in pol.plans
                                                                 if p.lower_bound]) else None}
    t = time.perf_counter()
    res = solve(inst, method="auto", time_limit=a.oracle_limit, threads=1, hint=own[hint])
    row["oracle"] = {"status": res.status, "objective": res.objective, "lower_bound": res.lower_bound,
                     "runtime_s": time.perf_counter() - t, "hint": hint}
    return row


def table(rows: list[dict]) -> str:
    cols = ("slice", "jobs", "GPUs", "load", "FIFO+packed", "SRTF+packed", "best baseline", "live (heuristics)",
            "live", "live vs best", "clairvoyant vs best", "oracle LB", "live gap (lb)", "best baseline gap (lb)",
            "plan gap (state lb)")
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        pol = r["policies"]
        base = {k: v["mean_jct"] for k, v in pol.items() if not k.startswith("live")}
        best = min(base, key=base.get)
        live = pol["live"]["mean_jct"] if "live" in pol else None
        lb = r["oracle"]["lower_bound"]
        clair = r["oracle"]["objective"]
        heur = pol["live-heuristics"]["mean_jct"] if "live-heuristics" in pol else None
        out.append(f"| {r['slice']} | {r['jobs']} | {r['gpus']} | {r['load']:.2f} | "
                   f"{pol['fifo+packed-sticky']['mean_jct']:.0f} | {pol['srtf+packed-sticky']['mean_jct']:.0f} | "
                   f"{base[best]:.0f} ({best}) | {_num(heur)} | {_num(live)} | {_rel(live, base[best], '+.1%')} | "
                   f"{_rel(clair, base[best], '+.1%')} | {_num(lb)} | {_rel(live, lb, '.1%')} | "
                   f"{_rel(base[best], lb, '.1%')} | {_pct(pol['live'].get('plan_gap_mean')) if 'live' in pol else '-'} |")
    return "\n".join(out)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _num(x: float | None) -> str:
    return "-" if not x else f"{x:.0f}"


def _rel(x: float | None, ref: float | None, fmt: str) -> str:
    """(x − ref) / ref in ``fmt``; "-" when either is missing."""
    return "-" if not x or not ref else format((x - ref) / ref, fmt)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--out", default="runs/live_replay")
    ap.add_argument("--slices", nargs="*", default=None, help="VC:INDEX:JOBS:GPUS:SEED (default: the rule above)")
    ap.add_argument("--per-vc", type=int, default=1, help="default slices per virtual cluster")
    ap.add_argument("--rule", choices=("load", "waiting"), default="load", help="how default slices are chosen")
    ap.add_argument("--skip", type=int, default=0, help="skip the first K qualifying windows per virtual cluster")
    ap.add_argument("--seed-base", type=int, default=None, help="first job-type seed of the default slices")
    ap.add_argument("--max-evaluations", type=int, default=None,
                    help="search budget per decision in decodings (decisions independent of the machine's load)")
    ap.add_argument("--time-limit", type=float, default=2.0, help="per live decision (s)")
    ap.add_argument("--method", default="cpsat")
    ap.add_argument("--max-oracle-jobs", type=int, default=16)
    ap.add_argument("--oracle-limit", type=float, default=300.0, help="offline oracle on the whole slice (s)")
    ap.add_argument("--cluster", choices=("v100", "mixed"), default="v100",
                    help="default slices on V100s (Gavel's homogeneous spec for these traces) or on the mixed "
                         "V100/P100/K80 cluster (its heterogeneous spec's proportions; same jobs)")
    ap.add_argument("--preemptive", type=float, default=None, metavar="RESTART_S",
                    help="preemptive slices (a preempted job loses RESTART_S s when it resumes): the loop may preempt "
                         "(--preemption), the baselines that preempt at their rounds join")
    # 0.001, chosen on the development slices (VC windows of --skip 3, seeds 9300-9303): 0.01 (the live default,
    # a guard against estimates that are wrong; the replay's are exact) left the loop behind SRTF's preemptions
    ap.add_argument("--preempt-gain", type=float, default=0.001,
                    help="with --preemptive: the least relative gain of each preemption the loop makes")
    ap.add_argument("--arrivals", action="store_true",
                    help="the loop predicts arrivals and may hold a long job back for them (live.arrivals)")
    ap.add_argument("--no-loop", dest="loop", action="store_false",
                    help="baselines and the oracle only (the clairvoyant schedule and the bound), not the loop")
    ap.add_argument("--quick", action="store_true", help="first two slices, 100 jobs, short limits")
    a = ap.parse_args(argv)
    slices = a.slices or default_slices(a.data_dir, a.per_vc, a.rule, a.skip, a.seed_base)
    if a.cluster == "mixed" and not a.slices:
        slices = [s + ":mixed" for s in slices]
    if a.quick:
        slices = [":".join(s.split(":")[:2] + ["100"] + s.split(":")[3:]) for s in slices[:2]]
        a.time_limit, a.oracle_limit = min(a.time_limit, 1.0), min(a.oracle_limit, 30.0)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for spec in tqdm(slices, desc="slices", unit="slice"):
        path = out / (spec.replace(":", "_") + ".json")
        if path.exists():
            rows.append(json.loads(path.read_text()))
            continue
        row = run_slice(spec, a)
        row["settings"] = {"time_limit": a.time_limit, "method": a.method, "max_oracle_jobs": a.max_oracle_jobs,
                           "preemptive_restart_s": a.preemptive, "preempt_gain": a.preempt_gain,
                           "max_evaluations": a.max_evaluations, "arrivals": a.arrivals,
                           "oracle_limit": a.oracle_limit, "loop": a.loop}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(row, indent=1))
        tmp.replace(path)
        rows.append(row)
    text = table(rows)
    (out / "table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
