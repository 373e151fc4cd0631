"""List-scheduling local search on a long queue: cost of a move and value after 10 s (pytest-benchmark).

    pytest benchmarks/bench_local_search.py --benchmark-only -s

160 jobs of 1-8 GPUs arriving every ~2 min on 32 GPUs of 3 types (8 nodes of 4 GPUs), the instance of
``bench_preemptive_bound``'s 3-type case. ``full`` list-schedules 300 random moves of the greedy schedule's order
from scratch, ``resumed`` the same moves from their first changed position (:meth:`SGS.run` with ``resume``), by
the start-order rule or (``gaps-``) the gap rule: compare their times within one run (the machine is shared).
``search-10s`` runs the local search for 10 s from the greedy schedule and prints the objectives (mean JCT), on that
queue and on ``long``: the same queue on one GPU type with jobs of 0.05-20 h, where list schedules start long jobs
that arrive at idle GPUs at once; ``start-order`` searches with the start-order rule only
(``start_order_share=1``), ``default`` with both rules. ``free-gpus`` does the same for the list schedules whose jobs
choose their GPUs at their turn (:mod:`formulations.offline.free_gpus`): 300 moves resumed, and its climb for 10 s.
"""

from __future__ import annotations

import random
import time

import pytest

from formulations.offline import free_gpus
from formulations.offline.classes import node_complete_options
from formulations.offline.concrete import concrete_options
from formulations.offline.greedy import greedy
from formulations.offline.list_scheduling import SGS
from formulations.offline.local_search import SearchParams, _move, local_search, search_options, with_allocations
from jctlab.generators import offline_instance


def _setup(case="3-types"):
    long = case == "long"
    inst = offline_instance(gpus=32, nodes=8, jobs=160, types=("v100",) if long else ("v100", "p100", "k80"),
                            interarrival_s=120, duration_h=(0.05, 20 if long else 2), max_size=8, variability=0.05,
                            locality_penalty=1.5, seed=0)
    first = greedy(inst)
    sched, rep = first.schedule, first.replay
    conc, complete = concrete_options(inst)
    allocs = {inst.index[sg.job]: sg.alloc for sg in sched.segments}
    opts = with_allocations(inst, search_options(inst, conc, complete, node_complete_options(inst)), allocs)
    start = {inst.index[sg.job]: sg.start for sg in sched.segments}
    order = sorted(range(len(inst.jobs)), key=lambda j: (start[j], j))
    return inst, rep.objective, opts, order, allocs


@pytest.mark.parametrize("case", ["full", "resumed", "gaps-full", "gaps-resumed"])
def test_list_schedule_moves(benchmark, case):
    inst, _, opts, order, _ = _setup()
    sg = SGS(inst, opts)
    sg.gaps = case.startswith("gaps")
    _, choice, _ = sg.run(order)
    tr = sg.trace(order, choice)
    rnd = random.Random(0)
    moves = [m for m in (_move(tr, sg.arr, rnd) for _ in range(600)) if m is not None][:300]

    def run():
        out = []
        for new, i, k in moves:
            out.append(sg.run(new, None, resume=(tr, min(i, k, tr.ec_len)) if case.endswith("resumed") else None)[0])
        return out

    objs = benchmark.pedantic(run, rounds=3, iterations=1)
    benchmark.extra_info.update(moves=len(moves))
    print(f"\n{case}: {len(moves)} moves")
    assert len(moves) == 300 and all(o > 0 for o in objs)


@pytest.mark.parametrize("rules", ["start-order", "default"])
@pytest.mark.parametrize("case", ["3-types", "long"])
def test_local_search_value(benchmark, case, rules):
    inst, first, opts, order, allocs = _setup(case)
    params = SearchParams(start_order_share=1.0) if rules == "start-order" else SearchParams()
    out = benchmark.pedantic(lambda: local_search(inst, opts, [(order, allocs), order], time.perf_counter() + 10.0,
                                                  params=params), rounds=1, iterations=1)
    benchmark.extra_info.update(greedy=first, local_search=out.objective)
    print(f"\nsearch-10s {case} {rules}: greedy {first:.1f} → local search {out.objective:.1f}")
    assert out.objective <= first + 1e-6


def test_free_gpu_moves(benchmark):
    inst, _, _, order, _ = _setup()
    fg = free_gpus.FreeGpus(inst)
    first = fg.run(order)
    rnd = random.Random(0)
    moves = []
    while len(moves) < 300:
        new = list(order)
        if (p := free_gpus._move(new, rnd, free_gpus.FreeGpuParams().reach)) < len(new):
            moves.append((new, p))
    objs = benchmark.pedantic(lambda: [fg.run(new, resume=(first, p)).objective for new, p in moves],
                              rounds=3, iterations=1)
    print(f"\nfree-gpus: {len(moves)} moves resumed")
    assert all(o > 0 for o in objs)


def test_free_gpu_climb_value(benchmark):
    inst, first, _, order, _ = _setup()
    out = benchmark.pedantic(lambda: free_gpus.climb(inst, order, time.perf_counter() + 10.0, "bench", restart=True),
                             rounds=1, iterations=1)
    benchmark.extra_info.update(greedy=first, climb=out.objective)
    print(f"\nfree-gpus climb-10s: greedy {first:.1f} → {out.objective:.1f}")
    assert out.objective <= free_gpus.incumbent(inst, order, "bench").objective + 1e-6
