"""The offline models' parts: the MILP model, decoding and GPU pinning, class options that price CPU/memory
levels and parameter servers, hybrid and per-node models; each bound stays below the optimum.
"""

from __future__ import annotations

import dataclasses
import math
import time

import pytest

from formulations import brute
from formulations.offline import cpsat_rounds
from formulations.offline import decode as offline_decode
from formulations.offline import milp as offline_milp
from formulations.offline.classes import class_levels, class_options, hybrid_node_options, node_complete_options
from formulations.offline.concrete import ConcreteParams, concrete_options
from formulations.offline.cpsat_model import bound_from_units
from formulations.offline.decode import decode, pin_gpus
from formulations.offline.list_scheduling import SGS
from formulations.offline.local_search import local_search
from formulations.offline.milp import MilpParams
from formulations.offline.milp_model import MilpModelParams, run_solver, to_objective
from formulations.offline.milp_model import _subsets as milp_subsets
from formulations.offline.milp_model import build as milp_build
from formulations.offline.options import binding_resources, capacities
from formulations.offline.pipeline import class_resources
from formulations.offline.retime import best_retime, fixed_chooser
from jctlab.generators import offline_instance
from jctlab.model import Instance

from .oracle_offline_helpers import LARGE, check_valid, cpu_hungry_jobs, solve_model, solve_relaxed_path, tiny

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
        r = solve_relaxed_path(inst)
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


def test_class_model_prices_each_cpu_memory_level():
    """Where a node's CPUs can bind, a node class has one option per undominated CPU/memory level (its
    speed, its CPUs and memory): the class bound is above the model that gave the fastest level the CPUs
    of the cheapest (the coarse classes) and below the brute-force optimum; the relaxed path runs it after
    the coarse model and decodes the model's levels into a valid schedule."""
    tighter = 0
    for seed in (0, 1, 2):
        inst = cpu_hungry_jobs(seed)
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
        r = solve_relaxed_path(inst)
        check_valid(inst, r)
        assert "relaxed-levels" in [p["phase"] for p in r.params["phases"]] or r.status == "optimal"
        assert b_new * (1 - 1e-9) <= r.lower_bound <= opt * (1 + 1e-9)
    assert tighter >= 2


def test_class_levels_only_where_cpus_or_memory_can_bind():
    """No split where the node holds every GPU at the job's largest level (and no job has parameter
    servers): one class, fastest level, least CPUs/memory; a dominated level is never an option."""
    inst = cpu_hungry_jobs(0)
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
        inst = cpu_hungry_jobs(seed)
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
    best = cpsat_rounds.lns(inst, mixed, inc, res, None, 1, 0, "x", window=3, rounds=3)
    assert best.replay.valid and opt * (1 - 1e-9) <= best.objective <= inc.objective + 1e-9
