"""The live state as a jctlab ``offline`` instance whose time 0 is *now*, and the way back to a plan.

Every job of the state becomes a job of the instance with arrival 0: a queued job with its allowed sizes
and its work; a running job with one size (its GPU count) and the work it has left, scaled so that its
run time on the GPUs it holds is exactly its estimated remaining time. The objective of the instance
(mean JCT, weighted JCT or makespan, measured from now) differs from the live one (from submission) by a
constant, so both have the same best plans.

The offline class cannot say "job r holds GPUs G from 0 until t": a running job is an ordinary job there,
free to start later or elsewhere. That instance is a *relaxation* of the live problem (every live plan,
with the running jobs on their GPUs from 0, is one of its schedules), so an oracle's lower bound on it
bounds every live plan. Plans themselves are always built here, by :meth:`LiveInstance.timed`: the running
jobs pinned at 0 on their GPUs, the queued jobs in a given order on given GPUs, each as early as its GPUs
are free (list scheduling). A plan is therefore a schedule of the instance that replays as valid
(:func:`jctlab.replay.replay`) and never moves a running job, whatever the oracle proposed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Iterable, Sequence

from jctlab.model import Allocation, Claimed, Cluster, Instance, Job, Schedule, Segment
from jctlab.replay import Replay, replay
from jctlab.speed import duration

from .state import LiveState, Placement, Work

#: a plan's start within this many seconds of 0 is "now"
NOW_TOL = 1e-6
#: slowdown of a running job on any GPU it does not hold (SPEC §1 ``variability`` of its own job class)
AWAY_FACTOR = 1000.0
#: the least time a running job is given (no zero-length job: its slowdown would be 0/0 in the metrics)
MIN_LEFT_S = 1e-6
PIN_CLASS = "live-pin:"


def pinned_cluster(cluster: Cluster, held: dict[str, tuple[str, ...]]) -> Cluster:
    """``cluster`` where the job class ``PIN_CLASS + name`` of each running job runs ``AWAY_FACTOR`` times
    slower on every GPU outside ``held[name]``: an oracle that places it elsewhere pays for it."""
    mine = {g: name for name, gpus in held.items() for g in gpus}
    away = {PIN_CLASS + name: AWAY_FACTOR for name in held}
    nodes = []
    for node in cluster.nodes:
        gpus = []
        for g in node.gpus:
            var = dict(away)
            if g.id in mine:
                del var[PIN_CLASS + mine[g.id]]
            gpus.append(replace(g, variability=var))
        nodes.append(replace(node, gpus=tuple(gpus)))
    return replace(cluster, nodes=tuple(nodes))


@lru_cache(maxsize=1)
def gavel_job_types() -> dict[str, Any]:
    """The shipped Gavel job-type table (``jctlab/tables/gavel_job_types.json``, as
    ``jctlab.loaders.gavel.job_types`` reads it), read here without the loaders' pandas: it would add one to two
    seconds to every start of the daemon."""
    return json.loads((resources.files("jctlab") / "tables" / "gavel_job_types.json").read_text())["job_types"]


def job_fields(work: Work, gpu_types: Iterable[str]) -> dict:
    """The speed-model fields of a job (batch, iterations, samples_per_s, comm_mb, measured, model) for
    ``work`` on a cluster with ``gpu_types``; ``samples_per_s`` is empty when no type can host it."""
    types = set(gpu_types)
    if work.spec is not None:
        sp = work.spec
        return {"batch": float(sp["batch"]), "iterations": float(sp["iterations"]),
                "samples_per_s": {t: float(v) for t, v in sp["samples_per_s"].items() if t in types and v > 0},
                "comm_mb": float(sp.get("comm_mb", 0.0)), "model": sp.get("model"),
                "measured": {k: dict(row) for k, row in sp.get("measured", {}).items() if k.split("/")[0] in types}}
    if work.model is not None:
        jt = gavel_job_types()[work.model]
        return {"batch": float(jt["batch"]), "iterations": float(work.iterations or 0.0),
                "samples_per_s": {t: float(v) for t, v in jt["samples_per_s"].items() if t in types and v > 0},
                "comm_mb": float(jt["comm_mb"]), "model": work.model,
                "measured": {k: {int(n): float(x) for n, x in row.items()}
                             for k, row in jt["measured"].items() if k.split("/")[0] in types}}
    # batch 1 and `steps` iterations: one GPU of type t computes a step in seconds_t / steps
    return {"batch": 1.0, "iterations": work.steps,
            "samples_per_s": {t: work.steps / s for t, s in work.seconds.items() if t in types and s > 0},
            "comm_mb": work.comm_mb, "model": None, "measured": {}}


@dataclass(frozen=True)
class Timed:
    """A plan as a schedule of the live instance, with its replay."""

    schedule: Schedule
    replay: Replay

    @property
    def objective(self) -> float:
        return float(self.replay.objective)   # type: ignore[arg-type]


class LiveInstance:
    """``instance``: the offline instance of ``state`` (running jobs first, then the queue in its order);
    ``pins``: running job index -> the allocation it holds."""

    def __init__(self, state: LiveState, objective: str = "mean_jct", floor_s: float = 60.0,
                 name: str = "live"):
        self.state = state
        cluster = state.cluster.to_cluster()
        types = cluster.gpu_types
        jobs: list[Job] = []
        pins: dict[int, Allocation] = {}
        ends: list[float] = []
        for r in state.running:
            alloc = Allocation(tuple(r.gpus))
            left = max(MIN_LEFT_S, r.remaining_at(state.now, floor_s))
            f = job_fields(r.work, types) if r.work is not None else {}
            held = {cluster.gpu[g].type for g in r.gpus}
            if not f or not held <= set(f["samples_per_s"]):
                # no work description that prices its GPUs: a job that can run only on GPUs of their types
                f = {"batch": 1.0, "iterations": 1.0, "samples_per_s": {t: 1.0 for t in held}, "comm_mb": 0.0,
                     "model": None, "measured": {}}
            probe = Job(r.name, 0.0, f["batch"], 1.0, f["samples_per_s"], f["comm_mb"], (len(r.gpus),),
                        f["model"], r.weight, f["model"], measured=f["measured"])
            iters = left / duration(probe, alloc, cluster)   # its run time on its GPUs is `left`
            pins[len(jobs)] = alloc
            ends.append(left)
            jobs.append(Job(r.name, 0.0, f["batch"], iters, f["samples_per_s"], f["comm_mb"], (len(r.gpus),),
                            PIN_CLASS + r.name, r.weight, f["model"], measured=f["measured"]))
        for q in state.queued:
            f = job_fields(q.work, types)
            jobs.append(Job(q.name, 0.0, f["batch"], f["iterations"], f["samples_per_s"], f["comm_mb"],
                            tuple(q.sizes), f["model"], q.weight, f["model"], measured=f["measured"]))
        if state.running:
            cluster = pinned_cluster(cluster, {r.name: tuple(r.gpus) for r in state.running})
        self.instance = Instance(name, "offline", objective, cluster, tuple(jobs))
        self.pins = pins
        self.pinned_end = ends
        self.n_running = len(state.running)

    # ------------------------------------------------------------------ what the oracle solves
    def oracle_instance(self, keep: Iterable[int], pin_weight: float) -> Instance:
        """The running jobs and the queued jobs ``keep``, for the oracle. Sum objectives become weighted JCT
        where each running job weighs ``pin_weight`` times the queued jobs' total weight: the offline class
        lets a job start late, and delaying a running job (to run short queued jobs on its GPUs first) is
        what a sum objective would otherwise ask for; its weight makes that cost more than it gains."""
        inst = self.instance
        keep = sorted(set(keep) | set(range(self.n_running)))
        jobs = [inst.jobs[i] for i in keep]
        if inst.objective == "makespan" or not self.n_running:
            return inst.replace_jobs(jobs)
        w_pin = pin_weight * sum(j.weight if inst.objective == "weighted_jct" else 1.0 for j in jobs[self.n_running:])
        jobs = [replace(j, weight=w_pin) if i < self.n_running else
                (j if inst.objective == "weighted_jct" else replace(j, weight=1.0)) for i, j in enumerate(jobs)]
        return inst.replace_jobs(jobs, objective="weighted_jct")

    def live_bound(self, solved: Instance, lower_bound: float) -> float:
        """A lower bound on the live objective from the oracle's bound on ``solved`` =
        :meth:`oracle_instance` of the whole queue. Every live plan is a schedule of ``solved`` whose running
        jobs end at their pinned ends e_r, so Σ_q w_q C_q ≥ LB·Σ w − Σ_r w'_r e_r (w' their weights there)."""
        inst = self.instance
        if inst.objective == "makespan" or not self.n_running:   # solved as it is (oracle_instance)
            return lower_bound
        ws = [j.weight for j in solved.jobs]
        queued_total = lower_bound * sum(ws) - sum(w * e for w, e in zip(ws, self.pinned_end))
        wl = [j.weight if inst.objective == "weighted_jct" else 1.0 for j in inst.jobs]
        return (sum(w * e for w, e in zip(wl, self.pinned_end)) + queued_total) / sum(wl)

    # ------------------------------------------------------------------ views
    @property
    def queued(self) -> range:
        return range(self.n_running, len(self.instance.jobs))

    @cached_property
    def usable(self) -> list[list[str]]:
        """Per job, the ids of the GPUs whose type can host it (cluster order)."""
        gpus = self.instance.cluster.gpus
        return [[g.id for g in gpus if job.can_use(g.type)] for job in self.instance.jobs]

    @cached_property
    def usable_set(self) -> list[frozenset[str]]:
        return [frozenset(u) for u in self.usable]

    def wspt_key(self, j: int) -> float:
        """Job j's shortest run time on the empty cluster over weight (Smith's rule; SPT at weight 1)."""
        job, cl = self.instance.jobs[j], self.instance.cluster
        free = {g.id: 0.0 for g in cl.gpus}
        return min(duration(job, Allocation(g), cl) for g in self._candidates(j, free)) / job.weight

    def can_start_now(self) -> bool:
        """Whether some queued job fits on the GPUs free now (otherwise the decision is empty, whatever
        the plan: without preemption nothing can start before a running job ends)."""
        busy = self.state.busy_gpus
        for j in self.queued:
            free = sum(1 for g in self.usable[j] if g not in busy)
            if any(s <= free for s in self.instance.jobs[j].sizes):
                return True
        return False

    # ------------------------------------------------------------------ plans
    def timed(self, order: Sequence[tuple[int, Allocation]], method: str) -> Timed:
        """List scheduling: the running jobs at 0 on their GPUs, then each ``(job, allocation)`` of
        ``order`` as soon as its GPUs are free. ``order`` must hold every queued job once."""
        inst = self.instance
        cl = inst.cluster
        free_at = {g.id: 0.0 for g in cl.gpus}
        segs = []
        for j, alloc in list(self.pins.items()) + list(order):
            start = max(free_at[g] for g in alloc.gpus)
            end = start + duration(inst.jobs[j], alloc, cl)
            for g in alloc.gpus:
                free_at[g] = end
            segs.append(Segment(inst.jobs[j].name, start, None, alloc))
        sched = Schedule(inst.name, method, tuple(segs))
        rep = replay(inst, sched, with_fairness=False, with_metrics=False)
        if not rep.valid:   # list scheduling on exclusive GPUs cannot break a rule: a bug if it does
            raise AssertionError(f"live plan {method} replays as invalid: {rep.error}")
        return Timed(sched.with_claim(Claimed(rep.objective, None, "feasible", None)), rep)

    def keeps_pins(self, sched: Schedule) -> bool:
        """Whether every running job of ``sched`` starts at 0 on the GPUs it holds."""
        idx = self.instance.index
        return all(s.start <= NOW_TOL and tuple(s.alloc.gpus) == self.pins[idx[s.job]].gpus
                   for s in sched.segments if idx[s.job] < self.n_running)

    def order_of(self, sched: Schedule) -> list[tuple[int, Allocation]]:
        """The queued jobs of a schedule of this instance, in start order, with their allocations."""
        idx = self.instance.index
        segs = sorted((s for s in sched.segments if idx[s.job] >= self.n_running),
                      key=lambda s: (s.start, idx[s.job]))
        return [(idx[s.job], Allocation(s.alloc.gpus)) for s in segs]

    def greedy(self, jobs: Iterable[int], method: str, head: Sequence[tuple[int, Allocation]] = ()) -> Timed:
        """``head`` as given, then ``jobs`` in their order, each on the allocation that completes it
        earliest (per allowed size: the earliest-free usable GPUs of each node, and of the whole cluster)."""
        inst = self.instance
        cl = inst.cluster
        free_at = {g.id: 0.0 for g in cl.gpus}
        order = list(head)
        for j, alloc in list(self.pins.items()) + order:
            end = max(free_at[g] for g in alloc.gpus) + duration(inst.jobs[j], alloc, cl)
            for g in alloc.gpus:
                free_at[g] = end
        for j in jobs:
            best: tuple[float, int, Allocation] | None = None
            for gpus in self._candidates(j, free_at):
                alloc = Allocation(gpus)
                end = max(free_at[g] for g in gpus) + duration(inst.jobs[j], alloc, cl)
                key = (end, len({g.split(":", 1)[0] for g in gpus}))
                if best is None or key < best[:2]:
                    best = (end, key[1], alloc)
            if best is None:
                raise AssertionError(f"job {inst.jobs[j].name} fits no allocation (the readers let it through)")
            for g in best[2].gpus:
                free_at[g] = best[0]
            order.append((j, best[2]))
        return self.timed(order, method)

    def _candidates(self, j: int, free_at: dict[str, float]) -> list[tuple[str, ...]]:
        usable = self.usable[j]
        by_node: dict[str, list[str]] = {}
        for g in usable:
            by_node.setdefault(g.split(":", 1)[0], []).append(g)
        out = []
        for n in self.instance.jobs[j].sizes:
            if n > len(usable):
                continue
            for ids in by_node.values():
                if len(ids) >= n:
                    out.append(tuple(sorted(ids, key=lambda g: free_at[g])[:n]))
            out.append(tuple(sorted(usable, key=lambda g: free_at[g])[:n]))
        return out

    # ------------------------------------------------------------------ back to the live clock
    def placements(self, timed: Timed) -> tuple[tuple[Placement, ...], tuple[Placement, ...], tuple[Placement, ...]]:
        """(start now, later, running) of a plan, in absolute time."""
        now = self.state.now
        comp = timed.replay.completion
        idx = self.instance.index
        busy = self.state.busy_gpus   # a running job about to end (0 s left) still holds its GPUs now
        now_, later, running = [], [], []
        for s in sorted(timed.schedule.segments, key=lambda s: (s.start, idx[s.job])):
            p = Placement(s.job, tuple(s.alloc.gpus), now + s.start, now + comp[s.job])
            if idx[s.job] < self.n_running:
                running.append(p)
            elif s.start <= NOW_TOL and not busy.intersection(s.alloc.gpus):
                now_.append(Placement(s.job, p.gpus, now, p.end))
            else:
                later.append(p)
        return tuple(now_), tuple(later), tuple(running)

    def schedule_of(self, plan) -> Schedule:
        """A plan of this state (a :class:`live.state.Plan`) as a schedule of the instance, for replay."""
        now = self.state.now
        segs = [Segment(p.job, p.start - now, None, Allocation(tuple(p.gpus)))
                for p in plan.running + plan.start_now + plan.later]
        return Schedule(self.instance.name, plan.source, tuple(segs))

    def mean_jct(self, timed: Timed) -> float:
        """Predicted mean JCT from submission over the jobs of the plan."""
        now, comp = self.state.now, timed.replay.completion
        subs = [r.submit for r in self.state.running] + [q.submit for q in self.state.queued]
        names = [j.name for j in self.instance.jobs]
        if not names:
            return math.nan
        return sum(now + comp[n] - s for n, s in zip(names, subs)) / len(names)
