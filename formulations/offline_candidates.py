"""Allocation options, duration lower bounds and re-timing shared by the offline oracles.

Two kinds of *options* describe what a job may run on:

* concrete options (:func:`concrete_options`): a GPU set, PS nodes and a cpu_mem level, with the
  exact duration from :func:`jctlab.speed.duration` and the node CPU/memory it holds. When the
  enumeration covers every allocation of the instance (up to dominance) it is *complete* and a model
  over it is exact; otherwise it is a restricted heuristic space (incumbents only).
* relaxed classes (:func:`class_options`): "n GPUs on node v" or "n GPUs spread over >= 2 nodes",
  with a duration that lower-bounds every concrete allocation of the class
  (:func:`single_node_lb`, :func:`spread_lb`). A model over classes with per-node and cluster-wide
  GPU-count cumulatives is a relaxation of the offline class, so its bound is valid.

Every option carries its resource demands ``{resource: amount}``; :func:`capacities` gives each
resource's capacity. Resources: ``("g", gpu_id)`` (capacity 1), ``("n", node)`` GPU count of a node,
``("all",)`` GPU count of the cluster, ``("cpu", node)`` and ``("mem", node)``.

:func:`retime` turns a start ORDER and a per-job chooser into a valid schedule with exact float
times by earliest-start list scheduling through :class:`jctlab.simulate.Simulator` (so interference,
CPU/memory and every rule are those of replay).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import itertools
import math
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import PolicyError, Simulator, Start
from jctlab.speed import SpeedError, allreduce_s, duration, ps_overhead_s

EPS = 1e-9

Resource = tuple


@dataclass(frozen=True)
class Option:
    job: int
    dur: float
    demand: dict = field(hash=False, compare=False)
    alloc: Allocation | None = None      # concrete option
    cls: tuple | None = None             # relaxed class: ("node", name, n) | ("spread", n)
    ps_local: bool | None = None         # a PS job's node class: its PS on that node (True) or not (False)
    ps_count: int | None = None          # ... with ps_local True: that many servers, all on the node
    level: tuple | None = None           # a node class split by CPU/memory level: (cpus, mem) per GPU,
                                         # (None, None) the fair share


# ----------------------------------------------------------------------------- basic helpers

_MEMO: dict[tuple, tuple[weakref.ref, Any]] = {}


def _memo(inst: Instance, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per instance object and key: the option sets take 0.2-1 s on 32-64 GPUs, and
    the per-job bound, the LPs, the models and the portfolio's members all start from them. Callers get
    fresh lists (:func:`_lists`) over the same frozen options. ``key`` holds every argument and module
    setting the result depends on."""
    if not _memoized(inst, key):
        _remember(inst, key, compute())
    return _MEMO[(id(inst), key)][1]


def _remember(inst: Instance, key: tuple, value: Any) -> None:
    k = (id(inst), key)
    _MEMO[k] = (weakref.ref(inst), value)
    weakref.finalize(inst, _MEMO.pop, k, None)


def _memoized(inst: Instance, key: tuple) -> bool:
    hit = _MEMO.get((id(inst), key))
    return hit is not None and hit[0]() is inst


def _lists(opts: list[list[Option]]) -> list[list[Option]]:
    return [list(ol) for ol in opts]


def rho(job: Job, gpu) -> float:
    """One GPU's throughput for the job's class (samples/s), inf for a zero slowdown factor."""
    f = gpu.factor(job.job_class)
    r = job.samples_per_s.get(gpu.type, 0.0)
    return math.inf if f == 0 else r / f


def hostable(inst: Instance, job: Job) -> list:
    return [g for g in inst.cluster.gpus if job.can_use(g.type)]


def max_speedup(job: Job) -> float:
    if job.cpu_mem is None:
        return 1.0
    return max([1.0] + [s for _, _, s in job.cpu_mem.levels])


def level_of(alloc: Allocation) -> tuple:
    """An allocation's CPU/memory level as (cpus_per_gpu, mem_gb_per_gpu); (None, None) is the fair share."""
    return (alloc.cpus_per_gpu, alloc.mem_gb_per_gpu)


def per_gpu(nd, level: tuple) -> tuple[float, float]:
    """CPUs and memory that one GPU of node ``nd`` holds at ``level`` (the node's fair share for None)."""
    c, m = level
    return (nd.fair_cpus if c is None else c, nd.fair_mem_gb if m is None else m)


def level_speedup(job: Job, level: tuple) -> float:
    """The cpu_mem speedup of ``level`` ((None, None): the fair share, speedup 1)."""
    return 1.0 if level == (None, None) else job.cpu_mem.speedup(*level)


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


def demand_of(inst: Instance, job: Job, alloc: Allocation) -> dict:
    """Resources held (same rule as the engine: fair share when the level is None)."""
    cl = inst.cluster
    lv = level_of(alloc)
    held: dict = {}
    d: dict = {}
    for g in alloc.gpus:
        n = g.split(":", 1)[0]
        d[("g", g)] = 1
        d[("n", n)] = d.get(("n", n), 0) + 1
        c, m = held[n] if n in held else held.setdefault(n, per_gpu(cl.node[n], lv))
        d[("cpu", n)] = d.get(("cpu", n), 0.0) + c
        d[("mem", n)] = d.get(("mem", n), 0.0) + m
    d[("all",)] = len(alloc.gpus)
    if job.ps is not None:
        for n in alloc.ps_nodes:
            d[("cpu", n)] = d.get(("cpu", n), 0.0) + job.ps.ps_cpus
    return d


def capacities(inst: Instance) -> dict:
    cl = inst.cluster
    cap: dict = {("all",): len(cl.gpus)}
    for nd in cl.nodes:
        cap[("n", nd.name)] = len(nd.gpus)
        cap[("cpu", nd.name)] = nd.cpus
        cap[("mem", nd.name)] = nd.mem_gb
        for g in nd.gpus:
            cap[("g", g.id)] = 1
    for T in node_groups(inst):
        if len(T) >= 2:
            cap[("set", T)] = sum(len(cl.node[v].gpus) for v in T)
    return cap


PATTERN_LIMIT = 64      # most patterns per job and size; beyond it the single ("spread", n) class


def node_groups(inst: Instance) -> list[tuple[str, ...]]:
    """Nodes grouped by their set of GPU types (a partition of the nodes, in node order)."""
    by: dict = {}
    for nd in inst.cluster.nodes:
        by.setdefault(tuple(sorted({g.type for g in nd.gpus})), []).append(nd.name)
    return [tuple(v) for v in by.values()]


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
        d = _spread_duration_lb(job, cl, n, rh, hs)
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


def fits_alone(demand: dict, cap: dict) -> bool:
    return all(v <= cap[r] + EPS * max(1.0, cap[r]) for r, v in demand.items())


def _dominated(a: Option, b: Option) -> bool:
    """a dominated by b: b no longer and holds no more of anything."""
    if b.dur > a.dur:
        return False
    for r, v in b.demand.items():
        if v > a.demand.get(r, 0.0) + 1e-12:
            return False
    return True


