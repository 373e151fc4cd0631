"""The rolling-horizon planner as an online policy of the core simulator (``jctlab simulate --policy live``).

At every decision point the simulator's state becomes a live state (waiting jobs queued since their
arrival; running jobs with their GPUs and, as their estimate, the exact time they have left on them)
and the planner's ``start_now`` becomes the policy's starts. It never preempts. This is how the loop is
replayed on traces (``scripts/live_replay.py``): the schedule the simulator emits is replayed like any
other. Planning happens between simulated instants: its wall-clock time is not simulated time. The planner
sees the cluster without per-GPU variability or interference (not live notions): on instances that have
them its predictions differ from the simulator's, its decisions stay valid.
"""

from __future__ import annotations

from typing import Iterable

from jctlab.errors import InputError
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import Action, Start
from jctlab.speed import base_iteration_time

from .planner import Planner, PlannerConfig
from .state import ClusterSpec, LiveState, Plan, QueuedJob, RunningJob, Work


def job_work(job: Job) -> Work:
    return Work(spec={"batch": job.batch, "iterations": job.iterations, "samples_per_s": dict(job.samples_per_s),
                      "comm_mb": job.comm_mb, "model": job.model,
                      "measured": {k: dict(row) for k, row in job.measured.items()}})


class LivePolicy:
    """``decide(sim)``: plan the live state of ``sim`` and start what the plan starts now."""

    def __init__(self, inst: Instance, config: PlannerConfig):
        if any(j.ps is not None or j.cpu_mem is not None for j in inst.jobs):
            raise InputError(inst.name, "jobs", "the live planner prices GPUs only: no parameter servers or cpu_mem tables")
        self.inst = inst
        self.cluster = ClusterSpec.from_cluster(inst.cluster, inst.name)
        self.work = [job_work(j) for j in inst.jobs]
        self.planner = Planner(config)
        self.previous: Plan | None = None
        self.plans: list[Plan] = []

    def state(self, sim) -> LiveState:
        inst, eng = self.inst, sim.engine
        queued = tuple(QueuedJob(inst.jobs[j].name, inst.jobs[j].arrival, inst.jobs[j].sizes, self.work[j],
                                 inst.jobs[j].weight) for j in sim.waiting)
        running = []
        for j, run in sim.running.items():
            job = inst.jobs[j]
            left = eng.remaining(j) * base_iteration_time(job, run.alloc, inst.cluster)
            running.append(RunningJob(job.name, job.arrival, eng.first_start[j], tuple(run.alloc.gpus), left, sim.now,
                                      self.work[j], job.weight))
        return LiveState(self.cluster, sim.now, queued, tuple(running))

    def decide(self, sim) -> Iterable[Action]:
        if not sim.waiting or sim.engine.free_total == 0:
            return []
        plan = self.planner.plan(self.state(sim), self.previous)
        self.previous = plan
        self.plans.append(plan)
        idx = self.inst.index
        return [Start(idx[p.job], Allocation(tuple(p.gpus))) for p in plan.start_now]

    def close(self) -> None:
        self.planner.close()


def factory(inst: Instance, seed: int = 0, time_limit: float = 2.0, method: str = "cpsat",
            max_oracle_jobs: int = 16, fallbacks: str = "srtf+packed-sticky,fifo+packed-sticky",
            floor_s: float = 0.0) -> LivePolicy:
    """``jctlab simulate --policy live [--time-limit S --method M --max-oracle-jobs K --fallbacks a,b]``."""
    config = PlannerConfig(time_limit=float(time_limit), method=str(method), seed=seed,
                           objective=inst.objective,
                           fallbacks=tuple(s for s in str(fallbacks).split(",") if s),
                           max_oracle_jobs=int(max_oracle_jobs), floor_s=float(floor_s))
    return LivePolicy(inst, config)
