"""Time-indexed LP bound (formulations/offline/time_indexed_bound.py): valid against brute force on tiny
queues for every objective, over exact and relaxed option models, with and without an incumbent;
stronger than the preemptive LP on a queue; used by the offline CP-SAT and MILP pipelines when CP-SAT is cut short."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline import preemptive_bound
from formulations.offline import time_indexed_bound as tib
from formulations.offline.classes import class_options, node_complete_options, trivial_bound
from formulations.offline.concrete import concrete_options
from formulations.offline.greedy import greedy
from formulations.offline.local_search import search_options
from formulations.offline.options import binding_resources, capacities
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_model import CpsatRun, solve_option_model
from formulations.offline.pipeline import class_resources
from jctlab.generators import offline_instance
from jctlab.replay import replay

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def queue(seed: int, objective: str = "mean_jct", **over):
    """A few jobs arriving close together on few GPUs: they must wait."""
    kw = dict(gpus=2 + seed % 2, nodes=1 + seed % 2, jobs=4, interarrival_s=120, duration_h=(0.2, 1.0),
              max_size=2, elastic=0.6, variability=0.05 * (seed % 3), locality_penalty=1.2,
              cpu_mem=seed % 4 == 1, ps=seed % 4 == 2, seed=seed, objective=objective)
    kw.update(over)
    inst = offline_instance(**kw)
    if objective == "weighted_jct":
        inst = inst.replace_jobs([j.__class__(**{**j.__dict__, "weight": 1.0 + (i % 3)})
                                  for i, j in enumerate(inst.jobs)])
    return inst


def exact_model(inst):
    opts, complete = concrete_options(inst)
    assert complete
    res = {("g", g.id) for g in inst.cluster.gpus} | binding_resources(inst, opts)
    return opts, res


def class_model(inst):
    res = {r for r in capacities(inst) if r[0] in ("n", "all", "set")}
    return class_options(inst), res


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["mean_jct", "weighted_jct", "makespan"]),
       slots=st.sampled_from([None, 7, 60]), model=st.sampled_from([exact_model, class_model]),
       with_incumbent=st.booleans(), focus=st.sampled_from([None, 600.0, 3000.0, 15000.0]))
def test_time_indexed_bound_never_exceeds_the_optimum(seed, objective, slots, model, with_incumbent, focus):
    """Law: over the exact model or the class relaxation, any slot count, uniform slots or finer ones
    before a focus instant, with the optimum or the greedy schedule as incumbent or none, the bound is
    at most the brute-force optimum."""
    inst = queue(seed, objective)
    ref = brute.solve(inst)
    assume(ref.status == "optimal")
    opt = ref.objective
    opts, res = model(inst)
    inc = None
    if with_incumbent:
        inc = opt if seed % 2 else greedy(inst, "test").objective
    # slots=None doubles 25 → 50 → 100 → 200 (to the default 1000: seconds an example)
    b = tib.lower_bound(inst, opts, res, incumbent=inc, slots=slots, focus=focus, max_slots=200)
    assert math.isfinite(b)
    assert b <= opt * (1 + 1e-9), (b, opt)


@pytest.mark.parametrize("seed", range(6))
def test_time_indexed_bound_at_least_the_trivial_bound_on_exact_models(seed):
    inst = queue(seed)
    assert brute.solve(inst).status == "optimal"
    opts, res = exact_model(inst)
    b = tib.lower_bound(inst, opts, res, slots=200)
    assert b >= trivial_bound(inst) * (1 - 1e-6)


def loaded_queue():
    # 10 jobs of 0.5-2 h arriving every ~5 min on 3 GPUs of one node
    return offline_instance(gpus=3, nodes=1, jobs=10, interarrival_s=300, duration_h=(0.5, 2), max_size=2,
                            cpu_mem=True, seed=1)


def test_time_indexed_bound_beats_the_preemptive_lp_on_a_queue():
    inst = loaded_queue()
    opts, res = exact_model(inst)
    inc = greedy(inst, "test").objective
    b = tib.lower_bound(inst, opts, res, incumbent=inc, slots=150)
    pre = preemptive_bound.lower_bound(inst)
    assert pre > trivial_bound(inst) * 1.3          # a real queue
    assert b > pre * 1.03                              # non-preemption counts (4 % here; 9 % before the
                                                       # preemptive LP charged GPU areas)
    assert b <= inc


def test_time_limited_lp_gives_no_bound_rather_than_a_wrong_one():
    inst = loaded_queue()
    opts, res = exact_model(inst)
    assert tib.lower_bound(inst, opts, res, slots=400, time_limit=1e-4) == -math.inf


def test_time_limit_holds_on_an_lp_too_large_for_presolve():
    """HiGHS checks its time limit only after presolve: the class model's 25-slot LP of 200 jobs on 128 GPUs
    (935 000 nonzeros) ran 45 s under a 0.45-s limit. Such LPs skip presolve, and the limit holds."""
    import time

    inst = offline_instance(gpus=128, nodes=16, jobs=200, interarrival_s=60, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.5, seed=0)
    opts, res = class_model(inst)
    assert tib._nnz(opts, res) * tib.MIN_SLOTS > tib.PRESOLVE_NNZ
    t0 = time.perf_counter()
    b = tib.lower_bound(inst, opts, res, time_limit=0.5)
    assert time.perf_counter() - t0 < 8.0 and b <= trivial_bound(inst) * 1.5


def _phase_laws(inst, r):
    """What every time-limited run keeps, however slow the machine: the schedule replays with its claimed
    objective, and the bound is the best of the phases' records, at least Σ(a_j + p_j) and below the objective."""
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid and math.isclose(rep.objective, r.objective, rel_tol=1e-6)
    phases = r.params["phases"]
    assert r.lower_bound >= max(p["bound"] for p in phases) * (1 - 1e-9)
    assert trivial_bound(inst) * (1 - 1e-9) <= r.lower_bound <= r.objective * (1 + 1e-9)
    assert r.objective <= min(p["objective"] for p in phases) * (1 + 1e-9)
    return [p["phase"] for p in phases]


