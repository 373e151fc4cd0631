"""What a job may run on in the offline oracles, and what it holds there.

An :class:`Option` is one choice of one job: either *concrete* (``alloc``: a GPU set, parameter-server
nodes and a CPU/memory level, with the exact duration of :func:`jctlab.speed.duration`) or *relaxed*
(``cls``: a class of allocations, "n GPUs on node v" or "n GPUs spread", with a duration that bounds every
member from below, :mod:`formulations.offline.classes`).

Every option carries its resource demands ``{resource: amount}``; :func:`capacities` gives each
resource's capacity. Resources: ``("g", gpu_id)`` (capacity 1), ``("n", node)`` GPU count of a node,
``("all",)`` GPU count of the cluster, ``("set", nodes)`` GPU count of a node group, ``("cpu", node)`` and
``("mem", node)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from jctlab.model import Allocation, Instance, Job
from jctlab.resources import ps_placements
from jctlab.speed import SpeedError, duration

EPS = 1e-9


@dataclass(frozen=True)
class Option:
    """One choice of job ``job``: duration ``dur`` and the resources it holds (``demand``)."""

    job: int
    dur: float
    demand: dict = field(hash=False, compare=False)
    alloc: Allocation | None = None      # concrete option
    cls: tuple | None = None             # relaxed class: ("node", name, n) | ("spread", n[, nodes, groups])
    ps_local: bool | None = None         # a PS job's node class: its PS on that node (True) or not (False)
    ps_count: int | None = None          # ... with ps_local True: that many servers, all on the node
    level: tuple | None = None           # a node class split by CPU/memory level: (cpus, mem) per GPU,
                                         # (None, None) the fair share


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


def node_class_demand(job: Job, nd, n: int, level: tuple | None = None) -> dict:
    """What every allocation of ``n`` GPUs on node ``nd`` (at ``level``, when given) holds at least: the GPU
    counts, and on the node ``n`` × the smallest CPUs and memory per GPU among the job's levels (the fair
    share when None)."""
    held = [per_gpu(nd, lv) for lv in (job.level_choices if level is None else (level,))]
    cpus = min(c for c, _ in held)
    mem = min(m for _, m in held)
    return {("n", nd.name): n, ("all",): n, ("cpu", nd.name): n * cpus, ("mem", nd.name): n * mem}


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


def node_groups(inst: Instance) -> list[tuple[str, ...]]:
    """Nodes grouped by their set of GPU types (a partition of the nodes, in node order)."""
    by: dict = {}
    for nd in inst.cluster.nodes:
        by.setdefault(tuple(sorted({g.type for g in nd.gpus})), []).append(nd.name)
    return [tuple(v) for v in by.values()]


def fits_alone(demand: dict, cap: dict) -> bool:
    return all(v <= cap[r] + EPS * max(1.0, cap[r]) for r, v in demand.items())


def dominated(a: Option, b: Option) -> bool:
    """a dominated by b: b no longer and holds no more of anything."""
    if b.dur > a.dur:
        return False
    for r, v in b.demand.items():
        if v > a.demand.get(r, 0.0) + 1e-12:
            return False
    return True


def undominated(opts: list[Option]) -> list[Option]:
    """The options no other kept option dominates (:func:`dominated`), fastest first. Long lists (one GPU
    set × every PS placement × level: 150+ on 16 nodes) compare against all kept ones at once (numpy)."""
    opts = sorted(opts, key=lambda o: (o.dur, sum(v for r, v in o.demand.items() if r[0] in ("cpu", "mem"))))
    if len(opts) <= 16:
        keep: list[Option] = []
        for o in opts:
            if not any(dominated(o, k) for k in keep):
                keep.append(o)
        return keep
    keys = list(dict.fromkeys(r for o in opts for r in o.demand))
    dem = np.array([[o.demand.get(r, 0.0) for r in keys] for o in opts])
    dem = dem[:, dem.max(axis=0) > dem.min(axis=0)]     # a resource all hold alike decides nothing
    dur = np.array([o.dur for o in opts])
    # dominance is transitive, so "no kept option before i dominates i" is "no option before i does"
    dom = (dur[:, None] <= dur[None, :]) & np.all(dem[:, None, :] <= dem[None, :, :] + 1e-12, axis=2)
    return [opts[i] for i in np.flatnonzero(~np.triu(dom, 1).any(axis=0))]


def ps_choices(job: Job, nodes: Sequence[str], gids: Sequence[str] = (),
               deadline: float | None = None) -> tuple[list[tuple[str, ...]], bool]:
    """(placements, complete): the PS placements (node multisets of ``nodes``) worth trying for ``job`` on the
    GPUs ``gids`` (:func:`jctlab.resources.ps_placements`: server counts 1..p* only, which is exact; at most
    MAX_PS_PLACEMENTS of them and none past ``deadline``, ``complete`` False when some were left out)."""
    gpu_nodes = sorted({g.split(":", 1)[0] for g in gids})
    return ps_placements(job, max(1, len(gids)), gpu_nodes, nodes, deadline=deadline)


@dataclass(frozen=True)
class SetOptions:
    """The options of one job on one GPU set; ``complete`` False when PS placements were left out
    (:func:`ps_choices`), so that the set's space is restricted, not complete."""

    options: list[Option]
    complete: bool


