"""The special cases as an oracle's answer: the textbook algorithm's schedule, replayed, status ``optimal``.

:func:`solve` returns None when the instance is not a recognised case (:func:`.recognise.classify` says
why), and also, defensively, when the replayed schedule does not close the gap with the theorem's bound
(the general oracle then solves the instance). The bound it claims is the algorithm's optimum of Σ w_j (C_j −
a_j) divided by Σ w_j, less n·2⁻⁵² relative: the optimum is a sum of n floating-point products, whose
rounding error is below that, so the claimed bound never exceeds the true optimum.
"""

from __future__ import annotations

import time

from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.result import Result, SolveStatus

from ..results import result_of_schedule
from .recognise import SpecialCase, SpecialParams, Textbook, classify
from .sequencing import ALGORITHMS, Sequenced
from .srpt import SrptSchedule, srpt

#: where each theorem is proven (the modules' docstrings give the proofs)
REFERENCES = {
    Textbook.STATIC: "minimum-cost assignment (formulations.special.sequencing)",
    Textbook.P_SUM_C: "SPT: Conway, Maxwell and Miller 1967",
    Textbook.Q_SUM_C: "Horn 1973 (uniform machines)",
    Textbook.R_SUM_C: "Horn 1973; Bruno, Coffman and Sethi 1974",
    Textbook.ONE_WSUM_C: "WSPT: Smith 1956",
    Textbook.P_PMTN_SUM_C: "McNaughton 1959 (no preemption needed) + SPT",
    Textbook.ONE_PMTN_WSUM_C: "McNaughton 1959 (no preemption needed) + WSPT (Smith 1956)",
    Textbook.ONE_R_PMTN_SUM_C: "SRPT: Schrage 1968",
}


def sequenced_schedule(inst: Instance, case: SpecialCase, seq: Sequenced, method: str) -> Schedule:
    """Each GPU's jobs back to back from the common release (0 in the static class)."""
    start0 = 0.0 if case.problem == Textbook.STATIC else float(case.releases[0])
    segs = []
    for g, jobs in enumerate(seq.order):
        t = start0
        for j in jobs:
            segs.append(Segment(inst.jobs[j].name, t, None, Allocation((case.gpus[g],))))
            t += float(case.durations[j, g])
    segs.sort(key=lambda s: inst.index[s.job])
    return Schedule(inst.name, method, tuple(segs))


def srpt_schedule(inst: Instance, case: SpecialCase, s: SrptSchedule, method: str) -> Schedule:
    """SRPT's pieces as segments on the single GPU (a job's pieces in time order)."""
    gpu = Allocation((case.gpus[0],))
    segs = sorted(s.pieces, key=lambda x: (x.job, x.start))
    return Schedule(inst.name, method, tuple(Segment(inst.jobs[x.job].name, x.start, x.end, gpu) for x in segs))


def solve(inst: Instance, method: str = "special", params: SpecialParams = SpecialParams()) -> Result | None:
    """The optimal schedule of a recognised instance (status ``optimal``), or None."""
    t0 = time.perf_counter()
    case = classify(inst, params)
    if isinstance(case, str):
        return None
    if case.problem == Textbook.ONE_R_PMTN_SUM_C:
        s = srpt(case)
        if s.preemptions and inst.cluster.restart_s > 0:
            return None      # the resumed segments would pay restart_s: SRPT's value is then a bound only
        schedule, total, algorithm = srpt_schedule(inst, case, s, method), s.value, "SRPT"
    else:
        seq = ALGORITHMS[case.problem](case)
        if seq is None:
            return None
        schedule, total, algorithm = sequenced_schedule(inst, case, seq, method), seq.bound, seq.algorithm
        if case.problem == Textbook.STATIC:      # the objective counts C_j − a_j
            total -= float((case.weights * case.releases).sum())
    bound = total / float(case.weights.sum()) * (1.0 - case.n * 2.0 ** -52)
    info = {"special": case.problem.value, "algorithm": algorithm, "reference": REFERENCES[case.problem]}
    if case.deviation:
        info["rank_one_deviation"] = case.deviation
    r = result_of_schedule(inst, method, schedule, bound, t0, f"special/{algorithm}", "", info)
    return r if r.status == SolveStatus.OPTIMAL else None
