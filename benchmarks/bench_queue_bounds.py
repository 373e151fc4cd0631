"""Measured margins of the offline oracle's bounds and searches on queues (pytest-benchmark, one run each,
one thread). Tests keep the laws (bound below the replayed objective, best of the phases); these floors depend
on the time each phase gets, so they live here, where ``make bench`` fails when one is lost.

    pytest benchmarks/bench_queue_bounds.py --benchmark-only -s
"""

from __future__ import annotations

import pytest

import oracle
from evaluation.generators import small_queue_instance
from formulations.budget import Budget
from formulations.offline import class_search, lagrangian_bound, preemptive_bound
from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline.bnb import BnbParams, arrival_offset
from formulations.offline.classes import class_options, trivial_bound
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_model import CpsatRun, solve_option_model
from formulations.offline.greedy import greedy
from formulations.offline.pipeline import class_resources
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.loaders.pal import load_pal
from jctlab.result import SolveStatus


def _once(benchmark, f):
    return benchmark.pedantic(f, rounds=1, iterations=1)


def _auto_on(benchmark, insts, time_limit: float, threads: int, per: str = "bound") -> tuple[list[float], int]:
    """`auto` on every instance, one run: the certified gaps ((objective − bound) / bound, or / objective with
    ``per="objective"``) and the count proven optimal, recorded in the benchmark's extra info; every bound is at
    most its replayed objective."""
    rs = _once(benchmark, lambda: [oracle.solve(i, "auto", time_limit=time_limit, threads=threads, seed=0)
                                   for i in insts])
    gaps = [(r.objective - r.lower_bound) / (r.lower_bound if per == "bound" else r.objective) for r in rs]
    proven = sum(r.status == SolveStatus.OPTIMAL for r in rs)
    benchmark.extra_info.update(mean_gap=sum(gaps) / len(gaps), gaps=gaps, proven=proven)
    assert all(r.lower_bound <= r.objective * (1 + 1e-6) for r in rs)
    return gaps, proven


def test_cpsat_cut_short_gets_the_lp_bounds(benchmark):
    """10 jobs of 0.5-2 h every ~5 min on 3 GPUs, the exact model cut short at half the 6-s limit: the LP
    bounds lift the bound to the preemptive LP's and 30 % above Σ(a_j + p_j)."""
    inst = offline_instance(gpus=3, nodes=1, jobs=10, interarrival_s=300, duration_h=(0.5, 2), max_size=2,
                            cpu_mem=True, seed=1)
    r = _once(benchmark, lambda: offline_cpsat.solve(inst, time_limit=6, threads=1,
                                                     params=CpsatParams(exact_share=0.5)))
    pre = preemptive_bound.lower_bound(inst)
    print(f"\nbound {r.lower_bound:.0f}  preemptive LP {pre:.0f}  objective {r.objective:.0f}  {r.status}")
    assert r.lower_bound >= pre * (1 - 1e-9)
    assert r.lower_bound > trivial_bound(inst) * 1.3


def test_cpsat_proves_the_class_model_after_an_unproven_exact_one(benchmark):
    """2 327 exact options, the exact model given ~10 ms of 5 s: the class model is proven in the time left,
    and its optimum is the result's bound."""
    inst = offline_instance(gpus=7, nodes=3, jobs=8, max_size=8, elastic=1, interarrival_s=900, seed=4,
                            variability=0.05, locality_penalty=1.2, cpu_mem=True, ps=True)
    r = _once(benchmark, lambda: offline_cpsat.solve(inst, time_limit=5, threads=1,
                                                     params=CpsatParams(exact_share=0.002)))
    cls = solve_option_model(inst, class_options(inst), class_resources(inst), CpsatRun(None, 1, 0)).bound(inst)
    print(f"\nbound {r.lower_bound:.0f}  class optimum {cls:.0f}  objective {r.objective:.0f}")
    assert r.lower_bound >= cls * (1 - 1e-9)


