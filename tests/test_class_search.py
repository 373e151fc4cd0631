"""The class model solved by the branch and bound (:mod:`formulations.offline.class_search`): a lower bound.

Brute force is the reference (every job permutation × every raw GPU subset). On one node of identical GPUs the
class model is exact, so there the bound must equal the optimum: a search that prunes wrongly, or pools GPUs
wrongly, fails in one direction or the other.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from formulations import brute
from formulations.offline import class_search, lagrangian_bound
from formulations.offline.bnb import BnbParams
from formulations.offline.classes import class_options
from formulations.offline.pipeline import class_resources
from jctlab.generators import offline_instance

RTOL = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def queue(seed: int, jobs: int, **over):
    kw = {"gpus": 4, "nodes": 2, "jobs": jobs, "interarrival_s": [60, 300, 900][seed % 3], "duration_h": (0.1, 2),
          "max_size": 4, "variability": 0.05, "locality_penalty": 1.2, "seed": seed}
    return offline_instance(**{**kw, **over})


def bound(inst, incumbent=math.inf, prices=True):
    params = BnbParams() if prices else BnbParams(prices=None)
    r = class_search.class_bound(inst, incumbent, None, class_resources(inst), params)
    return None if r is None else r.bound


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), nodes=st.sampled_from([1, 2, 3]),
       weighted=st.booleans(), prices=st.booleans())
def test_the_class_bound_never_exceeds_the_optimum(seed, jobs, nodes, weighted, prices):
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes, objective="weighted_jct" if weighted else "mean_jct")
    if weighted:
        inst = inst.replace_jobs([dataclasses.replace(j, weight=1.0 + (i % 3)) for i, j in enumerate(inst.jobs)])
    if not class_search.applies(inst, class_options(inst)):
        return
    lb = bound(inst, prices=prices)
    assert lb is not None
    assert lb <= brute.solve(inst).objective * (1 + RTOL)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 6), gpus=st.sampled_from([2, 3, 4]), prices=st.booleans())
def test_on_one_node_of_identical_gpus_the_class_bound_is_the_optimum(seed, jobs, gpus, prices):
    inst = queue(seed, jobs, gpus=gpus, nodes=1, variability=0.0, max_size=gpus)
    opt = brute.solve(inst).objective
    assert math.isclose(bound(inst, prices=prices), opt, rel_tol=RTOL)
    # pruned at the optimum as the incumbent, it proves the optimum; at a worse one it finds it
    assert math.isclose(bound(inst, incumbent=opt, prices=prices), opt, rel_tol=RTOL)
    assert math.isclose(bound(inst, incumbent=opt * 1.2, prices=prices), opt, rel_tol=RTOL)


def test_a_bare_spread_class_is_not_applicable():
    inst = queue(3, 4)
    opts = class_options(inst)
    bare = [[dataclasses.replace(o, demand={("all",): o.demand[("all",)]}) for o in ol] for ol in opts]
    assert class_search.applies(inst, opts)
    assert not class_search.applies(inst, bare)
    assert not class_search.applies(dataclasses.replace(inst, objective="makespan"), opts)


def test_the_phase_lifts_the_bound_on_a_queue_of_many_allocations():
    """12 jobs of up to 8 GPUs on two nodes of 4 arriving every 5 min (a job has up to 107 GPU subsets: the exact
    search does not apply); the class model's search proves a bound above the time-indexed relaxation's."""
    inst = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=2)
    r = oracle.solve(inst, "milp", time_limit=8, threads=1, seed=0)
    assert "class-search" in [p["phase"] for p in r.params["phases"]]
    lb = bound(inst, r.objective)
    assert lb is not None and lb <= r.objective * (1 + RTOL)
    assert r.lower_bound >= lb * (1 - 1e-6)
    assert lb > lagrangian_bound.lower_bound(inst, params=BnbParams().prices) * 1.01
