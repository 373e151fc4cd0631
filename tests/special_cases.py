"""Instances that are textbook scheduling problems (Hypothesis strategies), and independent textbook values.

The references here share no code with :mod:`formulations.special`: they enumerate or use the closed forms.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from hypothesis import strategies as st

from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.replay import replay

TYPES = ("v100", "p100", "k80")


def instance_dict(durations: list[list[float]], gpu_types: list[str], *, problem: str = "offline",
                  arrivals: list[float] | None = None, weights: list[float] | None = None,
                  objective: str = "mean_jct", gpus_per_node: int = 2, restart_s: float = 0.0,
                  variability: list[dict[str, float]] | None = None,
                  classes: list[str] | None = None) -> dict[str, Any]:
    """Single-GPU jobs whose run time on a GPU of type t is ``durations[j][TYPES.index(t)]`` (0: t cannot host
    the job); GPUs ``gpu_types``, ``gpus_per_node`` to a node."""
    n = len(durations)
    gpus = [{"type": t, **({"variability": variability[k]} if variability else {})} for k, t in enumerate(gpu_types)]
    nodes = [{"name": f"n{i}", "cpus": 8, "mem_gb": 64, "gpus": gpus[i * gpus_per_node:(i + 1) * gpus_per_node]}
             for i in range(math.ceil(len(gpus) / gpus_per_node))]
    types = sorted(set(gpu_types))
    jobs = []
    for j, row in enumerate(durations):
        jobs.append({"name": f"j{j}", "arrival": 0.0 if arrivals is None else arrivals[j], "batch": 1.0,
                     "iterations": 1000.0, "samples_per_s": {t: (1000.0 / row[TYPES.index(t)] if row[TYPES.index(t)]
                                                                  else 0.0) for t in types},
                     "sizes": [1], "weight": 1.0 if weights is None else weights[j],
                     **({"class": classes[j]} if classes else {})})
    return {"format": "jctlab.instance/1", "name": "special", "problem": problem, "objective": objective,
            "cluster": {"nodes": nodes, "restart_s": restart_s}, "jobs": jobs}


@st.composite
def equal_release_instances(draw, kind: str, problem: str = "offline", max_jobs: int = 6, max_gpus: int = 3,
                            weighted: bool = False, spread: bool = False) -> Instance:
    """``kind``: identical (one type), uniform (each type one speed for every job), unrelated (any rates and
    per-GPU variability). Releases all equal (a random common release), or with ``spread`` each in [0, 60]."""
    n = draw(st.integers(1, max_jobs))
    m = 1 if weighted else draw(st.integers(1, max_gpus))
    run = st.integers(1, 40).map(float)
    gpu_types = ["v100"] * m if kind == "identical" else draw(st.lists(st.sampled_from(TYPES), min_size=m, max_size=m))
    if kind == "uniform":
        speed = {"v100": 1.0, "p100": 2.0, "k80": 5.0}
        durations = [[p * speed[t] for t in TYPES] for p in draw(st.lists(run, min_size=n, max_size=n))]
    elif kind == "identical":
        durations = [[p] * 3 for p in draw(st.lists(run, min_size=n, max_size=n))]
    else:
        durations = draw(st.lists(st.lists(run, min_size=3, max_size=3), min_size=n, max_size=n))
    variability = None
    classes = None
    if kind == "unrelated":
        variability = [{"A": draw(st.sampled_from([1.0, 1.25, 2.0]))} for _ in range(m)]
        classes = [draw(st.sampled_from(["A", "B"])) for _ in range(n)]
    release = draw(st.sampled_from([0.0, 100.0]))
    weights = draw(st.lists(st.integers(1, 5).map(float), min_size=n, max_size=n)) if weighted else None
    arrivals = draw(st.lists(st.integers(0, 60).map(float), min_size=n, max_size=n)) if spread else [release] * n
    d = instance_dict(durations, gpu_types, problem=problem, arrivals=arrivals, weights=weights,
                      objective="weighted_jct" if weighted else "mean_jct", variability=variability, classes=classes)
    return Instance.from_dict(d)


def run_time_matrix(inst: Instance) -> list[list[float]]:
    """p_{jg} read off a non-preemptive replay of each job alone (independent of the special cases' code)."""
    out = []
    for job in inst.jobs:
        row = []
        for g in inst.cluster.gpus:
            if not job.can_use(g.type):
                row.append(math.inf)
                continue
            alone = inst.replace_jobs([job])
            rep = replay(alone, Schedule(inst.name, "t", (Segment(job.name, job.arrival, None, Allocation((g.id,))),)))
            row.append(rep.completion[job.name] - job.arrival)
        out.append(row)
    return out


def enumerated_optimum(inst: Instance) -> float:
    """R||Σw_jC_j by enumeration: every assignment of jobs to GPUs, each GPU in WSPT order (Smith's rule is
    optimal on one machine), divided by Σw; the objective with equal releases."""
    p = run_time_matrix(inst)
    w = [j.weight for j in inst.jobs] if inst.objective == "weighted_jct" else [1.0] * len(inst.jobs)
    m = len(inst.cluster.gpus)
    best = math.inf
    for assign in itertools.product(range(m), repeat=len(inst.jobs)):
        total = 0.0
        for g in range(m):
            jobs = sorted((j for j in range(len(assign)) if assign[j] == g), key=lambda j: p[j][g] / w[j])
            t = 0.0
            for j in jobs:
                t += p[j][g]
                total += w[j] * t
        best = min(best, total)
    return best / sum(w)


def spt_closed_form(p: list[float], m: int) -> float:
    """P||ΣC_j: the i-th longest job (i = 1..n) has coefficient ⌈i/m⌉; the mean JCT."""
    return sum(math.ceil(i / m) * x for i, x in enumerate(sorted(p, reverse=True), start=1)) / len(p)


def unit_slot_preemptive_optimum(p: list[int], a: list[int]) -> float:
    """1|r_j,pmtn|ΣC_j over schedules that switch jobs at integer times only, by exhaustive search over which
    released unfinished job runs in each unit slot (idle only when none is released); integer data."""
    n = len(p)
    best = math.inf

    def go(t: int, left: tuple[int, ...], total: float) -> None:
        nonlocal best
        if total >= best:
            return
        if all(x == 0 for x in left):
            best = total
            return
        ready = [j for j in range(n) if left[j] > 0 and a[j] <= t]
        if not ready:
            go(min(a[j] for j in range(n) if left[j] > 0), left, total)
            return
        for j in ready:
            nl = list(left)
            nl[j] -= 1
            go(t + 1, tuple(nl), total + ((t + 1 - a[j]) if nl[j] == 0 else 0))

    go(min(a), tuple(p), 0.0)
    return best / n
