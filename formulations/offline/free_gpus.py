"""List scheduling whose jobs choose their GPUs when their turn comes: one node's, or any free ones.

Why. The local search (:mod:`.local_search`) list-schedules over fixed options: a job larger than every node
runs on a few candidate sets of whole nodes (:func:`.local_search.spread_candidates`). But a job spread over
several nodes runs as fast on any of them (SPEC §2: the locality penalty and the all-reduce over the network
apply once it spans two nodes, whatever their number; only the GPUs' speeds differ), so on long queues of large
jobs the fixed sets keep jobs waiting for whole nodes while as many GPUs stand idle across others. Re-scheduling
a search's start order where each job takes the GPUs that let it finish first (PAL's 160-job workloads, from
`auto`'s 30-s schedule: 0.1-5.8 % lower mean JCT on each of the five) turns that idle time into runs
(docs/history/oracle-offline-queues.md, "GPUs chosen at the job's turn").

Rule. Jobs in the given order; each starts no earlier than its arrival and the start of the job before it (the
start-order rule of :class:`.list_scheduling.SGS`). For each size it may take: on each node, its n usable GPUs
that free first; and across the cluster, the n usable GPUs that free first. Of the GPUs free by that start, the
fastest for the job are taken (fewer ties with slower ones); the choice of earliest completion wins (ties: the
shorter run, then the single node). Durations come from the speed model (:func:`jctlab.speed.duration`), so the
schedule is exact where durations do not depend on other jobs; it is an incumbent only, replayed before use.

Search. :func:`climb` improves an order under this rule by random swaps and moves of a job by up to
``FreeGpuParams.reach`` places (a move is re-scheduled from its first changed position), keeping each move that
lowers the objective: a local search of its own, because orders that are good with fixed options need not be
good when jobs choose their GPUs (PAL, from `auto`'s 30-s schedules, 10 s: 1.2-7.1 % lower on each workload,
where the fixed-option search from the same schedule for twice as long gains 0-5.9 %). It ends at a local optimum,
or, as the last phase of a solve, kicks the best order and climbs on (``restart``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.speed import SpeedError, duration

from ..results import NO_INCUMBENT, Incumbent
from ..schedules import job_weights


@dataclass(frozen=True)
class FreeGpuParams:
    """The climb's knobs (:func:`climb`)."""

    reach: int = 12          # a move swaps or moves a job by at most this many places
    iters: int = 2000        # moves without a time limit (deterministic)
    #: moves without a gain, per job, that end the climb (a local optimum): on a 16-job queue a fraction of a
    #: second, so the time left goes to the phases after it
    stall: int = 20
    #: with ``restart``: at a local optimum, the best order so far is kicked by this many random moves and the climb
    #: goes on from there (an iterated local search), until the time is up
    kick: int = 8


def applies(inst: Instance) -> bool:
    """Where a job's run time depends on its GPUs alone: no interference, parameter servers or CPU/memory levels
    (whose CPUs and memory this rule does not track)."""
    cl = inst.cluster
    return not (cl.has_interference or cl.has_switch_interference) and all(
        j.ps is None and j.cpu_mem is None for j in inst.jobs)


@dataclass(frozen=True)
class Run:
    """One list schedule: its objective, each job's start, end and GPUs, and the GPUs' free times (by GPU index)
    and the last start before each position of ``order`` (to resume it there)."""

    order: list[int]
    objective: float
    start: list[float]
    end: list[float]
    gpus: list[tuple[str, ...]]
    states: list[tuple[list[float], float]]


