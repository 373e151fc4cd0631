"""The exact special cases (formulations.special): proven optimal, equal to brute force and to the textbook value;
every bound of the general oracle at most the textbook optimum; the preemptive class gets a schedule."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import oracle
from formulations import brute
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline import preemptive_bound
from formulations.special.bound import lifted, release_shift_bound
from formulations.special.recognise import Textbook, classify
from formulations.special.solve import solve as special_solve
from jctlab.cli import main
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

from .special_cases import (enumerated_optimum, equal_release_instances, instance_dict, run_time_matrix,
                            spt_closed_form, unit_slot_preemptive_optimum)

REL = 1e-9
LAW = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def check_replayed(inst: Instance, r) -> None:
    """The schedule replays valid with the claimed objective, and the bound is at most it."""
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid, rep.error
    assert rep.objective == pytest.approx(r.objective, rel=REL)
    assert r.lower_bound <= r.objective


@LAW
@given(inst=st.sampled_from(["identical", "uniform", "unrelated"]).flatmap(equal_release_instances))
def test_equal_releases_optimal_and_equal_to_enumeration(inst):
    r = special_solve(inst)
    assert r is not None and r.status == "optimal"
    check_replayed(inst, r)
    opt = enumerated_optimum(inst)
    assert r.objective == pytest.approx(opt, rel=REL)
    assert r.lower_bound <= opt * (1 + 1e-12)
    if all(len(set(row)) == 1 for row in run_time_matrix(inst)):       # identical GPUs: the SPT closed form
        assert r.objective == pytest.approx(spt_closed_form([row[0] for row in run_time_matrix(inst)],
                                                            len(inst.cluster.gpus)), rel=REL)


@LAW
@given(inst=equal_release_instances("unrelated", weighted=True))
def test_one_gpu_weighted_is_wspt(inst):
    r = special_solve(inst)
    assert r is not None and r.params["special"] == Textbook.ONE_WSUM_C and r.status == "optimal"
    check_replayed(inst, r)
    assert r.objective == pytest.approx(enumerated_optimum(inst), rel=REL)


@settings(max_examples=10, deadline=None)
@given(inst=st.sampled_from(["identical", "uniform", "unrelated"]).flatmap(
    lambda k: equal_release_instances(k, max_jobs=4, max_gpus=2)))
def test_equal_to_brute_force(inst):
    r = special_solve(inst)
    b = brute.solve(inst)
    assert b.status == "optimal"
    assert r.objective == pytest.approx(b.objective, rel=REL)


def test_kinds_recognised():
    """Each GPU model is recognised as its textbook problem."""
    ident = Instance.from_dict(instance_dict([[3, 3, 3], [5, 5, 5], [1, 1, 1]], ["v100", "v100"]))
    unif = Instance.from_dict(instance_dict([[3, 6, 15], [5, 10, 25], [1, 2, 5]], ["v100", "p100"]))
    unrel = Instance.from_dict(instance_dict([[3, 1, 15], [5, 10, 2], [1, 2, 5]], ["v100", "p100", "k80"]))
    assert classify(ident).problem == Textbook.P_SUM_C
    assert classify(unif).problem == Textbook.Q_SUM_C
    assert classify(unrel).problem == Textbook.R_SUM_C
    # SPT on 2 identical GPUs: longest two in position 1, the shortest in 2: (5 + 3 + 2·1)/3
    assert special_solve(ident).objective == pytest.approx(10 / 3, rel=REL)
    # uniform: coefficients 1 (v100), 2 (p100: 2·1), 2 (v100, k=2); p = 5, 3, 1 -> 5·1 + 3·2 + 1·2 = 13
    assert special_solve(unif).objective == pytest.approx(13 / 3, rel=REL)


@pytest.mark.parametrize("change, reason", [
    (dict(arrivals=[0.0, 5.0, 0.0]), "releases differ"),
    (dict(objective="makespan"), "makespan"),
    (dict(objective="weighted_jct", weights=[1.0, 2.0, 1.0]), "weighted JCT on several GPUs"),
    (dict(classes=["A", "A", "B"]), "interference"),
])
def test_not_recognised(change, reason):
    d = instance_dict([[3, 1, 15], [5, 10, 2], [1, 2, 5]], ["v100", "p100"], **change)
    if "classes" in change:
        d["cluster"]["interference"] = {"A": {"A": 0.2}}
    why = classify(Instance.from_dict(d))
    assert isinstance(why, str) and reason in why
    assert special_solve(Instance.from_dict(d)) is None


def test_multi_gpu_jobs_not_recognised():
    d = instance_dict([[3, 1, 15], [5, 10, 2]], ["v100", "p100"])
    d["jobs"][0]["sizes"] = [1, 2]
    assert "more than one GPU" in classify(Instance.from_dict(d))
    d["jobs"][0]["sizes"] = [1, 4]          # 4 GPUs do not exist: still a single-GPU job
    assert classify(Instance.from_dict(d)).problem == Textbook.R_SUM_C


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_srpt_optimal_against_unit_slot_search(data):
    """One GPU, releases, preemption: SRPT is optimal (status), equals the exhaustive unit-slot search and an
    SRPT written here independently, and is at least the preemptive LP bound."""
    n = data.draw(st.integers(1, 3))
    p = data.draw(st.lists(st.integers(1, 3), min_size=n, max_size=n))
    a = data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    inst = Instance.from_dict(instance_dict([[x] * 3 for x in p], ["v100"], problem="preemptive",
                                            arrivals=[float(x) for x in a]))
    r = special_solve(inst)
    assert r is not None and r.status == "optimal"
    check_replayed(inst, r)
    assert r.objective == pytest.approx(unit_slot_preemptive_optimum(p, a), rel=REL)
    assert preemptive_bound.lower_bound(inst) <= r.objective * (1 + 1e-9)


def test_srpt_with_restarts_is_a_bound_and_a_schedule():
    """restart_s > 0 and SRPT preempts: not a special case; solve returns a schedule and SRPT's value as a bound."""
    d = instance_dict([[10] * 3, [2] * 3], ["v100"], problem="preemptive", arrivals=[0.0, 1.0], restart_s=5.0)
    inst = Instance.from_dict(d)
    assert special_solve(inst) is None
    r = oracle.solve(inst, "cpsat", time_limit=5)
    check_replayed(inst, r)
    # SRPT without restarts: C = 3 (j1) and 12 (j0) -> mean (12 + 2)/2 = 7; the restart costs j0 5 s more
    assert r.params["bounds"]["srpt"] == pytest.approx(7.0, rel=1e-9)
    assert r.lower_bound >= 7.0 * (1 - 1e-9)
    # the best is not to preempt: j0 then j1 (10, 11) -> 10.5; j1 waits: (1 wait + 2) ... j1 first at 1: (13, 2)
    assert r.objective == pytest.approx(min((10 + 11) / 2, (13 + 2) / 2, (17 + 2) / 2), rel=1e-9)


