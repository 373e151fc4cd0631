"""Gavel's policies: the LPs (feasibility, optimality), the round mechanism (valid schedules,
determinism) and, when the public data is present, the medium_test reproduction."""

from __future__ import annotations

import numpy as np
import pytest

from baselines import gavel_lp
from baselines.gavel import POLICIES, GavelPolicy, resolve
from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.simulate import simulate

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    DATA is None or not (DATA / "gavel_traces" / "medium_test.trace").is_file(),
    reason="raw public data not found (set JCTLAB_DATA or place it at ../shared/data)")
TOL = 1e-6


def _random_case(seed: int, m: int = 9, n: int = 3):
    rng = np.random.default_rng(seed)
    T = rng.uniform(0.5, 10.0, (m, n))
    T[rng.random((m, n)) < 0.15] = 0.0          # some types cannot host some jobs
    T[:, 0] = np.maximum(T[:, 0], 0.3)          # ...but every job has one
    sf = rng.choice([1, 1, 1, 2, 4], m).astype(float)
    cap = np.array([4.0, 4.0, 8.0])[:n]
    w = rng.choice([1.0, 1.0, 2.0], m)
    return T, sf, cap, w


def _feasible(X, sf, cap):
    assert np.all(X >= -TOL)
    assert np.all(X.sum(axis=1) <= 1 + TOL)                      # time fractions <= 1 per job
    assert np.all((sf[:, None] * X).sum(axis=0) <= cap + 1e-5)   # capacity per GPU type


# ------------------------------------------------------------------ LPs
def test_resolve_names():
    """Each ``gavel-*`` name gives a factory of that Gavel policy, with Gavel's round length by default and
    the caller's when given; other names give None; a non-preemptive instance is refused with the field."""
    inst = offline_instance(gpus=4, nodes=2, jobs=3, problem="preemptive", seed=0)
    for name, policy in POLICIES.items():
        pol = resolve(name)(inst, seed=1)
        assert (pol.policy, pol.round_s) == (policy, 360.0)
        assert resolve(name)(inst, round_s=60.0).round_s == 60.0
    assert resolve("gavel-nope") is None and resolve("fifo+pal") is None
    with pytest.raises(InputError) as e:
        resolve("gavel-fifo-perf")(offline_instance(gpus=4, nodes=2, jobs=3, seed=0))
    assert e.value.field == "problem"


@pytest.mark.parametrize("seed", range(3))
def test_max_min_fairness_perf_lp(seed):
    T, sf, cap, w = _random_case(seed)
    iso = gavel_lp.isolated_allocation(len(T), sf, cap, w)
    _feasible(iso.x, sf, cap)
    # agnostic objective: min_i sf_i / w_i * sum_j x_ij
    assert iso.objective == pytest.approx((sf / w * iso.x.sum(axis=1)).min(), rel=1e-6)
    res = gavel_lp.max_min_fairness(T, sf, cap, w)
    _feasible(res.x, sf, cap)
    norm = (T * iso.x).sum(axis=1)
    terms = gavel_lp.normalized_throughputs(T, res.x, sf, w, norm)
    assert res.objective == pytest.approx(terms.min(), rel=1e-6)     # z is the min normalized throughput
    vertex = gavel_lp.max_min_fairness(T, sf, cap, w, normalize=norm, method="simplex")
    assert res.objective == pytest.approx(vertex.objective, rel=1e-6)  # IPM reaches the optimum


def test_isolated_allocation_is_central():
    """20 one-GPU jobs on 4+4+4 GPUs: max-min share 0.6 each; the interior-point solution spreads it
    evenly over the types (as Gavel's ECOS does), a simplex vertex does not."""
    res = gavel_lp.isolated_allocation(20, np.ones(20), np.array([4.0, 4.0, 4.0]))
    assert res.objective == pytest.approx(0.6, rel=1e-6)
    assert np.allclose(res.x, 0.2, atol=1e-4)


def test_finish_time_fairness_optimal():
    T, sf, cap, w = _random_case(7, m=6)
    rng = np.random.default_rng(1)
    since = rng.uniform(0, 5000, len(T))
    left = rng.uniform(1e4, 1e5, len(T))
    res = gavel_lp.finish_time_fairness(T, sf, cap, since, left, w)
    _feasible(res.x, sf, cap)
    s = (T * res.x).sum(axis=1)
    iso = (T * gavel_lp.isolated_allocation(len(T), sf, cap, w).x).sum(axis=1)
    E = since + left / iso
    assert res.objective == pytest.approx(((since + left / s) / E).max(), rel=1e-6)
    assert res.objective <= 1 + 1e-6            # never worse than the isolated share
    # bisection on rho with feasibility LPs gives the same optimum
    lo, hi = 0.0, 1.0 + 1e-9
    for _ in range(40):
        mid = (lo + hi) / 2
        need = left / np.maximum(mid * E - since, 1e-12)
        ok = mid * E > since
        feas = ok.all() and gavel_lp._maxmin_lp(T / need[:, None], sf, cap, "simplex").objective >= 1 - 1e-9
        lo, hi = (lo, mid) if feas else (mid, hi)
    assert res.objective == pytest.approx(hi, rel=1e-4)


