"""Concrete options: the allocations a job may run on, enumerated (:class:`Option` with ``alloc``).

When every job has few GPU subsets (``ConcreteParams.complete_limit``) the enumeration covers every
allocation of the instance up to dominance: it is *complete*, and a model over it is exact. Otherwise it is
a restricted heuristic space (incumbents only): per node and size the job's fastest GPUs, the next fastest
and index-aligned blocks; over several nodes, greedy fills.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass

from jctlab.model import Instance, Job

from .memo import fresh_lists, memoized, recall, remember
from .options import (EPS, Option, capacities, hostable, node_class_demand, options_for_set, rho, undominated)


@dataclass(frozen=True)
class ConcreteParams:
    """How the concrete options are enumerated."""

    complete_limit: int = 64      # every GPU subset when every job has at most this many
    ps_any_nodes: int = 4         # restricted options place PS on any node on clusters of at most this many nodes
                                  # (else on the job's GPU nodes: 126 000 options at 64 GPUs with levels, 18 000)
    setup_share: float = 0.3      # of a time limit, at most, for enumerating the restricted options ...
    cut_sets: int = 2             # ... after which each job still to enumerate gets its fastest sets of each size


def setup_until(t0: float, time_limit: float | None, params: ConcreteParams = ConcreteParams()) -> float | None:
    """When :func:`concrete_options` stops enumerating the full restricted space for a solve that started at
    ``t0`` (a ``time.perf_counter()`` instant)."""
    return None if time_limit is None else t0 + params.setup_share * time_limit


def concrete_options(inst: Instance, params: ConcreteParams = ConcreteParams(),
                     until: float | None = None) -> tuple[list[list[Option]], bool]:
    """Per job, its concrete options; ``complete`` when every GPU subset was enumerated (:func:`_concrete_options`).
    Past ``until`` (``time.perf_counter()``) the restricted space is cut short; such a result is not kept
    for later calls."""
    key = ("concrete", params)
    if not memoized(inst, key):
        opts, complete, cut = _concrete_options(inst, params, until)
        if cut:
            return fresh_lists(opts), complete
        remember(inst, key, (opts, complete))
    opts, complete = recall(inst, key)
    return fresh_lists(opts), complete


def count_subsets(inst: Instance, job: Job) -> int:
    h = len(hostable(inst, job))
    return sum(math.comb(h, n) for n in job.sizes if n <= h)


def enumerable(inst: Instance, params: ConcreteParams = ConcreteParams()) -> bool:
    """Every job has at most ``params.complete_limit`` GPU subsets: :func:`concrete_options` enumerates them all
    (cheap to test; the enumeration of a large instance is not)."""
    return all(count_subsets(inst, j) <= params.complete_limit for j in inst.jobs)


def _concrete_options(inst: Instance, params: ConcreteParams,
                      until: float | None = None) -> tuple[list[list[Option]], bool, bool]:
    """Per job, its concrete options; ``complete`` when every GPU subset was enumerated with every PS placement;
    ``cut`` when ``until`` cut the restricted space short or PS placements were left out
    (:func:`formulations.offline.options.ps_choices`: too many, or past ``until``).

    Complete enumeration (all GPU subsets of every allowed size, every PS multiset over every node,
    every cpu_mem level, minus dominated options with the same demands) happens when every job has
    at most ``params.complete_limit`` GPU subsets. Otherwise a restricted heuristic space: per node and size the
    job's best GPUs, the next best and index-aligned blocks; over several nodes, greedy fills. That space
    takes seconds at 256 GPUs with parameter servers (every set × server placement × level: 172 000 options
    for 60 jobs on 32 nodes, 5.3 s); past ``until`` each job still to enumerate keeps only its ``params.cut_sets``
    fastest sets (largest Σ ρ) of each size, so a short limit is not spent here. Every option is still a
    real allocation, and the space was restricted anyway, so nothing else changes (the infeasibility test
    of :func:`job_infeasible` never reads a restricted space).
    """
    cap = capacities(inst)
    node_names = [nd.name for nd in inst.cluster.nodes]
    complete = enumerable(inst, params)
    cut = truncated = False
    out: list[list[Option]] = []
    for j, job in enumerate(inst.jobs):
        hs = hostable(inst, job)
        sets: set[tuple[str, ...]] = set()
        if complete:
            for n in job.sizes:
                for comb in itertools.combinations([g.id for g in hs], n):
                    sets.add(tuple(comb))
        else:
            sets = _restricted_sets(inst, job, hs)
            if until is not None and time.perf_counter() > until:
                sets, cut = fastest_sets(inst, job, sets, params.cut_sets), True
        opts: list[Option] = []
        for gids in sorted(sets):
            # parameter servers: on any node (complete, or a small cluster), else on the job's GPU nodes,
            # and on any node where those leave no CPUs for them
            pool = node_names if complete or len(node_names) <= params.ps_any_nodes else sorted({g.split(":", 1)[0] for g in gids})
            found = options_for_set(inst, j, gids, pool, cap, until)
            if not found.options and pool is not node_names and job.ps is not None:
                found = options_for_set(inst, j, gids, node_names, cap, until)
            truncated |= not found.complete
            opts += undominated(found.options)
        out.append(opts)
    # PS placements left out (too many, or past the deadline): a restricted space, not the complete one
    return out, complete and not truncated, cut or truncated


def fastest_sets(inst: Instance, job: Job, sets: set[tuple[str, ...]], k: int) -> set[tuple[str, ...]]:
    """The ``k`` sets of each size with the largest sum of the job's per-GPU throughputs."""
    speed = {g.id: rho(job, g) for g in inst.cluster.gpus}
    by_size: dict[int, list] = {}
    for t in sets:
        by_size.setdefault(len(t), []).append(t)
    return {t for ts in by_size.values() for t in sorted(ts, key=lambda t: (-sum(speed[g] for g in t), t))[:k]}


