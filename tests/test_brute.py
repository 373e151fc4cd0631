"""Brute force (static and offline) against hand-checkable facts and the replay."""

from __future__ import annotations

import itertools

import pytest

from formulations import brute
from formulations.offline.greedy import offline_greedy
from formulations.schedules import objective_weights, replay_objective
from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation, Instance
from jctlab.replay import replay
from jctlab.speed import duration


def _valid(inst: Instance, r) -> None:
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid, rep.error
    assert rep.objective == pytest.approx(r.objective, rel=1e-6)


def test_static_brute_matches_naive_enumeration() -> None:
    inst = static_instance(gpus=3, nodes=2, jobs=2, sizes=(1, 2), seed=4, variability=0.1, locality_penalty=1.4)
    r = brute.solve(inst)
    assert r.status == "optimal"
    _valid(inst, r)
    # independent naive check: all pairs of disjoint GPU subsets
    ids = [g.id for g in inst.cluster.gpus]
    best = float("inf")
    w = objective_weights(inst)
    subsets = [s for n in (1, 2) for s in itertools.combinations(ids, n)]
    for a in subsets:
        for b in subsets:
            if set(a) & set(b):
                continue
            v = sum(wi * duration(j, Allocation(s), inst.cluster) for wi, j, s in zip(w, inst.jobs, (a, b)))
            best = min(best, v)
    assert r.objective == pytest.approx(best, rel=1e-9)


def test_static_brute_infeasible() -> None:
    d = static_instance(gpus=2, nodes=1, jobs=2, sizes=(2,), seed=0).to_dict()
    inst = Instance.from_dict(d)
    r = brute.solve(inst)
    assert r.status == "infeasible" and r.schedule is None


@pytest.mark.parametrize("seed", range(4))
def test_offline_brute_valid_and_no_worse_than_fifo(seed: int) -> None:
    inst = offline_instance(gpus=3, nodes=2, jobs=3, max_size=2, interarrival_s=600, seed=seed,
                            duration_h=(0.1, 0.4), variability=0.05)
    r = brute.solve(inst)
    assert r.status == "optimal"
    _valid(inst, r)
    assert r.lower_bound <= r.objective * (1 + 1e-9)
    # no worse than the greedy list schedule
    g = offline_greedy(inst, "h")
    assert g is not None
    v = replay_objective(inst, g)
    assert r.objective <= v * (1 + 1e-9)


def test_offline_brute_single_gpu_is_spt_optimal() -> None:
    """One GPU, all jobs at 0, rigid size 1: the optimum of mean JCT is shortest processing time first."""
    d = offline_instance(gpus=1, nodes=1, jobs=3, max_size=1, seed=2).to_dict()
    for j in d["jobs"]:
        j["arrival"] = 0.0
    inst = Instance.from_dict(d)
    r = brute.solve(inst)
    durs = sorted(duration(j, Allocation(("n0:0",)), inst.cluster) for j in inst.jobs)
    spt = sum(sum(durs[: k + 1]) for k in range(3)) / 3
    assert r.objective == pytest.approx(spt, rel=1e-9)
    assert r.status == "optimal"


def test_offline_brute_with_interference_stays_valid() -> None:
    inst = offline_instance(gpus=2, nodes=1, jobs=3, max_size=1, interarrival_s=60, seed=1, interference=0.3,
                            duration_h=(0.1, 0.2))
    r = brute.solve(inst)
    _valid(inst, r)
    assert r.lower_bound <= r.objective * (1 + 1e-9)


def test_brute_refuses_large_and_preemptive() -> None:
    from jctlab.errors import InputError

    with pytest.raises(InputError):
        brute.solve(static_instance(gpus=64, nodes=8, jobs=2, sizes=(8,), seed=0))
    inst = offline_instance(gpus=2, nodes=1, jobs=2, max_size=1, seed=0, problem="preemptive")
    assert brute.solve(inst).status == "error"
