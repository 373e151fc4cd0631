"""The preemptive LP bound (:mod:`formulations.preemptive_bound`): below every schedule, and its rows bite.

Loaded tiny instances (jobs queue for GPUs, multi-GPU jobs whose GPU area exceeds their compute): the bound
must stay below the brute-force optimum of the offline class and below every policy's replayed preemptive
schedule; the all-GPU area row and the busy-time tangents must lift it where they apply.
"""

from __future__ import annotations

import itertools
import math
import time

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import preemptive_bound
from jctlab import registry
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.speed import SpeedError, duration
from jctlab.simulate import simulate

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def loaded(seed: int, problem: str = "offline", **over):
    """4 jobs of 1-4 GPUs arriving within minutes on 4 GPUs: they queue."""
    kw = dict(gpus=4, nodes=1 + seed % 2, jobs=4, max_size=4, elastic=0.5, interarrival_s=60,
              duration_h=(0.1, 0.5), variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.3 * (seed % 3),
              cpu_mem=seed % 4 == 1, ps=seed % 4 == 2, seed=seed, problem=problem)
    kw.update(over)
    return offline_instance(**kw)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["mean_jct", "weighted_jct", "makespan"]))
def test_bound_is_below_the_brute_force_optimum_of_loaded_instances(seed, objective):
    inst = loaded(seed, objective=objective)
    ref = brute.solve(inst)
    assume(ref.status == "optimal")     # a PS job with no CPUs for its server on 2-GPU nodes: infeasible
    assert preemptive_bound.lower_bound(inst) <= ref.objective * (1 + 1e-9)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_bound_is_below_every_preemptive_policy(seed):
    inst = loaded(seed, problem="preemptive", jobs=6, restart_s=10.0, ps=False)
    lb = preemptive_bound.lower_bound(inst)
    for name in ("srtf+packed-sticky", "las+random-nonsticky", "fifo-firstfit", "optimus"):
        _, rep = simulate(inst, registry.policy_factory(name)(inst, seed=0))
        assert rep.valid, (name, rep.error)
        assert lb <= rep.objective * (1 + 1e-9), name


def test_gpu_second_rows_charge_what_a_multi_gpu_job_holds(monkeypatch):
    """Rigid multi-GPU jobs with all-reduce on one 4-GPU node: the GPU-second rows charge n × duration and
    let no more of them overlap than fit; without them (modes that hold no GPUs) the bound drops."""
    inst = loaded(0, nodes=1, elastic=0.0)
    assert any(min(j.sizes) > 1 for j in inst.jobs)
    opt = brute.solve(inst).objective
    with_area = preemptive_bound.lower_bound(inst)
    real = preemptive_bound.job_modes
    monkeypatch.setattr(preemptive_bound, "job_modes",
                        lambda inst_, caps=None: [[preemptive_bound.Mode(m.dur, 0) for m in ms]
                                                  for ms in real(inst_, caps)])
    without = preemptive_bound.lower_bound(inst)
    assert without < with_area <= opt * (1 + 1e-9)


def _scarce_fast_gpu() -> Instance:
    """Two 100-iteration jobs at t = 0; one v100 (1 iteration/s) and four k80s (0.25 iteration/s)."""
    d = loaded(0, jobs=2, nodes=2, elastic=0.0, variability=0.0, cpu_mem=False, ps=False).to_dict()
    for job in d["jobs"]:
        job.update(arrival=0.0, sizes=[1], batch=1.0, iterations=100.0, samples_per_s={"v100": 1.0, "k80": 0.25})
    d["cluster"]["nodes"][0]["gpus"] = [{"type": "v100"}]
    d["cluster"]["nodes"][1]["gpus"] = [{"type": "k80"}] * 4
    return Instance.from_dict(d)


