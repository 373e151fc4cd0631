"""Lower bounds on the objective of every plan of a live state, in closed form (microseconds to
milliseconds), for any queue length: the bound the planner reports when the oracle did not see the whole
queue, and the part of it outside the oracle's window when it saw some.

Notation: M GPUs; a running job r kept on its n_r GPUs ends at e_r (its pinned end); for every other job j
(queued, or running but preempted), p_j is a proven least run time over all its allocations
(:func:`formulations.offline.classes.p_min`: every allocation maps onto a relaxed class that is no
slower) and a_j its least GPU-time (the least n × duration over those classes), both plus ``restart_s``
(× n for a_j) for a job that pays a restart: while restarting it holds its GPUs.

**Without preemption** (running jobs stay on their GPUs until e_r), for the queued jobs Q:

1. C_q ≥ p_q for each q (it starts at 0 at the earliest);
2. the free GPU capacity at time s is F(s) = M − Σ_{r: e_r > s} n_r, so by time t the queued jobs can
   have used at most K(t) = ∫_0^t F GPU-seconds. The k-th queued job to complete, and the k − 1 before it,
   have used at least A_k = (sum of the k least a_q) by then, so C_(k) ≥ T(A_k) with T = K⁻¹. Hence
   Σ_q C_q ≥ Σ_k T(A_k) (mean JCT), and with T(A) ≥ A/M, Σ_q w_q C_q ≥ the optimum of the one-machine
   problem with times a_q/M, Smith's order (weighted JCT); max_q C_q ≥ T(Σ_q a_q) (makespan).

Σ_q w_q C_q is at least the larger of (1) and (2); the live objective adds the running jobs at e_r.
A sub-queue's bound is valid on its own (a plan restricted to it is a plan of the sub-state), so the oracle's
bound on the running jobs and a window W of the queue adds to the bound of Q \\ W (:func:`queued_bound`).

**With preemption** a running job r may stop now and resume later anywhere (same GPU count, paying the
restart): C_r ≥ min(e_r, p_r) and its GPU-time is at least min(n_r e_r, a_r). Every job j then has
C_j ≥ c_j (c_q = p_q), and the jobs' GPU-times sorted give C_(k) ≥ A_k / M over all of them: the bound is
the larger of Σ_j w_j c_j and that one-machine optimum. Both arguments hold for preemptive schedules too,
so these bounds bound every schedule from now, not only the plans the planner can make.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

from formulations.offline.classes import class_options
from formulations.offline.options import Option

from .instance import LiveInstance


def least(li: LiveInstance) -> tuple[list[float], list[float]]:
    """(p_j, a_j) of every job of the live instance, with the restart of the jobs that pay one when
    they start again (queued jobs preempted earlier; running jobs, should they be preempted)."""
    inst = li.instance
    opts = class_options(inst)
    p, a = [], []
    for j, ol in enumerate(opts):
        restart = li.restart_s if (j in li.pending or j < li.n_running) else 0.0
        p.append(min((o.dur for o in ol), default=math.inf) + restart)
        a.append(min((_count(o) * (o.dur + restart) for o in ol), default=math.inf))
    return p, a


def _count(o: Option) -> int:
    """GPUs of a relaxed class (("node", name, n) or ("spread", n, ...))."""
    return int(o.cls[2] if o.cls[0] == "node" else o.cls[1])   # type: ignore[index]


def _capacity(li: LiveInstance, kept: Iterable[int]) -> tuple[list[float], list[float]]:
    """Breakpoints of F (GPUs free at s, piecewise constant): (times t_0=0 < t_1 < ..., F on [t_i, t_i+1))."""
    m = len(li.instance.cluster.gpus)
    ends: dict[float, int] = {}
    busy = 0
    for r in kept:
        n = len(li.pins[r].gpus)
        busy += n
        ends[li.pinned_end[r]] = ends.get(li.pinned_end[r], 0) + n
    times, free = [0.0], [float(m - busy)]
    for e in sorted(ends):
        busy -= ends[e]
        if e <= 0.0:
            free[0] = float(m - busy)
            continue
        times.append(e)
        free.append(float(m - busy))
    return times, free


def _inverse(times: Sequence[float], free: Sequence[float], area: float) -> float:
    """T(area): the least t with ∫_0^t F ≥ area (F the step function of ``_capacity``)."""
    done = 0.0
    for i, f in enumerate(free):
        end = times[i + 1] if i + 1 < len(times) else math.inf
        if f > 0 and done + f * (end - times[i]) >= area:
            return times[i] + (area - done) / f
        if not math.isinf(end):
            done += f * (end - times[i])
    return math.inf


def queued_bound(li: LiveInstance, jobs: Iterable[int], p: Sequence[float] | None = None,
                 a: Sequence[float] | None = None) -> float:
    """A lower bound on Σ_{q∈jobs} w_q C_q (max C_q for makespan) over plans that keep every running job
    in place; ``jobs`` are queued jobs (module docstring, 1 and 2)."""
    jobs = list(jobs)
    if not jobs:
        return 0.0
    if p is None or a is None:
        p, a = least(li)
    times, free = _capacity(li, range(li.n_running))
    w = li.weights
    if li.instance.objective == "makespan":
        return max(max(p[q] for q in jobs), _inverse(times, free, sum(a[q] for q in jobs)))
    per_job = sum(w[q] * p[q] for q in jobs)
    if li.instance.objective == "mean_jct":
        total, area = 0.0, 0.0
        for q in sorted(jobs, key=lambda q: a[q]):
            area += a[q]
            total += _inverse(times, free, area)
    else:
        total = _smith(jobs, a, w, len(li.instance.cluster.gpus))
    return max(per_job, total)


def _smith(jobs: Sequence[int], a: Sequence[float], w: Sequence[float], m: int) -> float:
    """Σ w C of Smith's order on one machine with times a/m (the optimum of that problem)."""
    t, total = 0.0, 0.0
    for j in sorted(jobs, key=lambda j: a[j] / w[j]):
        t += a[j] / m
        total += w[j] * t
    return total


