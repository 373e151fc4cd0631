#!/usr/bin/env python
"""Golden comparison of the baselines' schedules: record a hash of every emitted schedule, check later.

The guard for performance work on ``baselines/``: every registered queue+placement policy, the four
``gavel-*`` policies, ``optimus``, ``synergy-tune`` and ``fifo-firstfit`` run on a fixed set of
instances, and the exact schedule (every segment's job, start, end, GPU ids, PS nodes and CPU/memory
level, floats in hex) is hashed. A changed hash is a changed schedule.

    python scripts/golden_schedules.py --record golden.jsonl      # before the change
    python scripts/golden_schedules.py --check golden.jsonl       # after: exit 1 on any difference

Instances: synthetic ones that exist without data (seeded generators, several cluster shapes, both
mechanisms, PS jobs, interference), and with the public data (``--data-dir`` or ../shared/data) PAL's
workloads with the artifact's exact inputs and one sampled seed, the six Gavel traces, Philly slices
(one on 512 GPUs) and a Philly slice re-hosted on an Alibaba-shaped heterogeneous cluster.
``--record`` appends to its file and skips pairs already there, so a killed run resumes.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import itertools
import json
import sys
import time
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from jctlab import jsonl
from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.model import Instance, Schedule
from jctlab.registry import policy_factory
from jctlab.simulate import PolicyError, simulate

QUEUES = ("fifo", "sjf", "srtf", "las", "gittins")
PLACEMENTS = ("packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky", "pm-first", "pal")
OTHERS = ("gavel-max-min-fairness", "gavel-max-min-fairness-perf", "gavel-fifo-perf",
          "gavel-finish-time-fairness-perf", "optimus", "synergy-tune", "fifo-firstfit")
POLICIES = tuple(f"{q}+{p}" for q, p in itertools.product(QUEUES, PLACEMENTS)) + OTHERS


def schedule_hash(sched: Schedule) -> str:
    """sha256 of the segments, exactly (floats as hex), in the schedule's own order."""
    def f(x):
        return None if x is None else float(x).hex()

    rows = [[s.job, f(s.start), f(s.end), list(s.alloc.gpus), list(s.alloc.ps_nodes),
             f(s.alloc.cpus_per_gpu), f(s.alloc.mem_gb_per_gpu)] for s in sched.segments]
    return hashlib.sha256(json.dumps(rows, separators=(",", ":")).encode()).hexdigest()


def synthetic() -> dict[str, Callable[[], Instance]]:
    def gen(**kw):
        return lambda: offline_instance(**kw)

    return {
        "syn-pre-3type": gen(gpus=64, nodes=16, jobs=300, interarrival_s=120.0, seed=0, variability=0.05,
                             problem="preemptive", locality_penalty=1.7),
        "syn-pre-v100": gen(gpus=96, nodes=12, jobs=400, types=("v100",), interarrival_s=100.0, seed=1,
                            variability=0.08, problem="preemptive", locality_penalty=1.5, restart_s=30.0),
        "syn-pre-flat": gen(gpus=128, nodes=16, jobs=600, types=("v100",), interarrival_s=60.0, seed=2,
                            problem="preemptive", locality_penalty=1.3, restart_s=10.0),
        "syn-pre-uneven-interf": gen(gpus=30, nodes=8, jobs=150, types=("v100", "p100"), interarrival_s=200.0,
                                     seed=3, variability=0.1, interference=0.2, problem="preemptive",
                                     locality_penalty=1.4),
        "syn-pre-ps-cpumem": gen(gpus=32, nodes=8, jobs=120, interarrival_s=300.0, seed=4, variability=0.05,
                                 ps=True, cpu_mem=True, problem="preemptive"),
        "syn-off-3type": gen(gpus=64, nodes=16, jobs=300, interarrival_s=120.0, seed=5, variability=0.05,
                             problem="offline", locality_penalty=1.7),
        "syn-off-ps": gen(gpus=32, nodes=8, jobs=120, interarrival_s=300.0, seed=6, variability=0.05, ps=True,
                          problem="offline"),
        "syn-off-uneven": gen(gpus=30, nodes=8, jobs=150, types=("v100",), interarrival_s=150.0, seed=7,
                              variability=0.1, problem="offline"),
    }


