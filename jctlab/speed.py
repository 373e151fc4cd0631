"""The speed model of SPEC §2: the one place where per-iteration times are computed.

Every solver, policy and the simulator get durations from here; nobody re-derives them.
``base_iteration_time`` is everything but interference; ``interference_factor`` (classes sharing a
node) and ``switch_factor`` (jobs sharing a PCIe switch) are the co-location multipliers, which the
simulator applies piecewise while neighbours come and go. The cross-socket (QPI) factor of an
allocation is part of its base time (:func:`cross_socket_factor`).
"""

from __future__ import annotations

import math
from typing import Iterable

from .model import GPU, Allocation, Cluster, Job


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


def ps_counts(job: Job, n: int) -> range:
    """The parameter-server counts worth trying for ``job`` on ``n`` workers: 1..p*, p* the smallest integer
    minimiser over [1, max_ps] of :func:`ps_overhead_s` (empty for a job without PS).

    Exact for every search: the overhead t1 + t2·n/p + t3·n + t4·p is convex in p, so p* is found among
    the integers next to sqrt(t2·n/t4) (max_ps when t4 = 0 < t2, 1 when t2 = 0). An allocation with
    p > p* servers is dominated by the one that keeps p* of them: no slower (the overhead at p* is no
    larger; the job spans no more nodes, so no locality penalty or interference it did not have), and no
    more CPUs on any node; a schedule stays feasible and no worse when it uses the latter instead. When a
    server takes no CPUs (``ps_cpus`` = 0) fewer servers save nothing either: only p* is worth trying."""
    if job.ps is None:
        return range(0)
    t1, t2, t3, t4 = job.ps.theta
    top = job.ps.max_ps
    if t4 <= 0:
        best = top if t2 > 0 else 1
    else:
        x = math.sqrt(t2 * n / t4)
        near = {min(top, max(1, math.floor(x))), min(top, max(1, math.ceil(x)))}
        best = min(near, key=lambda p: (ps_overhead_s(job.ps.theta, n, p), p))  # type: ignore[union-attr]
    return range(best, best + 1) if job.ps.ps_cpus <= 0 else range(1, best + 1)


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


def spans_sockets(gpus: Iterable[GPU]) -> bool:
    """Whether some node holds GPUs of the set on two or more CPU sockets (GPUs without a socket
    count as no socket)."""
    first: dict[str, int] = {}
    for g in gpus:
        if g.socket is not None and first.setdefault(g.node, g.socket) != g.socket:
            return True
    return False


def cross_socket_factor(gpus: Iterable[GPU], cluster: Cluster) -> float:
    """SPEC §2 (v1.1): ``qpi_factor`` when the GPUs span sockets of a node, else 1."""
    if cluster.qpi_factor == 1.0:
        return 1.0
    return cluster.qpi_factor if spans_sockets(gpus) else 1.0


def alloc_switches(alloc: Allocation, cluster: Cluster) -> frozenset[tuple[str, int]]:
    """The (node, switch) PCIe switches that hold GPUs of the allocation."""
    return frozenset((g.node, g.switch) for g in (cluster.gpu[i] for i in alloc.gpus) if g.switch is not None)


def step_time(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """compute + comm (with the locality penalty and the cross-socket factor where they apply) for one
    iteration, no speedup."""
    gpus = [cluster.gpu[g] for g in alloc.gpus]
    return _step_time(job, alloc, cluster, gpus) * cross_socket_factor(gpus, cluster)


def _step_time(job: Job, alloc: Allocation, cluster: Cluster, gpus: list[GPU]) -> float:
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


def switch_factor(cluster: Cluster, switch_neighbours: int) -> float:
    """SPEC §2 (v1.1): 1 + pcie_interference per other running job sharing a PCIe switch."""
    return 1.0 + cluster.pcie_interference * switch_neighbours


def iteration_time(job: Job, alloc: Allocation, cluster: Cluster,
                   neighbour_classes: Iterable[str | None] = (), switch_neighbours: int = 0) -> float:
    """Per-iteration time beside running neighbours: the classes of those sharing a node, and how many
    share a PCIe switch with the job."""
    return (base_iteration_time(job, alloc, cluster) * interference_factor(job, neighbour_classes, cluster)
            * switch_factor(cluster, switch_neighbours))


def duration(job: Job, alloc: Allocation, cluster: Cluster) -> float:
    """Run time of the whole job on ``alloc`` when nothing about it changes (no interference)."""
    return job.iterations * base_iteration_time(job, alloc, cluster)


class BaseTimes:
    """:func:`base_iteration_time` of one instance's jobs, memoised by everything it reads.

    The engine prices an allocation at every start; non-sticky policies start hundreds of thousands of
    segments on allocations that are new as id tuples but alike in all that the speed model reads. The
    key of ``(j, alloc)`` is (j, the GPUs' *profiles* in allocation order, the number of nodes the
    allocation touches, whether it spans CPU sockets (only read when ``qpi_factor`` != 1), the number of
    parameter servers, the CPU/memory level), where a GPU's profile is its (type, variability). Proof
    that equal keys give the same float: :func:`_step_time` reads of each GPU only its type and
    ``factor(class)`` (in allocation order: ``sum(rho)`` keeps it), of the allocation the node count
    ``k`` (GPU and PS nodes) and ``len(ps_nodes)``; :func:`cross_socket_factor` reads only whether the
    GPUs span sockets; :func:`cpu_mem_speedup` only the level. On a cluster of one GPU profile without a
    socket factor, a fair-share allocation without servers is keyed by (j, #GPUs, nodes) alone: the other
    parts are constant there (the key of every replayed segment of a trace run). Allocations the model
    refuses (:class:`SpeedError`) are not memoised: they raise on every call.
    """

    def __init__(self, jobs: tuple[Job, ...], cluster: Cluster):
        self.jobs = jobs
        self.cluster = cluster
        kinds: dict[tuple, int] = {}
        self.profile = {g.id: kinds.setdefault((g.type, tuple(sorted(g.variability.items()))), len(kinds))
                        for g in cluster.gpus}
        self.uniform = len(kinds) <= 1     # then the profiles in order are just their number
        self.qpi = cluster.qpi_factor != 1.0
        self.simple = self.uniform and not self.qpi   # one GPU profile, no socket factor: keys by size and nodes
        self._memo: dict[tuple, float] = {}

    def get(self, j: int, alloc: Allocation, nodes: int) -> float:
        """``base_iteration_time(jobs[j], alloc, cluster)``; ``nodes``: how many nodes ``alloc`` touches."""
        gpus = alloc.gpus
        if self.simple and not alloc.ps_nodes and alloc.cpus_per_gpu is None and alloc.mem_gb_per_gpu is None:
            key: tuple = (j, len(gpus), nodes)     # all the model reads of a fair-share allocation here
        else:
            prof = len(gpus) if self.uniform else tuple(map(self.profile.__getitem__, gpus))
            spans = spans_sockets(self.cluster.gpu[g] for g in gpus) if self.qpi else None
            key = (j, prof, nodes, spans, len(alloc.ps_nodes), alloc.cpus_per_gpu, alloc.mem_gb_per_gpu)
        t = self._memo.get(key)
        if t is None:
            t = self._memo[key] = base_iteration_time(self.jobs[j], alloc, self.cluster)
        return t