def _filter(opts: list[Option]) -> list[Option]:
    """The options no other kept option dominates (:func:`_dominated`), fastest first. Long lists (one GPU
    set × every PS placement × level: 150+ on 16 nodes) compare against all kept ones at once (numpy)."""
    opts = sorted(opts, key=lambda o: (o.dur, sum(v for r, v in o.demand.items() if r[0] in ("cpu", "mem"))))
    if len(opts) <= 16:
        keep: list[Option] = []
        for o in opts:
            if not any(_dominated(o, k) for k in keep):
                keep.append(o)
        return keep
    keys = list(dict.fromkeys(r for o in opts for r in o.demand))
    dem = np.array([[o.demand.get(r, 0.0) for r in keys] for o in opts])
    dem = dem[:, dem.max(axis=0) > dem.min(axis=0)]     # a resource all hold alike decides nothing
    dur = np.array([o.dur for o in opts])
    # dominance is transitive, so "no kept option before i dominates i" is "no option before i does"
    dom = (dur[:, None] <= dur[None, :]) & np.all(dem[:, None, :] <= dem[None, :, :] + 1e-12, axis=2)
    return [opts[i] for i in np.flatnonzero(~np.triu(dom, 1).any(axis=0))]


def _ps_choices(job: Job, nodes: Sequence[str]) -> list[tuple[str, ...]]:
    if job.ps is None:
        return [()]
    out = []
    for p in range(1, job.ps.max_ps + 1):
        out += list(itertools.combinations_with_replacement(sorted(nodes), p))
    return out


def _options_for_set(inst: Instance, j: int, gids: tuple[str, ...], ps_nodes_pool: Sequence[str], cap: dict) -> list[Option]:
    """Every (PS placement, level) option of job j on the GPUs ``gids`` that fits the empty cluster.

    With parameter servers a duration depends on the GPUs, the level, the server count and whether the job
    touches one node or several (SPEC §2: Optimus' overhead, the locality penalty), so it is priced once per
    such key (the same float :func:`duration` gives each allocation); the GPUs' demand is computed once per
    level and each placement adds its servers' CPUs (:func:`demand_of`'s rule). 150 000 options at 256 GPUs
    / 32 nodes: docs/oracle-offline.md, follow-up 29."""
    job = inst.jobs[j]
    gids = tuple(gids)
    gpu_nodes = frozenset(g.split(":", 1)[0] for g in gids)
    base: dict = {}      # level -> the GPUs' demand, or None where it does not fit alone
    priced: dict = {}    # (servers, several nodes, level) -> duration, or None where the model refuses it
    out = []
    for psn in _ps_choices(job, ps_nodes_pool):
        several = len(gpu_nodes | set(psn)) > 1
        for c, m in job.level_choices:
            if (c, m) not in base:
                dem0 = demand_of(inst, job, Allocation(gids, (), c, m))
                base[(c, m)] = dem0 if fits_alone(dem0, cap) else None
            dem0 = base[(c, m)]
            if dem0 is None:     # servers only add CPUs
                continue
            alloc = Allocation(gids, psn, c, m)
            key = (len(psn), several, c, m)
            if key not in priced:
                try:
                    priced[key] = duration(job, alloc, inst.cluster)
                except SpeedError:
                    priced[key] = None
            d = priced[key]
            if d is None:
                continue
            if psn:
                dem = dict(dem0)
                for n in psn:
                    dem[("cpu", n)] = dem.get(("cpu", n), 0.0) + job.ps.ps_cpus
                if not fits_alone({r: dem[r] for r in {("cpu", n) for n in psn}}, cap):
                    continue
            else:
                dem = dem0
            out.append(Option(j, d, dem, alloc=alloc))
    return out


# ----------------------------------------------------------------------------- concrete options


PS_ANY_NODES = 4   # on clusters of at most this many nodes, restricted options place PS on any node (else on
                   # the job's GPU nodes: 64 GPUs / 8 nodes with levels, 126 000 options in 11 s → 18 000 in 0.4 s)


def count_subsets(inst: Instance, job: Job) -> int:
    h = len(hostable(inst, job))
    return sum(math.comb(h, n) for n in job.sizes if n <= h)


SETUP_SHARE = 0.3   # of a time limit, at most, for enumerating the restricted concrete options (then: CUT_SETS)
CUT_SETS = 2        # GPU sets per job and size, its fastest, for the jobs still to enumerate at that deadline


def setup_deadline(t0: float, time_limit: float | None) -> float | None:
    """When :func:`concrete_options` stops enumerating the full restricted space for a solve that started at
    ``t0``."""
    return None if time_limit is None else t0 + SETUP_SHARE * time_limit


def concrete_options(inst: Instance, full_limit: int = 64,
                     deadline: float | None = None) -> tuple[list[list[Option]], bool]:
    """Per job, its concrete options; ``complete`` when every GPU subset was enumerated (:func:`_concrete_options`).
    Past ``deadline`` (``time.perf_counter()``) the restricted space is cut short; such a result is not kept
    for later calls."""
    key = ("concrete", full_limit)
    if not _memoized(inst, key):
        opts, complete, cut = _concrete_options(inst, full_limit, deadline)
        if cut:
            return _lists(opts), complete
        _remember(inst, key, (opts, complete))
    opts, complete = _MEMO[(id(inst), key)][1]
    return _lists(opts), complete


def _concrete_options(inst: Instance, full_limit: int,
                      deadline: float | None = None) -> tuple[list[list[Option]], bool, bool]:
    """Per job, its concrete options; ``complete`` when every GPU subset was enumerated; ``cut`` when
    ``deadline`` cut the restricted space short.

    Complete enumeration (all GPU subsets of every allowed size, every PS multiset over every node,
    every cpu_mem level, minus dominated options with the same demands) happens when every job has
    at most ``full_limit`` GPU subsets. Otherwise a restricted heuristic space: per node and size the
    job's best GPUs, the next best and index-aligned blocks; over several nodes, greedy fills. That space
    takes seconds at 256 GPUs with parameter servers (every set × server placement × level: 172 000 options
    for 60 jobs on 32 nodes, 5.3 s); past ``deadline`` each job still to enumerate keeps only its ``CUT_SETS``
    fastest sets (largest Σ ρ) of each size, so a short limit is not spent here. Every option is still a
    real allocation, and the space was restricted anyway, so nothing else changes (the infeasibility test
    of :func:`job_infeasible` never reads a restricted space).
    """
    cap = capacities(inst)
    node_names = [nd.name for nd in inst.cluster.nodes]
    complete = all(count_subsets(inst, j) <= full_limit for j in inst.jobs)
    cut = False
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
            if deadline is not None and time.perf_counter() > deadline:
                sets, cut = _fastest_sets(inst, job, sets), True
        opts: list[Option] = []
        for gids in sorted(sets):
            # parameter servers: on any node (complete, or a small cluster), else on the job's GPU nodes,
            # and on any node where those leave no CPUs for them
            pool = node_names if complete or len(node_names) <= PS_ANY_NODES else sorted({g.split(":", 1)[0] for g in gids})
            found = _options_for_set(inst, j, gids, pool, cap)
            if not found and pool is not node_names and job.ps is not None:
                found = _options_for_set(inst, j, gids, node_names, cap)
            opts += _filter(found)
        out.append(opts)
    return out, complete, cut


def _fastest_sets(inst: Instance, job: Job, sets: set[tuple[str, ...]]) -> set[tuple[str, ...]]:
    """The ``CUT_SETS`` sets of each size with the largest sum of the job's per-GPU throughputs."""
    speed = {g.id: rho(job, g) for g in inst.cluster.gpus}
    by_size: dict[int, list] = {}
    for t in sets:
        by_size.setdefault(len(t), []).append(t)
    return {t for ts in by_size.values() for t in sorted(ts, key=lambda t: (-sum(speed[g] for g in t), t))[:CUT_SETS]}