def _restricted_sets(inst: Instance, job: Job, hs: list) -> set[tuple[str, ...]]:
    sets: set[tuple[str, ...]] = set()
    by_node: dict[str, list] = {}
    for g in hs:
        by_node.setdefault(g.node, []).append(g)
    maxn = max((len(v) for v in by_node.values()), default=0)
    for n in job.sizes:
        for node, gl in by_node.items():
            if len(gl) < n:
                continue
            best = sorted(gl, key=lambda g: (-rho(job, g), g.index))
            for k in range(len(gl) // n):
                sets.add(tuple(sorted(g.id for g in best[k * n:(k + 1) * n])))
                byidx = sorted(gl, key=lambda g: g.index)
                sets.add(tuple(sorted(g.id for g in byidx[k * n:(k + 1) * n])))
        if n > maxn and n <= len(hs) and len(by_node) > 1:
            names = sorted(by_node)
            for first in names:
                seq = [first] + [x for x in names if x != first]
                pick: list = []
                for x in seq:
                    pick += sorted(by_node[x], key=lambda g: (-rho(job, g), g.index))
                    if len(pick) >= n:
                        break
                sets.add(tuple(sorted(g.id for g in pick[:n])))
            best = sorted(hs, key=lambda g: (-rho(job, g), g.id))[:n]
            sets.add(tuple(sorted(g.id for g in best)))
    return sets


def job_infeasible(inst: Instance, opts: list[list[Option]], complete: bool) -> int | None:
    """Index of a job that no allocation can host (proven), else None: no size fits its usable GPUs, or
    every size needs more CPUs or memory than the cluster has (each GPU holds at least the smallest
    per-GPU level of its node, a PS job at least one server's CPUs), or (``complete``) no option."""
    cl = inst.cluster
    cpus = sum(nd.cpus for nd in cl.nodes)
    mem = sum(nd.mem_gb for nd in cl.nodes)
    for j, job in enumerate(inst.jobs):
        hs = hostable(inst, job)
        least = [node_class_demand(job, nd, 1) for nd in cl.nodes]      # one GPU on each node
        c_gpu = min(d[("cpu", nd.name)] for d, nd in zip(least, cl.nodes))
        m_gpu = min(d[("mem", nd.name)] for d, nd in zip(least, cl.nodes))
        ps = 0.0 if job.ps is None else job.ps.ps_cpus
        if not any(n <= len(hs) and n * c_gpu + ps <= cpus * (1 + EPS) and n * m_gpu <= mem * (1 + EPS)
                   for n in job.sizes):
            return j
        if complete and not opts[j]:
            return j
    return None
