"""matching/: markets, stable matching, proportional split, exhaustive optimum, methods, online policy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from jctlab.errors import InputError
from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation
from jctlab.replay import replay
from jctlab.simulate import simulate
from jctlab.speed import base_iteration_time
from matching.categories import build_menu, compositions, realize
from matching.exhaustive import brute_force, by_size_categories, dp_optimum
from matching.market import (assign_slots, assignment_value, clears, dgs_auction, dual_bound,
                             min_clearing_prices, optimal_value, type_market)
from matching.methods import exhaustive, matching, unaware
from matching.online import matching_policy
from matching.proportional import batch_shares, proportional_type_shares, share_compute_time
from matching.stable import blocking_pairs, gale_shapley, speed_preferences
from formulations.static.candidates import count_vectors
from oracle.methods import solve
from matching.suite import gavel_static

FAST = settings(max_examples=30, deadline=None)
matrices = st.integers(1, 6).flatmap(lambda r: st.integers(1, 6).flatmap(
    lambda c: st.lists(st.lists(st.integers(0, 30), min_size=c, max_size=c), min_size=r, max_size=r)))


def check_result(inst, res):
    assert res.schedule is not None, res.params
    rep = replay(inst, res.claimed_schedule(), with_fairness=False)
    assert rep.valid, rep.error
    assert math.isclose(res.objective, rep.objective, rel_tol=1e-6)
    if res.lower_bound is not None:
        assert res.lower_bound <= res.objective * (1 + 1e-9)
    for seg in res.schedule.segments:
        assert seg.start == 0.0 and seg.end is None
    return rep


# ----------------------------------------------------------------------------- markets


@FAST
@given(matrices)
def test_dgs_auction_is_optimal_and_clears(rows):
    v = np.array(rows, dtype=float)
    assign, prices = dgs_auction(v)
    r, c = linear_sum_assignment(v, maximize=True)
    assert assignment_value(v, assign) == pytest.approx(v[r, c].sum())
    assert clears(v, prices, assign, tol=1.0 / (min(v.shape) + 1) + 1e-9)


@FAST
@given(matrices)
def test_min_clearing_prices_clear_exactly(rows):
    v = np.array(rows, dtype=float)
    assign, p = min_clearing_prices(v)
    assert clears(v, p, assign, tol=1e-7)
    assert assignment_value(v, assign) == pytest.approx(optimal_value(v))


def test_clears_rejects_envy():
    v = np.array([[10.0, 0.0], [10.0, 0.0]])
    assert not clears(v, np.array([0.0, 0.0]), np.array([0, 1]))   # buyer 1 envies item 0 at price 0
    assert clears(v, np.array([10.0, 0.0]), np.array([0, 1]))


def test_assign_slots_lsa_equals_dgs():
    rng = np.random.default_rng(3)
    v = rng.integers(1, 20, size=(3, 7)).astype(float)
    q = [2, 1, 3]
    a1, a2 = assign_slots(v, q, "lsa"), assign_slots(v, q, "dgs")
    val = lambda a: sum(v[j, k] for k, j in enumerate(a) if j >= 0)
    assert val(a1) == pytest.approx(val(a2))
    assert [int((a1 == j).sum()) for j in range(3)] == q


def test_type_market_clears_and_bounds_the_optimum():
    inst = static_instance(gpus=16, nodes=4, jobs=7, seed=2)
    m = build_menu(inst)
    lam, choice, _ = type_market(m.D, m.C, m.cap)
    assert np.all(m.usage(choice) <= m.cap) and np.all(lam >= 0)
    _, opt = dp_optimum(m)
    assert dual_bound(m.D, m.C.astype(float), m.cap, lam) <= opt + 1e-6
    assert dual_bound(m.D, m.C.astype(float), m.cap, np.zeros(len(lam))) <= opt + 1e-6


# ----------------------------------------------------------------------------- stable matching


@FAST
@given(st.integers(0, 10_000), st.integers(1, 5), st.integers(1, 9))
def test_gale_shapley_has_no_blocking_pair(seed, nj, ng):
    rng = np.random.default_rng(seed)
    prefs = [list(rng.permutation(ng)[: rng.integers(0, ng + 1)]) for _ in range(nj)]
    rank = np.array([rng.permutation(nj) for _ in range(ng)], dtype=float)
    rank[rng.random((ng, nj)) < 0.2] = np.inf
    quotas = list(rng.integers(0, 4, size=nj))
    match = gale_shapley(prefs, rank, quotas)
    assert blocking_pairs(prefs, rank, quotas, match) == []
    assert all(len(m) <= q for m, q in zip(match, quotas))
    flat = [g for m in match for g in m]
    assert len(flat) == len(set(flat))


def test_blocking_pair_detected():
    prefs = [[0, 1], [0, 1]]
    rank = np.array([[0.0, 1.0], [0.0, 1.0]])
    assert blocking_pairs(prefs, rank, [1, 1], [[1], [0]]) == [(0, 0)]


def test_speed_preferences_rank_faster_gpus_first():
    inst = static_instance(gpus=12, nodes=3, jobs=3, seed=1)
    gpus = [g.id for g in inst.cluster.gpus]
    prefs, rank, rho = speed_preferences(inst, [0, 1, 2], gpus)
    for a, p in enumerate(prefs):
        assert all(rho[a, p[i]] >= rho[a, p[i + 1]] for i in range(len(p) - 1))
    match = gale_shapley(prefs, rank, [4, 4, 4])
    assert blocking_pairs(prefs, rank, [4, 4, 4], match) == []


# ----------------------------------------------------------------------------- proportional split


def test_batch_shares_proportional_and_match_speed_model():
    inst = static_instance(gpus=12, nodes=3, jobs=2, seed=4)
    job = inst.jobs[0]
    gpus = ("n0:0", "n1:0", "n2:0")
    alloc = Allocation(gpus)
    sh = batch_shares(job, alloc, inst.cluster)
    assert sum(sh.values()) == pytest.approx(job.batch)
    rates = [job.samples_per_s[inst.cluster.gpu[g].type] for g in gpus]
    assert [sh[g] / r for g, r in zip(gpus, rates)] == pytest.approx([job.batch / sum(rates)] * 3)
    comm = base_iteration_time(job, alloc, inst.cluster) / inst.cluster.locality_penalty - share_compute_time(job, alloc, inst.cluster)
    assert comm == pytest.approx(2 * 2 / 3 * job.comm_mb * 8 / 1000 / inst.cluster.inter_node_gbps)
    x = proportional_type_shares(inst)
    assert x.sum(axis=0) == pytest.approx([4.0, 4.0, 4.0])


# ----------------------------------------------------------------------------- exhaustive


def test_compositions():
    assert sorted(compositions(3, [2, 1, 3])) == sorted(
        c for c in __import__("itertools").product(range(3), range(2), range(4)) if sum(c) == 3)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=4), st.integers(0, 12))
def test_vectorised_count_vectors_equal_the_static_candidates_generator(caps, n):
    """The menus' vectorised count-vector builder and the static candidates' lazy generator are one
    enumeration in two forms (numpy for whole menus, a generator where candidates stop early): the same
    vectors in the same order."""
    assert list(compositions(n, caps)) == list(count_vectors(caps, n))


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4))
def test_dp_equals_brute_force_and_size_categories(seed, jobs):
    inst = static_instance(gpus=8, nodes=2, jobs=jobs, seed=seed, sizes=(1, 2), types=("v100", "k80"))
    m = build_menu(inst)
    c1, v1 = dp_optimum(m)
    c2, v2 = brute_force(m)
    c3, v3, k = by_size_categories(m)
    assert v1 == pytest.approx(v2) and v1 == pytest.approx(v3)
    assert m.feasible(c1) and m.value(c1) == pytest.approx(v1)


def test_exhaustive_is_optimal_and_matches_cpsat_oracle():
    inst = gavel_static(gpus=16, jobs=5, seed=11)
    ex = exhaustive(inst)
    check_result(inst, ex)
    assert ex.status == "optimal" and ex.lower_bound == pytest.approx(ex.objective)
    cp = solve(inst, method="cpsat", threads=1)          # solved to its end: a proof
    assert cp.status == "optimal"
    assert ex.objective == pytest.approx(cp.objective, rel=1e-6)


def test_not_exact_with_variability_no_bound_claimed():
    inst = static_instance(gpus=8, nodes=2, jobs=3, seed=0, variability=0.2)
    ex = exhaustive(inst)
    check_result(inst, ex)
    assert ex.status == "feasible" and ex.lower_bound is None


def test_realize_gives_disjoint_gpus_with_chosen_counts():
    inst = gavel_static(gpus=32, jobs=8, seed=3)
    m = build_menu(inst)
    ch, _ = dp_optimum(m)
    allocs, ok = realize(m, ch)
    assert ok
    ids = [g for a in allocs for g in a.gpus]
    assert len(ids) == len(set(ids))
    for a, alloc in enumerate(allocs):
        types = [inst.cluster.gpu[g].type for g in alloc.gpus]
        assert tuple(types.count(t) for t in m.types) == tuple(m.C[a, ch[a]])
        if m.L[a, ch[a]]:
            assert len({g.split(':')[0] for g in alloc.gpus}) == 1
        # a spread option may land on one node only when that is no slower (it was kept over local)
        assert base_iteration_time(inst.jobs[a], alloc, inst.cluster) * inst.jobs[a].iterations <= m.D[a, ch[a]] * (1 + 1e-9)


# ----------------------------------------------------------------------------- methods


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([8, 16, 24]), st.integers(2, 8))
def test_exhaustive_le_matching_le_bound_chain(seed, gpus, jobs):
    inst = gavel_static(gpus=gpus, jobs=min(jobs, gpus), seed=seed)
    ex, mt, un = exhaustive(inst), matching(inst), unaware(inst)
    for r in (ex, mt, un):
        check_result(inst, r)
    assert ex.status == "optimal"
    assert mt.lower_bound <= ex.objective * (1 + 1e-9)
    assert ex.objective <= mt.objective * (1 + 1e-9)
    assert ex.objective <= un.objective * (1 + 1e-9)


def test_matching_stable_inner_and_weighted_objective():
    inst = gavel_static(gpus=16, jobs=6, seed=5)
    check_result(inst, matching(inst, inner="stable"))
    d = inst.to_dict()
    d["objective"] = "weighted_jct"
    for i, j in enumerate(d["jobs"]):
        j["weight"] = 1.0 + i
    from jctlab.model import Instance
    w = Instance.from_dict(d)
    ex, mt = exhaustive(w), matching(w)
    check_result(w, ex), check_result(w, mt)
    assert ex.status == "optimal" and ex.objective <= mt.objective * (1 + 1e-9)


def test_static_only():
    inst = offline_instance(gpus=8, nodes=2, jobs=3, seed=0)
    with pytest.raises(InputError):
        matching(inst)


def test_heterogeneity_awareness_beats_unaware_on_real_types():
    inst = gavel_static(gpus=32, jobs=8, seed=7)
    assert matching(inst).objective < unaware(inst).objective


# ----------------------------------------------------------------------------- online


def test_online_policy_valid_and_deterministic():
    inst = offline_instance(gpus=16, nodes=4, jobs=12, seed=1)
    s1, r1 = simulate(inst, matching_policy(inst, seed=0))
    s2, r2 = simulate(inst, matching_policy(inst, seed=0))
    assert r1.valid and r1.objective == r2.objective
    assert [x.alloc for x in s1.segments] == [x.alloc for x in s2.segments]


def test_cli_solve(tmp_path):
    import subprocess
    import sys
    import json
    from jctlab.model import save_instance

    inst = gavel_static(gpus=16, jobs=4, seed=2)
    p = tmp_path / "i.json"
    save_instance(inst, p)
    out = subprocess.run([sys.executable, "-m", "jctlab.cli", "solve", str(p), "--method", "exhaustive", "--json"],
                         capture_output=True, text=True)
    if out.returncode != 0 and "No module named jctlab.cli.__main__" in out.stderr:
        pytest.skip("no module entry")
    d = json.loads(out.stdout)
    assert d["valid"] and d["status"] == "optimal"


def test_cached_menus_equal_uncached_durations():
    # vectorized pricing and the process-wide caches (option lists per profile and node-count shape)
    # give the menu that fresh jctlab.speed calls on canonical allocations give
    from matching import categories as mc

    for seed, g in [(3, 32), (4, 48), (5, 24)]:
        inst = gavel_static(gpus=g, jobs=10, seed=seed)
        mc.clear_caches()
        cold = build_menu(inst)
        warm = build_menu(inst)
        assert mc.cache_sizes()["menus"] > 0
        for m in (cold, warm):
            for a, j in enumerate(m.jobs):
                for o in range(int(m.n_opt[a])):
                    c, loc = tuple(int(x) for x in m.C[a, o]), bool(m.L[a, o])
                    alloc = mc._canonical(c, loc, m.free, {n: np.array([len(p.get(t, ())) for t in m.types])
                                                           for n, p in m.free.items()}, m.types, inst.cluster)
                    assert alloc is not None
                    assert m.D[a, o] == pytest.approx(inst.jobs[j].iterations * base_iteration_time(inst.jobs[j], alloc, inst.cluster), rel=1e-12)
        assert np.array_equal(cold.C, warm.C) and np.array_equal(cold.D, warm.D) and np.array_equal(cold.L, warm.L)


def test_infeasible_only_with_a_proof():
    """matching/sampling say `infeasible` only on instances brute force proves infeasible."""
    from formulations import brute
    from samplers.methods import sampling
    from tests.test_oracle_static import CASES, _inst

    seen = 0
    for kw in CASES:
        inst = _inst(kw)
        if inst.objective == "makespan":
            continue  # not an objective of these methods
        ref = brute.solve(inst)
        for r in (matching(inst), sampling(inst, samples=4, seed=0)):
            if r.status == "infeasible":
                assert ref.status == "infeasible"
                seen += 1
            elif ref.status == "infeasible":
                assert r.schedule is None
    assert seen > 0


def test_warm_up_readies_every_compiled_kernel():
    """``make setup`` runs ``python -m samplers.warm`` so that no solver compiles inside its time limit (a cold
    compile took ~9 s of a 10-s ``auto`` solve). Every ``@njit`` function of the kernel modules is registered,
    and after :func:`samplers.warm.warm` each is compiled or in numba's disk cache."""
    import importlib
    import inspect

    from matching import jit
    from samplers.warm import warm

    assert warm() == []
    names = {getattr(k, "py_func", k).__qualname__ for k in jit.KERNELS}
    for module in ("matching.market", "matching.search", "samplers.core"):
        src = inspect.getsource(importlib.import_module(module))
        defined = {line.split("def ", 1)[1].split("(", 1)[0]
                   for prev, line in zip(src.splitlines(), src.splitlines()[1:]) if prev.strip() == "@njit"}
        assert defined and defined <= names, module
