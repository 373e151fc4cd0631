"""Latest completions implied by an incumbent: objective-driven deadlines for the offline models.

Law. Let U = Σ_k w_k (C_k − a_k) of some schedule (the incumbent) and, for a job j, L_j a lower bound on
the optimum of the instance without j. Every schedule S with Σ_k w_k (C_k − a_k) ≤ U completes j by

    C_j ≤ a_j + (U − L_j) / w_j,

because S restricted to the other jobs is a schedule of them (a job removed only frees GPUs, CPUs and
memory, and interference only slows jobs), so Σ_{k≠j} w_k (C_k − a_k) ≥ OPT(J ∖ {j}) ≥ L_j. A model
restricted to these deadlines (e_j ≤ latest_j, options that cannot meet them dropped) therefore holds
every schedule at least as good as the incumbent, the incumbent included; its proven bound, capped at
U, is a bound of the optimum. The law also holds under the hypothesis itself: while computing L_j, the
other jobs may carry their deadlines (any schedule of value ≤ U meets all of them at once).

How L_j is computed (``lower_bound`` is the caller's relaxation, the class model in
:mod:`formulations.offline.cpsat`): first a partition bound (windows of consecutive arrivals W_1..W_m;
L_j ≥ Σ_{i: j∉W_i} LB(W_i) + LB(W_{i(j)} ∖ {j}), the partition law of :mod:`oracle.blocks`), then
rounds over the jobs in Gauss-Seidel order (each new deadline is used by the next relaxations at once),
relaxing J ∖ {j} with the others' deadlines, for ``MAX_ROUNDS`` rounds or until one gains under
``MIN_GAIN`` of the total slack. Each tighter deadline makes the next relaxations easier: on the 30-job
benchmark a class model of 29 jobs takes 1-3 s (often unproven in 1 s) without deadlines and 0.1-0.3 s with
them, and the node-exact model with the deadlines proves seed 3 in 25-29 s (82-104 s without).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Sequence

from jctlab.model import Instance

from ..schedules import job_weights

WINDOW = 15        # jobs per window of the partition bound (measured on the 30-job benchmark: 6, 10, 15)
SUB_LIMIT = 1.0    # s at most per relaxation of a job set
MAX_ROUNDS = 1     # rounds over the jobs after the partition pass (a second one gained 0.1-0.25 % of the
#                    total slack on the benchmark's seeds 1 and 3, for 3-4 s)
MIN_GAIN = 0.01    # ... and none after one that tightens the total slack by less than this share
SLACK_RTOL = 1e-6  # of U, added to every deadline (rounding of the relaxations' bounds)

# (jobs, their latest completions so far, time limit) -> a lower bound on Σ_{k ∈ jobs} w_k (C_k − a_k)
LowerBound = Callable[[list[int], dict[int, float], float], float]


def rest_bounds(inst: Instance, upper: float, job_lb: Sequence[float], lower_bound: LowerBound, *,
                until: float | None, window: int = WINDOW, sub_limit: float = SUB_LIMIT,
                min_gain: float = MIN_GAIN, max_rounds: int | None = MAX_ROUNDS, batch: int = 1,
                stats: dict | None = None) -> list[float]:
    """L_j for every job j: lower bounds on Σ_{k≠j} w_k (C_k − a_k) over the schedules of J ∖ {j} that some
    schedule of value ≤ ``upper`` restricts to (see the module law); :func:`latest` turns them into deadlines
    for ``upper`` or any smaller value (a better incumbent found later).

    ``job_lb[k]``: a lower bound on w_k (C_k − a_k) alone (its fastest option), the starting L_j;
    ``max_rounds`` caps the rounds. ``batch``: relaxations solved at once, in threads (``lower_bound`` must
    release the GIL, as CP-SAT's solve does), each under the deadlines from before its batch (any deadlines
    that hold keep the law). Stops at ``until`` (a ``time.perf_counter()`` instant) with what it has: every intermediate
    result is valid. ``stats`` (optional) receives the rounds and the relaxations solved."""
    n = len(inst.jobs)
    total = sum(job_lb)
    lower = [total - job_lb[j] for j in range(n)]
    dl = latest(inst, upper, lower)
    calls = 0
    pool = ThreadPoolExecutor(batch) if batch > 1 else None

    def time_left() -> float:
        return float("inf") if until is None else until - time.perf_counter()

    def bounds(sets: list[list[int]]) -> list[float] | None:
        # lower bounds of the job sets, ``batch`` at a time, each under the deadlines from before its batch;
        # None when out of time
        nonlocal calls
        out: list[float] = []
        for i in range(0, len(sets), batch):
            chunk = sets[i:i + batch]
            t = min(sub_limit, time_left())
            if t <= 0.05:
                return None
            calls += len(chunk)
            lat = dict(dl)

            def one(S: list[int]) -> float:
                return lower_bound(S, {k: lat[k] for k in S}, t) if S else 0.0

            out += pool.map(one, chunk) if pool is not None and len(chunk) > 1 else map(one, chunk)
        return out

    def tighten(j: int, b: float) -> None:
        if b > lower[j]:
            lower[j] = b
            dl[j] = latest(inst, upper, lower, [j])[j]

    def sweep(items: list[tuple[int, list[int], float]]) -> bool:
        # L_j ≥ extra + LB(S) for each (j, S, extra), ``batch`` at a time (Gauss-Seidel between batches)
        for i in range(0, len(items), batch):
            chunk = items[i:i + batch]
            bs = bounds([S for _, S, _ in chunk])
            if bs is None:
                return False
            for (j, _, extra), b in zip(chunk, bs):
                tighten(j, extra + b)
        return True

    def slack() -> float:
        return sum(dl[j] - inst.jobs[j].arrival for j in range(n))

    try:
        rounds = 0
        order = sorted(range(n), key=lambda j: (inst.jobs[j].arrival, j))
        if 1 < window < n:
            wins = [order[i:i + window] for i in range(0, n, window)]
            lbs = bounds(wins)
            if lbs is not None:
                part = sum(lbs)
                sweep([(j, [k for k in W if k != j], part - b) for W, b in zip(wins, lbs) for j in W])
        while time_left() > 0.05 and (max_rounds is None or rounds < max_rounds):
            before = slack()
            done = sweep([(j, [k for k in order if k != j], 0.0) for j in order])
            rounds += 1
            if not done or before - slack() < min_gain * before:
                break
    finally:
        if pool is not None:
            pool.shutdown()
    if stats is not None:
        stats.update(rounds=rounds, relaxations=calls)
    return lower


def latest(inst: Instance, upper: float, lower: Sequence[float], jobs: Sequence[int] | None = None) -> dict[int, float]:
    """Latest completion of each job (all, or ``jobs``) in any schedule of value ≤ ``upper``, from the lower
    bounds L_j of :func:`rest_bounds` (computed for ``upper`` or a larger value)."""
    w = job_weights(inst)
    pad = SLACK_RTOL * abs(upper)
    return {j: inst.jobs[j].arrival + (upper - lower[j] + pad) / w[j]
            for j in (range(len(inst.jobs)) if jobs is None else jobs)}


def restrict(inst: Instance, opts: list[list], latest: dict[int, float]) -> list[list] | None:
    """The options of each job that can complete by its latest completion (a job's release plus the
    option's duration), or None if some job would keep none (then the deadlines are not used)."""
    out = [[o for o in ol if inst.jobs[j].arrival + o.dur <= latest.get(j, float("inf"))]
           for j, ol in enumerate(opts)]
    return None if any(not ol for ol in out) else out
