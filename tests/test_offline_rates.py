"""Rate bands and GPU literals (formulations/offline/rates.py): valid bounds, exact at a threshold."""

from __future__ import annotations

import random

import pytest

from formulations import brute
from formulations.offline import rates as ora
from formulations.offline.classes import node_complete_options
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_model import CpsatRun, ModelHint, solve_option_model, time_unit
from formulations.offline.decode import decode
from formulations.offline.greedy import greedy
from formulations.offline.hints import hint_assignment
from formulations.offline.options import binding_resources, capacities
from formulations.results import gap_open
from jctlab.generators import offline_instance
from jctlab.model import Instance


def node_exact(inst, opts, hint=None):
    """Optimum (seconds, mean objective) of the node-exact model over ``opts``, solved to the end."""
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all", "set")} | binding_resources(inst, opts)
    unit = time_unit(inst, node_complete_options(inst))
    starts = hint_assignment(inst, opts, hint)
    sol = solve_option_model(inst, opts, res, CpsatRun(None, 1, 0),
                             None if starts is None else ModelHint(starts, ora.spread_gpus(inst, hint)), unit=unit)
    assert sol.status == "OPTIMAL"
    return sol.bound(inst), sol


def packed(slow: int = 1, size: int = 2) -> Instance:
    """Two nodes of V100s, each with one fast and ``slow`` slow GPUs for class A. Two long single-GPU jobs
    take the fast GPUs at 0; a short job of ``size`` GPUs arrives at 10 and runs at once on slow GPUs of both
    nodes (no node has ``size`` GPUs free for 1 000 s). Its spread pattern assumes the fast GPUs."""
    gpus = [{"type": "v100", "variability": {"A": 1.0}}] + [{"type": "v100", "variability": {"A": 1.5}}] * slow
    return Instance.from_dict({
        "format": "jctlab.instance/1", "name": "packed", "problem": "offline", "objective": "mean_jct",
        "cluster": {"nodes": [{"name": f"n{i}", "cpus": 8, "mem_gb": 64, "gpus": gpus} for i in range(2)],
                    "intra_node_gbps": 100.0, "inter_node_gbps": 25.0, "locality_penalty": 1.2,
                    "split": "proportional", "interference": {}, "restart_s": 0.0},
        "jobs": [{"name": f"long{i}", "arrival": 0.0, "batch": 32, "iterations": 10_000,
                  "samples_per_s": {"v100": 320.0}, "comm_mb": 0.0, "sizes": [1], "class": "A"} for i in range(2)]
        + [{"name": "short", "arrival": 10.0, "batch": 64, "iterations": 500,
            "samples_per_s": {"v100": 320.0}, "comm_mb": 10.0, "sizes": [size], "class": "A"}],
    })


@pytest.mark.parametrize("slow,size", [(1, 2), (2, 3)])
def test_rate_bands_make_a_spread_job_exact(slow, size):
    """Packed nodes (one slow GPU each, a 2-GPU job), and nodes with more free GPUs than the job takes there
    (two slow ones each, a 3-GPU job: rate capacities per node, which these literals replaced, let it claim
    the rate of the fast GPU on a node where it holds one slow one, and stayed at the plain bound)."""
    inst = packed(slow, size)
    opt = brute.solve(inst)
    mixed = node_complete_options(inst)
    plain, _ = node_exact(inst, mixed)
    assert plain < opt.objective * (1 - 1e-3)            # the pattern's duration assumes the fast GPUs
    banded = ora.banded(inst, mixed, ora.spread_rates(inst, opt.schedule))
    assert sum(map(len, banded)) > sum(map(len, mixed))
    bound, sol = node_exact(inst, banded, opt.schedule)
    assert bound == pytest.approx(opt.objective, rel=1e-6)
    dec = decode(inst, banded, sol, "cpsat")
    assert dec.replay.valid and dec.objective == pytest.approx(opt.objective, rel=1e-6)


def small(seed: int):
    return offline_instance(gpus=4, nodes=2, jobs=4, max_size=2, variability=0.1, locality_penalty=1.3,
                            interarrival_s=200, duration_h=(0.1, 1.0), elastic=0.5, cpu_mem=seed % 3 == 1,
                            ps=seed % 3 == 2, seed=seed)


@pytest.mark.parametrize("seed", range(8))
def test_rate_bands_keep_a_valid_bound_and_only_tighten(seed):
    """Thresholds from the optimum, a greedy schedule and random rate sums: the banded node-exact model's
    optimum lies between the plain one's and the brute-force optimum."""
    inst = small(seed)
    opt = brute.solve(inst)
    mixed = node_complete_options(inst)
    plain, _ = node_exact(inst, mixed)
    rng = random.Random(seed)
    ths: dict = {}
    for sched in (opt.schedule, greedy(inst, "t").schedule):
        for j, rs in ora.spread_rates(inst, sched).items():
            ths.setdefault(j, set()).update(rs)
    for j in range(len(inst.jobs)):
        rates = sorted(r for r in ora.weights(inst, j).values() if r > 0)
        ths.setdefault(j, set()).update(rng.uniform(rates[0], 2 * rates[-1]) for _ in range(3))
    bound, sol = node_exact(inst, ora.banded(inst, mixed, ths), opt.schedule)
    assert plain <= bound * (1 + 1e-9)
    assert bound <= opt.objective * (1 + 1e-9)


