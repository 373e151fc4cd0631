"""Busy-period decomposition (:mod:`oracle.blocks`): offline instances whose cluster can fall idle between
arrivals are solved block by block; the blocks' bounds and schedules add up.

Brute force (which never splits) is the reference."""

from __future__ import annotations

import dataclasses
import functools
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from formulations import brute
from formulations.offline.pipeline import Shared
from formulations.schedules import objective_weights
from jctlab.generators import offline_instance
from jctlab.model import Schedule
from jctlab.replay import replay
from oracle import blocks
from oracle.dispatch import dispatch, dispatch_whole

from .oracle_offline_helpers import check_valid

RTOL = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def sparse(seed: int, jobs: int = 6, **over):
    """Jobs of 6-30 min arriving every 40 min on average: busy periods of one to a few jobs."""
    kw = dict(gpus=2 + seed % 3, nodes=1 + seed % 2, jobs=jobs, interarrival_s=2400, duration_h=(0.1, 0.5),
              max_size=[1, 2, 4][seed % 3], variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.2 * (seed % 3),
              elastic=0.7, seed=seed)
    kw.update(over)
    return offline_instance(**kw)


def test_split_partitions_the_jobs_at_idle_points_of_a_valid_schedule():
    inst = sparse(0, jobs=10)
    found = blocks.split(inst)
    parts, witness = found.parts, found.witness
    assert len(parts) >= 2
    assert sorted(j for p in parts for j in p) == list(range(len(inst.jobs)))
    rep = replay(inst, witness)
    assert rep.valid, rep.error
    for a, b in zip(parts, parts[1:]):
        last = max(rep.completion[inst.jobs[j].name] for j in a)
        assert last <= min(inst.jobs[j].arrival for j in b)          # the cluster is idle in between
        assert max(inst.jobs[j].arrival for j in a) < min(inst.jobs[j].arrival for j in b)


def test_busy_instances_and_makespan_are_not_split():
    assert blocks.split(sparse(0, interarrival_s=1.0)) is None     # every job arrives while others run
    assert blocks.split(sparse(0, jobs=10, objective="makespan")) is None
    assert blocks.split(sparse(0, jobs=10, problem="preemptive")) is None


@functools.cache
def brute_reference(seed: int):
    """The brute-force optimum of ``sparse(seed)`` (weighted on odd seeds), computed once for both methods: on
    seed 2 it takes about half a minute."""
    inst = sparse(seed, objective="weighted_jct" if seed % 2 else "mean_jct")
    return inst, brute.solve(inst)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("method", ["cpsat", "auto"])
def test_block_solutions_agree_with_brute_force(seed, method):
    inst, ref = brute_reference(seed)
    assert blocks.split(inst) is not None
    r = oracle.solve(inst, method, threads=1)
    check_valid(inst, r)
    assert len(r.params["blocks"]) >= 2
    assert r.status == "optimal"
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL), (r.objective, ref.objective)
    assert r.lower_bound <= ref.objective * (1 + 1e-9)


def test_a_shared_bound_of_the_whole_instance_is_not_handed_to_its_blocks(monkeypatch):
    """``auto`` hands its members the preemptive LP of the instance it solves (``Shared``); a member that splits
    that instance into busy periods must not take it as a block's bound."""
    seen: list[dict] = []
    real = blocks.solve

    def spy(*args, options, **kwargs):
        seen.append(options)
        return real(*args, options=options, **kwargs)

    monkeypatch.setattr(blocks, "solve", spy)
    inst, ref = brute_reference(1)
    r = dispatch("cpsat", inst, None, 1, 0, None, {"shared": Shared(preemptive_lp=ref.objective)})
    assert seen and all("shared" not in o for o in seen)
    check_valid(inst, r)
    assert r.status == "optimal" and math.isclose(r.objective, ref.objective, rel_tol=RTOL)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cut=st.integers(1, 3), weighted=st.booleans())
def test_a_partition_of_the_jobs_bounds_the_optimum(seed, cut, weighted):
    # the law behind the blocks: any partition's optima, weighted by their jobs, sum to at most the optimum
    inst = offline_instance(gpus=2, nodes=1, jobs=4, interarrival_s=[60, 600][seed % 2], duration_h=(0.1, 1.0),
                            max_size=2, variability=0.05, seed=seed, objective="weighted_jct" if weighted else "mean_jct")
    w = objective_weights(inst)
    whole = brute.solve(inst).objective
    total = 0.0
    for part in (list(range(cut)), list(range(cut, 4))):
        total += brute.solve(inst.replace_jobs([inst.jobs[j] for j in part])).objective * sum(w[j] for j in part)
    assert total <= whole * (1 + 1e-9)


def test_a_block_schedule_that_runs_into_the_next_block_is_replaced_by_the_witness():
    inst = sparse(0, jobs=10)
    found = blocks.split(inst)
    parts, witness = found.parts, found.witness

    def late(method, sub, time_limit, threads, seed, hint, options):
        r = dispatch_whole(method, sub, time_limit, threads, seed, hint, options)
        if sub.jobs[0].name != inst.jobs[parts[0][0]].name:
            return r
        segs = tuple(dataclasses.replace(s, start=s.start + 1e6) for s in r.schedule.segments)
        moved = Schedule(r.schedule.instance, r.schedule.method, segs)
        return r.with_(schedule=moved, objective=replay(sub, moved).objective)

    r = blocks.solve("cpsat", inst, parts, witness, time_limit=None, threads=1, seed=0, hint=None, options={},
                     dispatch=late)
    check_valid(inst, r)
    assert r.params["witness_blocks"] == [0]


def test_a_block_the_method_does_not_cover_names_the_block():
    inst = sparse(1, jobs=8, gpus=16, max_size=8)       # 8-GPU jobs: too many GPU subsets for the search
    assert blocks.split(inst) is not None
    r = oracle.solve(inst, "bnb")
    assert r.status == "error" and r.params["error"].startswith("block ")


def test_blocks_share_the_time_limit():
    """Blocks are solved smallest first, each with its share of what is left by job count; together they keep
    the limit (plus the set-up that cannot be interrupted)."""
    inst = sparse(0, jobs=40, gpus=8, nodes=2, max_size=8, interarrival_s=1800, duration_h=(0.2, 1.5))
    found = blocks.split(inst)
    assert sorted(j for p in found.parts for j in p) == list(range(len(inst.jobs))) and len(found.parts) >= 3
    seen = []

    def spy(method, sub, lim, threads, seed, hint, options):
        seen.append((len(sub.jobs), lim))
        return dispatch_whole(method, sub, lim, threads, seed, hint, options)

    t0 = time.perf_counter()
    r = blocks.solve("cpsat", inst, found.parts, found.witness, time_limit=2.0, threads=1, seed=0, hint=None,
                     options={}, dispatch=spy, t0=t0)
    check_valid(inst, r)
    assert [n for n, _ in seen] == sorted(map(len, found.parts))
    jobs_left = len(inst.jobs)
    for n, lim in seen:
        assert blocks.MIN_BLOCK_S <= lim <= max(blocks.MIN_BLOCK_S, 2.0 * n / jobs_left) + 1e-9
        jobs_left -= n
    assert time.perf_counter() - t0 <= 2.0 + 1.5