def with_data(data: Path) -> dict[str, Callable[[], Instance]]:
    from jctlab.loaders import gavel as gl
    from jctlab.loaders.alibaba import load_alibaba
    from jctlab.loaders.pal import load_pal
    from jctlab.loaders.philly import load_philly

    out: dict[str, Callable[[], Instance]] = {}
    for w in (1, 2, 3, 4, 6):
        out[f"pal-w{w}-exact"] = lambda w=w: load_pal(w, data_dir=data, variability="artifact", background=True,
                                                      restart_s=0.0)
    out["pal-w1-sampled-s0"] = lambda: load_pal(1, data_dir=data, variability="identity", seed=0, background=True,
                                                restart_s=0.0)
    out["pal-w3-sampled-s1-lam2.5"] = lambda: load_pal(3, data_dir=data, variability="identity", seed=1,
                                                       locality_penalty=2.5, restart_s=30.0)
    for t in ("artifact_evaluation", "debug", "debug_v2", "highmem_test", "medium_test", "small_test"):
        out[f"gavel-{t}"] = lambda t=t: gl.load_trace(data / "gavel_traces" / f"{t}.trace", "4:4:4", "4,4,8")
    out["philly-600-64x8"] = lambda: load_philly(data_dir=data, max_jobs=600, nodes=64, gpus_per_node=8)
    out["philly-1500-16x8-day20"] = lambda: load_philly(data_dir=data, start=20 * 86400, max_jobs=1500, nodes=16,
                                                        gpus_per_node=8, seed=1, restart_s=20.0)
    out["philly-400-alibaba16"] = lambda: load_alibaba(load_philly(data_dir=data, max_jobs=400, seed=2),
                                                       machines=16, seed=0)
    return out


def instances(data: Path | None) -> dict[str, Callable[[], Instance]]:
    out = synthetic()
    if data is not None:
        out.update(with_data(data))
    return out


def run_one(inst: Instance, name: str) -> dict:
    t = time.perf_counter()
    try:
        pol = policy_factory(name)(inst, seed=0)
        sched, rep = simulate(inst, pol, method=name)
    except (InputError, PolicyError, ValueError) as e:   # a policy that refuses an instance: record it
        return {"hash": f"error: {type(e).__name__}: {e}", "objective": None, "wall_s": time.perf_counter() - t}
    return {"hash": schedule_hash(sched), "objective": rep.objective, "segments": len(sched.segments),
            "wall_s": time.perf_counter() - t}


def read(path: Path) -> dict[tuple[str, str], dict]:
    return {(r["instance"], r["policy"]): r for r in jsonl.read_all(path, repair=True)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="JSONL file to append hashes to (resumes)")
    mode.add_argument("--check", type=Path, help="JSONL file of recorded hashes to compare against")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--no-data", action="store_true", help="synthetic instances only")
    ap.add_argument("--instances", default="*", help="glob on instance names (comma list)")
    ap.add_argument("--policies", default="*", help="glob on policy names (comma list)")
    ap.add_argument("--log", type=Path, default=None,
                    help="with --check: append each comparison here as it is made (JSONL)")
    a = ap.parse_args(argv)
    data = None if a.no_data else (a.data_dir or default_data_dir())
    pick_i = a.instances.split(",")
    pick_p = a.policies.split(",")
    insts = {k: v for k, v in instances(data).items() if any(fnmatch.fnmatch(k, g) for g in pick_i)}
    pols = [p for p in POLICIES if any(fnmatch.fnmatch(p, g) for g in pick_p)]
    path = a.record or a.check
    known = read(path)
    if a.check is not None and not known:
        print(f"{path}: no recorded hashes", file=sys.stderr)
        return 2
    todo = [(i, p) for i in insts for p in pols if a.check is not None and (i, p) in known
            or a.record is not None and (i, p) not in known]
    bad, checked, t_old, t_new = [], 0, 0.0, 0.0
    cache: dict[str, Instance] = {}
    with tqdm(todo, unit="run", file=sys.stderr) as bar:
        for i, p in bar:
            bar.set_postfix_str(f"{i} {p}")
            if i not in cache:
                cache.clear()
                cache[i] = insts[i]()
            r = run_one(cache[i], p)
            if a.record is not None:
                jsonl.append(path, {"instance": i, "policy": p, **r})
                continue
            old = known[(i, p)]
            checked += 1
            t_old += old["wall_s"]
            t_new += r["wall_s"]
            same = r["hash"] == old["hash"]
            if not same:
                bad.append((i, p, old.get("objective"), r["objective"], r["hash"][:60]))
                tqdm.write(f"DIFFERENT {i} {p}", file=sys.stderr)
            if a.log is not None:
                jsonl.append(a.log, {"instance": i, "policy": p, "identical": same, "objective": r["objective"],
                                     "recorded_objective": old.get("objective"), "wall_s": r["wall_s"],
                                     "recorded_wall_s": old["wall_s"]})
    if a.check is not None:
        for i, p, o1, o2, h in bad:
            print(f"DIFFERENT {i} {p}: objective {o1} -> {o2} ({h})")
        print(f"{checked - len(bad)} of {checked} schedules identical; policy time {t_old:.1f} s recorded, "
              f"{t_new:.1f} s now")
        return 1 if bad else 0
    print(f"recorded {len(todo)} runs in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
