"""The short lists a learned policy chooses from: allocations (level 1) and placements (level 2).

A *shape* is an allocation without its GPUs: a GPU count, the GPU types it may use (one type, or a
mix) and, for a parameter-server job, a number of parameter servers. For each job the speed model
(:mod:`jctlab.speed`, Optimus' PS overhead terms for PS jobs) ranks the shapes that fit the free GPUs
now and keeps at most ``max_shapes``: for every allowed size its fastest single types, then mixes
(all usable types, then without the fastest, without the two fastest...: a mix that leaves the best
GPUs to others), and for PS jobs the server counts. Each shape is then *placed* by ``len(RULES)`` placement rules, each a
different trade-off of SPEC §2's terms:

- ``pack``: the fewest nodes, then the fewest CPU sockets, best fit (the node whose eligible free GPUs
  are fewest), the fastest GPUs under the job's class variability;
- ``fast``: the fastest GPUs for the job (variability, type rates), nodes second;
- ``quiet``: the fewest nodes, then the least interference suffered and caused: co-located classes
  (``interference``), PCIe switches shared with running jobs, sockets;
- ``match``: the fewest nodes, the GPUs where the job's comparative advantage is largest: its speed
  there over the mean speed there of the other waiting jobs' classes (leaving each GPU to the job it
  suits best, as an assignment would; the oracles' schedules do this under variability).

The policy, not these rules, decides: which job, which shape, which placement, or to wait. The rules
only make the choice set short (a candidate is priced exactly: its base iteration time from
:func:`jctlab.speed.base_iteration_time`, times the co-location factor it would meet now). Two rules
that give the same GPUs give one candidate (the duplicate is masked). Candidates hold the fair CPU and
memory share (``cpu_mem`` levels are not chosen; documented in docs/rl.md).

Speed (a decision must take well under 10 ms at 64 jobs × 16 nodes): GPUs are numbered once per
instance (:class:`PlannerCache`: node, index, type, socket, switch and per-class factors as plain
lists), and a placement is a pure function of the job's class (and, for mixes, its rates per type),
the shape, the rule and the part of the state the rule reads: the free GPUs of the shape's types (with
CPU room), plus the busy nodes and PCIe switches for ``quiet`` and the waiting classes for ``match``.
The cache remembers placements under exactly that key, and candidates of jobs without parameter servers
on clusters without interference under (job, shape, rule, GPUs), across the decisions of an episode:
it is a memo, never stale, and the lists are the same with or without it (a test holds them to the
first, object-by-object implementation on random states).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

from jctlab.engine import Engine
from jctlab.model import GPU, Allocation, Instance, Job
from jctlab.resources import cpus_fit, gpu_room, node_demand
from jctlab.speed import SpeedError, alloc_switches, ps_overhead_s, switch_factor

RULES = ("pack", "fast", "quiet", "match")
PACK, FAST, QUIET, MATCH = range(4)
_MAX_MEMO = 200_000     # entries per memo before it is cleared (an episode of 64 jobs uses a few thousand)


@dataclass(frozen=True)
class Shape:
    """A level-1 decision: ``n`` GPUs of the ``types`` (sorted; several: a mix) with ``ps`` parameter servers."""

    n: int
    types: tuple[str, ...]
    ps: int = 0


@dataclass(frozen=True)
class Candidate:
    """A start the policy may choose: job index, shape, placement rule and the allocation it gives."""

    job: int
    shape: Shape
    rule: int
    alloc: Allocation
    iter_time: float      # base iteration time x the co-location factor met now
    base_time: float      # base iteration time alone (locality, variability, sockets included)
    nodes: int            # nodes spanned
    spans_sockets: bool
    switch_share: int     # running jobs on its PCIe switches
    colocation: float     # class-interference factor - 1 met now


class PlannerCache:
    """Per-instance constants of the planner and its memo across decision points (one per episode).

    GPUs are numbered node by node (the order of ``cluster.nodes``), by index within a node, so sorting
    numbers sorts a node's GPUs by index."""

    def __init__(self, inst: Instance):
        self.inst = inst
        cl = inst.cluster
        pos = {nd.name: i for i, nd in enumerate(cl.nodes)}
        gpus = sorted(cl.gpus, key=lambda g: (pos[g.node], g.index))
        self.gpus: tuple[GPU, ...] = tuple(gpus)
        self.num = {g.id: i for i, g in enumerate(gpus)}
        self.ids = [g.id for g in gpus]
        self.node = [g.node for g in gpus]
        self.index = [g.index for g in gpus]
        self.type = [g.type for g in gpus]
        self.socket = [g.socket for g in gpus]
        self.switch = [g.switch for g in gpus]
        by_name = sorted(range(len(gpus)), key=lambda i: (gpus[i].node, gpus[i].index))
        self.rank = [0] * len(gpus)              # position in (node name, index) order: the allocation's order
        for r, i in enumerate(by_name):
            self.rank[i] = r
        self.fair_cpus = {nd.name: nd.fair_cpus for nd in cl.nodes}
        self.interfering = cl.has_interference or cl.has_switch_interference
        self.has_switches = any(s is not None for s in self.switch)
        self._factor: dict[str | None, list[float]] = {}
        self.placements: dict[tuple, tuple[int, ...] | None] = {}
        self.candidates: dict[tuple, Candidate | None] = {}
        self.shapes: dict[tuple, list[Shape]] = {}

    def factor(self, cls: str | None) -> list[float]:
        """Each GPU's variability factor for the class (``GPU.factor``)."""
        f = self._factor.get(cls)
        if f is None:
            f = self._factor[cls] = [g.factor(cls) for g in self.gpus]
        return f

    def trim(self) -> None:
        for memo in (self.placements, self.candidates, self.shapes):
            if len(memo) > _MAX_MEMO:
                memo.clear()


