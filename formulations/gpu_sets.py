"""A job's fastest GPU sets (the allocations the greedy heuristics, static and offline, start from), and the
allocations over given GPU sets with their durations."""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from jctlab.model import Allocation, Cluster, Instance, Job
from jctlab.speed import SpeedError, duration


def fastest_gpu_sets(inst: Instance, job, gpu_ids: Sequence[str]) -> list[tuple[str, ...]]:
    """For each allowed size: the job's fastest GPUs of each node that has enough, and the fastest
    GPUs of the whole set (rate = samples/s over the GPU's variability factor for the job's class)."""
    gpu = inst.cluster.gpu
    rate = {g: job.samples_per_s.get(gpu[g].type, 0.0) / max(gpu[g].factor(job.job_class), 1e-12) for g in gpu_ids}
    fast = sorted((g for g in gpu_ids if rate[g] > 0), key=lambda g: (-rate[g], g))
    by_node: dict[str, list[str]] = {}
    for g in fast:
        by_node.setdefault(gpu[g].node, []).append(g)
    sets = []
    for n in job.sizes:
        sets.extend(tuple(ids[:n]) for ids in by_node.values() if len(ids) >= n)
        if len(fast) >= n:
            sets.append(tuple(fast[:n]))
    return sets


def timed_allocations(job: Job, cluster: Cluster, gpu_sets: Iterable[tuple[str, ...]],
                      ps_sets: Callable[[tuple[str, ...]], Sequence[tuple[str, ...]]]) -> list[tuple[float, Allocation]]:
    """Each GPU set × CPU/memory level × PS placement (``ps_sets`` of the GPU set), in that order, with its
    duration without interference; those the speed model rejects are left out."""
    out = []
    for gs in gpu_sets:
        ps_opts = ps_sets(gs)
        for c, m in job.level_choices:
            for ps in ps_opts:
                a = Allocation(gs, ps, c, m)
                try:
                    out.append((duration(job, a, cluster), a))
                except SpeedError:
                    pass
    return out
