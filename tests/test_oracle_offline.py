"""Offline oracles (CP-SAT, MILP with HiGHS and CBC) and the preemptive lower bound.

Small instances, one thread: the exact models must agree with brute force; every bound must stay
below the optimum; every schedule must replay valid with its claimed objective.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.budget import Budget
from formulations.offline import classes as offline_classes
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import cpsat_phases, decode as offline_decode
from formulations.offline import milp as offline_milp
from formulations.offline import preemptive_bound
from formulations.offline.classes import (class_levels, class_options, hybrid_node_options, node_complete_options,
                                          p_min, spread_options, trivial_bound)
from formulations.offline.concrete import ConcreteParams, concrete_options, job_infeasible
from formulations.offline.cpsat import CpsatParams
from formulations.offline.durations import single_node_lb, spread_lb
from formulations.offline.cpsat_model import (SAT_PARAMS, CpsatRun, ModelHint, bound_from_units, solve_option_model,
                                              time_unit)
from formulations.offline.cpsat_phases import core_params, exact_params
from formulations.offline.decode import decode, pin_gpus
from formulations.offline.greedy import greedy
from formulations.offline.hints import hint_assignment, pattern_of
from formulations.offline.list_scheduling import SGS
from formulations.offline.local_search import (SearchParams, _move, improve, local_search, search_options,
                                               spread_candidates, with_allocations, with_spread_candidates)
from formulations.offline.milp import MilpParams
from formulations.offline.milp_model import MilpModelParams, _subsets as milp_subsets, build as milp_build
from formulations.offline.milp_model import run_solver, to_objective
from formulations.offline.node_exact import assignment_of, node_decode, node_exact
from formulations.offline.options import (binding_resources, capacities, demand_of, dominated, fits_alone,
                                          node_groups, options_for_set, ps_choices, rho, single_node, undominated)
from formulations.offline.pipeline import OfflineParams, class_resources, preemptive_lb
from formulations.offline.retime import best_retime, class_chooser, fixed_chooser, retime
from formulations.results import result_of_incumbent
from jctlab.errors import InputError
from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.replay import replay
from jctlab.speed import SpeedError, duration
from oracle import methods, portfolio
from oracle.dispatch import dispatch

RTOL = 1e-6
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
#: the large-instance path (no complete enumeration) on any instance
LARGE = OfflineParams(concrete=ConcreteParams(complete_limit=0))


def solve_model(inst, opts, res, *, time_limit, threads, seed, hint=None, hint_gpus=None, sat_params=None, **model):
    """The option model with its run and hint given as keywords."""
    return solve_option_model(inst, opts, res, CpsatRun(time_limit, threads, seed, sat_params),
                              None if hint is None else ModelHint(hint, hint_gpus), **model)


def tiny(seed: int, **over) -> Instance:
    kw = dict(gpus=2 + seed % 3, nodes=1 + seed % 2, jobs=3 + seed % 2, max_size=[1, 2, 4][seed % 3],
              variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.2 * (seed % 3), cpu_mem=seed % 4 == 1,
              ps=seed % 4 == 2, elastic=0.7, seed=seed, interarrival_s=600, duration_h=(0.1, 1.0))
    kw.update(over)
    return offline_instance(**kw)


def check_valid(inst, res):
    assert res.schedule is not None
    rep = replay(inst, res.claimed_schedule())
    assert rep.valid, rep.error
    assert math.isclose(rep.objective, res.objective, rel_tol=RTOL)
    assert res.lower_bound <= res.objective * (1 + 1e-9)
    return rep


SOLVERS = {
    "cpsat": lambda inst, off=OfflineParams(): offline_cpsat.solve(inst, threads=1, seed=0, params=CpsatParams(off)),
    "highs": lambda inst, off=OfflineParams(): offline_milp.solve(inst, backend="highs", params=MilpParams(off)),
    "cbc": lambda inst, off=OfflineParams(): offline_milp.solve(inst, backend="cbc", params=MilpParams(off)),
}


@pytest.mark.parametrize("seed", range(20))
def test_exact_models_agree_with_brute_force(seed):
    inst = tiny(seed)
    ref = brute.solve(inst)
    assert ref.status == "optimal"
    opt = ref.objective
    for name, f in SOLVERS.items():
        r = f(inst)
        check_valid(inst, r)
        assert r.status == "optimal", (name, r.status, r.objective, r.lower_bound)
        assert math.isclose(r.objective, opt, rel_tol=RTOL), (name, r.objective, opt)
        assert r.lower_bound <= opt * (1 + 1e-9)
    # the preemptive relaxation bounds every offline schedule, the optimum included
    assert preemptive_bound.lower_bound(inst) <= opt * (1 + 1e-9)
    assert trivial_bound(inst) <= opt * (1 + 1e-9)


@pytest.mark.parametrize("objective", ["weighted_jct", "makespan"])
@pytest.mark.parametrize("seed", [3, 7])
def test_other_objectives_agree(seed, objective):
    inst = tiny(seed, objective=objective)
    if objective == "weighted_jct":
        jobs = [j.__class__(**{**j.__dict__, "weight": 1.0 + (i % 3)}) for i, j in enumerate(inst.jobs)]
        inst = inst.replace_jobs(jobs)
    opt = brute.solve(inst).objective
    for f in SOLVERS.values():
        r = f(inst)
        check_valid(inst, r)
        assert r.status == "optimal"
        assert math.isclose(r.objective, opt, rel_tol=RTOL)
    assert preemptive_bound.lower_bound(inst) <= opt * (1 + 1e-9)


def test_interference_incumbent_is_replayed_and_bound_stays_valid():
    inst = tiny(5, interference=0.3, gpus=4, nodes=1, max_size=2)
    ref = brute.solve(inst)
    for f in SOLVERS.values():
        r = f(inst)
        check_valid(inst, r)  # objective = replayed with interference
        assert r.lower_bound <= ref.objective * (1 + 1e-9)


def test_relaxed_path_bound_below_optimum():
    """Force the large-instance path (relaxed classes + node-exact model) on small instances."""
    for seed in (0, 4, 9):
        inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
        opt = brute.solve(inst).objective
        for f in SOLVERS.values():
            r = f(inst, LARGE)
            check_valid(inst, r)
            assert r.lower_bound <= opt * (1 + 1e-9)
            assert r.objective >= opt * (1 - 1e-9)


def first_class_model_reports(monkeypatch, change) -> list:
    """The first CP-SAT model of the phases (the class model, default workers) reports ``change(its result)``.
    Returns the list of each CP-SAT call's ``sat_params``."""
    real = cpsat_phases.solve_option_model
    calls: list = []

    def first_changed(inst, opts, res, run, *a, **kw):
        out = real(inst, opts, res, run, *a, **kw)
        calls.append(run.sat_params)
        return change(out) if len(calls) == 1 else out

    monkeypatch.setattr(cpsat_phases, "solve_option_model", first_changed)
    return calls


@pytest.mark.parametrize("threads", [1, 2])
def test_core_workers_after_an_unproven_class_model_keep_a_valid_bound(monkeypatch, threads):
    """The class model counts as unproven by the default workers, so the core-based ones solve it again
    (and then the later models): bound ≤ brute-force optimum, incumbent replayed."""
    calls = first_class_model_reports(
        monkeypatch, lambda out: dataclasses.replace(out, status="FEASIBLE") if out.found else out)
    for seed in (0, 9):
        calls.clear()
        inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
        opt = brute.solve(inst).objective
        r = offline_cpsat.solve(inst, time_limit=8, threads=threads, seed=0, params=CpsatParams(LARGE))
        check_valid(inst, r)
        assert r.lower_bound <= opt * (1 + 1e-9) and r.objective >= opt * (1 - 1e-9)
        core = [ph for ph in r.params["phases"] if ph["phase"] == "relaxed-core"]
        assert len(core) == 1 and core[0]["status"] == "OPTIMAL"
        assert calls[0] is None and calls[1] == core_params(threads) and len(calls) >= 3


