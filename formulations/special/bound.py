"""The special cases as lower bounds of larger problems: releases shifted to the earliest one.

**Theorem.** Let I have single-GPU jobs as in :mod:`.recognise` (conditions 1-3 and 5) but releases a_j that
differ, and let I' be I with every release set to a = min_j a_j. If I' is a recognised non-preemptive case
(P, Q, R||ΣC_j or 1||Σw_jC_j), or, in the preemptive class, P|pmtn|ΣC_j or 1|pmtn|Σw_jC_j, with optimum
V* = min Σ_j w_j (C_j − a), then every schedule S of I satisfies

    Σ_j w_j (C_j − a_j) ≥ V* + a·Σ_j w_j − Σ_j w_j a_j.

*Proof.* Run times do not depend on releases (SPEC §2), and a_j ≥ a, so S is a schedule of I' too:
Σ_j w_j C_j(S) ≥ min over I' of Σ_j w_j C_j = V* + a·Σ_j w_j. Subtract Σ_j w_j a_j. ∎

On one GPU with unit weights SRPT's value with the true releases (:mod:`.srpt`) is also a bound: it is the
optimum of the preemptive, restart-free relaxation of the offline and preemptive classes. The bound is
tight when the releases are equal, weakest when they spread: it gives up Σ_j w_j (a_j − a).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from jctlab.model import Instance
from jctlab.result import Result, SolveStatus

from ..results import GAP_TOL, checked_bound
from .recognise import SpecialCase, SpecialParams, Textbook, classify
from .sequencing import ALGORITHMS
from .srpt import srpt

#: the textbook problems whose optimum, releases shifted, bounds the instance's class
RELAXES = {"offline": (Textbook.P_SUM_C, Textbook.Q_SUM_C, Textbook.R_SUM_C, Textbook.ONE_WSUM_C),
           "preemptive": (Textbook.P_PMTN_SUM_C, Textbook.ONE_PMTN_WSUM_C)}


def release_shift_bound(inst: Instance, params: SpecialParams = SpecialParams()) -> float | None:
    """A lower bound on the objective of every schedule of ``inst``'s class (the theorem above), or None where
    the shifted instance is not a recognised case (or ``inst`` is static)."""
    if inst.problem not in RELAXES or not inst.jobs:
        return None
    first = min(j.arrival for j in inst.jobs)
    shifted = classify(inst.replace_jobs([replace(j, arrival=first) for j in inst.jobs]), params)
    if isinstance(shifted, str) or shifted.problem not in RELAXES[inst.problem]:
        return None
    w = shifted.weights
    total = ALGORITHMS[shifted.problem](shifted).bound + first * float(w.sum()) - float(
        sum(wj * j.arrival for wj, j in zip(w, inst.jobs)))
    if shifted.m == 1 and bool((w == 1.0).all()):
        case = SpecialCase(Textbook.ONE_R_PMTN_SUM_C, shifted.gpus, shifted.durations, w,
                           np.array([j.arrival for j in inst.jobs], dtype=float))
        total = max(total, srpt(case).value)
    return total / float(w.sum()) * (1.0 - len(inst.jobs) * 2.0 ** -52)


def lifted(r: Result, bound: float | None) -> Result:
    """``r`` with its lower bound raised to ``bound`` where that is larger, and its status set again by the zero-gap
    rule; a bound above ``r``'s replayed objective is a wrong proof and is dropped (``params["bound_conflict"]``).
    Recorded in ``params["release_shift_bound"]``."""
    if bound is None or r.status in (SolveStatus.INFEASIBLE, SolveStatus.ERROR):
        return r
    params = {**r.params, "release_shift_bound": bound}
    if r.lower_bound is not None and r.lower_bound >= bound:
        return r.with_(params=params)
    if r.objective is None:
        return r.with_(lower_bound=bound, params=params)
    b = checked_bound(bound, r.objective, params)
    if b is None:
        return r.with_(params=params)
    closed = r.objective - b <= GAP_TOL * abs(r.objective)
    return r.with_(lower_bound=b, status=SolveStatus.OPTIMAL if closed else r.status, params=params)
