"""Lagrangian prices at the branch and bound's nodes (:mod:`formulations.offline.node_prices`).

Any multipliers ≥ 0 give a valid node bound, so the search that prunes with them must still end at the
brute-force optimum, whatever the multipliers: random ones, large ones, the subgradient's. Brute force shares no
code with either (every job permutation × every raw GPU subset).
"""

from __future__ import annotations

import bisect
import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.budget import Budget
from formulations.offline import bnb as offline_bnb
from formulations.offline import lagrangian_bound
from formulations.offline.concrete import concrete_options
from formulations.offline.lagrangian_bound import LagrangianParams
from formulations.offline.node_prices import NodePrices
from formulations.schedules import objective_weights
from jctlab.generators import offline_instance

from .oracle_offline_helpers import tiny

RTOL = 1e-6
SMALL = LagrangianParams(fine_slots=40, max_slots=80, steps=60)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def queue(seed: int, jobs: int, **over):
    kw = {"gpus": 2 + seed % 3, "nodes": 1 + seed % 2, "jobs": jobs, "interarrival_s": [60, 300, 900][seed % 3],
          "duration_h": (0.1, 2), "max_size": 4, "variability": 0.05, "locality_penalty": 1.2, "seed": seed}
    return offline_instance(**{**kw, **over})


def priced_search(inst, lam_of) -> tuple[offline_bnb.Search, lagrangian_bound.Multipliers]:
    """A search over ``inst`` pruning with the multipliers ``lam_of(λ*)``, λ* the subgradient's (steered by the
    optimum)."""
    concrete, complete = concrete_options(inst)
    assert complete
    options = lagrangian_bound.per_gpu_options(inst, concrete)
    rel = lagrangian_bound.relaxation(inst, SMALL, options)
    best = lagrangian_bound.multipliers(inst, target=brute.solve(inst).objective, params=SMALL, options=options)
    m = rel.priced(lam_of(best.lam))
    prices = NodePrices(m, [j.arrival for j in inst.jobs])
    return offline_bnb.Search(inst, concrete, prices), m


def searched_optimum(inst, search, ref: float) -> float:
    """The search's optimum when only the optimum beats its incumbent: a node bound above the optimum anywhere on
    an optimal schedule's branch prunes every optimal schedule, and the search ends with none."""
    search.value = (ref + offset(inst)) * (1 + 1e-6)
    assert search.resume(Budget(None))
    assert search.best is not None, "every optimal schedule was pruned"
    return search.value - offset(inst)


def offset(inst) -> float:
    return sum(w * j.arrival for w, j in zip(objective_weights(inst), inst.jobs))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(3, 5), scale=st.sampled_from([0.0, 0.5, 1.0, 1.5, 3.0]),
       noise=st.sampled_from([0.0, 0.1, 1.0, 10.0]), weighted=st.booleans())
def test_any_multipliers_keep_the_optimum(seed, jobs, scale, noise, weighted):
    """λ* scaled, and random noise on it: every λ ≥ 0 is a valid price."""
    inst = queue(seed, jobs, objective="weighted_jct" if weighted else "mean_jct")
    if weighted:
        inst = inst.replace_jobs([dataclasses.replace(j, weight=1.0 + (i % 3)) for i, j in enumerate(inst.jobs)])
    rng = np.random.default_rng(seed)
    search, m = priced_search(inst, lambda lam: scale * lam + noise * float(lam.mean() + 1e-3) * rng.random(lam.shape)
                              * (rng.random(lam.shape) < 0.2))
    ref = brute.solve(inst).objective
    assert math.isclose(searched_optimum(inst, search, ref), ref, rel_tol=RTOL)
    # the bound the search starts from is at most the optimum and at least L(λ)
    assert m.value / m.relaxation.w.sum() <= ref * (1 + RTOL)
    assert m.value / m.relaxation.w.sum() - RTOL * ref <= search.root_bound - offset(inst) <= ref * (1 + RTOL)


@pytest.mark.parametrize("seed", range(8))
def test_the_subgradients_multipliers_keep_the_optimum_with_cpus_and_servers(seed):
    inst = tiny(seed)   # locality, variability, elastic sizes, CPU/memory levels, parameter servers
    concrete, complete = concrete_options(inst)
    if not complete or offline_bnb.not_applicable(inst):
        pytest.skip("not a bnb instance")
    m = lagrangian_bound.multipliers(inst, params=SMALL, options=lagrangian_bound.per_gpu_options(inst, concrete))
    search = offline_bnb.Search(inst, concrete, NodePrices(m, [j.arrival for j in inst.jobs]))
    ref = brute.solve(inst).objective
    assert math.isclose(searched_optimum(inst, search, ref), ref, rel_tol=RTOL)


