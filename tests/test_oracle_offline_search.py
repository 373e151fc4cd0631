"""List scheduling and local search of the offline oracle: replayed schedules, resumable list schedules,
the gap rule, spread candidates and the moves' rules.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from baselines.families import resolve
from formulations import brute
from formulations.budget import Budget
from formulations.offline import cpsat as offline_cpsat
from formulations.offline.classes import node_complete_options, p_min
from formulations.offline.concrete import concrete_options
from formulations.offline.cpsat import CpsatParams
from formulations.offline.greedy import greedy
from formulations.offline.lagrangian_bound import LagrangianParams
from formulations.offline.list_scheduling import SGS
from formulations.offline.local_search import (
    SearchParams,
    _move,
    improve,
    local_search,
    search_options,
    spread_candidates,
    with_allocations,
    with_spread_candidates,
)
from formulations.offline.options import rho
from formulations.offline.pipeline import OfflineParams, State, lagrangian_phase, start
from formulations.offline.pipeline import local_search as pipeline_local_search
from formulations.offline.retime import (
    best_retime,
    class_chooser,
    fixed_chooser,
    retime,
)
from formulations.results import NO_INCUMBENT
from jctlab.generators import offline_instance
from jctlab.model import Instance, Schedule, Segment
from jctlab.replay import replay
from jctlab.simulate import simulate
from jctlab.speed import duration

from .oracle_offline_helpers import check_valid, cpu_hungry_jobs, tiny

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


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
    inst = cpu_hungry_jobs(0)
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
    # with room for one node set only: the job's two fastest nodes; with the windows also the next two
    def gpus_of(nodes):
        return tuple(sorted(g.id for nd in inst.cluster.nodes if nd.name in nodes for g in nd.gpus))

    for j in must_spread:
        job = inst.jobs[j]
        speed = {nd.name: sum(rho(job, g) for g in nd.gpus) for nd in inst.cluster.nodes}
        ranked = sorted(speed, key=lambda v: -speed[v])
        cand = spread_candidates(inst, j, SearchParams(spread_node_sets=1, spread_windows=False))
        assert cand and {o.alloc.gpus for o in cand} == {gpus_of(ranked[:2])}
        cand = spread_candidates(inst, j, SearchParams(spread_node_sets=1))
        assert {o.alloc.gpus for o in cand} == {gpus_of(ranked[:2]), gpus_of(ranked[1:])}


def test_the_windows_let_two_large_jobs_run_side_by_side():
    """Two 8-GPU jobs on four nodes of four GPUs, both at t = 0: the cluster holds both at once. With only the
    fastest node pair as a candidate each, the list schedules run them one after the other; with the windows of
    consecutive nodes in speed order, one takes the two slowest nodes and both start at once."""
    base = offline_instance(gpus=16, nodes=4, jobs=2, max_size=8, elastic=0.0, seed=3, variability=0.08,
                            locality_penalty=1.3, interarrival_s=600, duration_h=(1.0, 2.0))
    inst = base.replace_jobs([dataclasses.replace(j, arrival=0.0, sizes=(8,)) for j in base.jobs])
    mixed = node_complete_options(inst)
    starts = {}
    for windows in (False, True):
        params = SearchParams(spread_candidates=1, spread_windows=windows)
        opts = with_spread_candidates(inst, mixed, params)
        out = local_search(inst, opts, [[0, 1]], None, max_iters=100, params=params)
        allocs = out.allocs
        inc = best_retime(inst, out.order, lambda allocs=allocs: fixed_chooser(allocs), "x")
        assert inc.replay.valid
        starts[windows] = sorted(seg.start for seg in inc.schedule.segments)
    assert starts[False][1] > 3600            # the second waits for the first (≥ 1 h)
    assert starts[True] == [0.0, 0.0]


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


def test_a_hint_adds_a_start_and_never_takes_the_solvers_own_away():
    """A hint better than the greedy's schedule becomes the incumbent, and the greedy's stays a start of the first
    local search, with a share of its own: on queues, where the climb ends depends on where it starts (on PAL's
    workload 1, seed 10 000, `auto`'s members climbed from a baseline's hint to 9 360 s at 30 s, alone from their
    greedy to 8 000-8 075 s). Here (20 jobs on 8 GPUs, the same moves) the climb from the greedy's schedule ends
    below the climb from the hint's, and the pipeline's search, from both, ends at the better of the two."""
    inst = offline_instance(gpus=8, nodes=2, jobs=20, types=("v100", "p100"), interarrival_s=200,
                            duration_h=(0.05, 3), max_size=4, elastic=0.3, seed=12)
    own = greedy(inst, "cpsat")

    def state_with(hint: Schedule | None) -> State:
        return start(inst, State, time_limit=None, threads=1, seed=0, hint=hint, warm=True, solver="cpsat",
                     version="", params={}, offline=OfflineParams(), t0=time.perf_counter())

    better, _ = simulate(inst, resolve("sjf+packed-sticky")(inst, seed=0), method="hint")
    state = state_with(better)
    assert state.incumbent.objective < own.objective
    assert [s.incumbent.objective for s in state.starts] == [own.objective]
    opts = search_options(inst, *concrete_options(inst), None)
    from_hint = improve(inst, opts, state.incumbent, Budget(None), 0.05, 0, "cpsat")
    from_own = improve(inst, opts, own, Budget(None), 0.05, 0, "cpsat")
    assert from_own.objective < from_hint.objective      # the case the start is kept for
    pipeline_local_search(state, opts, 0.05, 0)
    assert state.incumbent.objective == pytest.approx(from_own.objective, rel=1e-12)
    assert state.starts == []                            # spent by the first search
    # a hint no better than the greedy's, or none: the greedy's is the incumbent, no other start
    worse, _ = simulate(inst, resolve("fifo+packed-sticky")(inst, seed=0), method="hint")
    assert replay(inst, worse).objective > own.objective
    for hint in (worse, None):
        state = state_with(hint)
        assert state.incumbent.objective == own.objective and state.starts == []


def test_the_lagrangian_order_is_a_start_of_the_next_local_search():
    """The Lagrangian phase leaves its multipliers' order of completions (each job's cheapest start and mode in the
    relaxed problem) as a start of the next local search, which climbs from it alone with a share of its own: on
    long queues it leads the climb elsewhere than the dispatch rules' schedules (PAL's workload 4, development seed
    9 000: 8.8 % below the climb from the greedy's schedule at 6 s). Here the climb from the order ends below the
    climb from the incumbent, and the pipeline's search ends at the better of the two."""
    inst = offline_instance(gpus=8, nodes=2, jobs=16, types=("v100", "p100"), interarrival_s=120,
                            duration_h=(0.05, 3), max_size=4, elastic=0.3, seed=0)
    offline = OfflineParams(lagrangian=LagrangianParams(fine_slots=300, max_slots=600, steps=200))
    state = start(inst, State, time_limit=None, threads=1, seed=0, hint=None, warm=True, solver="cpsat",
                  version="", params={}, offline=offline, t0=time.perf_counter())
    lagrangian_phase(state, None)
    assert len(state.starts) == 1 and not state.starts[0].incumbent.schedule
    order = list(state.starts[0].order)
    assert sorted(order) == list(range(len(inst.jobs)))
    opts = search_options(inst, *concrete_options(inst), None)
    from_incumbent = improve(inst, opts, state.incumbent, Budget(None), 0.05, 0, "cpsat")
    from_order = improve(inst, opts, NO_INCUMBENT, Budget(None), 0.05, 0, "cpsat", [order])
    assert from_order.objective < from_incumbent.objective          # the case the start is for
    pipeline_local_search(state, opts, 0.05, 0)
    assert state.incumbent.objective == pytest.approx(from_order.objective, rel=1e-12)
    assert state.starts == []
    # without the start (``lag_start`` off) the phase leaves none
    off = start(inst, State, time_limit=None, threads=1, seed=0, hint=None, warm=True, solver="cpsat", version="",
                params={}, offline=dataclasses.replace(offline, lag_start=False), t0=time.perf_counter())
    lagrangian_phase(off, None)
    assert off.starts == [] and off.bound == pytest.approx(state.bound, rel=1e-12)
