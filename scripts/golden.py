"""Golden outputs of deterministic oracle runs: record them, and compare two recordings.

    python scripts/golden.py record OUT.json [--only PREFIX] [--skip-timed]
    python scripts/golden.py compare BEFORE.json AFTER.json

A refactor of the oracles must change no behaviour. This records, on fixed instances and seeds, what
does not depend on the wall clock: runs without a time limit (one CP-SAT worker, fixed seed) that prove
optimality, brute force, branch and bound, the heuristics (greedy, list scheduling, local search with a
move budget, matching, sampling), candidate and option enumeration, the relaxation bounds (preemptive
LP, time-indexed LP, the set-packing LP) and the phases each offline pipeline ran. For runs with a time
limit (``timed:``) only what a proof fixes is compared: status and objective (the optimum).

``compare`` prints every key whose value differs (floats compared exactly, except ``timed:`` entries,
relative 1e-9) and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from typing import Any, Callable

from jctlab.generators import offline_instance, static_instance
from jctlab.model import Instance, Schedule
from formulations import brute
from formulations.budget import Budget
from formulations.offline import bnb as offline_bnb
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import preemptive_bound, time_indexed_bound
from formulations.offline.classes import class_options, node_complete_options, p_min, trivial_bound
from formulations.offline.concrete import concrete_options
from formulations.offline.greedy import greedy, offline_greedy
from formulations.offline.local_search import improve, search_options, spread_candidates
from formulations.offline.pipeline import class_resources
from formulations.static.candidates import enumerate_candidates
from formulations.static.greedy import static_greedy
from formulations.static.packing import build_packing
from formulations.static.reduced_costs import lp_reduced_costs
from matching.methods import exhaustive, matching
from oracle import blocks
from oracle.methods import solve
from samplers.methods import sampling


def _sched(s: Schedule | None) -> Any:
    if s is None:
        return None
    return [[g.job, g.start, g.end, list(g.alloc.gpus), list(g.alloc.ps_nodes), g.alloc.cpus_per_gpu,
             g.alloc.mem_gb_per_gpu] for g in s.segments]


def _digest(x: Any) -> str:
    return hashlib.sha256(repr(x).encode()).hexdigest()[:16]


def _result(r: Any, schedule: bool = True, phases: bool = True) -> dict:
    out = {"status": str(r.status), "objective": r.objective, "lower_bound": r.lower_bound}
    if schedule:
        out["schedule"] = _sched(r.schedule)
    if phases and r.params.get("phases"):
        out["phases"] = [(p["phase"], p["status"]) for p in r.params["phases"]]
    if r.params.get("model"):
        out["model"] = r.params["model"]
    return out


def _options_digest(opts: Any) -> Any:
    if opts is None:
        return None
    rows = [[(o.job, o.dur, sorted(o.demand.items(), key=repr), o.alloc, o.cls, o.ps_local, o.ps_count, o.level)
             for o in ol] for ol in opts]
    return {"count": sum(map(len, rows)), "digest": _digest(rows)}


# ----------------------------------------------------------------------------- instances

def static_small(seed: int) -> Instance:
    return static_instance(gpus=16, nodes=4, jobs=8, variability=0.05, sizes=(1, 2, 4, 8), seed=seed)


def static_spread(seed: int) -> Instance:
    """Many small nodes: relaxed spread families, their expansion and the repair."""
    return static_instance(gpus=24, nodes=12, jobs=6, variability=0.1, sizes=(1, 2, 4), seed=seed)


def static_features(seed: int) -> Instance:
    return static_instance(gpus=8, nodes=2, jobs=4, cpu_mem=True, ps=True, variability=0.05, seed=seed)


def static_tiny(seed: int) -> Instance:
    return static_instance(gpus=4, nodes=2, jobs=3, sizes=(1, 2), variability=0.1, seed=seed)


def offline_tiny(seed: int) -> Instance:
    return offline_instance(gpus=4, nodes=2, jobs=5, max_size=2, variability=0.1, locality_penalty=1.2,
                            interarrival_s=300, seed=seed)


def offline_features(seed: int) -> Instance:
    return offline_instance(gpus=4, nodes=2, jobs=4, max_size=2, ps=True, cpu_mem=True, variability=0.05,
                            interarrival_s=300, seed=seed)


def offline_large_path(seed: int) -> Instance:
    """Not every GPU subset enumerable (sizes up to 4 on 8 GPUs): the class-model pipeline."""
    return offline_instance(gpus=8, nodes=2, jobs=7, max_size=4, variability=0.05, locality_penalty=1.2,
                            interarrival_s=600, seed=seed)


def offline_queue(seed: int) -> Instance:
    return offline_instance(gpus=4, nodes=1, jobs=8, max_size=2, interarrival_s=200, variability=0.05, seed=seed)


def offline_bench(gpus: int, nodes: int, jobs: int, seed: int) -> Instance:
    return offline_instance(gpus=gpus, nodes=nodes, jobs=jobs, interarrival_s=900, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=seed)


# ----------------------------------------------------------------------------- cases


def cases() -> dict[str, Callable[[], Any]]:
    c: dict[str, Callable[[], Any]] = {}
    for s in (0, 1):
        c[f"static-small-{s}:cpsat"] = lambda s=s: _result(solve(static_small(s), "cpsat", threads=1))
        c[f"static-small-{s}:milp"] = lambda s=s: _result(solve(static_small(s), "milp", threads=1))
        c[f"static-spread-{s}:cpsat"] = lambda s=s: _result(solve(static_spread(s), "cpsat", threads=1))
        c[f"static-spread-{s}:milp"] = lambda s=s: _result(solve(static_spread(s), "milp", threads=1))
        c[f"static-features-{s}:cpsat"] = lambda s=s: _result(solve(static_features(s), "cpsat", threads=1))
        c[f"static-features-{s}:milp"] = lambda s=s: _result(solve(static_features(s), "milp", threads=1))
        c[f"static-tiny-{s}:brute"] = lambda s=s: _result(brute.solve(static_tiny(s)))
        c[f"static-tiny-{s}:auto"] = lambda s=s: _result(solve(static_tiny(s), "auto", threads=1))
        c[f"static-small-{s}:candidates"] = lambda s=s: _candidates(enumerate_candidates(static_small(s)))
        c[f"static-spread-{s}:candidates"] = lambda s=s: _candidates(enumerate_candidates(static_spread(s)))
        c[f"static-features-{s}:candidates"] = lambda s=s: _candidates(enumerate_candidates(static_features(s)))
        c[f"static-small-{s}:lp"] = lambda s=s: _lp(static_small(s), enumerate_candidates, build_packing,
                                                    lp_reduced_costs, Budget)
        c[f"static-spread-{s}:greedy"] = lambda s=s: _static_greedy(static_spread(s), enumerate_candidates,
                                                                    build_packing, static_greedy)
        c[f"static-small-{s}:matching"] = lambda s=s: _result(matching(static_small(s)), phases=False)
        c[f"static-small-{s}:exhaustive"] = lambda s=s: _result(exhaustive(static_small(s)), phases=False)
        c[f"static-small-{s}:sampling"] = lambda s=s: _result(sampling(static_small(s), samples=16, seed=s),
                                                              phases=False)
    for s in (0, 1, 2):
        for m in ("cpsat", "milp", "bnb", "brute", "auto"):
            c[f"offline-tiny-{s}:{m}"] = lambda s=s, m=m: _result(solve(offline_tiny(s), m, threads=1))
        for m in ("cpsat", "milp"):
            c[f"offline-features-{s}:{m}"] = lambda s=s, m=m: _result(solve(offline_features(s), m, threads=1))
        c[f"offline-queue-{s}:bnb"] = lambda s=s: _result(solve(offline_queue(s), "bnb", threads=1))
    for s in (0, 1):
        c[f"offline-large-{s}:cpsat"] = lambda s=s: _result(offline_cpsat.solve(offline_large_path(s), threads=1))
        c[f"offline-large-{s}:milp"] = lambda s=s: _result(solve(offline_large_path(s), "milp", threads=1))
        c[f"offline-large-{s}:options"] = lambda s=s: _offline_options(offline_large_path(s))
        c[f"offline-features-{s}:options"] = lambda s=s: _offline_options(offline_features(s))
        c[f"offline-bench32-{s}:options"] = lambda s=s: _offline_options(offline_bench(32, 4, 30, s))
        c[f"offline-bench32-{s}:greedy"] = lambda s=s: _incumbent(greedy(offline_bench(32, 4, 30, s), "g"))
        c[f"offline-bench32-{s}:heuristic-greedy"] = lambda s=s: _heuristic(offline_bench(32, 4, 30, s),
                                                                            offline_greedy)
        c[f"offline-bench32-{s}:improve"] = lambda s=s: _improve(offline_bench(32, 4, 30, s))
        c[f"offline-bench32-{s}:preemptive-lp"] = lambda s=s: preemptive_bound.lower_bound(offline_bench(32, 4, 30, s))
        c[f"offline-bench32-{s}:time-indexed-lp"] = lambda s=s: _ti(offline_bench(32, 4, 30, s), time_indexed_bound)
        c[f"offline-bench32-{s}:blocks"] = lambda s=s: _blocks(offline_bench(32, 4, 30, s), blocks)
        c[f"offline-queue-{s}:preemptive-lp"] = lambda s=s: preemptive_bound.lower_bound(offline_queue(s))
    c["offline-bnb-direct"] = lambda: _result(offline_bnb.solve(offline_queue(0)))
    # with a time limit: only what a proof fixes (status, optimum)
    for (g, n, j), s in (((32, 4, 30), 0), ((32, 4, 30), 2), ((64, 8, 50), 1)):
        c[f"timed:offline-bench{g}-{s}:cpsat"] = lambda g=g, n=n, j=j, s=s: _timed(
            solve(offline_bench(g, n, j, s), "cpsat", time_limit=120, threads=2))
    for s in (0, 1):
        c[f"timed:static-64-{s}:cpsat"] = lambda s=s: _timed(solve(
            static_instance(gpus=64, nodes=8, jobs=32, variability=0.05, sizes=(1, 2, 4, 8), seed=s), "cpsat",
            time_limit=60, threads=2))
    return c


def _timed(r: Any) -> dict:
    return {"status": str(r.status), "objective": r.objective if str(r.status) == "optimal" else None}


def _candidates(cs: Any) -> dict:
    rows = [(c.job, c.kind, c.duration, c.n, c.counts, c.node, c.type_counts, c.level, c.ps_nodes, c.cpu, c.mem,
             c.node_counts) for cj in cs.per_job for c in cj]
    return {"count": len(rows), "complete": cs.complete, "digest": _digest(rows)}


def _lp(inst: Instance, enumerate_candidates: Any, build_packing: Any, lp: Any, Deadline: Any) -> Any:
    model = build_packing(inst, enumerate_candidates(inst))
    got = lp(model, Deadline(None))
    return None if got is None else {"lb": got[0], "rc": _digest([float(x) for x in got[1]])}


def _static_greedy(inst: Instance, enumerate_candidates: Any, build_packing: Any, static_greedy: Any) -> Any:
    a = static_greedy(inst, build_packing(inst, enumerate_candidates(inst)), seed=0)
    return None if a is None else [[list(x.gpus), list(x.ps_nodes), x.cpus_per_gpu, x.mem_gb_per_gpu] for x in a]


def _incumbent(best: Any) -> Any:
    return None if best.schedule is None else {"objective": best.objective, "schedule": _sched(best.schedule)}


def _heuristic(inst: Instance, offline_greedy: Any) -> Any:
    g = offline_greedy(inst)
    return None if g is None else {"starts": [sg.start for sg in g.segments], "allocs": [list(sg.alloc.gpus)
                                                                                       for sg in g.segments]}


def _improve(inst: Instance) -> Any:
    concrete, complete = concrete_options(inst)
    opts = search_options(inst, concrete, complete, node_complete_options(inst))
    return _incumbent(improve(inst, opts, greedy(inst, "g"), Budget(None), 0.05, 0, "cpsat"))


def _ti(inst: Instance, ti: Any) -> Any:
    best = greedy(inst, "g")
    return ti.lower_bound(inst, class_options(inst), class_resources(inst), incumbent=best.objective, time_limit=None)


def _blocks(inst: Instance, blocks: Any) -> Any:
    got = blocks.split(inst)
    return None if got is None else got[0]


def _offline_options(inst: Instance) -> dict:
    concrete, complete = concrete_options(inst)
    return {"concrete": _options_digest(concrete), "complete": complete,
            "classes": _options_digest(class_options(inst)),
            "classes-levels": _options_digest(class_options(inst, True)),
            "node-complete": _options_digest(node_complete_options(inst)),
            "p_min": p_min(inst), "trivial": trivial_bound(inst),
            "spread": _options_digest([spread_candidates(inst, j) for j in range(len(inst.jobs))])}


# ----------------------------------------------------------------------------- record / compare


def _json_default(x: Any) -> Any:
    if isinstance(x, (set, frozenset)):
        return sorted(x, key=repr)
    return repr(x)


def record(path: str, only: str | None, skip_timed: bool) -> None:
    out: dict[str, Any] = {}
    for name, fn in cases().items():
        if only and not name.startswith(only) or skip_timed and name.startswith("timed:"):
            continue
        t = time.perf_counter()
        try:
            out[name] = json.loads(json.dumps(fn(), default=_json_default))
        except Exception as e:  # noqa: BLE001 - recorded: an error is an output too
            out[name] = {"error": f"{e.__class__.__name__}: {e}"}
        print(f"{name}: {time.perf_counter() - t:.1f}s", file=sys.stderr, flush=True)
        with open(path, "w") as f:        # after every case: a long recording keeps what it has
            json.dump(out, f, indent=1, sort_keys=True)


def _diff(a: Any, b: Any, where: str, rel: float, out: list[str]) -> None:
    if isinstance(a, float) and isinstance(b, float):
        if not (a == b or math.isclose(a, b, rel_tol=rel, abs_tol=0.0) and rel > 0):
            out.append(f"{where}: {a!r} != {b!r}")
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}.{k}: {'missing before' if k not in a else 'missing after'}")
            else:
                _diff(a[k], b[k], f"{where}.{k}", rel, out)
        return
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{where}[{i}]", rel, out)
        return
    if a != b:
        out.append(f"{where}: {json.dumps(a)[:200]} != {json.dumps(b)[:200]}")


def compare(before: str, after: str) -> int:
    with open(before) as f:
        a = json.load(f)
    with open(after) as f:
        b = json.load(f)
    out: list[str] = []
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            out.append(f"{k}: {'new case' if k not in a else 'case missing'}")
            continue
        _diff(a[k], b[k], k, 1e-9 if k.startswith("timed:") else 0.0, out)
    print("\n".join(out) if out else f"identical: {len(a)} cases")
    return 1 if out else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("record")
    r.add_argument("out")
    r.add_argument("--only", default=None, help="cases whose name starts with this")
    r.add_argument("--skip-timed", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    a = p.parse_args()
    if a.verb == "record":
        record(a.out, a.only, a.skip_timed)
        return 0
    return compare(a.before, a.after)


if __name__ == "__main__":
    sys.exit(main())
