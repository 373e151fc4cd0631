"""Queue policies: the order in which a mechanism (rounds or event-driven) considers jobs.

Every queue maps a job to a sort key; smaller = higher priority. Ties fall back to (arrival, index),
so every order is deterministic.

- ``fifo``: arrival order.
- ``sjf``: total work (GPU-seconds on its rigid size, nominal speed), smallest first.
- ``srtf``: remaining work (total work x remaining / total iterations), smallest first. Without
  preemption (event-driven class) waiting jobs have never run, so srtf = sjf there.
- ``las``: Tiresias' discretized two-dimensional LAS: attained service in GPU-seconds (GPU count x
  time held, ``engine.attained``) sorted into priority queues by ``thresholds``; FIFO within a queue.
- ``gittins``: Tiresias' Gittins-index variant over attained GPU-seconds, with the service
  distribution taken from the instance's own jobs' total work (a prior known to the scheduler); the
  job with the highest index first. Candidate quanta are the distribution's quantiles (``points``),
  so an index costs O(points · log jobs).

Work estimates come from :mod:`jctlab.speed` through :class:`jctlab.metrics.ReferenceDurations` (best
single-type allocation of the job's size on the cluster without variability; one spanning types when the size
fits on no single type), computed once.

Every key ends with the job index, so keys are unique and sorting the keys sorts the jobs.
:meth:`Queue.order` is the definition (sort every job by its key); :meth:`Queue.order_live` returns
the same list at each decision while computing only the keys that can have changed: a waiting job's
key is fixed until it runs again (its attained service and remaining work change only while it
runs), and for ``fifo`` and ``sjf`` every job's key is fixed, so those keys live in a sorted list
updated by the jobs that arrived, started, stopped or completed since the last decision.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import replace
from typing import Iterable, Sequence

import numpy as np
from sortedcontainers import SortedList

from jctlab.metrics import ReferenceDurations, strip_variability
from jctlab.model import Instance

#: Tiresias' default queue thresholds in GPU-seconds (its simulator uses a 2-queue setting with a
#: first threshold of one GPU-hour; we add a second at 10 GPU-hours).
DEFAULT_THRESHOLDS = (3600.0, 36000.0)


def rigid_size(job, n_usable: int) -> int:
    """The GPU count a baseline gives a job: its largest allowed size that the cluster can hold."""
    ok = [s for s in job.sizes if s <= n_usable]
    return max(ok) if ok else max(job.sizes)


class Queue:
    name = "queue"
    static = True       # a job's key never changes (else only while it waits)

    def __init__(self, inst: Instance, sizes: Sequence[int]):
        self.inst = inst
        self.sizes = sizes
        self.arrival = [j.arrival for j in inst.jobs]
        self._work: list[float] | None = None
        self._keys: dict[int, tuple] = {}        # order_live: the kept keys, and the same sorted
        self._sorted = SortedList()
        # order_live of a static queue over every active job: how many of sim.arrived and sim.completed its keys
        # hold, and the order they give
        self._seen = (0, 0)
        self._active: list[int] = []

    # total work in GPU-seconds, lazily (FIFO never needs it)
    @property
    def work(self) -> list[float]:
        if self._work is None:
            ref = ReferenceDurations(strip_variability(self.inst.cluster))
            out = []
            for j, job in enumerate(self.inst.jobs):
                d = ref(replace(job, sizes=(self.sizes[j],)))
                out.append(d * self.sizes[j] if d < float("inf") else float("inf"))
            self._work = out
        return self._work

    def key(self, sim, j: int):
        return (self.arrival[j], j)

    def order(self, sim, jobs: Iterable[int]) -> list[int]:
        return sorted(jobs, key=lambda j: self.key(sim, j))

    def order_live(self, sim, with_running: bool) -> list[int]:
        """``order(sim, waiting jobs [+ running jobs])``, keeping keys between calls. The caller calls it
        at every decision that starts or preempts jobs (so a job seen waiting twice has not run in
        between). The list returned is the caller's to read, not to change."""
        if self.static and with_running:
            return self._active_order(sim)
        waiting, running = sim.waiting, sim.engine.running
        kept, srt = self._keys, self._sorted
        live = waiting.keys()
        for j in kept.keys() - live:
            srt.remove(kept.pop(j))
        for j in live - kept.keys():
            k = kept[j] = self.key(sim, j)
            srt.add(k)
        if self.static or not with_running:
            return [k[-1] for k in srt]
        keys = list(srt)
        keys.extend([self.key(sim, j) for j in running])
        keys.sort()          # one sorted run and a short tail: linear
        return [k[-1] for k in keys]

    def _active_order(self, sim) -> list[int]:
        """The active jobs (arrived, not completed) in the order of a static queue: the keys follow the arrivals
        and completions since the last call, and the order is rebuilt only when there were some."""
        arrived, completed = sim.arrived, sim.completed
        a0, c0 = self._seen
        if a0 == len(arrived) and c0 == len(completed):
            return self._active
        kept, srt = self._keys, self._sorted
        for j in arrived[a0:]:
            k = kept[j] = self.key(sim, j)
            srt.add(k)
        for j in completed[c0:]:
            srt.remove(kept.pop(j))
        self._seen = (len(arrived), len(completed))
        self._active = [k[-1] for k in srt]
        return self._active


