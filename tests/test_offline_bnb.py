"""The exact branch and bound for small offline instances (``bnb``) and its place in ``auto``.

Brute force is the reference (it shares no search code: every job permutation × every raw GPU subset);
the branch and bound must find the same optimum, prove it, and return a schedule that replays valid.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import oracle
from formulations import brute
from formulations.budget import Budget
from formulations.offline import bnb as offline_bnb
from formulations.offline import cpsat as offline_cpsat
from formulations.offline.concrete import concrete_options
from formulations.offline.search_nodes import Front
from formulations.schedules import objective_weights
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.replay import replay

from .oracle_offline_helpers import StopAfter, check_valid, tiny

RTOL = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def queue(seed: int, jobs: int = 5, **over):
    """4 GPUs on 2 nodes, arrivals every 5 minutes: jobs wait for GPUs."""
    kw = dict(gpus=4, nodes=2, jobs=jobs, interarrival_s=300, duration_h=(0.1, 2), max_size=4, variability=0.05,
              locality_penalty=1.2, seed=seed)
    kw.update(over)
    return offline_instance(**kw)


@pytest.mark.parametrize("seed", range(20))
def test_bnb_agrees_with_brute_force(seed):
    inst = tiny(seed)   # with locality, variability, elastic sizes, CPU/memory levels and parameter servers
    ref = brute.solve(inst)
    r = offline_bnb.solve(inst)
    check_valid(inst, r)
    assert r.status == "optimal"
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL), (r.objective, ref.objective)


@pytest.mark.parametrize("seed", range(6))
def test_bnb_proves_queues_brute_force_confirms(seed):
    inst = queue(seed)
    ref = brute.solve(inst)
    r = offline_bnb.solve(inst)
    check_valid(inst, r)
    assert r.status == "optimal"
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), weighted=st.booleans())
def test_bnb_optimum_is_brute_force_optimum(seed, jobs, weighted):
    inst = queue(seed, jobs=jobs, interarrival_s=[60, 300, 900][seed % 3], gpus=2 + seed % 3, nodes=1 + seed % 2,
                 objective="weighted_jct" if weighted else "mean_jct")
    if weighted:
        inst = inst.replace_jobs([dataclasses.replace(j, weight=1.0 + (i % 3)) for i, j in enumerate(inst.jobs)])
    ref = brute.solve(inst)
    r = offline_bnb.solve(inst)
    check_valid(inst, r)
    assert r.status == "optimal"
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL)


def test_a_queue_the_models_leave_open_is_proven_and_bounds_agree():
    inst = queue(0, jobs=9)
    r = offline_bnb.solve(inst, time_limit=60)
    check_valid(inst, r)
    assert r.status == "optimal"
    c = offline_cpsat.solve(inst, time_limit=3, threads=1, seed=0)
    check_valid(inst, c)
    # CP-SAT's bound is below the proven optimum and its schedule no better
    assert c.lower_bound <= r.objective * (1 + 1e-9)
    assert c.objective >= r.objective * (1 - 1e-9)


def test_a_hint_prunes_and_is_returned_when_optimal():
    inst = queue(1, jobs=6)
    first = offline_bnb.solve(inst)
    again = offline_bnb.solve(inst, hint=first.schedule)
    assert again.status == "optimal"
    assert math.isclose(again.objective, first.objective, rel_tol=RTOL)
    assert again.params["nodes"] < first.params["nodes"]


def test_time_limit_returns_best_schedule_and_a_valid_bound():
    inst = queue(1, jobs=10)
    r = offline_bnb.solve(inst, time_limit=0.3)
    assert r.status == "feasible"
    check_valid(inst, r)
    exact = offline_bnb.solve(inst, time_limit=120)
    assert exact.status == "optimal"
    assert r.lower_bound <= exact.objective * (1 + 1e-9) <= r.objective * (1 + 1e-9)
    assert 0.0 <= r.params["progress"] <= 1.0


def test_the_search_reads_the_clock_every_check_every_nodes():
    """A frame may push many children before the loop reads the clock again: the check counts nodes since the last
    one, so an expired budget stops the search at its next check (reading it only when the count was a multiple of
    CHECK_EVERY skipped most checks, and a search given 0.5 s ran 2 s)."""
    inst = queue(1, jobs=10)
    run = offline_bnb.Run.start(inst, None, 0.0)
    assert not run.resume(Budget(0.0))
    assert run.search.nodes <= 1      # the root, then the first check
    before = run.search.nodes
    clock = StopAfter(3)
    assert not run.search.resume(clock)
    # between two checks: CHECK_EVERY nodes, then at most one frame's children (every choice of every job)
    assert run.search.nodes - before <= 3 * (offline_bnb.CHECK_EVERY + sum(map(len, run.search.choices)))


def test_a_resumed_search_ends_where_an_uninterrupted_one_does():
    inst = queue(2, jobs=9)
    whole = offline_bnb.solve(inst)
    run = offline_bnb.Run.start(inst, None, 0.0)
    rounds = 0
    while not run.resume(Budget(0.01)):
        rounds += 1
    r = run.result()
    assert r.status == "optimal" and rounds > 0
    assert math.isclose(r.objective, whole.objective, rel_tol=RTOL)
    assert run.search.nodes == whole.params["nodes"]     # the same tree, searched in pieces


def test_interference_is_replayed_and_the_bound_stays_below():
    inst = tiny(5, interference=0.3, gpus=4, nodes=1, max_size=2)
    r = offline_bnb.solve(inst)
    check_valid(inst, r)
    ref = brute.solve(inst)
    assert r.lower_bound <= ref.objective * (1 + 1e-9)


@pytest.mark.parametrize("over, why", [
    (dict(objective="makespan"), "objective"),
    (dict(problem="preemptive"), "offline"),
    (dict(gpus=32, nodes=4, max_size=8), "enumerated"),
])
def test_not_applicable_gives_an_error_result(over, why):
    inst = queue(0, **over)
    r = offline_bnb.solve(inst)
    assert r.status == "error" and why in r.params["error"]
    assert r.schedule is None


def test_an_infeasible_job_is_infeasible():
    inst = queue(0, jobs=3)
    job = inst.jobs[0]
    inst = inst.replace_jobs([dataclasses.replace(job, sizes=(8,))] + list(inst.jobs[1:]))
    r = offline_bnb.solve(inst)
    assert r.status == "infeasible"


def test_auto_proves_a_small_queue_with_the_search():
    inst = queue(3, jobs=8)
    r = oracle.solve(inst, method="auto", time_limit=20, threads=1)
    check_valid(inst, r)
    assert r.status == "optimal" and r.params["members"] == ["bnb"]
    assert math.isclose(r.objective, offline_bnb.solve(inst).objective, rel_tol=RTOL)
    sched = r.claimed_schedule()
    assert replay(inst, sched).valid


def test_auto_hands_an_unfinished_search_to_the_members():
    inst = queue(1, jobs=12)
    r = oracle.solve(inst, method="auto", time_limit=1.5, threads=1)
    check_valid(inst, r)
    assert r.params["members"][0] == "bnb" and "bnb" in r.params["member_status"]



def _root_bound(inst) -> float:
    """The search's bound at its root, in objective units (what the search prunes against)."""
    s = offline_bnb.Search(inst, concrete_options(inst)[0])
    w = objective_weights(inst)
    return s._bound(s._evaluate(0.0, 0).first_of(), 0.0) - sum(wj * j.arrival for wj, j in zip(w, inst.jobs))