def node_complete_options(inst: Instance, limit: int = 20000) -> list[list[Option]] | None:
    """Every single-node allocation as a concrete option, plus relaxed spread classes (:func:`_node_complete_options`)."""
    opts = _memo(inst, ("node-complete", limit), lambda: _node_complete_options(inst, limit))
    return None if opts is None else _lists(opts)


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
            h = sum(1 for g in nd.gpus if job.can_use(g.type))
            total += sum(math.comb(h, n) for n in job.sizes if n <= h) * len(_ps_choices(job, node_names)) * len(job.level_choices)
    if total > limit:
        return None
    out: list[list[Option]] = []
    for j, job in enumerate(inst.jobs):
        opts: list[Option] = []
        for nd in inst.cluster.nodes:
            ids = [g.id for g in nd.gpus if job.can_use(g.type)]
            for n in job.sizes:
                for comb in itertools.combinations(ids, n):
                    opts += _filter(_options_for_set(inst, j, tuple(comb), node_names, cap))
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
        conc = [o for o in m if o.alloc is not None and _single_node(o.alloc) in vs]
        rest = [o for o in c if not (o.cls is not None and o.cls[0] == "node" and o.cls[1] in vs)]
        out.append(conc + rest)
    return out


def _single_node(alloc: Allocation) -> str | None:
    nodes = {g.split(":", 1)[0] for g in alloc.gpus}
    return next(iter(nodes)) if len(nodes) == 1 else None


def mixed_chooser(chosen: dict[int, Option], ps_side: bool = False, ps_free: set[int] | frozenset = frozenset(),
                  levels: bool = True) -> Callable:
    """Concrete options keep their allocation; relaxed ones pick the fastest free set of their class.

    ``ps_side``: a PS job's node class keeps its parameter servers on the class's node (and their count) or
    off it, as the model chose. ``levels``: a class split by CPU/memory level runs at the model's level (else
    the fastest that fits). ``ps_free``: concrete jobs whose PS placement is free (:func:`fixed_chooser`).
    """
    fixed = fixed_chooser({j: o.alloc for j, o in chosen.items() if o.alloc is not None}, ps_free)
    rel = class_chooser({j: o.cls for j, o in chosen.items() if o.alloc is None},
                        {j: (o.ps_local, o.ps_count) for j, o in chosen.items() if o.ps_local is not None}
                        if ps_side else None,
                        {j: o.level for j, o in chosen.items() if o.alloc is None and o.level is not None}
                        if levels else None)

    def choose(inst, j, free, cpu, mem):
        if chosen[j].alloc is not None:
            return fixed(inst, j, free, cpu, mem)
        return rel(inst, j, free, cpu, mem)

    return choose


def allocations_on(inst: Instance, job: Job, gids: tuple[str, ...]) -> list[tuple[Allocation, float]]:
    """Every allocation of ``job`` on the GPU set ``gids`` (PS nodes × CPU/memory levels) with its
    duration, fastest first."""
    cl = inst.cluster
    node_names = [nd.name for nd in cl.nodes]
    gnodes = sorted({g.split(":", 1)[0] for g in gids})
    res = []
    for psn in _ps_choices(job, node_names if len(node_names) <= 4 else gnodes):
        for c, m in job.level_choices:
            a = Allocation(tuple(sorted(gids)), psn, c, m)
            try:
                res.append((a, duration(job, a, cl)))
            except SpeedError:
                pass
    res.sort(key=lambda x: x[1])
    return res


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


# ----------------------------------------------------------------------------- lower bounds


def _compute_lb(job: Job, rhos: list[float], split: str) -> float:
    if any(math.isinf(r) for r in rhos):
        return 0.0
    if split == "proportional":
        return job.batch / sum(rhos)
    return job.batch / (len(rhos) * min(rhos))


def _comm_lb(job: Job, n: int, gbps: float, ps: int | None = None) -> float:
    if job.ps is not None:
        return min(ps_overhead_s(job.ps.theta, n, p) for p in ([ps] if ps else range(1, job.ps.max_ps + 1)))
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
    cand = [_compute_lb(job, rh, cl.split) + _comm_lb(job, n, cl.intra_node_gbps, ps)]
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
    return _spread_duration_lb(job, cl, n, rh, hs)


def _spread_duration_lb(job: Job, cl, n: int, rh: list, hs: list) -> float:
    """Duration lower bound of a spread allocation of ``n`` GPUs whose rates, matched one to one with
    ``rh``, are each at most their match, and whose GPUs lie in ``hs``: the model formula with inter-node
    communication and the locality penalty, or a measured single-type table (``t/spread``, else the
    one-node table times the penalty) at the n-th smallest factor of type t in ``hs``; the smaller
    candidate, divided by the largest cpu_mem speedup."""
    pen = cl.locality_penalty
    cand = [(_compute_lb(job, rh, cl.split) + _comm_lb(job, n, cl.inter_node_gbps)) * pen]
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


def class_options(inst: Instance, levels: bool = False) -> list[list[Option]]:
    """Relaxed classes per job with lower-bound durations and GPU-count demands. ``levels``: a node class
    where the node's CPUs or memory can bind has one option per undominated CPU/memory level
    (:func:`class_levels`), with that level's speed and CPUs/memory; else one option with the fastest
    level that fits the node and the least CPUs/memory of those (a coarser relaxation, CP-SAT proves it
    faster)."""
    return _lists(_memo(inst, ("classes", levels), lambda: _class_options(inst, levels)))


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
                    for p in range(1, job.ps.max_ps + 1):
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


def node_class_demand(job: Job, nd, n: int, level: tuple | None = None) -> dict:
    """What every allocation of ``n`` GPUs on node ``nd`` (at ``level``, when given) holds at least: the GPU
    counts, and on the node ``n`` × the smallest CPUs and memory per GPU among the job's levels (the fair
    share when None)."""
    held = [per_gpu(nd, lv) for lv in (job.level_choices if level is None else (level,))]
    cpus = min(c for c, _ in held)
    mem = min(m for _, m in held)
    return {("n", nd.name): n, ("all",): n, ("cpu", nd.name): n * cpus, ("mem", nd.name): n * mem}


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


def binding_resources(inst: Instance, opts: list[list[Option]]) -> set:
    """CPU/memory resources that some option could overload (held above the fair share)."""
    cl = inst.cluster
    out = set()
    for ol in opts:
        for o in ol:
            for r, v in o.demand.items():
                if r[0] in ("cpu", "mem"):
                    node = cl.node[r[1]]
                    fair = node.fair_cpus if r[0] == "cpu" else node.fair_mem_gb
                    if v > o.demand.get(("n", r[1]), 0) * fair + 1e-9:
                        out.add(r)
    return out


# ----------------------------------------------------------------------------- re-timing


