"""Daemon events: what they say (JSON objects, one per line or per spool file) and what they change.

Every event has a unique ``id`` (the daemon skips an id it has processed: sending an event again is
harmless), a ``type`` and a ``time`` (seconds or ISO date, never earlier than the previous event's):

=========== =========================================================================================
type        fields and effect
=========== =========================================================================================
submit      ``job``: a queue record (the columns of queue.csv as keys; ``work`` may be a mapping
            ``{type: seconds}``): the job joins the queue
complete    ``job``: name; a running (or queued) job leaves the system
cancel      ``job``: name; as complete, recorded as cancelled
revise      ``job``: name and, for a running job, ``remaining_s`` (its new estimate, as of ``time``); for a
            queued job new work fields (``model``/``iterations`` or ``work``/``work_<type>``) and/or ``sizes``
running     ``job``: a running-job record (running.csv columns): a job started outside the scheduler
tick        nothing changes; the daemon re-plans at ``time``
=========== =========================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

from jctlab.errors import InputError

from .instance import LiveInstance, preempted_record
from .readers import Where, number, parse_sizes, parse_time, parse_work, queued_job, running_job
from .state import LiveState, Placement, RunningJob
from .store import JobChange

@dataclass(frozen=True)
class Event:
    """One event: its unique ``id``, ``kind`` (a ``type`` of the table above), ``time`` and the decoded object."""

    id: str
    kind: str
    time: float
    body: Mapping[str, Any]

    @property
    def where(self) -> Where:
        return Where(f"event {self.id}")


KINDS = ("submit", "complete", "cancel", "revise", "running", "tick")


def parse_event(obj: Any, source: str) -> Event:
    """An :class:`Event` of a decoded JSON value; InputError naming ``source`` and the field otherwise."""
    if not isinstance(obj, Mapping):
        raise InputError(source, "", "an event is a JSON object")
    eid = obj.get("id")
    if not isinstance(eid, (str, int)) or isinstance(eid, bool) or str(eid) == "":
        raise InputError(source, "id", "every event needs a unique id (string or integer)")
    kind = obj.get("type")
    if kind not in KINDS:
        raise InputError(source, "type", f"must be one of {'|'.join(KINDS)}, got {kind!r}")
    if obj.get("time") is None:
        raise InputError(source, "time", "missing event time")
    t = parse_time(obj["time"], Where(source), "time")
    if kind != "tick" and obj.get("job") is None:
        raise InputError(source, "job", f"a {kind} event names its job")
    return Event(str(eid), str(kind), t, obj)


def _name(ev: Event) -> str:
    job = ev.body["job"]
    name = job.get("name") if isinstance(job, Mapping) else job
    if not isinstance(name, str) or not name:
        raise ev.where.fail("job", "expected a job name")
    return name


def apply(state: LiveState, ev: Event) -> tuple[LiveState, list[JobChange]]:
    """The state after ``ev`` (its clock at ``ev.time``) and the job records it changes. InputError for an
    event that contradicts the state (time going back, an unknown job, a second submission...)."""
    if ev.time < state.now:
        raise ev.where.fail("time", f"{ev.time:g} is before the previous event ({state.now:g})")
    st = state.at(ev.time)
    queued = {q.name: q for q in st.queued}
    running = {r.name: r for r in st.running}
    cl = st.cluster
    changes: list[JobChange] = []
    if ev.kind == "tick":
        return st, changes
    if ev.kind in ("submit", "running"):
        rec = ev.body["job"]
        if not isinstance(rec, Mapping):
            raise ev.where.fail("job", "expected a job record (an object)")
        if ev.kind == "submit":
            job = queued_job(rec, cl, Where(f"event {ev.id}: job"))
            if job.name in queued or job.name in running:
                where = "queued" if job.name in queued else "running"
                raise ev.where.fail("job.name", f"job {job.name!r} is already {where}")
            queued[job.name] = job
            changes.append(JobChange(job.name, "queued", job.to_dict()))
        else:
            r = running_job(rec, cl, Where(f"event {ev.id}: job"), ev.time)
            busy = {g: o.name for o in running.values() for g in o.gpus}
            taken = [g for g in r.gpus if g in busy]
            if taken:
                raise ev.where.fail("job.gpus", f"GPU {taken[0]} is held by running job {busy[taken[0]]}")
            if r.name in running:
                raise ev.where.fail("job.name", f"job {r.name!r} is already running")
            queued.pop(r.name, None)
            running[r.name] = r
            changes.append(JobChange(r.name, "running", r.to_dict()))
    elif ev.kind in ("complete", "cancel"):
        name = _name(ev)
        gone = running.pop(name, None) or queued.pop(name, None)
        if gone is None:
            raise ev.where.fail("job", f"job {name!r} is neither queued nor running")
        changes.append(JobChange(name, "done" if ev.kind == "complete" else "cancelled", gone.to_dict()))
    else:   # revise
        name = _name(ev)
        body = ev.body
        if name in running:
            if body.get("remaining_s") is None:
                raise ev.where.fail("remaining_s", "a running job's revision gives its new remaining_s")
            r = replace(running[name], remaining_s=number(body["remaining_s"], ev.where, "remaining_s", nonneg=True),
                        estimated_at=ev.time)
            running[name] = r
            changes.append(JobChange(name, "running", r.to_dict()))
        elif name in queued:
            q = queued[name]
            work = parse_work(body, cl, ev.where, required=False) or q.work
            sizes = q.sizes if body.get("sizes") is None else parse_sizes(body["sizes"], ev.where)
            q = queued_job({"name": q.name, "submit": q.submit, "sizes": list(sizes), "weight": q.weight,
                            **work_record(work)}, cl, ev.where)
            queued[name] = q
            changes.append(JobChange(name, "queued", q.to_dict()))
        else:
            raise ev.where.fail("job", f"job {name!r} is neither queued nor running")
    return replace(st, queued=tuple(queued.values()), running=tuple(running.values())), changes


def work_record(work) -> dict[str, Any]:
    """A work value as the fields of a job record (the inverse of :func:`live.readers.parse_work`)."""
    if work.model is not None:
        return {"model": work.model, "iterations": work.iterations}
    return {"work": dict(work.seconds), "comm_mb": work.comm_mb, "steps": work.steps}


def start(state: LiveState, placements: tuple[Placement, ...]) -> tuple[LiveState, list[JobChange]]:
    """The state once the jobs of ``placements`` run (their estimate: the planned run time)."""
    queued = {q.name: q for q in state.queued}
    running = list(state.running)
    changes = []
    for p in placements:
        q = queued.pop(p.job)
        r = RunningJob(q.name, q.submit, state.now, tuple(p.gpus), p.end - state.now, state.now, q.work, q.weight,
                       q.traits, q.preempted, tuple(p.ps_nodes))
        running.append(r)
        changes.append(JobChange(r.name, "running", r.to_dict()))
    return replace(state, queued=tuple(queued.values()), running=tuple(running)), changes


def preempt(state: LiveState, names: Iterable[str], li: LiveInstance) -> tuple[LiveState, list[JobChange]]:
    """The state once the running jobs ``names`` are stopped (``li``: the live instance of ``state``):
    each is queued again with the work it has left (:func:`live.instance.preempted_record`)."""
    stop = set(names)
    running = [r for r in state.running if r.name not in stop]
    back = [preempted_record(r, li) for r in state.running if r.name in stop]
    changes = [JobChange(q.name, "queued", q.to_dict()) for q in back]
    return replace(state, queued=state.queued + tuple(back), running=tuple(running)), changes