def test_the_pipeline_runs_rate_rounds_with_a_valid_bound(large_path):
    """The large-instance path (forced): after a proven node-exact model that leaves a gap the rate rounds run
    (and on these instances some do); every result replays with its objective and its bound stays below the
    brute-force optimum (``large_path`` checks both)."""
    gaps = 0
    for seed in (0, 5, 7):
        r = large_path(small(seed))
        ne = next((p for p in r.params["phases"] if p["phase"] == "node-exact"), None)
        if ne is not None and ne["status"] == "OPTIMAL" and gap_open(ne["objective"], ne["bound"]):
            gaps += 1
            rb = r.params["rate_bands"]
            assert 1 <= rb["rounds"] <= CpsatParams().rate_rounds and rb["thresholds"] >= 1
    assert gaps >= 1


def test_rate_at_inverts_the_band_duration():
    inst = small(0)
    for j in range(len(inst.jobs)):
        if ora.eligible(inst, j):
            for sigma in (50.0, 333.3, 2_000.0):
                d = ora.rate_lb(inst, j, 2, sigma)
                assert ora.rate_at(inst, j, 2, d) == pytest.approx(sigma, rel=1e-9)
            assert ora.rate_at(inst, j, 2, 0.0) == float("inf")


@pytest.mark.parametrize("slow,size", [(1, 2), (2, 3)])
def test_fine_bands_split_the_incumbents_pattern_from_its_rate_to_its_top(slow, size):
    """Dense thresholds only in the pattern a schedule's spread job runs in, between its rate sum and the
    pattern's top, each band shortening the duration by at most the step; the model keeps the optimum."""
    inst = packed(slow, size)
    opt = brute.solve(inst)
    mixed = node_complete_options(inst)
    (j, alloc), = ora._spread_segments(inst, opt.schedule)
    r = ora.rate_sum(inst, j, alloc.gpus)
    step = 0.05
    fine = ora.fine_thresholds(inst, mixed, opt.schedule, step)
    (key, ts), = fine.items()
    pat = next(o for o in mixed[j] if ora._is_pattern(o) and o.cls[3] == key[1])
    top = ora.pattern_top(inst, pat)
    assert key[0] == j and len(ts) >= 2 and all(r < t < top for t in ts)
    durs = [ora.rate_lb(inst, j, size, t) for t in sorted({r, *ts, top})]
    widest = (durs[0] - durs[-1]) / ora.FINE_BANDS          # more bands than FINE_BANDS would be needed: wider
    assert max(a - b for a, b in zip(durs, durs[1:])) <= max(step, widest) * (1 + 1e-9)
    assert len(ts) <= ora.FINE_BANDS - 1
    banded = ora.banded(inst, mixed, ora.spread_rates(inst, opt.schedule), fine)
    others = [o for o in banded[j] if ora._is_pattern(o) and o.cls[3] != key[1]]
    assert len([o for o in banded[j] if ora._is_pattern(o)]) - len(others) == len(ts) + 2
    bound, _ = node_exact(inst, banded, opt.schedule)
    assert bound == pytest.approx(opt.objective, rel=1e-6)


def test_no_fine_bands_where_more_jobs_spread_than_fine_jobs():
    inst = packed(1, 2)
    opt = brute.solve(inst)
    mixed = node_complete_options(inst)
    assert ora.fine_thresholds(inst, mixed, opt.schedule, 0.05)
    assert ora.fine_thresholds(inst, mixed, opt.schedule, 0.05, max_jobs=0) == {}


@pytest.mark.parametrize("seed", range(8))
def test_fine_bands_keep_a_valid_bound(seed):
    """Dense thresholds in the patterns of a greedy schedule's and a random schedule's spread jobs: the
    banded optimum stays between the plain one and brute force."""
    inst = small(seed)
    opt = brute.solve(inst)
    mixed = node_complete_options(inst)
    plain, _ = node_exact(inst, mixed)
    first = greedy(inst, "t").schedule
    ths, fine = ora.spread_rates(inst, first), ora.fine_thresholds(inst, mixed, first, 0.5)
    for k, ts in ora.fine_thresholds(inst, mixed, opt.schedule, 2.0).items():
        fine.setdefault(k, set()).update(ts)
    bound, _ = node_exact(inst, ora.banded(inst, mixed, {**ths, **{j: {1.0} for j, _ in fine if j not in ths}}, fine),
                          opt.schedule)
    assert plain <= bound * (1 + 1e-9)
    assert bound <= opt.objective * (1 + 1e-9)
