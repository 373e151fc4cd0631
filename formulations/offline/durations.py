"""Lower bounds on a job's duration over a family of allocations (SPEC §2 with every free choice optimistic).

The relaxed classes of :mod:`formulations.offline.classes`, the preemptive LP and the rate bands price a
family of allocations by the shortest duration any member can have: the fastest GPUs of the family (the
largest rates for the proportional split, the largest minimum for the equal split), the smallest
communication time, no locality penalty on one node, the largest CPU/memory speedup, no interference.
Each bound is the minimum over the formula and every measured table that can apply, so it is at most the
duration of every member (proofs in the docstrings).
"""

from __future__ import annotations

import math

from jctlab.model import Instance, Job
from jctlab.speed import allreduce_s, ps_counts, ps_overhead_s

from .options import hostable, level_speedup, max_speedup, rho


def compute_lb(job: Job, rhos: list[float], split: str) -> float:
    if any(math.isinf(r) for r in rhos):
        return 0.0
    if split == "proportional":
        return job.batch / sum(rhos)
    return job.batch / (len(rhos) * min(rhos))


def comm_lb(job: Job, n: int, gbps: float, ps: int | None = None) -> float:
    if job.ps is not None:
        return min(ps_overhead_s(job.ps.theta, n, p) for p in ([ps] if ps else ps_counts(job, n)))
    return allreduce_s(job.comm_mb, n, gbps)


def single_node_lb(inst: Instance, job: Job, node: str, n: int, ps: int | None = None,
                   level: tuple | None = None) -> float | None:
    """Lower bound on the duration of every allocation of ``n`` GPUs all on ``node`` (any PS
    placement and cpu_mem level; ``ps``: with exactly that many parameter servers; ``level``: at that
    CPU/memory level); None when the node has fewer than n GPUs that can host the job.

    Formula part: the n fastest GPUs of the node maximise Σρ (proportional) and n·min ρ (equal);
    comm is the intra-node all-reduce (k = 1 without PS) or the smallest PS overhead over p; the
    locality penalty is ≥ 1 and dropped. Measured part: a single-type set uses
    worst-factor / measured[t][n] and the smallest possible worst factor is the n-th smallest factor.
    The duration of any set is one of these expressions, so their minimum is a lower bound; dividing
    by the largest cpu_mem speedup covers every level (by the level's own speedup: that level).
    """
    cl = inst.cluster
    gl = [g for g in cl.node[node].gpus if job.can_use(g.type)]
    if len(gl) < n:
        return None
    rh = sorted((rho(job, g) for g in gl), reverse=True)[:n]
    cand = [compute_lb(job, rh, cl.split) + comm_lb(job, n, cl.intra_node_gbps, ps)]
    if job.ps is None:
        for t, tab in job.measured.items():
            if "/" in t or n not in tab:
                continue
            fs = sorted(g.factor(job.job_class) for g in gl if g.type == t)
            if len(fs) >= n:
                cand.append(fs[n - 1] / tab[n])
    return job.iterations * min(cand) / (max_speedup(job) if level is None else level_speedup(job, level))


def spread_lb(inst: Instance, job: Job, n: int) -> float | None:
    """Lower bound on the duration of every allocation of ``n`` GPUs over two or more nodes."""
    cl = inst.cluster
    hs = hostable(inst, job)
    if n < 2 or len(hs) < n or len({g.node for g in hs}) < 2:
        return None
    rh = sorted((rho(job, g) for g in hs), reverse=True)[:n]
    return spread_duration_lb(job, cl, n, rh, hs)


def spread_duration_lb(job: Job, cl, n: int, rh: list, hs: list) -> float:
    """Duration lower bound of a spread allocation of ``n`` GPUs whose rates, matched one to one with
    ``rh``, are each at most their match, and whose GPUs lie in ``hs``: the model formula with inter-node
    communication and the locality penalty, or a measured single-type table (``t/spread``, else the
    one-node table times the penalty) at the n-th smallest factor of type t in ``hs``; the smaller
    candidate, divided by the largest cpu_mem speedup."""
    pen = cl.locality_penalty
    cand = [(compute_lb(job, rh, cl.split) + comm_lb(job, n, cl.inter_node_gbps)) * pen]
    if job.ps is None:
        for t in {g.type for g in hs}:
            fs = sorted(g.factor(job.job_class) for g in hs if g.type == t)
            if len(fs) < n:
                continue
            sp = job.measured.get(f"{t}/spread", {})
            if n in sp:
                cand.append(fs[n - 1] / sp[n])
            elif n in job.measured.get(t, {}):
                cand.append(fs[n - 1] / job.measured[t][n] * pen)
    return job.iterations * min(cand) / max_speedup(job)