def options_for_set(inst: Instance, j: int, gids: tuple[str, ...], ps_nodes_pool: Sequence[str], cap: dict,
                    deadline: float | None = None) -> SetOptions:
    """Every (PS placement, level) option of job j on the GPUs ``gids`` that fits the empty cluster.

    With parameter servers a duration depends on the GPUs, the level, the server count and whether the job
    touches one node or several (SPEC §2: Optimus' overhead, the locality penalty), so it is priced once per
    such key (the same float :func:`duration` gives each allocation); the GPUs' demand is computed once per
    level and each placement adds its servers' CPUs (:func:`demand_of`'s rule). 150 000 options at 256 GPUs
    / 32 nodes. Placements past ``deadline`` are left out (``complete`` False)."""
    job = inst.jobs[j]
    gids = tuple(gids)
    gpu_nodes = frozenset(g.split(":", 1)[0] for g in gids)
    base: dict = {}      # level -> the GPUs' demand, or None where it does not fit alone
    priced: dict = {}    # (servers, several nodes, level) -> duration, or None where the model refuses it
    out = []
    placements, complete = ps_choices(job, ps_nodes_pool, gids, deadline)
    for psn in placements:
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
    return SetOptions(out, complete)


def allocations_on(inst: Instance, job: Job, gids: tuple[str, ...]) -> list[tuple[Allocation, float]]:
    """Every allocation of ``job`` on the GPU set ``gids`` (PS nodes × CPU/memory levels) with its
    duration, fastest first."""
    cl = inst.cluster
    node_names = [nd.name for nd in cl.nodes]
    gnodes = sorted({g.split(":", 1)[0] for g in gids})
    res = []
    for psn in ps_choices(job, node_names if len(node_names) <= 4 else gnodes, gids)[0]:
        for c, m in job.level_choices:
            a = Allocation(tuple(sorted(gids)), psn, c, m)
            try:
                res.append((a, duration(job, a, cl)))
            except SpeedError:
                pass
    res.sort(key=lambda x: x[1])
    return res


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


def single_node(alloc: Allocation) -> str | None:
    nodes = {g.split(":", 1)[0] for g in alloc.gpus}
    return next(iter(nodes)) if len(nodes) == 1 else None


def on_node(o: Option) -> str | None:
    """The node of a single-node option (class ``("node", v, n)`` or a GPU set on one node), else None."""
    if o.alloc is not None:
        return single_node(o.alloc)
    return o.cls[1] if o.cls is not None and o.cls[0] == "node" else None
