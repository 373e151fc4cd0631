"""Serial list scheduling over concrete options (:class:`SGS`), resumable at any position (:class:`SGSTrace`)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from jctlab.model import Instance

from ..schedules import job_weights
from .options import EPS, Option, binding_resources, capacities


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
      queue whose 8-GPU jobs must spread this is what lets a search move them.

    Every schedule with a given allocation is dominated by either rule applied to its start order (each
    GPU is free, and each node holds no more, no later than in that schedule, by induction), so searching
    over orders and allocations can reach an optimum of the exact model. Only used where durations do not
    depend on other jobs (no interference, :meth:`applicable`); results are re-timed and replayed by the
    simulator before they are used (objective = replayed).
    """

    def __init__(self, inst: Instance, opts: list[list[Option]]):

        self.inst = inst
        gid = {g.id: i for i, g in enumerate(inst.cluster.gpus)}
        cap = capacities(inst)
        res = sorted(binding_resources(inst, opts))          # CPU/memory that options can overload
        self.cap = np.array([cap[r] * (1 + EPS) + EPS for r in res])
        self.arr = np.array([j.arrival for j in inst.jobs])
        self.w = np.array(job_weights(inst))
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
        return int(np.lexsort((self.dur[j], st + self.dur[j]))[0])

    def _empty(self, n: int) -> list:
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
