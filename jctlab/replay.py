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
from itertools import chain

from .closed_form import Progress, closed_form
from .engine import Engine, time_tol
from .errors import InputError, InvalidSchedule
from .metrics import compute_metrics, objective_value
from .model import Instance, Schedule, Segment

OBJECTIVE_RTOL = 1e-6


@dataclass(frozen=True)
class Replay:
    valid: bool
    error: str | None = None
    objective: float | None = None
    completion: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


def check_references(inst: Instance, sched: Schedule, source: str = "<schedule>") -> None:
    if sched.instance != inst.name:
        raise InputError(source, "instance", f"schedule is for instance {sched.instance!r}, not {inst.name!r}")
    gpu, node = inst.cluster.gpu, inst.cluster.node
    segs = sched.segments
    allocs = [s.alloc for s in segs]
    if (inst.job.keys() >= {s.job for s in segs} and gpu.keys() >= set(chain.from_iterable(a.gpus for a in allocs))
            and node.keys() >= set(chain.from_iterable(a.ps_nodes for a in allocs))):
        return
    for i, s in enumerate(segs):       # name the first reference at fault
        if s.job not in inst.job:
            raise InputError(source, f"segments[{i}].job", f"unknown job {s.job!r}")
        for k, g in enumerate(s.alloc.gpus):
            if g not in gpu:
                raise InputError(source, f"segments[{i}].gpus[{k}]", f"unknown GPU id {g!r}")
        for k, n in enumerate(s.alloc.ps_nodes):
            if n not in node:
                raise InputError(source, f"segments[{i}].ps_nodes[{k}]", f"unknown node {n!r}")


def replay(inst: Instance, sched: Schedule, source: str = "<schedule>", with_fairness: bool = True,
           with_metrics: bool = True, resumed: frozenset[str] = frozenset()) -> Replay:
    """Check ``sched`` and compute its objective, completions and (``with_metrics``) its metrics.
    ``resumed`` names jobs that ran before time 0 (the live scheduler's preempted jobs): their first
    segment pays ``restart_s``, as every later segment of a preemptive schedule does."""
    check_references(inst, sched, source)
    try:
        done, per_job = _run(inst, sched, frozenset(inst.index[j] for j in resumed))
    except InvalidSchedule as e:
        return Replay(False, str(e))
    completion = done.completion
    preemptions = sum(len(v) - 1 for v in per_job)
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


def _run(inst: Instance, sched: Schedule, resumed: frozenset[int] = frozenset()) -> tuple[Progress, list[list[Segment]]]:
    """Each job's segments checked for their order, then replayed: in closed form where it applies
    (:mod:`jctlab.closed_form`, the engine's numbers without its events), else by the engine."""
    per_job = segments_by_job(inst, sched)
    done = closed_form(inst, per_job, resumed)
    return (done if done is not None else engine_run(inst, per_job, resumed)), per_job


def segments_by_job(inst: Instance, sched: Schedule) -> list[list[Segment]]:
    """Each job's segments, in time order as the rules of a segment list require (else InvalidSchedule); the
    schedule's references must resolve (:func:`check_references`)."""
    per_job: list[list[Segment]] = [[] for _ in inst.jobs]
    index = inst.index
    for s in sched.segments:
        per_job[index[s.job]].append(s)
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
    return per_job


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