def test_local_search_takes_the_core_workers_time_when_the_class_model_has_no_solution(monkeypatch):
    """The default workers find no class solution (as on PAL's 160-job workloads): no core-based run of the
    class model; local search gets the rest, and the result is still replayed with a valid bound."""
    calls = first_class_model_reports(monkeypatch, lambda out: dataclasses.replace(out, status="UNKNOWN", choice=None))
    inst = tiny(0, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
    opt = brute.solve(inst).objective
    r = offline_cpsat.solve(inst, time_limit=4, threads=1, seed=0, params=CpsatParams(LARGE))
    check_valid(inst, r)
    assert r.lower_bound <= opt * (1 + 1e-9)
    phases = [ph["phase"] for ph in r.params["phases"]]
    assert phases == ["local-search", "relaxed", "lagrangian", "time-indexed-lp", "local-search",
                      "node-decode"], phases
    assert calls == [None]              # one CP-SAT model: the class model, default workers


def _spy_members(monkeypatch) -> list:
    """Record (member, threads, time limit, when) of every member ``auto`` starts in this process."""

    real, seen = portfolio._member, []

    def spy(member, name, inst, time_limit, threads, *a):
        seen.append((name, threads, time_limit, time.perf_counter()))
        return real(member, name, inst, time_limit, threads, *a)

    monkeypatch.setattr(portfolio, "_member", spy)
    return seen


def test_auto_runs_offline_members_in_turn_with_every_thread(monkeypatch):
    """Offline ``auto`` with 2 threads where no allocation is enumerated: CP-SAT, then (unless it proved
    optimality) HiGHS, each with both threads, not side by side with one each; the result is the brute-force
    optimum."""

    seen = _spy_members(monkeypatch)
    inst = tiny(6, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08)   # no queue: preemptive LP = Σ(a_j + p_j)
    t0 = time.perf_counter()
    params = portfolio.PortfolioParams(exact_first=False, race_max_s_per_job=math.inf)
    r = portfolio.portfolio(inst, time_limit=20, threads=2, member=dispatch, params=params)
    check_valid(inst, r)
    assert r.status == "optimal" and r.objective == pytest.approx(brute.solve(inst).objective, rel=RTOL)
    assert r.params["parallel"] is False and r.params["queue"] is False
    # CP-SAT first, with both threads and its share of what was left of the limit when it started
    share = params.offline_cpsat_share
    name, threads, limit, at = seen[0]
    assert (name, threads) == ("cpsat", 2)
    assert share * (20 - (at - t0)) - 1e-6 <= limit <= share * 20
    assert all(t == 2 for _, t, _, _ in seen)


def test_auto_gives_cpsat_every_thread_and_the_limit_where_every_allocation_is_enumerated(monkeypatch):
    """A queue whose every allocation is enumerated (CP-SAT's exact model applies): ``auto`` with 2 threads does
    not race (that left its CP-SAT member one thread, and its bound below CP-SAT's alone on small queues) and runs
    no queue test of its own: CP-SAT first with both threads and all of the limit but the hand-back margin. (The
    exact search, which proves such a tiny queue before the members start, is switched off.)"""

    seen = _spy_members(monkeypatch)
    params = portfolio.PortfolioParams(bnb_max_jobs=0, race_max_s_per_job=math.inf)   # the enumeration decides
    inst = tiny(0, gpus=4, nodes=2, jobs=5, max_size=4, interarrival_s=120, variability=0.08)
    assert preemptive_lb(inst, None) > params.race * trivial_bound(inst)  # a queue
    assert portfolio.exact_model_applies(inst)
    t0 = time.perf_counter()
    r = portfolio.portfolio(inst, time_limit=20, threads=2, member=dispatch, params=params)
    check_valid(inst, r)
    assert r.status == "optimal" and r.objective == pytest.approx(brute.solve(inst).objective, rel=RTOL)
    assert r.params["parallel"] is False and r.params["cpsat_first"] is True and r.params["queue"] is None
    name, threads, limit, at = seen[0]
    assert (name, threads) == ("cpsat", 2)
    handback = params.handback_s
    assert 20 - (at - t0) - handback - 1e-6 <= limit <= 20 - handback
    # the option counts that decide it: one job with more GPU subsets than the enumeration covers, and not
    big = offline_instance(gpus=16, nodes=2, jobs=4, max_size=8, seed=0)
    assert not portfolio.exact_model_applies(big) and not concrete_options(big)[1]


def test_auto_gives_cpsat_every_thread_where_the_limit_leaves_time_per_job(monkeypatch):
    """A queue whose allocations are not all enumerated, with at least ``race_max_s_per_job`` of the limit per job:
    no race (CP-SAT's class and node-exact proofs need both threads), CP-SAT first with both threads."""

    seen = _spy_members(monkeypatch)
    params = portfolio.PortfolioParams()
    inst = offline_instance(gpus=8, nodes=2, jobs=5, max_size=8, interarrival_s=60, duration_h=(0.1, 0.5),
                            variability=0.08, locality_penalty=1.2, seed=2)
    assert preemptive_lb(inst, None) > params.race * trivial_bound(inst) and not portfolio.exact_model_applies(inst)
    assert 20 >= params.race_max_s_per_job * len(inst.jobs)
    r = portfolio.portfolio(inst, time_limit=20, threads=2, member=dispatch, params=params)
    check_valid(inst, r)
    assert r.status == "optimal" and r.params["parallel"] is False and r.params["cpsat_first"] is True
    assert seen[0][:2] == ("cpsat", 2)


def test_auto_races_offline_members_on_a_queue():
    """Offline ``auto`` where jobs queue for GPUs (preemptive LP above RACE × Σ(a_j + p_j)/n): with 2
    threads CP-SAT and HiGHS race in two processes, with 1 thread they run in turn, HiGHS first; both
    give the brute-force optimum within the limit. (The exact search, which proves such a tiny queue
    before the members start, is switched off: test_offline_bnb.py covers it.)"""

    no_bnb = portfolio.PortfolioParams(bnb_max_jobs=0, exact_first=False, race_max_s_per_job=math.inf)
    inst = tiny(0, gpus=4, nodes=2, jobs=5, max_size=4, interarrival_s=120, variability=0.08)
    assert preemptive_lb(inst, None) > no_bnb.race * trivial_bound(inst)   # the case under test
    opt = brute.solve(inst).objective
    for threads, limit in ((2, 20), (1, 10)):
        t0 = time.perf_counter()
        r = portfolio.portfolio(inst, time_limit=limit, threads=threads, member=dispatch, params=no_bnb)
        check_valid(inst, r)
        assert time.perf_counter() - t0 < limit + 3
        assert r.status == "optimal" and r.objective == pytest.approx(opt, rel=RTOL)
        assert r.params["queue"] is True and r.params["parallel"] is (threads == 2)
        assert r.params["members"] == ["milp", "cpsat"]     # in turn (1 thread): HiGHS first
        assert set(r.params["member_status"]) <= {"cpsat", "milp-highs"}


def test_auto_offline_hint_is_no_worse_than_the_baselines():
    """``auto``'s offline hint is the best replayed schedule of its list-scheduling heuristic and of the
    non-preemptive baselines in ``BASELINE_HINTS`` (here a baseline is 24 % better than the heuristic), and
    ``auto`` returns no worse than its hint."""
    from formulations.offline.greedy import offline_greedy

    inst = offline_instance(gpus=16, nodes=4, jobs=20, max_size=8, seed=0, interarrival_s=200, variability=0.08,
                            locality_penalty=1.2, duration_h=(0.1, 1.0))
    heuristic = replay(inst, offline_greedy(inst)).objective
    base = [replay(inst, sc).objective for _, sc in portfolio._baseline_schedules(inst, Budget(None))]
    assert len(base) == len(portfolio.BASELINE_HINTS) and min(base) < 0.9 * heuristic     # the case under test
    hint = replay(inst, portfolio._heuristic(inst, 0, None))
    assert hint.valid and hint.objective == pytest.approx(min(base + [heuristic]), rel=1e-12)
    r = methods.solve(inst, method="auto", time_limit=3, threads=1, cache=None)
    check_valid(inst, r)
    assert r.objective <= hint.objective * (1 + 1e-9)


def _member_or_die(member, q, name, *args) -> None:
    """A race member whose HiGHS process dies without a word (as when the system kills it)."""


    if name == "milp":
        os._exit(1)
    portfolio._member_queue(member, q, name, *args)


def test_race_does_not_wait_for_a_member_that_died(monkeypatch):
    """A queue no member proves in 6 s: CP-SAT answers near the limit, HiGHS never; the race must end then,
    not at the limit + 5 s, and keep CP-SAT's answer."""

    monkeypatch.setattr(portfolio, "_member_queue", _member_or_die)
    inst = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=1)
    t = time.perf_counter()
    r = methods.solve(inst, method="auto", time_limit=6.0, threads=2, cache=None)
    assert time.perf_counter() - t < 6.0 + 2.0
    assert r.params["parallel"] is True and r.params["member_errors"] == ["a member ended without an answer"]
    assert set(r.params["member_status"]) == {"cpsat"}
    check_valid(inst, r)


def _member_dies(member, q, name, *args) -> None:

    os._exit(1)


def test_race_keeps_the_queue_tests_bound_when_every_member_died(monkeypatch):
    """The preemptive LP that decided the race is a bound of its own: with no member answering, `auto`
    still returns the heuristic schedule with that bound (before: no bound at all)."""

    monkeypatch.setattr(portfolio, "_member_queue", _member_dies)
    inst = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=1)
    r = methods.solve(inst, method="auto", time_limit=6.0, threads=2, cache=None)
    assert r.params["parallel"] is True and r.params["queue"] is True and r.params["member_status"] == {}
    check_valid(inst, r)
    assert r.lower_bound > trivial_bound(inst) * 1.01
    assert r.lower_bound <= preemptive_bound.lower_bound(inst) * (1 + 1e-6) + 1e-6


def test_milp_capacity_set_budget_keeps_a_valid_bound():
    """With no capacity-set row allowed (nonzero budget 0) the MILP is a relaxation: bound ≤ optimum,
    and the model says it is not exact."""
    for seed in (1, 5, 9):   # cpu_mem levels: node CPU/memory capacities bind
        inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, cpu_mem=True)
        opt = brute.solve(inst).objective
        r = offline_milp.solve(inst, params=MilpParams(model=MilpModelParams(nnz_budget=-1)))
        check_valid(inst, r)
        assert r.lower_bound <= opt * (1 + 1e-9) and r.objective >= opt * (1 - 1e-9)
        assert r.params["model"] == "exact+budget"


def test_milp_model_does_not_depend_on_the_order_of_its_resources():
    """Capacity sets go in pairs first over every resource, then triples, ..., up to the nonzero budget, so
    the model is the same in every order of the resources. (It used to follow the order of a Python set of
    resources, hence the hash seed: 8 GPUs / 12 jobs, seed 0, 10 s, bound 7 087 or 7 731 by PYTHONHASHSEED.)"""
    budget = MilpModelParams(nnz_budget=600)
    inst = offline_instance(gpus=8, nodes=2, jobs=8, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=0)
    opts = class_options(inst)
    res = sorted((r for r in capacities(inst) if r[0] in ("n", "all")), key=repr)

    def model(order):
        m = milp_build(inst, opts, order, budget)
        return [str(c) for c in m.prob.constraints.values()], m.exact

    (rows, exact), (rows_rev, _) = model(res), model(res[::-1])
    assert not exact                          # the budget cut the sets
    assert rows == rows_rev
    cap = capacities(inst)
    pairs = sum(len(S) == 2 for r in res for S, _ in milp_subsets(opts, r, cap[r], 10**6)[0])
    # every resource kept all its pairs (a capacity row of a pair: its options and the pair's two orders)
    assert pairs and sum(row.count("y_") == 2 and "x_" in row for row in rows) == pairs


@pytest.mark.parametrize("seed", range(8))
def test_milp_windows_from_the_optimum_keep_it(seed):
    """Starts limited to the latest start of a schedule no worse than the incumbent, a big-M per pair, the
    order fixed where two windows do not meet: with the optimum itself as the incumbent (the tightest
    windows) the exact MILP still proves it."""
    inst = tiny(seed, interarrival_s=7200)   # arrivals far apart: some windows do not meet
    opt = brute.solve(inst).objective
    concrete, complete = concrete_options(inst)
    assert complete
    res = {r for r in capacities(inst) if r[0] == "g"} | binding_resources(inst, concrete)
    m = milp_build(inst, concrete, res, incumbent=opt * (1 + 1e-9))
    ans = run_solver(m.prob, "highs", None, 1, 0)
    assert m.exact and ans.has_solution and ans.proven
    assert math.isclose(to_objective(inst, ans.bound), opt, rel_tol=1e-6)
    fixed = [v for v in m.prob.variables() if v.name.startswith("y_") and v.lowBound == v.upBound]
    assert fixed                                # some orders are fixed (none without an incumbent)
    assert not any(v.lowBound == v.upBound for v in milp_build(inst, concrete, res).prob.variables()
                   if v.name.startswith("y_"))


def test_decode_does_not_pin_gpus_past_its_deadline(monkeypatch):
    """The GPU pinning of a decode is a CP-SAT model with a deterministic limit, which a loaded machine
    stretched to 4.6 s after a 4-s MILP (returned after 7.8-8.5 s); it gets the time left before the
    deadline (and at most ``pin_wall_s``). With the deadline passed the decode still returns a valid schedule."""
    inst = tiny(0, gpus=4, nodes=2, jobs=4, max_size=4, variability=0.08)
    classes = class_options(inst)
    sol = solve_model(inst, classes, class_resources(inst), time_limit=5, threads=1,
                                        seed=0)
    walls = []
    real = offline_decode.pin_gpus

    def spy(*a, **kw):
        walls.append(kw.get("wall"))
        return real(*a, **kw)

    monkeypatch.setattr(offline_decode, "pin_gpus", spy)
    rep = offline_decode.decode(inst, classes, sol, "x", until=time.perf_counter() - 1.0).replay
    assert rep is not None and rep.valid
    assert walls and all(w is not None and w < 0 for w in walls)
    assert real(inst, classes, sol, wall=-1.0) == {} and real(inst, classes, sol, wall=None) != {}
    offline_decode.decode(inst, classes, sol, "x", until=time.perf_counter() + 30)
    assert walls[-1] is not None and 25 < walls[-1] <= 30


@pytest.mark.parametrize("seed", [0, 1, 3, 4])    # 0, 1: a spread job; 3, 4: single-node jobs only
def test_pinned_gpus_follow_the_model(seed):
    """pin_gpus gives each job GPUs of its option's class (node and size, or counts per node group)
    and, where the model holds single-node jobs only, never one GPU to two jobs running together."""
    inst = tiny(seed, gpus=8, nodes=4, jobs=5, max_size=4, variability=0.08, locality_penalty=1.3,
                cpu_mem=False, ps=False)
    classes = class_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("n", "all", "set")}
    sol = solve_model(inst, classes, res, time_limit=30, threads=1, seed=0)
    assert sol.choice is not None
    pinned = pin_gpus(inst, classes, sol)
    chosen = {j: classes[j][k] for j, k in enumerate(sol.choice)}
    assert set(pinned) == set(chosen)                       # class options only: every job is pinned
    for j, o in pinned.items():
        cls, gpus = chosen[j].cls, o.alloc.gpus
        if cls[0] == "node":
            assert len(gpus) == cls[2] and {g.split(":")[0] for g in gpus} == {cls[1]}
        else:
            assert len(gpus) == cls[1]
            for nodes, c in cls[3]:
                assert sum(g.split(":")[0] in nodes for g in gpus) == c
    if all(o.cls[0] == "node" for o in chosen.values()):
        u = sol.unit
        end = {j: sol.start[j] + math.floor(o.dur / u) for j, o in chosen.items()}
        for t in set(sol.start):
            run = [j for j in chosen if sol.start[j] <= t < end[j]]
            held = [g for j in run for g in pinned[j].alloc.gpus]
            assert len(held) == len(set(held))
    rep = decode(inst, classes, sol, "cpsat").replay
    assert rep.valid


