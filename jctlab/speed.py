"""The speed model of SPEC §2: the one place where per-iteration times are computed.

Every solver, policy and the simulator get durations from here; nobody re-derives them.
``base_iteration_time`` is everything but interference; ``interference_factor`` is the co-location
multiplier, which the simulator applies piecewise while neighbours come and go.
"""

from __future__ import annotations

from typing import Iterable

from .model import Allocation, Cluster, Job


class SpeedError(ValueError):
    """An allocation that the speed model cannot price (unknown level, PS job without a PS...)."""


def alloc_nodes(alloc: Allocation) -> frozenset[str]:
    """Nodes a job touches: those of its GPUs and of its parameter servers."""
    return frozenset(g.split(":", 1)[0] for g in alloc.gpus) | frozenset(alloc.ps_nodes)


def allreduce_s(comm_mb: float, n: int, gbps: float) -> float:
    """Ring all-reduce time of one iteration: 2(n-1)/n * size / bandwidth."""
    if n <= 1 or comm_mb <= 0:
        return 0.0
    return 2.0 * (n - 1) / n * comm_mb * 8.0 / 1000.0 / gbps


def ps_overhead_s(theta: tuple[float, float, float, float], n: int, p: int) -> float:
    """Optimus' parameter-server overhead terms: t1 + t2*n/p + t3*n + t4*p."""
    t1, t2, t3, t4 = theta
    return t1 + t2 * n / p + t3 * n + t4 * p


def cpu_mem_speedup(job: Job, alloc: Allocation) -> float:
    if alloc.cpus_per_gpu is None and alloc.mem_gb_per_gpu is None:
        return 1.0
    if job.cpu_mem is None:
        # without a sensitivity table a job's CPU/memory is the fair share (null): a level it picks
        # from no table would let it claim no CPU at no cost
        raise SpeedError(f"job {job.name} has no cpu_mem table: its cpus_per_gpu/mem_gb_per_gpu must be null")
    if alloc.cpus_per_gpu is None or alloc.mem_gb_per_gpu is None:
        raise SpeedError("cpus_per_gpu and mem_gb_per_gpu pick a cpu_mem level together: set both or neither")
    s = job.cpu_mem.speedup(alloc.cpus_per_gpu, alloc.mem_gb_per_gpu)
    if s is None:
        raise SpeedError(
            f"({alloc.cpus_per_gpu:g} cpus, {alloc.mem_gb_per_gpu:g} GB) per GPU is not a cpu_mem level of job {job.name}"
        )
    return s


def step_time(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """compute + comm (with the locality penalty where it applies) for one iteration, no speedup."""
    gpus = [cluster.gpu[g] for g in alloc.gpus]
    n = len(gpus)
    if n == 0:
        raise SpeedError(f"job {job.name} holds no GPU")
    k = len(alloc_nodes(alloc))
    cls = job.job_class
    types = {g.type for g in gpus}
    if job.ps is None and len(types) == 1:
        t = next(iter(types))
        worst = max(g.factor(cls) for g in gpus)
        if k == 1 and n in job.measured.get(t, {}):
            return worst / job.measured[t][n]
        if k > 1 and n in job.measured.get(f"{t}/spread", {}):
            return worst / job.measured[f"{t}/spread"][n]
        if k > 1 and n in job.measured.get(t, {}):
            return worst / job.measured[t][n] * cluster.locality_penalty
    rho = []
    for g in gpus:
        rate = job.samples_per_s.get(g.type, 0.0)
        if rate <= 0:
            raise SpeedError(f"GPU {g.id} of type {g.type} cannot host job {job.name}")
        f = g.factor(cls)
        rho.append(float("inf") if f == 0 else rate / f)
    if cluster.split == "proportional":
        compute = job.batch / sum(rho)
    else:
        compute = job.batch / (n * min(rho))
    if job.ps is not None:
        p = len(alloc.ps_nodes)
        if p < 1 or p > job.ps.max_ps:
            raise SpeedError(f"job {job.name} needs between 1 and {job.ps.max_ps} parameter servers, got {p}")
        comm = ps_overhead_s(job.ps.theta, n, p)
    else:
        comm = allreduce_s(job.comm_mb, n, cluster.intra_node_gbps if k == 1 else cluster.inter_node_gbps)
    return (compute + comm) * (cluster.locality_penalty if k > 1 else 1.0)


def base_iteration_time(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """Per-iteration time without interference (SPEC §2)."""
    return step_time(job, alloc, cluster) / cpu_mem_speedup(job, alloc)


def interference_factor(job: Job, neighbour_classes: Iterable[str | None], cluster: Cluster) -> float:
    """1 + sum of interference[class_j][class_i] over running neighbours sharing a node."""
    return 1.0 + sum(cluster.interference_of(job.job_class, c) for c in neighbour_classes)


def iteration_time(job: Job, alloc: Allocation, cluster: Cluster,
                   neighbour_classes: Iterable[str | None] = ()) -> float:
    return base_iteration_time(job, alloc, cluster) * interference_factor(job, neighbour_classes, cluster)


def duration(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """Run time of the whole job on ``alloc`` when nothing about it changes (no interference)."""
    return job.iterations * base_iteration_time(job, alloc, cluster)
