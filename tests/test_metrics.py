"""The metrics of a replayed schedule: values computed by hand on a tiny fixture, and the numpy-free
arithmetic equal to numpy's to the last bit (a law: replay loads no numerical library)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.queues import QUEUES
from jctlab.metrics import (
    ReferenceDurations,
    _mean_contention,
    fsum_pairwise,
    jain,
    mean,
    percentile,
    strip_variability,
)
from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.replay import replay
from jctlab.speed import base_iteration_time
from tests.conftest import tiny_dict


def test_metric_values_by_hand(tiny):
    """Job a (batch 64, 100 iterations, 100 samples/s on a V100) on n0:0 from 0: 0.64 s a step, ends at 64.
    Job b (batch 32, 50 iterations, 32 samples/s on a P100) on n1:0 from its arrival 5: 1 s a step, ends at 55."""
    sched = Schedule("tiny", "hand", (Segment("a", 0.0, None, Allocation(("n0:0",))),
                                      Segment("b", 5.0, None, Allocation(("n1:0",)))))
    rep = replay(tiny, sched)
    assert rep.valid, rep.error
    m = rep.metrics
    jct = {"a": 64.0, "b": 50.0}
    assert rep.completion == pytest.approx({"a": 64.0, "b": 55.0})
    assert m["mean_jct"] == pytest.approx(57.0) and m["weighted_jct"] == pytest.approx(57.0)
    # linear interpolation between the two sorted JCTs (50, 64) at (n - 1)·q
    assert m["p50_jct"] == pytest.approx(57.0)
    assert m["p95_jct"] == pytest.approx(50 + 14 * 0.95)
    assert m["p99_jct"] == pytest.approx(50 + 14 * 0.99)
    assert m["max_jct"] == 64.0 and m["makespan"] == 64.0
    assert m["utilization"] == pytest.approx((64 + 50) / (4 * 64))         # GPU-seconds held / GPUs × span
    assert m["mean_queueing_delay"] == 0.0 and m["preemptions"] == 0
    # slowdown: JCT / the run alone on the best homogeneous allocation, variability ignored.
    # a: 2 V100s, 64/200 s + ring all-reduce of 100 MB over 100 Gb/s (2·(1/2)·100·8/1000/100 = 0.008 s) a step
    # b: 2 V100s, 32/128 s a step, no communication
    ref = {"a": 100 * (64 / 200 + 0.008), "b": 50 * (32 / 128)}
    slow = {k: jct[k] / ref[k] for k in jct}
    assert m["mean_slowdown"] == pytest.approx((slow["a"] + slow["b"]) / 2)
    assert m["jain_slowdown"] == pytest.approx((slow["a"] + slow["b"]) ** 2 / (2 * (slow["a"] ** 2 + slow["b"] ** 2)))
    # finish-time fairness: slowdown / the mean number of jobs present over the job's life
    # (a: 1 job on [0, 5), 2 on [5, 55), 1 on [55, 64]; b: 2 jobs throughout)
    rho = {"a": slow["a"] / ((5 * 1 + 50 * 2 + 9 * 1) / 64), "b": slow["b"] / 2}
    assert m["ftf_rho_max"] == pytest.approx(max(rho.values()))
    assert m["ftf_rho_mean"] == pytest.approx((rho["a"] + rho["b"]) / 2)


def test_a_late_start_is_queueing_delay(tiny):
    sched = Schedule("tiny", "hand", (Segment("a", 0.0, None, Allocation(("n0:0",))),
                                      Segment("b", 20.0, None, Allocation(("n1:0",)))))
    m = replay(tiny, sched).metrics
    assert m["mean_queueing_delay"] == pytest.approx((0 + 15) / 2)


floats = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(xs=st.lists(floats, min_size=1, max_size=600))
def test_sums_and_means_are_numpys(xs):
    a = np.array(xs, dtype=float)
    assert fsum_pairwise(xs) == float(a.sum())
    assert mean(xs) == float(a.mean())


@settings(max_examples=300, deadline=None)
@given(xs=st.lists(floats, min_size=1, max_size=300), q=st.sampled_from([0, 1, 25, 50, 95, 99, 100]))
def test_percentiles_are_numpys(xs, q):
    assert percentile(xs, q) == float(np.percentile(np.array(xs, dtype=float), q))


@settings(max_examples=200, deadline=None)
@given(xs=st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1, max_size=300))
def test_jain_is_numpys(xs):
    """Jain's index on x / max|x| (scale-free, so no square overflows), to the last bit of numpy's."""
    a = np.array(xs, dtype=float)
    top = float(np.max(np.abs(a)))
    want = 1.0 if top == 0 else float(np.sum(a / top) ** 2 / (len(a) * float(np.sum((a / top) ** 2))))
    got = jain(xs)
    assert got == want or (math.isnan(got) and math.isnan(want))


def test_jain_of_huge_values_does_not_overflow():
    assert jain([1e300, 1e300]) == 1.0
    assert jain([1e300, 0.0]) == 0.5


def _contention_numpy(arr, comp):
    """The average number of jobs present over each job's life, computed with numpy arrays (reference)."""
    arr, comp = np.asarray(arr, dtype=float), np.asarray(comp, dtype=float)
    times = np.concatenate([arr, comp])
    delta = np.concatenate([np.ones_like(arr), -np.ones_like(comp)])
    order = np.lexsort((delta, times))
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    k = lambda t: np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 1)  # noqa: E731
    integral = lambda t: area[k(t)] + level[k(t)] * (t - times[k(t)])                     # noqa: E731
    life = comp - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        n = (integral(comp) - integral(arr)) / life
    return np.maximum(np.where(life > 0, n, 1.0), 1.0)


