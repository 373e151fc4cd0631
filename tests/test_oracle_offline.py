"""Offline oracles (CP-SAT, MILP with HiGHS and CBC): exact models against brute force, bounds below every
schedule, infeasible instances, time limits, determinism and the preemptive class.

Small instances, one thread: every schedule must replay valid with its claimed objective.
"""

from __future__ import annotations

import math
import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import classes as offline_classes
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline import preemptive_bound
from formulations.offline.classes import class_options, node_complete_options, p_min, trivial_bound
from formulations.offline.concrete import ConcreteParams, concrete_options, job_infeasible
from formulations.offline.durations import single_node_lb, spread_lb
from formulations.offline.options import capacities, demand_of, fits_alone, rho
from formulations.offline.retime import class_chooser, retime
from jctlab.errors import InputError
from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation, Instance
from jctlab.replay import replay
from jctlab.speed import duration
from oracle import methods

from .oracle_offline_helpers import LARGE, RTOL, SOLVERS, check_valid, tiny

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
