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
where the fixed-option search from the same schedule for twice as long gains 0-5.9 %).
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


def applies(inst: Instance) -> bool:
    """Where a job's run time depends on its GPUs alone: no interference, parameter servers or CPU/memory levels
    (whose CPUs and memory this rule does not track)."""
    cl = inst.cluster
    return not (cl.has_interference or cl.has_switch_interference) and all(
        j.ps is None and j.cpu_mem is None for j in inst.jobs)


@dataclass(frozen=True)
class Run:
    """One list schedule: its objective, each job's start, end and GPUs, and the GPUs' free times and the last
    start before each position of ``order`` (to resume it there)."""

    order: list[int]
    objective: float
    start: list[float]
    end: list[float]
    gpus: list[tuple[str, ...]]
    states: list[tuple[dict[str, float], float]]


class FreeGpus:
    """The module docstring's list schedules of one instance's orders."""

    def __init__(self, inst: Instance):
        self.inst = inst
        cl = inst.cluster
        self.nodes = [[g.id for g in nd.gpus] for nd in cl.nodes]
        # per job its usable GPUs per node; per job class each GPU's slowdown (lower is faster)
        self.usable = [[[g for g in gs if job.can_use(cl.gpu[g].type)] for gs in self.nodes] for job in inst.jobs]
        self.factor = {c: {g.id: g.factor(c) for g in cl.gpus} for c in {job.job_class for job in inst.jobs}}
        self.w = job_weights(inst)

    def run(self, order: Sequence[int], resume: tuple[Run, int] | None = None) -> Run | None:
        """The list schedule of ``order`` (every job once); ``resume=(run, p)``: from ``run``'s state before its
        position p, where ``order[:p]`` is ``run.order[:p]``. None where some job fits no GPUs."""
        n = len(self.inst.jobs)
        if resume is None or resume[1] == 0:
            p0 = 0
            free, last = {g.id: 0.0 for g in self.inst.cluster.gpus}, 0.0
            start, end, gpus = [0.0] * n, [0.0] * n, [()] * n
            states: list = []
        else:
            prev, p0 = resume
            free, last = dict(prev.states[p0][0]), prev.states[p0][1]
            start, end, gpus = list(prev.start), list(prev.end), list(prev.gpus)
            states = prev.states[:p0]
        for j in order[p0:]:
            states.append((dict(free), last))
            placed = self._place(j, free, last)
            if placed is None:
                return None
            start[j], end[j], gpus[j] = placed
            for g in gpus[j]:
                free[g] = end[j]
            last = start[j]
        return Run(list(order), self._objective(start, end), start, end, gpus, states)

    def _place(self, j: int, free: dict[str, float], last: float) -> tuple[float, float, tuple[str, ...]] | None:
        """Job j's (start, end, GPUs) of earliest completion (module docstring)."""
        job, cl = self.inst.jobs[j], self.inst.cluster
        usable, factor = self.usable[j], self.factor[job.job_class]
        spread = [g for gs in usable for g in gs]
        several = sum(1 for gs in usable if gs) > 1     # else the cluster's pool is one node's
        best = None
        for n in job.sizes:
            # each node's pool by when it could start there, then the cluster's (it starts no later than any)
            pools = sorted((max(job.arrival, last, sorted(free[g] for g in gs)[n - 1]), k, gs)
                           for k, gs in enumerate(usable) if len(gs) >= n)
            if several and len(spread) >= n:
                pools.append((max(job.arrival, last, sorted(free[g] for g in spread)[n - 1]), len(usable), spread))
            for s, k, pool in pools:
                if best is not None and s >= best[0][0]:
                    continue        # ends no sooner (a node's pool; the cluster's may still run faster)
                pick = tuple(sorted(sorted((g for g in pool if free[g] <= s), key=lambda g: (factor[g], g))[:n]))
                try:
                    d = duration(job, Allocation(pick), cl)
                except SpeedError:
                    continue
                key = (s + d, d, k == len(usable))
                if best is None or key < best[0]:
                    best = (key, s, pick)
        if best is None:
            return None
        (end, _, _), s, pick = best
        return s, end, pick

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
          params: FreeGpuParams = FreeGpuParams()) -> Incumbent:
    """The module docstring's search from ``order`` until ``until`` (``time.perf_counter()``; without one,
    ``params.iters`` moves) or ``params.stall`` × n moves without a gain, replayed; none where the rule does not
    apply or finds no schedule."""
    if not applies(inst):
        return NO_INCUMBENT
    fg = FreeGpus(inst)
    cur = fg.run(order)
    if cur is None:
        return NO_INCUMBENT
    rnd = random.Random(rng_seed)
    n = len(order)
    moves = idle = 0
    slow = 0.0      # the longest move so far: none is started that would end past ``until``
    while n > 1 and idle < params.stall * n and (
            until is None and moves < params.iters or until is not None and time.perf_counter() + slow < until):
        moves += 1
        idle += 1
        t_move = time.perf_counter()
        i = rnd.randrange(n)
        k = min(n - 1, max(0, i + rnd.randint(-params.reach, params.reach)))
        if i == k:
            continue
        new = list(cur.order)
        if rnd.random() < 0.5:
            new[i], new[k] = new[k], new[i]
        else:
            new.insert(k, new.pop(i))
        cand = fg.run(new, resume=(cur, min(i, k)))
        if cand is not None and cand.objective < cur.objective - 1e-9:
            cur, idle = cand, 0
        slow = max(slow, time.perf_counter() - t_move)
    return Incumbent.of(inst, fg.schedule(cur, method))
