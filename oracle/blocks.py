"""Busy-period decomposition of offline instances: solve the blocks apart, add their schedules and bounds.

Sort the jobs by arrival. A *split* before job k is a point where some schedule of the jobs that arrive
earlier finishes them all by a_k (the list-scheduling greedy of :func:`formulations.offline.greedy.offline_greedy`
is the witness: the cluster is idle from its last completion up to a_k). Between splits lie the *blocks*.

Why a block's answers add up (objectives that are sums over jobs: mean and weighted JCT; not makespan):

* **Bound.** Restricting any schedule of the whole instance to one block's jobs gives a schedule of that
  block alone (fewer jobs only free resources; interference only slows jobs, so dropping jobs never
  delays one), so OPT ≥ Σ_g OPT(block g) in total JCT, and Σ_g LB_g bounds OPT for any proven LB_g ≤
  OPT(block g). This holds for any partition of the jobs, split or not.
* **Schedule.** Each block's schedule is placed as it is. A block whose schedule ends after the next
  block's first arrival is replaced by the witness greedy's schedule of that block (which ends in time),
  so the blocks run in disjoint time windows: their union is valid and its total JCT is the sum of
  theirs. When every block is proven optimal the union is optimal.

A method that applies to small instances only (``bnb``) or whose models grow faster than linearly with the
number of jobs (all of them) then solves several small problems instead of one large one. The time limit is
shared among the blocks by job count, smallest first (time a block leaves unused goes to the later ones).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from formulations.offline.greedy import offline_greedy
from formulations.results import result_of_schedule
from formulations.schedules import objective_weights
from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

#: the methods that solve an offline instance block by block (``brute`` stays whole: it is the reference)
METHODS = ("cpsat", "milp", "milp-cbc", "bnb", "auto")
MIN_BLOCK_S = 1e-3   # s: the smallest time limit handed to a block (the methods reject 0)

Dispatch = Callable[[str, Instance, "float | None", int, int, "Schedule | None", dict], Result]


@dataclass(frozen=True)
class Blocks:
    """The busy periods of an instance: job indices per block (by arrival), and the witness schedule."""

    parts: list[list[int]]
    witness: Schedule


def split(inst: Instance) -> Blocks | None:
    """The blocks and the witness schedule, or None when there is one block (or the instance is not offline
    with a sum objective, or the greedy finds no schedule)."""
    if inst.problem != "offline" or inst.objective == "makespan" or len(inst.jobs) < 2:
        return None
    witness = offline_greedy(inst, "blocks-greedy")
    if witness is None:
        return None
    rep = replay(inst, witness)
    if not rep.valid:
        return None
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    parts: list[list[int]] = []
    end = -math.inf
    for j in order:
        if parts and inst.jobs[j].arrival < end:
            parts[-1].append(j)
        else:
            parts.append([j])
        end = max(end, rep.completion[inst.jobs[j].name])
    return Blocks(parts, witness) if len(parts) > 1 else None


def _restrict(sched: Schedule | None, names: set[str]) -> Schedule | None:
    if sched is None:
        return None
    segs = tuple(s for s in sched.segments if s.job in names)
    return Schedule(sched.instance, sched.method, segs) if segs else None


def solve(method: str, inst: Instance, parts: Sequence[Sequence[int]], witness: Schedule, *,
          time_limit: float | None, threads: int, seed: int, hint: Schedule | None, options: dict,
          dispatch: Dispatch, t0: float | None = None) -> Result:
    """Solve each block with ``dispatch(method, block, ...)`` and combine (see the module docstring).
    ``t0``: when the caller's clock started (the time limit and the runtime count from it)."""
    t0 = time.perf_counter() if t0 is None else t0
    w = objective_weights(inst)
    W = sum(w)
    subs = [inst.replace_jobs([inst.jobs[j] for j in p]) for p in parts]
    names = [{inst.jobs[j].name for j in p} for p in parts]
    solved: dict[int, Result] = {}
    jobs_left = len(inst.jobs)
    for g in sorted(range(len(parts)), key=lambda g: (len(parts[g]), g)):
        lim = None
        if time_limit is not None:
            left = time_limit - (time.perf_counter() - t0)
            lim = max(MIN_BLOCK_S, left * len(parts[g]) / jobs_left)
        jobs_left -= len(parts[g])
        solved[g] = dispatch(method, subs[g], lim, threads, seed, _restrict(hint, names[g]), options)
    results = [solved[g] for g in range(len(parts))]

    info = [{"jobs": len(p), "status": r.status, "objective": r.objective, "lower_bound": r.lower_bound,
             "runtime_s": r.runtime_s} for p, r in zip(parts, results)]
    main = max(results, key=lambda r: r.runtime_s)
    params: dict[str, Any] = {"time_limit": time_limit, "threads": threads, "seed": seed, "blocks": info}
    for g, r in enumerate(results):
        if r.status == SolveStatus.ERROR:
            return result_of_schedule(inst, method, None, None, t0, main.solver, main.version, params,
                          error=f"block {g} ({len(parts[g])} jobs): {r.params.get('error', 'error')}")
        if r.status == SolveStatus.INFEASIBLE:
            return result_of_schedule(inst, method, None, None, t0, main.solver, main.version, params, infeasible=True)

    bound: float | None = 0.0
    segments: list = []
    fallback = []
    for g, (p, r) in enumerate(zip(parts, results)):
        wg = sum(w[j] for j in p)
        bound = None if bound is None or r.lower_bound is None else bound + r.lower_bound * wg / W
        sched = r.schedule
        nxt = inst.jobs[parts[g + 1][0]].arrival if g + 1 < len(parts) else math.inf   # parts are in arrival order
        if sched is None or _end_of(subs[g], sched) > nxt:
            sched = _restrict(witness, names[g])
            fallback.append(g)
        segments += sched.segments  # type: ignore[union-attr]
    if fallback:
        params["witness_blocks"] = fallback
    return result_of_schedule(inst, method, Schedule(inst.name, method, tuple(segments)), bound, t0, main.solver,
                  main.version, params)


def _end_of(inst: Instance, sched: Schedule) -> float:
    """The last completion of ``sched`` replayed on ``inst`` (inf when it does not replay)."""
    rep = replay(inst, sched)
    return max(rep.completion.values()) if rep.valid and rep.completion else math.inf