@pytest.mark.parametrize("seed", [0, 1, 5])
def test_kept_concrete_gpus_and_spread_jobs_around_them(seed):
    """pin_gpus(keep_concrete=True) on a node-exact solution with spread jobs: single-node concrete
    options keep the model's GPUs, only the relaxed jobs get GPUs (with their group counts), and the
    decode that uses them replays valid."""
    inst = tiny(seed, gpus=8, nodes=4, jobs=6, max_size=4, variability=0.08, locality_penalty=1.3,
                cpu_mem=False, ps=False)
    mixed = node_complete_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all", "set")}
    sol = solve_model(inst, mixed, res, time_limit=30, threads=1, seed=0)
    chosen = {j: mixed[j][k] for j, k in enumerate(sol.choice)}
    relaxed = {j for j, o in chosen.items() if o.alloc is None}
    assert relaxed and len(relaxed) < len(chosen)           # the case this variant is for
    kept = pin_gpus(inst, mixed, sol, keep_concrete=True)
    assert set(kept) == relaxed
    for j, o in kept.items():
        gpus = o.alloc.gpus
        assert len(gpus) == chosen[j].cls[1] and len({g.split(":")[0] for g in gpus}) > 1
        for nodes, c in chosen[j].cls[3]:
            assert sum(g.split(":")[0] in nodes for g in gpus) == c
    rep = decode(inst, mixed, sol, "cpsat").replay
    assert rep.valid
    assert rep.objective >= bound_from_units(inst, sol.bound_units, sol.unit)


def test_a_job_that_needs_more_cpus_than_the_cluster_is_infeasible_at_once():
    """An 8-GPU PS job on 8 GPUs whose fair shares take every CPU: no node has room for its server, whatever
    the placement. Too many GPU subsets to enumerate, so before CP-SAT and HiGHS searched the relaxed
    path and returned timeout_no_solution with a bound; the CPU count proves it at once."""
    d = offline_instance(gpus=8, nodes=2, jobs=4, max_size=4, ps=True, seed=1).to_dict()
    d["jobs"][1]["sizes"] = [8]
    inst = Instance.from_dict(d)
    assert inst.jobs[1].ps is not None and not concrete_options(inst)[1]
    for f in (lambda: offline_cpsat.solve(inst, time_limit=3), lambda: offline_milp.solve(inst, time_limit=3)):
        r = f()
        assert r.status == "infeasible" and "j1" in r.params["reason"]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), ps=st.booleans(), cpu_mem=st.booleans())
def test_cpu_count_calls_only_infeasible_jobs_infeasible(seed, ps, cpu_mem):
    """Law: when the CPU/GPU count says a job can never run, brute force finds no schedule either."""
    gpus = 2 + seed % 3
    d = offline_instance(gpus=gpus, nodes=1 + seed % 2, jobs=2, max_size=4, ps=ps, cpu_mem=cpu_mem, seed=seed,
                         elastic=0.5).to_dict()
    d["jobs"][1]["sizes"] = [gpus] if seed % 3 else sorted({1, gpus})     # the whole cluster (a PS job if ps)
    inst = Instance.from_dict(d)
    if job_infeasible(inst, [], False) is not None:
        assert brute.solve(inst).status == "infeasible"
    elif not cpu_mem:
        assert brute.solve(inst).status != "infeasible"     # and the converse, at the fair share


def _infeasible() -> Instance:
    d = tiny(0).to_dict()
    d["jobs"][1]["samples_per_s"] = {"tpu": 10.0}  # no GPU of the cluster can host it
    return Instance.from_dict(d)


def test_infeasible_instance():
    inst = _infeasible()
    for f in SOLVERS.values():
        r = f(inst)
        assert r.status == "infeasible" and r.schedule is None
    assert preemptive_bound.solve(inst).status == "infeasible"


def test_wrong_problem_class_is_bad_input():
    inst = static_instance(gpus=2, nodes=1, jobs=2, sizes=(1,), seed=0)
    with pytest.raises(InputError):
        offline_cpsat.solve(inst)
    with pytest.raises(InputError):
        offline_milp.solve(inst)


@pytest.mark.parametrize("method", ["cpsat", "highs", "auto"])
def test_time_limit_respected(method):

    inst = offline_instance(gpus=16, nodes=2, jobs=14, interarrival_s=300, max_size=8, variability=0.05,
                            locality_penalty=1.2, seed=1)
    t = time.perf_counter()
    if method == "cpsat":
        r = offline_cpsat.solve(inst, time_limit=2.0)
    elif method == "highs":
        r = offline_milp.solve(inst, time_limit=2.0)
    else:   # under RACE_MIN_S: no queue test, the members in turn (HiGHS only with MEMBER_MIN_S left)
        r = methods.solve(inst, method="auto", time_limit=2.0, threads=2, cache=None)
        assert r.params["queue"] is None and r.params["parallel"] is False
    assert time.perf_counter() - t < 6.0
    assert r.status in ("optimal", "feasible", "timeout_no_solution")
    if r.status == "timeout_no_solution":
        assert r.schedule is None and r.lower_bound is not None
    else:
        check_valid(inst, r)
    assert r.lower_bound >= trivial_bound(inst) * (1 - 1e-9)


def test_time_limit_respected_on_identical_gpus_with_parameter_servers():
    """Nodes of identical GPUs (no variability) and PS jobs: the node-exact model holds thousands of
    equivalent GPU sets × PS placements, and CP-SAT's presolve symmetry pass (not interruptible) ran
    10-14 s past a 4-s limit; it is off (``SAT_PARAMS``)."""
    inst = offline_instance(gpus=24, nodes=3, jobs=6, types=("a100", "t4"), interarrival_s=120, max_size=4,
                            elastic=0.5, ps=True, seed=7)
    t = time.perf_counter()
    r = offline_cpsat.solve(inst, time_limit=4.0, threads=1)
    assert time.perf_counter() - t < 6.0
    check_valid(inst, r)


def test_a_passed_set_up_deadline_cuts_the_restricted_options_to_each_jobs_fastest_sets():
    """Past its deadline the restricted enumeration keeps, for each job still to enumerate, only the
    ``CUT_SETS`` fastest GPU sets of each size (256 GPUs with PS took 5.3 s of a 1-s limit); the cut space is
    part of the full one, leaves no job without options, and is not kept for later calls."""
    inst = offline_instance(gpus=32, nodes=4, jobs=6, ps=True, max_size=4, variability=0.05, seed=2)
    cut, complete = concrete_options(inst, until=time.perf_counter() - 1.0)
    full, complete2 = concrete_options(inst)
    assert not complete and not complete2 and all(cut)
    assert concrete_options(inst)[0] == full       # the full space is what later calls get
    for j, (c, f) in enumerate(zip(cut, full)):
        assert {(o.alloc, o.dur) for o in c} <= {(o.alloc, o.dur) for o in f}
        for n in inst.jobs[j].sizes:
            def speeds(opts):
                return {sum(rho(inst.jobs[j], inst.cluster.gpu[g]) for g in o.alloc.gpus): o.alloc.gpus
                        for o in opts if len(o.alloc.gpus) == n}
            assert len(set(speeds(c).values())) <= ConcreteParams().cut_sets
            assert max(speeds(c), default=None) == max(speeds(f), default=None)   # each size's fastest set kept
    assert sum(map(len, cut)) < sum(map(len, full))


def test_no_model_is_built_when_the_set_up_took_the_limit():
    """A limit the incumbent and the bounds already took (a large instance, a very short limit): the
    greedy schedule and the bound are returned at once, replayed, instead of models given no time."""
    inst = offline_instance(gpus=64, nodes=8, jobs=20, ps=True, variability=0.05, seed=0)
    r = offline_cpsat.solve(inst, time_limit=1e-3, threads=1)
    assert r.params["model"] == "none (no time left)"
    assert all(p["phase"] == "local-search" for p in r.params.get("phases", []))
    check_valid(inst, r)
    assert r.lower_bound >= trivial_bound(inst) * (1 - 1e-9)


def test_option_sets_are_computed_once_per_instance_and_handed_out_as_fresh_lists(monkeypatch):
    inst = tiny(2, gpus=4, nodes=2, jobs=4, max_size=2)
    a, b = class_options(inst), class_options(inst)
    assert a == b and a is not b and a[0] is not b[0]
    a[0].clear()                                        # a caller's list is its own
    assert class_options(inst) == b
    calls = []
    real = offline_classes._node_complete_options
    monkeypatch.setattr(offline_classes, "_node_complete_options", lambda i, lim: calls.append(lim) or real(i, lim))
    first = node_complete_options(inst)
    assert node_complete_options(inst) == first and node_complete_options(inst, limit=5) is None
    assert calls == [20000, 5]
    twin = tiny(2, gpus=4, nodes=2, jobs=4, max_size=2)       # an equal instance: its own entry
    assert node_complete_options(twin) == first and calls == [20000, 5, 20000]


def test_deterministic_with_one_thread():
    inst = tiny(6, gpus=4, nodes=2, jobs=4, max_size=2)
    a = offline_cpsat.solve(inst, threads=1, seed=3)
    b = offline_cpsat.solve(inst, threads=1, seed=3)
    assert a.schedule.segments == b.schedule.segments and a.lower_bound == b.lower_bound
    c = offline_milp.solve(inst)
    d = offline_milp.solve(inst)
    assert c.schedule.segments == d.schedule.segments


def test_preemptive_solve_is_bound_only_with_valid_incumbent():
    inst = offline_instance(gpus=8, nodes=2, jobs=8, problem="preemptive", seed=2, variability=0.05)
    r = preemptive_bound.solve(inst)
    assert r.status == "bound_only"
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid, rep.error
    assert r.lower_bound <= r.objective


def test_hint_is_used_as_incumbent():
    inst = tiny(2)
    opt = brute.solve(inst)
    r = offline_cpsat.solve(inst, hint=opt.schedule)
    assert math.isclose(r.objective, opt.objective, rel_tol=RTOL)


# ----------------------------------------------------------------------------- laws (Hypothesis)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 10_000), cpu_mem=st.booleans(), ps=st.booleans())
def test_bounds_below_every_schedule(seed, order_seed, cpu_mem, ps):
    """Law: the preemptive LP bound and the class-relaxation durations never exceed what any valid
    schedule achieves (any job order, list-scheduled on the fastest free allocation)."""
    inst = offline_instance(gpus=6, nodes=2, jobs=5, max_size=4, variability=0.1, locality_penalty=1.3,
                            cpu_mem=cpu_mem, ps=ps, interarrival_s=400, seed=seed)
    order = list(range(len(inst.jobs)))
    random.Random(order_seed).shuffle(order)
    rep = retime(inst, order, class_chooser({}), "random", strict=bool(order_seed % 2)).replay
    assert rep is not None and rep.valid
    assert preemptive_bound.lower_bound(inst) <= rep.objective * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10_000))
