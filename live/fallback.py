"""Heuristic plans, fast enough to be ready before the oracle starts: the decision for *now* is never
later than the time limit, whatever the oracle does.

* any online policy the registry knows (``jctlab simulate --policy`` names: ``srtf+packed``,
  ``fifo+packed``, ``matching``...), run through the core simulator on the live instance with the running
  jobs started first on their own GPUs;
* ``greedy``: the queue in shortest-work order, each job on the allocation that completes it earliest;
* ``srpt`` (with preemption): the longest-running jobs stopped for shorter queued ones, as SRTF does;
* ``previous``: the previous plan's order and GPUs for the jobs still queued, new jobs after them
  (earliest completion) — the rolling horizon's warm start.

Each is a list (with allocations where the heuristic chose them) that :class:`live.decode.Decoder`
list-schedules; the improvement phase (:mod:`live.search`) starts from the best of them.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Iterable

from jctlab import registry
from jctlab.errors import InputError
from jctlab.model import Allocation, Instance
from jctlab.simulate import Action, PolicyError, Simulator, Start

from .decode import Decoded, Decoder, shortest_first
from .instance import LiveInstance
from .state import Plan

#: queued jobs arrive this long after the running ones in the simulated copy, so the running jobs take
#: their own GPUs before any policy sees the queue; the decoder moves the starts back to 0
PIN_EPS = 1e-6


class _Late(Exception):
    """The simulated policy ran past the planner's deadline."""


class _Pinned:
    """Starts the running jobs on their own GPUs at time 0, then hands every decision to ``inner``; stops
    the simulation at ``deadline`` (a ``time.perf_counter()`` instant), so a policy started just before it
    cannot delay the decision."""

    def __init__(self, inner, pins: dict[int, Allocation], deadline: float = math.inf):
        self.inner = inner
        self.pins = dict(pins)
        self.deadline = deadline

    def decide(self, sim) -> Iterable[Action]:
        if time.perf_counter() >= self.deadline:
            raise _Late
        if self.pins:
            out = [Start(j, a) for j, a in self.pins.items()]
            self.pins = {}
            return out
        return self.inner.decide(sim)


def _shifted(li: LiveInstance) -> Instance:
    jobs = tuple(j if i < li.n_running else replace(j, arrival=PIN_EPS) for i, j in enumerate(li.instance.jobs))
    return li.instance.replace_jobs(jobs)


def simulated(li: LiveInstance, dec: Decoder, policy: str, seed: int = 0, deadline: float = math.inf
              ) -> Decoded | None:
    """The plan that online policy ``policy`` makes from the live state (its order and allocations), or
    None when it cannot place the queue (a shape it does not handle) or is not done by ``deadline``.
    InputError for a policy name the registry does not know."""
    factory = registry.policy_factory(policy)
    if factory is None:
        raise InputError("live planner", "fallbacks", f"unknown policy {policy!r}")
    inst = _shifted(li)
    try:
        sched, _ = Simulator(inst, _Pinned(factory(inst, seed=seed), li.pins, deadline), method=policy).run()
    except (PolicyError, _Late):
        return None
    return dec.decode_pairs(li.order_of(sched))


def greedy(li: LiveInstance, dec: Decoder) -> Decoded:
    return dec.decode(shortest_first(li))


def srpt(li: LiveInstance, dec: Decoder, most: int = 8) -> dict[str, Decoded]:
    """Preemptive shortest-remaining-first plans (with preemption): for k = 1..``most``, stop the k movable
    running jobs with the longest remaining time over weight, each longer than the shortest queued job, and
    list-schedule them with the queue in Smith's order. What SRTF does at a round, as plans the planner
    prices (its rule keeps one only if every stop pays); the search's stops go one at a time."""
    if not li.queued:
        return {}
    shortest = min(li.wspt_key(j) for j in li.queued)
    jobs = li.instance.jobs
    left = {r: li.pinned_end[r] / jobs[r].weight for r in li.movable}
    longer = sorted((r for r in left if left[r] > shortest), key=lambda r: (-left[r], r))
    out = {}
    for k in range(1, min(most, len(longer)) + 1):
        stop = longer[:k]
        out[f"srpt{k}"] = dec.decode(shortest_first(li, [*li.queued, *stop]), released=stop)
    return out


def previous(li: LiveInstance, dec: Decoder, plan: Plan) -> Decoded:
    """The previous plan's order for the jobs still queued (on the same GPUs where they still may run),
    then the new ones, shortest first."""
    idx = li.instance.index
    queued = set(li.queued)
    head: list[tuple[int, Allocation | None]] = []
    seen: set[int] = set()
    for p in plan.order:
        j = idx.get(p.job)
        if j is None or j not in queued or j in seen:
            continue
        alloc = Allocation(tuple(p.gpus), tuple(p.ps_nodes))
        head.append((j, alloc if li.allowed(j, alloc) else None))
        seen.add(j)
    return dec.decode_pairs(head, [j for j in shortest_first(li) if j not in seen])
