"""Live plans by list scheduling, and their replay.

A plan is a list of the queued jobs (and of the running jobs it preempts now) in order, each with an
allocation or none. List scheduling starts the running jobs it keeps at 0 on their GPUs, then each job of
the list, in order, as early as its GPUs are free — and, when some job carries a parameter server or a
CPU/memory table, as early as its nodes have CPUs and memory for its whole run — so a later job never
delays an earlier one. A job without a given allocation gets the one that completes it earliest among: per
allowed size, the earliest-free usable GPUs of each node, of each socket when the cluster prices sockets
(``qpi_factor`` > 1), and of the whole cluster; for one GPU, the earliest-free GPU of each speed class (same
type, same slowdown for the job's class). On a tie: the fewest nodes, then the node with the fewest GPUs free
when it starts (best fit, which keeps whole nodes free for wide jobs; first fit scatters single-GPU jobs over
idle nodes). A parameter-server job gets one server on the node of its first GPU; every job runs at the fair
CPU/memory share unless its allocation is given (the oracle's plan).

:class:`Decoder` computes this without replay and re-evaluates a changed list from the first position that
changed (it keeps the state before each position): the improvement phase (:mod:`live.search`) calls it
thousands of times per decision. :func:`timed` replays the result with the core simulator
(:func:`jctlab.replay.replay`, preempted jobs ``resumed``), so every plan the planner emits is a valid
schedule of the live instance and carries the objective the replay computes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Callable, Iterable, Mapping, Sequence

from jctlab.engine import EPS
from jctlab.model import Allocation, Claimed, Schedule, Segment
from jctlab.replay import Replay, replay
from jctlab.resources import node_demand

from .instance import LiveInstance


@dataclass(frozen=True)
class Timed:
    """A plan as a replayed schedule of the live instance; ``released``: the running jobs it preempts now."""

    schedule: Schedule
    replay: Replay
    released: frozenset[int] = frozenset()

    @property
    def objective(self) -> float:
        return float(self.replay.objective)   # type: ignore[arg-type]


@dataclass
class Decoded:
    """A list-scheduled plan: the list, each job's allocation, start and end (from now), the objective,
    and the decoder's state before each position (to re-evaluate a change from there)."""

    released: frozenset[int]
    order: list[int]
    allocs: list[Allocation]
    starts: list[float]
    ends: list[float]
    objective: float
    forced: Mapping[int, Allocation] = field(default_factory=dict)
    frees: list[list[float]] = field(default_factory=list, repr=False)
    accs: list[float] = field(default_factory=list, repr=False)

    def pairs(self) -> list[tuple[int, Allocation]]:
        return list(zip(self.order, self.allocs))


@dataclass(frozen=True)
class _Group:
    """A candidate group of job j: pick its ``n`` earliest-free GPUs. ``one``/``spread``: the run time of
    any such pick within one node / over several, when it depends on nothing else (None: price the pick).
    One GPU (the pick's best fit reads them): ``times``, the free times of ``ids`` as a tuple; ``runs``,
    [a, b) of ``ids`` on one node each."""

    n: int
    ids: list[int]
    one_node: bool
    one: float | None
    spread: float | None
    times: Callable[[list[float]], tuple[float, ...]] | None = None
    runs: tuple[tuple[int, int], ...] = ()


