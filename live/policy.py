"""The rolling-horizon planner as an online policy of the core simulator (``jctlab simulate --policy live``).

At every decision point the simulator's state becomes a live state (waiting jobs queued since their
arrival, with the work they have left; running jobs with their GPUs and, as their estimate, the exact time
they have left on them) and the planner's decision becomes the policy's actions: ``preempt_now`` as
preemptions (``preemption=true``, preemptive instances only), then ``start_now`` as starts. This is how the
loop is replayed on traces (``scripts/live_replay.py``): the schedule the simulator emits is replayed like
any other. Planning happens between simulated instants: its wall-clock time is not simulated time. The
planner prices the cluster's types, per-GPU variability, sockets, CPU/memory tables and parameter servers
as the simulator does, but not co-location interference (not a live notion): on instances that have it, its
predictions differ from the simulator's; its decisions stay valid.
"""

from __future__ import annotations

from typing import Iterable

from jctlab.errors import InputError
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import Action, Preempt, Start
from jctlab.speed import base_iteration_time

from .planner import Planner, PlannerConfig
from .state import ClusterSpec, LiveState, Plan, QueuedJob, RunningJob, Traits, Work


def job_work(job: Job, iterations: float | None = None) -> Work:
    """A SPEC job's speed fields as live work (``iterations``: what it has left, default all)."""
    return Work(spec={"batch": job.batch, "iterations": job.iterations if iterations is None else iterations,
                      "samples_per_s": dict(job.samples_per_s), "comm_mb": job.comm_mb, "model": job.model,
                      "measured": {k: dict(row) for k, row in job.measured.items()}})


class LivePolicy:
    """``decide(sim)``: plan the live state of ``sim``; preempt and start what the plan says now."""

    def __init__(self, inst: Instance, config: PlannerConfig):
        if config.preemption and inst.problem != "preemptive":
            raise InputError(inst.name, "problem", "preemption=true needs a preemptive instance")
        self.inst = inst
        self.cluster = ClusterSpec.from_cluster(inst.cluster, inst.name)
        self.traits = [Traits(j.job_class, j.cpu_mem, j.ps) for j in inst.jobs]
        self.planner = Planner(config)
        self.previous: Plan | None = None
        self.plans: list[Plan] = []

    def state(self, sim) -> LiveState:
        inst, eng = self.inst, sim.engine
        queued = []
        for j in sim.waiting:
            job = inst.jobs[j]
            left = eng.remaining(j)
            queued.append(QueuedJob(job.name, job.arrival, job.sizes, job_work(job, left), job.weight, self.traits[j],
                                    eng.segments_started[j]))
        running = []
        for j, run in sim.running.items():
            job = inst.jobs[j]
            # time left: the rest of its restart, then its iterations at the speed it has alone on its GPUs
            left = max(0.0, run.restart_until - sim.now) + eng.remaining(j) * base_iteration_time(job, run.alloc, inst.cluster)
            running.append(RunningJob(job.name, job.arrival, eng.first_start[j], tuple(run.alloc.gpus), left, sim.now,
                                      job_work(job, eng.remaining(j)), job.weight, self.traits[j],
                                      max(0, eng.segments_started[j] - 1), tuple(run.alloc.ps_nodes)))
        return LiveState(self.cluster, sim.now, tuple(queued), tuple(running))

    def decide(self, sim) -> Iterable[Action]:
        if not sim.waiting or (sim.engine.free_total == 0 and not self.planner.config.preemption):
            return []
        plan = self.planner.plan(self.state(sim), self.previous)
        self.previous = plan
        self.plans.append(plan)
        idx = self.inst.index
        out: list[Action] = [Preempt(idx[name]) for name in plan.preempt_now]
        return out + [Start(idx[p.job], Allocation(tuple(p.gpus), tuple(p.ps_nodes))) for p in plan.start_now]

    def close(self) -> None:
        self.planner.close()


def factory(inst: Instance, seed: int = 0, time_limit: float = 2.0, method: str = "cpsat",
            max_oracle_jobs: int = 16, fallbacks: str = "srtf+packed-sticky,fifo+packed-sticky",
            floor_s: float = 0.0, search: bool = True, max_evaluations: int | None = None,
            preemption: bool = False, preempt_gain: float = 0.01, arrivals: bool = False) -> LivePolicy:
    """``jctlab simulate --policy live [--time-limit S --method M --max-oracle-jobs K --fallbacks a,b
    --preemption true --preempt-gain G --max-evaluations N --search false --arrivals true]`` (the command
    line reads true/false and numbers as such)."""
    config = PlannerConfig(time_limit=float(time_limit), method=str(method), seed=seed,
                           objective=inst.objective,
                           fallbacks=tuple(s for s in str(fallbacks).split(",") if s),
                           max_oracle_jobs=int(max_oracle_jobs), floor_s=float(floor_s), search=bool(search),
                           max_evaluations=None if max_evaluations in (None, "none") else int(max_evaluations),
                           preemption=bool(preemption), preempt_gain=float(preempt_gain), arrivals=bool(arrivals))
    return LivePolicy(inst, config)