def test_class_duration_bounds_below_every_allocation(seed, pick):
    """Law: a class's duration bound is ≤ the exact duration of every allocation in the class, and a job's
    p_min ≤ that of every allocation that fits its nodes."""
    inst = offline_instance(gpus=6, nodes=2, jobs=3, max_size=4, variability=0.2, locality_penalty=1.4,
                            cpu_mem=True, ps=seed % 2 == 0, seed=seed)
    rng = random.Random(pick)
    for j, job in enumerate(inst.jobs):
        n = rng.choice(job.sizes)
        gpus = rng.sample([g.id for g in inst.cluster.gpus], n)
        nodes = sorted({g.split(":")[0] for g in gpus})
        psn = tuple(rng.choice([nd.name for nd in inst.cluster.nodes]) for _ in range(rng.randint(1, job.ps.max_ps))) if job.ps else ()
        lv = rng.choice(job.level_choices)
        d = duration(job, Allocation(tuple(gpus), psn, *lv), inst.cluster)
        lb = single_node_lb(inst, job, nodes[0], n) if len(nodes) == 1 else spread_lb(inst, job, n)
        assert lb is not None and lb <= d * (1 + 1e-12)
        a = Allocation(tuple(gpus), psn, *lv)
        if fits_alone(demand_of(inst, job, a), capacities(inst)):
            # p_min leaves out levels that overload the node (no schedule holds more CPUs than it has)
            assert p_min(inst)[j] <= d * (1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10_000))
def test_node_classes_bound_every_single_node_allocation_with_its_cpus(seed, pick):
    """Law: every single-node allocation that fits its node (any GPUs, PS nodes and level) has an option of
    its class ("node", v, n), in the coarse classes and in those split by CPU/memory level, that is no
    longer and holds no more GPUs, CPUs or memory anywhere, so the class model
    with node CPU/memory cumulatives (a parameter server kept on the node costs its CPUs there, one
    elsewhere costs the locality penalty) is still a relaxation."""
    inst = offline_instance(gpus=6, nodes=2, jobs=4, max_size=4, variability=0.2, locality_penalty=1.4,
                            cpu_mem=seed % 3 != 2, ps=seed % 4 != 1, seed=seed)
    rng = random.Random(pick)
    coarse, fine = class_options(inst), class_options(inst, levels=True)
    names = [nd.name for nd in inst.cluster.nodes]
    for j, job in enumerate(inst.jobs):
        nd = rng.choice(inst.cluster.nodes)
        fit = [n for n in job.sizes if n <= len(nd.gpus)]
        if not fit:
            continue
        n = rng.choice(fit)
        psn = tuple(rng.choice(names) for _ in range(rng.randint(1, job.ps.max_ps))) if job.ps else ()
        a = Allocation(tuple(rng.sample([g.id for g in nd.gpus], n)), psn, *rng.choice(job.level_choices))
        d = duration(job, a, inst.cluster)
        held = demand_of(inst, job, a)
        if not fits_alone(held, capacities(inst)):
            continue        # more CPUs or memory than the node has: in no schedule
        for classes in (coarse, fine):
            same = [o for o in classes[j] if o.cls == ("node", nd.name, n)]
            assert any(o.dur <= d * (1 + 1e-12) and all(v <= held.get(r, 0) + 1e-9 for r, v in o.demand.items())
                       for o in same), (a, d, [(o.dur, o.demand) for o in same])


def _ps_beside_jobs(seed: int) -> Instance:
    """Two 3-GPU nodes of 12 CPUs: a 2-GPU PS job holds 8 CPUs at the fair share, so its PS on its own node
    leaves no CPUs for a 1-GPU job beside it; elsewhere the PS costs the locality penalty."""
    inst = tiny(seed, gpus=6, nodes=2, jobs=4, max_size=2, elastic=0.0, variability=0.05, locality_penalty=1.5,
                cpu_mem=False, ps=True, interarrival_s=60)
    d = inst.to_dict()
    for k, j in enumerate(d["jobs"]):
        j["sizes"] = [2] if k % 2 else [1]
        j["ps"] = ({"max_ps": 1, "ps_cpus": 2.0, "theta": [0.0, 0.01, 0.001, 0.001]} if k % 2 else None)
    return Instance.from_dict(d)


def test_class_model_charges_parameter_servers_their_cpus():
    """PS jobs that fill a node: the class model with node CPUs (PS on the node) and the locality penalty
    (PS elsewhere) bounds above the GPU-count-only class model (the old one) and below the brute-force
    optimum, and the relaxed path's bound stays valid."""
    tighter = 0
    for seed in (0, 1, 2):
        inst = _ps_beside_jobs(seed)
        opt = brute.solve(inst).objective
        classes = class_options(inst)
        res = class_resources(inst)
        assert any(r[0] == "cpu" for r in res)
        new = solve_model(inst, classes, res, time_limit=10, threads=1, seed=0)
        old = solve_model(inst, classes, {r for r in res if r[0] != "cpu"}, time_limit=10,
                                            threads=1, seed=0)
        assert new.status == old.status == "OPTIMAL"
        b_new = bound_from_units(inst, new.bound_units, new.unit)
        b_old = bound_from_units(inst, old.bound_units, old.unit)
        assert b_old <= b_new * (1 + 1e-9) and b_new <= opt * (1 + 1e-9)
        tighter += b_new > b_old * (1 + 1e-6)
        r = _solve_relaxed_path(inst)
        check_valid(inst, r)
        assert r.lower_bound <= opt * (1 + 1e-9) and r.lower_bound >= b_new * (1 - 1e-9)
    assert tighter >= 2


def _two_servers_beside_jobs(seed: int) -> Instance:
    """One 4-GPU node of 16 CPUs: a 2-GPU PS job (8 CPUs at the fair share) runs beside a 1-GPU job (4)
    with one server of 3 CPUs, not with two; two servers halve its PS overhead."""
    inst = tiny(seed, gpus=4, nodes=1, jobs=3, max_size=2, elastic=0.0, variability=0.05, locality_penalty=1.5,
                cpu_mem=False, ps=True, interarrival_s=60)
    d = inst.to_dict()
    for k, j in enumerate(d["jobs"]):
        j["sizes"] = [1] if k else [2]
        j["ps"] = None if k else {"max_ps": 2, "ps_cpus": 3.0, "theta": [0.0, 0.05, 0.001, 0.001]}
    return Instance.from_dict(d)


def test_class_model_prices_each_parameter_server_count():
    """A PS job's node class has one option per server count kept on the node (its overhead, its CPUs):
    the class bound is above the model that gave the fastest count the CPUs of one server (the old one) and
    below the brute-force optimum; options follow the count."""
    tighter = 0
    for seed in (0, 1, 2):
        inst = _two_servers_beside_jobs(seed)
        classes = class_options(inst)
        for j, job in enumerate(inst.jobs):
            if job.ps is None:
                continue
            local = sorted((o for o in classes[j] if o.cls == ("node", "n0", 2) and o.ps_local), key=lambda o: o.ps_count)
            assert [o.ps_count for o in local] == [1, 2]
            assert local[1].dur < local[0].dur
            assert local[1].demand[("cpu", "n0")] == local[0].demand[("cpu", "n0")] + 3.0
        merged = []
        for ol in classes:
            out = [o for o in ol if not o.ps_local]
            by: dict = {}
            for o in ol:
                if o.ps_local:
                    by.setdefault(o.cls, []).append(o)
            for c, os_ in by.items():
                fast = min(os_, key=lambda o: o.dur)
                cheap = min(os_, key=lambda o: o.demand[("cpu", c[1])])
                out.append(dataclasses.replace(fast, demand=cheap.demand, ps_count=None))
            merged.append(out)
        res = class_resources(inst)
        b_old, b_new, _ = _finer_class_bound(inst, (classes, res), (merged, res))
        tighter += b_new > b_old * (1 + 1e-6)
    assert tighter >= 1


def _finer_class_bound(inst, fine, coarse) -> tuple[float, float, float]:
    """Solves two class models, (options, resources) each, both to optimality: the finer one's bound lies
    between the coarser one's and the brute-force optimum. Returns (coarse bound, fine bound, optimum)."""
    b = []
    for opts, res in (coarse, fine):
        sol = solve_model(inst, opts, res, time_limit=10, threads=1, seed=0)
        assert sol.status == "OPTIMAL"
        b.append(bound_from_units(inst, sol.bound_units, sol.unit))
    opt = brute.solve(inst).objective
    assert b[0] <= b[1] * (1 + 1e-9) and b[1] <= opt * (1 + 1e-9)
    return b[0], b[1], opt


def _cpu_hungry_jobs(seed: int) -> Instance:
    """One 4-GPU node of 16 CPUs and three 2-GPU jobs that arrive together, each 30-60 % faster with 6 CPUs
    per GPU: two of them side by side fit only if one takes 2 CPUs per GPU (or both the fair share)."""
    inst = tiny(seed, gpus=4, nodes=1, jobs=3, max_size=2, elastic=0.0, variability=0.05, cpu_mem=True, ps=False,
                interarrival_s=1.0)
    d = inst.to_dict()
    for k, j in enumerate(d["jobs"]):
        j["sizes"] = [2]
        j["cpu_mem"] = {"levels": [[2.0, 16.0, 0.8], [6.0, 48.0, 1.3 + 0.1 * k]]}
    return Instance.from_dict(d)


def test_class_model_prices_each_cpu_memory_level():
    """Where a node's CPUs can bind, a node class has one option per undominated CPU/memory level (its
    speed, its CPUs and memory): the class bound is above the model that gave the fastest level the CPUs
    of the cheapest (the coarse classes) and below the brute-force optimum; the relaxed path runs it after
    the coarse model and decodes the model's levels into a valid schedule."""
    tighter = 0
    for seed in (0, 1, 2):
        inst = _cpu_hungry_jobs(seed)
        classes, coarse = class_options(inst, levels=True), class_options(inst)
        for ol, ol_c in zip(classes, coarse):
            levels = sorted((o.level for o in ol if o.cls == ("node", "n0", 2)), key=str)
            # (4, 32) on these nodes is the fair share (None, None): counted once
            assert levels == sorted([(None, None), (2.0, 16.0), (6.0, 48.0)], key=str), levels
            assert len(ol_c) == 1 and ol_c[0].dur == min(o.dur for o in ol) and ol_c[0].level is None
            assert ol_c[0].demand[("cpu", "n0")] == 2 * 2.0
        res = class_resources(inst, levels=True)
        assert ("cpu", "n0") in res
        b_old, b_new, opt = _finer_class_bound(inst, (classes, res), (coarse, class_resources(inst)))
        tighter += b_new > b_old * (1 + 1e-6)
        r = _solve_relaxed_path(inst)
        check_valid(inst, r)
        assert "relaxed-levels" in [p["phase"] for p in r.params["phases"]] or r.status == "optimal"
        assert b_new * (1 - 1e-9) <= r.lower_bound <= opt * (1 + 1e-9)
    assert tighter >= 2


def test_class_levels_only_where_cpus_or_memory_can_bind():
    """No split where the node holds every GPU at the job's largest level (and no job has parameter
    servers): one class, fastest level, least CPUs/memory; a dominated level is never an option."""
    inst = _cpu_hungry_jobs(0)
    nd = inst.cluster.nodes[0]
    job = inst.jobs[0]
    assert len(class_levels(inst, job, nd)) == 3
    roomy = dataclasses.replace(inst, cluster=dataclasses.replace(
        inst.cluster, nodes=(dataclasses.replace(nd, cpus=24.0, mem_gb=192.0),)))
    assert class_levels(roomy, job, roomy.cluster.nodes[0]) == [None]
    slow = dataclasses.replace(job, cpu_mem=dataclasses.replace(job.cpu_mem, levels=job.cpu_mem.levels + ((8.0, 64.0, 1.0),)))
    assert (8.0, 64.0) not in class_levels(inst, slow, nd)