class Decoder:
    """List scheduling of plans on one live instance (module docstring). ``decode(order, forced,
    released)``: ``forced`` maps a job to the allocation it must get (others get the earliest-completing
    one); ``released``: the running jobs preempted now (they must be in ``order``)."""

    def __init__(self, li: LiveInstance):
        self.li = li
        inst = li.instance
        cl = inst.cluster
        self.gid = [g.id for g in cl.gpus]
        self.gpos = {g: i for i, g in enumerate(self.gid)}
        self.gnode = [g.node for g in cl.gpus]
        self.node_times = {nd.name: _times([self.gpos[g.id] for g in nd.gpus]) for nd in cl.nodes}
        self.weights = li.weights
        self.total_weight = sum(self.weights)
        self.makespan = inst.objective == "makespan"
        self.capacity = any(j.ps is not None or j.cpu_mem is not None for j in inst.jobs)
        self._alloc: dict[tuple[int, tuple[int, ...]], Allocation] = {}
        self._bases: dict[frozenset[int], tuple[list[float], float, dict]] = {}
        self.cands = [self._candidates(j) for j in range(len(inst.jobs))]
        self.evaluations = 0

    # ------------------------------------------------------------------ static candidates
    def _candidates(self, j: int) -> list[_Group]:
        """Job j's candidate groups (module docstring), each with the run times its picks can have when
        they depend only on whether the pick spans nodes (same type and slowdown throughout, no socket
        pricing, no CPU accounting): then no allocation is priced while decoding."""
        li, cl = self.li, self.li.instance.cluster
        job = li.instance.jobs[j]
        usable = [self.gpos[g] for g in li.usable[j]]
        by_node: dict[str, list[int]] = {}
        by_socket: dict[tuple[str, int], list[int]] = {}
        by_speed: dict[tuple, list[int]] = {}
        for g in usable:
            gpu = cl.gpus[g]
            by_node.setdefault(gpu.node, []).append(g)
            if gpu.socket is not None:
                by_socket.setdefault((gpu.node, gpu.socket), []).append(g)
            # one GPU: its run time depends on its type and slowdown (and, for CPUs, on its node)
            kind = (gpu.type, gpu.factor(job.job_class), gpu.node if self.capacity else None)
            by_speed.setdefault(kind, []).append(g)
        out = []
        for n in job.sizes:
            if n > len(usable):
                continue
            if n == 1:
                groups = list(by_speed.values())
            else:
                groups = [ids for ids in by_node.values() if len(ids) >= n]
                if cl.qpi_factor != 1.0:
                    groups += [ids for ids in by_socket.values() if len(ids) >= n]
                groups.append(usable)
            for ids in groups:
                out.append(self._group(j, n, ids))
        return out

    def _group(self, j: int, n: int, ids: list[int]) -> _Group:
        cl = self.li.instance.cluster
        gpus = [cl.gpus[g] for g in ids]
        cls = self.li.instance.jobs[j].job_class
        nodes = {g.node for g in gpus}
        uniform = (not self.capacity and len({(g.type, g.factor(cls)) for g in gpus}) == 1
                   and (cl.qpi_factor == 1.0 or len({(g.node, g.socket) for g in gpus}) == 1))
        times, runs = (_times(ids), self._runs(ids)) if n == 1 else (None, ())
        if not uniform:
            return _Group(n, ids, len(nodes) == 1, None, None, times, runs)
        one = spread = None
        by_node: dict[str, list[int]] = {}
        for g in ids:
            by_node.setdefault(self.gnode[g], []).append(g)
        full = next((v for v in by_node.values() if len(v) >= n), None)
        if full is not None:
            one = self.li.duration(j, self.allocation(j, tuple(full[:n])))
        if len(by_node) > 1:   # n GPUs over at least two nodes
            lists = list(by_node.values())
            pick = [lists[0][0]] + [g for v in lists[1:] for g in v][:n - 1]
            pick += [g for g in lists[0][1:]][:n - len(pick)]
            if len(pick) == n:
                spread = self.li.duration(j, self.allocation(j, tuple(sorted(pick))))
        return _Group(n, ids, len(nodes) == 1, one, spread, times, runs)

    def _runs(self, ids: list[int]) -> tuple[tuple[int, int], ...]:
        """[a, b) of each run of ``ids`` on one node (the GPUs of a node are contiguous in cluster order)."""
        cuts = [i for i in range(1, len(ids)) if self.gnode[ids[i]] != self.gnode[ids[i - 1]]]
        return tuple(zip([0, *cuts], [*cuts, len(ids)]))

    def allocation(self, j: int, gpus: tuple[int, ...]) -> Allocation:
        """The allocation of job j on GPUs ``gpus`` (sorted ints): one parameter server on the node of
        its first GPU for a PS job, the fair CPU/memory share."""
        key = (j, gpus)
        a = self._alloc.get(key)
        if a is None:
            job = self.li.instance.jobs[j]
            ids = tuple(self.gid[g] for g in gpus)
            a = Allocation(ids, (self.gnode[gpus[0]],) if job.ps is not None else ())
            self._alloc[key] = a
        return a

    # ------------------------------------------------------------------ state
    def _base(self, released: frozenset[int]) -> tuple[list[float], float, dict]:
        """(GPU free times, Σ w·end or max end of the running jobs kept, CPU/memory use per node) at 0."""
        b = self._bases.get(released)
        if b is None:
            li = self.li
            free = [0.0] * len(self.gid)
            acc = 0.0
            use: dict[str, list[tuple[float, float, float, float]]] = {}
            for r, alloc in li.pins.items():
                if r in released:
                    continue
                e = li.pinned_end[r]
                for g in alloc.gpus:
                    free[self.gpos[g]] = e
                acc = max(acc, e) if self.makespan else acc + self.weights[r] * e
                if self.capacity:
                    self._hold(use, r, alloc, 0.0, e)
            b = self._bases[released] = (free, acc, use)
        return b

    def base_free(self, released: Iterable[int] = ()) -> list[float]:
        """Each GPU's free time (decoder positions, cluster order) after the running jobs a plan keeps."""
        return list(self._base(frozenset(released))[0])

    def _hold(self, use: dict, j: int, alloc: Allocation, start: float, end: float) -> None:
        cpu, mem = node_demand(self.li.instance.jobs[j], alloc, self.li.instance.cluster)
        for n, c in cpu.items():
            use.setdefault(n, []).append((start, end, c, mem.get(n, 0.0)))

    def _fit(self, use: dict, j: int, alloc: Allocation, t0: float, d: float) -> float:
        """The earliest start >= t0 at which the nodes of ``alloc`` have its CPUs and memory for ``d`` s."""
        cl = self.li.instance.cluster
        cpu, mem = node_demand(self.li.instance.jobs[j], alloc, cl)
        t = t0
        while True:
            moved = False
            for n, c in cpu.items():
                node = cl.node[n]
                tn = earliest_fit(use.get(n, ()), t, d, c, mem.get(n, 0.0), node.cpus, node.mem_gb)
                if tn > t:
                    t, moved = tn, True
            if not moved or math.isinf(t):
                return t

    # ------------------------------------------------------------------ decoding
    def place(self, j: int, free: list[float], use: dict | None, resumed: bool,
              forced: Allocation | None = None, release: float = 0.0) -> tuple[Allocation, float, float]:
        """(allocation, start, end) of job j after the jobs already in ``free``/``use``, not before
        ``release`` (a job the planner holds back: :mod:`live.arrivals`)."""
        li = self.li
        restart = li.restart_s if resumed else 0.0
        if forced is not None:
            d = li.duration(j, forced) + restart
            start = max(release, *(free[self.gpos[g]] for g in forced.gpus))
            if use is not None:
                start = self._fit(use, j, forced, start, d)
            return forced, start, start + d
        best: tuple[float, int, tuple[int, ...], float] | None = None
        left = -1    # best's other GPUs free on its node when it starts (-1: not counted yet)
        for c in self._picks(j, free, use, restart, release):
            if best is None or c[0] < best[0] or (c[0] == best[0] and c[1] < best[1]):
                best, left = c, -1
            elif c[0] == best[0] and c[1] == best[1] == 1:   # best fit: the fuller node
                if left < 0:
                    left = self._left(best, free)
                other = self._left(c, free)
                if other < left:
                    best, left = c, other
        if best is None or math.isinf(best[0]):
            raise AssertionError(f"job {li.instance.jobs[j].name} fits no allocation (the readers let it through)")
        return self.allocation(j, best[2]), best[3], best[0]

    def _left(self, pick: tuple[float, int, tuple[int, ...], float], free: list[float]) -> int:
        """How many other GPUs of the node of a one-node ``pick`` are free when it starts."""
        _, _, gpus, start = pick
        return sum(1 for t in self.node_times[self.gnode[gpus[0]]](free) if t <= start) - len(gpus)

    def options(self, j: int, free: list[float], use: dict | None, restart: float
                ) -> Iterable[tuple[float, int, Allocation, float]]:
        """Job j's candidate allocations after the jobs already in ``free``/``use``: (end, nodes,
        allocation, start) each, in the order of the module docstring."""
        for end, k, gpus, start in self._picks(j, free, use, restart):
            yield end, k, self.allocation(j, gpus), start

    def _picks(self, j: int, free: list[float], use: dict | None, restart: float, release: float = 0.0
               ) -> Iterable[tuple[float, int, tuple[int, ...], float]]:
        """(end, nodes, GPUs, start) of each candidate group's pick; one GPU: on the fullest node among the
        earliest-free ones (best fit, as :meth:`place` between groups)."""
        li = self.li
        fa = free.__getitem__
        gnode = self.gnode
        for grp in self.cands[j]:
            n, ids = grp.n, grp.ids
            if n == 1:
                times = grp.times(free)   # type: ignore[misc]
                start = min(times)
                i = times.index(start)
                if len(grp.runs) > 1 and times.count(start) > 1:
                    # best fit as in place(), counted on this group's GPUs (its runs; no scan of whole nodes):
                    # the node with the fewest of them free then, first in cluster order on a tie
                    fewest = len(ids) + 1
                    for a, b in grp.runs:
                        c = times[a:b].count(start)
                        if 0 < c < fewest:
                            fewest, i = c, a + times[a:b].index(start)
                gpus, k = (ids[i],), 1
            else:
                pick = sorted(ids, key=fa)[:n]
                gpus = tuple(sorted(pick))
                start = free[pick[-1]]
                k = 1 if grp.one_node else len({gnode[g] for g in pick})
            start = max(start, release)
            d = grp.one if k == 1 else grp.spread
            if d is None:
                alloc = self.allocation(j, gpus)
                d = li.duration(j, alloc)
                if use is not None:
                    start = self._fit(use, j, alloc, start, d + restart)
            yield start + d + restart, k, gpus, start

    def decode(self, order: Sequence[int], forced: Mapping[int, Allocation] | None = None,
               released: Iterable[int] = (), base: Decoded | None = None, start: int = 0,
               release: Mapping[int, float] | None = None) -> Decoded:
        """List-schedule ``order``. With ``base`` (a decoding of the same ``released`` whose list agrees
        with ``order`` before position ``start``), only positions ``start``... are computed again.
        ``release``: jobs that may not start before a time (held back; never with ``base``)."""
        self.evaluations += 1
        release = release or {}
        if release and base is not None:
            raise ValueError("decode: release times are not re-evaluated from a base")
        released = frozenset(released)
        forced = forced or {}
        pending = self.li.pending
        free0, acc0, use0 = self._base(released)
        snap = not self.capacity
        if base is not None and start > 0 and snap:
            free = list(base.frees[start])
            acc = base.accs[start]
            out = Decoded(released, list(order), base.allocs[:start], base.starts[:start], base.ends[:start], 0.0,
                          forced, base.frees[:start], base.accs[:start])
        else:
            start = 0
            free, acc = list(free0), acc0
            out = Decoded(released, list(order), [], [], [], 0.0, forced)
        use = {n: list(v) for n, v in use0.items()} if self.capacity else None   # (from 0: not snapshotted)
        w = self.weights
        gpos = self.gpos
        for j in out.order[start:]:
            if snap:
                out.frees.append(list(free))
                out.accs.append(acc)
            f = forced.get(j)
            if f is not None and not self.li.allowed(j, f):
                f = None
            alloc, s, e = self.place(j, free, use, j in pending or j in released, f, release.get(j, 0.0))
            for g in alloc.gpus:
                free[gpos[g]] = e
            if use is not None:
                self._hold(use, j, alloc, s, e)
            acc = max(acc, e) if self.makespan else acc + w[j] * e
            out.allocs.append(alloc)
            out.starts.append(s)
            out.ends.append(e)
        out.objective = acc if self.makespan else acc / self.total_weight
        return out

    def decode_pairs(self, pairs: Sequence[tuple[int, Allocation | None]], rest: Iterable[int] = (),
                     released: Iterable[int] = ()) -> Decoded:
        """``pairs`` (job, allocation or None) in order, then the jobs ``rest`` (earliest completion)."""
        forced = {j: a for j, a in pairs if a is not None}
        return self.decode([j for j, _ in pairs] + list(rest), forced, released)