class _OrderPolicy:
    """Start jobs in a given order as soon as ``choose`` finds them an allocation.

    ``strict``: a job never starts before the jobs ahead of it in the order (list scheduling of the
    model's sequence); otherwise later jobs may start in gaps (backfilling). ``dispatch``: the order is a
    priority among the jobs that have arrived (a dispatch rule); jobs not yet arrived never hold the
    others back, and ``strict`` stops only at the first waiting job that does not fit.
    """

    def __init__(self, order: Sequence[int], choose: Callable, strict: bool, dispatch: bool = False):
        self.order = list(order)
        self.choose = choose
        self.strict = strict
        self.dispatch = dispatch
        self.started: set[int] = set()

    def decide(self, sim):
        eng = sim.engine
        free = {n: set(s) for n, s in eng.free.items()}
        cpu = dict(eng.cpu_used)
        mem = dict(eng.mem_used)
        acts = []
        for j in self.order:
            if j in self.started:
                continue
            if j not in sim.waiting:
                if self.strict and not self.dispatch:
                    break
                continue
            alloc = self.choose(sim.inst, j, free, cpu, mem)
            if alloc is None:
                if self.strict:
                    break
                continue
            dem = demand_of(sim.inst, sim.inst.jobs[j], alloc)
            for r, v in dem.items():
                if r[0] == "g":
                    free[r[1].split(":", 1)[0]].discard(r[1])
                elif r[0] == "cpu":
                    cpu[r[1]] += v
                elif r[0] == "mem":
                    mem[r[1]] += v
            self.started.add(j)
            acts.append(Start(j, alloc))
        return acts


def _fits_now(inst, dem, free, cpu, mem) -> bool:
    cl = inst.cluster
    for r, v in dem.items():
        if r[0] == "g":
            if r[1] not in free[r[1].split(":", 1)[0]]:
                return False
        elif r[0] == "cpu":
            c = cl.node[r[1]].cpus
            if cpu[r[1]] + v > c + EPS * max(1.0, c):
                return False
        elif r[0] == "mem":
            c = cl.node[r[1]].mem_gb
            if mem[r[1]] + v > c + EPS * max(1.0, c):
                return False
    return True


def fixed_chooser(allocs: dict[int, Allocation], ps_free: set[int] | frozenset = frozenset()) -> Callable:
    """Chooser for concrete decisions: the job's own allocation once it fits. Jobs in ``ps_free`` keep
    their GPUs and level but take, among the PS placements no slower than theirs that fit now, the best
    fit (:func:`_ps_spot`): for GPU sets chosen without their parameter servers (:func:`pin_gpus`)."""
    cache: dict = {}

    def choose(inst, j, free, cpu, mem):
        a = allocs[j]
        job = inst.jobs[j]
        if j in ps_free and job.ps is not None:
            if j not in cache:
                opts = allocations_on(inst, job, a.gpus)
                d0 = next((d for b, d in opts if b == a), None)
                cache[j] = [b for b, d in opts if level_of(b) == level_of(a)
                            and (d0 is None or d <= d0 * (1 + 1e-9))] or [a]
            fits = [b for b in cache[j] if _fits_now(inst, demand_of(inst, job, b), free, cpu, mem)]
            return min(fits, key=lambda b: (_ps_spot(b, free), b != a)) if fits else None
        return a if _fits_now(inst, demand_of(inst, job, a), free, cpu, mem) else None

    return choose


def _ps_spot(alloc: Allocation, free) -> int:
    """Free GPUs on the nodes that host the allocation's parameter servers but none of its GPUs: a PS's
    CPUs there may keep a free GPU idle, so among equally fast allocations the fewest (best fit) go first."""
    own = {g.split(":", 1)[0] for g in alloc.gpus}
    return sum(len(free[v]) for v in set(alloc.ps_nodes) - own)


def _before(key: tuple, other: tuple) -> bool:
    """Shorter duration first (relative 1e-9), then the smaller tie-break."""
    d, t = key
    d2, t2 = other
    if d < d2 * (1 - 1e-9):
        return True
    return d <= d2 * (1 + 1e-9) and t < t2


def class_chooser(classes: dict[int, tuple | None], ps_local: dict[int, tuple] | None = None,
                  levels: dict[int, tuple] | None = None) -> Callable:
    """Chooser for relaxed decisions: the fastest concrete allocation of the job's class among the
    free GPUs now (any class when the class is None or has nothing that fits an idle cluster).
    ``ps_local`` (job → (bool, count or None)): a node class's parameter servers all on its node (that
    many), or not all there. ``levels`` (job → (cpus, mem) per GPU): at that CPU/memory level."""
    cache: dict = {}

    def choose(inst, j, free, cpu, mem):
        job = inst.jobs[j]
        cls = classes.get(j)
        side, count = (None, None) if ps_local is None or cls is None or cls[0] != "node" else ps_local.get(j, (None, None))
        lv = None if levels is None or cls is None else levels.get(j)
        best = None
        for alloc, d in _free_allocs(inst, job, cls, free, cache):
            if side is not None and side != all(v == cls[1] for v in alloc.ps_nodes):
                continue
            if count is not None and count != len(alloc.ps_nodes):
                continue
            if lv is not None and lv != level_of(alloc):
                continue
            dem = demand_of(inst, job, alloc)
            key = (d, _ps_spot(alloc, free))
            if _fits_now(inst, dem, free, cpu, mem) and (best is None or _before(key, best[1])):
                best = (alloc, key)
        if best is None and cls is not None:
            # a class that never fits alone (CPU of PS...): fall back to any class once idle
            total_free = sum(len(s) for s in free.values())
            if total_free == len(inst.cluster.gpus):
                return choose_any(inst, j, free, cpu, mem)
        return None if best is None else best[0]

    def choose_any(inst, j, free, cpu, mem):
        best = None
        for alloc, d in _free_allocs(inst, inst.jobs[j], None, free, cache):
            if _fits_now(inst, demand_of(inst, inst.jobs[j], alloc), free, cpu, mem) and (best is None or d < best[1]):
                best = (alloc, d)
        return None if best is None else best[0]

    return choose


def packed_chooser() -> Callable:
    """Chooser of the packed placement (best fit): among the allocations of :func:`_free_allocs` that fit
    now, the fewest nodes, then the fewest GPUs left free on them, then the fastest. On a loaded cluster
    this keeps whole nodes free for large jobs, where the fastest free GPUs scatter small jobs."""
    cache: dict = {}

    def choose(inst, j, free, cpu, mem):
        job = inst.jobs[j]
        best = None
        for alloc, d in _free_allocs(inst, job, None, free, cache):
            nodes = {g.split(":", 1)[0] for g in alloc.gpus}
            key = (len(nodes), sum(len(free[v]) for v in nodes) - len(alloc.gpus), d, _ps_spot(alloc, free))
            if (best is None or key < best[1]) and _fits_now(inst, demand_of(inst, job, alloc), free, cpu, mem):
                best = (alloc, key)
        return None if best is None else best[0]

    return choose


