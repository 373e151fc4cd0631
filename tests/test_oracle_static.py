"""Static-class oracles: CP-SAT, HiGHS, CBC and brute force agree; bounds, statuses, limits, determinism."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.budget import Budget
from formulations.gpu_classes import gpu_classes
from formulations.results import result_of_schedule
from formulations.schedules import static_schedule
from formulations.static import cpsat as static_cpsat
from formulations.static import greedy as static_greedy_module
from formulations.static import milp as static_milp
from formulations.static import pipeline as static_pipeline
from formulations.static.candidates import VEC_SAFETY, CandidateParams, enumerate_candidates, optimistic_duration
from formulations.static.greedy import static_greedy
from formulations.static.packing import build_packing
from formulations.static.pipeline import StaticParams, static_gpu_shortage
from jctlab.generators import static_instance
from jctlab.model import Allocation, Instance
from jctlab.replay import replay
from jctlab.speed import duration
from oracle import methods

# ≥ 20 tiny instances: locality penalty, variability, elastic sizes, cpu_mem, ps, objectives, equal split
CASES = []
for s in range(24):
    kw = dict(gpus=3 + s % 2, nodes=1 + s % 3 if 3 + s % 2 >= 1 + s % 3 else 2, jobs=2 + (s % 5 == 0), seed=s,
              sizes=((1, 2), (1, 2, 3), (2,), (1, 3))[s % 4], variability=(0.0, 0.08, 0.15)[s % 3],
              locality_penalty=(1.0, 1.3, 1.7)[(s // 3) % 3], cpu_mem=s % 4 == 1, ps=s % 6 == 2,
              objective=("mean_jct", "weighted_jct", "makespan", "mean_jct")[(s // 2) % 4])
    CASES.append(kw)


def _inst(kw: dict) -> Instance:
    inst = static_instance(**kw)
    if kw["seed"] % 7 == 3:  # equal split and weights too
        d = inst.to_dict()
        d["cluster"]["split"] = "equal"
        for k, j in enumerate(d["jobs"]):
            j["weight"] = 1.0 + k
        inst = Instance.from_dict(d)
    return inst


def _check(inst: Instance, r) -> None:
    assert r.schedule is not None
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid, rep.error
    assert rep.objective == pytest.approx(r.objective, rel=1e-6)
    assert r.lower_bound is None or r.lower_bound <= r.objective * (1 + 1e-9)


@pytest.mark.parametrize("kw", CASES, ids=[f"s{k['seed']}" for k in CASES])
def test_models_agree_with_brute_force(kw: dict) -> None:
    inst = _inst(kw)
    ref = brute.solve(inst)
    if ref.status == "infeasible":
        for f in (static_cpsat.solve, static_milp.solve):
            assert f(inst).status == "infeasible"
        return
    assert ref.status == "optimal"
    _check(inst, ref)
    for r in (static_cpsat.solve(inst, seed=1), static_milp.solve(inst, backend="highs"),
              static_milp.solve(inst, backend="cbc"), static_cpsat.solve(inst, warm=False, reduce=False)):
        _check(inst, r)
        assert r.status == "optimal", (r.solver, r.params)
        assert r.objective == pytest.approx(ref.objective, rel=1e-6), r.solver
        assert r.lower_bound <= ref.objective * (1 + 1e-9)


def test_relaxed_candidates_still_exact_on_small_instance() -> None:
    """Force relaxed spread candidates (spread_cap=0) into the model: its bound stays valid, and the solver,
    which then picks a relaxed family and expands or repairs it, still returns the brute-force optimum."""
    inst = static_instance(gpus=4, nodes=2, jobs=2, sizes=(1, 2, 3), seed=5, variability=0.1)
    relaxed = StaticParams(candidates=CandidateParams(spread_cap=0))
    assert enumerate_candidates(inst, relaxed.candidates).relaxed
    ref = brute.solve(inst)
    for r in (static_cpsat.solve(inst, params=relaxed), static_milp.solve(inst, params=relaxed)):
        assert r.params["relaxed_candidates"] > 0 or r.params["expanded"] > 0    # the relaxed model was solved
        assert r.lower_bound <= ref.objective * (1 + 1e-9)
        assert r.objective == pytest.approx(ref.objective, rel=1e-6)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), var=st.sampled_from([0.0, 0.1]), pen=st.sampled_from([1.0, 1.5]))
def test_optimistic_spread_duration_is_a_lower_bound(seed: int, var: float, pen: float) -> None:
    inst = static_instance(gpus=6, nodes=3, jobs=1, sizes=(2, 3), seed=seed, variability=var, locality_penalty=pen,
                           cpu_mem=seed % 2 == 0)
    job = inst.jobs[0]
    classes = gpu_classes(inst)
    import itertools

    for n in job.sizes:
        for gs in itertools.combinations([g.id for g in inst.cluster.gpus], n):
            if len({g.split(":")[0] for g in gs}) < 2:
                continue
            tc: dict[str, int] = {}
            for g in gs:
                t = inst.cluster.gpu[g].type
                tc[t] = tc.get(t, 0) + 1
            lb = optimistic_duration(inst, job, classes, tc, spread=True)
            assert lb <= duration(job, Allocation(gs), inst.cluster) * (1 + 1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_bound_below_objective_and_optimum_below_heuristic(seed: int) -> None:
    inst = static_instance(gpus=6, nodes=2, jobs=3, sizes=(1, 2), seed=seed, variability=0.05, locality_penalty=1.2)
    r = static_cpsat.solve(inst)
    _check(inst, r)
    assert r.status == "optimal"
    model = build_packing(inst, enumerate_candidates(inst))
    h = static_greedy(inst, model, seed=seed)
    assert h is not None
    hv = replay(inst, static_schedule(inst, h, "h")).objective
    assert r.objective <= hv * (1 + 1e-9)


def test_infeasible_instance() -> None:
    inst = static_instance(gpus=3, nodes=1, jobs=2, sizes=(2,), seed=0)
    for m in ("cpsat", "milp", "milp-cbc", "brute", "auto"):
        r = methods.solve(inst, method=m)
        assert r.status == "infeasible", m
        assert r.schedule is None


def test_gpu_shortage_is_proven_infeasible_at_once() -> None:
    """Ten PS jobs of at least 2 GPUs on 12 GPUs: the counting proof answers before any model is built
    (before: every back end returned timeout_no_solution with a 4-s limit, CP-SAT needed 4.3 s to prove it)."""
    inst = static_instance(gpus=12, nodes=6, jobs=10, sizes=(2, 4), ps=True, seed=37, variability=0.05)
    for m in ("cpsat", "milp", "milp-cbc", "auto"):
        r = methods.solve(inst, method=m, time_limit=4, threads=2)
        assert r.status == "infeasible", (m, r.status)
        assert r.schedule is None and "12" in r.params.get("reason", "12")


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 4), gpus=st.integers(3, 5))
def test_gpu_shortage_only_for_instances_brute_force_finds_infeasible(seed: int, jobs: int, gpus: int) -> None:
    """Law: the counting proof (Hall's condition over GPU types) never calls a feasible instance infeasible."""
    inst = static_instance(gpus=gpus, nodes=1, jobs=jobs, sizes=((1, 2), (2,), (1, 3))[seed % 3], seed=seed,
                           types=(("v100", "k80"), ("v100",))[seed % 2])
    d = inst.to_dict()
    for k, j in enumerate(d["jobs"]):          # some jobs cannot use some types
        if k % 2 and len(j["samples_per_s"]) > 1:
            j["samples_per_s"]["k80"] = 0.0
    inst = Instance.from_dict(d)
    if static_gpu_shortage(inst) is not None:
        assert brute.solve(inst).status == "infeasible"


def test_interference_gives_valid_bound_not_optimal_claim() -> None:
    inst = static_instance(gpus=4, nodes=1, jobs=3, sizes=(1,), seed=3, interference=0.3)
    r = static_cpsat.solve(inst)
    _check(inst, r)
    assert r.status == "feasible"  # the model relaxes interference: gap > 0
    assert r.lower_bound < r.objective


@pytest.mark.parametrize("method", ["cpsat", "milp", "auto"])
def test_time_limit_respected(method: str) -> None:
    inst = static_instance(gpus=32, nodes=8, jobs=24, sizes=(1, 2, 4), seed=1, variability=0.05)
    t = time.perf_counter()
    r = methods.solve(inst, method=method, time_limit=1.0)
    el = time.perf_counter() - t
    assert el < 1.0 + 1.0  # candidate enumeration (~0.2 s here) is not interruptible
    assert r.status in ("optimal", "feasible", "timeout_no_solution")
    assert r.lower_bound is not None and r.lower_bound > 0
    if r.schedule is not None:
        _check(inst, r)


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_full_model_is_not_built_once_the_limit_is_spent(method: str) -> None:
    """64 jobs on 256 GPUs with 3 s: the LP of the reduced-cost filter runs out of time; the back end must
    not then build the full model (121 000 columns, 4 s more), but return the incumbent and bound."""
    inst = static_instance(gpus=256, nodes=32, jobs=64, variability=0.05, sizes=(1, 2, 4, 8), seed=0)
    t = time.perf_counter()
    r = methods.solve(inst, method=method, time_limit=3.0, threads=1, cache=None)
    assert time.perf_counter() - t < 3.0 + 1.5
    _check(inst, r)
    assert r.lower_bound is not None and 0 < r.lower_bound <= r.objective


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_a_short_limit_holds_after_the_lp_on_a_large_instance(method: str) -> None:
    """64 jobs on 256 GPUs with 5 s and 2 threads: the LP of the reduced-cost filter ends near the limit.
    Neither a second filtering round whose model cannot be set up in the time left (HiGHS: 31 000 columns,
    2.1 s) nor the repair's improving moves on a relaxed answer (2.7 s) may start then: they took these
    solves to 6.5-9.3 s."""
    inst = static_instance(gpus=256, nodes=32, jobs=64, seed=0, variability=0.05)
    t = time.perf_counter()
    r = methods.solve(inst, method=method, time_limit=5.0, threads=2, cache=None)
    assert time.perf_counter() - t < 5.0 + 1.5
    _check(inst, r)
    assert r.lower_bound is not None and 0 < r.lower_bound <= r.objective


def test_auto_races_static_members_only_when_the_limit_pays_for_it() -> None:
    inst = static_instance(gpus=8, nodes=2, jobs=4, sizes=(1, 2, 4), seed=5, variability=0.05)
    opt = methods.solve(inst, method="brute", cache=None).objective
    for limit, parallel in ((10.0, True), (2.0, False)):
        r = methods.solve(inst, method="auto", time_limit=limit, threads=2, cache=None)
        _check(inst, r)
        assert r.params["parallel"] is parallel
        assert r.status == "optimal" and r.objective == pytest.approx(opt, rel=1e-6)


def _auto_in_worker(_: int) -> tuple:
    inst = static_instance(gpus=8, nodes=2, jobs=4, sizes=(1, 2, 4), seed=5, variability=0.05)
    r = methods.solve(inst, method="auto", time_limit=10.0, threads=2, cache=None)
    return r.status, r.params["parallel"], r.objective


def test_auto_in_a_pool_worker_runs_its_members_in_turn() -> None:
    """A pool worker is daemonic and may not start processes: ``auto`` must not race there (it crashed)."""
    import multiprocessing as mp

    with mp.get_context("spawn").Pool(1) as pool:
        status, parallel, obj = pool.map(_auto_in_worker, [0])[0]
    inst = static_instance(gpus=8, nodes=2, jobs=4, sizes=(1, 2, 4), seed=5, variability=0.05)
    assert status == "optimal" and parallel is False
    assert obj == pytest.approx(methods.solve(inst, method="brute", cache=None).objective, rel=1e-6)


def test_timeout_without_solution_still_has_bound() -> None:
    inst = static_instance(gpus=64, nodes=8, jobs=32, sizes=(1, 2, 4, 8), seed=2, variability=0.05)
    r = static_cpsat.solve(inst, time_limit=0.01, warm=False, reduce=False)
    assert r.status in ("timeout_no_solution", "feasible")
    assert r.lower_bound is not None and r.lower_bound > 0
    if r.status == "timeout_no_solution":
        assert r.schedule is None and r.objective is None


def test_deterministic_preset() -> None:
    inst = static_instance(gpus=16, nodes=4, jobs=8, sizes=(1, 2, 4), seed=7, variability=0.05)
    a = methods.solve(inst, method="cpsat", threads=1, seed=3)
    b = methods.solve(inst, method="cpsat", threads=1, seed=3)
    assert a.schedule.to_dict() == b.schedule.to_dict()
    assert (a.objective, a.lower_bound, a.status) == (b.objective, b.lower_bound, b.status)


def test_hint_is_used_and_params_record_versions() -> None:
    inst = static_instance(gpus=8, nodes=2, jobs=4, sizes=(1, 2), seed=9, variability=0.05)
    ref = static_milp.solve(inst)
    r = static_cpsat.solve(inst, hint=ref.schedule, warm=False)
    assert r.objective == pytest.approx(ref.objective, rel=1e-6)
    assert "ortools" in r.params["versions"] and "highspy" in r.params["versions"]


def test_cli_solve(tmp_path) -> None:
    import json
    import subprocess
    import sys

    from jctlab.model import save_instance

    inst = static_instance(gpus=4, nodes=2, jobs=2, sizes=(1, 2), seed=1)
    p = tmp_path / "i.json"
    save_instance(inst, p)
    out = subprocess.run([sys.executable, "-m", "jctlab.cli", "solve", str(p), "--method", "cpsat", "--time-limit", "5",
                          "--threads", "1", "--seed", "0", "--out", str(tmp_path / "s.json"), "--json"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["status"] == "optimal" and d["valid"]
    bad = subprocess.run([sys.executable, "-m", "jctlab.cli", "solve", str(p), "--method", "cpsat", "--nope", "1"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nope" in bad.stderr


def test_relaxed_family_is_expanded_not_repaired_badly(monkeypatch) -> None:
    """Regression: a relaxed multi-node family chosen at a tight bound used to be 'repaired' into a
    schedule 185 % worse (status feasible). The chosen families are now expanded into their exact
    members and the model solved again, so the proven optimum (≈ 2277, the exhaustive DP's) comes back."""
    from matching.methods import exhaustive
    from matching.suite import gavel_static

    inst = gavel_static(gpus=24, jobs=6, seed=8)
    ref = exhaustive(inst)
    for m in ("cpsat", "milp"):
        r = methods.solve(inst, method=m, time_limit=20, threads=1)
        _check(inst, r)
        assert r.status == "optimal", (m, r.params)
        assert r.objective == pytest.approx(ref.objective, rel=1e-6)
    # the expansion alone (no repair shortcut, and no market-matching incumbent, which is already
    # optimal here and would make the expansion unnecessary) must also reach the optimum
    monkeypatch.setattr(static_greedy_module, "_family_options", lambda *a, **k: [])
    monkeypatch.setattr(static_pipeline, "matching_allocations", lambda *a, **k: None)
    r = methods.solve(inst, method="cpsat", time_limit=20, threads=1)
    assert r.status == "optimal" and r.params["expanded"] > 0
    assert r.objective == pytest.approx(ref.objective, rel=1e-6)


@pytest.mark.parametrize("topology", [False, True])
def test_enumeration_fast_path_matches_speed_model(topology) -> None:
    """Bulk (numpy) single-node pricing equals speed.duration (up to VEC_SAFETY, from below), and
    pruning keeps every undominated allocation: the optimum is unchanged. With SPEC v1.1 sockets (two per
    node, ``qpi_factor`` 1.2) the rows that span them are priced slower too."""
    inst = static_instance(gpus=8, nodes=2, jobs=3, sizes=(1, 2, 4), seed=11, variability=0.1, topology=topology)
    if topology:
        d = inst.to_dict()
        d["cluster"]["pcie_interference"] = 0.0      # brute force prices no co-location
        inst = Instance.from_dict(d)
        assert inst.cluster.qpi_factor > 1
    cs = enumerate_candidates(inst, prune=False)
    model = build_packing(inst, cs)
    for c in model.cols:
        if c.exact:
            d = duration(inst.jobs[c.job], c.allocation(model.cands.classes), inst.cluster)
            assert c.duration <= d and c.duration == pytest.approx(d, rel=10 * VEC_SAFETY)
    ref = brute.solve(inst)
    r = static_cpsat.solve(inst)
    assert r.status == "optimal" and r.objective == pytest.approx(ref.objective, rel=1e-6)


def test_enumeration_deadline_falls_back_to_relaxed() -> None:
    inst = static_instance(gpus=64, nodes=8, jobs=32, sizes=(1, 2, 4, 8), seed=0, variability=0.05)
    cs = enumerate_candidates(inst, budget=Budget(0.0))
    assert cs.complete and all(not c.exact for c in cs.per_job[0])
    full = build_packing(inst, enumerate_candidates(inst))
    relaxed = build_packing(inst, cs)
    assert relaxed.trivial_bound() <= full.trivial_bound() * (1 + 1e-12)


def test_a_bound_above_a_replayed_schedule_is_dropped_as_a_wrong_proof() -> None:
    """A proven bound above the replayed objective of a valid schedule can only come from a wrong proof (a
    solver bug): it is dropped, recorded, and the status cannot be optimal; floating noise is clamped."""
    finish = result_of_schedule
    inst = static_instance(gpus=4, nodes=2, jobs=3, sizes=(1, 2), seed=1, variability=0.05, locality_penalty=1.2)
    r = brute.solve(inst)
    obj, t0 = r.objective, time.perf_counter()
    noise = finish(inst, "x", r.schedule, obj * (1 + 1e-9), t0, "x")
    assert (noise.status, noise.lower_bound, "bound_conflict" in noise.params) == ("optimal", obj, False)
    wrong = finish(inst, "x", r.schedule, obj * 1.01, t0, "x")
    assert (wrong.status, wrong.lower_bound) == ("feasible", None)
    assert wrong.params["bound_conflict"] == {"bound": obj * 1.01, "objective": obj}
    below = finish(inst, "x", r.schedule, obj * 0.9, t0, "x")
    assert (below.status, below.lower_bound, "bound_conflict" in below.params) == ("feasible", obj * 0.9, False)
