"""Replay in closed form where no job's rate depends on another job's: the engine's results without its events.

On a cluster without co-location interference (no class table, no PCIe switch factor) a job's progress on a
segment depends only on the segment: it runs at 1 / base iteration time from its start (plus ``restart_s`` when
it resumes) to its end. Replay (:mod:`jctlab.replay`) then needs no event queue, and a schedule of millions of
segments (non-sticky rounds on a whole trace) replays two to three times faster than through
:class:`jctlab.engine.Engine`.

**Only a shortcut to the engine's verdict, never a second rulebook.** :func:`closed_form` returns the engine's
completions, first starts and GPU-seconds, bit for bit, when it can show that the engine accepts the schedule;
it returns None in every other case (anything it does not model, and every schedule the engine would reject),
and replay then runs the engine, whose error messages are the only ones. So a wrong closed form could only make
replay slower, not change a verdict, as long as "not None" implies "the engine accepts, with these numbers":
``tests/test_closed_form.py`` checks that law by Hypothesis on simulated schedules and on mutated ones. Why the
numbers are equal, the engine's operations in the same order for each job:

* the engine starts a segment at ``t`` with ``last = t``, ``restart_until = t + restart`` and factor 1.0, so its
  work begins at ``begin = max(t, t + restart)``, which is ``t + restart`` (restarts are never negative); it
  predicts the completion ``begin + left · base · 1.0`` with ``left = max(0, iterations − progress)``, and a
  stop at ``e`` adds ``(e − begin) / (base · 1.0)`` when ``e > begin``, then completes the job there if its
  progress reaches ``iterations · (1 − EPS)``; ``x · 1.0`` is ``x`` exactly, so the closed form drops the factor;
* the engine pops a predicted completion ``tc`` before any event whose time ``t'`` has ``tc ≤ t' + tol(t')``: so
  before the segment's own stop at ``e`` iff ``tc ≤ e + tol(e)``, where replay requires the segment to be the
  job's last and ``tc ≥ e − tol(e)``; and a GPU it held is free for a start at ``s`` iff ``tc ≤ s + tol(s)``
  (a stop at ``e`` frees it for a start at ``s ≥ e``: at equal times the engine stops before it starts);
* GPU-seconds add ``(release − start) · #GPUs`` per segment in the job's order, from 0.0.

CPU and memory: every segment at the nodes' fair share (null levels, no parameter server), and each node's fair
shares exact in binary (multiples of 1/1024) with ``GPUs × share ≤ capacity``. Then every sum the engine forms is
exact, and with no GPU held twice a node never holds more than its capacity, so the engine's capacity check
cannot fail. Otherwise (levels, servers, shares such as 10 CPUs / 3 GPUs whose sums round) None.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter

from .engine import EPS, earliest_start, time_tol, uses_every_type
from .model import Instance, Segment
from .resources import exact_fair_shares
from .speed import BaseTimes, SpeedError


@dataclass(frozen=True)
class Progress:
    """What replaying a schedule yields per job (index order): completion time, first start, GPU-seconds held."""

    completion: list[float]
    first_start: list[float]
    gpu_seconds: list[float]


def applies(inst: Instance) -> bool:
    """Whether the closed form can replay schedules of ``inst`` at all (its segments may still send one to the
    engine)."""
    cl = inst.cluster
    return (not (cl.has_interference or cl.has_switch_interference) and cl.restart_s >= 0
            and all(map(exact_fair_shares, cl.nodes)))


def closed_form(inst: Instance, per_job: list[list[Segment]], resumed: frozenset[int] = frozenset()) -> Progress | None:
    """The engine's :class:`Progress` on ``per_job`` (each job's segments in time order, as replay checked them:
    at least one, ends after starts, only the last without an end), or None where it cannot show that the
    engine accepts them (module docstring). ``resumed``: jobs whose first segment pays ``restart_s``."""
    if not applies(inst):
        return None
    cl = inst.cluster
    gpu_node = {g.id: g.node for g in cl.gpus}
    gpu_type = {g.id: g.type for g in cl.gpus}
    types = cl.gpu_types
    base_of = BaseTimes(inst.jobs, cl).get
    restart_s = cl.restart_s
    static = inst.problem == "static"
    n = len(inst.jobs)
    completion: list[float] = [0.0] * n
    gpu_seconds: list[float] = [0.0] * n
    held: list[tuple[float, float, bool, tuple[str, ...]]] = []   # (start, release, by completion, GPUs)
    for j, segs in enumerate(per_job):
        job = inst.jobs[j]
        iterations, sizes = job.iterations, job.sizes
        finish_at = iterations * (1 - EPS)                     # the engine's test of a stop that completes
        earliest = earliest_start(job)
        any_type = uses_every_type(job, types)
        resumes = j in resumed
        progress = 0.0
        done = None
        last = len(segs) - 1
        prev_end = None
        for k, s in enumerate(segs):
            t, a = s.start, s.alloc
            gpus = a.gpus
            if (t < earliest or (static and t != 0) or a.ps_nodes or a.cpus_per_gpu is not None
                    or a.mem_gb_per_gpu is not None or len(gpus) not in sizes
                    or (prev_end is not None and t < prev_end)):
                return None
            if len(gpus) == 1:
                nodes = 1
            else:
                if len(set(gpus)) != len(gpus):
                    return None
                nodes = len(set(map(gpu_node.__getitem__, gpus)))
            if not any_type and not all(job.can_use(gpu_type[g]) for g in gpus):
                return None
            try:
                base = base_of(j, a, nodes)
            except SpeedError:
                return None
            begin = t + restart_s if (k or resumes) else t     # max(t, t + restart): restart_s >= 0 (applies)
            tc = begin + max(0.0, iterations - progress) * base
            e = s.end
            tol = 0.0 if e is None else time_tol(e)
            if e is None or tc <= e + tol:    # the predicted completion comes first
                if k != last or (e is not None and tc < e - tol):
                    return None
                done = release = tc
                by_completion = True
            else:                                       # the stop at e
                if e > begin:
                    progress += (e - begin) / base
                release, by_completion = e, False
                if progress >= finish_at:
                    if k != last:
                        return None
                    done = e
            gpu_seconds[j] += (release - t) * len(gpus)          # max(0, ·) of the engine: release >= t here
            held.append((t, release, by_completion, gpus))
            prev_end = e
        if done is None:
            return None
        completion[j] = done
    if not _gpus_held_once(held):
        return None
    return Progress(completion, [segs[0].start for segs in per_job], gpu_seconds)


def _gpus_held_once(held: list[tuple[float, float, bool, tuple[str, ...]]]) -> bool:
    """Whether, segment by segment in start order (``held`` is sorted so), each GPU is free when the segment starts: released by a stop
    at or before the start, or by a completion within the engine's tolerance of it; two segments starting on
    one GPU at the same time are left to the engine (its event order decides)."""
    busy: dict[str, tuple[float, float, bool, tuple[str, ...]]] = {}     # GPU -> its last segment so far
    last_of = busy.get
    held.sort(key=itemgetter(0))
    for h in held:
        t = h[0]
        for prev in map(last_of, h[3]):
            # prev starts at or before t; it is in the way if it starts at t too, or is released after t other than
            # by a completion within the tolerance
            if prev is not None and (prev[0] == t or (prev[1] > t and not (prev[2] and prev[1] <= t + time_tol(t)))):
                return False
        busy.update(zip(h[3], repeat(h)))
    return True