def test_restricted_options_place_parameter_servers_off_a_full_node():
    """An 8-GPU PS job on 8-GPU nodes (32 CPUs, the fair share of 8 GPUs) has no allocation with its PS
    on its own node; the restricted concrete options (too many subsets to enumerate) then place the PS
    on another node, on large clusters too, so every job keeps concrete options."""
    d = offline_instance(gpus=24, nodes=3, jobs=4, max_size=8, elastic=0.0, ps=True, seed=3).to_dict()
    for k, j in enumerate(d["jobs"]):
        j["sizes"] = [8] if k % 2 else [2]      # jobs 1 and 3 have PS (the generator gives PS to odd jobs)
    inst = Instance.from_dict(d)
    assert all(inst.jobs[k].ps is not None for k in (1, 3))
    for any_nodes in (8, 0):
        concrete, complete = concrete_options(inst, ConcreteParams(ps_any_nodes=any_nodes))
        assert not complete and all(concrete)
        for j, ol in enumerate(concrete):
            if inst.jobs[j].ps is not None and len(ol[0].alloc.gpus) == 8:
                assert all(set(o.alloc.ps_nodes) - {g.split(":")[0] for g in o.alloc.gpus} for o in ol)


def test_milp_class_model_prices_each_cpu_memory_level():
    """The MILP's class model (large instances) is split by CPU/memory level like CP-SAT's: its bound is above
    the coarse classes' on CPU-hungry jobs, below the brute-force optimum, and its schedule replays valid."""
    tighter = 0
    for seed in (0, 1, 2):
        inst = _cpu_hungry_jobs(seed)
        opt = brute.solve(inst).objective
        b = []
        for limit in (0, MilpParams().class_level_limit):     # no split classes, then the default
            r = offline_milp.solve(inst, backend="highs", warm=False,
                                   params=MilpParams(LARGE, class_level_limit=limit))
            check_valid(inst, r)
            assert r.lower_bound <= opt * (1 + 1e-9) and r.params["model"].startswith("relaxed")
            b.append(r.lower_bound)
        assert b[0] <= b[1] * (1 + 1e-9)
        tighter += b[1] > b[0] * (1 + 1e-6)
    assert tighter >= 2


def _solve_relaxed_path(inst):
    """offline_cpsat.solve on the large-instance, relaxed path."""
    return offline_cpsat.solve(inst, threads=1, seed=0, params=CpsatParams(LARGE))


def _random_spread_allocations(inst, rng):
    """Per job with a size ≥ 2: a random allocation of such a size over ≥ 2 nodes (random PS nodes and
    cpu_mem level): (job index, size, GPU ids, their nodes, exact duration)."""
    for j, job in enumerate(inst.jobs):
        sizes = [n for n in job.sizes if n >= 2]
        if not sizes:
            continue
        n = rng.choice(sizes)
        gpus = rng.sample([g.id for g in inst.cluster.gpus], n)
        nodes = [g.split(":")[0] for g in gpus]
        if len(set(nodes)) < 2:
            continue
        psn = tuple(rng.choice([nd.name for nd in inst.cluster.nodes]) for _ in range(rng.randint(1, job.ps.max_ps))) if job.ps else ()
        d = duration(job, Allocation(tuple(gpus), psn, *rng.choice(job.level_choices)), inst.cluster)
        yield j, n, gpus, nodes, d


def _assert_bounds_allocation(o, d, n, nodes, node_sets):
    """Option ``o`` is no longer than ``d`` and demands no more of the cluster, of any node and of any
    node set in ``node_sets`` than an allocation of ``n`` GPUs on ``nodes`` holds."""
    assert o.dur <= d * (1 + 1e-12)
    held = {("all",): n, **{("n", v): nodes.count(v) for v in set(nodes)},
            **{("set", T): sum(nodes.count(v) for v in T) for T in node_sets}}
    for r, v in o.demand.items():
        assert v <= held.get(r, 0), (r, v, held)


@pytest.mark.parametrize("seed", (0, 9))
def test_hybrid_models_bound_below_optimum(seed):
    """Lazy variability: any set of jobs made node-exact keeps the model a relaxation."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
    opt = brute.solve(inst).objective
    mixed, classes = node_complete_options(inst), class_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")} | binding_resources(inst, mixed)
    for exact in ({1, 3}, set(range(len(inst.jobs)))):
        opts = hybrid_node_options(mixed, classes, exact, set())
        sol = solve_model(inst, opts, res, time_limit=None, threads=1, seed=0)
        assert sol.status == "OPTIMAL"
        assert bound_from_units(inst, sol.bound_units, sol.unit) <= opt * (1 + 1e-9)


def test_per_node_hybrid_models_bound_below_optimum():
    """Per-node lazy variability: jobs exact on some nodes only keep the model a relaxation."""
    for seed in (1, 2):
        inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
        opt = brute.solve(inst).objective
        mixed, classes = node_complete_options(inst), class_options(inst)
        res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")} | binding_resources(inst, mixed)
        nodes = [nd.name for nd in inst.cluster.nodes]
        for exact, pairs in ((set(), {(0, nodes[0]), (2, nodes[1])}), ({1}, {(j, v) for j in range(4) for v in nodes[:1]})):
            opts = hybrid_node_options(mixed, classes, exact, pairs)
            assert all(opts)
            sol = solve_model(inst, opts, res, time_limit=None, threads=1, seed=0)
            assert sol.status == "OPTIMAL"
            assert bound_from_units(inst, sol.bound_units, sol.unit) <= opt * (1 + 1e-9)


@pytest.mark.parametrize("seed", (0, 9))
def test_local_search_and_lns_incumbents_are_replayed(seed):
    inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3,
                cpu_mem=False, ps=False)
    opt = brute.solve(inst).objective
    mixed = node_complete_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")}
    assert SGS.applicable(inst, mixed)
    out = local_search(inst, mixed, [list(range(len(inst.jobs)))], None, max_iters=300)
    assert out is not None
    inc = best_retime(inst, out.order, lambda: fixed_chooser(out.allocs), "x")
    assert inc.replay.valid and inc.objective >= opt * (1 - 1e-9)
    best = cpsat_phases.lns(inst, mixed, inc, res, None, 1, 0, "x", window=3, rounds=3)
    assert best.replay.valid and opt * (1 - 1e-9) <= best.objective <= inc.objective + 1e-9


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 10_000))
def test_list_schedules_hold_node_cpus_and_memory(seed, order_seed):
    """Law: where CPU/memory levels and parameter servers can overload a node, the list schedule of any
    order (earliest completion per job) is itself a valid schedule: its starts and allocations replay
    valid, with its objective."""
    inst = offline_instance(gpus=8, nodes=2, jobs=6, max_size=4, variability=0.1, locality_penalty=1.3,
                            cpu_mem=True, ps=seed % 2 == 0, interarrival_s=300, seed=seed)
    opts = node_complete_options(inst)
    sg = SGS(inst, opts)
    order = list(range(len(inst.jobs)))
    random.Random(order_seed).shuffle(order)
    obj, choice, start = sg.run(order)
    segs = tuple(Segment(inst.jobs[j].name, float(start[j]), None, sg.opts[j][choice[j]].alloc) for j in order)
    rep = replay(inst, Schedule(inst.name, "sgs", segs))
    assert rep.valid, rep.error
    assert math.isclose(rep.objective, obj, rel_tol=1e-9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), move_seed=st.integers(0, 10_000), cpu_mem=st.booleans(), gaps=st.booleans())
def test_resumed_list_schedules_equal_schedules_from_scratch(seed, move_seed, cpu_mem, gaps):
    """Law: the local search's moves re-schedule from their first changed position (:meth:`SGS.run` with
    ``resume``); that gives exactly the list schedule from scratch, for swaps and insertions, with the other
    jobs' allocations kept or every job re-chosen, where CPU/memory bind or not, by either rule."""
    inst = offline_instance(gpus=8, nodes=2, jobs=7, max_size=4, variability=0.1, locality_penalty=1.3,
                            cpu_mem=cpu_mem, ps=cpu_mem and seed % 2 == 0, interarrival_s=300, seed=seed)
    sg = SGS(inst, node_complete_options(inst))
    sg.gaps = gaps
    rnd = random.Random(move_seed)
    n = len(inst.jobs)
    order = list(range(n))
    rnd.shuffle(order)
    obj, choice, _ = sg.run(order)
    assume(math.isfinite(obj))
    fixed0 = {j: rnd.randrange(len(sg.opts[j])) for j in range(n)} if rnd.random() < 0.5 else None
    obj, choice, _ = sg.run(order, fixed0)
    assume(math.isfinite(obj))
    tr = sg.trace(order, choice)
    assert tr.objective == obj
    for _ in range(10):
        i, k = rnd.randrange(n), rnd.randrange(n)
        new = list(order)
        if rnd.random() < 0.5:
            new[i], new[k] = new[k], new[i]
        else:
            new.insert(k, new.pop(i))
        if rnd.random() < 0.5:
            fixed = {j: c for j, c in enumerate(choice)}
            fixed[order[i]] = fixed[order[k]] = None
            p = min(i, k)
        else:
            fixed, p = None, min(i, k, tr.ec_len)
        full = sg.run(new, fixed)
        part = sg.run(new, fixed, resume=(tr, p))
        assert part[0] == full[0]
        if math.isfinite(full[0]):
            assert part[1] == full[1] and list(part[2]) == list(full[2])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 10_000), cpu_mem=st.booleans())
def test_gap_rule_replays_and_starts_no_job_later(seed, order_seed, cpu_mem):
    """Law: the gap rule's list schedule of any order and allocations replays valid with its objective, and
    no job starts later than by the start-order rule on the same order and allocations, where node
    CPUs/memory (levels, parameter servers) bind or not."""
    inst = offline_instance(gpus=8, nodes=2, jobs=7, max_size=4, elastic=0.3, variability=0.1,
                            locality_penalty=1.3, cpu_mem=cpu_mem, ps=cpu_mem and seed % 2 == 0,
                            interarrival_s=200, seed=seed)
    sg = SGS(inst, node_complete_options(inst))
    assume(not cpu_mem or sg.nr > 0)
    rnd = random.Random(order_seed)
    order = list(range(len(inst.jobs)))
    rnd.shuffle(order)
    fixed = {j: rnd.randrange(len(sg.opts[j])) for j in order}
    by_order = sg.run(order, fixed)
    sg.gaps = True
    obj, choice, start = sg.run(order, fixed)
    assert all(start[j] <= by_order[2][j] + 1e-9 for j in order) and obj <= by_order[0] + 1e-9
    segs = tuple(Segment(inst.jobs[j].name, float(start[j]), None, sg.opts[j][choice[j]].alloc) for j in order)
    rep = replay(inst, Schedule(inst.name, "sgs", segs))
    assert rep.valid, rep.error
    assert math.isclose(rep.objective, obj, rel_tol=1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cpu_mem=st.booleans(), share=st.sampled_from([0.0, 0.5, 1.0]),
       moves=st.sampled_from([2, 60]))