@pytest.mark.parametrize("backend", ["highs", "cbc"])
def test_milp_on_a_queue(benchmark, backend):
    """4 GPUs / 10 jobs, seed 1, 10 s: the big-M MILP alone ends near Σ(a_j + p_j) with greedy-like incumbents;
    with the LP bounds the bound is > 1.05 × the preemptive LP (~6 560 against 6 022), and local search brings
    the objective under 0.95 × greedy (~7 070 against 7 987)."""
    inst = offline_instance(gpus=4, nodes=2, jobs=10, interarrival_s=300, duration_h=(0.1, 2), max_size=4,
                            variability=0.05, locality_penalty=1.2, seed=1)
    r = _once(benchmark, lambda: offline_milp.solve(inst, time_limit=10, threads=1, backend=backend))
    pre, first = preemptive_bound.lower_bound(inst), greedy(inst, "test").objective
    print(f"\nbound {r.lower_bound:.0f}  preemptive LP {pre:.0f}  objective {r.objective:.0f}  greedy {first:.0f}")
    assert r.lower_bound > 1.05 * pre
    assert r.objective < 0.95 * first


def test_milp_on_a_large_queue(benchmark):
    """8 GPUs / 12 jobs of up to 8 GPUs, 5 s: local search over node-exact options brings the MILP's schedule
    under 0.8 × greedy (~7 730 against 10 920), and the bound is at least the preemptive LP's."""
    inst = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=0)
    r = _once(benchmark, lambda: offline_milp.solve(inst, time_limit=5, threads=1, backend="highs"))
    pre, first = preemptive_bound.lower_bound(inst), greedy(inst, "test").objective
    print(f"\nbound {r.lower_bound:.0f}  preemptive LP {pre:.0f}  objective {r.objective:.0f}  greedy {first:.0f}")
    assert r.objective < 0.8 * first
    assert r.lower_bound >= pre * (1 - 1e-9)


def test_lagrangian_bound_on_a_long_queue(benchmark):
    """160 jobs of 0.05-20 h every ~2 min on 32 GPUs of one type (jobs of up to 16 GPUs on 4-GPU nodes), with the
    shares a 30-s limit gives each in the pipelines: the Lagrangian time-indexed bound 3 s (its steps stop at the
    limit), the preemptive LP 4.5 s. Measured under load: 144 322 against 37 395 (the LP's 20-bucket grid did not
    finish: Σ(a_j + p_j)); without a limit the Lagrangian reaches 152 545 in 17.6 s of one core, the LP 126 960."""
    inst = offline_instance(gpus=32, nodes=8, jobs=160, interarrival_s=120, duration_h=(0.05, 20), max_size=16,
                            variability=0.0, locality_penalty=1.5, seed=0)
    lag = _once(benchmark, lambda: lagrangian_bound.lower_bound(inst, time_limit=3.0))
    pre = preemptive_bound.lower_bound(inst, time_limit=4.5)
    print(f"\nLagrangian {lag:.0f}  preemptive LP {pre:.0f}  Σ(a_j + p_j) {trivial_bound(inst):.0f}")
    assert lag >= pre and lag > 2 * trivial_bound(inst)


#: the 10-s queue rows of the README (issue 45: mean certified gap ≤ 3 % each); 16 × 16 misses it (16 jobs on four
#: nodes: neither the exact search nor the class model's applies, and the node patterns' bound leaves about 6 %)
TEN_S_ROWS = {"4x10": (4, 10), "8x12": (8, 12), "16x16": (16, 16), "8x12-identical": (8, 12)}
#: the rows' GPU types: the generator's three (mixed; its nodes rarely share their types), or one (identical nodes)
ROW_TYPES = {"8x12-identical": ("v100",)}
TEN_S_MISSED = {"16x16"}


@pytest.mark.parametrize("row", [pytest.param(r, marks=pytest.mark.xfail(reason="issue 45: about 6-7 %: the "
                                                                           "class model (0.6 % from the best schedule on "
                                                                           "10 000) is not proven in 10 s", strict=False))
                                 if r in TEN_S_MISSED else r for r in TEN_S_ROWS])
def test_auto_on_the_10s_queue_rows(benchmark, row):
    """``scripts/oracle_offline_table.py --sizes 4x10,8x12,16x16 --seeds 4 --first-seed 10000 --time-limit 10
    --methods auto --interarrival 300``, one row: `auto`, 10 s, one thread, evaluation seeds 10 000-10 003; the mean
    certified gap (objective − bound) / bound of the row at most 3 % (docs/oracle-offline.md). The row
    ``8x12-identical`` (not the issue's: two nodes of four V100s) is the class search's pools of several nodes."""
    gaps, proven = _auto_on(benchmark, [_row(row, s) for s in range(10_000, 10_004)], 10, 1)
    print(f"\n{row}: mean certified gap {sum(gaps) / len(gaps):.2%}, {proven} of {len(gaps)} proven")
    assert sum(gaps) / len(gaps) <= 0.03


