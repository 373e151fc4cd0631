"""Relaxed option sets of the offline oracles: class options, node-exact options and their hybrids.

* :func:`class_options` — "n GPUs on node v" (per CPU/memory level and parameter-server side where those
  can bind) and "n GPUs spread" (one option per group pattern, :func:`spread_pattern_options`), each with a
  duration that bounds every member from below (:mod:`formulations.offline.durations`) and the GPU counts
  every member holds. A model over them with per-node, per-group and cluster GPU-count cumulatives is a
  relaxation of the offline class: its proven bound is valid whatever the size of the instance.
* :func:`node_complete_options` — every single-node allocation as a concrete option, spread ones relaxed:
  exact for schedules without spread jobs.
* :func:`hybrid_node_options` — node-exact on chosen (job, node) pairs, classes elsewhere (lazy
  variability), still a relaxation.
* :func:`p_min`, :func:`trivial_bound` — the per-job bound C_j ≥ a_j + p_min_j.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from jctlab.model import Instance, Job
from jctlab.speed import ps_counts

from .durations import single_node_lb, spread_duration_lb, spread_lb
from .memo import fresh_lists, memo
from .options import (EPS, Option, capacities, fits_alone, hostable, level_speedup, node_class_demand,
                      node_groups, options_for_set, per_gpu, ps_choices, rho, single_node, undominated)


def class_levels(inst: Instance, job: Job, nd) -> list[tuple | None]:
    """The CPU/memory levels a node class of ``job`` on ``nd`` is split by: [None] (one class, fastest level,
    least CPUs/memory) when the job has no ``cpu_mem`` table, or when neither the levels' CPUs/memory on all
    of the node's GPUs nor any parameter server can overload the node (the split would change nothing); else
    the job's undominated levels on this node (a level no faster than another that holds no less CPU and
    memory is dropped; the fair share and a level equal to it count once)."""
    if job.cpu_mem is None:
        return [None]
    per = [(lv, level_speedup(job, lv), *per_gpu(nd, lv)) for lv in job.level_choices]
    k = len(nd.gpus)
    if (not any(jb.ps is not None for jb in inst.jobs) and k * max(c for *_, c, _ in per) <= nd.cpus * (1 + EPS)
            and k * max(m for *_, m in per) <= nd.mem_gb * (1 + EPS)):
        return [None]
    keep = []
    for i, (lv, s, c, m) in enumerate(per):
        if not any((s2, -c2, -m2, -i2) > (s, -c, -m, -i) and s2 >= s and c2 <= c and m2 <= m
                   for i2, (_, s2, c2, m2) in enumerate(per) if i2 != i):
            keep.append(lv)
    return keep


PATTERN_LIMIT = 64      # most patterns per job and size; beyond it the single ("spread", n) class


def spread_pattern_options(inst: Instance, j: int, n: int) -> list[Option] | None:
    """Relaxed spread options for ``n`` GPUs over ≥ 2 nodes, one per *group pattern*: c_g GPUs in each
    node group g (:func:`node_groups`), Σ c_g = n. None when there are more than ``PATTERN_LIMIT``.

    Feasible patterns: c_g ≤ Σ_{v∈g} min(n − 1, h_v) (a spread allocation holds ≤ n − 1 GPUs of a node,
    h_v = GPUs of v the job can use), and not all n GPUs in a group of one node (that is a single-node
    allocation). Every spread allocation A has exactly one pattern (its counts per group), and that
    option is no longer and holds no more than A:

    * duration: :func:`spread_lb`'s candidates with the n rates replaced by the top c_g rates of each
      group g (A's rates in g are c_g rates of g's GPUs, so Σρ(A) ≤ Σ of the top ones and
      min ρ(A) ≤ min_g (c_g-th best of g): both formula variants are lower bounds), inter-node comm,
      locality penalty; the measured candidate per type t uses the GPUs of type t of the used groups
      (as in :func:`spread_lb`, a superset of A's); divided by the largest cpu_mem speedup.
    * demands: n on the cluster; c_g on node v when g = {v}, else c_g on the group cumulative
      ``("set", g)`` (capacity: the GPUs of g) and on each node v of g the proven minimum
      c_g − Σ_{w∈g∖v} min(n − 1, h_w) when positive.

    So a model with these options instead of the single ``("spread", n)`` class is still a relaxation
    of the offline class (the mapping of :func:`hybrid_node_options` with the pattern instead of the class),
    and tighter: a spread job can no longer use the count of fast GPUs it does not hold.
    """
    cl = inst.cluster
    job = inst.jobs[j]
    groups = node_groups(inst)
    h = {nd.name: sum(1 for g in nd.gpus if job.can_use(g.type)) for nd in cl.nodes}
    capg = [sum(min(n - 1, h[v]) for v in g) for g in groups]
    pats: list = []

    def rec(i, left, cur):
        if len(pats) > PATTERN_LIMIT:
            return
        if i == len(groups):
            if left == 0:
                used = [k for k, c in enumerate(cur) if c]
                if not (len(used) == 1 and len(groups[used[0]]) == 1):
                    pats.append(tuple(cur))
            return
        for c in range(min(left, capg[i]) + 1):
            rec(i + 1, left - c, cur + [c])

    rec(0, n, [])
    if len(pats) > PATTERN_LIMIT:
        return None
    out = []
    for pat in pats:
        used = [k for k, c in enumerate(pat) if c]
        nodes = {v for k in used for v in groups[k]}
        hs = [g for g in hostable(inst, job) if g.node in nodes]
        rh: list = []
        for k in used:
            rg = sorted((rho(job, g) for g in hs if g.node in groups[k]), reverse=True)
            rh += rg[:pat[k]]
        d = spread_duration_lb(job, cl, n, rh, hs)
        dem: dict = {("all",): n}
        for k in used:
            g, c = groups[k], pat[k]
            if len(g) == 1:
                dem[("n", g[0])] = c
                continue
            dem[("set", g)] = c
            for v in g:
                lo = c - sum(min(n - 1, h[w]) for w in g if w != v)
                if lo > 0:
                    dem[("n", v)] = lo
        out.append(Option(j, d, dem, cls=("spread", n, tuple(sorted(nodes)),
                                          tuple((groups[k], pat[k]) for k in used))))
    return out


def spread_options(inst: Instance, j: int, n: int) -> list[Option]:
    """Relaxed options for ``n`` GPUs over ≥ 2 nodes: one per group pattern
    (:func:`spread_pattern_options`), or, where there are more than ``PATTERN_LIMIT`` of those, the single
    class ``("spread", n)`` holding ``n`` cluster GPUs with the duration :func:`spread_lb` (every spread
    allocation maps onto it with no larger duration or demand)."""
    pats = spread_pattern_options(inst, j, n)
    if pats is not None:
        return pats
    d = spread_lb(inst, inst.jobs[j], n)
    return [] if d is None else [Option(j, d, {("all",): n}, cls=("spread", n))]


def class_options(inst: Instance, levels: bool = False) -> list[list[Option]]:
    """Relaxed classes per job with lower-bound durations and GPU-count demands. ``levels``: a node class
    where the node's CPUs or memory can bind has one option per undominated CPU/memory level
    (:func:`class_levels`), with that level's speed and CPUs/memory; else one option with the fastest
    level that fits the node and the least CPUs/memory of those (a coarser relaxation, CP-SAT proves it
    faster)."""
    return fresh_lists(memo(inst, ("classes", levels), lambda: _class_options(inst, levels)))


def _merge_levels(opts: list[Option]) -> list[Option]:
    """One option per class variant (PS side and count) of per-level options: the shortest duration,
    the least of every demand, no level."""
    by: dict = {}
    for o in opts:
        by.setdefault((o.cls, o.ps_local, o.ps_count), []).append(o)
    out = []
    for os_ in by.values():
        dem = {r: min(o.demand[r] for o in os_) for r in os_[0].demand}
        out.append(dataclasses.replace(os_[0], dur=min(o.dur for o in os_), demand=dem, level=None))
    return out


def _class_options(inst: Instance, levels: bool) -> list[list[Option]]:
    cap = capacities(inst)
    pen = inst.cluster.locality_penalty
    out = []
    for j, job in enumerate(inst.jobs):
        opts = []
        for n in job.sizes:
            for nd in inst.cluster.nodes:
                # one class per CPU/memory level where the node's CPUs or memory can bind (that level's speed
                # and CPUs/memory), else one with the fastest level and the least CPUs/memory
                first = len(opts)
                for lv in class_levels(inst, job, nd):
                    d = single_node_lb(inst, job, nd.name, n, level=lv)
                    if d is None:       # fewer than n GPUs the job can use on the node: at no level
                        break
                    dem = node_class_demand(job, nd, n, lv)
                    if job.ps is None or pen <= 1.0:
                        if lv is None or fits_alone(dem, cap):
                            opts.append(Option(j, d, dem, cls=("node", nd.name, n), level=lv))
                        continue
                    # a parameter server on another node makes the job span nodes: the locality penalty
                    # applies; keeping all p of them on this node costs p servers' CPUs there, and p sets
                    # the PS overhead (p + 1 servers that are no faster than p are dropped: dominated)
                    d_prev = math.inf
                    for p in ps_counts(job, n):
                        d_p = single_node_lb(inst, job, nd.name, n, p, lv)
                        local = {**dem, ("cpu", nd.name): dem[("cpu", nd.name)] + p * job.ps.ps_cpus}
                        if d_p < d_prev and fits_alone(local, cap):
                            opts.append(Option(j, d_p, local, cls=("node", nd.name, n), ps_local=True, ps_count=p,
                                               level=lv))
                            d_prev = d_p
                    if len(inst.cluster.nodes) > 1 and (lv is None or fits_alone(dem, cap)):
                        opts.append(Option(j, d * pen, dem, cls=("node", nd.name, n), ps_local=False, level=lv))
                if not levels:
                    opts[first:] = _merge_levels(opts[first:])
            opts += spread_options(inst, j, n)
        out.append(opts)
    return out


def p_min(inst: Instance) -> list[float]:
    """Per job, a lower bound on its run time on any allocation (inf when it cannot run)."""
    return [min((o.dur for o in opts), default=math.inf) for opts in class_options(inst)]


def trivial_bound(inst: Instance) -> float:
    """Objective bound from C_j ≥ a_j + p_min_j alone."""
    pm = p_min(inst)
    jobs = inst.jobs
    if inst.objective == "makespan":
        return max(j.arrival + p for j, p in zip(jobs, pm)) - min(j.arrival for j in jobs)
    if inst.objective == "weighted_jct":
        return sum(j.weight * p for j, p in zip(jobs, pm)) / sum(j.weight for j in jobs)
    return sum(pm) / len(jobs)


def node_complete_options(inst: Instance, limit: int = 20000) -> list[list[Option]] | None:
    """Every single-node allocation as a concrete option, plus relaxed spread classes (:func:`_node_complete_options`)."""
    opts = memo(inst, ("node-complete", limit), lambda: _node_complete_options(inst, limit))
    return None if opts is None else fresh_lists(opts)


def _node_complete_options(inst: Instance, limit: int) -> list[list[Option]] | None:
    """Every single-node allocation (all GPU subsets of each node, every PS multiset and level) as a
    concrete option, plus a relaxed ``("spread", n)`` class for allocations over several nodes.

    A model over these is a relaxation of the offline class (spread jobs only hold the cluster GPU
    count) that is exact for schedules without spread jobs. None when it exceeds ``limit`` options.
    """
    cap = capacities(inst)
    node_names = [nd.name for nd in inst.cluster.nodes]
    total = 0
    for job in inst.jobs:
        for nd in inst.cluster.nodes:
            nd_ids = [g.id for g in nd.gpus if job.can_use(g.type)]
            h = len(nd_ids)
            total += sum(math.comb(h, n) * len(ps_choices(job, node_names, nd_ids[:n])[0])
                         for n in job.sizes if n <= h) * len(job.level_choices)
    if total > limit:
        return None
    out: list[list[Option]] = []
    for j, job in enumerate(inst.jobs):
        opts: list[Option] = []
        for nd in inst.cluster.nodes:
            ids = [g.id for g in nd.gpus if job.can_use(g.type)]
            for n in job.sizes:
                for comb in itertools.combinations(ids, n):
                    found = options_for_set(inst, j, tuple(comb), node_names, cap)
                    if not found.complete:      # not every PS placement: no longer node-exact
                        return None
                    opts += undominated(found.options)
        for n in job.sizes:
            opts += spread_options(inst, j, n)
        out.append(opts)
    return out


def hybrid_node_options(mixed: list[list[Option]], classes: list[list[Option]], exact: set[int],
                        exact_nodes: set[tuple[int, str]]) -> list[list[Option]]:
    """Per-node lazy variability: jobs in ``exact`` keep every node-exact option; a job j with pairs
    (j, v) in ``exact_nodes`` gets every single-node GPU set on those nodes v (from ``mixed``) instead
    of its classes ``("node", v, n)`` there, and keeps its other classes (other nodes, spread).

    Relaxation: an allocation of j on a single node v maps onto its own
    concrete option when (j, v) is exact (``mixed`` holds every single-node allocation, up to
    dominance: same GPU set, no slower, holding no more), otherwise onto the class ("node", v, n),
    whose duration and demands are no larger; spread allocations onto their spread class. Per-GPU
    no-overlap only involves concrete options, which hold their real GPUs, and node/cluster counts
    hold for every option; so every offline schedule maps onto a feasible solution with no larger
    completion times and the rounded model's bound is a bound of the offline optimum.
    """
    out = []
    for j, (m, c) in enumerate(zip(mixed, classes)):
        if j in exact:
            out.append(m)
            continue
        vs = {v for (i, v) in exact_nodes if i == j}
        if not vs:
            out.append(c)
            continue
        conc = [o for o in m if o.alloc is not None and single_node(o.alloc) in vs]
        rest = [o for o in c if not (o.cls is not None and o.cls[0] == "node" and o.cls[1] in vs)]
        out.append(conc + rest)
    return out
