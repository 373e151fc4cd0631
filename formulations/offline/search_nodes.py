"""The branch and bound's node data (:mod:`.bnb`, :mod:`.class_search`): the dominance fronts and every choice as
arrays, so that a node's children are computed and priced without a loop over them."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Rows:
    """Every job's choices as arrays, one row each, jobs in order and each job's in the search's order (by
    duration): a job's rows ``of_job[j]``, each row's ``choice``, its option's ``index`` in the flat enumeration
    (the node prices'), whether it ``holds`` CPUs/memory, its job's ``arrival``, and ``places``: the places in the
    search's ``free`` list whose latest is when the choice's GPUs are free (its GPUs; in a pool, the k-th
    earliest-free GPU), padded with a sentinel place (−inf)."""

    job: np.ndarray
    dur: np.ndarray
    index: np.ndarray
    holds: np.ndarray
    places: np.ndarray
    arrival: np.ndarray
    of_job: list[range]
    choice: list[Any]

    @classmethod
    def of(cls, choices: list[list[Any]], places: list[list[tuple[int, ...]]], arrival: list[float],
           n_places: int) -> Rows:
        """``choices`` per job (each with ``dur``, ``index`` and ``holds``), ``places`` per choice, on a ``free``
        list of ``n_places``."""
        flat = [(j, c, p) for j, (cl, pl) in enumerate(zip(choices, places)) for c, p in zip(cl, pl)]
        at = np.full((len(flat), max((len(p) for _, _, p in flat), default=1) or 1), n_places, dtype=np.intp)
        for r, (_, _, p) in enumerate(flat):
            at[r, :len(p)] = p
        ends = np.cumsum([0] + [len(cl) for cl in choices]).tolist()
        return cls(np.array([j for j, _, _ in flat], dtype=np.intp), np.array([c.dur for _, c, _ in flat]),
                   np.array([c.index for _, c, _ in flat], dtype=np.intp),
                   np.array([c.holds for _, c, _ in flat], dtype=bool), at,
                   np.array([arrival[j] for j, _, _ in flat], dtype=float),
                   [range(a, b) for a, b in pairwise(ends)], [c for _, c, _ in flat])

    def left(self, jobs: list[int]) -> Left:
        """The rows of ``jobs`` (in order), as :class:`Left`."""
        at = np.array([r for j in jobs for r in self.of_job[j]], dtype=np.intp)
        groups = np.cumsum([0] + [len(self.of_job[j]) for j in jobs[:-1]], dtype=np.intp)
        return Left(at, self.job[at], self.arrival[at], self.places[at], self.dur[at], self.index[at],
                    np.flatnonzero(self.holds[at]).tolist(), groups, list(jobs))


@dataclass(frozen=True)
class Left:
    """The rows of the jobs left at a node, each job's consecutive: the rows of :class:`Rows` (``rows``) and their
    fields; ``holding`` the positions of those that hold CPUs/memory, ``groups`` where each job's begin, ``jobs``
    the jobs in that order. The search keeps one per set of jobs placed."""

    rows: np.ndarray
    job: np.ndarray
    arrival: np.ndarray
    places: np.ndarray
    dur: np.ndarray
    index: np.ndarray
    holding: list[int]
    groups: np.ndarray
    jobs: list[int]


@dataclass(frozen=True)
class Children:
    """A node's children as arrays over its :class:`Left` rows: their ``start`` and ``completion``, and each job's
    earliest completion ``first`` (in the order of ``left.jobs``)."""

    left: Left
    start: np.ndarray
    completion: np.ndarray
    first: np.ndarray

    def first_of(self) -> dict[int, float]:
        """Each job left's earliest completion, by job."""
        return dict(zip(self.left.jobs, self.first.tolist()))


class Front:
    """Partial schedules with the same jobs placed (and the same jobs holding CPUs/memory), each a column
    (last start, objective so far, each GPU's free time clipped to the last start); none dominates
    another. One no smaller in any field than a kept one is dominated: every completion of it is
    available to the kept one, no later (the exactness argument of :mod:`.bnb`). Column-major:
    fronts of a hundred schedules or more are common, and the comparisons then run along the long axis."""

    def __init__(self, width: int) -> None:
        self.cols = np.empty((width, 8))
        self.n = 0

    def add(self, row: list[float]) -> bool:
        """Keep ``row`` unless a kept row dominates it (False); drop the rows it dominates."""
        x = np.array(row)[:, None]
        n = self.n
        if n:
            kept = self.cols[:, :n]
            if (kept <= x).all(0).any():
                return False
            dead = (kept >= x).all(0)
            if dead.any():
                alive = ~dead
                n = int(np.count_nonzero(alive))
                self.cols[:, :n] = kept[:, alive]
        if n == self.cols.shape[1]:
            self.cols = np.concatenate([self.cols, np.empty_like(self.cols)], axis=1)
        self.cols[:, n] = x[:, 0]
        self.n = n + 1
        return True
