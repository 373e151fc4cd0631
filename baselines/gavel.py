"""Gavel (Narayanan et al., OSDI'20): heterogeneity-aware policies and their round-based mechanism.

Policies (``jctlab simulate INST --policy NAME``; names resolved by :func:`resolve`):

- ``gavel-max-min-fairness``           ``MaxMinFairnessPolicy`` (heterogeneity-agnostic)
- ``gavel-max-min-fairness-perf``      ``MaxMinFairnessPolicyWithPerf`` (heterogeneity-aware)
- ``gavel-fifo-perf``                  ``FIFOPolicyWithPerf``
- ``gavel-finish-time-fairness-perf``  ``FinishTimeFairnessPolicyWithPerf``

The LPs are in :mod:`baselines.gavel_lp`. The mechanism follows Gavel's simulator
(``scheduler/scheduler.py`` @ c4fa400, ``Scheduler.simulate``):

- Rounds of ``round_s = 360`` s. At every round boundary the jobs that completed are removed and
  the jobs that arrived are added (they wait until then, as in Gavel's loop).
- The allocation is recomputed only when jobs came or went *and* at least
  ``minimum_time_between_allocation_resets = 1920`` s passed since the last reset (or no reset
  happened at a non-zero time yet). A reset also folds the time each job received against its
  allocation into its *deficit*, and restarts the received-time counters at ``round_s / 2``.
- Priority of job i on type t = allocation[i][t] / (time i got on t / time all jobs got on t);
  ``allocation * 1e9`` if the fraction is 0; 0 if the allocation or the throughput is 0; 0 for a job
  not in the allocation yet.
- Jobs are taken per type (v100, p100, k80 for the ``*_perf`` policies; a seeded shuffle of them each
  round for the agnostic one), in (priority, deficit, allocation) order, highest first; a job runs
  on at most one type per round, needs ``scale_factor`` GPUs of one type, is skipped where its
  throughput is 0 (FIFO also skips priority 0). Jobs not yet in the allocation take their slot in
  that count but get no GPUs (Gavel's quirk, kept).
- Placement: per type, largest scale factor first; a job that ran on the same type last round keeps
  its GPUs when they are free (no preemption, no restart); others get GPUs on a single server when
  one has room, else GPUs in server order (Gavel walks servers in order).
- A job runs for the whole round or until it completes; its GPUs then idle until the round ends.
  Gavel's simulator charges no restart cost; an instance's ``restart_s`` is charged by jctlab's
  engine (0 on instances made from Gavel traces).

Departures from Gavel's simulator, all small: durations come from :mod:`jctlab.speed` (the measured
throughput of the placement actually chosen: Gavel always charges the consolidated figure, and a
multi-GPU job that has to spread here gets the ``/spread`` one); rounds are exactly 360 s on the
simulator's grid (Gavel's last round ends when its last job finishes, and a round started on an
idle cluster keeps its own 360 s; here such a round is cut at the next grid point); progress is
continuous (Gavel runs ``int(throughput * 360)`` steps); ECOS is replaced by HiGHS' IPM.
"""

from __future__ import annotations

import random
from typing import Annotated, Callable, Iterable

import numpy as np

from jctlab.argtypes import Choice, RoundS
from jctlab.errors import InputError
from jctlab.limits import TIME
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import Action, Preempt, Simulator, Start
from jctlab.speed import SpeedError, base_iteration_time

from . import gavel_lp

POLICIES = {
    "gavel-max-min-fairness": "max_min_fairness",
    "gavel-max-min-fairness-perf": "max_min_fairness_perf",
    "gavel-fifo-perf": "fifo_perf",
    "gavel-finish-time-fairness-perf": "finish_time_fairness_perf",
}
GAVEL_TYPE_ORDER = ("v100", "p100", "k80")
ROUND_S = 360.0
RESET_INTERVAL_S = 1920.0


def resolve(name: str) -> Callable[..., "GavelPolicy"] | None:
    """Factory for a ``gavel-*`` policy name, else None (the ``jctlab.policy_families`` hook)."""
    pol = POLICIES.get(name)
    if pol is None:
        return None

    def factory(inst: Instance, seed: int = 0, round_s: RoundS = ROUND_S,
                reset_interval_s: Annotated[float, TIME] = RESET_INTERVAL_S,
                lp_method: Annotated[str, Choice(("ipm", "simplex"))] = "ipm") -> GavelPolicy:
        return GavelPolicy(inst, pol, seed=seed, round_s=round_s, reset_interval_s=reset_interval_s,
                           lp_method=lp_method)

    factory.__name__ = name.replace("-", "_")
    factory.__doc__ = f"Gavel's {pol} policy with its round-based mechanism."
    return factory