def test_mean_busy_time_bound_is_tight_on_identical_jobs():
    # four identical one-GPU jobs at time 0 on two identical GPUs: the optimum runs two waves, JCTs p, p, 2p, 2p
    # (sum 6p). Fluid WSPT gives mean busy times p/4, 3p/4, 5p/4, 7p/4, plus p/2 each: 6p, tight. The area and
    # earliest-completion bound alone gives max(p/2, p) + max(p, p) + 3p/2 + 2p = 5.5p.
    d = offline_instance(gpus=2, nodes=1, jobs=1, max_size=1, variability=0.0, seed=0).to_dict()
    d["jobs"] = [{**d["jobs"][0], "name": f"j{i}"} for i in range(4)]
    inst = Instance.from_dict(d, "<test>")
    ref = brute.solve(inst)
    assert math.isclose(_root_bound(inst), ref.objective, rel_tol=1e-7), (_root_bound(inst), ref.objective)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), jobs=st.integers(2, 5), weights=st.lists(st.integers(1, 9), min_size=5, max_size=5))
def test_root_bound_never_exceeds_the_optimum(seed, jobs, weights):
    """The root's bound, and the mean-busy-time bound under each GPU weighting (alike, at their speeds) alone: each
    at most the optimum."""
    inst = queue(seed, jobs=jobs, interarrival_s=[60, 300, 900][seed % 3], gpus=2 + seed % 3, nodes=1 + seed % 2,
                 objective="weighted_jct")
    inst = inst.replace_jobs([dataclasses.replace(j, weight=float(w)) for j, w in zip(inst.jobs, weights)])
    opt = brute.solve(inst).objective
    assert _root_bound(inst) <= opt * (1 + 1e-9)
    s = offline_bnb.Search(inst, concrete_options(inst)[0])
    offset = sum(wj * j.arrival for wj, j in zip(objective_weights(inst), inst.jobs))
    for k in range(len(s.sigma)):
        assert s._busy_bound_at(0.0, k) - offset <= opt * (1 + 1e-9)


