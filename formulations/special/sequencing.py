"""Optimal sequences for the non-preemptive special cases with equal releases, with their proofs.

Notation: n jobs released at a, m GPUs, run times p_{jg}, weights w_j. A schedule without idle time lists,
per GPU g, its jobs in run order; the job in position k *from the last* on g is followed by k − 1 jobs on g,
so its run time is counted in its own completion and in those of the k − 1 jobs after it:

    Σ_j w_j (C_j − a) = Σ_g Σ_k p_{[g,k] g} · (Σ of the weights of the jobs in positions 1..k of g)    (1)

and with unit weights Σ_j (C_j − a) = Σ_g Σ_k k · p_{[g,k] g}.                                          (2)

Idle time only delays completions, and in the offline class every job can start at a, so some optimum
has no idle time: it is one of these lists.

* :func:`wspt` (1||Σw_jC_j; Smith 1956). On one GPU, swap two adjacent jobs i, j (i first) with
  p_i/w_i > p_j/w_j: only their two completions change, by w_i·p_j − w_j·p_i > 0 in favour of the swap. So
  some optimum has ratios p_j/w_j non-decreasing: every such order has the same value (swapping equal
  ratios changes nothing), and WSPT is one of them.
* :func:`spt` (P||ΣC_j; Conway, Maxwell and Miller 1967). By (2) with p_{jg} = p_j, a schedule gives each job
  a coefficient k (its position from last on its GPU); at most m jobs can have each coefficient k, and the
  coefficients used on a GPU are 1..n_g. The multiset of the n smallest coefficients any schedule can use is
  m ones, m twos, ... and by the rearrangement inequality Σ k_j·p_j over a matching of coefficients to jobs
  is least when the largest p meets the smallest k. Dealing the jobs in SPT order round-robin over the GPUs
  gives the job with the i-th largest run time (i = 1..n) the coefficient ⌈i/m⌉: exactly that matching.
* :func:`horn_uniform` (Q||ΣC_j; Horn 1973). With p_{jg} = p_j·c_g, the job in position k from last on g
  contributes p_j·(k·c_g). The coefficients k·c_g on one GPU increase with k, so the n smallest of all
  {k·c_g} take a prefix 1..n_g of every GPU: they are the slots of a schedule. No schedule does better: any
  schedule uses n distinct slots, whose coefficients are, in sorted order, at least the n smallest; pair
  them with the jobs by the rearrangement inequality (largest p_j, smallest coefficient).
* :func:`bcs_assignment` (R||ΣC_j; Horn 1973, Bruno, Coffman and Sethi 1974). By (2) every schedule is an
  assignment of jobs to distinct slots (g, k), k = 1..n, of cost k·p_{jg}, and its value is that cost. A
  minimum-cost assignment (the Hungarian method: ``scipy.optimize.linear_sum_assignment``) uses on each GPU
  a prefix of positions, since p_{jg} > 0 makes a job in an empty slot (g, k−1) strictly cheaper than in
  (g, k): so it is a schedule, and its cost, the assignment's optimum, bounds every schedule.
* :func:`static_assignment` (static class). Every job runs alone on its GPU from time 0, so C_j = p_{j,g(j)}
  and the objective is a minimum-cost assignment of jobs to distinct GPUs with cost w_j·p_{jg}.

Each returns a :class:`Sequenced`: the run order per GPU, its value under the model's run times, and a
bound: the algorithm's optimum, less the rank-one deviation δ of :mod:`.recognise` where it applies.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment

from .recognise import SpecialCase, Textbook


@dataclass(frozen=True)
class Sequenced:
    """Jobs per GPU (``order[g]``: job indices in run order, from time a on), and Σ w_j (C_j − a)."""

    order: tuple[tuple[int, ...], ...]
    value: float      # Σ_j w_j (C_j − a) of this schedule, run times p
    bound: float      # proven: no schedule of the textbook problem has a smaller Σ_j w_j (C_j − a)
    algorithm: str


def weighted_sum(case: SpecialCase, order: tuple[tuple[int, ...], ...], p: np.ndarray | None = None) -> float:
    """Σ_j w_j (C_j − a) of ``order`` without idle time, under run times ``p`` (default the case's)."""
    p = case.durations if p is None else p
    total = 0.0
    for g, jobs in enumerate(order):
        t = 0.0
        for j in jobs:
            t += float(p[j, g])
            total += float(case.weights[j]) * t
    return total


def _rank_one_result(case: SpecialCase, order: tuple[tuple[int, ...], ...], algorithm: str) -> Sequenced:
    """The value under p and the bound (1 − δ)·(value under the rank-one model q = p_j·c_g)."""
    q = np.outer(case.base, case.speed)  # type: ignore[arg-type]
    return Sequenced(order, weighted_sum(case, order), (1.0 - case.deviation) * weighted_sum(case, order, q),
                     algorithm)


def wspt(case: SpecialCase) -> Sequenced:
    """One GPU: p_j/w_j non-decreasing (ties by instance order)."""
    p = case.durations[:, 0]
    order = (tuple(sorted(range(case.n), key=lambda j: (p[j] / case.weights[j], j))),)
    value = weighted_sum(case, order)
    return Sequenced(order, value, value, "WSPT")


def spt(case: SpecialCase) -> Sequenced:
    """Identical GPUs: jobs in SPT order (ties by instance order) dealt round-robin."""
    p = case.base
    jobs = sorted(range(case.n), key=lambda j: (p[j], j))  # type: ignore[index]
    order = tuple(tuple(jobs[g::case.m]) for g in range(case.m))
    return _rank_one_result(case, order, "SPT")


def horn_uniform(case: SpecialCase) -> Sequenced:
    """Uniform GPUs: the n smallest coefficients k·c_g, the largest p_j on the smallest."""
    c = case.speed
    heap = [(float(c[g]), g, 1) for g in range(case.m)]  # type: ignore[index]
    heapq.heapify(heap)
    slots = []
    for _ in range(case.n):
        coef, g, k = heapq.heappop(heap)
        slots.append((g, k))
        heapq.heappush(heap, ((k + 1) * float(c[g]), g, k + 1))  # type: ignore[index]
    jobs = sorted(range(case.n), key=lambda j: (-case.base[j], j))  # type: ignore[index]
    per: list[list[tuple[int, int]]] = [[] for _ in range(case.m)]
    for j, (g, k) in zip(jobs, slots):
        per[g].append((k, j))
    order = tuple(tuple(j for _, j in sorted(s, reverse=True)) for s in per)
    return _rank_one_result(case, order, "Horn (uniform)")


def bcs_assignment(case: SpecialCase) -> Sequenced:
    """Unrelated GPUs: the minimum-cost assignment of jobs to (GPU, position from last) slots."""
    n, m = case.n, case.m
    k = np.arange(1, n + 1, dtype=float)
    # column g·n + (k−1): slot k from last on GPU g, cost k·p_{jg} (inf: forbidden)
    cost = (case.durations[:, :, None] * k[None, None, :]).reshape(n, m * n)
    rows, cols = linear_sum_assignment(cost)
    per: list[list[tuple[int, int]]] = [[] for _ in range(m)]
    for j, col in zip(rows, cols):
        per[col // n].append((col % n, int(j)))
    order = tuple(tuple(j for _, j in sorted(s, reverse=True)) for s in per)
    return Sequenced(order, weighted_sum(case, order), float(cost[rows, cols].sum()), "Bruno-Coffman-Sethi assignment")


def static_assignment(case: SpecialCase) -> Sequenced | None:
    """Static class: jobs to distinct GPUs, cost w_j·p_{jg}; None when no assignment exists (jobs that only a
    few GPUs can host outnumber them: no static schedule, which the general oracle reports)."""
    cost = case.durations * case.weights[:, None]
    try:
        rows, cols = linear_sum_assignment(cost)
    except ValueError:        # scipy: "cost matrix is infeasible"
        return None
    per: list[tuple[int, ...]] = [()] * case.m
    for j, g in zip(rows, cols):
        per[g] = (int(j),)
    order = tuple(per)
    return Sequenced(order, weighted_sum(case, order), float(cost[rows, cols].sum()), "assignment")


#: the algorithm of each non-preemptive (or preemption-free optimal) textbook problem
ALGORITHMS = {
    Textbook.STATIC: static_assignment,
    Textbook.P_SUM_C: spt,
    Textbook.Q_SUM_C: horn_uniform,
    Textbook.R_SUM_C: bcs_assignment,
    Textbook.ONE_WSUM_C: wspt,
    Textbook.P_PMTN_SUM_C: spt,
    Textbook.ONE_PMTN_WSUM_C: wspt,
}