def test_prices_prune_most_of_a_queue_and_agree_with_the_plain_search():
    inst = queue(1, 8, gpus=4, nodes=2, interarrival_s=300)
    plain = offline_bnb.solve(inst, params=offline_bnb.BnbParams(prices=None))
    priced = offline_bnb.solve(inst)
    assert plain.status == priced.status == "optimal"
    assert math.isclose(plain.objective, priced.objective, rel_tol=RTOL)
    assert priced.params["nodes"] * 2 < plain.params["nodes"]


def test_an_unfinished_search_reports_the_multipliers_bound():
    inst = offline_instance(gpus=4, nodes=2, jobs=10, interarrival_s=300, duration_h=(0.1, 2), max_size=4,
                            variability=0.05, locality_penalty=1.2, seed=1)
    runs = {}
    for name, params in [("priced", offline_bnb.BnbParams()), ("plain", offline_bnb.BnbParams(prices=None))]:
        run = offline_bnb.Run.start(inst, None, 0.0, None, 0, params)
        assert not run.resume(Budget(0.0))      # stopped at its first deadline check
        runs[name] = run
    m = runs["priced"].search.prices
    bound = runs["priced"].result().lower_bound
    assert bound >= m.value / m.norm * (1 - 1e-6)
    assert bound > runs["plain"].result().lower_bound * 1.02
    assert bound <= offline_bnb.solve(inst).objective * (1 + RTOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(3, 6), noise=st.sampled_from([0.0, 1.0, 10.0]),
       picks=st.lists(st.integers(0, 10_000), min_size=0, max_size=3))
def test_the_node_bound_sums_the_module_docstrings_terms(seed, jobs, noise, picks):
    """The node bound (summed as arrays over a node's children) against its terms summed one by one: the placed
    jobs' value and occupancy from the slot of t on, less the capacities' prices there, plus per job left the least
    over its children of the priced completion or a later slot's best; lowered by 1e-9 of the magnitudes, never
    more. And the children themselves: each starts at the latest of its job's arrival, t and its GPUs' free times
    (no CPU/memory binds here)."""
    inst = queue(seed, jobs)
    rng = np.random.default_rng(seed)
    search, _ = priced_search(inst, lambda lam: lam + noise * float(lam.mean() + 1e-3) * rng.random(lam.shape))
    t, val, placed = 0.0, 0.0, 0
    for k in picks[:jobs - 1]:          # a node some placements down
        cand = search._expand(t, val, math.inf, placed)
        c, s, j, ch = cand[k % len(cand)]
        search._apply(j, s, c, ch)
        t, val, placed = s, val + search.w[j] * c, placed | (1 << j)
    kids = search._evaluate(t, placed)
    p = search.prices
    ut = max(0, bisect.bisect_right(p.tau, t) - 1)
    total = val * p.norm - p.cap_after[ut]
    scale = abs(val * p.norm) + p.cap_after[ut]     # the magnitudes summed, which the bound is lowered by 1e-9 of
    for key, u, e in search._occupied:
        if e > ut:
            total += p.prefix[key][e] - p.prefix[key][max(u, ut)]
            scale += p.prefix[key][e] - p.prefix[key][max(u, ut)]
    least: dict[int, float] = {}
    for r, s, c in zip(kids.left.rows.tolist(), kids.start.tolist(), kids.completion.tolist()):
        ch = search._rows.choice[r]
        j = ch.option.job
        assert s == max([inst.jobs[j].arrival, t] + [search.free[g] for g in ch.gpus])
        u = bisect.bisect_right(p.tau, s) - 1
        priced = min(p.weight[ch.index] * c + p.occ[ch.index, u], p.best[ch.index, u + 1])
        least[j] = min(least.get(j, math.inf), priced)
    assert sorted(least) == sorted(search.left)
    total += sum(least.values())
    scale += sum(least.values())
    node = p.bound(t, val, search._occupied, kids.left.index, kids.completion, kids.start, kids.left.groups)
    assert math.isclose(node, (total - 1e-9 * scale) / p.norm, rel_tol=1e-12, abs_tol=1e-9 * scale / p.norm)
    assert node <= total / p.norm
