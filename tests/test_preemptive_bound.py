"""The preemptive LP bound (:mod:`formulations.preemptive_bound`): below every schedule, and its rows bite.

Loaded tiny instances (jobs queue for GPUs, multi-GPU jobs whose GPU area exceeds their compute): the bound
must stay below the brute-force optimum of the offline class and below every policy's replayed preemptive
schedule; the all-GPU area row and the busy-time tangents must lift it where they apply.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from formulations import brute, preemptive_bound
from jctlab import registry
from jctlab.generators import offline_instance
from jctlab.simulate import simulate

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def loaded(seed: int, problem: str = "offline", **over):
    """4 jobs of 1-4 GPUs arriving within minutes on 4 GPUs: they queue."""
    kw = dict(gpus=4, nodes=1 + seed % 2, jobs=4, max_size=4, elastic=0.5, interarrival_s=60,
              duration_h=(0.1, 0.5), variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.3 * (seed % 3),
              cpu_mem=seed % 4 == 1, ps=seed % 4 == 2, seed=seed, problem=problem)
    kw.update(over)
    return offline_instance(**kw)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["mean_jct", "weighted_jct", "makespan"]))
def test_bound_is_below_the_brute_force_optimum_of_loaded_instances(seed, objective):
    inst = loaded(seed, objective=objective)
    ref = brute.solve(inst)
    assume(ref.status == "optimal")     # a PS job with no CPUs for its server on 2-GPU nodes: infeasible
    assert preemptive_bound.lower_bound(inst) <= ref.objective * (1 + 1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_bound_is_below_every_preemptive_policy(seed):
    inst = loaded(seed, problem="preemptive", jobs=6, restart_s=10.0, ps=False)
    lb = preemptive_bound.lower_bound(inst)
    for name in ("srtf+packed-sticky", "las+random-nonsticky", "fifo-firstfit", "optimus"):
        _, rep = simulate(inst, registry.policy_factory(name)(inst, seed=0))
        assert rep.valid, (name, rep.error)
        assert lb <= rep.objective * (1 + 1e-9), name


def test_gpu_area_row_charges_what_a_multi_gpu_job_holds(monkeypatch):
    """Rigid multi-GPU jobs with all-reduce on one 4-GPU node: the per-type rows charge only a perfect split's
    compute and let more of them overlap than fit; the all-GPU row charges n × duration."""
    inst = loaded(0, nodes=1, elastic=0.0)
    assert any(min(j.sizes) > 1 for j in inst.jobs)
    opt = brute.solve(inst).objective
    with_area = preemptive_bound.lower_bound(inst)
    monkeypatch.setattr(preemptive_bound, "gpu_areas", lambda inst: [0.0] * len(inst.jobs))
    without = preemptive_bound.lower_bound(inst)
    assert without < with_area <= opt * (1 + 1e-9)


@pytest.mark.parametrize("seed", [3, 4])
def test_tangents_lift_the_bound_where_buckets_are_coarse(seed):
    """Without tangents a bucket's share of a job counts as done at the bucket's start; with them it takes
    p·y seconds from there (8 buckets: coarse, as on long real traces)."""
    inst = loaded(seed, jobs=5)
    opt = brute.solve(inst).objective
    plain = preemptive_bound.lower_bound(inst, n_grid=8, tangents=False)
    tangent = preemptive_bound.lower_bound(inst, n_grid=8)
    assert plain * 1.05 < tangent <= opt * (1 + 1e-9)
    assert preemptive_bound.lower_bound(inst) <= opt * (1 + 1e-9)


def test_time_limited_bound_refines_coarse_buckets_first(monkeypatch):
    """Under a time limit the LP runs on 20, 40, 80, then 160 buckets (+ tangents), so a heterogeneous queue whose
    160-bucket LP takes minutes still gets a bound from a coarse grid; without a limit, 160 buckets at once.
    Every grid gives a bound below the optimum."""
    inst = loaded(3, jobs=5)
    opt = brute.solve(inst).objective
    real = preemptive_bound._solve_lp
    calls = []

    def spy(inst_, b, pm, caps, area, tangents, time_limit):
        val = real(inst_, b, pm, caps, area, tangents, time_limit)
        calls.append((len(b), tangents, val))
        return val

    monkeypatch.setattr(preemptive_bound, "_solve_lp", spy)
    limited = preemptive_bound.lower_bound(inst, time_limit=60)
    assert [t for _, t, _ in calls] == [False] * 4 + [True]
    sizes = [n for n, _, _ in calls]
    assert sizes[:4] == sorted(sizes[:4]) and sizes[3] == sizes[4] and sizes[0] < sizes[3]
    assert all(v <= opt * (1 + 1e-9) for _, _, v in calls) and limited == max(v for _, _, v in calls)
    calls.clear()
    assert math.isclose(preemptive_bound.lower_bound(inst), limited, rel_tol=1e-7)   # finer grids refine coarser ones
    assert [(n, t) for n, t, _ in calls] == [(sizes[3], False), (sizes[3], True)]