def _free_allocs(inst: Instance, job: Job, cls, free, cache):
    """Candidate allocations among free GPUs: per node the fastest free n, or a greedy spread. ``cls``:
    ``("node", v, n)``, ``("nodes", (v, ...), n)`` (n GPUs on one of those nodes), a spread class, or None."""
    cl = inst.cluster
    gsets = []
    for n in job.sizes:
        if cls is not None and (cls[2] if cls[0] in ("node", "nodes") else cls[1]) != n:
            continue
        for nd in cl.nodes:
            if cls is not None and not (cls[0] == "node" and cls[1] == nd.name or cls[0] == "nodes" and nd.name in cls[1]):
                continue
            gl = [cl.gpu[g] for g in free[nd.name] if job.can_use(cl.gpu[g].type)]
            if len(gl) >= n:
                gl.sort(key=lambda g: (-rho(job, g), g.index))
                gsets.append(tuple(sorted(g.id for g in gl[:n])))
        if n >= 2 and (cls is None or cls[0] == "spread"):
            sup = set(cls[2]) if cls is not None and len(cls) > 2 else None
            gl = [cl.gpu[g] for nd, s in free.items() if sup is None or nd in sup for g in s
                  if job.can_use(cl.gpu[g].type)]
            if len(gl) >= n and len({g.node for g in gl}) >= 2:
                gl.sort(key=lambda g: (-rho(job, g), g.id))
                pick = gl[:n]
                if len({g.node for g in pick}) < 2:     # make it a real spread
                    other = [g for g in gl[n:] if g.node != pick[0].node]
                    pick = pick[:-1] + other[:1] if other else pick
                gsets.append(tuple(sorted(g.id for g in pick)))
                # consolidated-first fill: fewest nodes
                by: dict = {}
                for g in gl:
                    by.setdefault(g.node, []).append(g)
                fill: list = []
                for node in sorted(by, key=lambda x: -len(by[x])):
                    fill += by[node]
                    if len(fill) >= n:
                        break
                gsets.append(tuple(sorted(g.id for g in fill[:n])))
    for gids in dict.fromkeys(gsets):
        if len(gids) not in job.sizes:
            continue
        key = (job.name, gids)
        if key not in cache:
            cache[key] = allocations_on(inst, job, gids)
        yield from cache[key]


def retime(inst: Instance, order: Sequence[int], choose: Callable, method: str, strict: bool = True,
           dispatch: bool = False):
    """List-schedule ``order`` with ``choose`` (see :class:`_OrderPolicy`); returns (schedule, replay)
    or (None, None)."""
    try:
        sched, rep = Simulator(inst, _OrderPolicy(order, choose, strict, dispatch), method=method).run()
    except PolicyError:
        return None, None
    return sched, rep


def _better_retime(best, cand):
    """The better of two (schedule, replay) pairs (a failed or invalid one never wins)."""
    s, r = cand
    return cand if s is not None and r.valid and (best[1] is None or r.objective < best[1].objective - 1e-12) else best


def best_retime(inst: Instance, order: Sequence[int], choose_factory: Callable, method: str):
    """Strict list scheduling and backfilling of the same order; the better replayed schedule."""
    best = (None, None)
    for strict in (True, False):
        best = _better_retime(best, retime(inst, order, choose_factory(), method, strict))
    return best


def dispatch_orders(inst: Instance) -> list[list[int]]:
    """Priority orders of the classic dispatch rules, ties by arrival: weighted shortest processing time
    (p_j / w_j, p_j the job's shortest duration) and smallest GPU area first (p_j · smallest size / w_j,
    as Tiresias and the SJF baselines rank multi-GPU jobs); for the makespan also largest area first."""
    pm, w, jobs = p_min(inst), weights(inst), inst.jobs
    area = [p * min(jb.sizes) for p, jb in zip(pm, jobs)]
    keys = [[p / wi for p, wi in zip(pm, w)], [a / wi for a, wi in zip(area, w)]]
    if inst.objective == "makespan":
        keys.append([-a for a in area])
    return [sorted(range(len(jobs)), key=lambda j: (k[j], jobs[j].arrival, j)) for k in keys]


GREEDY_SHARE = 0.05     # of a time limit, at most, for the dispatch rules of the first incumbent


def greedy_deadline(t0: float, time_limit: float | None) -> float | None:
    """When :func:`greedy` stops trying dispatch rules for a solve that started at ``t0``."""
    return None if time_limit is None else t0 + GREEDY_SHARE * time_limit


def greedy(inst: Instance, method: str = "greedy", deadline: float | None = None):
    """A fallback incumbent, fastest free allocation: the arrival order (list scheduling and backfilling),
    then the dispatch rules of :func:`dispatch_orders` (each stopping at the first waiting job that does not
    fit, and backfilling) while ``deadline`` (a ``time.perf_counter()`` instant) allows; the best replayed
    schedule. On a loaded cluster the rules matter: a PAL workload of 160 jobs on 32 GPUs gets 28 699 s
    mean JCT from the arrival order and 9 726 s from the smallest area first. Each rule's schedule is
    computed once per instance (the portfolio's heuristic and members all start here: 0.9 s a call at 256
    GPUs / 64 jobs with PS and CPU/memory levels); a later call reuses them, and any rule computed before
    counts even past ``deadline``."""
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    best = _memo(inst, ("greedy-rule", -1), lambda: best_retime(inst, order, lambda: class_chooser({}), method))
    choosers = (lambda: class_chooser({}), packed_chooser)      # fastest free GPUs, best fit
    rules = itertools.product(dispatch_orders(inst), choosers, (True, False))
    for k, (order, make, strict) in enumerate(rules):
        key = ("greedy-rule", k)
        if deadline is not None and time.perf_counter() > deadline and not _memoized(inst, key):
            break
        best = _better_retime(best, _memo(inst, key, lambda: retime(inst, order, make(), method, strict,
                                                                   dispatch=True)))
    s, r = best
    return (s if s is None or s.method == method else dataclasses.replace(s, method=method)), r


def weights(inst: Instance) -> list[float]:
    if inst.objective == "weighted_jct":
        return [j.weight for j in inst.jobs]
    return [1.0] * len(inst.jobs)


def objective_from_completions(inst: Instance, comp: Sequence[float]) -> float:
    jobs = inst.jobs
    if inst.objective == "makespan":
        return max(comp) - min(j.arrival for j in jobs)
    w = weights(inst)
    return sum(wi * (c - j.arrival) for wi, c, j in zip(w, comp, jobs)) / sum(w)


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


# ----------------------------------------------------------------------------- list scheduling + local search

SPREAD_CANDIDATES = 64   # most concrete spread sets per job and size for the list-scheduling search
SPREAD_NODE_SETS = 2000  # most node sets enumerated per job and size (the fastest nodes first beyond it)


def spread_candidates(inst: Instance, j: int, limit: int = SPREAD_CANDIDATES) -> list[Option]:
    """Concrete spread allocations of job ``j`` for :class:`SGS` (incumbents only, never a bound).

    Per size n ≥ 2 that no single node hosts: every set of the fewest nodes that together host n of
    the job's GPUs (among the job's fastest nodes when there are more than ``SPREAD_NODE_SETS`` such
    sets), with its n fastest GPUs there (each node keeping ≥ 1); the ``limit`` fastest sets.
    """
    cl = inst.cluster
    job = inst.jobs[j]
    cap = capacities(inst)
    by = {nd.name: sorted((g for g in nd.gpus if job.can_use(g.type)), key=lambda g: (-rho(job, g), g.index))
          for nd in cl.nodes}
    by = {v: gl for v, gl in by.items() if gl}
    hosts = sorted((len(gl) for gl in by.values()), reverse=True)
    out: list[Option] = []
    for n in job.sizes:
        if n < 2 or (hosts and hosts[0] >= n) or sum(hosts) < n:
            continue
        k = next(i for i in range(2, len(hosts) + 1) if sum(hosts[:i]) >= n)
        pool = sorted(by, key=lambda v: (-sum(rho(job, g) for g in by[v][:n]), v))
        while len(pool) > k and math.comb(len(pool), k) > SPREAD_NODE_SETS:
            pool.pop()
        sets = set()
        for S in itertools.combinations(sorted(pool), k):
            if sum(len(by[v]) for v in S) < n:
                continue
            pick = [by[v][0] for v in S]             # one GPU on every node of S, then the fastest
            rest = sorted((g for v in S for g in by[v][1:]), key=lambda g: (-rho(job, g), g.id))
            sets.add(tuple(sorted(g.id for g in pick + rest[:n - k])))
        opts = [o for gids in sorted(sets)
                for o in _filter(_options_for_set(inst, j, gids, sorted({g.split(":", 1)[0] for g in gids}), cap))]
        out += sorted(opts, key=lambda o: (o.dur, o.alloc.gpus))[:limit]
    return out