class Planner:
    """Candidates for the jobs waiting at one decision point (one per decision). ``cache``: the
    episode's :class:`PlannerCache` (a fresh one when None or made for another instance)."""

    def __init__(self, inst: Instance, engine: Engine, max_shapes: int = 8, waiting: Iterable[int] = (),
                 cache: PlannerCache | None = None):
        self.inst = inst
        self.waiting_classes = sorted({inst.jobs[j].job_class for j in waiting} - {None})
        self.cl = inst.cluster
        self.eng = engine
        self.max_shapes = max_shapes
        c = self.cache = cache if cache is not None and cache.inst is inst else PlannerCache(inst)
        c.trim()
        # free GPUs whose node still has CPUs for them at the fair share (numbers of the cache), node order
        self._free: dict[str, list[int]] = {}
        counts: dict[str, int] = {}
        for nd in self.cl.nodes:
            ids = engine.free[nd.name]
            if not ids:
                continue
            k = int(min(len(ids), gpu_room(self.cl, nd.name, engine.cpu_used)))
            if k > 0:
                nums = sorted(c.num[g] for g in ids)[:k]
                self._free[nd.name] = nums
                for i in nums:
                    counts[c.type[i]] = counts.get(c.type[i], 0) + 1
        self.free_count = sum(counts.values())
        self._type_count = counts
        self._pools: dict[tuple[str, ...], dict[str, list[int]]] = {}
        self._pool_keys: dict[tuple[str, ...], tuple] = {}
        self._quiet_keys: dict[tuple[str, ...], tuple] = {}
        self._node_pressure = {v: float(len(js)) for v, js in engine.node_jobs.items()}

    @property
    def free(self) -> dict[str, list[GPU]]:
        """The free GPUs with CPU room at the fair share, per node (nodes in cluster order, GPUs by index)."""
        g = self.cache.gpus
        return {v: [g[i] for i in nums] for v, nums in self._free.items()}

    # ------------------------------------------------------------------ shapes (level 1)
    def shapes(self, j: int) -> list[Shape]:
        """Up to ``max_shapes`` shapes for job j that fit the free GPUs now, fastest first per size."""
        job = self.inst.jobs[j]
        rates = job.samples_per_s
        by_type = tuple(sorted((t, k) for t, k in self._type_count.items() if rates.get(t, 0.0) > 0))
        key = (j, self.max_shapes, by_type)
        out = self.cache.shapes.get(key)
        if out is None:
            out = self.cache.shapes[key] = shapes_for(job, dict(by_type), self.max_shapes)
        return out

    # ------------------------------------------------------------------ placements (level 2)
    def candidates(self, j: int) -> list[list[Candidate | None]]:
        """For each shape of job j, one candidate per placement rule (None: no fit, or a duplicate)."""
        out = []
        for shape in self.shapes(j):
            row: list[Candidate | None] = []
            seen: set[tuple[str, ...]] = set()
            for r in range(len(RULES)):
                c = self._candidate(j, shape, r)
                if c is not None and c.alloc.gpus in seen:
                    c = None
                if c is not None:
                    seen.add(c.alloc.gpus)
                row.append(c)
            out.append(row)
        return out

    def _candidate(self, j: int, shape: Shape, rule: int) -> Candidate | None:
        job = self.inst.jobs[j]
        nums = self._placement(job, shape, rule)
        if nums is None:
            return None
        cache = self.cache
        memo = job.ps is None and not cache.interfering    # then the candidate depends on nothing else
        if memo:
            key = (j, shape, rule, nums)
            if key in cache.candidates:
                return cache.candidates[key]
        c = self._price(j, job, shape, rule, nums)
        if memo:
            cache.candidates[key] = c
        return c

    def _price(self, j: int, job: Job, shape: Shape, rule: int, nums: tuple[int, ...]) -> Candidate | None:
        cache = self.cache
        ids = tuple(cache.ids[i] for i in nums)
        ps_nodes = self._ps_nodes(job, nums, shape.ps)
        if ps_nodes is None:
            return None
        alloc = Allocation(ids, ps_nodes)
        # the free GPUs already have their fair CPU share (and memory) free; parameter servers need more
        if ps_nodes and not cpus_fit(self.cl, self.eng.cpu_used, node_demand(job, alloc, self.cl)[0]):
            return None
        try:
            base = self.eng.base_time(j, alloc)
        except SpeedError:
            return None
        coloc, share = met_now(self.inst, self.eng, job, alloc)
        nodes = {cache.node[i] for i in nums} | set(ps_nodes)
        it = base * (1.0 + coloc) * switch_factor(self.cl, share)
        return Candidate(j, shape, rule, alloc, it, base, len(nodes), self._spans_sockets(nums), share, coloc)

    def _spans_sockets(self, nums: Sequence[int]) -> bool:
        """:func:`jctlab.speed.spans_sockets` on numbered GPUs."""
        sock, node = self.cache.socket, self.cache.node
        first: dict[str, int] = {}
        for i in nums:
            s = sock[i]
            if s is not None and first.setdefault(node[i], s) != s:
                return True
        return False

    def _ps_nodes(self, job: Job, nums: Sequence[int], p: int) -> tuple[str, ...] | None:
        """``p`` parameter servers: on the job's GPU nodes with CPU room (most GPUs first, round robin),
        then on other nodes; None when the CPUs do not hold them. ``()`` for a job without PS."""
        if job.ps is None:
            return ()
        cl, node = self.cl, self.cache.node
        cpu = dict(self.eng.cpu_used)
        on: dict[str, int] = {}
        for i in nums:
            v = node[i]
            cpu[v] = cpu.get(v, 0.0) + self.cache.fair_cpus[v]
            on[v] = on.get(v, 0) + 1
        order = sorted(on, key=lambda v: -on[v]) + [nd.name for nd in cl.nodes if nd.name not in on]
        out: list[str] = []
        while len(out) < p:
            placed = False
            for v in order:
                if len(out) < p and cpus_fit(cl, cpu, {v: job.ps.ps_cpus}):
                    cpu[v] = cpu.get(v, 0.0) + job.ps.ps_cpus
                    out.append(v)
                    placed = True
            if not placed:
                return None
        return tuple(sorted(out))

    # ------------------------------------------------------------------ the placement rules
    def _pool(self, types: tuple[str, ...]) -> dict[str, list[int]]:
        """The free GPUs of the types, per node (nodes without one left out)."""
        pool = self._pools.get(types)
        if pool is None:
            ty = self.cache.type
            pool = {}
            for v, nums in self._free.items():
                gl = [i for i in nums if ty[i] in types]
                if gl:
                    pool[v] = gl
            self._pools[types] = pool
            self._pool_keys[types] = tuple(i for gl in pool.values() for i in gl)
        return pool

    def _quiet_key(self, types: tuple[str, ...]) -> tuple:
        """What ``quiet`` reads beyond the pool: running jobs on the pool's nodes, busy switches of its GPUs."""
        key = self._quiet_keys.get(types)
        if key is None:
            pool, c = self._pools[types], self.cache
            busy = ()
            if c.has_switches:
                sj = self.eng.switch_jobs
                busy = tuple(len(sj.get((c.node[i], c.switch[i]), ())) for gl in pool.values() for i in gl)
            key = self._quiet_keys[types] = (tuple(self._node_pressure.get(v, 0.0) for v in pool), busy)
        return key

    def _placement(self, job: Job, shape: Shape, rule: int) -> tuple[int, ...] | None:
        """The GPUs (numbers, in allocation order) the rule gives the shape; None when they do not fit."""
        types, cls = shape.types, job.job_class
        self._pool(types)
        # a single type: the rate is one positive constant, so the order of GPUs depends on the class only
        key: tuple = (shape.n, types, cls, rule, self._pool_keys[types])
        if len(types) > 1:
            key += (tuple(job.samples_per_s.get(t, 0.0) for t in types),)
        if rule == QUIET:
            key += self._quiet_key(types)
        elif rule == MATCH:
            key += (tuple(self.waiting_classes),)
        memo = self.cache.placements
        if key in memo:
            return memo[key]
        nums = self._place(job, shape, rule)
        memo[key] = nums
        return nums

    def _values(self, job: Job, pool: dict[str, list[int]], match: bool) -> dict[int, float]:
        """Each pool GPU's speed for the job (rate over variability); for ``match`` over the mean speed of
        the other waiting classes there."""
        c, cls = self.cache, job.job_class
        fac, ty, rates = c.factor(cls), c.type, job.samples_per_s
        others = [k for k in self.waiting_classes if k != cls] if match else []
        other_f = [c.factor(k) for k in others]
        value: dict[int, float] = {}
        for gl in pool.values():
            for i in gl:
                f = fac[i]
                x = rates.get(ty[i], 0.0) / f if f > 0 else math.inf
                if others:        # comparative advantage: the speed over the other classes' mean speed
                    x = x / (sum(1.0 / max(of[i], 1e-12) for of in other_f) / len(others))
                value[i] = x
        return value

    def _place(self, job: Job, shape: Shape, rule: int) -> tuple[int, ...] | None:
        n = shape.n
        pool = self._pool(shape.types)
        if sum(len(gl) for gl in pool.values()) < n:
            return None
        c = self.cache
        value = self._values(job, pool, rule == MATCH)
        if rule == FAST:
            node, index = c.node, c.index
            size = {v: len(gl) for v, gl in pool.items()}
            allg = sorted((i for gl in pool.values() for i in gl),
                          key=lambda i: (-value[i], -size[node[i]], node[i], index[i]))
            return self._in_gpu_order(allg[:n])
        quiet = rule == QUIET
        hosts = [v for v, gl in pool.items() if len(gl) >= n]
        if hosts:
            if rule == MATCH:
                key = lambda v: (-_best_sum(pool[v], n, value), len(pool[v]), v)  # noqa: E731
            elif quiet:
                key = lambda v: (self._node_pressure.get(v, 0.0), len(pool[v]), v)  # noqa: E731
            else:
                key = lambda v: (len(pool[v]), -_best_sum(pool[v], n, value), v)  # noqa: E731
            v = min(hosts, key=key)
            return self._in_gpu_order(self._within_node(pool[v], n, value, quiet))
        # spread: nodes with the most eligible GPUs first (fewest nodes), quiet ones first for ``quiet``
        order = sorted(pool, key=lambda v: ((self._node_pressure.get(v, 0.0) if quiet else 0.0), -len(pool[v]), v))
        out: list[int] = []
        for v in order:
            take = min(n - len(out), len(pool[v]))
            out.extend(self._within_node(pool[v], take, value, quiet))
            if len(out) == n:
                break
        return self._in_gpu_order(out)

    def _within_node(self, gl: Sequence[int], n: int, value: dict[int, float], quiet: bool) -> list[int]:
        """n GPUs of one node: one socket when one holds n (the one with the fewest eligible GPUs: best fit),
        else the sockets with the most eligible GPUs; the fastest first within, and for ``quiet`` the GPUs
        under switches with no running job first."""
        c = self.cache
        sock, index = c.socket, c.index
        if quiet and c.has_switches:
            sj, node, switch = self.eng.switch_jobs, c.node, c.switch

            def rank(i: int):
                busy = len(sj.get((node[i], switch[i]), ())) if switch[i] is not None else 0
                return (busy, -value[i], index[i])
        else:
            def rank(i: int):
                return (0, -value[i], index[i])

        sockets: dict[int | None, list[int]] = {}
        for i in gl:
            sockets.setdefault(sock[i], []).append(i)
        if len(sockets) == 1:
            return sorted(gl, key=rank)[:n]
        fits = [s for s, l in sockets.items() if len(l) >= n]
        if fits:
            s = min(fits, key=lambda s: (len(sockets[s]), -1 if s is None else s))
            return sorted(sockets[s], key=rank)[:n]
        out: list[int] = []
        for s in sorted(sockets, key=lambda s: (-len(sockets[s]), -1 if s is None else s)):
            out.extend(sorted(sockets[s], key=rank)[: n - len(out)])
            if len(out) == n:
                break
        return out

    def _in_gpu_order(self, nums: Iterable[int]) -> tuple[int, ...]:
        return tuple(sorted(nums, key=self.cache.rank.__getitem__))


