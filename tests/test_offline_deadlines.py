"""Objective-driven deadlines (formulations/offline/latest_completions.py): the law, the restricted models, the
pipeline."""

from __future__ import annotations

from dataclasses import replace

import threading
import time

import pytest

from formulations import brute
from formulations.offline import cpsat_phases, pipeline
from formulations.offline import latest_completions as od
from formulations.offline.classes import class_options, node_complete_options, p_min
from formulations.offline.cpsat_model import CpsatRun, solve_option_model, time_unit
from formulations.offline.greedy import greedy
from formulations.offline.options import binding_resources, capacities
from formulations.offline.pipeline import class_resources
from formulations.schedules import job_weights
from jctlab.generators import offline_instance
from jctlab.replay import replay


def small(seed: int, weighted: bool = False):
    cpu_mem, ps = seed % 4 == 1, seed % 4 == 2       # brute force is slow on 5 jobs with CPU/memory levels
    inst = offline_instance(gpus=4, nodes=2, jobs=5 if seed % 4 == 3 else 4, max_size=2, variability=0.08,
                            locality_penalty=1.3, interarrival_s=300, duration_h=(0.1, 1.0), elastic=0.7,
                            cpu_mem=cpu_mem, ps=ps, seed=seed)
    if weighted:
        inst = inst.replace_jobs([replace(j, weight=1.0 + (k * 7 + seed) % 4) for k, j in enumerate(inst.jobs)],
                                 objective="weighted_jct")
    return inst


def class_bounds(inst, upper: float, sched, batch: int = 1):
    classes = class_options(inst)
    return od.rest_bounds(inst, upper, [w * p for w, p in zip(job_weights(inst), p_min(inst))],
                          cpsat_phases._class_rest_bound(inst, classes, class_resources(inst), sched, 1, 0, True),
                          until=None, batch=batch)


def completions(inst, sched):
    rep = replay(inst, sched)
    assert rep.valid, rep.error
    return rep.completion


@pytest.mark.parametrize(("seed", "weighted", "batch"), [(s, s % 2 == 1, 1 + s % 3) for s in range(8)])
def test_deadlines_hold_for_every_schedule_as_good_as_the_incumbent(seed, weighted, batch):
    """Every schedule at least as good as the incumbent (the optimum, the incumbent itself) keeps the other
    jobs' weighted JCT at or above L_j and so completes every job by its deadline; both for the incumbent's
    value and for the optimum's (the tightest hypothesis). L_j may exceed the optimum without j: it bounds
    only the restrictions of such schedules. Also with relaxations solved 2 or 3 at a time (``batch``)."""
    inst = small(seed, weighted)
    w = job_weights(inst)
    opt = brute.solve(inst)
    first = greedy(inst, "t")
    for upper_sched in (first.schedule, opt.schedule):
        upper = replay(inst, upper_sched).objective * sum(w)
        lower = class_bounds(inst, upper, upper_sched, batch)
        latest = od.latest(inst, upper, lower)
        for sched in {id(s): s for s in (opt.schedule, upper_sched)}.values():
            comp = completions(inst, sched)
            jct = [w[k] * (comp[job.name] - job.arrival) for k, job in enumerate(inst.jobs)]
            for j, job in enumerate(inst.jobs):
                assert lower[j] <= sum(jct) - jct[j] + 1e-6 * upper
                assert comp[job.name] <= latest[j] + 1e-6


@pytest.mark.parametrize("seed", range(6))
def test_the_restricted_node_exact_model_keeps_the_optimum(seed):
    """Deadlines for the optimum's own value: options that cannot meet them dropped, e_j ≤ latest_j in the
    model; the node-exact model keeps its optimum (no rounding loses it), below the brute-force one."""
    inst = small(seed)
    opt = brute.solve(inst)
    upper = opt.objective * sum(job_weights(inst))
    latest = od.latest(inst, upper, class_bounds(inst, upper, opt.schedule))
    mixed = node_complete_options(inst)
    opts = od.restrict(inst, mixed, latest)
    assert opts is not None
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")} | binding_resources(inst, mixed)
    bounds, unit = [], time_unit(inst, mixed)    # one time unit: the same rounding
    for o, dl in ((mixed, None), (opts, latest)):
        sol = solve_option_model(inst, o, res, CpsatRun(None, 1, 0), latest_end=dl, unit=unit)
        assert sol.status == "OPTIMAL"
        bounds.append(sol.bound(inst))
    assert bounds[1] == pytest.approx(bounds[0], rel=1e-9)
    assert bounds[1] <= opt.objective * (1 + 1e-9)


