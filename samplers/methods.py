"""Entry point ``sampling``: sampled size categories, each solved inside, best kept (then polished).

``sampling(inst, samples=N, fairness=f, sampler="importance"|"uniform", temperature=τ, seed=K)``:

1. market-clearing GPU-type prices λ (:func:`matching.market.type_market`);
2. N i.i.d. size categories from the sampler (seeded; same seed → same result), each solved inside
   (default ``inner="batch"``: all distinct categories at once, :func:`samplers.core.inner_batch`;
   ``inner="beam"``: :func:`samplers.core.inner`, beam search restricted to the category, 1-exchange);
3. the best by score = mean JCT · (1 + f · (1 − Jain's index of slowdowns)) is kept (the batch path
   also offers the market's cleared choice and one beam search over all categories as candidates:
   they can only improve the best), and, with ``polish=True``, improved by 1-/2-exchange local search
   across categories (never worsens the score, so the sampling guarantee of :mod:`samplers.core`
   still holds for the returned schedule).

The lower bound is the Lagrangian bound of λ (valid without variability, PS and cpu_mem).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import numpy as np

from jctlab.argtypes import Choice, Count, Fairness, MarketStep
from jctlab.errors import InputError
from jctlab.limits import Range
from jctlab.model import Schedule
from jctlab.result import Result, SolveStatus
from matching.methods import (VERSION, check_static, finish, market_choice, market_failure, meets_bound,
                              objective_menu, price_bound, realize_choice)
from matching.search import beam as beam_fn
from matching.search import polish as polish_fn
from matching.search import reference, score, scores

from .core import ImportanceSampler, UniformSampler, draw_many, guarantee, inner, inner_batch


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


def sample_batch(menu, lam, samples: int, seed: int, fairness: float = 0.0, sampler: str = "importance",
                 temperature: float = 0.05, ref=None, sweeps: int = 1, deadline: float | None = None
                 ) -> tuple[np.ndarray | None, dict[str, Any]]:
    """:func:`sample_best` vectorized: ``samples`` categories drawn at once (exact draws of P given
    Σ sizes ≤ #GPUs), distinct ones solved together by :func:`samplers.core.inner_batch` (cheapest
    option of each size at the prices, repair, 1-exchange); infeasible draws are redrawn, in batches.
    Equal scores keep the category drawn first."""
    smp = _sampler(menu, lam, sampler, temperature)
    rng = np.random.default_rng(seed)
    best, best_sc, drawn, accepted = None, np.inf, 0, 0
    seen: dict[bytes, bool] = {}                  # category -> its inner problem is feasible
    max_draws = 20 * samples + 20
    while accepted < samples and drawn < max_draws:
        if deadline is not None and time.perf_counter() > deadline and best is not None:
            break
        k = min(samples - accepted, max_draws - drawn)
        cats = draw_many(smp, rng, k)
        drawn += k
        keys = [row.tobytes() for row in cats]
        todo: dict[bytes, int] = {}               # a new category -> its first draw
        for i, key in enumerate(keys):
            if key not in seen and key not in todo:
                todo[key] = i
        if todo:
            ch = inner_batch(menu, lam, cats[list(todo.values())], sweeps)
            ok = ch[:, 0] >= 0
            seen.update(zip(todo, ok.tolist()))
            if ok.any():
                sc = scores(menu.D[np.arange(menu.J), ch[ok]], ref, fairness)
                i = int(np.argmin(sc))
                if sc[i] < best_sc:
                    best, best_sc = ch[ok][i], float(sc[i])
        accepted += sum(seen[key] for key in keys)
    return best, {"drawn": drawn, "accepted": accepted, "distinct": len(seen)}


def _sampler(menu, lam, sampler: str, temperature: float):
    if sampler == "uniform":
        return UniformSampler(menu, lam)
    if sampler == "importance":
        return ImportanceSampler(menu, lam, temperature)
    raise InputError("command line", "--sampler", "must be importance or uniform")


def sampling(inst, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
             hint: Schedule | None = None, samples: Annotated[int, Range(1, 1_000_000, integer=True)] = 32,
             fairness: Fairness = 0.0, sampler: Annotated[str, Choice(("importance", "uniform"))] = "importance",
             temperature: Annotated[float, Range(0, 1_000, lo_open=True)] = 0.05, width: Count = 16,
             polish: bool = True, inner: Annotated[str, Choice(("batch", "beam"))] = "batch",
             market_step: MarketStep = 0.03, sweeps: Count = 0,
             beam_cap: Annotated[int, Range(1, 1_000_000, integer=True)] = 8, pair_sweeps: Count = 1) -> Result:
    """``inner="batch"`` (default): the distinct sampled categories are solved together, vectorized
    (:func:`sample_batch`: cheapest option of each size at the prices, repair, ``sweeps`` rounds of
    1-exchange); the market's own cleared choice and (``width > 0``) a beam search of width
    ``min(width, beam_cap)`` over all categories are extra candidates; the polish is capped (one
    round of pair moves with 3 candidates per job and ``pair_sweeps`` sweeps). ``inner="beam"``:
    every category by its own beam search of ``width`` and the full polish (the earlier, slower
    path; also used whenever ``fairness > 0``). ``market_step``: the price auction's minimum
    relative raise (coarser = fewer steps, looser prices and bound; 0.01 was the earlier value)."""
    t0 = time.perf_counter()
    check_static(inst, "sampling")
    if samples < 1:
        raise InputError("command line", "--samples", "must be >= 1")
    if fairness < 0:
        raise InputError("command line", "--fairness", "must be >= 0")
    if inner not in ("batch", "beam"):
        raise InputError("command line", "--inner", "must be batch or beam")
    if not market_step > 0:
        raise InputError("command line", "--market-step", "must be > 0")
    menu = objective_menu(inst)
    try:
        lam, market_ch = market_choice(menu, market_step)
    except (ValueError, RuntimeError) as e:
        return market_failure(e, t0, "samplers/sampling")
    ref = reference(menu) if fairness > 0 else None
    deadline = None if time_limit is None else t0 + time_limit
    lb_sum = price_bound(inst, menu, lam)
    fast = inner == "batch" and fairness <= 0
    if fairness <= 0 and menu.exact_packing and meets_bound(menu, market_ch, lb_sum):
        # categories are exact and the market's cleared choice attains the Lagrangian bound: it is
        # optimal, so no sample can beat it
        best, stats, polish = np.asarray(market_ch), {"drawn": 0, "accepted": 0, "distinct": 0,
                                                     "certified_by": "market"}, False
    elif fast:
        best, stats = sample_batch(menu, lam, samples, seed, fairness, sampler, temperature, ref, sweeps,
                                   deadline=deadline)
        # extra candidates: the market's own (cleared, hence feasible) choice, and with width > 0 a
        # beam search over all categories ranked at the prices (skipped when the best sample
        # already attains the bound)
        extra = [np.asarray(market_ch)]
        if width > 0 and not (best is not None and meets_bound(menu, best, lb_sum)):
            extra.append(beam_fn(menu, lam, min(width, beam_cap)))
        for b in extra:
            if b is not None and menu.feasible(b) and (best is None or menu.value(b) < menu.value(best)):
                best = b
    else:
        best, stats = sample_best(menu, lam, samples, seed, fairness, sampler, temperature, width, ref, deadline)
    if best is None:
        return Result(None, None, None, SolveStatus.TIMEOUT_NO_SOLUTION, time.perf_counter() - t0, "samplers/sampling",
                      VERSION, stats)
    if polish and not (fairness <= 0 and meets_bound(menu, best, lb_sum)):
        best = polish_fn(menu, best, fairness=fairness, ref=ref, **(dict(rounds=1, top=3, sweeps=pair_sweeps) if fast else {}))
    lb = None if lb_sum is None else lb_sum / menu.J
    allocs, _ = realize_choice(inst, menu, best)
    params = dict(stats, samples=samples, sampler=sampler, fairness=fairness, seed=seed, inner=inner,
                  guarantee_eps05=guarantee(samples, 0.05))
    return finish(inst, "sampling", allocs, t0, lb, lb_sum is not None, params, f"samplers/{sampler}")