def test_solve_adds_the_lp_bounds_when_cp_sat_is_cut_short():
    """An exact model that CP-SAT is given no time to prove (0.6 ms for a 10-job queue) ends with the LP
    bounds: the result's bound is the best of the phases', still below the replayed objective. A queue runs
    no class model. What the LP bounds gain is measured in benchmarks/bench_queue_bounds.py."""
    inst = loaded_queue()
    r = offline_cpsat.solve(inst, time_limit=6, threads=1, params=CpsatParams(exact_share=1e-4))
    phases = _phase_laws(inst, r)
    assert "lp-bounds" in phases
    assert "relaxed" not in phases


def test_exact_path_starts_from_local_search_on_a_queue():
    """On a queue the exact path runs list-scheduling local search before CP-SAT: its schedule is at
    least as good as the greedy one, and the result (replayed) is never worse than it."""
    inst = offline_instance(gpus=4, nodes=2, jobs=10, interarrival_s=300, duration_h=(0.1, 2), max_size=4,
                            variability=0.05, locality_penalty=1.2, seed=1)      # no CPU/memory levels
    r = offline_cpsat.solve(inst, time_limit=4, threads=1)
    phases = {p["phase"]: p for p in r.params["phases"]}
    assert "local-search" in phases
    first = greedy(inst, "test").objective
    assert phases["local-search"]["objective"] <= first + 1e-6
    assert r.objective <= phases["local-search"]["objective"] + 1e-6
    assert replay(inst, r.claimed_schedule()).valid


def test_unproven_exact_model_falls_back_to_the_class_model():
    """CPU/memory levels and PS give 2 327 exact options for 8 jobs against 74 class options: with ~10 ms
    CP-SAT does not prove the exact model, and the exact path then solves the class model (a relaxation, whose
    proven optimum is a bound worth having: above Σ(a_j + p_j) × 1.05). That the 5-s run proves it in time is
    measured in benchmarks/bench_queue_bounds.py."""
    inst = offline_instance(gpus=7, nodes=3, jobs=8, max_size=8, elastic=1, interarrival_s=900, seed=4,
                            variability=0.05, locality_penalty=1.2, cpu_mem=True, ps=True)
    concrete, complete = concrete_options(inst)
    classes = class_options(inst)
    assert complete and len(sum(concrete, [])) >= CpsatParams().coarser * len(sum(classes, []))
    r = offline_cpsat.solve(inst, time_limit=5, threads=1, params=CpsatParams(exact_share=0.002))
    assert "relaxed" in _phase_laws(inst, r)
    cls = solve_option_model(inst, classes, class_resources(inst), CpsatRun(None, 1, 0))
    assert cls.status == "OPTIMAL"
    class_opt = cls.bound(inst)
    assert class_opt > trivial_bound(inst) * 1.05          # a bound worth having
    assert class_opt <= r.objective * (1 + 1e-9)             # a relaxation


@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_milp_on_a_queue_adds_the_lp_bounds_and_local_search(backend):
    """Jobs wait (greedy far above Σ(a_j + p_j)): the MILP back ends also run the preemptive LP, the Lagrangian
    time-indexed bound, list-scheduling local search and the time-indexed LP; the result keeps the best of their
    bounds and schedules. Their gain over the big-M MILP alone is measured in benchmarks/bench_queue_bounds.py."""
    inst = offline_instance(gpus=4, nodes=2, jobs=10, interarrival_s=300, duration_h=(0.1, 2), max_size=4,
                            variability=0.05, locality_penalty=1.2, seed=1)
    r = offline_milp.solve(inst, time_limit=10, threads=1, backend=backend)
    phases = _phase_laws(inst, r)
    assert phases[:2] == ["lagrangian", "local-search"]
    assert "milp" in phases            # every allocation enumerated: the MILP is exact, it may prove the queue
    assert r.objective <= greedy(inst, "test").objective * (1 + 1e-9)


def test_milp_on_a_large_queue_searches_the_node_exact_options():
    """Not complete (8-GPU jobs have 70+ GPU sets): the MILP's model would relax jobs to classes, and on a queue
    it is not solved (:func:`formulations.offline.milp.milp_applies`): the local search, over every single-node GPU
    set plus concrete spread candidates (:func:`formulations.offline.local_search.search_options`), gets its time.
    Its schedule replays valid, no worse than greedy (how much better is measured in
    benchmarks/bench_queue_bounds.py)."""
    inst = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=0)
    concrete, complete = concrete_options(inst)
    assert not complete and search_options(inst, concrete, False, node_complete_options(inst)) is not None
    r = offline_milp.solve(inst, time_limit=5, threads=1, backend="highs")
    phases = _phase_laws(inst, r)
    assert "milp" not in phases and "local-search" in phases
    assert r.objective <= greedy(inst, "test").objective * (1 + 1e-9)