def test_local_search_result_re_times_to_its_objective(seed, cpu_mem, share, moves):
    """Law: the local search returns an order and allocations whose strict list schedule by the simulator (the
    caller's re-timing) is no worse than the objective it claims, whichever share of the search fills gaps and
    however few moves it makes (the gap rule's schedules need their own start order, not the order they were
    placed in: it fails if a state keeps the order it was traced from)."""
    inst = offline_instance(gpus=8, nodes=2, jobs=16, max_size=4, elastic=0.3, variability=0.1,
                            locality_penalty=1.3, cpu_mem=cpu_mem, ps=cpu_mem and seed % 2 == 0,
                            interarrival_s=10, seed=seed)
    opts = node_complete_options(inst)
    out = local_search(inst, opts, [list(range(len(inst.jobs)))], None, rng_seed=seed, max_iters=moves,
                       params=SearchParams(start_order_share=share))
    assert out is not None
    rep = retime(inst, out.order, fixed_chooser(out.allocs), "x", strict=True).replay
    assert rep.valid and rep.objective <= out.objective * (1 + 1e-9) + 1e-6


def test_gap_rule_fills_an_idle_gpu_before_a_job_placed_ahead():
    """Two GPUs: a 1 000-s 1-GPU job at t = 0, a 2-GPU job at t = 1 that must wait for it, a 100-s 1-GPU job at
    t = 2, in that order. By start order the short job cannot start before the 2-GPU job (at 1 000), so it
    ends after it; with gaps it runs at once on the idle GPU, and the 2-GPU job still starts at 1 000."""
    inst = tiny(0, gpus=2, nodes=1, jobs=3, max_size=2, elastic=0.0, variability=0.0, cpu_mem=False, ps=False)
    d = inst.to_dict()
    for j, (a, n, p) in enumerate(((0, 1, 1000), (1, 2, 500), (2, 1, 100))):
        d["jobs"][j].update(arrival=float(a), sizes=[n], batch=1.0, iterations=float(p), samples_per_s={"v100": 1.0})
    d["cluster"]["nodes"][0]["gpus"] = [{"type": "v100"}, {"type": "v100"}]
    inst = Instance.from_dict(d)
    sg = SGS(inst, node_complete_options(inst))
    obj, _, by_order = sg.run([0, 1, 2])
    assert by_order[0] == 0 and by_order[1] == 1000 and by_order[2] >= 1000
    sg.gaps = True
    gap_obj, _, gaps = sg.run([0, 1, 2])
    assert list(gaps) == [0, 1000, 2] and gap_obj < obj


def test_list_scheduling_waits_for_node_cpus():
    """Two 2-GPU jobs at 6 CPUs per GPU on a 4-GPU node of 16 CPUs: the second waits for the first's CPUs
    though two GPUs are free (without the CPUs both would start at once)."""
    inst = _cpu_hungry_jobs(0)
    opts = [[o for o in ol if o.alloc.cpus_per_gpu == 6.0] for ol in node_complete_options(inst)]
    sg = SGS(inst, opts)
    obj, choice, start = sg.run([0, 1, 2])
    first_end = start[0] + sg.opts[0][choice[0]].dur
    assert start[1] >= first_end - 1e-9 and start[2] >= start[1]


def test_spread_candidates_let_list_scheduling_run_where_jobs_must_spread():
    """Jobs larger than every node have no concrete single-node option; their concrete spread
    candidates (fewest nodes, each holding ≥ 1 GPU, exact durations) make the local search apply."""
    inst = offline_instance(gpus=12, nodes=3, jobs=4, max_size=8, elastic=0.3, seed=1, variability=0.08,
                            locality_penalty=1.3, interarrival_s=600, duration_h=(0.1, 1.0))
    mixed = node_complete_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")}
    must_spread = [j for j, ol in enumerate(mixed) if not any(o.alloc is not None for o in ol)]
    assert must_spread == [1, 2] and not SGS.applicable(inst, mixed)
    sgs = with_spread_candidates(inst, mixed)
    assert SGS.applicable(inst, sgs)
    for j in must_spread:
        cand = [o for o in sgs[j] if o.alloc is not None]
        assert len({o.alloc.gpus for o in cand}) == 3          # every node pair, 4 + 4 GPUs
        for o in cand:
            nodes = [g.split(":", 1)[0] for g in o.alloc.gpus]
            assert len(nodes) in inst.jobs[j].sizes and len(set(nodes)) == 2
            assert math.isclose(o.dur, duration(inst.jobs[j], o.alloc, inst.cluster), rel_tol=1e-12)
    assert all(sgs[j] == mixed[j] for j in range(len(mixed)) if j not in must_spread)
    # with room for one node set only: the job's two fastest nodes
    for j in must_spread:
        job = inst.jobs[j]
        speed = {nd.name: sum(rho(job, g) for g in nd.gpus) for nd in inst.cluster.nodes}
        fastest = set(sorted(speed, key=lambda v: -speed[v])[:2])
        cand = spread_candidates(inst, j, SearchParams(spread_node_sets=1))
        assert cand and {o.alloc.gpus for o in cand} == {tuple(sorted(
            g.id for nd in inst.cluster.nodes if nd.name in fastest for g in nd.gpus))}


def test_local_search_with_spread_candidates_is_replayed_and_not_below_optimum():
    inst = offline_instance(gpus=8, nodes=2, jobs=4, max_size=8, elastic=0.3, seed=1, variability=0.08,
                            locality_penalty=1.3, interarrival_s=600, duration_h=(0.1, 1.0))
    opt = brute.solve(inst).objective
    sgs = with_spread_candidates(inst, node_complete_options(inst))
    out = local_search(inst, sgs, [list(range(len(inst.jobs)))], None, max_iters=200)
    rep = best_retime(inst, out.order, lambda: fixed_chooser(out.allocs), "x").replay
    assert rep.valid and rep.objective >= opt * (1 - 1e-9)
    r = offline_cpsat.solve(inst, threads=1, seed=0, params=CpsatParams(hybrid_rounds=0, lns_share=0))
    check_valid(inst, r)
    assert r.lower_bound <= opt * (1 + 1e-9) and r.objective >= opt * (1 - 1e-9)


def _queue_behind_a_long_job() -> Instance:
    """One GPU: a 1 000-s job at t = 0, a 10 000-s job at t = 1, three 100-s jobs at t = 2, 3, 4."""
    inst = tiny(0, gpus=1, nodes=1, jobs=5, max_size=1, elastic=0.0, variability=0.0, cpu_mem=False, ps=False)
    d = inst.to_dict()
    for j, (a, p) in enumerate(((0, 1000), (1, 10000), (2, 100), (3, 100), (4, 100))):
        d["jobs"][j].update(arrival=float(a), sizes=[1], batch=1.0, iterations=float(p), samples_per_s={"v100": 1.0})
    d["cluster"]["nodes"][0]["gpus"] = [{"type": "v100"}]
    return Instance.from_dict(d)


def test_first_incumbent_tries_dispatch_rules():
    """On a queue the arrival order is a poor first incumbent: the three short jobs wait 10 000 s behind the
    long one. The greedy incumbent also list-schedules the dispatch rules (shortest first among the jobs
    that have arrived): mean JCT (1 000 + 1 098 + 1 197 + 1 296 + 11 299) / 5, against 9 118 in arrival order."""
    inst = _queue_behind_a_long_job()
    assert [round(p) for p in p_min(inst)] == [1000, 10000, 100, 100, 100]
    fifo = best_retime(inst, list(range(5)), lambda: class_chooser({}), "x").replay
    assert math.isclose(fifo.objective, (1000 + 10999 + 11098 + 11197 + 11296) / 5, rel_tol=1e-9)
    g = greedy(inst)
    sched, rep = g.schedule, g.replay
    assert rep.valid and math.isclose(rep.objective, (1000 + 1098 + 1197 + 1296 + 11299) / 5, rel_tol=1e-9)
    # a deadline already past: the arrival order only, unless the rules were computed for this instance before
    assert math.isclose(greedy(_queue_behind_a_long_job(), until=0.0).objective, fifo.objective, rel_tol=1e-9)
    again = greedy(inst, "again", until=0.0)
    assert again.objective == rep.objective and again.schedule.method == "again"
    assert again.schedule.segments == sched.segments
    r = offline_cpsat.solve(inst, threads=1, seed=0,
                            params=CpsatParams(OfflineParams(ls_share=0), hybrid_rounds=0))
    check_valid(inst, r)
    assert r.status == "optimal" and r.objective <= rep.objective    # 2 640: the GPU idles until t = 2


def test_short_limits_still_search_a_queue():
    """A 40-job queue on 16 GPUs with a 2-s limit: the first local search's share (5 %, 0.1 s) is below its
    set-up estimate, but it gets a short minimum (LS_MIN_S, at most LS_MAX_SHARE of the limit) instead of
    nothing: before, `cpsat` kept the greedy schedule (17 711 s mean JCT) at 2-4 s and found 10 431 s at 5 s."""
    inst = offline_instance(gpus=16, nodes=4, jobs=40, interarrival_s=120, variability=0.05, seed=0)
    first = greedy(inst, "cpsat")
    opts = search_options(inst, *concrete_options(inst), node_complete_options(inst))
    out = improve(inst, opts, first, Budget(2.0), 0.05, 0, "cpsat")
    assert out.schedule is not None and out.replay.valid
    assert out.objective < 0.9 * first.objective


def test_local_search_fills_gaps_on_a_queue_whose_jobs_must_spread():
    """A loaded queue of 30 jobs of 1-8 GPUs on 16 GPUs of 3 types in 4-GPU nodes (8-GPU jobs must spread).
    With the same 1 000 moves from the greedy schedule, the search that fills gaps in its second half ends
    at least 2 % below the search by start order alone (10 316 → 9 959 here)."""
    inst = offline_instance(gpus=16, nodes=4, jobs=30, types=("v100", "p100", "k80"), interarrival_s=120,
                            duration_h=(0.05, 2), max_size=8, variability=0.05, locality_penalty=1.5, seed=0)
    sched = greedy(inst).schedule
    allocs = {inst.index[sg.job]: sg.alloc for sg in sched.segments}
    conc, complete = concrete_options(inst)
    opts = with_allocations(inst, search_options(inst, conc, complete, node_complete_options(inst)), allocs)
    start = {inst.index[sg.job]: sg.start for sg in sched.segments}
    order = sorted(range(len(inst.jobs)), key=lambda j: (start[j], j))
    both = local_search(inst, opts, [(order, allocs), order], None, max_iters=1000)
    by_order = local_search(inst, opts, [(order, allocs), order], None, max_iters=1000,
                            params=SearchParams(start_order_share=1.0))
    assert both.objective < 0.98 * by_order.objective
    rep = best_retime(inst, both.order, lambda: fixed_chooser(both.allocs), "x").replay
    assert rep.valid and rep.objective <= both.objective + 1e-6


def test_local_search_defers_a_long_job_that_arrives_at_an_idle_cluster():
    """One GPU: a 10 000-s job at t = 0, three 100-s jobs at t = 1, 2, 3. Every dispatch rule starts the long
    job at once (nothing else has arrived): mean JCT (10 000 + 10 099 + 10 198 + 10 297) / 4. The local
    search's first pass moves the largest job to the end of the order: (100 + 199 + 298 + 10 301) / 4, the
    brute-force optimum, before any random move."""
    inst = _queue_behind_a_long_job()
    d = inst.to_dict()
    d["jobs"] = d["jobs"][1:]
    for j, a in enumerate((0, 1, 2, 3)):
        d["jobs"][j]["arrival"] = float(a)
    inst = Instance.from_dict(d)
    g = greedy(inst)
    sched = g.schedule
    assert math.isclose(g.objective, (10000 + 10099 + 10198 + 10297) / 4, rel_tol=1e-9)
    opts = node_complete_options(inst)
    start = {inst.index[sg.job]: sg.start for sg in sched.segments}
    order = sorted(range(4), key=lambda j: start[j])
    out = local_search(inst, opts, [(order, {inst.index[sg.job]: sg.alloc for sg in sched.segments})], None,
                          max_iters=0)
    assert out.order == [1, 2, 3, 0]
    assert math.isclose(out.objective, (100 + 199 + 298 + 10301) / 4, rel_tol=1e-9)
    assert math.isclose(out.objective, brute.solve(inst).objective, rel_tol=1e-9)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), move_seed=st.integers(0, 10_000))