def met_now(inst: Instance, eng: Engine, job: Job, alloc: Allocation) -> tuple[float, int]:
    """(class interference, jobs sharing a switch) that ``job`` on ``alloc`` would meet now."""
    cl = inst.cluster
    coloc = 0.0
    if not (cl.has_interference or cl.has_switch_interference):
        return 0.0, 0
    if cl.has_interference:
        nodes = {g.split(":", 1)[0] for g in alloc.gpus} | set(alloc.ps_nodes)
        neigh: set[int] = set()
        for v in nodes:
            neigh |= eng.node_jobs[v]
        coloc = sum(cl.interference_of(job.job_class, inst.jobs[i].job_class) for i in neigh)
    share = 0
    if cl.has_switch_interference:
        on: set[int] = set()
        for s in alloc_switches(alloc, cl):
            on |= eng.switch_jobs.get(s, set())
        share = len(on)
    return coloc, share


def shapes_for(job: Job, by_type: dict[str, int], max_shapes: int) -> list[Shape]:
    """Up to ``max_shapes`` shapes of ``job`` on ``by_type`` free GPUs (usable types only): for every
    allowed size, largest first, its single types fastest first, then mixes, the fastest types left out
    one by one; for PS jobs each type choice with its server counts (:func:`ps_counts`)."""
    usable = sum(by_type.values())
    sizes = [n for n in job.sizes if n <= usable]
    if not sizes:
        return []
    per_size = max(1, max_shapes // len(sizes))
    out: list[Shape] = []
    ranked = sorted(by_type, key=lambda t: (-job.samples_per_s[t], t))
    for n in sorted(sizes, reverse=True):
        opts: list[tuple[tuple[str, ...], int]] = [((t,), 0) for t in ranked if by_type[t] >= n]
        for k in range(len(ranked) - 1):                  # mixes, the fastest types left out one by one
            mix = ranked[k:]
            if sum(by_type[t] for t in mix) >= n and not any(by_type[t] >= n for t in mix):
                opts.append((tuple(sorted(mix)), 0))
        if job.ps is not None:
            opts = [(t, p) for t, _ in opts for p in ps_counts(job, n)]
        out.extend(Shape(n, t, p) for t, p in opts[:per_size])
    return out[:max_shapes]


def ps_counts(job: Job, n: int) -> list[int]:
    """Server counts ordered by Optimus' overhead t1 + t2 n/p + t3 n + t4 p (least first)."""
    assert job.ps is not None
    ps = range(1, job.ps.max_ps + 1)
    return sorted(ps, key=lambda p: (ps_overhead_s(job.ps.theta, n, p), p))


def _best_sum(gl: Sequence[int], n: int, value: dict[int, float]) -> float:
    return sum(sorted((value[i] for i in gl), reverse=True)[:n])
