"""What an allocation takes from each node besides GPUs (SPEC §4): the one place for this rule.

CPUs: ``cpus_per_gpu`` per GPU (null: the node's fair share, cpus / #GPUs) plus ``ps_cpus`` per
parameter server on the node; memory: ``mem_gb_per_gpu`` per GPU (null: mem_gb / #GPUs).
"""

from __future__ import annotations

from .model import Allocation, Cluster, Job


def node_demand(job: Job, alloc: Allocation, cluster: Cluster) -> tuple[dict[str, float], dict[str, float]]:
    """(CPUs per node, GB per node) that ``job`` holds on ``alloc``."""
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    for g in alloc.gpus:
        n = g.split(":", 1)[0]
        node = cluster.node[n]
        cpu[n] = cpu.get(n, 0.0) + (node.fair_cpus if alloc.cpus_per_gpu is None else alloc.cpus_per_gpu)
        mem[n] = mem.get(n, 0.0) + (node.fair_mem_gb if alloc.mem_gb_per_gpu is None else alloc.mem_gb_per_gpu)
    if job.ps is not None:
        for n in alloc.ps_nodes:
            cpu[n] = cpu.get(n, 0.0) + job.ps.ps_cpus
    return cpu, mem
