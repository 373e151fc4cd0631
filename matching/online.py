"""Online placement policy: at every event, re-place the waiting jobs on the free GPUs.

Each decision solves a static placement of the waiting jobs on the currently free GPUs with one extra
option per job, *wait* (zero GPUs), priced at its best run time there plus the time until the next
running job finishes (``inf``-like when nothing runs, so an idle cluster always starts work). Running
jobs are never moved (non-preemptive; also used on preemptive instances without preempting).
``matching_policy`` solves it with market prices + beam search + local search (as the ``matching``
method); ``samplers.online.sampling_policy`` with sampled categories.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Iterable

import numpy as np

from jctlab import registry
from jctlab.argtypes import Count, Fairness
from jctlab.errors import InputError
from jctlab.model import Instance
from jctlab.resources import cpus_fit, node_demand, ps_placement, with_cpu_room
from jctlab.simulate import Action, Start

from .categories import build_menu, realize
from .market import type_market
from .search import beam, polish


class MatchingPolicy:
    """Re-place the waiting jobs at each event: market prices, then beam search and polish on the free GPUs.
    A subclass may :meth:`propose` another choice per decision (the sampling policy draws categories)."""

    def __init__(self, inst: Instance, seed: int = 0, width: int = 32, max_jobs: int = 64,
                 samples: int = 0, fairness: float = 0.0):
        self.inst = inst
        self.seed = seed
        self.width = width
        self.max_jobs = max_jobs
        self.samples = samples
        self.fairness = fairness
        self.calls = 0

    def _next_free_in(self, sim) -> float:
        eng = sim.engine
        best = math.inf
        for j, run in eng.running.items():
            # the engine's memo of base_iteration_time: the same float, without the speed model's walk
            t = eng.remaining(j) * eng.base_time(j, run.alloc)
            best = min(best, t)
        return best

    def decide(self, sim) -> Iterable[Action]:
        waiting = list(sim.waiting)[: self.max_jobs]
        if not waiting or sim.engine.free_total == 0:
            return []
        self.calls += 1
        eng = sim.engine
        # GPUs whose fair share of CPUs is free (running jobs' parameter servers hold CPUs)
        free = with_cpu_room(self.inst.cluster, {n: sorted(ids) for n, ids in eng.free.items()}, eng.cpu_used)
        if not free:
            return []
        wait = self._next_free_in(sim)
        probe = build_menu(self.inst, waiting, free)
        if not np.isfinite(probe.D).any():
            return []
        best = probe.D.min(axis=1)
        big = 1e3 * float(np.nanmax(np.where(np.isfinite(best), best, 0.0))) + 1.0
        skip = [(b if math.isfinite(b) else 0.0) + (wait if math.isfinite(wait) else big) for b in best]
        menu = build_menu(self.inst, waiting, free, skip_cost=skip)
        lam, choice, _ = type_market(menu.D, menu.C, menu.cap)
        alt = self.propose(menu, lam)
        if alt is not None and menu.value(alt) < menu.value(choice):
            choice = alt
        if self.width > 0:
            b = beam(menu, lam, self.width)
            if b is not None and menu.value(b) < menu.value(choice):
                choice = b
        choice = polish(menu, choice)
        allocs, _ = realize(menu, choice)
        return self._within_cpus(sim, waiting, allocs)

    def propose(self, menu, lam):
        """Another choice for this decision (None: none)."""
        return None

    def _within_cpus(self, sim, waiting, allocs) -> list[Action]:
        """The starts whose CPUs fit beside the running jobs and the earlier starts; a PS job whose servers
        do not fit gets one server where there is room (:func:`jctlab.resources.ps_placement`), else waits."""
        cl = self.inst.cluster
        cpu = dict(sim.engine.cpu_used)
        out: list[Action] = []
        for j, a in zip(waiting, allocs):
            if a is None:
                continue
            job = self.inst.jobs[j]
            if not cpus_fit(cl, cpu, node_demand(job, a, cl)[0]):
                a = self._fit_ps(job, a, cpu) if job.ps is not None else None
                if a is None:
                    continue
            for v, c in node_demand(job, a, cl)[0].items():
                cpu[v] = cpu.get(v, 0.0) + c
            out.append(Start(j, a))
        return out

    def _fit_ps(self, job, a, cpu):
        """A PS job's allocation that fits the CPUs: one server where there is room, on the chosen GPUs or
        on fewer of them (a smaller allowed size, the menu does not see CPUs); None when none fits."""
        cl = self.inst.cluster
        for n in sorted((n for n in job.sizes if n <= len(a.gpus)), reverse=True):
            gpus = a.gpus[:n]
            ps = ps_placement(job, gpus, cl, cpu)
            if ps is None:
                continue
            b = dataclasses.replace(a, gpus=gpus, ps_nodes=ps)
            if cpus_fit(cl, cpu, node_demand(job, b, cl)[0]):
                return b
        return None


def matching_policy(inst: Instance, seed: int = 0, width: Count = 32, max_jobs: Count = 64, samples: Count = 0,
                    fairness: Fairness = 0.0) -> MatchingPolicy:
    """The ``matching`` policy; with ``samples > 0`` the registered ``sampling`` policy (which builds on this
    one) with the matching policy's beam width unless given."""
    if samples > 0:
        sampling = registry.policy_factory("sampling")
        if sampling is None:
            raise InputError("command line", "--samples", "the sampling policy is not installed")
        return sampling(inst, seed=seed, width=width, max_jobs=max_jobs, samples=samples, fairness=fairness)
    return MatchingPolicy(inst, seed=seed, width=width, max_jobs=max_jobs, samples=samples, fairness=fairness)