class FreeGpus:
    """The module docstring's list schedules of one instance's orders.

    GPUs are indices; each job's pools (one per node, then the cluster's) list its usable GPUs fastest first
    (slowdown, then id), so a pick is the first n free ones. A run resumed from an earlier one stops at the first
    position where its state (free times, last start) and the rest of its order are the earlier run's: from there
    the two are the same schedule."""

    def __init__(self, inst: Instance):
        self.inst = inst
        cl = inst.cluster
        ids = [g.id for g in cl.gpus]
        index = {g: i for i, g in enumerate(ids)}
        self.ids = ids
        self.pools: list[list[list[int]]] = []     # per job: its nodes' usable GPUs, then the cluster's if several
        for job in inst.jobs:
            def speed(g: str, c: str | None = job.job_class) -> tuple[float, str]:
                return cl.gpu[g].factor(c), g
            nodes = [sorted((g.id for g in nd.gpus if job.can_use(g.type)), key=speed) for nd in cl.nodes]
            pools = [[index[g] for g in gs] for gs in nodes if gs]
            if len(pools) > 1:
                pools.append([index[g] for g in sorted((g for gs in nodes for g in gs), key=speed)])
            self.pools.append(pools)
        self.w = job_weights(inst)
        # (job, GPU indices) -> (duration, sorted GPU ids), or None where the speed model refuses the GPUs: a climb
        # prices the same picks again and again, and a hit here builds no Allocation (as jctlab.speed.BaseTimes would)
        self._memo: dict[tuple[int, tuple[int, ...]], tuple[float, tuple[str, ...]] | None] = {}

    def run(self, order: Sequence[int], resume: tuple[Run, int] | None = None) -> Run | None:
        """The list schedule of ``order`` (every job once); ``resume=(run, p)``: from ``run``'s state before its
        position p, where ``order[:p]`` is ``run.order[:p]``. None where some job fits no GPUs."""
        n = len(self.inst.jobs)
        same = n + 1        # from this position on, ``order`` is the resumed run's
        if resume is None or resume[1] == 0:
            p0, prev = 0, None
            free, last = [0.0] * len(self.ids), 0.0
            start, end, gpus = [0.0] * n, [0.0] * n, [()] * n
            states: list = []
        else:
            prev, p0 = resume
            free, last = list(prev.states[p0][0]), prev.states[p0][1]
            start, end, gpus = list(prev.start), list(prev.end), list(prev.gpus)
            states = prev.states[:p0]
            same = n
            while same > p0 and order[same - 1] == prev.order[same - 1]:
                same -= 1
        for q in range(p0, n):
            if q >= same and prev is not None and last == prev.states[q][1] and free == prev.states[q][0]:
                states.extend(prev.states[q:])      # the rest is the resumed run's (start, end, GPUs copied)
                break
            j = order[q]
            states.append((list(free), last))
            placed = self._place(j, free, last)
            if placed is None:
                return None
            s, e, picked, ids = placed
            start[j], end[j], gpus[j] = s, e, ids
            for g in picked:
                free[g] = e
            last = s
        return Run(list(order), self._objective(start, end), start, end, gpus, states)

    def _place(self, j: int, free: list[float], last: float
               ) -> tuple[float, float, tuple[int, ...], tuple[str, ...]] | None:
        """Job j's (start, end, GPU indices, GPU ids) of earliest completion (module docstring)."""
        job = self.inst.jobs[j]
        lo = max(job.arrival, last)
        pools = self.pools[j]
        cluster = len(pools) - 1 if len(pools) > 1 else -1
        best = None
        for n in job.sizes:
            # each node's pool by when it could start there, then the cluster's (it starts no later than any)
            cands = sorted((max(lo, sorted([free[g] for g in pool])[n - 1]), k)
                           for k, pool in enumerate(pools) if k != cluster and len(pool) >= n)
            if cluster >= 0 and len(pools[cluster]) >= n:
                cands.append((max(lo, sorted([free[g] for g in pools[cluster]])[n - 1]), cluster))
            for s, k in cands:
                if best is not None and s >= best[0][0]:
                    continue        # ends no sooner (a node's pool; the cluster's may still run faster)
                picked = tuple([g for g in pools[k] if free[g] <= s][:n])
                known = self._memo.get((j, picked), False)
                if known is False:
                    known = self._memo[(j, picked)] = self._duration(j, picked)
                if known is None:
                    continue
                d, ids = known
                key = (s + d, d, k == cluster)
                if best is None or key < best[0]:
                    best = (key, s, picked, ids)
        if best is None:
            return None
        (e, _, _), s, picked, ids = best
        return s, e, picked, ids

    def alone(self, j: int) -> tuple[float, int] | None:
        """Job j's run time and GPU count by the rule on an idle cluster (its shortest run here); None where it fits
        no GPUs."""
        placed = self._place(j, [0.0] * len(self.ids), 0.0)
        return None if placed is None else (placed[1] - placed[0], len(placed[2]))

    def _duration(self, j: int, picked: tuple[int, ...]) -> tuple[float, tuple[str, ...]] | None:
        ids = tuple(sorted(self.ids[g] for g in picked))
        try:
            return duration(self.inst.jobs[j], Allocation(ids), self.inst.cluster), ids
        except SpeedError:
            return None

    def _objective(self, start: list[float], end: list[float]) -> float:
        """As the replay computes it (completion = start + duration, exact here)."""
        jobs = self.inst.jobs
        if self.inst.objective == "makespan":
            return max(end) - min(j.arrival for j in jobs)
        return sum(w * (e - j.arrival) for w, e, j in zip(self.w, end, jobs)) / sum(self.w)

    def schedule(self, run: Run, method: str) -> Schedule:
        return Schedule(self.inst.name, method, tuple(
            Segment(self.inst.jobs[j].name, run.start[j], None, Allocation(run.gpus[j])) for j in run.order))


