"""Instance generators of the shipped suites that the core's generators do not cover.

:func:`bursty_instance`: jobs arriving in bursts (several submissions within a minute, then a quiet
spell), so that they queue for a small heterogeneous cluster: the queue-heavy setting where an online
policy's ordering and placement decisions matter most. Built on :func:`jctlab.generators.offline_instance`
(same cluster, throughputs and sizes for the same seed); only the arrivals are redrawn.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from jctlab.generators import offline_instance
from jctlab.model import Instance


def bursty_instance(gpus: int = 6, nodes: int = 2, jobs: int = 12, types: Sequence[str] = ("v100", "p100"),
                    bursts: int = 3, burst_gap_s: float = 3600.0, jitter_s: float = 60.0,
                    duration_h: tuple[float, float] = (0.2, 1.5), max_size: int = 4, elastic: float = 0.5,
                    variability: float = 0.1, locality_penalty: float = 1.3, seed: int = 0,
                    problem: str = "offline", restart_s: float = 30.0, name: str | None = None) -> Instance:
    """``jobs`` jobs in ``bursts`` bursts ``burst_gap_s`` apart (each job within ``jitter_s`` of its burst's
    start), on ``gpus`` GPUs of ``types`` over ``nodes`` nodes; the rest as :func:`offline_instance`."""
    if bursts < 1 or burst_gap_s < 0 or jitter_s < 0:
        raise ValueError("need bursts >= 1, burst_gap_s >= 0, jitter_s >= 0")
    base = offline_instance(gpus=gpus, nodes=nodes, jobs=jobs, types=tuple(types), duration_h=tuple(duration_h),
                            max_size=max_size, elastic=elastic, seed=seed, variability=variability,
                            locality_penalty=locality_penalty, restart_s=restart_s, problem=problem,
                            name=name or f"bursty-{problem}-k{gpus}-n{jobs}-seed{seed}")
    rng = np.random.default_rng([seed, 1])   # a stream of its own: the cluster and jobs stay the base's
    per = np.array_split(np.arange(jobs), bursts)
    d = base.to_dict()
    for b, idx in enumerate(per):
        for j in idx:
            d["jobs"][int(j)]["arrival"] = round(b * burst_gap_s + float(rng.uniform(0.0, jitter_s)), 3)
    d["jobs"].sort(key=lambda j: j["arrival"])
    return Instance.from_dict(d, "<generated bursty>")


#: issue 45's small-queue families (those of the ``queue-small`` suite): 8 jobs on 4 GPUs of two types, 12 on 6
#: of three, 16 on 8 of two
SMALL_QUEUE_FAMILIES = ({"gpus": 4, "nodes": 2, "jobs": 8, "types": ("v100", "p100"), "bursts": 2},
                        {"gpus": 6, "nodes": 3, "jobs": 12, "types": ("v100", "p100", "k80"), "bursts": 3},
                        {"gpus": 8, "nodes": 2, "jobs": 16, "types": ("v100", "p100"), "bursts": 4})


def small_queue_instance(seed: int) -> Instance:
    """The small queue of ``seed``: family ``seed mod 3`` of :data:`SMALL_QUEUE_FAMILIES`."""
    return bursty_instance(seed=seed, **SMALL_QUEUE_FAMILIES[seed % 3])
