"""Entry points ``matching`` and ``exhaustive`` (and the heterogeneity-unaware baseline ``unaware``).

All three solve the ``static`` class (every job starts at 0 on its own GPUs) for ``mean_jct`` or
``weighted_jct``; the returned objective is always the replayed one.

* ``exhaustive``: the optimal scheme — every count category, exactly (:mod:`.exhaustive`). Status
  ``optimal`` when categories are exact (see that module) and the realized schedule attains the DP
  value; the DP value is the lower bound.
* ``matching``: market-clearing prices of GPU types choose each job's category (an ascending
  auction, :func:`.market.type_market`), repair + 1-/2-exchange local search polish it, and workers
  are matched to jobs node by node (:func:`.categories.realize`; ``inner="stable"`` uses many-to-one
  Gale–Shapley on speed preferences instead). Its lower bound is the Lagrangian bound of the
  clearing prices.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import numpy as np

from jctlab import registry
from jctlab.argtypes import Choice, Count, Fairness, MarketStep
from jctlab.errors import InputError
from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

from .categories import Menu, build_menu, realize
from .exhaustive import dp_optimum
from .market import dual_bound, type_market
from .search import beam, polish, reference
from .stable import gale_shapley, speed_preferences

VERSION = "1"


def check_static(inst: Instance, method: str) -> None:
    if inst.problem != "static":
        raise InputError(inst.name, "problem",
                         f"method {method} solves static instances (got {inst.problem}); "
                         f"use `jctlab simulate --policy {method}` for online placement")
    if inst.objective not in ("mean_jct", "weighted_jct"):
        raise InputError(inst.name, "objective", f"method {method} minimizes mean_jct or weighted_jct, "
                         f"not {inst.objective}")


def objective_menu(inst: Instance, **kw: Any) -> Menu:
    """The menu with durations scaled so that mean(D[a, o_a]) is the instance objective."""
    menu = build_menu(inst, **kw)
    if inst.objective == "weighted_jct":
        w = np.array([inst.jobs[j].weight for j in menu.jobs], dtype=float)
        menu.D = menu.D * (w * len(w) / w.sum())[:, None]
    return menu


def bound_valid(inst: Instance) -> bool:
    """Whether the aggregate menu relaxation bounds the static optimum (see :mod:`.exhaustive`)."""
    cl = inst.cluster
    return (not any(g.variability for g in cl.gpus)
            and not any(j.ps is not None or j.cpu_mem is not None for j in inst.jobs))


def schedule_of(inst: Instance, method: str, allocs_by_job: dict[int, Allocation]) -> Schedule:
    segs = tuple(Segment(job.name, 0.0, None, allocs_by_job[i]) for i, job in enumerate(inst.jobs))
    return Schedule(inst.name, method, segs)


def finish(inst: Instance, method: str, allocs_by_job: dict[int, Allocation], t0: float,
           lower_bound: float | None, exact: bool, params: dict[str, Any], solver: str) -> Result:
    """Replay the schedule; status ``optimal`` only when ``exact`` and the objective meets the bound."""
    sched = schedule_of(inst, method, allocs_by_job)
    rep = replay(inst, sched, with_metrics=False)
    if not rep.valid:  # a bug of ours: say so rather than claim anything
        return Result(None, None, lower_bound, SolveStatus.ERROR, time.perf_counter() - t0, solver, VERSION,
                      dict(params, error=rep.error))
    obj = float(rep.objective)
    if lower_bound is not None and lower_bound > obj:
        lower_bound = obj                         # float noise only: the bound is ≤ obj by construction
    status = SolveStatus.FEASIBLE
    if exact and lower_bound is not None and obj <= lower_bound * (1 + 1e-9) + 1e-9:
        status = SolveStatus.OPTIMAL
    return Result(sched, obj, lower_bound, status, time.perf_counter() - t0, solver, VERSION, params)


def realize_choice(inst: Instance, menu: Menu, choice) -> tuple[dict[int, Allocation], bool]:
    allocs, ok = realize(menu, choice)
    return {j: a for j, a in zip(menu.jobs, allocs)}, ok  # type: ignore[misc]


def market_failure(e: Exception, t0: float, solver: str) -> Result:
    """The Result when the type market fails: ``infeasible`` with its counting proof (ValueError),
    ``error`` when prices diverged (RuntimeError: no placement found, no proof either way)."""
    status = SolveStatus.INFEASIBLE if isinstance(e, ValueError) else SolveStatus.ERROR
    return Result(None, None, None, status, time.perf_counter() - t0, solver, VERSION, {"error": str(e)})


def price_bound(inst: Instance, menu: Menu, lam: np.ndarray) -> float | None:
    """The Lagrangian bound of prices λ on Σ durations (mean × J), or None where the aggregate menu
    relaxation does not bound the instance (:func:`bound_valid`)."""
    return dual_bound(menu.D, menu.C.astype(float), menu.cap, lam) if bound_valid(inst) else None


def meets_bound(menu: Menu, choice, lb_sum: float | None) -> bool:
    """Whether ``choice`` (aggregate-feasible) attains a valid lower bound ``lb_sum`` of Σ durations:
    then no other choice is better and searching further is wasted work."""
    return lb_sum is not None and menu.value(choice) <= lb_sum * (1 + 1e-12)


def market_choice(menu: Menu, rel_step: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    lam, choice, _ = type_market(menu.D, menu.C, menu.cap, rel_step=rel_step)
    return lam, choice


# ----------------------------------------------------------------------------- entry points


def exhaustive(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
               hint: Schedule | None = None) -> Result:
    """Every category, each solved exactly: the optimum where categories are exact."""
    t0 = time.perf_counter()
    check_static(inst, "exhaustive")
    menu = objective_menu(inst)
    deadline = None if time_limit is None else t0 + time_limit
    try:
        choice, value = dp_optimum(menu, deadline=deadline)
    except (TimeoutError, MemoryError) as e:
        return Result(None, None, None, SolveStatus.TIMEOUT_NO_SOLUTION, time.perf_counter() - t0, "matching/exhaustive-dp",
                      VERSION, {"error": str(e)})
    if choice is None:
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, "matching/exhaustive-dp", VERSION, {})
    allocs, ok = realize_choice(inst, menu, choice)
    valid = bound_valid(inst)
    lb = value / menu.J if valid else None
    exact = valid and menu.exact_packing and ok and not inst.cluster.has_interference
    return finish(inst, "exhaustive", allocs, t0, lb, exact,
                  {"states": int(np.prod(menu.cap + 1)), "packing_ok": ok, "not_exact": menu.reasons},
                  "matching/exhaustive-dp")


def matching(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
             hint: Schedule | None = None, inner: Annotated[str, Choice(("market", "stable"))] = "market",
             pairs: bool = True, width: Count = 32, samples: Count = 0, fairness: Fairness = 0.0,
             market_step: MarketStep = 0.03, fast: bool = True) -> Result:
    """Market-clearing type prices choose categories; matching assigns workers (deterministic).

    ``samples``/``fairness`` are accepted for a uniform signature: ``samples > 0`` delegates to the
    ``sampling`` method (found through the method registry: the sampling package builds on this one);
    ``fairness`` weights Jain's index of slowdowns in the local search.
    ``market_step``: the auction's minimum relative price raise; ``fast``: capped polish (one round
    of pair moves); ``market_step=0.01, fast=False`` is the earlier, slower setting."""
    if samples and samples > 0:
        sampling = registry.method("sampling")
        if sampling is None:
            raise InputError("command line", "--samples", "the sampling method is not installed")
        return sampling(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, samples=samples,
                        fairness=fairness)
    t0 = time.perf_counter()
    check_static(inst, "matching")
    if inner not in ("market", "stable"):
        raise InputError("command line", "--inner", "must be market or stable")
    menu = objective_menu(inst)
    try:
        lam, choice = market_choice(menu, market_step)
    except (ValueError, RuntimeError) as e:
        return market_failure(e, t0, "matching/market")
    ref = None
    if fairness > 0:
        ref = reference(menu)
    lb_sum = price_bound(inst, menu, lam)
    # exact categories and a cleared choice that attains the bound: optimal, nothing to search
    certified = fairness <= 0 and menu.exact_packing and meets_bound(menu, choice, lb_sum)
    if width > 0 and fairness <= 0 and not certified:
        b = beam(menu, lam, width)
        if b is not None and menu.value(b) < menu.value(choice):
            choice = b
    if not certified:
        choice = polish(menu, choice, fairness=fairness, ref=ref, pairs=pairs,
                        **(dict(rounds=1, top=3, sweeps=2) if fast else {}))
    lb = None if lb_sum is None else lb_sum / menu.J
    if inner == "stable":
        allocs = stable_allocs(inst, menu, choice)
        ok = False
    else:
        allocs, ok = realize_choice(inst, menu, choice)
    return finish(inst, "matching", allocs, t0, lb, lb_sum is not None,
                  {"prices": [float(x) for x in lam], "inner": inner, "width": width}, "matching/market")


def stable_allocs(inst: Instance, menu: Menu, choice) -> dict[int, Allocation]:
    """Workers by many-to-one Gale–Shapley with quotas = the category's worker counts."""
    gpus = [g for per in menu.free.values() for ids in per.values() for g in ids]
    quotas = list(menu.sizes(choice))
    prefs, rank, _ = speed_preferences(inst, menu.jobs, gpus)
    match = gale_shapley(prefs, rank, quotas)
    out = {}
    for a, gs in enumerate(match):
        if len(gs) != quotas[a]:
            raise ValueError("stable matching left a job short of workers")
        out[menu.jobs[a]] = Allocation(tuple(gpus[k] for k in sorted(gs)))
    return out


