"""The rolling-horizon planner: one live state in, one decision (and the plan behind it) out, within the
time limit.

Each call (:meth:`Planner.plan`):

1. builds the live instance (:mod:`live.instance`: time 0 = now, running jobs pinned on their GPUs);
2. computes the heuristic plans (:mod:`live.fallback`): the previous plan carried forward (the warm
   start), the shortest-first greedy and the configured online policies; the best one is the plan to beat;
3. unless nothing can start now (no queued job fits the free GPUs: the decision is then empty whatever
   the plan, and the solve is skipped unless ``solve_when_full``), runs the offline oracle
   (``oracle.methods.solve``) on the running jobs and the first ``max_oracle_jobs`` queued jobs of the best
   plan, hinted with it, in a worker process killed at the deadline (:mod:`live.worker`); its order and
   GPUs are re-timed with the running jobs pinned (the rest of the queue after them, earliest completion);
4. keeps the candidate with the least replayed objective. The oracle can only improve on the heuristics.

The oracle's lower bound is reported when it saw the whole queue: it bounds every live plan of this
state (a relaxation, see :mod:`live.instance`); ``status`` is ``optimal`` when the plan meets it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from jctlab.model import Schedule

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
    max_oracle_jobs: int = 40
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
        for name in c.fallbacks:
            t = fallback.simulated(li, name, c.seed)
            if t is not None:
                cands[name] = t
        best = min(cands.values(), key=lambda t: t.objective)
        answer: Answer | None = None
        proven = False
        whole = len(li.queued) <= c.max_oracle_jobs
        if (self.oracle is not None and len(li.queued) > 0 and (c.solve_when_full or li.can_start_now())
                and deadline - time.perf_counter() >= c.min_solve_s):
            answer, timed = self._solve(li, best, deadline)
            if timed is not None:
                cands[self.config.method] = timed
                # an optimum of the oracle's instance that keeps every running job in place is a live plan,
                # optimal among live plans too (their objective there grows with the live one)
                proven = whole and answer.status == "optimal" and li.keeps_pins(answer.schedule)
        best_name = min(cands, key=lambda k: (cands[k].objective, k == c.method))   # ties: the oracle added nothing
        best = cands[best_name]
        lb = None
        if answer is not None and answer.lower_bound is not None and whole:
            lb = li.live_bound(self._solved, answer.lower_bound)
        met = lb is not None and best.objective <= lb * (1 + OPTIMAL_RTOL) + 1e-9
        proven = proven and best.objective <= cands[c.method].objective * (1 + 1e-12)
        status = "optimal" if met or proven else "feasible"
        now_, later, running = li.placements(best)
        return Plan(state.now, now_, later, running, (), best.objective, lb, best_name, status,
                    time.perf_counter() - t0, li.mean_jct(best), {k: v.objective for k, v in cands.items()})

    def _solve(self, li: LiveInstance, best: Timed, deadline: float) -> tuple[Answer | None, Timed | None]:
        """The oracle on the running jobs and the head of ``best``'s queue; its plan re-timed (or None)."""
        c = self.config
        order = li.order_of(best.schedule)
        head = order[:c.max_oracle_jobs]
        sub = li.oracle_instance([j for j, _ in head], c.pin_weight)
        self._solved = sub
        names = {job.name for job in sub.jobs}
        hint = Schedule(sub.name, "live-hint", tuple(s for s in best.schedule.segments if s.job in names))
        # the oracle overruns its limit by its set-up and final replay (0.1-1 s measured at 64 GPUs): ask for
        # less than what is left; the worker is killed at the deadline in any case
        limit = max(c.min_solve_s / 2, c.oracle_share * (deadline - time.perf_counter()) - c.overrun_s)
        self.solves += 1
        answer = self.oracle.solve(sub, hint, limit, deadline)   # type: ignore[union-attr]
        if answer is None or answer.schedule is None:
            return answer, None
        solved = li.order_of(answer.schedule)
        rest = [j for j, _ in order[c.max_oracle_jobs:]]
        return answer, li.greedy(rest, c.method, head=solved)

    def close(self) -> None:
        if self.oracle is not None:
            self.oracle.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