def list_schedule(inst: Instance, order: Sequence[int], method: str) -> Schedule | None:
    """The module docstring's list schedule of ``order`` (every job once); None where some job fits no GPUs."""
    fg = FreeGpus(inst)
    run = fg.run(order)
    return None if run is None else fg.schedule(run, method)


def incumbent(inst: Instance, order: Sequence[int], method: str) -> Incumbent:
    """:func:`list_schedule` of ``order``, replayed; none where the rule does not apply or finds no schedule."""
    if not applies(inst):
        return NO_INCUMBENT
    sched = list_schedule(inst, order, method)
    return NO_INCUMBENT if sched is None else Incumbent.of(inst, sched)


def climb(inst: Instance, order: Sequence[int], until: float | None, method: str, rng_seed: int = 0,
          params: FreeGpuParams = FreeGpuParams(), restart: bool = False) -> Incumbent:
    """The module docstring's search from ``order`` until ``until`` (``time.perf_counter()``; without one,
    ``params.iters`` moves), replayed; none where the rule does not apply or finds no schedule. At a local optimum
    (``params.stall`` × n moves without a gain) it ends, or with ``restart`` kicks the best order by
    ``params.kick`` random moves and climbs on from there (for a caller with nothing to do after it)."""
    if not applies(inst):
        return NO_INCUMBENT
    fg = FreeGpus(inst)
    cur = fg.run(order)
    if cur is None:
        return NO_INCUMBENT
    best = cur
    rnd = random.Random(rng_seed)
    n = len(order)
    moves = idle = 0
    slow = 0.0      # the longest move so far: none is started that would end past ``until``
    while n > 1 and (until is None and moves < params.iters or until is not None and time.perf_counter() + slow < until):
        t_move = time.perf_counter()
        if idle >= params.stall * n:
            if not restart:
                break
            new, first = list(best.order), n
            for _ in range(params.kick):
                first = min(first, _move(new, rnd, params.reach))
            cand = fg.run(new, resume=(best, min(first, n - 1)))
            if cand is not None:
                cur = cand
            idle = 0
        else:
            moves += 1
            idle += 1
            new = list(cur.order)
            first = _move(new, rnd, params.reach)
            cand = None if first == n else fg.run(new, resume=(cur, first))
            if cand is not None and cand.objective < cur.objective - 1e-9:
                cur, idle = cand, 0
                if cur.objective < best.objective:
                    best = cur
        slow = max(slow, time.perf_counter() - t_move)
    return Incumbent.of(inst, fg.schedule(best, method))


def _move(order: list[int], rnd: random.Random, reach: int) -> int:
    """Swaps two jobs of ``order`` at most ``reach`` places apart, or moves one by as many (in place); the first
    position changed (``len(order)`` where the move changed nothing)."""
    n = len(order)
    i = rnd.randrange(n)
    k = min(n - 1, max(0, i + rnd.randint(-reach, reach)))
    if i == k:
        return n
    if rnd.random() < 0.5:
        order[i], order[k] = order[k], order[i]
    else:
        order.insert(k, order.pop(i))
    return min(i, k)
