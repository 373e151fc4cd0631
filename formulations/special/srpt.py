"""Preemptive special cases: SRPT on one GPU with releases, and why equal releases need no preemption.

**1|r_j,pmtn|ΣC_j: SRPT is optimal (Schrage 1968).** At every instant run, among the released unfinished
jobs, one with the least remaining run time. Proof (exchange): let S be an optimal schedule that agrees with
SRPT up to time t, where SRPT runs j (least remaining r_j among the released jobs) and S runs some k ≠ j
(r_k ≥ r_j). Take the time S spends on j or k from t on (r_j + r_k in all) and give its first r_j units to
j, the rest to k; every other job keeps its time. Then j ends where the first of j and k ended in S, or
earlier, and k where the last of them ended: C'_j + C'_k ≤ C_j + C_k, no other completion moves, and the new
schedule agrees with SRPT for longer. SRPT itself preempts only at releases (a job that is running keeps the
least remaining time while no job arrives), so repeating the exchange reaches it without ever raising ΣC_j.
With ``restart_s`` = 0 this is exactly the preemptive class on one GPU; with ``restart_s`` > 0 a schedule
pays for each resumed segment, so SRPT's value still bounds every preemptive schedule (a relaxation) and is
the optimum when SRPT never preempts.

**Equal releases: preemption does not help (McNaughton 1959, Theorem 3).** On identical parallel machines
with all jobs released together, some optimal preemptive schedule for Σw_jC_j has no preemption (an
interchange argument moves the pieces of the job completing last to the end of one machine without delaying
any completion; by induction on the jobs). So P|pmtn|ΣC_j is solved by SPT and 1|pmtn|Σw_jC_j by WSPT
(:mod:`.sequencing`), and ``restart_s`` never matters there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .recognise import SpecialCase


@dataclass(frozen=True)
class Piece:
    """A job runs on the GPU from ``start`` to ``end`` (None: to completion, the job's last piece)."""

    job: int
    start: float
    end: float | None


@dataclass(frozen=True)
class SrptSchedule:
    pieces: tuple[Piece, ...]
    completion: tuple[float, ...]   # C_j
    value: float                    # Σ_j (C_j − a_j) with restart-free run times
    preemptions: int


def srpt(case: SpecialCase) -> SrptSchedule:
    """SRPT on the single GPU of ``case`` (ties: the running job keeps the GPU, then instance order)."""
    p = case.durations[:, 0]
    a = case.releases
    arrivals = sorted(range(case.n), key=lambda j: (a[j], j))
    remaining = [float(x) for x in p]
    completion = [0.0] * case.n
    pieces: list[Piece] = []
    ready: set[int] = set()
    nxt = 0
    t = float(a[arrivals[0]])
    running: int | None = None
    since = t
    preemptions = 0
    done = 0
    while done < case.n:
        while nxt < case.n and a[arrivals[nxt]] <= t:
            ready.add(arrivals[nxt])
            nxt += 1
        if not ready:
            t = float(a[arrivals[nxt]])
            continue
        best = min(ready, key=lambda j: (remaining[j], j != running, j))
        if running is not None and best != running:      # preempted at a release
            pieces.append(Piece(running, since, t))
            preemptions += 1
        if best != running:
            running, since = best, t
        release = float(a[arrivals[nxt]]) if nxt < case.n else float("inf")
        finish = t + remaining[best]
        if finish <= release:
            pieces.append(Piece(best, since, None))
            completion[best] = finish
            ready.discard(best)
            remaining[best] = 0.0
            running = None
            done += 1
            t = finish
        else:
            remaining[best] -= release - t
            t = release
    value = sum(c - float(a[j]) for j, c in enumerate(completion))
    return SrptSchedule(tuple(pieces), tuple(completion), value, preemptions)
