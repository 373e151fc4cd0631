"""The rolling-horizon planner: one live state in, one decision (and the plan behind it) out, within the
time limit.

Each call (:meth:`Planner.plan`):

1. builds the live instance (:mod:`live.instance`: time 0 = now) and its list scheduler
   (:class:`live.decode.Decoder`);
2. computes the fast heuristic plans (:mod:`live.fallback`): the previous plan carried forward (the warm
   start) and the shortest-first greedy; with preemption also SRTF's stops (``srptK``: the K longest-running
   jobs stopped for shorter queued ones, K = 1..8), which the search's one-at-a-time stops miss when only
   stops together free a wide job's GPUs;
3. unless nothing can start now (no queued job fits the free GPUs: the decision is then empty whatever
   the plan, and the solve is skipped unless ``solve_when_full``; with preemption allowed the solve is
   skipped only when nothing can start even after stopping every job that may be stopped), sends the
   offline oracle (``oracle.methods.solve``) the running jobs and the first ``max_oracle_jobs`` queued
   jobs of the better of those plans, hinted with it, to a worker process (:mod:`live.worker`);
4. while the worker solves, simulates the configured online policies from the live state;
5. improves the best plan so far by local search (:mod:`live.search`) until the deadline, a local
   optimum or ``max_evaluations``; when the oracle answers meanwhile, its plan (re-timed with the running
   jobs in place, the rest of the queue after it) joins the candidates and the search goes on from the
   better of the two. With ``preemption``, the search may stop running jobs (module :mod:`live.search`:
   each stop must gain ``preempt_gain`` × the objective);
6. keeps the candidate with the least replayed objective (ties go to the earlier heuristic: the oracle
   and the search get the credit only for a strictly better plan); a plan that preempts k jobs is kept only
   if it is at least k × ``preempt_gain`` better than the best plan that preempts none.

The reported lower bound (:mod:`live.bounds`) bounds every plan of the state: the larger of a closed-form
bound of the whole state and, without preemption, the oracle's bound on its window plus the closed form of
the rest of the queue; ``status`` is ``optimal`` when the plan meets it, or when the oracle proved optimal a
plan of the whole queue that keeps every running job in place.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from jctlab.model import Instance, Schedule

from . import arrivals, bounds, fallback
from .arrivals import ArrivalConfig, ArrivalModel, Sample
from .decode import Decoded, Decoder, timed
from .instance import NOW_TOL, LiveInstance
from .search import Budget, improve
from .state import LiveState, Plan
from .worker import Answer, OracleRunner

#: relative tolerance of "the plan meets the bound" (the replay's tolerance on objectives)
OPTIMAL_RTOL = 1e-6


@dataclass(frozen=True)
class PlannerConfig:
    """``time_limit``: seconds from the call to the decision; ``method``: an oracle method
    (``oracle.methods.solve``) or ``"none"`` for the heuristics and the search alone; ``fallbacks``: online
    policies whose plans compete (``jctlab simulate --policy`` names); ``search``: the improvement phase,
    within ``max_evaluations`` decodings when given (same decisions whatever the load); ``window``: its
    insertion/swap distance; ``preemption``: the planner may stop (and later resume, or migrate) running
    jobs when each stop gains more than ``preempt_gain`` × the objective; ``arrivals``: predict arrivals from
    what the loop has seen and hold a long job back when the short jobs likely to arrive during its run gain
    more than it loses (:mod:`live.arrivals`, settings ``arrival``; mean JCT, without preemption); ``reserve_s``: seconds of the limit
    kept for replaying the chosen plan; ``floor_s``: the least remaining time of a running job past its
    estimate; ``isolate``: the oracle in a worker process killed at the deadline."""

    time_limit: float = 10.0
    method: str = "cpsat"
    threads: int = 1
    seed: int = 0
    objective: str = "mean_jct"
    fallbacks: tuple[str, ...] = ("srtf+packed-sticky", "fifo+packed-sticky")
    max_oracle_jobs: int = 16   # smaller models leave CP-SAT time to improve (dev seeds: docs/live.md)
    solve_when_full: bool = False
    search: bool = True
    max_evaluations: int | None = None
    window: int = 6
    preemption: bool = False
    preempt_gain: float = 0.01
    reserve_s: float = 0.25
    floor_s: float = 60.0
    isolate: bool = True
    min_solve_s: float = 0.2   # below this much time left the oracle is not started
    oracle_share: float = 0.85  # the oracle's time limit: this share of the time left, minus overrun_s
    overrun_s: float = 0.3
    pin_weight: float = 10.0   # weight of a running job in the oracle, times the queue's (LiveInstance.oracle_instance)
    arrivals: bool = False
    arrival: ArrivalConfig = field(default_factory=ArrivalConfig)


@dataclass
class Planner:
    config: PlannerConfig = field(default_factory=PlannerConfig)

    def __post_init__(self) -> None:
        c = self.config
        self.oracle = None if c.method == "none" else OracleRunner(c.method, c.threads, c.seed, c.isolate)
        if self.oracle is not None:
            self.oracle.start()
        self.solves = 0
        self.evaluations = 0
        self.holds = 0
        self.model = ArrivalModel(c.arrival) if c.arrivals else None

    def plan(self, state: LiveState, previous: Plan | None = None) -> Plan:
        t0 = time.perf_counter()
        c = self.config
        deadline = t0 + c.time_limit - c.reserve_s
        li = LiveInstance(state, c.objective, c.floor_s)
        if self.model is not None:
            self.model.observe_state(state)
        if not li.instance.jobs:
            return Plan(state.now, (), (), (), (), 0.0, 0.0, "empty", "optimal", time.perf_counter() - t0, 0.0)
        dec = Decoder(li)
        cands: dict[str, Decoded] = {}
        if previous is not None:
            cands["previous"] = fallback.previous(li, dec, previous)
        cands["greedy"] = fallback.greedy(li, dec)
        may_preempt = c.preemption and bool(li.movable)
        if may_preempt:
            cands.update(fallback.srpt(li, dec))
        startable = li.can_start_now(li.movable if may_preempt else ())
        solve = (self.oracle is not None and len(li.queued) > 0 and (c.solve_when_full or startable)
                 and deadline - time.perf_counter() >= c.min_solve_s)
        if solve:   # the worker solves while the simulated fallbacks and the search run here
            first = min((d for d in cands.values() if not d.released), key=lambda d: d.objective)   # pins kept
            solved, head = self._submit(li, timed(li, first, "hint").schedule, first.order, deadline)
        least = bounds.least(li)   # the bounds' run times, while the worker solves (tenths of a second at 64 GPUs)
        lb = bounds.state_bound(li, may_preempt, least)
        for name in c.fallbacks:
            if time.perf_counter() >= deadline:   # the greedy already gave a plan: keep the decision in time
                break
            d = fallback.simulated(li, dec, name, c.seed, deadline)
            if d is not None:
                cands[name] = d
        answer: Answer | None = None
        proven = False

        def take_answer() -> None:
            nonlocal answer, proven
            answer = self.oracle.collect(deadline)   # type: ignore[union-attr]
            if answer is not None and answer.schedule is not None:
                inside = set(head)
                rest = [j for j in first.order if j not in inside]
                cands[c.method] = dec.decode_pairs(li.order_of(answer.schedule), rest)
                # an optimum of the oracle's instance that keeps every running job in place is a live plan,
                # optimal among plans without preemption too (their objective there grows with the live one)
                proven = (len(head) == len(li.queued) and answer.status == "optimal" and li.keeps_pins(answer.schedule))

        base = self._choose(cands, li)
        if c.search and (startable or c.solve_when_full):
            budget = Budget(deadline, c.max_evaluations)
            if solve:   # search until the oracle's answer is due, then from the better plan
                wait = Budget(min(deadline, time.perf_counter() + self._oracle_limit), c.max_evaluations)
                res = improve(dec, cands[base], wait, c.window, c.preempt_gain if may_preempt else None)
                cands[f"{base}+search"] = res.plan
                take_answer()
                solve = False
                base = self._choose(cands, li)
            res = improve(dec, cands[base], budget, c.window, c.preempt_gain if may_preempt else None)
            if res.moves:
                cands[base if base.endswith("+search") else f"{base}+search"] = res.plan
        if solve:
            take_answer()
        self.evaluations += dec.evaluations
        best_name = self._choose(cands, li)
        chosen = cands[best_name]
        # with preemption a long job started now can still be stopped when short ones come, which the rollout
        # does not model (it would overvalue holding): holds are for the non-preemptive loop
        if self.model is not None and c.objective == "mean_jct" and not c.preemption:
            held = self._hold(li, dec, chosen)
            if held is not None:
                best_name, chosen = f"{best_name}+hold", held
        best = timed(li, chosen, best_name)
        if answer is not None and answer.lower_bound is not None and not may_preempt:
            lb = max(lb, bounds.window_bound(li, head, li.queued_part(solved, answer.lower_bound), least))
        met = best.objective <= lb * (1 + OPTIMAL_RTOL) + 1e-9
        proven = proven and not best.released and best.objective <= cands[c.method].objective * (1 + 1e-12)
        status = "optimal" if met or proven else "feasible"
        now_, later, running = li.placements(best.schedule, best.replay.completion, best.released)
        if self.model is not None:   # each queued job's work as first planned
            submits = {q.name: q.submit for q in state.queued}
            for p in now_ + later:
                if p.job in submits:
                    self.model.observe_work(Sample(submits[p.job], p.job, len(p.gpus), p.end - p.start))
        names = [li.instance.jobs[r].name for r in sorted(best.released)]
        return Plan(state.now, now_, later, running, tuple(names), best.objective, lb, best_name, status,
                    time.perf_counter() - t0, li.mean_jct(best.replay.completion),
                    {k: v.objective for k, v in cands.items()})

    def _choose(self, cands: dict[str, Decoded], li: LiveInstance) -> str:
        """The least objective (ties: the first candidate); a plan that preempts k jobs only if it is more
        than k × preempt_gain below the best plan that preempts none."""
        keep = {k: d for k, d in cands.items() if not d.released}
        ref = min(d.objective for d in keep.values())
        gain = self.config.preempt_gain
        ok = {k: d for k, d in cands.items()
              if not d.released or d.objective < ref - len(d.released) * gain * ref}
        return min(ok, key=lambda k: ok[k].objective)

    def _hold(self, li: LiveInstance, dec: Decoder, plan: Decoded) -> Decoded | None:
        """``plan`` with the jobs :func:`live.arrivals.hold` holds back planned from the next predicted
        arrival on (on the GPUs they had), or None when it holds none."""
        now_jobs, rest = [], []
        for j, a, s, e in zip(plan.order, plan.allocs, plan.starts, plan.ends):
            if s <= NOW_TOL:
                now_jobs.append((j, e - s, len(a.gpus), tuple(dec.gpos[g] for g in a.gpus)))
            else:
                rest.append((e - s, len(a.gpus)))
        assert self.model is not None
        held = arrivals.hold(self.model, li.state.now, self.config.seed, dec.base_free(), now_jobs, rest,
                             keeps_running=bool(li.pins))
        if not held:
            return None
        self.holds += len(held)
        # planned from the next predicted arrival, or the next completion if sooner (the loop decides again then)
        held_jobs = {h.job for h in held}
        ends = [li.pinned_end[r] for r in li.pins] + [p for j, p, _, _ in now_jobs if j not in held_jobs]
        rate = self.model.rate(li.state.now)
        wait = max(1e-3, min([1.0 / rate if rate > 0 else math.inf, *ends]))
        forced = dict(plan.forced)
        forced.update({j: plan.allocs[plan.order.index(j)] for j in held_jobs})
        return dec.decode(plan.order, forced, release={j: wait for j in held_jobs})

    def _submit(self, li: LiveInstance, hint_plan: Schedule, order: list[int], deadline: float
                ) -> tuple[Instance, list[int]]:
        """Send the oracle the running jobs and the head of ``order`` (the best heuristic plan's list),
        hinted with that plan: the instance it solves and the queued jobs in it."""
        c = self.config
        head = order[:c.max_oracle_jobs]
        sub = li.oracle_instance(head, c.pin_weight)
        names = {job.name for job in sub.jobs}
        hint = Schedule(sub.name, "live-hint", tuple(s for s in hint_plan.segments if s.job in names))
        # the oracle overruns its limit by its set-up and final replay (0.1-1 s measured at 64 GPUs): ask for
        # less than what is left; the worker is killed at the deadline in any case
        limit = max(c.min_solve_s / 2, c.oracle_share * (deadline - time.perf_counter()) - c.overrun_s)
        self._oracle_limit = limit + c.overrun_s
        self.solves += 1
        self.oracle.submit(sub, hint, limit)   # type: ignore[union-attr]
        return sub, head

    def close(self) -> None:
        if self.oracle is not None:
            self.oracle.close()

    def __enter__(self) -> "Planner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["Planner", "PlannerConfig"]