@settings(max_examples=200, deadline=None)
@given(jobs=st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30)), min_size=1, max_size=40))
def test_contention_is_numpys(jobs):
    arr = [float(a) for a, _ in jobs]
    comp = [float(a + d) for a, d in jobs]
    assert _mean_contention(arr, comp) == [float(x) for x in _contention_numpy(arr, comp)]


def test_a_job_that_fits_on_no_single_type_gets_a_finite_reference(tiny_d):
    """Job a takes 4 GPUs on a cluster of 2 V100s and 2 P100s: no homogeneous allocation exists, so its
    reference spans the types (the better of V100s first and P100s first); its slowdown is finite, and so
    are SJF's work estimate and every fairness metric (they were inf / 0 before)."""
    tiny_d["jobs"][0]["sizes"] = [4]
    inst = Instance.from_dict(tiny_d)
    cl = strip_variability(inst.cluster)
    job = inst.jobs[0]
    ref = ReferenceDurations(cl)(job)
    by_order = [job.iterations * base_iteration_time(job, Allocation(ids), cl)
                for ids in (("n0:0", "n0:1", "n1:0", "n1:1"), ("n1:0", "n1:1", "n0:0", "n0:1"))]
    assert math.isfinite(ref) and ref == min(by_order)
    everything = Allocation(("n0:0", "n0:1", "n1:0", "n1:1"))
    sched = Schedule("tiny", "hand", (Segment("a", 0.0, None, everything),
                                      Segment("b", 10 * ref, None, Allocation(("n1:0",)))))   # after a
    rep = replay(inst, sched)
    assert rep.valid, rep.error
    for k in ("mean_slowdown", "jain_slowdown", "ftf_rho_max", "ftf_rho_mean"):
        assert math.isfinite(rep.metrics[k]) and rep.metrics[k] > 0, k
    assert QUEUES["sjf"](inst, [4, 1]).work[0] == 4 * ref     # job a's only size is 4


@pytest.mark.parametrize("size", [1, 2])
@pytest.mark.parametrize("only", ["v100", "p100"])
def test_a_homogeneous_reference_is_unchanged_by_the_spanning_rule(size, only):
    """Where some size fits on one type, the reference is the best homogeneous allocation's, as before:
    the spanning rule only fills in jobs none of whose sizes fits."""
    d = tiny_dict()
    d["jobs"][0]["sizes"] = [size]
    d["jobs"][0]["samples_per_s"] = {only: 100.0}
    inst = Instance.from_dict(d)
    job = inst.jobs[0]
    ids = tuple(g.id for g in inst.cluster.gpus if g.type == only)[:size]
    assert ReferenceDurations(inst.cluster)(job) == job.iterations * base_iteration_time(job, Allocation(ids), inst.cluster)