def test_work_on_a_slower_type_takes_its_run_time():
    """The optimum runs both jobs on the v100 one after the other (mean JCT 150; a k80 takes 400 s). A
    relaxation that caps each job's rate by its fastest run time and charges each type's GPU-seconds at a
    perfect split lets the second job run on k80s at the v100's pace (bound 100, the trivial one). Modes charge
    the k80 run time: the bound rises to about 129."""
    inst = _scarce_fast_gpu()
    assert [[(m.dur, m.by_type) for m in ms] for ms in preemptive_bound.job_modes(inst)] == [
        [(100.0, (("v100", 1),)), (400.0, (("k80", 1),))]] * 2
    opt = brute.solve(inst).objective
    assert math.isclose(opt, 150.0, rel_tol=1e-9)
    assert 125.0 < preemptive_bound.lower_bound(inst) <= opt * (1 + 1e-9)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_modes_charge_no_more_than_any_allocation(seed):
    """Law (the LP's validity): for every allocation G of n GPUs of a job (one node or spread; nodes of mixed GPU
    types), some mode charges no more per unit of work than G takes: run time d_m ≤ p(G), all GPU-seconds
    n_m·d_m ≤ n·p(G), type-τ GPU-seconds c_{m,τ}·d_m ≤ |G_τ|·p(G)."""
    d = loaded(seed, nodes=3, gpus=6, max_size=4, elastic=0.7, variability=0.1, ps=False).to_dict()
    types = ("v100", "p100", "k80")
    for i, nd in enumerate(d["cluster"]["nodes"]):   # one type per node (even seeds) or two
        nd["gpus"] = [{**g, "type": types[(i + k * (seed % 2)) % 3]} for k, g in enumerate(nd["gpus"])]
    for job in d["jobs"]:
        job["samples_per_s"] = {t: job["samples_per_s"][next(iter(job["samples_per_s"]))] / (1 + k)
                                for k, t in enumerate(types)}
    inst = Instance.from_dict(d)
    modes = preemptive_bound.job_modes(inst)
    for j, job in enumerate(inst.jobs):
        for n in job.sizes:
            for gs in itertools.combinations(inst.cluster.gpus, n):
                try:
                    p = duration(job, Allocation(tuple(g.id for g in gs)), inst.cluster)
                except SpeedError:
                    continue
                held = {t: sum(1 for g in gs if g.type == t) for t in types}
                assert any(m.dur <= p * (1 + 1e-9) and m.gpus * m.dur <= n * p * (1 + 1e-9)
                           and all(c * m.dur <= held[t] * p * (1 + 1e-9) for t, c in m.by_type)
                           for m in modes[j]), (j, n, held, p, modes[j])


@pytest.mark.parametrize("seed", [3, 4])
def test_tangents_lift_the_bound_where_buckets_are_coarse(seed):
    """Without tangents a bucket's share of a job counts as done at the bucket's start; with them it takes
    p·y seconds from there (8 buckets: coarse, as on long real traces)."""
    inst = loaded(seed, jobs=5)
    opt = brute.solve(inst).objective
    plain = preemptive_bound.lower_bound(inst, n_grid=8, tangents=False)
    tangent = preemptive_bound.lower_bound(inst, n_grid=8)
    assert plain * 1.05 < tangent <= opt * (1 + 1e-9)
    assert preemptive_bound.lower_bound(inst) <= opt * (1 + 1e-9)


def test_time_limited_bound_refines_coarse_buckets_first(monkeypatch):
    """Under a time limit the plain LP runs on 20, 40, 80, then 160 buckets, then with tangents on 160, so a
    heterogeneous queue whose 160-bucket LP takes minutes still gets a bound from a coarse grid; without a limit,
    160 buckets with tangents at once. Every grid gives a bound below the optimum, and the tangents never a lower
    one on the same buckets."""
    inst = loaded(3, jobs=5)
    opt = brute.solve(inst).objective
    real = preemptive_bound._solve_lp
    calls = []

    def spy(inst_, b, pm, modes, tangents, time_limit, dff=None):
        val = real(inst_, b, pm, modes, tangents, time_limit, dff)
        calls.append((len(b), tangents, val))
        return val

    monkeypatch.setattr(preemptive_bound, "_solve_lp", spy)
    limited = preemptive_bound.lower_bound(inst, time_limit=60)
    assert [t for _, t, _ in calls] == [False] * 4 + [True]
    sizes = [n for n, _, _ in calls]
    assert sizes[:4] == sorted(sizes[:4]) and sizes[3] == sizes[4] and sizes[0] < sizes[3]
    vals = [v for _, _, v in calls]
    assert all(v <= opt * (1 + 1e-9) for v in vals) and limited == max(vals) and vals[4] >= vals[3] * (1 - 1e-7)
    calls.clear()
    assert math.isclose(preemptive_bound.lower_bound(inst), limited, rel_tol=1e-7)
    assert [(n, t) for n, t, _ in calls] == [(sizes[4], True)]


def test_tangents_run_on_the_last_grid_that_fits(monkeypatch):
    """When the next finer grid would not fit the time left, the tangents still run on the last grid solved."""
    inst = loaded(3, jobs=5)
    real = preemptive_bound._solve_lp
    calls = []

    def slow(inst_, b, pm, modes, tangents, time_limit, dff=None):
        calls.append((len(b), tangents))
        if len(calls) == 1:
            time.sleep(0.3)      # the first LP "takes" 0.3 s: 40 buckets (5x) do not fit in the 1.1 s left
        return real(inst_, b, pm, modes, tangents, time_limit, dff)

    monkeypatch.setattr(preemptive_bound, "_solve_lp", slow)
    preemptive_bound.lower_bound(inst, time_limit=1.4)
    assert [t for _, t in calls] == [False, True] and calls[0][0] == calls[1][0]
