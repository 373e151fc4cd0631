"""PAL and PM-First as PAL's SC'24 artifact runs them (hal-uw/blox-pal, branch ``artifact``), and the
harness that reproduces its 64-GPU Sia-Philly experiment.

The policies themselves are ``fifo+pal`` / ``fifo+pm-first`` (:mod:`baselines.placement`,
:mod:`baselines.rounds`); their ingredients, as the artifact has them:

- classes: A = ResNet-50, B and C = BERT, D = PageRank profiles; model -> class resnet50 -> A,
  vgg19 -> C, PointNet -> D, GPT2/DCGAN/BERT -> B (:data:`jctlab.loaders.pal.MODEL_CLASS`).
- per class, per-GPU values binned by k-means (outliers above mean + 3σ get their own bin), slowdown
  factor = bin centre / median centre (:class:`baselines.placement.Bins`).
- every round (360 s): the FIFO prefix that fits in the cluster, stable-sorted by class A..D, placed
  in that order on a cleared cluster (non-sticky), stopping at the first job that does not fit.
- the simulator charges iterations × base time × the largest raw factor of the job's GPUs × λ when
  it spans nodes: SPEC §5's ``split = equal``, ``comm_mb = 0``, ``locality_penalty = λ``, which the
  loader :func:`jctlab.loaders.pal.load_pal` builds.

:func:`run` simulates one (workload, policy) and scores it the artifact's way: tracked jobs only
(the artifact's background copies compete but do not count), JCT = end of the round in which the
job finished − its submit time, rounds on the grid 0, R, 2R... (the artifact's clock starts at 0, as jctlab's simulator's does).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from jctlab.model import Instance, Job
from jctlab.simulate import simulate

from .families import build

#: artifact policy name -> jctlab policy name
ARTIFACT_POLICIES = {
    "Default-Packed-S": "fifo+packed-sticky",
    "Default-Packed-NS": "fifo+packed-nonsticky",
    "PM-First": "fifo+pm-first",
    "PAL": "fifo+pal",
    "Random-S": "fifo+random-sticky",
    "Random-NS": "fifo+random-nonsticky",
}

#: The artifact's mean JCT (s) of the 160 tracked jobs, A1 setting (artifact_inputs/README.md).
ARTIFACT_MEAN_JCT = {
    1: {"Default-Packed-S": 30244, "Default-Packed-NS": 30035, "PM-First": 25467, "PAL": 25321,
        "Random-S": 30631, "Random-NS": 32816},
    2: {"Default-Packed-S": 583340, "Default-Packed-NS": 365774, "PM-First": 274211, "PAL": 263712},
    3: {"Default-Packed-S": 214576, "Default-Packed-NS": 234043, "PM-First": 111522, "PAL": 106396},
    4: {"Default-Packed-S": 19536, "Default-Packed-NS": 18528, "PM-First": 20611, "PAL": 17324},
    6: {"Default-Packed-S": 322911, "Default-Packed-NS": 321869, "PM-First": 161743, "PAL": 161602},
}



def tracked(job: Job) -> bool:
    return bool(job.extra.get("tracked", True))


@dataclass
class PalRun:
    policy: str
    mean_jct: float          # artifact rule: tracked jobs, round-end completion
    mean_jct_exact: float    # tracked jobs, exact completion time
    makespan: float          # last tracked round-end completion − first tracked arrival
    utilization: float       # GPU-seconds held (all jobs) in that window / (GPUs × window)
    preemptions: int
    runtime_s: float
    jct: dict[str, float]


def score(inst: Instance, sched, completion: list[float], round_s: float) -> dict[str, Any]:
    jobs = inst.jobs
    idx = [i for i, j in enumerate(jobs) if tracked(j)]
    if not idx:
        raise ValueError("no tracked job")
    tol = 1e-9 * round_s
    end = {i: math.ceil((completion[i] - tol) / round_s) * round_s for i in idx}
    jct = {jobs[i].name: end[i] - jobs[i].arrival for i in idx}
    exact = [completion[i] - jobs[i].arrival for i in idx]
    t0 = min(jobs[i].arrival for i in idx)
    t1 = max(end.values())
    busy = 0.0
    pre = 0
    for s in sched.segments:
        e = s.end if s.end is not None else completion[inst.index[s.job]]
        a, b = max(s.start, t0), min(e, t1)
        if b > a:
            busy += (b - a) * len(s.alloc.gpus)
        if s.end is not None:
            pre += 1
    span = t1 - t0
    return {"mean_jct": sum(jct.values()) / len(jct), "mean_jct_exact": sum(exact) / len(exact),
            "makespan": span, "utilization": busy / (len(inst.cluster.gpus) * span) if span > 0 else 0.0,
            "preemptions": pre, "jct": jct}


def run(inst: Instance, policy: str, seed: int = 0, round_s: float = 360.0, lam: float | None = None,
        locality: str = "sf-node") -> PalRun:
    """Simulate ``policy`` (``QUEUE+PLACEMENT``) on a PAL instance and score it as the artifact does."""
    queue, place = policy.split("+", 1)
    t = time.perf_counter()
    pol = build(queue, place, inst, seed=seed, round_s=round_s, lam=lam, locality=locality)
    sched, rep = simulate(inst, pol, round_s=round_s if inst.problem == "preemptive" else None, method=policy)
    sc = score(inst, sched, [rep.completion[j.name] for j in inst.jobs], round_s)
    return PalRun(policy, sc["mean_jct"], sc["mean_jct_exact"], sc["makespan"], sc["utilization"],
                  sc["preemptions"], time.perf_counter() - t, sc["jct"])


def geomean(xs) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


__all__ = ["ARTIFACT_POLICIES", "ARTIFACT_MEAN_JCT", "run", "score", "tracked", "geomean", "PalRun"]