def state_bound(li: LiveInstance, preemption: bool, pa: tuple[list[float], list[float]] | None = None) -> float:
    """A lower bound on the objective of every plan of the live state (module docstring); ``pa``: the
    :func:`least` of ``li``, when already computed."""
    p, a = pa or least(li)
    queued = list(li.queued)
    if not preemption or not li.movable:
        return li.objective_of(queued_bound(li, queued, p, a))
    # running jobs: kept (C = e, GPU-time n·e) or stopped and resumed (C ≥ p, GPU-time ≥ a, restart included)
    c = list(p)
    area = list(a)
    for r in range(li.n_running):
        n, e = len(li.pins[r].gpus), li.pinned_end[r]
        c[r] = min(e, p[r]) if r in li.movable else e
        area[r] = min(n * e, a[r]) if r in li.movable else n * e
    jobs = range(len(li.instance.jobs))
    m = len(li.instance.cluster.gpus)
    w = li.weights
    if li.instance.objective == "makespan":
        return max(max(c), sum(area) / m)
    if li.instance.objective == "mean_jct":
        total, acc = 0.0, 0.0
        for j in sorted(jobs, key=lambda j: area[j]):
            acc += area[j]
            total += acc / m
    else:
        total = _smith(list(jobs), area, w, m)
    return max(sum(w[j] * c[j] for j in jobs), total) / sum(w)


def window_bound(li: LiveInstance, window: Iterable[int], window_part: float,
                 pa: tuple[list[float], list[float]] | None = None) -> float:
    """Plans that keep every running job in place: the oracle's bound on the window's Σ w C
    (:meth:`LiveInstance.queued_part`) plus the bound of the rest of the queue."""
    inside = set(window)
    rest = [q for q in li.queued if q not in inside]
    p, a = pa or least(li)
    part = queued_bound(li, rest, p, a)
    if li.instance.objective == "makespan":
        return li.objective_of(max(window_part, part))
    return li.objective_of(window_part + part)
