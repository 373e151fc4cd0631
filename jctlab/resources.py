"""What an allocation takes from each node besides GPUs (SPEC §4): the one place for this rule.

CPUs: ``cpus_per_gpu`` per GPU (null: the node's fair share, cpus / #GPUs) plus ``ps_cpus`` per
parameter server on the node; memory: ``mem_gb_per_gpu`` per GPU (null: mem_gb / #GPUs).
"""

from __future__ import annotations

import itertools
import time
from typing import Iterable, Mapping, Sequence

from .model import Allocation, Cluster, Job, Node
from .speed import ps_counts

#: parameter-server placements tried per GPU set at most (see :func:`ps_placements`)
MAX_PS_PLACEMENTS = 512


def count_per_node(nodes: Iterable[str]) -> dict[str, int]:
    """node -> how many times ``nodes`` (an allocation's GPUs' nodes, in GPU order) names it, in first-named order."""
    per: dict[str, int] = {}
    for n in nodes:
        per[n] = per.get(n, 0) + 1
    return per


def node_demand(job: Job, alloc: Allocation, cluster: Cluster) -> tuple[dict[str, float], dict[str, float]]:
    """(CPUs per node, GB per node) that ``job`` holds on ``alloc``."""
    gpu = cluster.gpu
    return demand_on(job, alloc, count_per_node(gpu[g].node for g in alloc.gpus), cluster)


def _added(x: float, k: int) -> float:
    """``x`` added ``k`` times to 0.0, one by one: how a node's amount grows GPU by GPU."""
    s = 0.0
    for _ in range(k):
        s += x
    return s


#: fair shares that are multiples of this are summed exactly (any float sum of them below 2**43 is exact)
EXACT_STEP = 1 / 1024


def exact_fair_shares(node: Node) -> bool:
    """Whether every sum of ``node``'s fair shares (CPUs and GB) is exact in binary and all its GPUs' shares
    fit its capacity: then GPUs at the fair share, each held by one job, can never overfill the node."""
    return all((share / EXACT_STEP).is_integer() and share * len(node.gpus) <= total
               for total, share in ((node.cpus, node.fair_cpus), (node.mem_gb, node.fair_mem_gb)))


def fair_shares(cluster: Cluster) -> dict[str, list[tuple[float, float]]]:
    """node -> [(CPUs, GB) that k GPUs at the null level take there, for k = 0..its GPUs]."""
    return {nd.name: [(_added(nd.fair_cpus, k), _added(nd.fair_mem_gb, k)) for k in range(len(nd.gpus) + 1)]
            for nd in cluster.nodes}


def demand_on(job: Job, alloc: Allocation, per_node: Mapping[str, int], cluster: Cluster,
              fair: Mapping[str, list[tuple[float, float]]] | None = None) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`node_demand` given ``per_node``: node -> how many of ``alloc``'s GPUs it holds, nodes in
    the order the GPUs first name them (the engine counts them while it checks the GPUs), and
    optionally the cluster's :func:`fair_shares`. A node's amount is its GPUs' values added one by one,
    in the nodes' order, then ``ps_cpus`` per server."""
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    cpg, mpg = alloc.cpus_per_gpu, alloc.mem_gb_per_gpu
    for n, k in per_node.items():
        if fair is not None and cpg is None and mpg is None and k < len(fair[n]):
            cpu[n], mem[n] = fair[n][k]
        else:
            node = cluster.node[n]
            cpu[n] = _added(node.fair_cpus if cpg is None else cpg, k)
            mem[n] = _added(node.fair_mem_gb if mpg is None else mpg, k)
    if job.ps is not None:
        for n in alloc.ps_nodes:
            cpu[n] = cpu.get(n, 0.0) + job.ps.ps_cpus
    return cpu, mem


def cpus_fit(cluster: Cluster, cpu_used: Mapping[str, float], need: Mapping[str, float]) -> bool:
    """Whether ``need`` (CPUs per node) fits beside ``cpu_used``, at the engine's tolerance."""
    return all(cpu_used.get(n, 0.0) + c <= cluster.node[n].cpus + 1e-9 * max(1.0, cluster.node[n].cpus)
               for n, c in need.items())