def _row(row: str, seed: int):
    """One instance of a 10-s queue row."""
    g, j = TEN_S_ROWS[row]
    return offline_instance(gpus=g, nodes=max(1, g // (4 if g >= 8 else 2)), jobs=j,
                            types=ROW_TYPES.get(row, ("v100", "p100", "k80")), interarrival_s=300,
                            duration_h=(0.1, 2), max_size=min(8, g), variability=0.05, locality_penalty=1.2, seed=seed)


#: 16 × 16 development seeds and a target below each one's best schedule known (docs/history/oracle-offline-queues.md,
#: "Nodes as arrays"): what one attempt of the class search's destructive bounding searches
CLASS_TARGETS = {9_000: 4_480.0, 9_001: 4_000.0, 9_002: 3_990.0, 9_003: 3_850.0}


@pytest.mark.parametrize("seed", CLASS_TARGETS)
def test_class_search_at_a_target_on_16x16(benchmark, seed):
    """One attempt of ``class_search.class_bound_by_targets``: the pooled class search pruned at a target, to its
    end (node prices without a time limit, so the same nodes every run). Its time is the speed of the searches'
    node evaluation (2026-11-30, seeds 9 000-9 003: 0.14 / 0.10 / 1.36 / 1.72 s; 0.31 / 0.11 / 2.27 / 3.49 s with
    the loop over the children before, 7fc41a2; the same nodes: 5 760 / 3 362 / 41 407 / 55 009)."""
    inst, target = _row("16x16", seed), CLASS_TARGETS[seed]
    setup = class_search._prepared(inst, greedy(inst, "bench").objective, None, BnbParams())
    offset = arrival_offset(inst)
    search = class_search.ClassSearch(inst, setup.model, setup.prices)
    search.value = target + offset
    assert _once(benchmark, lambda: search.resume(Budget(None)))
    benchmark.extra_info.update(nodes=search.nodes)
    print(f"\n16x16 seed={seed}: target {target:.0f}, {search.nodes} nodes, "
          f"{'a class schedule below it' if search.best is not None else 'no class schedule below it'}")
    assert search.best is None or search.value - offset < target


def test_auto_proves_the_small_queues_at_60s(benchmark):
    """Issue 45's small queues: `auto`, 60 s, 2 threads, evaluation seeds 10 000-10 009 (the three families of
    ``evaluation.generators.small_queue_instance``); floor: at least 9 of 10 proven optimal. The same runs as
    ``scripts/queue_figures.py --limit 60 --threads 2 --methods auto`` (about 10 min)."""
    insts = [small_queue_instance(s) for s in range(10_000, 10_010)]
    gaps, proven = _auto_on(benchmark, insts, 60, 2, per="objective")
    print(f"\nsmall queues: {proven} of {len(gaps)} proven, mean certified gap {sum(gaps) / len(gaps):.2%}")
    assert proven >= 9


DATA = default_data_dir()
#: PAL's 160-job workloads of issue 45's floor and the nodes of 4 GPUs each takes (2, 3 and 6 have 48-GPU jobs)
PAL_WORKLOADS = {1: 8, 2: 16, 3: 16, 4: 8, 6: 16}


@pytest.mark.skipif(DATA is None, reason="raw public data not found (PAL workloads)")
@pytest.mark.xfail(reason="issue 45: about 15-17 %, at the floor in some runs; the time-indexed bound and the "
                          "schedules are weak there (docs/oracle-offline.md, \"Why queue gaps stay open\")",
                   strict=False)
def test_auto_on_pal_workloads_at_30s(benchmark):
    """Issue 45's PAL floor: `auto`, 30 s, 2 threads, workloads 1-4 and 6 as offline instances
    (``jctlab make-instance pal --workload W --nodes N --gpus-per-node 4 --seed 10000 --problem offline``);
    the mean certified gap (objective − bound) / bound at most 15 % (about 3 min)."""
    insts = [load_pal(w, data_dir=DATA, nodes=n, gpus_per_node=4, seed=10_000, problem="offline")
             for w, n in PAL_WORKLOADS.items()]
    gaps, _ = _auto_on(benchmark, insts, 30, 2)
    print("\nPAL workloads: " + ", ".join(f"{w}: {g:.1%}" for w, g in zip(PAL_WORKLOADS, gaps))
          + f"; mean certified gap {sum(gaps) / len(gaps):.2%}")
    assert sum(gaps) / len(gaps) <= 0.15