def test_local_search_moves_hold_no_job_back_behind_a_later_arrival(seed, move_seed):
    """Law: a local-search move never puts a job ahead of a job that starts before it arrives (all the jobs
    after it would wait for its arrival), except ahead of the one job the move defers."""
    inst = offline_instance(gpus=8, nodes=2, jobs=9, max_size=4, variability=0.1, locality_penalty=1.3,
                            interarrival_s=400, seed=seed)
    sg = SGS(inst, node_complete_options(inst))
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    obj, choice, _ = sg.run(order)
    tr = sg.trace(order, choice)
    rnd = random.Random(move_seed)
    for _ in range(30):
        mv = _move(tr, sg.arr, rnd)
        if mv is None:
            continue
        new, i, k = mv
        assert sorted(new) == sorted(order) and new != order
        deferred = tr.order[min(i, k)]
        pos, old = {j: p for p, j in enumerate(new)}, {j: p for p, j in enumerate(tr.order)}
        for x in new:
            for y in new:
                if pos[x] < pos[y] and old[y] < old[x] and y != deferred:
                    assert sg.arr[x] <= tr.start[y]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_local_search_keeps_the_seed_schedule_allocations(seed):
    """Law: the list-scheduling local search never returns worse than its seed schedule, even where the
    seed's allocations (a dispatch rule spreads jobs over the GPUs free at their start) are not among the
    search options: they are added (``with_allocations``, exact durations), and the list schedule of the
    seed's start order on its own allocations is then no worse than the seed."""
    inst = offline_instance(gpus=16, nodes=4, jobs=12, max_size=8, elastic=0.7, seed=seed, variability=0.08,
                            locality_penalty=1.2, interarrival_s=200, duration_h=(0.1, 1.0))
    best = greedy(inst)
    opts = search_options(inst, *concrete_options(inst), node_complete_options(inst))
    allocs = {inst.index[sg.job]: sg.alloc for sg in best.schedule.segments}
    aug = with_allocations(inst, opts, allocs)
    sg = SGS(inst, aug)
    idx = {j: next(k for k, o in enumerate(sg.opts[j]) if o.alloc == a) for j, a in allocs.items()}
    for j, k in idx.items():
        assert math.isclose(sg.opts[j][k].dur, duration(inst.jobs[j], allocs[j], inst.cluster), rel_tol=1e-12)
    start = {inst.index[s.job]: s.start for s in best.schedule.segments}
    order = sorted(start, key=lambda j: (start[j], j))
    assert sg.run(order, idx)[0] <= best.objective * (1 + 1e-9)
    out = improve(inst, opts, best, Budget(None), 0.05, 0, "cpsat")
    assert out.replay.valid and out.objective <= best.objective * (1 + 1e-9)


# ----------------------------------------------------------------------------- group patterns, node cuts


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), pick=st.integers(0, 10_000))
def test_group_pattern_options_bound_every_spread_allocation(seed, pick):
    """Law: a spread allocation's group-pattern option (its GPU count per node group) exists, is no
    longer and demands no more of any GPU-count resource (node, group, cluster) than it holds."""
    inst = offline_instance(gpus=12, nodes=4, jobs=3, max_size=8, variability=0.2, locality_penalty=1.4,
                            cpu_mem=True, ps=seed % 2 == 0, seed=seed, elastic=1.0)
    assert any(len(g) >= 2 for g in node_groups(inst))
    cap = capacities(inst)
    rng = random.Random(pick)
    for j, n, gpus, nodes, d in _random_spread_allocations(inst, rng):
        alloc = Allocation(tuple(gpus))
        opt = [o for o in spread_options(inst, j, n) if pattern_of(alloc, o.cls) == o.cls[3]]
        assert len(opt) == 1
        _assert_bounds_allocation(opt[0], d, n, nodes, [r[1] for r in cap if r[0] == "set"])


def test_group_pattern_relaxation_below_optimum_with_forced_spread():
    """Relaxed path with group patterns where jobs must spread: bound ≤ brute-force optimum."""
    for seed in (1, 3):
        inst = tiny(seed, gpus=6, nodes=3, jobs=3, max_size=4, variability=0.08, locality_penalty=1.3,
                    cpu_mem=False, ps=False)
        opt = brute.solve(inst).objective
        classes = class_options(inst)
        assert any(len(o.cls) > 3 for ol in classes for o in ol if o.cls[0] == "spread")
        res = {r for r in capacities(inst) if r[0] in ("n", "all", "set")}
        sol = solve_model(inst, classes, res, time_limit=None, threads=1, seed=0)
        assert sol.status == "OPTIMAL"
        assert bound_from_units(inst, sol.bound_units, sol.unit) <= opt * (1 + 1e-9)
        r = _solve_relaxed_path(inst)
        check_valid(inst, r)
        assert r.lower_bound <= opt * (1 + 1e-9)


@pytest.mark.parametrize("seed", (1, 2, 9))
def test_node_exact_bound_and_node_decode(seed):
    """The per-node exact model's R (jobs an optimal schedule keeps on one node) is ≤ that schedule's
    completions; the exact node decode of a class-model solution is a valid replayed schedule ≥ the
    optimum."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3)
    ref = brute.solve(inst)
    opt = ref.objective
    mixed, classes = node_complete_options(inst), class_options(inst)
    u = time_unit(inst, classes)
    nodes = [nd.name for nd in inst.cluster.nodes]
    comp = {inst.index[k]: c for k, c in replay(inst, ref.schedule.with_claim(None)).completion.items()}
    on = {inst.index[s.job]: single_node(s.alloc) for s in ref.schedule.segments}
    for v in nodes:
        S = [j for j in range(len(inst.jobs)) if on[j] == v]
        if S:
            L, _ = node_exact(inst, mixed, v, S, u, CpsatRun(None, 1, 0))
            assert L <= sum(comp[j] for j in S) * (1 + 1e-9)
    res = {r for r in capacities(inst) if r[0] in ("n", "all", "set")}
    sol = solve_model(inst, classes, res, time_limit=None, threads=1, seed=0, unit=u)
    a, key = assignment_of(inst, classes, sol, u)
    out = node_decode(inst, mixed, a, key, u, until=None, threads=1, seed=0, method="cpsat")
    sched, rep = out.schedule, out.replay
    if sched is not None:
        assert rep.valid and rep.objective >= opt * (1 - 1e-9)


@pytest.mark.parametrize(("seed", "cpu_mem"), [(0, False), (2, False), (5, False), (3, True), (6, True)])
def test_semi_active_starts_keep_the_optimum(seed, cpu_mem):
    """Restricting starts to a release or another job's end (left shift) keeps every model's optimum:
    class, node-exact and exact models, solved to optimality with and without the restriction."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=5, max_size=2, variability=0.08, locality_penalty=1.3, cpu_mem=cpu_mem)
    concrete, complete = concrete_options(inst)
    mixed, classes = node_complete_options(inst), class_options(inst)
    cap = capacities(inst)
    models = [(classes, {r for r in cap if r[0] in ("n", "all", "set")}), (mixed, None)] + ([(concrete, None)] if complete else [])
    for opts, res in models:
        res = res or {r for r in cap if r[0] in ("g", "n", "all", "set")} | binding_resources(inst, opts)
        u = time_unit(inst, opts)
        # solved to the end (one worker): the law is about the optima, not about how fast either is proven
        a, b = (solve_model(inst, opts, res, time_limit=None, threads=1, seed=0, unit=u, semi_active=semi)
                for semi in (True, False))
        assert a.status == b.status == "OPTIMAL"
        assert a.bound_units == b.bound_units


@pytest.mark.parametrize(("seed", "cpu_mem"), [(0, False), (2, False), (3, False), (9, False), (3, True), (4, True),
                                            (6, True), (7, True)])
