"""The Lagrangian bound over node patterns (formulations.offline.lagrangian_bound.node_items) and its phase."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import lagrangian_bound, milp
from formulations.offline.lagrangian_bound import LagrangianParams, node_items
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.speed import duration

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

SMALL = LagrangianParams(fine_slots=300, max_slots=600, steps=300, stall=20)


def small(seed: int, **over) -> Instance:
    """4-5 jobs of 1-4 GPUs arriving within minutes on 4 GPUs of two types on 1-2 nodes (rigid or elastic,
    per-GPU variability, locality penalties): they queue."""
    kw = dict(gpus=4, nodes=1 + seed % 2, jobs=4 + seed % 2, types=("v100", "k80"), max_size=4, elastic=0.5,
              interarrival_s=60, duration_h=(0.1, 0.5), variability=0.05 * (seed % 3),
              locality_penalty=1.0 + 0.3 * (seed % 3), seed=seed)
    kw.update(over)
    return offline_instance(**kw)


def sixteen(seed: int) -> Instance:
    """16 jobs on 4 nodes of 4 GPUs of three types (the 10-s queue rows' 16 × 16 family; development seeds)."""
    return offline_instance(gpus=16, nodes=4, jobs=16, types=("v100", "p100", "k80"), interarrival_s=300,
                            duration_h=(0.1, 2), max_size=8, variability=0.05, locality_penalty=1.2, seed=seed)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["mean_jct", "weighted_jct"]), one_type=st.booleans())
def test_bound_is_below_the_brute_force_optimum(seed, objective, one_type):
    inst = small(seed, objective=objective, **({"nodes": 2, "types": ("v100",)} if one_type else {}))
    nodes = node_items(inst, 10_000)
    assert nodes is not None
    lb = lagrangian_bound.lower_bound(inst, params=SMALL, nodes=nodes)
    assert lb is not None and lb <= brute.solve(inst).objective * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), one_type=st.booleans())
def test_each_item_is_its_patterns_fastest_allocation(seed, one_type):
    """Every way to hold a job's GPUs has the rows of its pattern and runs at least as long as the pattern's item:
    checked against every allocation of every size on the small instances (with ``one_type``, two nodes of one
    type: a row over both)."""
    inst = small(seed, nodes=2, types=("v100",)) if one_type else small(seed)
    nodes = node_items(inst, 10_000)
    caps = nodes.caps
    assert any(r[0] == "set" for r in caps) == one_type
    cl = inst.cluster
    for job, its in zip(inst.jobs, nodes.per_job):
        by = {tuple(sorted((r, c) for r, c in it.demand.items() if r[0] == "n")): it for it in its}
        for n in job.sizes:
            for gpus in itertools.combinations([g for g in cl.gpus if job.can_use(g.type)], n):
                pat = {}
                for g in gpus:
                    pat[("n", g.node)] = pat.get(("n", g.node), 0) + 1
                it = by[tuple(sorted(pat.items()))]
                assert it.demand[("all",)] == n
                assert all(it.demand.get(r, 0) == sum(g.node in r[1] for g in gpus) for r in caps if r[0] == "set")
                assert it.dur <= duration(job, Allocation(tuple(g.id for g in gpus)), cl) * (1 + 1e-12)


def mixed_node(seed: int) -> Instance:
    """``small`` on one node of V100s and K80s (the first GPU a K80): the fastest GPUs of a pattern are not its only
    GPU types there."""
    d = small(seed, nodes=1).to_dict()
    gpus = d["cluster"]["nodes"][0]["gpus"]
    gpus[0]["type"] = "k80" if gpus[1]["type"] != "k80" else "v100"
    return Instance.from_dict(d)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_a_node_of_two_types_gets_no_type_rows(seed):
    """On a node of two types a pattern's fastest GPUs fix its types but other allocations of it have others:
    no type rows (rows over nodes only), and the bound stays below brute force."""
    inst = mixed_node(seed)
    nodes = node_items(inst, 10_000)
    assert all(r[0] != "type" for r in nodes.caps)
    lb = lagrangian_bound.lower_bound(inst, params=SMALL, nodes=nodes)
    assert lb is not None and lb <= brute.solve(inst).objective * (1 + 1e-9)


def test_not_a_bound_where_the_speed_model_reads_more_than_the_gpus():
    """Parameter servers and CPU/memory levels change a pattern's fastest allocation: no node patterns there, nor
    above the item limit."""
    assert node_items(small(2, ps=True), 10_000) is None
    assert node_items(small(1, cpu_mem=True), 10_000) is None
    assert node_items(sixteen(9000), 10) is None


@settings(max_examples=25, deadline=None)
@given(limit=st.integers(0, 900))
def test_a_limit_gives_every_pattern_or_none(limit):
    """Under an item limit a job never loses some of its patterns (a job priced over fewer allocations than it has
    would make the bound invalid): the items are all of them, or None."""
    inst = sixteen(9002)
    full = node_items(inst, 100_000)
    got = node_items(inst, limit)
    total = sum(map(len, full.per_job))
    assert (got is None) == (limit < total)
    if got is not None:
        assert [len(its) for its in got.per_job] == [len(its) for its in full.per_job]


def test_node_rows_see_that_wide_jobs_take_whole_nodes():
    """On nodes of 4 GPUs an 8-GPU job holds two whole nodes, where the modes count one GPU of its slowest type:
    the node patterns' bound is above the modes' (same grid and steps, no time limit: machine-independent)."""
    inst = sixteen(9000)
    modes = lagrangian_bound.lower_bound(inst, params=SMALL)
    nodes = lagrangian_bound.lower_bound(inst, params=SMALL, nodes=node_items(inst, 1500))
    assert nodes > modes * 1.01


def test_pipeline_phase_raises_the_bound_without_a_queue():
    """The MILP pipeline runs the node patterns after the Lagrangian phase, with or without a queue; its bound is
    kept (the result's bound is at least it, and at most the objective)."""
    res = milp.solve(sixteen(9001), time_limit=4.0, threads=1)
    bounds = {p["phase"]: p["bound"] for p in res.params["phases"]}
    assert "node-patterns" in bounds
    assert bounds["node-patterns"] <= res.lower_bound <= res.objective
