"""The static pipeline shared by every model back end (CP-SAT, HiGHS, CBC).

Enumerate candidates (:mod:`formulations.static.candidates`), build the set-packing model
(:mod:`formulations.static.packing`), take the best of the hint, the market matching and the greedy as the
incumbent and hint, solve (through LP reduced-cost filtering on large models,
:mod:`formulations.static.reduced_costs`), decode (repairing relaxed choices, :func:`formulations.static.greedy.repair`),
and while the answer picks relaxed families with the gap open, expand them (:mod:`formulations.static.families`)
and solve again. The bound is the largest valid one; the objective the replayed one.

Status: ``optimal`` iff objective − bound ≤ 1e-6·objective; ``feasible`` otherwise (always with a bound);
``infeasible`` only when the candidate set is complete and the CPU rows are scaled exactly, or, before any
enumeration, when :func:`static_gpu_shortage` finds a set of GPU types that the jobs able to use only those
types need more of at once; ``timeout_no_solution`` with a bound.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any, Sequence

from jctlab.model import Allocation, Instance, Schedule
from jctlab.result import Result

from ..budget import Budget
from ..results import GAP_TOL, better_result, result_of_schedule, solver_versions
from ..schedules import hint_allocations, static_schedule
from .candidates import CandidateParams, enumerate_candidates
from .families import expand_families
from .greedy import repair, static_greedy
from .packing import Backend, BackendAnswer, PackingModel, build_packing, match_candidate
from .reduced_costs import reduced_solve


@dataclass(frozen=True)
class StaticParams:
    """The static pipeline's knobs."""

    candidates: CandidateParams = CandidateParams()
    enum_share: float = 0.4         # of the limit: candidate enumeration; then relaxed families for the rest
    greedy_share: float = 0.05      # of the time left: the greedy (after the market matching)
    reduce_min: int = 1500          # models with more columns go through LP reduced-cost filtering (sums)
    primal_share: float = 0.25      # of the time left: the primal back end's first upper bound in the filtering
    max_expand_rounds: int = 50     # rounds of "expand the chosen relaxed families and solve again"
    expand_cap: int = 3000          # a chosen family is replaced by its members when it has at most this many
    split_cap: int = 1000           # a larger one is split into at most this many sub-families, while half of
                                    # the limit is left (larger models need the time to be solved)


def matching_allocations(inst: Instance, seed: int = 0) -> list[Allocation] | None:
    """Per-job allocations of ``matching.methods.matching`` (market prices + polish, replay-valid),
    or None when it does not apply to the instance (other objectives or features) or fails."""
    try:
        # imported here: the market matching's numba kernels are heavy and only static solves need them
        from matching.methods import matching

        r = matching(inst, seed=seed)
    except Exception:  # noqa: BLE001 - an optional incumbent: any failure just means "none"
        return None
    if r.schedule is None or r.objective is None:
        return None
    return hint_allocations(inst, r.schedule)


def _within_budget(backend: Backend) -> Backend:
    """``backend`` that builds no model once its deadline has passed (no solution, no bound: the caller keeps
    its incumbent and bound). Building the full model of 64 jobs on 256 GPUs (121 000 columns) alone takes
    4 s: after a reduced-cost LP that ran out of time, a 3-s ``cpsat`` solve returned after 7.5 s."""

    def run(model: PackingModel, hint_cols: Sequence[int | None] | None, dl: Budget) -> BackendAnswer:
        if dl.left() <= 0:
            return BackendAnswer(None, None, info={"skipped": "out of time"})
        return backend(model, hint_cols, dl)

    return run


def static_gpu_shortage(inst: Instance) -> str | None:
    """Why no static schedule exists, by counting GPUs, or None. Every job runs from time 0 on at least
    its smallest size; so for every set T of GPU types, the jobs that can use types of T only need
    at most as many GPUs as T has (Hall's condition; solvers otherwise take seconds to prove it)."""
    have: dict[str, int] = {}
    for g in inst.cluster.gpus:
        have[g.type] = have.get(g.type, 0) + 1
    types = sorted(have)
    need = []
    for job in inst.jobs:
        usable = frozenset(t for t in types if job.can_use(t))
        n = min(job.sizes)
        if n > sum(have[t] for t in usable):
            return f"job {job.name} needs {n} GPUs of types {sorted(usable)}"
        need.append((usable, n))
    for k in range(1, len(types) + 1):
        for T in itertools.combinations(types, k):
            want = sum(n for u, n in need if u <= set(T))
            if want > sum(have[t] for t in T):
                return f"jobs that can only use {list(T)} need {want} GPUs at once, the cluster has {sum(have[t] for t in T)}"
    return None


