"""Proportional training-workload assignment (the load-balanced split of heterogeneity-aware placement).

With ``split = proportional`` a job's global batch is divided across its workers in proportion to each
worker's speed ρ_g = samples_per_s[type_g] / variability_g[class], so every worker finishes its share
at the same time and the compute part of an iteration is ``batch / Σ ρ_g`` (SPEC §2). This module
exposes that split (per-GPU sample shares) and the fluid *proportional shares* of the cluster's GPU
types that importance sampling centres on. Durations themselves always come from :mod:`jctlab.speed`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from jctlab.model import Allocation, Cluster, Instance, Job


def worker_speeds(job: Job, gpus: Sequence[str], cluster: Cluster) -> list[float]:
    """ρ_g of every GPU in ``gpus`` for ``job`` (samples/s; inf when the variability factor is 0)."""
    out = []
    for gid in gpus:
        g = cluster.gpu[gid]
        rate = job.samples_per_s.get(g.type, 0.0)
        if rate <= 0:
            raise ValueError(f"GPU {gid} of type {g.type} cannot host job {job.name}")
        f = g.factor(job.job_class)
        out.append(math.inf if f == 0 else rate / f)
    return out


def batch_shares(job: Job, alloc: Allocation, cluster: Cluster) -> dict[str, float]:
    """Samples of the global batch that each GPU processes per iteration (they sum to ``job.batch``).

    Proportional to ρ_g under ``split = proportional``; equal shares under ``split = equal``.
    """
    rho = worker_speeds(job, alloc.gpus, cluster)
    if cluster.split == "equal":
        return {g: job.batch / len(alloc.gpus) for g in alloc.gpus}
    if any(math.isinf(r) for r in rho):
        k = sum(1 for r in rho if math.isinf(r))
        return {g: (job.batch / k if math.isinf(r) else 0.0) for g, r in zip(alloc.gpus, rho)}
    s = sum(rho)
    return {g: job.batch * r / s for g, r in zip(alloc.gpus, rho)}


def share_compute_time(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """Compute time of one iteration implied by the shares: max over workers of share / ρ_g."""
    sh = batch_shares(job, alloc, cluster)
    rho = worker_speeds(job, alloc.gpus, cluster)
    return max((sh[g] / r if r > 0 and not math.isinf(r) else 0.0) for g, r in zip(alloc.gpus, rho))


def proportional_type_shares(inst: Instance, jobs: Sequence[int] | None = None,
                             types: Sequence[str] | None = None,
                             capacity: Sequence[int] | None = None) -> np.ndarray:
    """Fluid share x[j, t] of GPU type t given to job j: each type's capacity split over the jobs in
    proportion to the job's *relative* speed on it (ρ_jt / Σ_u ρ_ju, comparative advantage).

    Rows sum to about the job's fair share of the cluster; used as the centre of importance sampling.
    """
    cl = inst.cluster
    types = list(types if types is not None else cl.gpu_types)
    jobs = list(range(len(inst.jobs))) if jobs is None else list(jobs)
    if capacity is None:
        capacity = [sum(1 for g in cl.gpus if g.type == t) for t in types]
    w = np.zeros((len(jobs), len(types)))
    for a, j in enumerate(jobs):
        job = inst.jobs[j]
        r = np.array([job.samples_per_s.get(t, 0.0) for t in types])
        if r.sum() > 0:
            w[a] = r / r.sum()
    col = w.sum(axis=0)
    col[col == 0] = 1.0
    return w / col * np.asarray(capacity, dtype=float)