def test_fifo_perf_greedy():
    # types in name order: k80, p100, v100; job 0 prefers v100 (2 GPUs left after it), job 1 needs 2
    T = np.array([[1.0, 2.0, 3.0], [1.0, 1.0, 5.0], [4.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    res = gavel_lp.fifo_perf(T, [2, 2, 1, 1], [1, 1, 4], ["k80", "p100", "v100"])
    assert res.x.tolist() == [[0, 0, 1], [0, 0, 1], [1, 0, 0], [0, 1, 0]]
    # the head that fits nowhere stops the queue (strict FIFO)
    res = gavel_lp.fifo_perf(T, [1, 8, 1, 1], [1, 1, 4], ["k80", "p100", "v100"])
    assert res.x.sum() == 1 and res.x[0, 2] == 1


# ------------------------------------------------------------------ mechanism
def _inst(seed, **kw):
    return offline_instance(gpus=12, nodes=3, jobs=9, seed=seed, problem="preemptive", interarrival_s=400,
                            duration_h=(0.2, 1.0), max_size=4, **kw)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policies_replay_valid_and_deterministic(name):
    for seed in (0, 1):
        inst = _inst(seed)
        pol = resolve(name)(inst, seed=seed)
        assert pol.round_s == 360
        sched, rep = simulate(inst, pol, round_s=pol.round_s)
        assert rep.valid and len(rep.completion) == len(inst.jobs)
        assert any(len(s.alloc.gpus) > 1 for s in sched.segments)       # multi-GPU jobs ran
        for s in sched.segments:                                         # one GPU type per job segment
            assert len({inst.cluster.gpu[g].type for g in s.alloc.gpus}) == 1
        again, rep2 = simulate(inst, resolve(name)(inst, seed=seed), round_s=360)
        assert again.segments == sched.segments and rep2.objective == rep.objective


def test_round_mechanism_follows_allocation():
    """Two one-GPU jobs, one V100 and one K80, job a 4x faster on the V100, job b 1.5x: max-min
    fairness-perf gives a more V100 time, and jobs only start on round boundaries."""
    from jctlab.model import Instance

    d = {"format": "jctlab.instance/1", "name": "two", "problem": "preemptive", "objective": "mean_jct",
         "cluster": {"nodes": [{"name": "v", "cpus": 4, "mem_gb": 32, "gpus": [{"type": "v100"}]},
                               {"name": "k", "cpus": 4, "mem_gb": 32, "gpus": [{"type": "k80"}]}],
                     "restart_s": 0.0},
         "jobs": [{"name": "a", "arrival": 0, "batch": 1, "iterations": 40000, "samples_per_s": {"v100": 4.0, "k80": 1.0}},
                  {"name": "b", "arrival": 0, "batch": 1, "iterations": 20000, "samples_per_s": {"v100": 1.5, "k80": 1.0}}]}
    inst = Instance.from_dict(d)
    pol = resolve("gavel-max-min-fairness-perf")(inst)
    sched, rep = simulate(inst, pol, round_s=360)
    assert rep.valid
    v_time = {"a": 0.0, "b": 0.0}
    for s in sched.segments:
        if s.alloc.gpus == ("v:0",):
            v_time[s.job] += (s.end if s.end is not None else rep.completion[s.job]) - s.start
    assert v_time["a"] > v_time["b"]
    for s in sched.segments:   # every segment starts on a round boundary
        assert s.start / 360 == pytest.approx(round(s.start / 360), abs=1e-9)


def test_rejects_non_preemptive_and_ps():
    with pytest.raises(InputError):
        GavelPolicy(offline_instance(gpus=4, nodes=1, jobs=2, seed=0), "max_min_fairness")
    with pytest.raises(InputError):
        GavelPolicy(offline_instance(gpus=4, nodes=2, jobs=2, seed=0, ps=True, problem="preemptive"),
                    "max_min_fairness")


# ------------------------------------------------------------------ reproduction
@needs_data
@pytest.mark.parametrize("name,ref_h", [("gavel-max-min-fairness-perf", 4.04), ("gavel-max-min-fairness", 4.60),
                                        ("gavel-fifo-perf", 3.95), ("gavel-finish-time-fairness-perf", 4.06)])
def test_medium_test_reproduction(name, ref_h):
    from jctlab.loaders import gavel as gl

    inst = gl.load_trace(DATA / "gavel_traces" / "medium_test.trace", "4:4:4", "4,4,8")
    pol = resolve(name)(inst, seed=0)
    sched, rep = simulate(inst, pol, round_s=pol.round_s)
    assert rep.valid
    assert rep.objective / 3600 == pytest.approx(ref_h, rel=0.10)
