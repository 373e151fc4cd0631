"""The Lagrangian time-indexed bound (formulations.offline.lagrangian_bound) and its phase in the pipelines."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import lagrangian_bound, milp, pipeline, preemptive_bound
from formulations.offline.lagrangian_bound import LagrangianParams
from jctlab.generators import offline_instance
from jctlab.model import Instance

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: a coarser grid and fewer steps than the defaults: the law holds for any grid and any multipliers
SMALL = LagrangianParams(fine_slots=300, max_slots=600, steps=300, stall=20)


def loaded(seed: int, **over) -> Instance:
    """4 jobs of 1-4 GPUs arriving within minutes on 4 GPUs (rigid or elastic, CPU/memory levels, parameter
    servers, locality penalties): they queue."""
    kw = dict(gpus=4, nodes=1 + seed % 2, jobs=4, max_size=4, elastic=0.5, interarrival_s=60,
              duration_h=(0.1, 0.5), variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.3 * (seed % 3),
              cpu_mem=seed % 4 == 1, ps=seed % 4 == 2, seed=seed)
    kw.update(over)
    return offline_instance(**kw)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), objective=st.sampled_from(["mean_jct", "weighted_jct"]),
       fine=st.booleans())
def test_bound_is_below_the_brute_force_optimum(seed, objective, fine):
    inst = loaded(seed, objective=objective)
    ref = brute.solve(inst)
    assume(ref.status == "optimal")     # a PS job with no CPUs for its server on 2-GPU nodes: infeasible
    lb = lagrangian_bound.lower_bound(inst, params=LagrangianParams() if fine else SMALL)
    assert lb is not None and lb <= ref.objective * (1 + 1e-9)


def _long_then_short() -> Instance:
    """One GPU; a 1 000-s job at t = 0 and a 100-s one at t = 10."""
    d = loaded(0, gpus=1, nodes=1, jobs=2, max_size=1, elastic=0.0, variability=0.0, locality_penalty=1.0,
               cpu_mem=False, ps=False).to_dict()
    for job, (arrival, iterations) in zip(d["jobs"], [(0.0, 1000.0), (10.0, 100.0)]):
        job.update(arrival=arrival, sizes=[1], batch=1.0, iterations=iterations, comm_mb=0.0,
                   samples_per_s={t: 1.0 for t in job["samples_per_s"]})
    return Instance.from_dict(d)


def test_bound_sees_that_a_started_job_is_not_preempted():
    """Without preemption the short job waits for the long one, or the long one waits for it (mean JCT 605:
    the short one first, from t = 10). A preemptive schedule runs the long one from 0 and stops it at 10 (mean
    600): the preemptive LP stays below 600, the time-indexed bound reaches within 0.1 % of 605."""
    inst = _long_then_short()
    opt = brute.solve(inst).objective
    assert abs(opt - 605.0) < 1e-6
    pre = preemptive_bound.lower_bound(inst)
    lag = lagrangian_bound.lower_bound(inst)
    assert pre < 600.0 < 0.999 * opt < lag <= opt * (1 + 1e-9)


def test_makespan_gets_no_bound():
    assert lagrangian_bound.lower_bound(loaded(3, objective="makespan")) is None


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), scale=st.floats(0.0, 50.0))
def test_completion_order_is_each_jobs_cheapest_choice(seed, scale):
    """The order of completions in the relaxed problem: a permutation of the jobs for any multipliers; without
    prices (λ = 0) every job's cheapest choice is its fastest mode from its arrival, so the order is by
    a_j + (its shortest duration); with prices, by a_j + the flow of the choice that :meth:`evaluate` minimises."""
    inst = loaded(seed, jobs=6)
    rel = lagrangian_bound.relaxation(inst, SMALL)
    assume(rel is not None)
    zero = rel.priced(np.zeros(rel.shape))
    durs = [{m.dur for m in ms} for ms in preemptive_bound.job_modes(inst)]
    fastest = [min(d) for d in durs]
    arr = [j.arrival for j in inst.jobs]
    order = zero.completion_order(inst)
    ends = [arr[j] + fastest[j] for j in order]
    assert sorted(order) == list(range(len(inst.jobs)))
    assert all(a <= b + 1e-6 for a, b in itertools.pairwise(ends))
    lam = scale * np.random.default_rng(seed).random(rel.shape)
    priced = rel.priced(lam)
    flow = rel.flows(lam)
    _, pick = rel.evaluate(lam)
    for j, (_, s, _) in enumerate(pick):   # the minimising choice's flow: from slot s's start, one mode's duration
        wait = max(0.0, rel.tau[s] - arr[j])
        assert any(abs(flow[j] - (wait + d)) <= 1e-6 * (1 + flow[j]) for d in durs[j])
    order = priced.completion_order(inst)
    assert sorted(order) == list(range(len(inst.jobs)))
    done = [arr[j] + flow[j] for j in order]
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(done))


def _queue() -> Instance:
    return offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=1)


def _records(res) -> dict[str, float]:
    return {p["phase"]: p["bound"] for p in res.params["phases"]}


def test_pipeline_phase_raises_the_bound_on_a_queue_and_never_lowers_it(monkeypatch):
    """On a queue the bound is above the preemptive LP (both without a limit: their values do not depend on the
    machine), and the MILP pipeline runs it right after the preemptive LP: it only ever raises the pipeline's
    bound, so a (valid but) weaker value leaves the bound as it was."""
    inst = _queue()
    assert lagrangian_bound.lower_bound(inst) > preemptive_bound.lower_bound(inst)   # about 6 187 against 5 344
    res = milp.solve(inst, time_limit=3.0, threads=1)
    bounds = {p["phase"]: p["bound"] for p in res.params["phases"]}
    assert res.lower_bound >= bounds["lagrangian"]
    assert res.lower_bound <= res.objective
    lps: list[float] = []
    real_lp = pipeline.preemptive_lb

    def lp(*a, **kw):              # the queue test's preemptive LP, whatever the machine's load gives it
        lps.append(real_lp(*a, **kw))
        return lps[-1]

    monkeypatch.setattr(pipeline, "preemptive_lb", lp)
    real_multipliers = lagrangian_bound.multipliers
    monkeypatch.setattr(lagrangian_bound, "multipliers",
                        lambda *a, **k: dataclasses.replace(real_multipliers(*a, **k), value=1.0))
    weak = milp.solve(inst, time_limit=3.0, threads=1)
    bounds = {p["phase"]: p["bound"] for p in weak.params["phases"]}
    assert lps and bounds["lagrangian"] >= max(lps)     # the preemptive LP's bound kept, not lowered to the weak value
