"""The live state as a jctlab ``offline`` instance whose time 0 is *now*, and the way back to a plan.

Every job of the state becomes a job of the instance with arrival 0: a queued job with its allowed sizes,
its work and its traits (class, CPU/memory table, parameter servers); a running job with one size (its GPU
count) and the work it has left, scaled so that its run time on the GPUs it holds is exactly its estimated
remaining time. The objective of the instance (mean JCT, weighted JCT or makespan, measured from now)
differs from the live one (from submission) by a constant, so both have the same best plans. The cluster
is the live one with its GPU types, per-GPU variability and sockets (``qpi_factor``), priced by the core
speed model (``jctlab.speed``).

A *plan* keeps every running job on its GPUs from 0 — except the running jobs it preempts now
(``released``, only with preemption allowed), which become queued jobs that pay ``restart_s`` when they
start again, as does every queued job that was preempted earlier (``pending``). Plans are built and
replayed by :mod:`live.decode` (list scheduling; :func:`jctlab.replay.replay` with those jobs
``resumed``).

The offline class cannot say "job r holds GPUs G from 0 until t": for the oracle (:meth:`oracle_instance`)
a running job is an ordinary job free to start later or elsewhere, pinned by a slowdown of its own class on
every other GPU and by its weight (docs/live.md). That instance is a *relaxation* of the no-preemption
live problem (every such live plan is one of its schedules), so an oracle's lower bound on it bounds every
live plan that preempts nothing (:meth:`live_bound`).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from functools import cached_property, lru_cache
from importlib import resources
from typing import Any, Iterable

from jctlab.model import Allocation, Cluster, Instance, Job, Schedule, Segment
from jctlab.speed import SpeedError, base_iteration_time, duration

from .state import LiveState, Placement, QueuedJob, RunningJob, Work

#: a plan's start within this many seconds of 0 is "now"
NOW_TOL = 1e-6
#: slowdown of a running job, in the oracle's instance, on any GPU it does not hold
AWAY_FACTOR = 1000.0
#: the least time a running job is given (no zero-length job: its slowdown would be 0/0 in the metrics)
MIN_LEFT_S = 1e-6
PIN_CLASS = "live-pin:"


def pinned_cluster(cluster: Cluster, held: dict[str, tuple[str, tuple[str, ...]]]) -> Cluster:
    """``cluster`` where the job class ``PIN_CLASS + name`` of each running job (``held[name]`` = its own
    class, its GPUs) runs as its own class on its GPUs and ``AWAY_FACTOR`` times slower on every other GPU:
    an oracle that places it elsewhere pays for it."""
    nodes = []
    for node in cluster.nodes:
        gpus = []
        for g in node.gpus:
            var = dict(g.variability)
            for name, (cls, ids) in held.items():
                f = g.factor(cls)
                var[PIN_CLASS + name] = f if g.id in ids else AWAY_FACTOR * max(f, 1.0)
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


def _job(name: str, f: dict, sizes: tuple[int, ...], weight: float, traits, iterations: float | None = None) -> Job:
    return Job(name, 0.0, f["batch"], f["iterations"] if iterations is None else iterations, f["samples_per_s"],
               f["comm_mb"], sizes, traits.job_class, weight, f["model"], traits.cpu_mem, traits.ps,
               measured=f["measured"])


def held_allocation(r: RunningJob, cluster: Cluster) -> Allocation:
    """What a running job holds: its GPUs, and for a parameter-server job its servers (``ps_nodes``, else
    one on the node of its first GPU), at the fair CPU/memory share."""
    ps = r.ps_nodes
    if r.traits.ps is not None and not ps:
        ps = (cluster.gpu[r.gpus[0]].node,)
    return Allocation(tuple(r.gpus), tuple(ps) if r.traits.ps is not None else ())


class LiveInstance:
    """``instance``: the offline instance of ``state`` (running jobs first, then the queue in its order);
    ``pins``: running job index -> the allocation it holds; ``pinned_end``: its remaining time;
    ``movable``: the running jobs a plan may preempt (their work prices them elsewhere, and they are not
    past their estimate); ``pending``: the queued jobs that pay ``restart_s`` when they start."""

    def __init__(self, state: LiveState, objective: str = "mean_jct", floor_s: float = 60.0,
                 name: str = "live"):
        self.state = state
        cluster = state.cluster.to_cluster()
        types = cluster.gpu_types
        jobs: list[Job] = []
        pins: dict[int, Allocation] = {}
        ends: list[float] = []
        movable = []
        for r in state.running:
            alloc = held_allocation(r, cluster)
            left = max(MIN_LEFT_S, r.remaining_at(state.now, floor_s))
            f = job_fields(r.work, types) if r.work is not None else {}
            held = {cluster.gpu[g].type for g in r.gpus}
            priced = bool(f) and held <= set(f["samples_per_s"])
            if not priced:
                # no work description that prices its GPUs: a job that can run only on GPUs of their types
                f = {"batch": 1.0, "iterations": 1.0, "samples_per_s": {t: 1.0 for t in held}, "comm_mb": 0.0,
                     "model": None, "measured": {}}
            probe = _job(r.name, f, (len(r.gpus),), r.weight, r.traits, 1.0)
            iters = left / base_iteration_time(probe, alloc, cluster)   # its run time on its GPUs is `left`
            if priced and not r.past_estimate(state.now, floor_s):
                movable.append(len(jobs))
            pins[len(jobs)] = alloc
            ends.append(left)
            jobs.append(replace(probe, iterations=iters))
        pending = []
        for q in state.queued:
            if q.preempted:
                pending.append(len(jobs))
            jobs.append(_job(q.name, job_fields(q.work, types), tuple(q.sizes), q.weight, q.traits))
        self.instance = Instance(name, "offline", objective, cluster, tuple(jobs))
        self.pins = pins
        self.pinned_end = ends
        self.n_running = len(state.running)
        self.movable = frozenset(movable)
        self.pending = frozenset(pending)
        self.restart_s = cluster.restart_s
        self._dur: dict[tuple[int, Allocation], float] = {}

    # ------------------------------------------------------------------ what the oracle solves
    def oracle_instance(self, keep: Iterable[int], pin_weight: float) -> Instance:
        """The running jobs and the queued jobs ``keep``, for the oracle (running jobs pinned, see the module
        docstring). Sum objectives become weighted JCT where each running job weighs ``pin_weight`` times the
        queued jobs' total weight: the offline class lets a job start late, and delaying a running job (to run
        short queued jobs on its GPUs first) is what a sum objective would otherwise ask for; its weight makes
        that cost more than it gains. Preempted jobs' restart is left out (the instance stays a relaxation)."""
        inst = self.instance
        keep = sorted(set(keep) | set(range(self.n_running)))
        jobs = [inst.jobs[i] for i in keep]
        if self.n_running:
            held = {r.name: (r.traits.job_class, tuple(r.gpus)) for r in self.state.running}
            cluster = pinned_cluster(inst.cluster, held)
            jobs = [replace(j, job_class=PIN_CLASS + j.name) if i < self.n_running else j for i, j in enumerate(jobs)]
            inst = replace(inst, cluster=cluster)
        if inst.objective == "makespan" or not self.n_running:
            return inst.replace_jobs(jobs)
        w_pin = pin_weight * sum(j.weight if inst.objective == "weighted_jct" else 1.0 for j in jobs[self.n_running:])
        jobs = [replace(j, weight=w_pin) if i < self.n_running else
                (j if inst.objective == "weighted_jct" else replace(j, weight=1.0)) for i, j in enumerate(jobs)]
        return inst.replace_jobs(jobs, objective="weighted_jct")

    def live_bound(self, solved: Instance, lower_bound: float) -> float:
        """A lower bound on the live objective, over plans that preempt nothing, from the oracle's bound on
        ``solved`` = :meth:`oracle_instance` of the whole queue. Every such plan is a schedule of ``solved``
        whose running jobs end at their pinned ends e_r, so Σ_q w_q C_q ≥ LB·Σ w − Σ_r w'_r e_r (w' their
        weights there)."""
        return self.objective_of(self.queued_part(solved, lower_bound))

    def queued_part(self, solved: Instance, lower_bound: float) -> float:
        """From the oracle's bound on ``solved`` (the running jobs and some queued jobs Q): a bound on
        Σ_{q∈Q} w_q C_q (sum objectives; weights 1 for mean JCT) — on max C over them for makespan."""
        if self.instance.objective == "makespan":
            return lower_bound
        ws = [j.weight for j in solved.jobs]
        if not self.n_running:
            return lower_bound * sum(ws)
        return lower_bound * sum(ws) - sum(w * e for w, e in zip(ws, self.pinned_end))

    def objective_of(self, queued_total: float) -> float:
        """The live objective of plans whose queued jobs give ``queued_total`` (Σ w C, or max C for
        makespan) beside the running jobs at their pinned ends."""
        if self.instance.objective == "makespan":
            return max([queued_total, *self.pinned_end])
        wl = self.weights
        return (sum(w * e for w, e in zip(wl, self.pinned_end)) + queued_total) / sum(wl)

    # ------------------------------------------------------------------ views
    @cached_property
    def weights(self) -> list[float]:
        """Each job's weight in the objective (1 for mean JCT and makespan)."""
        wjct = self.instance.objective == "weighted_jct"
        return [j.weight if wjct else 1.0 for j in self.instance.jobs]

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

    def allowed(self, j: int, alloc: Allocation) -> bool:
        """Whether job j may run on ``alloc`` (an allowed size, GPUs that can host it): a plan carried from
        an earlier state may hold allocations that no longer are."""
        return len(alloc.gpus) in self.instance.jobs[j].sizes and all(g in self.usable_set[j] for g in alloc.gpus)

    def duration(self, j: int, alloc: Allocation) -> float:
        """Job j's run time on ``alloc`` from its start, without a restart (cached); inf when the speed
        model cannot price it there."""
        key = (j, alloc)
        d = self._dur.get(key)
        if d is None:
            try:
                d = duration(self.instance.jobs[j], alloc, self.instance.cluster)
            except SpeedError:
                d = math.inf
            self._dur[key] = d
        return d

    @cached_property
    def p_min(self) -> list[float]:
        """Per job, its run time on the empty cluster (no restart) on the best of a few allocations per
        size (the fastest usable GPUs of each node, and of the cluster): the order key of the shortest-first
        heuristics (the bounds use :func:`formulations.offline.classes.p_min`, a proven one)."""
        cl = self.instance.cluster
        out = []
        for j, job in enumerate(self.instance.jobs):
            usable = sorted((cl.gpu[g] for g in self.usable[j]), key=lambda g: (g.factor(job.job_class), g.node, g.index))
            by_node: dict[str, list[str]] = {}
            for g in usable:
                by_node.setdefault(g.node, []).append(g.id)
            groups = [*by_node.values(), [g.id for g in usable]]
            ps = lambda ids: (cl.gpu[ids[0]].node,) if job.ps is not None else ()  # noqa: E731
            out.append(min((self.duration(j, Allocation(tuple(ids[:n]), ps(ids))) for n in job.sizes
                            for ids in groups if len(ids) >= n), default=math.inf))
        return out

    def wspt_key(self, j: int) -> float:
        """Job j's shortest run time on the empty cluster over weight (Smith's rule; SPT at weight 1)."""
        return self.p_min[j] / self.instance.jobs[j].weight

    def can_start_now(self, released: Iterable[int] = ()) -> bool:
        """Whether some queued job fits on the GPUs free now (otherwise the decision is empty, whatever
        the plan, unless it preempts)."""
        busy = self.busy(released)
        for j in self.queued:
            free = sum(1 for g in self.usable[j] if g not in busy)
            if any(s <= free for s in self.instance.jobs[j].sizes):
                return True
        return False

    def busy(self, released: Iterable[int] = ()) -> frozenset[str]:
        """GPUs held now by the running jobs that a plan keeps (a job about to end still holds its GPUs)."""
        out = set(self.state.busy_gpus)
        for r in released:
            out.difference_update(self.pins[r].gpus)
        return frozenset(out)

    def resumed(self, released: Iterable[int] = ()) -> frozenset[str]:
        """Names of the jobs that pay ``restart_s`` at their start in a plan that preempts ``released``."""
        names = [j.name for j in self.instance.jobs]
        return frozenset(names[j] for j in set(self.pending) | set(released))

    # ------------------------------------------------------------------ schedules of the instance
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
        return [(idx[s.job], s.alloc) for s in segs]

    # ------------------------------------------------------------------ back to the live clock
    def placements(self, sched: Schedule, completion: dict[str, float], released: Iterable[int] = ()
                   ) -> tuple[tuple[Placement, ...], tuple[Placement, ...], tuple[Placement, ...]]:
        """(start now, later, running kept) of a plan, in absolute time."""
        now = self.state.now
        idx = self.instance.index
        released = frozenset(released)
        busy = self.busy(released)
        now_, later, running = [], [], []
        for s in sorted(sched.segments, key=lambda s: (s.start, idx[s.job])):
            p = Placement(s.job, tuple(s.alloc.gpus), now + s.start, now + completion[s.job], tuple(s.alloc.ps_nodes))
            j = idx[s.job]
            if j < self.n_running and j not in released:
                running.append(p)
            elif s.start <= NOW_TOL and not busy.intersection(s.alloc.gpus):
                now_.append(replace(p, start=now))
            else:
                later.append(p)
        return tuple(now_), tuple(later), tuple(running)

    def schedule_of(self, plan) -> Schedule:
        """A plan of this state (a :class:`live.state.Plan`) as a schedule of the instance, for replay
        (with ``resumed=self.resumed(released)``, ``released`` the indices of ``plan.preempt_now``)."""
        now = self.state.now
        segs = [Segment(p.job, p.start - now, None, Allocation(tuple(p.gpus), tuple(p.ps_nodes)))
                for p in plan.running + plan.start_now + plan.later]
        return Schedule(self.instance.name, plan.source, tuple(segs))

    def mean_jct(self, completion: dict[str, float]) -> float:
        """Predicted mean JCT from submission over the jobs of the plan."""
        now = self.state.now
        subs = [r.submit for r in self.state.running] + [q.submit for q in self.state.queued]
        names = [j.name for j in self.instance.jobs]
        if not names:
            return math.nan
        return sum(now + completion[n] - s for n, s in zip(names, subs)) / len(names)


def preempted_record(r: RunningJob, li: LiveInstance) -> QueuedJob:
    """Running job ``r`` once stopped now: a queued job of its GPU count with the work it has left (the
    share of ``r.work`` that its remaining time is on its GPUs) that pays ``restart_s`` when it starts."""
    j = li.instance.index[r.name]
    full = job_fields(r.work, li.instance.cluster.gpu_types)   # type: ignore[arg-type]
    probe = _job(r.name, full, (len(r.gpus),), r.weight, r.traits)
    share = min(1.0, li.pinned_end[j] / duration(probe, li.pins[j], li.instance.cluster))
    return QueuedJob(r.name, r.submit, (len(r.gpus),), r.work.scaled(share), r.weight, r.traits,   # type: ignore[union-attr]
                     r.preempted + 1)
