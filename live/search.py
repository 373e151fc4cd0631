"""The improvement phase: local search over a plan's list and allocations, in the time a decision has left.

From the best plan the heuristics (and the oracle, when it answered) gave, :func:`improve` looks for a
better one by first-improvement local search; every neighbour is list-scheduled by the
:class:`~live.decode.Decoder` from the position it changes. For each position i of the list, in order
(the head first: it decides what starts now):

* *insert*: move the job at i to a position up to ``window`` earlier or later;
* *swap*: exchange it with a job up to ``window`` later;
* *reallocate*: give it another of its candidate allocations at that point (another node, socket or size,
  the order of :mod:`live.decode`), or let the decoder choose again where the allocation was given.

A move is kept when the plan's objective drops (relative 1e-9); the scan goes on from the same position.
With preemption allowed (``preempt_gain``), once no move improves (or half the budget is spent) it tries
stopping each running job that may be preempted — longest remaining time first — putting it back into the
list at its shortest-first position (it pays ``restart_s`` when it starts again, there or elsewhere: a
migration when that is now). A stop is kept only when it lowers the objective by more than
``preempt_gain`` × the objective of the best plan without preemption, so a plan that preempts k jobs is
at least k × ``preempt_gain`` better than that plan; then the local search goes on.

:class:`Budget` is the stopping criterion: a wall-clock deadline, and optionally a number of decodings
(a run bounded by it alone makes the same decisions whatever the machine's load). The search also stops
at a local optimum, so small states take milliseconds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Mapping

from jctlab.model import Allocation

from .decode import Decoded, Decoder

#: a move must lower the objective by this much (relative) to count
IMPROVE_RTOL = 1e-9


@dataclass(frozen=True)
class Budget:
    """Stop at ``deadline`` (a ``time.perf_counter()`` instant) or after ``max_evaluations`` decodings
    (None: no such limit), whichever comes first."""

    deadline: float
    max_evaluations: int | None = None

    def spent(self, dec: Decoder, first: int) -> bool:
        if self.max_evaluations is not None and dec.evaluations - first >= self.max_evaluations:
            return True
        return time.perf_counter() >= self.deadline


@dataclass(frozen=True)
class SearchResult:
    plan: Decoded
    evaluations: int
    moves: int
    local_optimum: bool


def _better(new: float, cur: float) -> bool:
    return new < cur - IMPROVE_RTOL * abs(cur)


class _Search:
    def __init__(self, dec: Decoder, start: Decoded, budget: Budget, window: int):
        self.dec, self.budget, self.window = dec, budget, window
        self.cur = start
        self.first = dec.evaluations
        self.moves = 0
        self.ref = start.objective   # the best plan without preemption (set before stops are tried)

    def spent(self) -> bool:
        return self.budget.spent(self.dec, self.first)

    def _try(self, order: list[int], forced: Mapping[int, Allocation], pos: int) -> bool:
        new = self.dec.decode(order, forced, self.cur.released, self.cur, pos)
        if _better(new.objective, self.cur.objective):
            self.cur = new
            self.moves += 1
            return True
        return False

    def moves_at(self, i: int) -> bool:
        """Try the moves of position i; True at the first that improves."""
        order, n, w = self.cur.order, len(self.cur.order), self.window
        j = order[i]
        for k in range(i - 1, max(-1, i - w - 1), -1):            # insert earlier
            if self.spent():
                return False
            if self._try(order[:k] + [j] + order[k:i] + order[i + 1:], self.cur.forced, k):
                return True
        for k in range(i + 1, min(n, i + w + 1)):                 # insert later
            if self.spent():
                return False
            if self._try(order[:i] + order[i + 1:k + 1] + [j] + order[k + 1:], self.cur.forced, i):
                return True
        for k in range(i + 2, min(n, i + w + 1)):                 # swap (i, i+1 is an insertion)
            if self.spent():
                return False
            o = list(order)
            o[i], o[k] = o[k], o[i]
            if self._try(o, self.cur.forced, i):
                return True
        return self.reallocate(i)

    def reallocate(self, i: int) -> bool:
        dec, cur = self.dec, self.cur
        if dec.capacity:   # no per-position state to start from
            return False
        j = cur.order[i]
        tries: list[Allocation | None] = [None] if j in cur.forced else []
        restart = dec.li.restart_s if (j in dec.li.pending or j in cur.released) else 0.0
        opts = sorted(dec.options(j, cur.frees[i], None, restart), key=lambda c: c[:2])
        tries += [a for _, _, a, _ in opts[:4] if a != cur.allocs[i]]
        for a in tries:
            if self.spent():
                return False
            forced = dict(cur.forced)
            if a is None:
                del forced[j]
            else:
                forced[j] = a
            if self._try(cur.order, forced, i):
                return True
        return False

    def descend(self, share: float = 1.0) -> bool:
        """Local search until no move improves (True) or ``share`` of the budget's time is spent."""
        stop = time.perf_counter() + share * max(0.0, self.budget.deadline - time.perf_counter())
        improved = True
        while improved:
            improved = False
            i = 0
            while i < len(self.cur.order):
                if self.spent() or time.perf_counter() >= stop:
                    return False
                if self.moves_at(i):
                    improved = True
                    continue
                i += 1
        return True

    def preempt(self, gain: float) -> bool:
        """Stop the running job that improves the plan most, if by more than ``gain`` × the objective."""
        dec, cur, li = self.dec, self.cur, self.dec.li
        ref = cur.objective
        best: Decoded | None = None
        for r in sorted(li.movable - cur.released, key=lambda r: (-li.pinned_end[r], r)):
            if self.spent():
                break
            key = li.wspt_key(r)
            pos = next((p for p, j in enumerate(cur.order) if li.wspt_key(j) > key), len(cur.order))
            order = cur.order[:pos] + [r] + cur.order[pos:]
            new = dec.decode(order, cur.forced, cur.released | {r})
            if new.objective < ref - gain * self.ref and (best is None or new.objective < best.objective):
                best = new
        if best is None:
            return False
        self.cur = best
        self.moves += 1
        return True


def improve(dec: Decoder, start: Decoded, budget: Budget, window: int = 6,
            preempt_gain: float | None = None) -> SearchResult:
    """Local search from ``start`` within ``budget`` (module docstring)."""
    s = _Search(dec, start, budget, window)
    optimum = s.descend(0.5 if preempt_gain is not None and dec.li.movable else 1.0)
    if preempt_gain is not None and dec.li.movable and not s.spent():
        s.ref = s.cur.objective
        while not s.spent() and s.preempt(preempt_gain):
            pass
        optimum = s.descend() and not s.spent()
    return SearchResult(s.cur, dec.evaluations - s.first, s.moves, optimum)
