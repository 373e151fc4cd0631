"""Replay: check a schedule against every validity rule of SPEC §4 and compute what it achieves.

References that do not resolve in the instance (an unknown job, GPU id or node, or a schedule made
for another instance) are bad input (:class:`InputError`, exit 2); a well-formed schedule that breaks
a rule is invalid (``Replay.valid`` is False, exit 1). The rules are the engine's (:mod:`jctlab.engine`);
where no job's rate depends on another's, :mod:`jctlab.closed_form` gives the engine's numbers without its
events, or hands the schedule to the engine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .closed_form import Progress, closed_form, time_tols
from .columns import Columns, read_segments
from .engine import Engine, time_tol
from .errors import InvalidSchedule
from .metrics import compute_metrics, objective_value
from .model import Instance, Schedule, Segment
from .speed import BaseTimes

OBJECTIVE_RTOL = 1e-6


@dataclass(frozen=True)
class Replay:
    valid: bool
    error: str | None = None
    objective: float | None = None
    completion: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


def check_references(inst: Instance, sched: Schedule, source: str = "<schedule>") -> None:
    """:class:`InputError` naming the first reference of ``sched`` that does not resolve in ``inst``."""
    read_segments(inst, sched, source)


def replay(inst: Instance, sched: Schedule, source: str = "<schedule>", with_fairness: bool = True,
           with_metrics: bool = True, resumed: frozenset[str] = frozenset(),
           base_times: BaseTimes | None = None) -> Replay:
    """Check ``sched`` and compute its objective, completions and (``with_metrics``) its metrics.
    ``resumed`` names jobs that ran before time 0 (the live scheduler's preempted jobs): their first
    segment pays ``restart_s``, as every later segment of a preemptive schedule does. ``base_times``: the
    speed model's memo of ``inst`` where a run already has one (a simulation's engine), else a new one."""
    cols = read_segments(inst, sched, source)
    try:
        check_order(inst, cols)
        # in closed form where it applies (the engine's numbers without its events), else by the engine
        resumed_ix = frozenset(inst.index[j] for j in resumed)
        done = closed_form(inst, cols, resumed_ix, base_times)
        if done is None:
            done = engine_run(inst, cols.per_job(), resumed_ix)
    except InvalidSchedule as e:
        return Replay(False, str(e))
    completion = done.completion
    preemptions = len(cols.segments) - len(inst.jobs)      # every job has a segment (check_order)
    metrics = (compute_metrics(inst, completion, done.first_start, done.gpu_seconds, preemptions, with_fairness)
               if with_metrics else {})
    obj = objective_value(inst, completion)
    comp = {j.name: c for j, c in zip(inst.jobs, completion)}
    c = sched.claimed
    if c is not None and c.objective is not None:
        if not math.isclose(c.objective, obj, rel_tol=OBJECTIVE_RTOL, abs_tol=1e-9):
            return Replay(False, f"claimed objective {c.objective!r} differs from the replayed {obj!r}", obj, comp, metrics)
    if c is not None and c.lower_bound is not None and c.lower_bound > obj * (1 + OBJECTIVE_RTOL) + 1e-9:
        return Replay(False, f"claimed lower bound {c.lower_bound!r} exceeds the replayed objective {obj!r}", obj, comp, metrics)
    return Replay(True, None, obj, comp, metrics)


def checked_segments(inst: Instance, sched: Schedule) -> Columns:
    """``sched``'s segments read (:func:`jctlab.columns.read_segments`) and their order checked (:func:`check_order`)."""
    cols = read_segments(inst, sched)
    check_order(inst, cols)
    return cols