def with_allocations(inst: Instance, opts: list[list[Option]], allocs: dict[int, Allocation]) -> list[list[Option]]:
    """``opts`` where job j also has ``allocs[j]`` as a concrete option when it lacks it: so that :class:`SGS`
    can list-schedule a seed schedule with its own allocations (a dispatch rule spreads a job over the GPUs
    free at its start, which the search options need not hold) and never does worse than it."""
    out = _lists(opts)
    for j, a in allocs.items():
        if all(o.alloc != a for o in out[j]):
            job = inst.jobs[j]
            out[j].append(Option(j, duration(job, a, inst.cluster), demand_of(inst, job, a), alloc=a))
    return out


def with_spread_candidates(inst: Instance, opts: list[list[Option]]) -> list[list[Option]]:
    """``opts`` where every job without a concrete option gets :func:`spread_candidates`, so that
    :class:`SGS` applies to instances whose jobs must spread."""
    return [ol if any(o.alloc is not None for o in ol) else ol + spread_candidates(inst, j)
            for j, ol in enumerate(opts)]


def search_options(inst: Instance, concrete: list[list[Option]], complete: bool,
                   mixed: list[list[Option]] | None = None) -> list[list[Option]] | None:
    """The options list-scheduling local search runs over: every allocation of a ``complete`` instance,
    else the node-exact options ``mixed`` (:func:`node_complete_options`) with concrete spread candidates,
    else (too many of those) the restricted ``concrete`` options; None where there are none or :class:`SGS`
    does not apply (interference)."""
    if complete:
        opts = concrete
    elif mixed is not None:
        opts = with_spread_candidates(inst, mixed)
    else:
        opts = concrete if concrete and all(concrete) else None
    return opts if opts is not None and SGS.applicable(inst, opts) else None


@dataclass(frozen=True)
class SGSTrace:
    """A recorded list schedule (:meth:`SGS.trace`): enough to resume it before any position of ``order``."""
    order: list
    choice: list
    state: tuple       # the rule's record: (GPU free times and last start before each position, ends,
                       # CPU/memory held) by start order; (starts, ends, GPU masks, CPU/memory held) by
                       # position with gaps
    comp: Any
    start: Any
    ec_len: int        # leading positions whose choice is the earliest-completion one
    objective: float

    @functools.cached_property
    def order_starts(self) -> list:
        """Starts along the order, as a running maximum (non-decreasing; the starts themselves are, unless
        the list schedule fills gaps)."""
        return list(np.maximum.accumulate([self.start[j] for j in self.order]))


