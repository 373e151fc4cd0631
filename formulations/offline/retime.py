"""Re-timing: a start order and per-job allocation choices become a valid schedule with exact float times.

Every incumbent of the offline oracles is re-timed here, never read off a model's rounded times:
:func:`retime` list-schedules an order through :class:`jctlab.simulate.Simulator` with a *chooser* (which
allocation a job takes among the free GPUs, CPUs and memory when its turn comes), so interference,
CPU/memory and every rule are those of replay. The choosers: :func:`fixed_chooser` (concrete decisions),
:func:`class_chooser` (the fastest free allocation of a relaxed class), :func:`mixed_chooser` (both),
:func:`packed_chooser` (best fit). :func:`realize` times fixed allocations in a fixed order on the event
engine.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

from jctlab.engine import Engine, time_tol
from jctlab.errors import InvalidSchedule
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import PolicyError, Simulator, Start

from ..results import NO_INCUMBENT, Incumbent
from .options import EPS, Option, allocations_on, demand_of, level_of, rho


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


def fits_now(inst, dem, free, cpu, mem) -> bool:
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
            fits = [b for b in cache[j] if fits_now(inst, demand_of(inst, job, b), free, cpu, mem)]
            return min(fits, key=lambda b: (_ps_spot(b, free), b != a)) if fits else None
        return a if fits_now(inst, demand_of(inst, job, a), free, cpu, mem) else None

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
            if fits_now(inst, dem, free, cpu, mem) and (best is None or _before(key, best[1])):
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
            if fits_now(inst, demand_of(inst, inst.jobs[j], alloc), free, cpu, mem) and (best is None or d < best[1]):
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
            if (best is None or key < best[1]) and fits_now(inst, demand_of(inst, job, alloc), free, cpu, mem):
                best = (alloc, key)
        return None if best is None else best[0]

    return choose


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
           dispatch: bool = False) -> Incumbent:
    """List-schedule ``order`` with ``choose`` (see :class:`_OrderPolicy`); the schedule and its replay, or
    none (a job the chooser cannot place, or an invalid replay)."""
    try:
        sched, rep = Simulator(inst, _OrderPolicy(order, choose, strict, dispatch), method=method).run()
    except PolicyError:
        return NO_INCUMBENT
    return Incumbent(sched, rep) if rep.valid else NO_INCUMBENT


def best_retime(inst: Instance, order: Sequence[int], choose_factory: Callable, method: str) -> Incumbent:
    """Strict list scheduling and backfilling of the same order; the better replayed schedule."""
    best = NO_INCUMBENT
    for strict in (True, False):
        best = best.better(retime(inst, order, choose_factory(), method, strict))
    return best


def realize(inst: Instance, order: Sequence[int], allocs: Sequence[Allocation],
            planned: Sequence[float] | None = None) -> list[float] | None:
    """Start times realising ``allocs`` in ``order`` on the event engine (interference included):
    each job starts at the first moment ≥ max(arrival, planned start, previous start) when its GPUs,
    CPUs and memory are free. None when some start is impossible (an allocation the engine rejects)."""
    eng = Engine(inst)
    starts = [0.0] * len(inst.jobs)
    t = 0.0
    for j in order:
        job = inst.jobs[j]
        t = max(t, job.arrival, 0.0 if planned is None else planned[j])
        while True:
            eng.pop_completions(t + time_tol(t))
            try:
                eng.start(j, allocs[j], t)
                break
            except InvalidSchedule:
                nxt = eng.next_completion()
                if nxt == math.inf:
                    return None
                t = max(t, nxt)
        starts[j] = t
    return starts