resolve.pattern = f"Gavel: {'|'.join(POLICIES)}"


def type_order(types: Iterable[str]) -> list[str]:
    """Gavel's fixed worker-type order (v100, p100, k80), other types after them by name."""
    ts = set(types)
    return [t for t in GAVEL_TYPE_ORDER if t in ts] + sorted(ts - set(GAVEL_TYPE_ORDER))


class GavelPolicy:
    """Gavel's round-based mechanism driving one of its allocation policies."""

    def __init__(self, inst: Instance, policy: str, seed: int = 0, round_s: float = ROUND_S,
                 reset_interval_s: float = RESET_INTERVAL_S, lp_method: str = "ipm"):
        if policy not in POLICIES.values():
            raise ValueError(f"unknown Gavel policy {policy!r}")
        if inst.problem != "preemptive":
            raise InputError(inst.name, "problem",
                             f"Gavel's round-based policies preempt jobs; need a preemptive instance, got {inst.problem}")
        if not round_s > 0 or reset_interval_s < 0:
            raise InputError("options", "round_s", "round_s must be > 0 and reset_interval_s >= 0")
        if lp_method not in ("ipm", "simplex"):
            raise InputError("options", "lp_method", "must be ipm or simplex")
        self.inst = inst
        self.policy = policy
        self.round_s = float(round_s)
        self.reset_interval_s = float(reset_interval_s)
        self.lp_method = lp_method
        self.perf = policy.endswith("_perf")
        self.fifo = policy.startswith("fifo")
        cl = inst.cluster
        self.types = type_order(g.type for g in cl.gpus)
        self.lp_types = sorted(self.types)                    # Gavel's flatten() sorts worker types
        # servers of each type: GPU ids per node, in node order
        self.servers: dict[str, list[list[str]]] = {t: [] for t in self.types}
        for node in cl.nodes:
            for t in self.types:
                ids = [g.id for g in node.gpus if g.type == t]
                if ids:
                    self.servers[t].append(ids)
        self.cap = {t: sum(len(s) for s in self.servers[t]) for t in self.types}
        self.gpu_type = {g.id: g.type for g in cl.gpus}
        self.sf: list[int] = []
        self.tput: list[dict[str, float]] = []
        for j, job in enumerate(inst.jobs):
            if job.ps is not None:
                raise InputError(inst.name, f"jobs[{j}].ps", "Gavel's policies do not model parameter servers")
            tp = {}
            for t in self.types:
                tp[t] = self._throughput(job, t)
            fits = [s for s in job.sizes if any(s <= self.cap[t] and tp.get(t, 0) > 0 for t in self.types)]
            if not fits:
                raise InputError(inst.name, f"jobs[{j}].sizes",
                                 f"job {job.name} fits on no GPU type it can use (Gavel needs one type)")
            sf = max(fits)
            self.sf.append(sf)
            self.tput.append({t: (self._throughput(job, t, sf) if sf <= self.cap[t] else 0.0) for t in self.types})
        # mechanism state (Gavel's names)
        self.shuffler = random.Random(seed + 5)
        self.active: dict[int, None] = {}                   # jobs added, not removed (insertion order)
        self.job_time: dict[int, dict[str, float]] = {}
        self.worker_time = {t: 0.0 for t in self.types}
        self.priorities: dict[str, dict[int, float]] = {t: {} for t in self.types}
        self.deficits: dict[str, dict[int, float]] = {t: {} for t in self.types}
        self.allocation: dict[int, dict[str, float]] = {}
        self.last_reset = 0.0
        self.need_update = True
        self.assigned: dict[int, tuple[str, tuple[str, ...]]] = {}   # last round: job -> (type, gpus)
        self.round_start: float | None = None
        self.lp_solves = 0
        self.recomputes = 0

    # ------------------------------------------------------------------ throughputs
    def _throughput(self, job: Job, t: str, n: int | None = None) -> float:
        """Iterations/s of ``job`` on ``n`` GPUs of type ``t`` packed on the fewest servers (jctlab.speed)."""
        if not job.can_use(t):
            return 0.0
        if n is None:
            n = min(job.sizes)
        servers = sorted(self.servers[t], key=len, reverse=True)
        gpus: list[str] = []
        if servers and len(servers[0]) >= n:
            gpus = servers[0][:n]
        else:
            for s in servers:
                gpus.extend(s[: n - len(gpus)])
                if len(gpus) == n:
                    break
        if len(gpus) < n:
            return 0.0
        try:
            return 1.0 / base_iteration_time(job, Allocation(tuple(gpus)), self.inst.cluster)
        except SpeedError:
            return 0.0

    # ------------------------------------------------------------------ policy entry
    def decide(self, sim: Simulator) -> list[Action]:
        if "round" not in sim.reasons:
            # Gavel jumps straight to the next arrival when nothing runs, and a round ends as soon
            # as every job scheduled in it has finished: then a new round starts now.
            if sim.running or not sim.waiting:
                return []
        return self._round(sim)

    # ------------------------------------------------------------------ one round
    def _round(self, sim: Simulator) -> list[Action]:
        now = sim.now
        eng = sim.engine
        # 1. account for the round that just ended (Gavel's _done_callback), drop completed jobs
        if self.round_start is not None:
            for j, (t, _) in self.assigned.items():
                if j not in self.job_time:
                    continue
                end = eng.completion[j] if eng.completion[j] is not None else now
                dt = max(0.0, min(end, now) - self.round_start)
                self.job_time[j][t] += dt
                self.worker_time[t] += dt
        for j in list(self.active):
            if eng.completion[j] is not None:
                self._remove(j)
        # 2. add the jobs that arrived (Gavel's add_job at the round boundary)
        for j in sim.arrived:
            if j not in self.active and eng.completion[j] is None and j not in self.job_time:
                self._add(j)
        # 3. priorities (maybe reset + new allocation), pick jobs, place them
        assignment = self._schedule(sim, now)
        if not assignment and self.active and len(sim.arrived) == len(self.inst.jobs):
            # Gavel forces a reset when nothing runs and no job is left to arrive
            self.last_reset = 0.0
            self.need_update = True
            assignment = self._schedule(sim, now)
        # 4. actions: keep jobs on the same GPUs, preempt the others, start the new ones
        actions: list[Action] = []
        for j, run in list(sim.running.items()):
            new = assignment.get(j)
            if new is None or set(new[1]) != set(run.alloc.gpus):
                actions.append(Preempt(j))
        for j, (t, gpus) in assignment.items():
            run = sim.running.get(j)
            if run is None or set(gpus) != set(run.alloc.gpus):
                actions.append(Start(j, Allocation(tuple(gpus))))
        self.assigned = assignment
        self.round_start = now
        return actions

    def _add(self, j: int) -> None:
        self.active[j] = None
        self.job_time[j] = {t: self.round_s / 2.0 for t in self.types}
        for t in self.types:
            self.priorities[t][j] = 0.0
            self.deficits[t][j] = 0.0
        self.need_update = True

    def _remove(self, j: int) -> None:
        del self.active[j]
        del self.job_time[j]
        for t in self.types:
            self.priorities[t].pop(j, None)
            self.deficits[t].pop(j, None)
        self.need_update = True

    # ------------------------------------------------------------------ Gavel's _update_priorities
    def _update_priorities(self, sim: Simulator, now: float) -> None:
        due = (now - self.last_reset >= self.reset_interval_s) or self.last_reset == 0
        if self.need_update and due:
            self._reset(now)
            self.allocation = self._compute_allocation(sim, now)
            self.need_update = False
            self.recomputes += 1
        for t in self.types:
            wt = self.worker_time[t]
            for j in self.priorities[t]:
                alloc = self.allocation.get(j)
                if alloc is None:
                    self.priorities[t][j] = 0.0
                    continue
                a = alloc.get(t, 0.0)
                frac = self.job_time[j][t] / wt if wt > 0 else 0.0
                if a == 0.0 or self.tput[j][t] == 0:
                    p = 0.0
                elif frac > 0:
                    p = a / frac
                else:
                    p = a * 1e9
                self.priorities[t][j] = p

    def _reset(self, now: float) -> None:
        elapsed = now - self.last_reset
        for t in self.types:
            self.worker_time[t] = 0.0
            for j in self.job_time:
                received = self.job_time[j][t] - self.round_s / 2.0
                should = self.allocation[j][t] * elapsed if j in self.allocation else 0.0
                self.deficits[t][j] = self.deficits[t].get(j, 0.0) + should - received
                self.job_time[j][t] = self.round_s / 2.0
                self.worker_time[t] += self.round_s / 2.0
        self.last_reset = now

    # ------------------------------------------------------------------ allocation (the policy)
    def _compute_allocation(self, sim: Simulator, now: float) -> dict[int, dict[str, float]]:
        jobs = sorted(self.active)
        if not jobs:
            return {}
        types = self.lp_types
        T = np.array([[self.tput[j][t] for t in types] for j in jobs])
        sf = np.array([self.sf[j] for j in jobs], dtype=float)
        cap = np.array([self.cap[t] for t in types], dtype=float)
        w = np.array([self.inst.jobs[j].weight for j in jobs])
        if self.policy == "max_min_fairness":
            res = gavel_lp.isolated_allocation(len(jobs), sf, cap, w, self.lp_method)
        elif self.policy == "max_min_fairness_perf":
            res = gavel_lp.max_min_fairness(T, sf, cap, w, "isolated", self.lp_method)
            res = gavel_lp.LPResult(res.x, res.objective, res.status, 2)
        elif self.policy == "fifo_perf":
            order = sorted(jobs, key=lambda j: (self.inst.jobs[j].arrival, j))   # Gavel: job-id order
            rows = [jobs.index(j) for j in order]
            r = gavel_lp.fifo_perf(T[rows], sf[rows], cap, types)
            X = np.zeros_like(T)
            X[rows] = r.x
            res = gavel_lp.LPResult(X, r.objective, r.status, 0)
        else:  # finish_time_fairness_perf
            since = np.array([now - self.inst.jobs[j].arrival for j in jobs])
            left = np.array([sim.engine.remaining(j) for j in jobs])
            res = gavel_lp.finish_time_fairness(T, sf, cap, since, left, w, self.lp_method)
        self.lp_solves += res.solves
        return {j: {t: float(res.x[i, k]) for k, t in enumerate(types)} for i, j in enumerate(jobs)}

    # ------------------------------------------------------------------ Gavel's _schedule_jobs_on_workers
    def _schedule(self, sim: Simulator, now: float) -> dict[int, tuple[str, tuple[str, ...]]]:
        self._update_priorities(sim, now)
        types = list(self.types)
        if not self.perf:
            self.shuffler.shuffle(types)
        # _schedule_jobs_on_workers_helper
        left = dict(self.cap)
        done: set[int] = set()
        chosen: dict[str, list[tuple[int, int]]] = {t: [] for t in types}
        queue = []
        for t in types:
            entries = [(j, t, self.priorities[t][j], self.deficits[t][j],
                        self.allocation[j][t] if j in self.allocation else 0.0) for j in self.priorities[t]]
            queue += sorted(entries, key=lambda e: (e[2], e[3], e[4]), reverse=True)
        for j, t, prio, _, _ in queue:
            if left[t] == 0 or j in done or self.tput[j][t] <= 0:
                continue
            if self.fifo and prio <= 0.0:
                continue
            sf = self.sf[j]
            if sf > left[t]:
                continue
            left[t] -= sf
            done.add(j)
            chosen[t].append((j, sf))
        # worker assignment
        out: dict[int, tuple[str, tuple[str, ...]]] = {}
        for t in types:
            taken: set[str] = set()
            jobs = sorted(chosen[t], key=lambda e: e[1], reverse=True)
            for level in sorted({sf for _, sf in jobs}, reverse=True):
                for j, sf in jobs:
                    if sf != level:
                        continue
                    prev = self.assigned.get(j)
                    if prev is not None and prev[0] == t and not taken.intersection(prev[1]):
                        out[j] = prev
                        taken.update(prev[1])
                for j, sf in jobs:
                    if sf != level or j in out or j not in self.allocation:
                        continue
                    gpus = self._place(t, sf, taken)
                    out[j] = (t, gpus)
                    taken.update(gpus)
        return out

    def _place(self, t: str, n: int, taken: set[str]) -> tuple[str, ...]:
        free = [[g for g in s if g not in taken] for s in self.servers[t]]
        for s in free:
            if len(s) >= n:
                return tuple(s[:n])
        flat = [g for s in free for g in s]
        if len(flat) < n:  # cannot happen: the helper counted the GPUs of this type
            raise RuntimeError(f"Gavel placement: {n} GPUs of type {t} requested, {len(flat)} free")
        return tuple(flat[:n])


def max_min_fairness(inst: Instance, seed: int = 0, **options) -> GavelPolicy:
    return GavelPolicy(inst, "max_min_fairness", seed=seed, **options)


def max_min_fairness_perf(inst: Instance, seed: int = 0, **options) -> GavelPolicy:
    return GavelPolicy(inst, "max_min_fairness_perf", seed=seed, **options)


def fifo_perf(inst: Instance, seed: int = 0, **options) -> GavelPolicy:
    return GavelPolicy(inst, "fifo_perf", seed=seed, **options)


def finish_time_fairness_perf(inst: Instance, seed: int = 0, **options) -> GavelPolicy:
    return GavelPolicy(inst, "finish_time_fairness_perf", seed=seed, **options)