class SGS:
    """Fast serial list scheduling over concrete options (incumbents only; never a bound).

    Jobs are placed in priority order, each on its fixed option or, for a job without one, on the option
    with the earliest completion (ties: shorter), by one of two rules:

    * *start order* (the default): at the earliest time ≥ max(arrival, previous start, latest free time of
      its GPUs) at which the node CPUs/memory it holds are free. Starts never decrease along the order, so
      the CPUs/memory held at any later time only fall as placed jobs end: the earliest feasible time is
      the first end time after which the job fits.
    * *gaps* (``gaps = True``): at the earliest time ≥ arrival at which its GPUs are free, and the node
      CPUs/memory it holds fit, for its whole duration, possibly before jobs placed ahead of it
      (backfilling into idle periods: the serial schedule generation scheme of project scheduling). With
      the same order and allocations no job starts later than by the start-order rule (by induction: the
      jobs ahead of it end no later and start no later, so from its start-order start on its GPUs are free
      and no more CPU/memory is held than by the start-order rule). On a loaded
      queue whose 8-GPU jobs must spread this is what lets a search move them (docs/oracle-offline.md,
      follow-up 23).

    Every schedule with a given allocation is dominated by either rule applied to its start order (each
    GPU is free, and each node holds no more, no later than in that schedule, by induction), so searching
    over orders and allocations can reach an optimum of the exact model. Only used where durations do not
    depend on other jobs (no interference, :meth:`applicable`); results are re-timed and replayed by the
    simulator before they are used (objective = replayed).
    """

    def __init__(self, inst: Instance, opts: list[list[Option]]):

        self.np = np
        self.inst = inst
        gid = {g.id: i for i, g in enumerate(inst.cluster.gpus)}
        cap = capacities(inst)
        res = sorted(binding_resources(inst, opts))          # CPU/memory that options can overload
        self.cap = np.array([cap[r] * (1 + EPS) + EPS for r in res])
        self.arr = np.array([j.arrival for j in inst.jobs])
        self.w = np.array(weights(inst))
        self.opts, self.mask, self.dur, self.dem = [], [], [], []
        for ol in opts:
            conc = [o for o in ol if o.alloc is not None]
            m = np.zeros((len(conc), len(gid)), dtype=bool)
            for k, o in enumerate(conc):
                m[k, [gid[g] for g in o.alloc.gpus]] = True
            self.opts.append(conc)
            self.mask.append(m)
            self.dur.append(np.array([o.dur for o in conc]))
            self.dem.append(np.array([[o.demand.get(r, 0.0) for r in res] for o in conc]).reshape(len(conc), len(res)))
        self.ng = len(gid)
        self.nr = len(res)
        self.gaps = False

    @staticmethod
    def applicable(inst: Instance, opts: list[list[Option]]) -> bool:
        return not inst.cluster.has_interference and all(any(o.alloc is not None for o in ol) for ol in opts)

    def _held_after(self, ends, dems):
        """(end times ascending, CPUs/memory still held from each of them on): row i is what the placed
        jobs ending after ends[i] hold; row 0 (time −inf) everything."""
        np = self.np
        if not len(ends):
            return np.array([-np.inf]), np.zeros((1, self.nr))
        o = np.argsort(ends, kind="stable")
        e, d = np.asarray(ends)[o], np.asarray(dems)[o]
        suffix = np.cumsum(d[::-1], axis=0)[::-1]           # suffix[i] = Σ_{p ≥ i} d_p
        held = np.vstack([suffix, np.zeros((1, self.nr))])   # held[i] from e[i-1] on (held[0]: all)
        return np.concatenate([[-np.inf], e]), held

    def _starts(self, j, ks, state, p):
        """Earliest starts of job ``j``'s options ``ks`` (a slice or index list) after the ``p`` placed jobs."""
        if self.gaps:
            return self._gap_starts(j, ks, state, p)
        np = self.np
        free, last, ends, dems = state
        st = np.maximum(np.maximum(self.arr[j], last), np.where(self.mask[j][ks], free, -np.inf).max(axis=1))
        if self.nr:
            times, held = self._held_after(ends, dems)
            # per resource, the first row from which an option fits (each column only falls: a
            # binary search), the latest of them over the resources
            dem = self.dem[j][ks]
            first = np.zeros(len(dem), dtype=int)
            for r in range(self.nr):
                first = np.maximum(first, np.searchsorted(-held[:, r], dem[:, r] - self.cap[r], side="left"))
            ok = first < len(times)
            st = np.where(ok, np.maximum(st, times[np.minimum(first, len(times) - 1)]), np.inf)
        return st

    def _gap_starts(self, j, ks, state, p):
        """Gap rule: from the arrival, each option's start is pushed past the latest end among the placed
        jobs that share a GPU with it and overlap [start, start + duration) (no earlier start is free: each
        of them must have ended), and, where the node CPUs/memory it holds do not fit at some instant τ of
        that run (at its start or at a placed job's start within it), to the first end after τ (what is held
        only falls at ends), until neither happens."""
        np = self.np
        d = self.dur[j][ks]
        t = np.full(len(d), self.arr[j])
        S, E, M, D = (x[:p] for x in state)
        if self.nr:
            dem = self.dem[j][ks]
            t[(dem > self.cap).any(axis=1)] = np.inf
        live = E > self.arr[j] + EPS
        if not live.any():
            return t
        S, E, D = S[live], E[live], D[live]
        shares = (self.mask[j][ks] @ M[live].T) > 0.5      # GPUs shared with each placed job
        if self.nr:     # whether option k does not fit beside what is held at placed start q
            held_q = ((S[None, :] <= S[:, None]) & (S[:, None] < E[None, :])).astype(float) @ D
            misfit_q = ((held_q[None, :, :] + dem[:, None, :]) > self.cap).any(axis=2)
        while True:
            clash = shares & (S[None, :] < (t + d)[:, None] - EPS) & (E[None, :] > t[:, None] + EPS)
            if clash.any():
                t = np.maximum(t, np.where(clash, E[None, :], -np.inf).max(axis=1))
                continue
            if not self.nr:
                return t
            held = ((S[None, :] <= t[:, None] + EPS) & (E[None, :] > t[:, None] + EPS)).astype(float) @ D
            inside = misfit_q & (S[None, :] > t[:, None] + EPS) & (S[None, :] < (t + d)[:, None] - EPS)
            tau = np.where(((held + dem) > self.cap).any(axis=1), t, np.where(inside, S[None, :], np.inf).min(axis=1))
            push = np.isfinite(tau)
            if not push.any():
                return t
            t = np.where(push, np.where(E[None, :] > tau[:, None] + EPS, E[None, :], np.inf).min(axis=1), t)

    def _earliest(self, j, st):
        """The option of earliest completion (ties: shorter, then first)."""
        return int(self.np.lexsort((self.dur[j], st + self.dur[j]))[0])

    def _empty(self, n: int) -> list:
        np = self.np
        if self.gaps:       # starts, ends, GPU masks and CPU/memory held, by position
            return [np.empty(n), np.empty(n), np.zeros((n, self.ng), dtype=np.float32), np.zeros((n, self.nr))]
        return [np.zeros(self.ng), -np.inf, [], []]     # GPU free times, last start, ends, CPU/memory held

    def _resumed(self, tr: SGSTrace, p: int) -> list:
        """The state of ``tr``'s list schedule before its position ``p``."""
        if self.gaps:
            return [x.copy() for x in tr.state]
        frees, lasts, ends, dems = tr.state
        return [frees[p].copy(), lasts[p], ends[:p], dems[:p]]

    def _place(self, j, k, s, state, p) -> float:
        """Job ``j`` on option ``k`` from ``s``: its GPUs and CPUs/memory are held until its end (returned)."""
        e = s + self.dur[j][k]
        if self.gaps:
            state[0][p], state[1][p], state[2][p], state[3][p] = s, e, self.mask[j][k], self.dem[j][k]
            return e
        state[0][self.mask[j][k]] = e
        state[1] = s
        if self.nr:
            state[2].append(e)
            state[3].append(self.dem[j][k])
        return e

    def run(self, order, fixed=None, resume=None):
        """(objective, choice per job, start per job) of the list schedule; fixed: job → option index
        (None or absent: earliest completion). ``resume=(trace, p)`` (:meth:`trace`) starts from the
        trace's state before its position p instead of from scratch: the same result wherever ``order[:p]``
        is the trace's and those jobs choose as they did there (fixed to the trace's choices, or
        earliest completion within the trace's ``ec_len`` leading positions)."""
        np = self.np
        n = len(order)
        if resume is None or resume[1] == 0:
            p0, state = 0, self._empty(n)
            comp, choice, start = np.empty(n), [0] * n, np.empty(n)
        else:
            tr, p0 = resume
            state = self._resumed(tr, p0)
            comp, choice, start = tr.comp.copy(), list(tr.choice), tr.start.copy()
        for p in range(p0, n):
            j = order[p]
            k = None if fixed is None else fixed.get(j)
            if k is None:
                st = self._starts(j, slice(None), state, p)
                k = self._earliest(j, st)
                s = float(st[k])
            else:
                s = float(self._starts(j, [k], state, p)[0])
            if not np.isfinite(s):
                return math.inf, choice, start
            comp[j], choice[j], start[j] = self._place(j, k, s, state, p), k, s
        return self._objective(comp), choice, start

    def trace(self, order, choice) -> "SGSTrace":
        """The list schedule of ``order`` with every job on its ``choice``, recorded so that :meth:`run`
        can resume it at any position (the state before each position, and how many leading positions
        chose the earliest-completion option)."""
        np = self.np
        n = len(order)
        state = self._empty(n)
        if not self.gaps:       # the start-order rule records its GPU free times and last start by position
            frees, lasts = np.empty((n + 1, self.ng)), np.empty(n + 1)
        comp, start = np.empty(n), np.empty(n)
        ec_len = None
        for p, j in enumerate(order):
            if not self.gaps:
                frees[p], lasts[p] = state[0], state[1]
            k = choice[j]
            if ec_len is None:      # every option's start, until a job chooses otherwise than earliest completion
                st = self._starts(j, slice(None), state, p)
                if self._earliest(j, st) != k:
                    ec_len = p
                s = float(st[k])
            else:
                s = float(self._starts(j, [k], state, p)[0])
            if not np.isfinite(s):
                raise ValueError("trace of an infeasible list schedule")
            comp[j], start[j] = self._place(j, k, s, state, p), s
        if self.gaps:
            record = tuple(state)
        else:
            frees[n], lasts[n] = state[0], state[1]
            record = (frees, lasts, state[2], state[3])
        return SGSTrace(list(order), list(choice), record, comp, start,
                        n if ec_len is None else ec_len, self._objective(comp))

    def _objective(self, comp):
        if self.inst.objective == "makespan":
            return float(comp.max() - self.arr.min())
        return float(((comp - self.arr) * self.w).sum() / self.w.sum())

    def allocs(self, choice) -> dict:
        return {j: self.opts[j][k].alloc for j, k in enumerate(choice)}


#: the local search restarts from a perturbed best after this many × n moves without a gain, perturbed by
#: this many random moves
LS_STALL = 10
LS_KICK = 3


def _start_order(start) -> list:
    """Job indices by start, ties by job: the order in which the local search records a state (its list
    schedule on the same allocations is no worse, :class:`SGS`)."""
    return sorted(range(len(start)), key=lambda j: (start[j], j))


