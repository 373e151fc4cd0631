"""The class model solved by the branch and bound (:mod:`formulations.offline.class_search`): a lower bound.

Brute force is the reference (every job permutation × every raw GPU subset). On one node of identical GPUs the
class model is exact, so there the bound must equal the optimum: a search that prunes wrongly, or pools GPUs
wrongly, fails in one direction or the other.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import oracle
from formulations import brute
from formulations.offline import bnb, class_search, lagrangian_bound
from formulations.offline.bnb import BnbParams, arrival_offset
from formulations.offline.classes import class_options
from jctlab.generators import offline_instance

from .oracle_offline_helpers import StopAfter

RTOL = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def queue(seed: int, jobs: int, **over):
    kw = {"gpus": 4, "nodes": 2, "jobs": jobs, "interarrival_s": [60, 300, 900][seed % 3], "duration_h": (0.1, 2),
          "max_size": 4, "variability": 0.05, "locality_penalty": 1.2, "seed": seed}
    return offline_instance(**{**kw, **over})


def bound(inst, incumbent=math.inf, prices=True):
    params = BnbParams() if prices else BnbParams(prices=None)
    r = class_search.class_bound(inst, incumbent, None, params)
    return None if r is None else r.bound


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), nodes=st.sampled_from([1, 2, 3]),
       weighted=st.booleans(), prices=st.booleans(), types=st.sampled_from([("v100", "p100", "k80"), ("v100",)]))
def test_the_class_bound_never_exceeds_the_optimum(seed, jobs, nodes, weighted, prices, types):
    """Mixed clusters (mostly a pool per node) and clusters of identical nodes (one pool of several nodes)."""
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes, types=types,
                 objective="weighted_jct" if weighted else "mean_jct")
    if weighted:
        inst = inst.replace_jobs([dataclasses.replace(j, weight=1.0 + (i % 3)) for i, j in enumerate(inst.jobs)])
    if not class_search.applies(inst, class_options(inst)):
        return
    lb = bound(inst, prices=prices)
    assert lb is not None
    assert lb <= brute.solve(inst).objective * (1 + RTOL)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 3), cpu_mem=st.booleans())
def test_with_parameter_servers_and_cpu_levels_the_bound_stays_below_the_optimum(seed, jobs, cpu_mem):
    """The search keeps GPU counts only; its prices must not price the CPUs a parameter server binds."""
    inst = queue(seed, jobs, ps=True, cpu_mem=cpu_mem)
    if not class_search.applies(inst, class_options(inst)):
        return
    opt = brute.solve(inst).objective
    if opt is None:
        return
    assert bound(inst) <= opt * (1 + RTOL)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), nodes=st.sampled_from([2, 3]), prices=st.booleans())
def test_single_gpu_jobs_on_identical_nodes_the_pooled_bound_is_the_optimum(seed, jobs, nodes, prices):
    """One pool of several identical nodes: for jobs of one GPU the node does not matter, so the pooled model is
    exact; a pool of the wrong size, or GPUs counted on the wrong pool, fails it one way or the other."""
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes, types=("v100",), variability=0.0, max_size=1)
    model = class_search.pooled_model(inst, class_options(inst))
    assert model.pools == [("set", tuple(nd.name for nd in inst.cluster.nodes))]
    assert model.sizes[model.pools[0]] == 2 * nodes
    opt = brute.solve(inst).objective
    assert math.isclose(bound(inst, prices=prices), opt, rel_tol=RTOL)


def test_a_pool_per_node_keeps_the_class_model():
    """Where no two nodes share their GPU types, each node is a pool and each class option keeps its node counts
    (the class model itself); on identical nodes a spread pattern's count moves onto their common pool."""
    mixed = queue(5, 6, gpus=6, nodes=3, types=("v100", "p100", "k80"))
    assert len({tuple(sorted({g.type for g in nd.gpus})) for nd in mixed.cluster.nodes}) == 3
    opts = class_options(mixed)
    model = class_search.pooled_model(mixed, opts)
    assert model.pools == [("n", nd.name) for nd in mixed.cluster.nodes]
    for pl, ol in zip(model.options, model.origin):
        for p, o in zip(pl, ol):
            assert p.dur == o.dur and p.demand == {r: v for r, v in o.demand.items() if r[0] in ("n", "all")}
    assert sorted(len(ol) for ol in model.options) == sorted(len({tuple(sorted(
        (r, v) for r, v in o.demand.items() if r[0] in ("n", "all"))) for o in ol}) for ol in opts)
    same = queue(5, 6, gpus=8, nodes=2, types=("v100",))
    sopts = class_options(same)
    assert not all(sum(v for r, v in o.demand.items() if r[0] == "n") == o.demand[("all",)]
                   for ol in sopts for o in ol)     # spread patterns name a group count, no node counts
    assert class_search.applies(same, sopts)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 6), gpus=st.sampled_from([2, 3, 4]), prices=st.booleans())
