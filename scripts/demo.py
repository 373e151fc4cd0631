"""jctlab's main job: build instances (from real data when it is there), run oracles, matching,
sampling and baselines through one harness, replay every schedule, and print gap tables.

    python scripts/demo.py [--out runs/demo] [--quick]

Gaps follow SPEC §3: (objective − reference) / reference, against a reference of the same or a
wider class only: ``opt`` (proven optimum), ``lb`` (proven lower bound: the gap is an upper bound
on the true gap) or ``best`` (best schedule found; no guarantee).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from jctlab import registry
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.model import Instance, save_instance, save_schedule
from jctlab.replay import replay
from jctlab.simulate import simulate


def solve(inst: Instance, method: str, **opts) -> dict:
    fn = registry.method(method)
    t = time.perf_counter()
    res = fn(inst, **opts)
    row = {"method": method, "status": res.status, "objective": None, "lower_bound": res.lower_bound,
           "runtime_s": time.perf_counter() - t, "valid": None, "schedule": res.claimed_schedule()}
    if row["schedule"] is not None:
        rep = replay(inst, row["schedule"])
        row.update(valid=rep.valid, objective=rep.objective, jain=rep.metrics.get("jain_slowdown"))
    return row


def online(inst: Instance, policy: str, **opts) -> dict:
    factory = registry.policy_factory(policy)
    pol = factory(inst, **opts)
    t = time.perf_counter()
    sched, rep = simulate(inst, pol, round_s=getattr(pol, "round_s", None), method=policy)
    return {"method": policy, "status": "feasible", "objective": rep.objective, "lower_bound": None,
            "runtime_s": time.perf_counter() - t, "valid": rep.valid, "schedule": sched,
            "jain": rep.metrics.get("jain_slowdown"), "utilization": rep.metrics.get("utilization")}


def reference(rows: list[dict], bound: float | None) -> tuple[float | None, str]:
    proven = [r["objective"] for r in rows if r["status"] == "optimal" and r["valid"]]
    if proven:
        return min(proven), "opt"
    if bound:
        return bound, "lb"
    found = [r["objective"] for r in rows if r["valid"]]
    return (min(found), "best") if found else (None, "-")


def table(title: str, inst: Instance, rows: list[dict], bound: float | None, out: Path) -> None:
    ref, kind = reference(rows, bound)
    print(f"\n## {title}\n`{inst.name}`: {len(inst.jobs)} jobs, {len(inst.cluster.gpus)} GPUs "
          f"({', '.join(inst.cluster.gpu_types)}), class {inst.problem}, reference = {kind}"
          + (f" {ref:.1f} s" if ref else ""))
    print("\n| method | status | valid | mean JCT (s) | bound (s) | gap | Jain | runtime (s) |")
    print("|---|---|---|---|---|---|---|---|")
    save_instance(inst, out / f"{inst.name}.json")
    for r in rows:
        gap = "" if (ref is None or r["objective"] is None) else f"{(r['objective'] - ref) / ref:+.2%} ({kind})"
        obj = "" if r["objective"] is None else f"{r['objective']:.1f}"
        lb = "" if r["lower_bound"] is None else f"{r['lower_bound']:.1f}"
        jain = "" if r.get("jain") is None else f"{r['jain']:.3f}"
        print(f"| {r['method']} | {r['status']} | {r['valid']} | {obj} | {lb} | {gap} | {jain} | {r['runtime_s']:.3f} |")
        if r["schedule"] is not None:
            save_schedule(r["schedule"], out / f"{inst.name}.{r['method'].replace('+', '_')}.json")
        if r["valid"] is False:
            raise SystemExit(f"demo: {r['method']} produced an invalid schedule on {inst.name}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="runs/demo")
    ap.add_argument("--quick", action="store_true", help="smaller instances and time limits")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tl = 5.0 if a.quick else 20.0
    data = default_data_dir()
    print(f"# jctlab demo\nraw data: {data if data else 'absent: synthetic instances and shipped tables only'}")

    # 1. static placement on Gavel's real throughputs: oracle vs matching vs sampling
    from matching.suite import gavel_static

    inst = gavel_static(gpus=32, jobs=10, seed=3)
    rows = [solve(inst, "auto", time_limit=tl, threads=1), solve(inst, "exhaustive"), solve(inst, "matching"),
            solve(inst, "sampling", samples=16, seed=0)]
    bound = max((r["lower_bound"] or 0.0) for r in rows)
    table("Static multi-job placement (Gavel throughputs, proportional split)", inst, rows, bound, out)

    # 2. offline class: the non-preemptive oracle against online non-preemptive policies
    inst = offline_instance(gpus=32, nodes=4, jobs=12 if a.quick else 20, seed=7, variability=0.05,
                            locality_penalty=1.2, interarrival_s=900.0)
    rows = [solve(inst, "auto", time_limit=tl, threads=1)]
    rows += [online(inst, p) for p in ("fifo-firstfit", "fifo+packed-sticky", "sjf+packed-sticky", "fifo+pal",
                                       "matching")]
    bound = rows[0]["lower_bound"]
    table("Offline (non-preemptive) scheduling with arrivals", inst, rows, bound, out)

    # 3. preemptive class on a real trace: round-based policies against the preemptive lower bound
    if data is not None:
        from jctlab.loaders.gavel import load_trace

        inst = load_trace(data / "gavel_traces" / "medium_test.trace", "4:4:4", "4,4,8")
        policies = ["gavel-max-min-fairness", "gavel-max-min-fairness-perf", "gavel-fifo-perf",
                    "fifo+packed-sticky", "las+packed-sticky", "srtf+pal"]
        title = "Preemptive, Gavel's medium_test trace on 4 V100 + 4 P100 + 4 K80"
    else:
        inst = offline_instance(gpus=16, nodes=4, jobs=20, seed=11, problem="preemptive", restart_s=30.0)
        policies = ["fifo+packed-sticky", "las+packed-sticky", "srtf+pal", "fifo+pal"]
        title = "Preemptive, synthetic arrivals"
    rows = [solve(inst, "auto", time_limit=tl, threads=1)] + [online(inst, p) for p in policies]
    table(title, inst, rows, rows[0]["lower_bound"], out)

    # 4. PAL's setting when the data is there
    if data is not None:
        from jctlab.loaders.pal import load_pal

        inst = load_pal(1, data_dir=data, variability="identity", seed=1)
        rows = [online(inst, p) for p in ("fifo+packed-sticky", "fifo+packed-nonsticky", "fifo+pm-first",
                                          "fifo+pal")]
        table("PAL's Sia-Philly workload 1 on 16 x 4 V100 (sampled variability, λ = 1.7)", inst, rows, None, out)
    print(f"\ninstances and schedules written to {out}/ (check any with `jctlab replay INSTANCE SCHEDULE`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