def ps_placement(job: Job, gpus: Sequence[str], cluster: Cluster, cpu_used: Mapping[str, float]) -> tuple[str, ...] | None:
    """Where a policy at the fair share puts a PS job's one parameter server: the first node of its GPUs
    with CPU room beside them, else the first other node with room (the job then spans nodes). ``()``
    for a job without PS; None when no node has room now."""
    if job.ps is None:
        return ()
    on = {}
    for g in gpus:
        n = g.split(":", 1)[0]
        on[n] = on.get(n, 0) + 1
    for n in list(on) + [nd.name for nd in cluster.nodes if nd.name not in on]:
        if cpus_fit(cluster, cpu_used, {n: on.get(n, 0) * cluster.node[n].fair_cpus + job.ps.ps_cpus}):
            return (n,)
    return None


def with_cpu_room(cluster: Cluster, free: Mapping[str, Sequence[str]], cpu_used: Mapping[str, float]) -> dict[str, list[str]]:
    """The free GPUs (per node, in the given order) whose fair share of CPUs is still free on their node:
    parameter servers hold CPUs that GPUs at the fair share need."""
    out = {}
    for n, gl in free.items():
        k = int(min(len(gl), gpu_room(cluster, n, cpu_used)))
        if k > 0:
            out[n] = list(gl)[:k]
    return out


def gpu_room(cluster: Cluster, n: str, cpu_used: Mapping[str, float]) -> float:
    """How many more GPUs of node ``n`` the free CPUs there hold at the fair share (inf without CPUs per GPU)."""
    node = cluster.node[n]
    fair = node.fair_cpus
    return float("inf") if fair <= 0 else (node.cpus - cpu_used.get(n, 0.0) + 1e-9) // fair


def ps_placements(job: Job, n: int, gpu_nodes: Sequence[str], pool: Sequence[str],
                  limit: int = MAX_PS_PLACEMENTS, deadline: float | None = None) -> tuple[list[tuple[str, ...]], bool]:
    """(placements, complete): the multisets of nodes of ``pool`` that can host the parameter servers of
    ``job`` on ``n`` workers whose GPUs are on ``gpu_nodes``, for every count of :func:`jctlab.speed.ps_counts`
    (``[()]`` for a job without PS). Compact placements come first (each count on each GPU node alone,
    and round-robin over them), then every multiset by count (none when servers take no CPUs: the compact
    ones dominate them), as sorted tuples; at most ``limit`` of them and none after ``deadline``
    (``time.perf_counter()``): ``complete`` says that none was left out.
    Bounded whatever ``max_ps`` and the node count are (a multiset enumeration grows as C(k + p − 1, p))."""
    if job.ps is None:
        return [()], True
    counts = ps_counts(job, n)
    # the fastest count first, then halving it (few servers, few CPUs), then the others
    key = {counts[-1] >> i for i in range(counts[-1].bit_length())}
    counts = sorted(counts, key=lambda p: (p not in key, -p if p in key else p))
    home = sorted(set(gpu_nodes) & set(pool)) or sorted(pool)[:1]
    out: dict[tuple[str, ...], None] = {}
    for p in counts:
        for v in home:
            out[(v,) * p] = None
        out[tuple(sorted((home * p)[:p]))] = None
        if len(out) > limit:
            return list(out)[:limit], False
    if job.ps.ps_cpus <= 0:   # servers take nothing: spanning no more than the GPUs is all that matters
        return list(out), True
    names = sorted(pool)
    for p in sorted(counts):
        for k, ps in enumerate(itertools.combinations_with_replacement(names, p)):
            if ps in out:
                continue
            if len(out) >= limit or (deadline is not None and k % 64 == 0 and time.perf_counter() > deadline):
                return list(out), False
            out[ps] = None
    return list(out), True
