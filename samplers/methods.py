"""Entry point ``sampling``: sampled size categories, each solved inside, best kept (then polished).

``sampling(inst, samples=N, fairness=f, sampler="importance"|"uniform", temperature=τ, seed=K)``:

1. market-clearing GPU-type prices λ (:func:`matching.market.type_market`);
2. N i.i.d. size categories from the sampler (seeded; same seed → same result), each solved inside
   (:func:`samplers.core.inner`: beam search restricted to the category, 1-exchange);
3. the best by score = mean JCT · (1 + f · (1 − Jain's index of slowdowns)) is kept, and, with
   ``polish=True``, improved by 1-/2-exchange local search across categories (never worsens the score,
   so the sampling guarantee of :mod:`samplers.core` still holds for the returned schedule).

The lower bound is the Lagrangian bound of λ (valid without variability, PS and cpu_mem).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from jctlab.errors import InputError
from jctlab.model import Schedule
from jctlab.result import Result
from matching.methods import VERSION, _realize, bound_valid, check_static, finish, market_choice, objective_menu
from matching.market import dual_bound
from matching.search import polish as polish_fn
from matching.search import reference, score

from .core import ImportanceSampler, UniformSampler, guarantee, inner


def sample_best(menu, lam, samples: int, seed: int, fairness: float = 0.0, sampler: str = "importance",
                temperature: float = 0.05, width: int = 16, ref=None, deadline: float | None = None
                ) -> tuple[np.ndarray | None, dict[str, Any]]:
    """Draw ``samples`` feasible categories, solve each inside, return the best choice and stats."""
    if sampler == "uniform":
        smp = UniformSampler(menu, lam)
    elif sampler == "importance":
        smp = ImportanceSampler(menu, lam, temperature)
    else:
        raise InputError("command line", "--sampler", "must be importance or uniform")
    rng = np.random.default_rng(seed)
    best, best_sc, drawn, accepted = None, np.inf, 0, 0
    seen: dict[tuple, float] = {}
    max_draws = 20 * samples + 20
    while accepted < samples and drawn < max_draws:
        if deadline is not None and time.perf_counter() > deadline and best is not None:
            break
        drawn += 1
        sizes = smp.draw(rng)
        key = tuple(int(x) for x in sizes)
        if key in seen:  # same category, same deterministic inner answer: counts, no work
            accepted += 1
            continue
        ch = inner(menu, lam, sizes, width, fairness, ref)
        if ch is None:
            continue
        accepted += 1
        sc = score(menu.duration(ch), ref, fairness)
        seen[key] = sc
        if sc < best_sc:
            best, best_sc = ch, sc
    return best, {"drawn": drawn, "accepted": accepted, "distinct": len(seen)}


def sampling(inst, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
             hint: Schedule | None = None, samples: int = 32, fairness: float = 0.0,
             sampler: str = "importance", temperature: float = 0.05, width: int = 16,
             polish: bool = True) -> Result:
    t0 = time.perf_counter()
    check_static(inst, "sampling")
    if samples < 1:
        raise InputError("command line", "--samples", "must be >= 1")
    if fairness < 0:
        raise InputError("command line", "--fairness", "must be >= 0")
    menu = objective_menu(inst)
    try:
        lam, _ = market_choice(menu)
    except ValueError as e:
        return Result(None, None, None, "infeasible", time.perf_counter() - t0, "samplers/sampling", VERSION,
                      {"error": str(e)})
    ref = reference(menu) if fairness > 0 else None
    deadline = None if time_limit is None else t0 + time_limit
    best, stats = sample_best(menu, lam, samples, seed, fairness, sampler, temperature, width, ref, deadline)
    if best is None:
        return Result(None, None, None, "timeout_no_solution", time.perf_counter() - t0, "samplers/sampling",
                      VERSION, stats)
    if polish:
        best = polish_fn(menu, best, fairness=fairness, ref=ref)
    valid = bound_valid(inst)
    lb = dual_bound(menu.D, menu.C.astype(float), menu.cap, lam) / menu.J if valid else None
    allocs, _ = _realize(inst, menu, best)
    params = dict(stats, samples=samples, sampler=sampler, fairness=fairness, seed=seed,
                  guarantee_eps05=guarantee(samples, 0.05))
    return finish(inst, "sampling", allocs, t0, lb, False, params, f"samplers/{sampler}")