def _move(tr: SGSTrace, arr, rnd):
    """A random swap or insertion on ``tr``'s order, as (new order, i, k), or None. A job is never moved
    ahead of jobs that start before it arrives (they would all wait for it): an insertion goes to the first
    position that starts no earlier than its arrival instead, and such a swap is not made."""
    n = len(tr.order)
    order = list(tr.order)
    i, k = rnd.randrange(n), rnd.randrange(n)
    swap = rnd.random() < 0.5
    if k < i:
        first = bisect.bisect_left(tr.order_starts, arr[order[i]], lo=k, hi=i)
        if swap and first > k:
            return None
        k = first
    elif swap and arr[order[k]] > tr.start[order[i]]:
        return None
    if i == k:
        return None
    if swap:
        order[i], order[k] = order[k], order[i]
    else:
        order.insert(k, order.pop(i))
    return order, i, k


def _defer_pass(sg: SGS, cur: SGSTrace, deadline: float | None) -> SGSTrace:
    """Move jobs to the end of the order, largest least GPU area first, keeping each move that helps.

    A list schedule starts a job that arrives at idle GPUs at once; a job of many GPU-hours started early
    holds its GPUs while the jobs arriving after it wait. On PAL's 160-job workloads the best schedules
    found start such jobs (6-24 GPUs, 15-50 h) hours after their arrival, and random moves rarely pick
    them (PAL workload 3: 15 327 s → 12 116 s mean JCT from this pass alone, docs/oracle-offline.md,
    follow-up 21)."""
    import time as _t

    n = len(cur.order)
    area = [float((sg.dur[j] * sg.mask[j].sum(axis=1)).min()) for j in range(n)]
    slow = 0.0      # the longest step so far (as in :func:`_climb`)
    for j in sorted(range(n), key=lambda j: (-area[j], j)):
        t_step = _t.perf_counter()
        if deadline is not None and t_step + slow >= deadline:
            break
        p = cur.order.index(j)
        if p == n - 1:
            continue
        order = cur.order[:p] + cur.order[p + 1:] + [j]
        fixed = dict(enumerate(cur.choice))
        fixed[j] = None
        # the others keep their GPUs, or every job re-chooses (earliest completion)
        tries = [sg.run(order, fixed, resume=(cur, p)), sg.run(order, None, resume=(cur, min(p, cur.ec_len)))]
        obj, ch, st = min(tries, key=lambda t: t[0])
        if obj < cur.objective - 1e-9:
            cur = sg.trace(_start_order(st), ch)
        slow = max(slow, _t.perf_counter() - t_step)
    return cur


#: share of the local search's time (or moves) with the start-order rule; the rest fills gaps (:class:`SGS`)
LS_START_ORDER_SHARE = 0.5


def local_search(inst: Instance, opts: list[list[Option]], seeds: list, deadline: float | None, rng_seed: int = 0,
                 max_iters: int | None = None, start_order_share: float | None = None):
    """Improve priority orders by list scheduling (:class:`SGS`) until ``deadline`` (perf_counter).

    ``max_iters`` bounds the moves (deterministic when ``deadline`` is None).
    ``seeds``: start orders (lists of job indices) and/or (order, allocation dict) pairs. Moves: swap
    two jobs, move one job elsewhere; per state, both earliest-completion choice and the fixed
    allocations of the best state are tried; moves are :func:`_move`'s (none puts a job ahead of jobs that
    start before it arrives), after a first pass of :func:`_defer_pass`. A move re-schedules from its first
    changed position (:meth:`SGS.run` with ``resume``); an improving one becomes the current state in start
    order (ties by job). After ``LS_STALL`` × n moves without a gain it restarts from the best state
    perturbed by ``LS_KICK`` moves. The first ``start_order_share`` (default ``LS_START_ORDER_SHARE``) of the
    time (or moves) list-schedules
    by start order; the rest by the gap rule from the best state so far (no worse on the same order and
    allocations). Returns (objective, order, allocations) of the best list
    schedule (SGS objective; the caller re-times and replays it), or None.
    """
    import random
    import time as _t

    sg = SGS(inst, opts)
    rnd = random.Random(rng_seed)
    best = None
    for sd in seeds:
        if best is not None and deadline is not None and _t.perf_counter() >= deadline:
            break       # one seed's list schedule at least; the others only while time is left
        if isinstance(sd, tuple):
            order, alloc = sd
            idx = {}
            for j, a in alloc.items():
                idx[j] = next((k for k, o in enumerate(sg.opts[j]) if o.alloc == a), None)
            o1, c1, s1 = sg.run(order, idx)
            best = _better(best, (o1, _start_order(s1), c1))
        else:
            order = sd
        o2, c2, s2 = sg.run(order)
        best = _better(best, (o2, _start_order(s2), c2))
    if best is None or not math.isfinite(best[0]):
        return None
    start = _t.perf_counter()
    share = min(max(LS_START_ORDER_SHARE if start_order_share is None else start_order_share, 0.0), 1.0)
    for gaps, lo, hi in ((False, 0.0, share), (True, share, 1.0)):
        if hi <= lo:
            continue
        sg.gaps = gaps
        until = None if deadline is None else start + hi * (deadline - start)
        if until is not None and _t.perf_counter() >= until:
            continue        # no time for this phase (its first list schedule alone is a whole run)
        iters = None if max_iters is None else math.ceil((hi - lo) * max_iters)
        best = _better(best, _climb(sg, sg.trace(best[1], best[2]), until, iters, rnd))
    return best[0], best[1], sg.allocs(best[2])


def _better(best, cand):
    return cand if best is None or cand[0] < best[0] - 1e-9 else best


def _state(tr: SGSTrace) -> tuple:
    """(objective, start order, choices) of a recorded list schedule: its own start order, which the gap rule
    need not follow, so that list scheduling that order re-creates it (or better)."""
    return tr.objective, _start_order(tr.start), tr.choice


def _climb(sg: SGS, cur: SGSTrace, deadline: float | None, max_iters: int | None, rnd):
    """Hill climbing with restarts from ``cur`` (see :func:`local_search`); the best (objective, start
    order, choices)."""
    import time as _t

    n = len(cur.order)
    best = _state(cur)
    cur = _defer_pass(sg, cur, deadline)
    best = _better(best, _state(cur))
    best_tr = cur
    stall = 0
    it = 0
    slow = 0.0      # the longest step so far: a step starts only if one as long ends by the deadline
    t_step = _t.perf_counter()
    while (n > 1 and (deadline is None or t_step + slow < deadline)
           and (max_iters is None or it < max_iters)):
        mv = _move(cur, sg.arr, rnd)
        if mv is None:
            continue
        it += 1
        order, i, k = mv
        if rnd.random() < 0.5:
            # re-choose the moved jobs (earliest completion), keep the others' allocations
            fixed = {j: c for j, c in enumerate(cur.choice)}
            for j in (cur.order[i], cur.order[k]):
                fixed[j] = None
            p = min(i, k)
        else:
            fixed, p = None, min(i, k, cur.ec_len)
        obj, ch, st = sg.run(order, fixed, resume=(cur, p))
        if obj < cur.objective - 1e-9:
            cur = sg.trace(_start_order(st), ch)
            if cur.objective < best[0] - 1e-9:
                best, best_tr = _state(cur), cur
            stall = 0
        else:
            stall += 1
            if stall > LS_STALL * n:        # restart from a perturbed best
                kicked = best_tr
                for _ in range(LS_KICK):
                    if (mv := _move(kicked, sg.arr, rnd)) is not None:
                        o, c, st = sg.run(mv[0])
                        if math.isfinite(o):
                            kicked = sg.trace(_start_order(st), c)
                cur = kicked
                stall = 0
        now = _t.perf_counter()
        slow, t_step = max(slow, now - t_step), now
    return best