def test_on_one_node_of_identical_gpus_the_class_bound_is_the_optimum(seed, jobs, gpus, prices):
    assume(jobs + gpus <= 9)    # brute force of 6 jobs on 4 GPUs takes up to a minute each (5 on 4: under 2 s)
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


def test_on_identical_nodes_the_phase_lifts_the_bound():
    """12 jobs on two nodes of four V100s (one pool of eight): before the pools the search did not apply
    there; the pooled bound is above the time-indexed relaxation's and below the schedule `milp` finds."""
    inst = offline_instance(gpus=8, nodes=2, jobs=12, types=("v100",), interarrival_s=300, duration_h=(0.1, 2),
                            max_size=8, variability=0.05, locality_penalty=1.2, seed=3)
    r = oracle.solve(inst, "milp", time_limit=8, threads=1, seed=0)
    lb = bound(inst, r.objective)
    assert lb is not None and lb <= r.objective * (1 + RTOL)
    assert r.lower_bound >= lb * (1 - 1e-6)
    assert lb > lagrangian_bound.lower_bound(inst, params=BnbParams().prices) * 1.03


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


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), jobs=st.integers(3, 4), nodes=st.sampled_from([1, 2, 3]), stop=st.integers(1, 40),
       types=st.sampled_from([("v100", "p100", "k80"), ("v100",)]))
def test_a_stopped_class_search_bounds_the_optimum_by_its_open_nodes(monkeypatch, seed, jobs, nodes, stop, types):
    """Stopped anywhere (with no incumbent, so that it has open nodes), the pooled search's bound over its open
    nodes is at least its root's and never above the optimum."""
    monkeypatch.setattr(bnb, "CHECK_EVERY", 1)
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes, types=types)
    model = class_search.pooled_model(inst, class_options(inst))
    if not model.applies():
        return
    search = class_search.ClassSearch(inst, model)
    search.resume(StopAfter(stop))
    lb = search.open_bound() - arrival_offset(inst)
    assert search.root_bound - arrival_offset(inst) <= lb * (1 + 1e-12) + 1e-9
    assert lb <= brute.solve(inst).objective * (1 + RTOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(3, 6), nodes=st.sampled_from([1, 2, 3]),
       picks=st.lists(st.integers(0, 10_000), min_size=0, max_size=4))
def test_each_child_starts_once_its_job_has_arrived_and_each_pool_has_its_gpus_free(seed, jobs, nodes, picks):
    """The search's children (computed as arrays) against the rule itself: a child starts at the latest of its
    job's arrival, the node's last start and, on each pool it needs k GPUs of, the k-th earliest free time
    there; every job left has its choices, each once. Checked some placements down, and again after the last
    one is undone."""
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes)
    model = class_search.pooled_model(inst, class_options(inst))
    assume(model.applies())
    search = class_search.ClassSearch(inst, model)
    path = [(0.0, 0.0, 0, None)]       # (last start, value so far, jobs placed, the placement that led there)
    for k in picks[:jobs - 1]:
        t, val, placed, _ = path[-1]
        cand = search._expand(t, val, math.inf, placed)
        c, s, j, ch = cand[k % len(cand)]
        path.append((s, val + search.w[j] * c, placed | (1 << j), search._apply(j, s, c, ch)))
    t, _, placed, undo = path[-1]
    children_follow_the_rule(inst, search, t, placed)
    if undo is not None:
        search._undo(undo)
        t, _, placed, _ = path[-2]
        children_follow_the_rule(inst, search, t, placed)