def _times(ids: list[int]) -> Callable[[list[float]], tuple[float, ...]]:
    """A function of the GPUs' free times giving those of ``ids``, as a tuple (one C-level call)."""
    if len(ids) == 1:
        return lambda free, g=ids[0]: (free[g],)
    return itemgetter(*ids)


def earliest_fit(intervals: Iterable[tuple[float, float, float, float]], t0: float, d: float, cpu: float, mem: float,
                 cap_cpu: float, cap_mem: float) -> float:
    """The earliest t >= t0 such that ``cpu`` CPUs and ``mem`` GB fit beside ``intervals`` ((start, end,
    cpus, GB) held on [start, end)) throughout [t, t + d); inf if they never do. The use is a step function,
    so it suffices to try t0 and the ends after it, and to check t and the starts within the window."""
    ivs = list(intervals)
    tol_c, tol_m = EPS * max(1.0, cap_cpu), EPS * max(1.0, cap_mem)
    if cpu > cap_cpu + tol_c or mem > cap_mem + tol_m:
        return math.inf
    for t in sorted({t0, *(e for _, e, _, _ in ivs if e > t0)}):
        points = [t] + [s for s, _, _, _ in ivs if t < s < t + d]
        if all(sum(c for s, e, c, _ in ivs if s <= p < e) + cpu <= cap_cpu + tol_c and
               sum(m for s, e, _, m in ivs if s <= p < e) + mem <= cap_mem + tol_m for p in points):
            return t
    return math.inf


def timed(li: LiveInstance, dec: Decoded, method: str) -> Timed:
    """The replayed schedule of a decoded plan (the running jobs kept at 0 on their GPUs)."""
    inst = li.instance
    segs = [Segment(inst.jobs[r].name, 0.0, None, a) for r, a in li.pins.items() if r not in dec.released]
    segs += [Segment(inst.jobs[j].name, s, None, a) for j, a, s in zip(dec.order, dec.allocs, dec.starts)]
    sched = Schedule(inst.name, method, tuple(segs))
    rep = replay(inst, sched, with_fairness=False, with_metrics=False, resumed=li.resumed(dec.released))
    if not rep.valid:   # list scheduling on exclusive GPUs within node capacities cannot break a rule
        raise AssertionError(f"live plan {method} replays as invalid: {rep.error}")
    return Timed(sched.with_claim(Claimed(rep.objective, None, "feasible", None)), rep, dec.released)


def shortest_first(li: LiveInstance, jobs: Iterable[int] | None = None) -> list[int]:
    """Jobs (default: the queue) by shortest run time on the empty cluster over weight (WSPT), then index."""
    return sorted(li.queued if jobs is None else jobs, key=lambda j: (li.wspt_key(j), j))