def check_order(inst: Instance, cols: Columns) -> None:
    """The rules on each job's list of segments, else :class:`InvalidSchedule` naming the first job at fault: at least
    one segment; one, without an end, in a schedule that is not preemptive; only the last without an end; each
    ending after it starts, and starting when the one before ends or later (within the tolerance). Checked on
    arrays; where a rule fails, :func:`_name_the_order_fault` finds the first fault, segment by segment."""
    count = cols.count
    ok = bool(count.all())
    if ok and inst.problem != "preemptive":
        ok = bool((count == 1).all()) and bool(np.isnan(cols.end).all())
    elif ok:
        t, e = cols.start[cols.by_job], cols.end[cols.by_job]     # each job's segments together
        ends = ~np.isnan(e)
        has_next = np.ones(len(t), bool)
        has_next[cols.first + count - 1] = False          # each job's last segment
        nxt = t[1:][has_next[:-1]]
        ok = not ((~ends & has_next).any() or (e[ends] <= t[ends]).any()
                  or (nxt < e[:-1][has_next[:-1]] - time_tols(nxt)).any())
    if not ok:
        _name_the_order_fault(inst, cols.per_job())


def _name_the_order_fault(inst: Instance, per_job: list[list[Segment]]) -> None:
    """:func:`check_order`'s rules job by job, segment by segment: InvalidSchedule at the first fault."""
    for j, segs in enumerate(per_job):
        name = inst.jobs[j].name
        if not segs:
            raise InvalidSchedule(f"job {name} has no segment")
        if inst.problem != "preemptive":
            if len(segs) != 1:
                raise InvalidSchedule(f"job {name} has {len(segs)} segments; {inst.problem} schedules have one per job")
            if segs[0].end is not None:
                raise InvalidSchedule(f"job {name}: non-preemptive segments run to completion (end must be null)")
        last = len(segs) - 1
        prev_end = 0.0           # of segment k - 1, which has one (else it would have been refused as not the last)
        for k, s in enumerate(segs):
            start, end = s.start, s.end
            if end is None:
                if k < last:
                    raise InvalidSchedule(f"job {name}: segment {k} has no end but is not the job's last")
            elif end <= start:
                raise InvalidSchedule(f"job {name}: segment {k} ends at {end:g}, not after its start {start:g}")
            if k and start < prev_end - time_tol(start):
                raise InvalidSchedule(f"job {name}: segment {k} starts before segment {k - 1} ends (segments in time order)")
            prev_end = end   # type: ignore[assignment]


def engine_run(inst: Instance, per_job: list[list[Segment]], resumed: frozenset[int]) -> Progress:
    """Replay ``per_job`` event by event through the engine (raises :class:`InvalidSchedule` at the first
    rule broken)."""
    # events: (time, kind, job, segment index); stops (0) before starts (1) at equal times
    events = []
    add = events.append
    for j, segs in enumerate(per_job):
        for k, s in enumerate(segs):
            add((s.start, 1, j, k))
            if s.end is not None:
                add((s.end, 0, j, k))
    events.sort()

    eng = Engine(inst, resumed)
    heap = eng._heap
    t_last = bound = math.nan
    for t, kind, j, k in events:
        if t != t_last:
            t_last, bound = t, t + time_tol(t)
        if heap and heap[0][0] <= bound:   # else no completion is due (the heap's top is its earliest)
            eng.pop_completions(bound)
        last = k == len(per_job[j]) - 1
        if kind == 0:
            c = eng.completion[j]
            if c is not None:
                if not last or c < t - time_tol(t):   # a segment holds its GPUs until its end: none past the work
                    raise InvalidSchedule(
                        f"job {inst.jobs[j].name} completes at {c:g}, before its segment {k} ends at {t:g}")
                continue
            eng.stop(j, t)
            if eng.completion[j] is not None and not last:
                raise InvalidSchedule(
                    f"job {inst.jobs[j].name} completes at {t:g}, at the end of segment {k}, before its last segment")
        else:
            eng.start(j, per_job[j][k].alloc, t)
    eng.pop_completions(math.inf)
    for j, c in enumerate(eng.completion):
        if c is None:
            raise InvalidSchedule(f"job {inst.jobs[j].name} does not complete: its segments end before its work is done")
    return Progress(eng.completion, eng.first_start, eng.gpu_seconds)  # type: ignore[arg-type]
