"""`auto`, the offline portfolio: which member runs first with which threads, races, members that die,
and its answer never worse than the baselines' (the class model's reports to its later phases too).
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

import pytest

from formulations import brute
from formulations.budget import Budget
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import cpsat_phases, preemptive_bound
from formulations.offline.classes import trivial_bound
from formulations.offline.concrete import concrete_options
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_phases import core_params
from formulations.offline.greedy import offline_greedy
from formulations.offline.pipeline import preemptive_lb
from jctlab.generators import offline_instance
from jctlab.replay import replay
from oracle import methods, portfolio
from oracle.dispatch import dispatch

from .oracle_offline_helpers import LARGE, RTOL, check_valid, tiny

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    assert phases == ["local-search", "relaxed", "lagrangian", "node-patterns", "class-search", "time-indexed-lp",
                      "local-search", "node-decode", "free-gpus"], phases
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


def test_auto_computes_the_preemptive_lp_once_and_hands_it_to_its_members(monkeypatch):
    """On a queue the portfolio's queue test computes the preemptive LP; its members are handed it (``Shared``)
    and do not compute it again (each pipeline's queue test computed its own before); the bound and the optimum
    are as before."""
    calls: list[float | None] = []
    real = preemptive_bound.lower_bound

    def counted(inst, *args, **kwargs):
        value = real(inst, *args, **kwargs)
        calls.append(value)
        return value

    monkeypatch.setattr(preemptive_bound, "lower_bound", counted)
    no_bnb = portfolio.PortfolioParams(bnb_max_jobs=0, exact_first=False, race_max_s_per_job=math.inf)
    inst = tiny(0, gpus=4, nodes=2, jobs=5, max_size=4, interarrival_s=120, variability=0.08)
    r = portfolio.portfolio(inst, time_limit=6, threads=1, member=dispatch, params=no_bnb)
    check_valid(inst, r)
    assert r.params["queue"] is True and r.params["parallel"] is False
    assert len(calls) == 1
    assert r.status == "optimal" and r.objective == pytest.approx(brute.solve(inst).objective, rel=RTOL)
    # a member alone computes it itself
    calls.clear()
    alone = dispatch("milp", inst, 6, 1, 0, None, {})
    check_valid(inst, alone)
    assert len(calls) == 1


def test_auto_offline_hint_is_no_worse_than_the_baselines():
    """``auto``'s offline hint is the best replayed schedule of its list-scheduling heuristic and of the
    non-preemptive baselines in ``BASELINE_HINTS`` (here a baseline is 24 % better than the heuristic), and
    ``auto`` returns no worse than its hint."""
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
    # under a time limit the LP is solved on coarser bucket grids first, which are not nested in the finer ones:
    # the race's value is at most the best of the grids it may stop at, each with its tangents
    grids = preemptive_bound.GRIDS + (preemptive_bound.N_GRID,)
    assert r.lower_bound <= max(preemptive_bound.lower_bound(inst, n_grid=k) for k in grids) * (1 + 1e-6) + 1e-6
