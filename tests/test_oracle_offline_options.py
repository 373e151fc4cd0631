"""Allocation options of the offline oracle: group patterns, node cuts and node-exact models, semi-active
starts, twin nodes, dominance filtering and complete hints.
"""

from __future__ import annotations

import math
import random
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline import preemptive_bound
from formulations.offline import symmetry as offline_symmetry
from formulations.offline.classes import (
    class_options,
    hybrid_node_options,
    node_complete_options,
    spread_options,
    trivial_bound,
)
from formulations.offline.concrete import concrete_options
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_model import SAT_PARAMS, CpsatRun, bound_from_units, time_unit
from formulations.offline.cpsat_phases import exact_params
from formulations.offline.greedy import greedy
from formulations.offline.hints import hint_assignment, pattern_of
from formulations.offline.milp import MilpParams
from formulations.offline.milp_model import build as milp_build
from formulations.offline.node_exact import assignment_of, node_decode, node_exact
from formulations.offline.options import (
    binding_resources,
    capacities,
    demand_of,
    dominated,
    fits_alone,
    node_groups,
    options_for_set,
    ps_choices,
    single_node,
    undominated,
)
from formulations.offline.pipeline import OfflineParams, class_resources
from formulations.offline.retime import class_chooser
from formulations.results import result_of_incumbent
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.replay import replay
from jctlab.speed import SpeedError, duration

from .oracle_offline_helpers import (
    RTOL,
    SOLVERS,
    assert_bounds_allocation,
    check_valid,
    random_spread_allocations,
    solve_model,
    solve_relaxed_path,
    tiny,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    for j, n, gpus, nodes, d in random_spread_allocations(inst, rng):
        alloc = Allocation(tuple(gpus))
        opt = [o for o in spread_options(inst, j, n) if pattern_of(alloc, o.cls) == o.cls[3]]
        assert len(opt) == 1
        assert_bounds_allocation(opt[0], d, n, nodes, [r[1] for r in cap if r[0] == "set"])


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
        r = solve_relaxed_path(inst)
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
        for j, (_, begin) in hint.items():
            assert sol.start[j] <= math.floor(begin / u)
            waits += begin > inst.jobs[j].arrival + 1e-9
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
