"""The pooled problem's order: a start order for the free-GPU rule from CP-SAT on one cumulative of GPUs.

Why. On long queues the free-GPU climb (:mod:`.free_gpus`) ends where its start order leads it, and the orders
of the list-scheduling searches lead it to local optima well above what the jobs allow: on PAL's 16-node
workloads, the order of CP-SAT's solution to the pooled problem below (two workers, 8 s), list-scheduled by the
rule and climbed, ends 2-7 % below the climb from the searches' order in the same time on five of six cases; on
the 8-node ones 0.4-1.8 % above (docs/history/oracle-offline-queues.md, "`auto`'s pooled step").

Model. Each job an interval of its shortest run by the rule on an idle cluster (:meth:`.free_gpus.FreeGpus.alone`,
seconds rounded up), from its arrival, demanding its GPU count of one cumulative of the cluster's GPUs; minimise
the instance's objective (the weighted sum of ends, or the last end); hinted with a schedule's starts. It ignores
which GPUs are free and the locality penalty a job pays when the rule spreads it, so it is neither a bound nor a
schedule: its start order is list-scheduled by the rule, and that schedule (replayed) is the result. CP-SAT needs
its portfolio of workers here (with one worker it stays near its hint), so it is for callers with two threads or
more.
"""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from jctlab.model import Instance, Schedule

from ..results import NO_INCUMBENT, Incumbent
from . import free_gpus
from .cpsat_model import int_weights


def incumbent(inst: Instance, hint: Schedule | None, time_limit: float, threads: int, seed: int,
              method: str) -> Incumbent:
    """The module docstring's schedule, replayed; none where the rule does not apply, some job fits no GPUs or
    CP-SAT finds no solution in ``time_limit``."""
    if not free_gpus.applies(inst) or not inst.jobs:
        return NO_INCUMBENT
    fg = free_gpus.FreeGpus(inst)
    alone = [fg.alone(j) for j in range(len(inst.jobs))]
    if any(a is None for a in alone):
        return NO_INCUMBENT
    dur = [max(1, math.ceil(a[0])) for a in alone]      # type: ignore[index]
    arrival = [math.floor(job.arrival) for job in inst.jobs]
    horizon = max(arrival) + sum(dur)
    m = cp_model.CpModel()
    starts, ends, intervals = [], [], []
    for j, d in enumerate(dur):
        s = m.new_int_var(arrival[j], horizon, f"s{j}")
        e = m.new_int_var(arrival[j] + d, horizon + d, f"e{j}")
        intervals.append(m.new_interval_var(s, d, e, f"i{j}"))
        starts.append(s)
        ends.append(e)
    m.add_cumulative(intervals, [a[1] for a in alone], len(fg.ids))   # type: ignore[index]
    if inst.objective == "makespan":
        last = m.new_int_var(0, horizon + max(dur), "last")
        m.add_max_equality(last, ends)
        m.minimize(last)
    else:
        m.minimize(sum(w * e for w, e in zip(int_weights(inst)[0], ends)))
    if hint is not None:
        at = {sg.job: sg.start for sg in hint.segments}
        for j, job in enumerate(inst.jobs):
            if job.name in at:
                m.add_hint(starts[j], min(horizon, max(arrival[j], math.floor(at[job.name]))))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit)
    solver.parameters.num_workers = max(1, threads)
    solver.parameters.random_seed = seed
    if solver.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return NO_INCUMBENT
    order = sorted(range(len(dur)), key=lambda j: (solver.value(starts[j]), j))
    run = fg.run(order)
    return NO_INCUMBENT if run is None else Incumbent.of(inst, fg.schedule(run, method))