#: rows of three fields: anywhere in a small grid, or on the plane a + b + c = 12, where no two distinct rows
#: dominate each other (so that fronts grow past their first allocation of 8)
ROW = st.one_of(st.lists(st.integers(0, 4), min_size=3, max_size=3),
                st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda ab: [ab[0], ab[1], 12 - ab[0] - ab[1]]))


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROW, min_size=10, max_size=80))
@example(rows=[[a, b, 12 - a - b] for a in range(7) for b in range(7)])     # a front of 49
def test_the_front_keeps_exactly_the_undominated_schedules(rows):
    """The dominance front against a plain list: a schedule is refused when a kept one is no larger in every field,
    else kept and every kept one no smaller in every field dropped; the growth and compaction paths are both
    taken."""
    front, kept = Front(3), []
    for r in rows:
        x = [float(v) for v in r]
        dominated = any(all(a <= b for a, b in zip(k, x)) for k in kept)
        assert front.add(x) is (not dominated)
        if not dominated:
            kept = [k for k in kept if not all(b <= a for a, b in zip(k, x))] + [x]
        assert sorted(map(tuple, front.cols[:, :front.n].T.tolist())) == sorted(map(tuple, kept))


@pytest.mark.parametrize("seed", range(3))
def test_weighting_gpus_at_their_speed_lifts_the_busy_bound_on_mixed_gpus(seed):
    """One V100 and one P100, four one-GPU jobs a minute apart: counted alike, the P100 does a V100's work and
    the bound is 11-15 % lower than with it weighted at its speed (0.56-0.65), which stays below the optimum."""
    inst = offline_instance(gpus=2, nodes=2, jobs=4, interarrival_s=60, duration_h=(0.1, 2), max_size=1,
                            variability=0.0, seed=seed)
    assert [g.type for g in inst.cluster.gpus] == ["v100", "p100"]
    s = offline_bnb.Search(inst, concrete_options(inst)[0])
    offset = sum(j.arrival for j in inst.jobs)
    alike, speed = (s._busy_bound_at(0.0, k) - offset for k in range(2))
    assert s.sigma[1][0] == 1.0 and 0.5 < s.sigma[1][1] < 0.7
    assert alike * 1.1 < speed <= brute.solve(inst).objective * (1 + 1e-9)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), jobs=st.integers(3, 5), stop=st.integers(1, 80), prices=st.booleans())
def test_a_stopped_search_bounds_the_optimum_by_its_open_nodes_and_resumes_intact(monkeypatch, seed, jobs, stop,
                                                                                 prices):
    """Stopped anywhere, the least bound over the open nodes is at least the root's and at most the optimum, and
    computing it leaves the search as it was: resumed, it ends where an uninterrupted search does, node for node."""
    monkeypatch.setattr(offline_bnb, "CHECK_EVERY", 1)
    inst = queue(seed, jobs)
    params = offline_bnb.BnbParams() if prices else offline_bnb.BnbParams(prices=None)
    opt = brute.solve(inst).objective
    whole = offline_bnb.Run.start(inst, None, 0.0, params=params)
    whole.resume(Budget(None))
    run = offline_bnb.Run.start(inst, None, 0.0, params=params)
    done = run.resume(StopAfter(stop))
    lb = run.search.open_bound() - run.offset
    assert run.search.root_bound - run.offset <= lb * (1 + 1e-12) + 1e-9
    assert lb <= opt * (1 + RTOL)
    if done:
        assert lb == pytest.approx(opt, rel=RTOL)
    run.resume(Budget(None))
    assert run.search.nodes == whole.search.nodes
    assert run.search.value == whole.search.value


def test_an_unfinished_search_reports_the_bound_of_its_open_nodes(monkeypatch):
    """Stopped part-way on a 9-job queue, the search has ruled out subtrees, and the least bound over what is left
    open is above the root's (what an unfinished search used to report)."""
    monkeypatch.setattr(offline_bnb, "CHECK_EVERY", 1)
    inst = queue(2, jobs=9)
    run = offline_bnb.Run.start(inst, None, 0.0, params=offline_bnb.BnbParams(prices=None))
    assert not run.resume(StopAfter(3000))
    r = run.result()
    assert r.status == "feasible"
    assert r.lower_bound > run.search.root_bound - run.offset
    assert r.lower_bound <= offline_bnb.solve(inst).objective * (1 + RTOL)