def test_restricting_drops_options_and_refuses_an_empty_job():
    inst = small(0)
    mixed = node_complete_options(inst)
    tight = {j: job.arrival + min(o.dur for o in mixed[j]) * 1.001 for j, job in enumerate(inst.jobs)}
    kept = od.restrict(inst, mixed, tight)
    assert kept is not None and sum(map(len, kept)) < sum(map(len, mixed))
    assert all(job.arrival + o.dur <= tight[j] for j, job in enumerate(inst.jobs) for o in kept[j])
    assert od.restrict(inst, mixed, {**tight, 1: inst.jobs[1].arrival}) is None


def test_rest_bounds_stop_at_their_deadline_with_valid_bounds():
    """Out of time at once: the starting bounds (every other job at its fastest option) come back."""
    inst = small(3)
    pm = p_min(inst)
    called = []
    lower = od.rest_bounds(inst, 1e9, pm, lambda S, dl, t: called.append(S) or 0.0, until=0.0)
    assert not called
    assert lower == pytest.approx([sum(pm) - p for p in pm])


def test_a_batch_of_relaxations_runs_at_once():
    """``batch`` = 2: relaxations run two at a time in threads; with a bound that ignores the deadlines the
    result and the number of relaxations are the sequential ones."""
    inst = small(3)
    pm = p_min(inst)
    lock, flight, most = threading.Lock(), [0], [0]

    def lb(S, dl, t):
        with lock:
            flight[0] += 1
            most[0] = max(most[0], flight[0])
        time.sleep(0.05)        # the batch's other relaxation starts meanwhile
        with lock:
            flight[0] -= 1
        return 1.5 * sum(pm[k] for k in S)

    stats_par, stats_seq = {}, {}
    par = od.rest_bounds(inst, 1e5, pm, lb, until=None, window=3, batch=2, stats=stats_par)
    seq = od.rest_bounds(inst, 1e5, pm, lambda S, dl, t: 1.5 * sum(pm[k] for k in S), until=None, window=3,
                         stats=stats_seq)
    assert most[0] == 2
    assert par == pytest.approx(seq) and stats_par == stats_seq
    assert par[0] > sum(pm) - pm[0]


@pytest.mark.parametrize("seed", (0, 3, 6))
def test_the_large_path_with_deadlines_keeps_a_valid_bound(large_path, seed):
    """Force the large-instance path: the deadlines phase runs after the proven class model, its restricted
    models' bounds stay below the brute-force optimum and the schedule is replayed."""
    r = large_path(small(seed))
    assert "deadlines" in [p["phase"] for p in r.params["phases"]]    # the class model left a gap here
    d = r.params["deadlines"]
    assert d["relaxations"] > 0 and d["options"][1] < d["options"][0]


@pytest.mark.parametrize("proven", [True, False])
def test_the_large_path_runs_the_preemptive_lp_only_after_an_unproven_class_model(large_path, monkeypatch, proven):
    """The preemptive LP is skipped after a proven class model (whose bound it did not reach on the instances
    measured) and run, its bound kept, after an unproven one (here: the class model's status hidden)."""
    calls, models = [], []
    orig_lp, orig_model = pipeline.preemptive_lb, cpsat_phases.solve_option_model

    def lp(*a, **k):
        calls.append(orig_lp(*a, **k))
        return calls[-1]

    def model(*a, **k):           # the first model of the large path is the class model
        sol = orig_model(*a, **k)
        models.append(sol)
        return sol if proven or len(models) > 1 else replace(sol, status="FEASIBLE")

    monkeypatch.setattr(pipeline, "preemptive_lb", lp)
    monkeypatch.setattr(cpsat_phases, "solve_option_model", model)
    r = large_path(small(0))
    assert len(calls) == (0 if proven else 1)
    if not proven:
        assert r.lower_bound >= calls[0] - 1e-9 and calls[0] > 0
