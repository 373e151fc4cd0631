"""Schedules from decisions, and the objective's job weights (shared by every formulation)."""

from __future__ import annotations

from typing import Sequence

from jctlab.model import Allocation, Claimed, Instance, Schedule, Segment
from jctlab.replay import replay


def start_order(inst: Instance, sched: Schedule) -> list[int] | None:
    """The jobs by their first start in ``sched`` (ties by index): the priority order whose list schedule the
    searches start from; None where ``sched`` does not start every job."""
    start: dict[int, float] = {}
    for sg in sched.segments:
        j = inst.index[sg.job]
        start[j] = min(start.get(j, sg.start), sg.start)
    if len(start) != len(inst.jobs):
        return None
    return sorted(start, key=lambda j: (start[j], j))


def objective_weights(inst: Instance) -> list[float]:
    """Per-job coefficient of a completion time in the objective, normalised (mean: 1/n; weighted: w_j/Σw).
    For ``makespan`` every weight is 1 and the objective is the maximum instead of the sum."""
    jobs = inst.jobs
    if inst.objective == "makespan":
        return [1.0] * len(jobs)
    if inst.objective == "weighted_jct":
        w = sum(j.weight for j in jobs)
        return [j.weight / w for j in jobs]
    return [1.0 / len(jobs)] * len(jobs)


def job_weights(inst: Instance) -> list[float]:
    """Per-job weight of the objective, not normalised (``weighted_jct``: the jobs' weights; else 1)."""
    if inst.objective == "weighted_jct":
        return [j.weight for j in inst.jobs]
    return [1.0] * len(inst.jobs)


def static_schedule(inst: Instance, allocs: Sequence[Allocation], method: str) -> Schedule:
    """One segment per job, every start at 0 (SPEC §3 static)."""
    segs = tuple(Segment(j.name, 0.0, None, a) for j, a in zip(inst.jobs, allocs))
    return Schedule(inst.name, method, segs)


def timed_schedule(inst: Instance, starts: Sequence[float], allocs: Sequence[Allocation], method: str) -> Schedule:
    """One segment per job with the given starts (offline class)."""
    segs = tuple(Segment(j.name, float(s), None, a) for j, s, a in zip(inst.jobs, starts, allocs))
    return Schedule(inst.name, method, segs)


def replay_objective(inst: Instance, sched: Schedule) -> float | None:
    """The replayed objective of a schedule, or None when it is invalid."""
    rep = replay(inst, sched.with_claim(Claimed()) if sched.claimed else sched)
    return rep.objective if rep.valid else None


def hint_allocations(inst: Instance, hint: Schedule | None) -> list[Allocation] | None:
    """The per-job allocations of a hint schedule (None when it does not cover every job)."""
    if hint is None:
        return None
    by = {s.job: s.alloc for s in hint.segments}
    if any(j.name not in by for j in inst.jobs):
        return None
    return [by[j.name] for j in inst.jobs]
