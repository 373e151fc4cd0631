"""The rolling-horizon planner: one live state in, one decision (and the plan behind it) out, within the
time limit.

Each call (:meth:`Planner.plan`):

1. builds the live instance (:mod:`live.instance`: time 0 = now, running jobs pinned on their GPUs);
2. computes the fast heuristic plans (:mod:`live.fallback`): the previous plan carried forward (the warm
   start) and the shortest-first greedy;
3. unless nothing can start now (no queued job fits the free GPUs: the decision is then empty whatever
   the plan, and the solve is skipped unless ``solve_when_full``), sends the offline oracle
   (``oracle.methods.solve``) the running jobs and the first ``max_oracle_jobs`` queued jobs of the better
   of those plans, hinted with it, to a worker process (:mod:`live.worker`);
4. while the worker solves, simulates the configured online policies from the live state;
5. collects the oracle's answer until the deadline (the worker is killed then), re-times its order and GPUs
   with the running jobs pinned (the rest of the queue after them, earliest completion), and keeps the
   candidate with the least replayed objective. The oracle can only improve on the heuristics.

The oracle's lower bound is reported when it saw the whole queue: it bounds every live plan of this
state (a relaxation, see :mod:`live.instance`); ``status`` is ``optimal`` when the plan meets it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from jctlab.model import Instance, Schedule

from . import fallback
from .instance import LiveInstance, Timed
from .state import LiveState, Plan
from .worker import Answer, OracleRunner

#: relative tolerance of "the plan meets the bound" (the replay's tolerance on objectives)
OPTIMAL_RTOL = 1e-6


@dataclass(frozen=True)
class PlannerConfig:
    """``time_limit``: seconds from the call to the decision; ``method``: an oracle method
    (``oracle.methods.solve``) or ``"none"`` for the heuristics alone; ``fallbacks``: online policies
    whose plans compete (``jctlab simulate --policy`` names); ``reserve_s``: seconds of the limit kept
    for re-timing the oracle's plan; ``floor_s``: the least remaining time of a running job past its
    estimate; ``isolate``: the oracle in a worker process killed at the deadline."""

    time_limit: float = 10.0
    method: str = "cpsat"
    threads: int = 1
    seed: int = 0
    objective: str = "mean_jct"
    fallbacks: tuple[str, ...] = ("srtf+packed-sticky", "fifo+packed-sticky")
    max_oracle_jobs: int = 16   # smaller models leave CP-SAT time to improve (dev seeds: docs/live.md)
    solve_when_full: bool = False
    reserve_s: float = 0.25
    floor_s: float = 60.0
    isolate: bool = True
    min_solve_s: float = 0.2   # below this much time left the oracle is not started
    oracle_share: float = 0.85  # the oracle's time limit: this share of the time left, minus overrun_s
    overrun_s: float = 0.3
    pin_weight: float = 10.0   # weight of a running job in the oracle, times the queue's (LiveInstance.oracle_instance)


@dataclass
class Planner:
    config: PlannerConfig = field(default_factory=PlannerConfig)

    def __post_init__(self) -> None:
        c = self.config
        self.oracle = None if c.method == "none" else OracleRunner(c.method, c.threads, c.seed, c.isolate)
        if self.oracle is not None:
            self.oracle.start()
        self.solves = 0

    def plan(self, state: LiveState, previous: Plan | None = None) -> Plan:
        t0 = time.perf_counter()
        c = self.config
        deadline = t0 + c.time_limit - c.reserve_s
        li = LiveInstance(state, c.objective, c.floor_s)
        if not li.instance.jobs:
            return Plan(state.now, (), (), (), (), 0.0, 0.0, "empty", "optimal", time.perf_counter() - t0, 0.0)
        cands: dict[str, Timed] = {}
        if previous is not None:
            cands["previous"] = fallback.previous(li, previous)
        cands["greedy"] = fallback.greedy(li)
        whole = len(li.queued) <= c.max_oracle_jobs
        solve = (self.oracle is not None and len(li.queued) > 0 and (c.solve_when_full or li.can_start_now())
                 and deadline - time.perf_counter() >= c.min_solve_s)
        if solve:   # the worker solves while the simulated fallbacks are computed here
            solved, order = self._submit(li, min(cands.values(), key=lambda t: t.objective), deadline)
        for name in c.fallbacks:
            if time.perf_counter() >= deadline:   # the greedy already gave a plan: keep the decision in time
                break
            t = fallback.simulated(li, name, c.seed)
            if t is not None:
                cands[name] = t
        answer: Answer | None = None
        proven = False
        if solve:
            answer = self.oracle.collect(deadline)   # type: ignore[union-attr]
            if answer is not None and answer.schedule is not None:
                rest = [j for j, _ in order[c.max_oracle_jobs:]]
                cands[c.method] = li.greedy(rest, c.method, head=li.order_of(answer.schedule))
                # an optimum of the oracle's instance that keeps every running job in place is a live plan,
                # optimal among live plans too (their objective there grows with the live one)
                proven = whole and answer.status == "optimal" and li.keeps_pins(answer.schedule)
        best_name = min(cands, key=lambda k: (cands[k].objective, k == c.method))   # ties: the oracle added nothing
        best = cands[best_name]
        lb = None
        if answer is not None and answer.lower_bound is not None and whole:
            lb = li.live_bound(solved, answer.lower_bound)   # type: ignore[arg-type]
        met = lb is not None and best.objective <= lb * (1 + OPTIMAL_RTOL) + 1e-9
        proven = proven and best.objective <= cands[c.method].objective * (1 + 1e-12)
        status = "optimal" if met or proven else "feasible"
        now_, later, running = li.placements(best)
        return Plan(state.now, now_, later, running, (), best.objective, lb, best_name, status,
                    time.perf_counter() - t0, li.mean_jct(best), {k: v.objective for k, v in cands.items()})

    def _submit(self, li: LiveInstance, best: Timed, deadline: float) -> tuple[Instance, list]:
        """Send the oracle the running jobs and the head of ``best``'s queue, hinted with ``best``: the
        instance it solves and ``best``'s queue order (the rest of the queue follows the oracle's plan)."""
        c = self.config
        order = li.order_of(best.schedule)
        sub = li.oracle_instance([j for j, _ in order[:c.max_oracle_jobs]], c.pin_weight)
        names = {job.name for job in sub.jobs}
        hint = Schedule(sub.name, "live-hint", tuple(s for s in best.schedule.segments if s.job in names))
        # the oracle overruns its limit by its set-up and final replay (0.1-1 s measured at 64 GPUs): ask for
        # less than what is left; the worker is killed at the deadline in any case
        limit = max(c.min_solve_s / 2, c.oracle_share * (deadline - time.perf_counter()) - c.overrun_s)
        self.solves += 1
        self.oracle.submit(sub, hint, limit)   # type: ignore[union-attr]
        return sub, order

    def close(self) -> None:
        if self.oracle is not None:
            self.oracle.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