def test_aggregated_and_per_set_encodings_agree(seed, cpu_mem):
    """One interval per (job, GPU) and per (job, node, size) is the same model as one interval per GPU
    set: equal optima on the exact, node-exact and a random per-node hybrid model (one worker, solved to
    optimality; fixed examples that solve in about a second)."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=4, max_size=2, variability=0.08, locality_penalty=1.3, cpu_mem=cpu_mem)
    rng = random.Random(seed)
    concrete, complete = concrete_options(inst)
    mixed, classes = node_complete_options(inst), class_options(inst)
    nodes = [nd.name for nd in inst.cluster.nodes]
    pairs = {(j, v) for j in range(len(inst.jobs)) for v in nodes if rng.random() < 0.5}
    models = [mixed, hybrid_node_options(mixed, classes, set(), pairs)] + ([concrete] if complete else [])
    for opts in models:
        if not all(opts):
            continue
        res = {r for r in capacities(inst) if r[0] in ("g", "n", "all", "set")} | binding_resources(inst, opts)
        u = time_unit(inst, opts)
        a, b = (solve_model(inst, opts, res, time_limit=None, threads=1, seed=0, unit=u, aggregate=agg)
                for agg in (True, False))
        assert a.status == b.status == "OPTIMAL"
        assert a.bound_units == b.bound_units


@pytest.mark.parametrize("seed", range(6))
def test_twin_node_breaking_keeps_the_optimum(seed):
    """Law: ordering identical nodes by their first job (formulations.offline.symmetry) leaves the optimum
    of the exact and of the class model unchanged; the exact one is the brute-force optimum."""
    inst = offline_instance(gpus=6, nodes=3, jobs=4, types=("v100",), max_size=2, interarrival_s=300,
                            duration_h=(0.1, 1), locality_penalty=1.2, ps=seed % 2 == 1, cpu_mem=seed in (0, 4),
                            seed=seed)
    concrete, complete = concrete_options(inst)
    assert complete
    exact_res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")} | binding_resources(inst, concrete)
    values = []
    for opts, res in ((concrete, exact_res), (class_options(inst), class_resources(inst))):
        on = solve_model(inst, opts, res, time_limit=20, threads=1, seed=0, twins=True)
        off = solve_model(inst, opts, res, time_limit=20, threads=1, seed=0, twins=False)
        assert on.twins == [["n0", "n1", "n2"]] and off.twins == []
        assert on.status == off.status == "OPTIMAL"
        assert on.bound_units == off.bound_units
        values.append(bound_from_units(inst, on.bound_units, on.unit))
        # the solution obeys the rule: the first job on each node comes in node order
        first = {}
        for j, k in enumerate(on.choice):
            v = single_node(opts[j][k].alloc) if opts[j][k].alloc is not None else (
                opts[j][k].cls[1] if opts[j][k].cls[0] == "node" else None)
            first.setdefault(v, j)
        used = [first[v] for v in ("n0", "n1", "n2") if v in first]
        assert used == sorted(used) and [v for v in ("n0", "n1", "n2") if v in first] == ["n0", "n1", "n2"][:len(used)]
    opt = brute.solve(inst).objective
    assert values[1] <= values[0] * (1 + 1e-6) and values[0] <= opt * (1 + 1e-9)
    assert values[0] >= opt * (1 - 1e-6)


def test_twin_nodes_must_be_identical():
    """Nodes with per-GPU variability, other GPU types or other CPUs are not twins; the rule is only added
    where asked (relaxations of the whole instance)."""
    from formulations.offline import symmetry as offline_symmetry

    inst = offline_instance(gpus=6, nodes=3, jobs=4, max_size=2, seed=1, types=("v100",))
    assert offline_symmetry.twin_groups(inst) == [["n0", "n1", "n2"]]
    classes, res = class_options(inst), class_resources(inst)
    assert solve_model(inst, classes, res, time_limit=5, threads=1, seed=0).twins == []
    assert solve_model(inst, classes, res, time_limit=5, threads=1, seed=0,
                                         twins=True).twins == [["n0", "n1", "n2"]]
    for kw in ({"variability": 0.05, "types": ("v100",)}, {"types": ("v100", "p100", "k80")}):
        assert offline_symmetry.twin_groups(offline_instance(gpus=6, nodes=3, jobs=4, max_size=2, seed=1, **kw)) == []
    assert offline_symmetry.twin_groups(offline_instance(gpus=12, nodes=6, jobs=4, max_size=2, seed=1)) == [
        ["n0", "n3"], ["n1", "n4"], ["n2", "n5"]]
    d = inst.to_dict()
    d["cluster"]["nodes"][1]["cpus"] = 7.0
    assert offline_symmetry.twin_groups(Instance.from_dict(d)) == [["n0", "n2"]]


def test_a_node_class_may_move_to_a_node_with_the_same_gpu_types():
    """The decode variant for node groups: class ("nodes", group, n) takes the fastest free n GPUs on any
    node of the group (the model's own node may be held by a spread job it counted on the group)."""
    inst = offline_instance(gpus=8, nodes=2, jobs=2, types=("v100",), max_size=2, elastic=0.0, seed=0)
    j = next(k for k, job in enumerate(inst.jobs) if 2 in job.sizes)
    choose = class_chooser({j: ("nodes", ("n0", "n1"), 2)})
    cpu = {"n0": 0.0, "n1": 0.0}
    mem = {"n0": 0.0, "n1": 0.0}
    a = choose(inst, j, {"n0": {"n0:3"}, "n1": {"n1:0", "n1:2"}}, cpu, mem)
    assert a is not None and set(a.gpus) == {"n1:0", "n1:2"}
    assert choose(inst, j, {"n0": {"n0:3"}, "n1": {"n1:1"}}, cpu, mem) is None
    assert class_chooser({j: ("node", "n0", 2)})(inst, j, {"n0": {"n0:3"}, "n1": {"n1:0", "n1:2"}}, cpu, mem) is None


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_milp_twin_rows_keep_the_optimum(seed):
    """The MILP orders identical nodes too (same rule, as rows): more rows, the same proven optimum (= brute force)."""
    inst = offline_instance(gpus=6, nodes=3, jobs=4, types=("v100",), max_size=2, interarrival_s=300,
                            duration_h=(0.1, 1), locality_penalty=1.2, ps=seed % 2 == 1, cpu_mem=seed in (0, 4),
                            seed=seed)
    concrete, complete = concrete_options(inst)
    res = {r for r in capacities(inst) if r[0] == "g"} | binding_resources(inst, concrete)
    rows, objs = [], []
    for on in (True, False):
        rows.append(len(milp_build(inst, concrete, res, twins=on).prob.constraints))
        r = offline_milp.solve(inst, threads=1, params=MilpParams(OfflineParams(twins=on)))
        assert r.status == "optimal"
        objs.append(r.objective)
    assert rows[0] > rows[1]
    assert objs[0] == pytest.approx(objs[1], rel=1e-9) == pytest.approx(brute.solve(inst).objective, rel=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_dominance_filter_keeps_exactly_the_undominated_options(seed):
    """Law: the (vectorised, for long lists) dominance filter keeps, fastest first, every option that no
    other option beats (no longer, holding no more of anything), one of each tie, and no other."""
    inst = offline_instance(gpus=32, nodes=8, jobs=6, variability=0.05 * (seed % 2), cpu_mem=seed == 0, ps=True,
                            seed=seed)
    cap, names = capacities(inst), [nd.name for nd in inst.cluster.nodes]
    long_lists = 0
    for j, job in enumerate(inst.jobs):
        for nd in inst.cluster.nodes[:3]:
            for n in job.sizes:
                opts = options_for_set(inst, j, tuple(g.id for g in nd.gpus[:n]), names, cap).options
                kept = undominated(opts)
                long_lists += len(opts) > 16
                ids = {id(k) for k in kept}
                assert all(any(dominated(o, k) for k in kept) for o in opts if id(o) not in ids)
                assert not any(dominated(kept[b], kept[a]) for a in range(len(kept)) for b in range(a + 1, len(kept)))
                assert [o.dur for o in kept] == sorted(o.dur for o in kept)
    assert long_lists > 0


@pytest.mark.parametrize("seed", range(3))
def test_options_of_a_gpu_set_are_every_placement_priced_alone(seed):
    """Law: a GPU set's options (durations priced once per server count, node span and level; demands built
    once per level) are exactly the (PS placement, level) allocations that fit the empty cluster, each with
    the duration and demand that pricing it alone gives, in placement-then-level order."""
    inst = offline_instance(gpus=16, nodes=4, jobs=6, variability=0.05, cpu_mem=seed != 1, ps=True,
                            locality_penalty=1.3, seed=seed)
    cap, names = capacities(inst), [nd.name for nd in inst.cluster.nodes]
    checked = 0
    for j, job in enumerate(inst.jobs):
        for gids in ((inst.cluster.nodes[0].gpus[0].id,), tuple(g.id for g in inst.cluster.gpus[2:6])):
            want = []
            for psn in ps_choices(job, names, gids)[0]:
                for c, m in job.level_choices:
                    alloc = Allocation(gids, psn, c, m)
                    try:
                        d = duration(job, alloc, inst.cluster)
                    except SpeedError:
                        continue
                    dem = demand_of(inst, job, alloc)
                    if fits_alone(dem, cap):
                        want.append((alloc, d, dem))
            got = [(o.alloc, o.dur, o.demand) for o in options_for_set(inst, j, gids, names, cap).options]
            assert got == want
            checked += len(got)
    assert checked > 50


@pytest.mark.parametrize(("seed", "cpu_mem"), [(0, False), (1, False), (5, False), (3, True), (6, True)])
def test_complete_hints_are_feasible_incumbents(seed, cpu_mem):
    """A hinted schedule hints every model variable: with every variable fixed to its hint the class,
    node-exact and exact models are feasible (semi-active starts included: the hint's starts are
    left-shifted to a release or another job's end), no start later than the schedule's, so the model's
    objective is at most the schedule's. A hint with starts merely rounded down breaks the semi-active rule
    wherever a job waits, and the fixed model is then infeasible."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=6, max_size=2, variability=0.08, locality_penalty=1.3, cpu_mem=cpu_mem,
                interarrival_s=300)
    sched, rep = greedy(inst, "cpsat").schedule, greedy(inst, "cpsat").replay
    assert rep.valid
    concrete, complete = concrete_options(inst)
    mixed, classes = node_complete_options(inst), class_options(inst)
    cap = capacities(inst)
    fixed = {**SAT_PARAMS, "fix_variables_to_their_hinted_value": True}
    waits = 0
    for opts in [classes, mixed] + ([concrete] if complete else []):
        res = {r for r in cap if r[0] in ("g", "n", "all", "set")} | binding_resources(inst, opts)
        u = time_unit(inst, opts)
        hint = hint_assignment(inst, opts, sched)
        assert all(k is not None for k, _ in hint.values())
        sol = solve_model(inst, opts, res, time_limit=30, threads=1, seed=0, unit=u, hint=hint,
                                            sat_params=fixed)
        assert sol.status in ("OPTIMAL", "FEASIBLE"), sol.status
        assert sol.choice == [k for _, (k, _) in sorted(hint.items())]
        for j, (_, st) in hint.items():
            assert sol.start[j] <= math.floor(st / u)
            waits += st > inst.jobs[j].arrival + 1e-9
    assert waits > 0    # the greedy schedule of these instances makes some job wait


@pytest.mark.parametrize("seed", [0, 3])
def test_node_exact_workers_prove_the_same_optimum(seed):
    """The node-exact model's workers (a core-based and a max-LP worker, :func:`offline_cpsat.exact_params`; under
    deadlines max-LP and default LP), and the complete exact model's (core-based and default LP) prove the same
    optimum as the default portfolio; 1 and ≥ 4 threads keep the default."""
    inst = tiny(seed, gpus=4, nodes=2, jobs=5, max_size=2, variability=0.08, locality_penalty=1.3)
    mixed = node_complete_options(inst)
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all", "set")} | binding_resources(inst, mixed)
    u = time_unit(inst, mixed)
    assert all(exact_params(t, n, d) is None
               for t in (1, 4) for n in (False, True) for d in (False, True))
    assert exact_params(2, True)["subsolvers"] == ["core", "max_lp"]
    assert exact_params(2, True, True)["subsolvers"] == ["max_lp", "default_lp"]
    assert exact_params(2)["subsolvers"] == ["core", "default_lp"]
    sols = [solve_model(inst, mixed, res, time_limit=60, threads=2, seed=0, unit=u, sat_params=sp)
            for sp in (exact_params(2, True), exact_params(2, True, True),
                       exact_params(2), None)]
    assert {s.status for s in sols} == {"OPTIMAL"}
    assert len({s.bound_units for s in sols}) == 1


def test_offline_result_drops_a_bound_above_its_schedule():
    """The offline pipeline's result never certifies with a bound above its replayed schedule: such a bound
    is a wrong proof (CP-SAT 9.15 gave some), dropped and recorded."""
    inst = tiny(2, gpus=4, nodes=2, jobs=4, max_size=2)
    best = greedy(inst, "cpsat")
    obj = best.objective
    r = result_of_incumbent(best, obj * 1.02, time.perf_counter(), "cpsat", "", {})
    assert (r.status, r.lower_bound, r.params["bound_conflict"]["bound"]) == ("feasible", None, obj * 1.02)
    r = result_of_incumbent(best, obj * (1 + 1e-9), time.perf_counter(), "cpsat", "", {})
    assert (r.status, r.lower_bound) == ("optimal", obj)


@pytest.mark.parametrize("seed", range(8))
def test_complete_exact_model_with_core_workers_agrees_with_brute_force(seed):
    """With 2 threads the complete exact model runs the core-based and default LP workers
    (:func:`offline_cpsat.exact_params`); on tiny queues (jobs arrive faster than they run) and on the tiny
    instances of the brute-force table it proves the brute-force optimum, and its bound is never above it."""
    inst = tiny(seed, interarrival_s=120 if seed % 2 else 600, jobs=4)
    ref = brute.solve(inst)
    assert ref.status == "optimal"
    r = offline_cpsat.solve(inst, time_limit=60, threads=2, seed=seed)
    check_valid(inst, r)
    assert r.params["exact_subsolvers"] == ["core", "default_lp"]
    assert r.status == "optimal", (r.objective, r.lower_bound, ref.objective)
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL)
    assert r.lower_bound <= ref.objective * (1 + 1e-9)


def test_complete_exact_model_falls_back_to_the_default_workers():
    """When the core-based round leaves the complete exact model unproven (here: almost no time), the default
    workers get the rest of its share, hinted with the best schedule, and prove the brute-force optimum."""
    inst = tiny(3, interarrival_s=120, jobs=4)
    ref = brute.solve(inst)
    r = offline_cpsat.solve(inst, time_limit=60, threads=2, seed=0, params=CpsatParams(core_share=1e-6))
    check_valid(inst, r)
    assert "exact-core" in [p["phase"] for p in r.params["phases"]]
    assert r.status == "optimal"
    assert math.isclose(r.objective, ref.objective, rel_tol=RTOL)