class Fifo(Queue):
    name = "fifo"


class Sjf(Queue):
    name = "sjf"

    def key(self, sim, j):
        return (self.work[j], self.arrival[j], j)


class Srtf(Queue):
    name = "srtf"
    static = False

    def key(self, sim, j):
        it = self.inst.jobs[j].iterations
        left = sim.engine.remaining(j) / it if it > 0 else 0.0
        return (self.work[j] * left, self.arrival[j], j)


class Las(Queue):
    """Tiresias' discretized 2D-LAS."""

    name = "las"
    static = False

    def __init__(self, inst, sizes, thresholds: Sequence[float] | None = None):
        super().__init__(inst, sizes)
        th = DEFAULT_THRESHOLDS if thresholds is None else tuple(float(t) for t in thresholds)
        if any(t <= 0 for t in th) or list(th) != sorted(th):
            raise ValueError("thresholds must be positive and increasing")
        self.thresholds = th

    def level(self, attained: float) -> int:
        """Priority queue index of a job with this attained service (0 = highest priority)."""
        return bisect.bisect_right(self.thresholds, attained)

    def key(self, sim, j):
        return (self.level(sim.engine.attained(j)), self.arrival[j], j)


class Gittins(Queue):
    name = "gittins"
    static = False

    def __init__(self, inst, sizes, points: int = 32):
        super().__init__(inst, sizes)
        self.points = max(2, int(points))
        self._dist: list[float] | None = None

    def _prep(self) -> None:
        # the sorted works twice, set here only: an array for the tails' vector work, floats for bisect and the loop
        self._works = np.sort(np.asarray(self.work, dtype=float))
        self._dist = self._works.tolist()
        self._memo: dict[float, float] = {}
        self._tails: dict[int, list[tuple[float, float, float, float]]] = {}

    def _tail(self, i0: int) -> list[tuple[float, float, float, float]]:
        """What the index of every attained service a in [s[i0-1], s[i0]) shares: per candidate end x (the
        quantiles of the surviving works), the work above s[i0] of the jobs finished by x, how many finish and how
        many survive. Measuring the finished work from s[i0] (not from 0) keeps every term of
        E[min(S - a, x - a)] non-negative: no cancellation when works differ by a few ulps."""
        t = self._tails.get(i0)
        if t is None:
            s = self._works
            with np.errstate(invalid="ignore"):   # a job of infinite work (no GPU runs it): inf - inf in the lerp
                qs = np.unique(np.quantile(s[i0:], np.linspace(0, 1, self.points)))
                above = np.concatenate([[0.0], np.cumsum(s[i0:] - s[i0])])
            k = np.searchsorted(s, qs, side="right")
            t = self._tails[i0] = list(zip(qs.tolist(), above[k - i0].tolist(), (k - float(i0)).tolist(),
                                           (len(s) - k).astype(float).tolist()))
        return t

    def index(self, a: float) -> float:
        """Gittins index of a job with attained service a: max over Δ of P(S-a ≤ Δ | S>a) / E[min(S-a, Δ) | S>a],
        Δ = x - a over the quantiles x of the surviving works. In plain floats: for a few dozen candidates a loop
        costs less than numpy's per-call overhead (a non-sticky round computes one per running job), with the
        same IEEE operations in the same order."""
        if self._dist is None:
            self._prep()
        a = float(a)
        best = self._memo.get(a)
        if best is not None:
            return best
        s = self._dist
        i0 = bisect.bisect_right(s, a)
        if i0 >= len(s):
            return math.inf   # outlived every known job: finish it
        finished = s[i0] - a
        best = 0.0
        for x, above, done, alive in self._tail(i0):
            delta = x - a
            # E[min(S-a, Δ)] · survivors: Σ(s_i - s[i0]) + done·(s[i0] - a) over the finished, Δ for the others (not
            # a number where a work is infinite: never a candidate then)
            e = above + done * finished + alive * delta
            if delta > 0 and e > 0 and done / e > best:
                best = done / e
        if len(self._memo) < 100000:
            self._memo[a] = best
        return best

    def key(self, sim, j):
        return (-self.index(sim.engine.attained(j)), self.arrival[j], j)


QUEUES = {"fifo": Fifo, "sjf": Sjf, "srtf": Srtf, "las": Las, "gittins": Gittins}


def make_queue(name: str, inst: Instance, sizes: Sequence[int], thresholds: Sequence[float] | None = None) -> Queue:
    cls = QUEUES[name]
    if cls is Las:
        return Las(inst, sizes, thresholds)
    return cls(inst, sizes)
