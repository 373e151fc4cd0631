"""Heuristic plans, fast enough to be ready before the oracle starts: the decision for *now* is never
later than the time limit, whatever the oracle does.

* any online policy the registry knows (``jctlab simulate --policy`` names: ``srtf+packed``,
  ``fifo+packed``, ``matching``...), run through the core simulator on the live instance with the running
  jobs started first on their own GPUs;
* ``greedy``: the queue in shortest-work order, each job on the allocation that completes it earliest;
* ``previous``: the previous plan's order and GPUs for the jobs still queued, new jobs after them
  (earliest completion) — the rolling horizon's warm start.

Each gives an order and allocations that :meth:`LiveInstance.timed` turns into a plan.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable

from jctlab import registry
from jctlab.errors import InputError
from jctlab.model import Allocation, Instance
from jctlab.simulate import Action, PolicyError, Simulator, Start

from .instance import LiveInstance, Timed
from .state import Plan

#: queued jobs arrive this long after the running ones in the simulated copy, so the running jobs take
#: their own GPUs before any policy sees the queue; :meth:`LiveInstance.timed` moves the starts back to 0
PIN_EPS = 1e-6


class _Pinned:
    """Starts the running jobs on their own GPUs at time 0, then hands every decision to ``inner``."""

    def __init__(self, inner, pins: dict[int, Allocation]):
        self.inner = inner
        self.pins = dict(pins)

    def decide(self, sim) -> Iterable[Action]:
        if self.pins:
            out = [Start(j, a) for j, a in self.pins.items()]
            self.pins = {}
            return out
        return self.inner.decide(sim)


def _shifted(li: LiveInstance) -> Instance:
    jobs = tuple(j if i < li.n_running else replace(j, arrival=PIN_EPS) for i, j in enumerate(li.instance.jobs))
    return li.instance.replace_jobs(jobs)


def simulated(li: LiveInstance, policy: str, seed: int = 0) -> Timed | None:
    """The plan that online policy ``policy`` makes from the live state, or None when it cannot place
    the queue (a shape it does not handle). InputError for a policy name the registry does not know."""
    factory = registry.policy_factory(policy)
    if factory is None:
        raise InputError("live planner", "fallbacks", f"unknown policy {policy!r}")
    inst = _shifted(li)
    try:
        sched, _ = Simulator(inst, _Pinned(factory(inst, seed=seed), li.pins), method=policy).run()
    except PolicyError:
        return None
    return li.timed(li.order_of(sched), policy)


def shortest_first(li: LiveInstance) -> list[int]:
    """Queued jobs by shortest run time on the empty cluster over weight (WSPT), then queue order."""
    return sorted(li.queued, key=lambda j: (li.wspt_key(j), j))


def greedy(li: LiveInstance) -> Timed:
    return li.greedy(shortest_first(li), "greedy")


def previous(li: LiveInstance, plan: Plan) -> Timed:
    """The previous plan's order for the jobs still queued (on the same GPUs), then the new ones."""
    idx = li.instance.index
    queued = set(li.queued)
    head, seen = [], set()
    for p in plan.order:
        j = idx.get(p.job)
        if j is None or j not in queued or j in seen:
            continue
        gpus = tuple(p.gpus)
        if len(gpus) in li.instance.jobs[j].sizes and all(g in li.usable_set[j] for g in gpus):
            head.append((j, Allocation(gpus)))
            seen.add(j)
    rest = [j for j in shortest_first(li) if j not in seen]
    return li.greedy(rest, "previous", head=head)