@settings(max_examples=6, deadline=None)
@given(inst=st.sampled_from(["identical", "unrelated"]).flatmap(
    lambda k: equal_release_instances(k, max_jobs=5, max_gpus=3)))
def test_every_bound_at_most_the_textbook_optimum(inst):
    """The general oracle's back ends (called directly, without the special cases) and the preemptive LP
    never claim a bound above the textbook optimum, and their schedules are never below it."""
    opt = enumerated_optimum(inst)
    assert preemptive_bound.lower_bound(inst, time_limit=5) <= opt * (1 + 1e-9)
    for backend in (offline_cpsat, offline_milp):
        r = backend.solve(inst, time_limit=5, threads=1, seed=0)
        assert r.lower_bound is None or r.lower_bound <= opt * (1 + 1e-9)
        assert r.objective >= opt * (1 - 1e-9)


@pytest.mark.parametrize("method", ["cpsat", "milp", "auto"])
def test_oracle_front_door_answers_special_cases(method):
    inst = Instance.from_dict(instance_dict([[3, 1, 15], [5, 10, 2], [1, 2, 5], [7, 7, 7]], ["v100", "p100", "k80"],
                                            gpus_per_node=1))
    r = oracle.solve(inst, method, time_limit=10)
    assert r.status == "optimal" and r.params["special"] == Textbook.R_SUM_C
    check_replayed(inst, r)
    assert r.objective == pytest.approx(enumerated_optimum(inst), rel=REL)