def solve_static(inst: Instance, method: str, backend: Backend, *, time_limit: float | None, threads: int,
                 seed: int, hint: Schedule | None, warm: bool, solver: str, version: str, params: dict[str, Any],
                 reduce: bool = True, primal: Backend | None = None, settings: StaticParams = StaticParams()) -> Result:
    """The static pipeline shared by every model back end: enumerate candidates, build the packing
    model, get a heuristic incumbent (``warm``) and the hint, call ``backend(model, hint_cols,
    deadline)``, decode (repairing relaxed choices), keep the better of model and heuristic schedules,
    and report the largest valid bound. ``primal``: an optional second back end used only for upper
    bounds (its solutions, never its bounds) in the reduced-cost rounds, see
    :func:`formulations.static.reduced_costs.reduced_solve`. ``settings``: the knobs (:class:`StaticParams`)."""
    p = settings

    t0 = time.perf_counter()
    short = static_gpu_shortage(inst)
    if short is not None:
        return result_of_schedule(inst, method, None, None, t0, solver, version, {**params, "reason": short}, infeasible=True)
    dl = Budget(time_limit, t0)
    backend = _within_budget(backend)
    # enumeration may use up to enum_share of the limit; after that the remaining jobs get relaxed
    # candidates only (still a relaxation), so the limit holds
    cset = enumerate_candidates(inst, p.candidates,
                                budget=None if time_limit is None else Budget(p.enum_share * time_limit, t0))
    model = build_packing(inst, cset)
    params = dict(params)
    params.update(candidates=len(model.cols), relaxed_candidates=sum(not c.exact for c in model.cols),
                  complete=cset.complete, enum_s=round(cset.enum_s, 3),
                  model_s=round(time.perf_counter() - t0, 3), time_limit=time_limit, threads=threads,
                  seed=seed, warm=warm, reduce=reduce, versions=solver_versions())
    if any(not g for g in model.groups):
        j = next(k for k, g in enumerate(model.groups) if not g)
        return result_of_schedule(inst, method, None, None, t0, solver, version, params, infeasible=True,
                      error=None if cset.complete else f"job {inst.jobs[j].name} has no candidate")
    trivial = model.trivial_bound()
    incumbent: Result | None = None
    hint_allocs = hint_allocations(inst, hint)
    if hint_allocs is not None:
        incumbent = result_of_schedule(inst, method, static_schedule(inst, hint_allocs, method), None, t0, solver, version, params)
        if incumbent.objective is None:
            hint_allocs, incumbent = None, None
    if warm:
        # market matching (matching.methods.matching): a replay-valid schedule within a few % of
        # the optimum in ~50 ms, far better than the greedy; the greedy still runs (it also covers
        # objectives and job features the matching does not take)
        th = time.perf_counter()
        m_allocs = matching_allocations(inst, seed)
        if m_allocs is not None:
            r = result_of_schedule(inst, method, static_schedule(inst, m_allocs, method), None, t0, solver, version, params)
            if r.objective is not None and (incumbent is None or r.objective < incumbent.objective):
                incumbent, hint_allocs = r, m_allocs
            params["matching_objective"] = r.objective
        sub = Budget(None if time_limit is None else max(0.05, p.greedy_share * dl.left()))
        h = static_greedy(inst, model, seed=seed, budget=sub)
        if h is not None:
            r = result_of_schedule(inst, method, static_schedule(inst, h, method), None, t0, solver, version, params)
            if r.objective is not None and (incumbent is None or r.objective < incumbent.objective):
                incumbent, hint_allocs = r, h
        params["heuristic_s"] = round(time.perf_counter() - th, 3)
    params["heuristic_objective"] = None if incumbent is None else incumbent.objective
    expanded = 0
    bound = trivial
    best = incumbent
    for it in range(p.max_expand_rounds + 1):
        hint_cols = None
        if hint_allocs is not None:
            hint_cols = [match_candidate(model, j, a) for j, a in enumerate(hint_allocs)]
        if reduce and not model.makespan and len(model.cols) > p.reduce_min:
            ans, rinfo = reduced_solve(model, backend, hint_cols, dl, primal=primal, primal_share=p.primal_share)
            params.update(rinfo)
        else:
            ans = backend(model, hint_cols, dl)
        params.update(ans.info)
        if cset.complete and ans.bound is not None:
            bound = max(bound, ans.bound)
        if ans.chosen is None:
            break
        cols = [model.cols[i] for i in ans.chosen]
        if all(c.exact for c in cols):
            taken: dict[int, int] = {}
            allocs = []
            for c in cols:
                allocs.append(c.allocation(model.cands.classes, taken))
                for cl, k in c.counts:
                    taken[cl] = taken.get(cl, 0) + k
        else:
            allocs = repair(inst, model, list(ans.chosen), dl)
            params["repaired"] = True
        if allocs is not None:
            r = result_of_schedule(inst, method, static_schedule(inst, allocs, method), None, t0, solver, version, params)
            if r.objective is not None:
                best = better_result(best, r)
                if best is r:
                    hint_allocs = allocs
        if all(c.exact for c in cols) or not cset.complete or dl.left() <= 0.05:
            break
        if best is not None and best.objective is not None and best.objective - bound <= GAP_TOL * abs(best.objective):
            break
        # the answer picked relaxed families and the gap is open: replace them by their exact members
        # (the model stays a relaxation) and solve again, while enough time is left
        if time_limit is not None and dl.left() < 0.25 * time_limit:
            break
        t_x = time.perf_counter()
        cset2, done = expand_families(inst, cset, [c for c in cols if not c.exact], p.expand_cap, p.split_cap,
                                      split=time_limit is None or dl.left() >= 0.5 * time_limit)
        if not done:
            break
        expanded += done
        cset = cset2
        model = build_packing(inst, cset)
        params.update(candidates=len(model.cols), relaxed_candidates=sum(not c.exact for c in model.cols),
                      complete=cset.complete)
        params.setdefault("expand_log", []).append((done, len(model.cols), round(time.perf_counter() - t_x, 3)))
    params["expanded"] = expanded
    if best is None or best.schedule is None:
        return result_of_schedule(inst, method, None, bound, t0, solver, version, params,
                      infeasible=ans.infeasible and cset.complete)
    return result_of_schedule(inst, method, best.schedule, bound, t0, solver, version, params)
