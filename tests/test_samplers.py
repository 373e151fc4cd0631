"""samplers/: the sampling guarantee, exact category draws, seeding, the fairness knob, methods, online."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.generators import offline_instance
from jctlab.metrics import jain
from jctlab.replay import replay
from jctlab.simulate import simulate
from matching.categories import build_menu, enumerate_size_categories
from matching.methods import exhaustive, market_choice
from matching.search import score, scores
from matching.suite import gavel_static
from samplers.core import ImportanceSampler, UniformSampler, guarantee, samples_for
from samplers.methods import sampling
from samplers.online import sampling_policy


def valid(inst, res):
    rep = replay(inst, res.claimed_schedule(), with_fairness=True)
    assert rep.valid, rep.error
    assert math.isclose(res.objective, rep.objective, rel_tol=1e-6)
    return rep


@given(st.floats(0.001, 0.5), st.floats(0.001, 0.5))
def test_samples_for_meets_the_guarantee_and_is_smallest(eps, delta):
    n = samples_for(eps, delta)
    assert guarantee(n, eps) >= 1 - delta - 1e-12
    assert n == 1 or guarantee(n - 1, eps) < 1 - delta + 1e-12


def test_guarantee_holds_empirically():
    # best of N uniform draws over a finite set lands in the top eps fraction at least 1-(1-eps)^N often
    rng = np.random.default_rng(0)
    N, eps, trials = 5, 0.1, 4000
    hits = sum(rng.integers(0, 100, size=N).min() < 10 for _ in range(trials)) / trials
    assert hits >= guarantee(N, eps) - 0.03


def test_uniform_sampler_is_uniform_over_fitting_categories():
    inst = gavel_static(gpus=8, jobs=4, seed=1, sizes=(1, 2, 4))
    m = build_menu(inst)
    lam, _ = market_choice(m)
    s = UniformSampler(m, lam)
    cats = list(enumerate_size_categories(m))
    rng = np.random.default_rng(0)
    n = 200 * len(cats)
    cnt = Counter(tuple(int(x) for x in s.draw(rng)) for _ in range(n))
    assert set(cnt) <= set(cats)
    freq = np.array([cnt[c] for c in cats]) / n
    p = 1 / len(cats)
    assert np.all(np.abs(freq - p) < 5 * math.sqrt(p * (1 - p) / n))   # 5 sigma, fixed seed


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_importance_draws_fit_and_are_seeded(seed):
    inst = gavel_static(gpus=16, jobs=12, seed=seed)
    m = build_menu(inst)
    lam, _ = market_choice(m)
    s = ImportanceSampler(m, lam)
    a = [tuple(s.draw(np.random.default_rng(seed))) for _ in range(3)]
    b = [tuple(s.draw(np.random.default_rng(seed))) for _ in range(3)]
    assert a == b
    assert all(sum(x) <= 16 for x in a)


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([8, 16, 32]), st.integers(2, 10))
def test_exhaustive_le_sampling_polished_le_unpolished(seed, gpus, jobs):
    inst = gavel_static(gpus=gpus, jobs=min(jobs, gpus), seed=seed)
    ex = exhaustive(inst)
    pol = sampling(inst, samples=6, seed=seed)
    raw = sampling(inst, samples=6, seed=seed, polish=False)
    for r in (ex, pol, raw):
        valid(inst, r)
    assert ex.objective <= pol.objective * (1 + 1e-9)
    assert pol.objective <= raw.objective * (1 + 1e-9)
    assert pol.lower_bound <= ex.objective * (1 + 1e-9)


def test_same_seed_same_result_and_uniform_sampler_runs():
    inst = gavel_static(gpus=32, jobs=10, seed=4)
    r1, r2 = sampling(inst, samples=8, seed=3), sampling(inst, samples=8, seed=3)
    assert r1.objective == r2.objective and r1.schedule.segments == r2.schedule.segments
    valid(inst, sampling(inst, samples=8, seed=3, sampler="uniform"))


@given(st.lists(st.lists(st.floats(1, 100), min_size=3, max_size=3), min_size=2, max_size=8),
       st.floats(0, 3), st.floats(0, 3))
def test_fairness_knob_selection_is_monotone(rows, f1, f2):
    """The samplers keep the candidate of least ``scores`` (mean × (1 + f·(1 − Jain of slowdowns))): among fixed
    candidates, a larger fairness knob never picks one with a lower Jain index, nor a lower mean with a smaller
    one."""
    f1, f2 = sorted((f1, f2))
    d = np.array(rows, dtype=float)
    ref = np.array([1.0, 2.0, 4.0])

    def pick(f):
        sc = scores(d, ref, f)
        return min(range(len(rows)), key=lambda i: (sc[i], i))

    a, b = pick(f1), pick(f2)
    assert jain(d[b] / ref) >= jain(d[a] / ref) - 1e-9
    assert d[b].mean() >= d[a].mean() * (1 - 1e-9)


def test_score_and_fairness_knob_end_to_end():
    d = np.array([1.0, 2.0, 4.0])
    assert score(d, None, 0.0) == pytest.approx(7 / 3)
    assert score(d, np.ones(3), 1.0) == pytest.approx(7 / 3 * (2 - jain(d)))
    inst = gavel_static(gpus=32, jobs=12, seed=9)
    base = valid(inst, sampling(inst, samples=16, seed=1, polish=False))
    fair = valid(inst, sampling(inst, samples=16, seed=1, polish=False, fairness=5.0))
    assert fair.metrics["jain_slowdown"] >= base.metrics["jain_slowdown"] - 1e-9
    assert fair.objective >= base.objective * (1 - 1e-9)


def test_sampling_online_policy():
    inst = offline_instance(gpus=16, nodes=4, jobs=10, seed=2)
    _, r1 = simulate(inst, sampling_policy(inst, seed=5))
    _, r2 = simulate(inst, sampling_policy(inst, seed=5))
    assert r1.valid and r1.objective == r2.objective


def test_batch_draws_fit_and_inner_batch_is_feasible_and_in_category():
    from samplers.core import draw_many, inner_batch

    inst = gavel_static(gpus=32, jobs=12, seed=7)
    m = build_menu(inst)
    lam, _ = market_choice(m)
    s = ImportanceSampler(m, lam)
    cats = draw_many(s, np.random.default_rng(1), 40)
    assert np.all(cats.sum(axis=1) <= 32)
    assert np.array_equal(cats, draw_many(s, np.random.default_rng(1), 40))
    ch = inner_batch(m, lam, cats, sweeps=2)
    rows = np.arange(m.J)
    for cat, c in zip(cats, ch):
        if c[0] < 0:
            continue
        assert np.all(m.S[rows, c] == cat) and m.feasible(c)


def test_batch_and_beam_inner_both_valid_and_deterministic():
    inst = gavel_static(gpus=48, jobs=14, seed=11)
    for kw in ({"inner": "batch"}, {"inner": "beam"}, {"inner": "batch", "width": 0}):
        r1, r2 = sampling(inst, samples=16, seed=2, **kw), sampling(inst, samples=16, seed=2, **kw)
        valid(inst, r1)
        assert r1.objective == r2.objective and r1.schedule.segments == r2.schedule.segments


def test_cold_and_warm_caches_give_the_same_schedule():
    from matching.categories import clear_caches

    inst = gavel_static(gpus=32, jobs=9, seed=21)
    clear_caches()
    cold = sampling(inst, samples=8, seed=4)
    warm = sampling(inst, samples=8, seed=4)
    assert cold.objective == warm.objective and cold.schedule.segments == warm.schedule.segments
    valid(inst, warm)


def test_optimal_claims_only_where_the_bound_is_met():
    """sampling and matching stop early when the market's cleared choice attains the Lagrangian
    bound and then say `optimal`; every such claim equals the exhaustive optimum (exact on these
    instances), and a claim is never made above a valid bound."""
    from matching.methods import exhaustive, matching
    from matching.suite import gavel_static

    claimed = 0
    for g, j, seed in [(64, 4, 5), (48, 8, 4), (32, 7, 3), (32, 14, 9), (48, 12, 10), (64, 11, 17)]:
        inst = gavel_static(gpus=g, jobs=j, seed=seed)
        opt = exhaustive(inst)
        assert opt.status == "optimal"
        for r in (sampling(inst, samples=8, seed=1), matching(inst)):
            assert r.lower_bound <= r.objective * (1 + 1e-9)
            assert r.lower_bound <= opt.objective * (1 + 1e-9)
            if r.status == "optimal":
                claimed += 1
                assert r.objective == pytest.approx(opt.objective, rel=1e-9)
                assert r.lower_bound == pytest.approx(r.objective, rel=1e-9)
    assert claimed >= 2