def test_static_single_gpu_jobs_are_an_assignment():
    d = instance_dict([[3, 1, 15], [5, 10, 2], [1, 2, 5]], ["v100", "p100", "k80", "k80"], problem="static")
    inst = Instance.from_dict(d)
    r = oracle.solve(inst, "cpsat", time_limit=10)
    assert r.status == "optimal" and r.params["special"] == Textbook.STATIC
    check_replayed(inst, r)
    assert r.objective == pytest.approx(brute.solve(inst).objective, rel=REL)
    assert r.objective == pytest.approx((1 + 2 + 1) / 3, rel=REL)


def test_static_without_assignment_is_left_to_the_oracle():
    """Two jobs that only the one K80 can host: no static schedule; the general oracle proves it."""
    d = instance_dict([[0, 0, 4], [0, 0, 5]], ["v100", "p100", "k80"], problem="static")
    inst = Instance.from_dict(d)
    assert classify(inst).problem == Textbook.STATIC and special_solve(inst) is None
    assert oracle.solve(inst, "cpsat", time_limit=5).status == "infeasible"


def test_preemptive_instance_gets_a_schedule():
    """Multi-GPU jobs on 4 GPUs: no special case; the best of the offline schedule and the baselines, replayed,
    with the preemptive LP bound (status feasible or optimal, never bound_only)."""
    inst = offline_instance(gpus=4, nodes=1, jobs=6, max_size=2, seed=3, problem="preemptive", interarrival_s=300)
    assert isinstance(classify(inst), str)
    r = oracle.solve(inst, "cpsat", time_limit=4)
    assert r.status in ("feasible", "optimal") and r.schedule is not None
    check_replayed(inst, r)
    cands = [v for v in r.params["candidates"].values() if isinstance(v, float)]
    assert r.objective == pytest.approx(min(cands), rel=REL)
    assert r.lower_bound >= r.params["bounds"]["preemptive-lp"] * (1 - 1e-12)


def test_preemptive_baselines_refused_by_the_simulator_are_skipped():
    """Restarts longer than 1 000 rounds: the round-based baselines are refused (SPEC §7), the solve goes on."""
    inst = offline_instance(gpus=2, nodes=1, jobs=3, max_size=2, seed=1, problem="preemptive", restart_s=1e6)
    r = oracle.solve(inst, "cpsat", time_limit=3)
    assert r.status in ("feasible", "optimal")
    check_replayed(inst, r)
    tried = {k: v for k, v in r.params["candidates"].items() if "+" in k}
    assert tried and all(str(v).startswith("refused") for v in tried.values())


def test_cli_solve_special(tmp_path, capsys):
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(instance_dict([[3, 3, 3], [5, 5, 5], [1, 1, 1]], ["v100", "v100"])))
    code = main(["solve", str(path), "--method", "cpsat", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["status"] == "optimal" and out["valid"]
    assert out["objective"] == pytest.approx(10 / 3, rel=REL) and math.isclose(out["lower_bound"], 10 / 3, rel_tol=1e-9)


@settings(max_examples=10, deadline=None)
@given(inst=st.sampled_from(["identical", "unrelated"]).flatmap(
    lambda k: equal_release_instances(k, max_jobs=4, max_gpus=2, spread=True)))
def test_release_shift_bound_at_most_brute_force(inst):
    """Releases that differ: the shifted textbook optimum (and SRPT on one GPU) bounds the offline optimum, and
    the oracle's bound is at least it."""
    b = release_shift_bound(inst)
    opt = brute.solve(inst).objective
    assert b is not None and b <= opt * (1 + 1e-9)
    r = oracle.solve(inst, "cpsat", time_limit=5)
    assert r.lower_bound >= b * (1 - 1e-12) and r.lower_bound <= opt * (1 + 1e-9)
    check_replayed(inst, r)


@settings(max_examples=15, deadline=None)
@given(inst=equal_release_instances("unrelated", max_jobs=5, max_gpus=3))
def test_release_shift_bound_is_tight_at_equal_releases(inst):
    assert release_shift_bound(inst) == pytest.approx(special_solve(inst).objective, rel=1e-9)


def test_lifted_bound():
    base = Result(None, 10.0, 8.0, SolveStatus.FEASIBLE, 1.0, "x")
    assert lifted(base, 9.0).lower_bound == 9.0 and lifted(base, 9.0).status == "feasible"
    assert lifted(base, 10.0).status == "optimal"
    assert lifted(base, 7.0).lower_bound == 8.0
    wrong = lifted(base, 11.0)      # above the replayed objective: a wrong proof, dropped
    assert wrong.lower_bound == 8.0 and "bound_conflict" in wrong.params