def unaware(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
            hint: Schedule | None = None) -> Result:
    """Heterogeneity-unaware baseline: an equal GPU count per job (largest allowed size ≤ G/J), GPUs
    taken first-fit in cluster order (one node when possible), blind to GPU types."""
    t0 = time.perf_counter()
    check_static(inst, "unaware")
    cl = inst.cluster
    G, J = len(cl.gpus), len(inst.jobs)
    share = max(1, G // J)
    sizes = [max([n for n in j.sizes if n <= share] or [min(j.sizes)]) for j in inst.jobs]
    while sum(sizes) > G:  # shrink the largest first
        a = max(range(J), key=lambda i: (sizes[i], -i))
        smaller = [n for n in inst.jobs[a].sizes if n < sizes[a]]
        if not smaller:
            return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, "matching/unaware", VERSION, {})
        sizes[a] = max(smaller)
    free = {n.name: [g.id for g in n.gpus] for n in cl.nodes}
    allocs: dict[int, Allocation] = {}
    for i, job in enumerate(inst.jobs):
        n = sizes[i]
        ok = {nm: [g for g in ids if job.can_use(cl.gpu[g].type)] for nm, ids in free.items()}
        node = next((nm for nm, ids in ok.items() if len(ids) >= n), None)
        gpus = ok[node][:n] if node is not None else [g for ids in ok.values() for g in ids][:n]
        if len(gpus) < n:
            return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, "matching/unaware", VERSION, {})
        for g in gpus:
            free[cl.gpu[g].node].remove(g)
        allocs[i] = Allocation(tuple(gpus), ((cl.gpu[gpus[0]].node,) if job.ps is not None else ()))
    return finish(inst, "unaware", allocs, t0, None, False, {"sizes": sizes}, "matching/unaware")