def children_follow_the_rule(inst, search, t, placed):
    kids = search._evaluate(t, placed)
    seen, least = set(), {}
    for r, j, s, c in zip(kids.left.rows.tolist(), kids.left.job.tolist(), kids.start.tolist(),
                          kids.completion.tolist()):
        ch = search._rows.choice[r]
        pools = [sorted(search.free[search.lo[v]:search.lo[v + 1]])[k - 1] for v, k in ch.counts]
        assert s == max([inst.jobs[j].arrival, t] + pools)
        assert c == s + ch.dur
        seen.add((j, r))
        least[j] = min(least.get(j, math.inf), c)
    assert seen == {(j, r) for j in search.left for r in search._rows.of_job[j]}
    assert kids.first.tolist() == [least[j] for j in sorted(search.left)]


def targets_bound(inst, lower, incumbent, time_limit=30.0):
    r = class_search.class_bound_by_targets(inst, lower, incumbent, time_limit)
    return None if r is None else r.bound


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 4), nodes=st.sampled_from([1, 2, 3]),
       stop=st.integers(1, 60), low=st.floats(0.5, 1.0), high=st.floats(1.0, 1.5),
       types=st.sampled_from([("v100", "p100", "k80"), ("v100",)]))
def test_destructive_targets_never_pass_the_optimum(monkeypatch, seed, jobs, nodes, stop, low, high, types):
    """Each attempt stopped after about ``stop`` nodes: an attempt that does not finish proves nothing, one that
    finishes proves its target or solves the class model. From any valid bound below the optimum and any schedule's
    objective above it, the result is between that bound and the optimum."""
    monkeypatch.setattr(bnb, "CHECK_EVERY", 1)
    monkeypatch.setattr(class_search.ClassSearch, "resume", lambda self, dl: bnb.Search.resume(self, StopAfter(stop)))
    inst = queue(seed, jobs, gpus=2 * nodes, nodes=nodes, types=types)
    if not class_search.applies(inst, class_options(inst)):
        return
    opt = brute.solve(inst).objective
    lb = targets_bound(inst, opt * low, opt * high, time_limit=5.0)
    assert opt * low <= lb <= opt * (1 + RTOL)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), gpus=st.sampled_from([2, 3, 4]),
       high=st.floats(1.0, 1.5))
def test_on_one_node_of_identical_gpus_the_targets_climb_to_the_optimum(seed, jobs, gpus, high):
    """Where the class model is exact and every attempt finishes, the targets climb until one passes the optimum,
    and that attempt solves the class model: the bound is the optimum (a target kept after an attempt that found a
    schedule below it, or one not kept after an attempt that found none, fails this)."""
    assume(jobs + gpus <= 8)
    inst = queue(seed, jobs, gpus=gpus, nodes=1, variability=0.0, max_size=gpus)
    opt = brute.solve(inst).objective
    assert math.isclose(targets_bound(inst, opt * 0.6, opt * high), opt, rel_tol=1e-4)


def test_the_targets_phase_lifts_the_bound_where_the_class_search_has_too_many_jobs():
    """16 jobs of up to 8 GPUs on four nodes of four (the plain class search applies to at most 12 jobs): the
    phase runs in the MILP pipeline and its bound is above the one before it, and below the schedule's."""
    inst = offline_instance(gpus=16, nodes=4, jobs=16, types=("v100", "p100", "k80"), interarrival_s=300,
                            duration_h=(0.1, 2), max_size=8, variability=0.05, locality_penalty=1.2, seed=5)
    r = oracle.solve(inst, "milp", time_limit=10, threads=1, seed=0)
    phases = r.params["phases"]
    at = [p["phase"] for p in phases].index("class-targets")
    assert phases[at]["bound"] > phases[at - 1]["bound"] * 1.002
    assert r.lower_bound <= r.objective * (1 + RTOL)
