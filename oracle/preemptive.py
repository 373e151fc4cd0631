"""The preemptive class: a schedule and a certified gap from one call (``jctlab solve`` on a preemptive instance).

A non-preemptive schedule is a preemptive one (one segment per job, SPEC §4), so every candidate below is a
valid preemptive schedule; each is replayed on the preemptive instance and the best one is returned:

1. the offline oracle's schedule: the same method on the instance read as ``offline`` (``offline_share`` of
   the limit; its bound is *not* used: it bounds non-preemptive schedules only);
2. on one GPU, SRPT (:mod:`formulations.special.srpt`), replayed with the instance's ``restart_s``;
3. the round-based baselines :data:`PreemptiveParams.baselines` (``jctlab simulate``), while time is left;
4. the caller's hint.

The bound is the largest of the preemptive LP (:func:`formulations.offline.preemptive_bound.lower_bound`,
valid for every preemptive schedule) with the time left; on one GPU with unit weights SRPT's value, which
bounds every preemptive schedule also when ``restart_s`` > 0 (a relaxation); and the textbook optimum with
the releases shifted to the earliest (:mod:`formulations.special.bound`). Status: ``optimal`` when the best schedule
meets the bound, ``feasible`` otherwise (the gap is certified), ``bound_only`` without any schedule,
``infeasible`` when some job fits no allocation. Instances that are a textbook case (SRPT on one GPU without
restarts, equal releases on identical GPUs) never get here: :mod:`formulations.special` solves them first.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from baselines.families import resolve
from formulations.budget import Budget
from formulations.offline import preemptive_bound
from formulations.results import NO_INCUMBENT, Incumbent, result_of_incumbent
from formulations.special.bound import release_shift_bound
from formulations.special.recognise import Textbook, classify
from formulations.special.solve import srpt_schedule
from formulations.special.srpt import srpt
from jctlab.errors import InputError
from jctlab.model import Instance, Schedule
from jctlab.result import Result, SolveStatus
from jctlab.simulate import PolicyError, simulate

Member = Callable[..., Result]


@dataclass(frozen=True)
class PreemptiveParams:
    """How a preemptive solve shares its time limit."""

    #: share of the limit for the offline oracle's schedule
    offline_share: float = 0.5
    #: baselines start only while this share of the limit is left (the LP bound gets the rest)
    baseline_floor: float = 0.3
    #: round-based policies whose schedules compete (``jctlab simulate --policy``)
    baselines: tuple[str, ...] = ("srtf+pal", "srtf+packed-sticky", "las+packed-sticky")


def solve(method: str, inst: Instance, time_limit: float | None, threads: int, seed: int, hint: Schedule | None,
          options: dict[str, Any], member: Member, params: PreemptiveParams = PreemptiveParams()) -> Result:
    """The best replayed schedule of the candidates and the preemptive bound (module docstring)."""
    t0 = time.perf_counter()
    dl = Budget(time_limit, t0)
    info: dict[str, Any] = {"time_limit": time_limit, "threads": threads, "seed": seed, "candidates": {}}
    best = NO_INCUMBENT

    def consider(name: str, schedule: Schedule | None) -> None:
        nonlocal best
        if schedule is None:
            return
        inc = Incumbent.of(inst, schedule)
        info["candidates"][name] = inc.objective if inc.found else "invalid"
        best = best.better(inc)

    off = member(method, replace(inst, problem="offline"), dl.share(params.offline_share).remaining(), threads,
                 seed, None, options)
    if off.status == SolveStatus.INFEASIBLE:
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, f"preemptive/{method}",
                      "", {**info, "offline": off.status.value})
    info["offline"] = off.status.value
    consider(f"offline/{method}", off.schedule)
    srpt_bound = -math.inf
    case = classify(inst)
    if not isinstance(case, str) and case.problem == Textbook.ONE_R_PMTN_SUM_C:
        s = srpt(case)
        srpt_bound = s.value / case.n * (1.0 - case.n * 2.0 ** -52)
        consider("srpt", srpt_schedule(inst, case, s, method))
    floor = None if time_limit is None else params.baseline_floor * time_limit
    for name in params.baselines:
        if floor is not None and dl.left() <= floor:
            break
        try:
            sched, rep = simulate(inst, resolve(name)(inst, seed=seed), method=name)
        except PolicyError:          # the policy cannot place some job (a shape it does not handle)
            continue
        except InputError as e:      # the simulator refuses the rounds (too many for the horizon or restarts)
            info["candidates"][name] = f"refused: {e.reason}"
            continue
        if rep.valid:
            consider(name, sched)
    if hint is not None:
        consider("hint", hint)
    lb = preemptive_bound.lower_bound(inst, dl.remaining(), threads)
    if math.isinf(lb):
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, f"preemptive/{method}",
                      "", info)
    shift = release_shift_bound(inst)
    info["bounds"] = {"preemptive-lp": lb, **({"srpt": srpt_bound} if srpt_bound > -math.inf else {}),
                      **({"release-shift": shift} if shift is not None else {})}
    lb = max(lb, srpt_bound, -math.inf if shift is None else shift)
    if not best.found:
        return Result(None, None, lb, SolveStatus.BOUND_ONLY, time.perf_counter() - t0, f"preemptive/{method}", "",
                      info)
    r = result_of_incumbent(best, lb, t0, f"preemptive/{method}", "", info)
    return r.with_(schedule=Schedule(inst.name, method, r.schedule.segments))
