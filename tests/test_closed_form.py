"""The closed-form replay (:mod:`jctlab.closed_form`) is a shortcut to the engine's verdict, never a second one.

The law: whenever :func:`closed_form` returns a result, the engine accepts the same segments and computes the same
completions, first starts and GPU-seconds, bit for bit. Checked by Hypothesis on schedules that policies produce
(preemptive rounds: many segments, restarts, resumed jobs) and on the same schedules mutated (starts moved onto
busy GPUs or before arrivals, ends cut before or moved around the job's completion, segments dropped, GPUs
swapped), where the engine often rejects. And the shortcut must actually be taken: on every simulated schedule
of a cluster it applies to, it returns a result.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import jctlab.closed_form as closed_form_module
from jctlab.closed_form import _nodes_touched, applies, closed_form
from jctlab.errors import InvalidSchedule
from jctlab.generators import offline_instance
from jctlab.model import (
    GPU,
    Allocation,
    Cluster,
    Instance,
    Job,
    Node,
    Schedule,
    Segment,
)
from jctlab.registry import policy_factory
from jctlab.replay import checked_segments, engine_run, replay
from jctlab.simulate import simulate

POLICIES = ("fifo+random-nonsticky", "srtf+packed-nonsticky", "las+packed-sticky", "fifo-firstfit")


def _simulated(seed: int, jobs: int, gpus: int, restart: float, policy: str) -> tuple[Instance, Schedule]:
    inst = offline_instance(gpus=gpus, nodes=max(1, gpus // 4), jobs=jobs, seed=seed, variability=0.1,
                            locality_penalty=1.3, max_size=4, problem="preemptive", restart_s=restart,
                            interarrival_s=300.0)
    sched, rep = simulate(inst, policy_factory(policy)(inst, seed=seed))
    assert rep.valid, rep.error
    return inst, sched


def _engine_verdict(inst, per_job, resumed):
    try:
        return engine_run(inst, per_job, resumed)
    except InvalidSchedule:
        return None


@st.composite
def simulated(draw):
    seed = draw(st.integers(0, 10_000))
    inst, sched = _simulated(seed, draw(st.integers(2, 10)), draw(st.sampled_from([4, 8])),
                             draw(st.sampled_from([0.0, 30.0])), draw(st.sampled_from(POLICIES)))
    resumed = frozenset(draw(st.sets(st.integers(0, len(inst.jobs) - 1), max_size=3)))
    return inst, sched, resumed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(simulated())
def test_on_simulated_schedules_it_is_taken_and_equals_the_engine(case):
    inst, sched, _ = case        # (as simulated: a resumed job's restart would move its completion)
    assert applies(inst)
    cols = checked_segments(inst, sched)
    got = closed_form(inst, cols)
    assert got is not None
    assert got == engine_run(inst, cols.per_job(), frozenset())
    # a wrong count of nodes could go unseen above (the speed memo prices a new key from the allocation itself)
    node_of = {g.id: g.node for g in inst.cluster.gpus}
    assert _nodes_touched(inst, cols).tolist() == [len({node_of[g] for g in s.alloc.gpus}) for s in sched.segments]


def _mutate(draw, inst: Instance, sched: Schedule) -> tuple[Segment, ...]:
    segs = list(sched.segments)
    i = draw(st.integers(0, len(segs) - 1))
    s = segs[i]
    how = draw(st.sampled_from(("shift", "gpus", "cut", "end-near-completion", "drop", "arrival")))
    if how == "shift":
        d = draw(st.sampled_from([-600.0, -1.0, -1e-6, 1e-9, 1e-6, 1.0, 600.0]))
        segs[i] = dataclasses.replace(s, start=max(0.0, s.start + d))
    elif how == "gpus":
        other = segs[draw(st.integers(0, len(segs) - 1))]
        segs[i] = dataclasses.replace(s, alloc=dataclasses.replace(s.alloc, gpus=other.alloc.gpus))
    elif how == "cut":
        end = s.end if s.end is not None else s.start + 3600.0
        segs[i] = dataclasses.replace(s, end=s.start + (end - s.start) * draw(st.sampled_from([0.5, 0.999999])))
    elif how == "end-near-completion":
        c = replay(inst, sched).completion[s.job]
        rel = draw(st.sampled_from([-1e-6, -1e-10, 0.0, 1e-10, 1e-6]))
        segs[i] = dataclasses.replace(s, end=c + rel * max(1.0, c))
    elif how == "drop" and len(segs) > 1:
        del segs[i]
    else:
        segs[i] = dataclasses.replace(s, start=max(0.0, inst.job[s.job].arrival - draw(st.sampled_from([1e-12, 1.0]))))
    return tuple(segs)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(simulated(), st.data())
def test_on_mutated_schedules_a_result_means_the_engine_accepts_with_the_same_numbers(case, data):
    inst, sched, resumed = case
    mutated = dataclasses.replace(sched, segments=_mutate(data.draw, inst, sched))
    try:
        cols = checked_segments(inst, mutated)
    except InvalidSchedule:
        assume(False)
    got = closed_form(inst, cols, resumed)
    if got is not None:
        assert got == _engine_verdict(inst, cols.per_job(), resumed)
    for rows in (1, 2, 3):      # the row work in chunks of a few rows: pairs across every boundary compared too
        with _chunks_of(rows):
            assert closed_form(inst, cols, resumed) == got


@contextlib.contextmanager
def _chunks_of(rows: int):
    saved, closed_form_module._CHUNK = closed_form_module._CHUNK, rows
    try:
        yield
    finally:
        closed_form_module._CHUNK = saved


def _job(name: str) -> Job:
    """100 iterations at 0.1 s each on a V100 (batch 1 at 10 samples/s): 10 s alone."""
    return Job(name, 0.0, 1.0, 100.0, {"v100": 10.0})


def _cluster(cpus: float, gpus: int = 2) -> Cluster:
    return Cluster(nodes=(Node("n", cpus, 64.0, tuple(GPU("n", i, "v100") for i in range(gpus))),))


def test_interference_and_inexact_fair_shares_go_to_the_engine():
    assert not applies(offline_instance(gpus=4, nodes=1, jobs=2, interference=0.3, problem="preemptive"))
    assert not applies(Instance("x", "preemptive", "mean_jct", _cluster(10.0, 3), (_job("a"),)))  # 10/3 CPUs a GPU
    assert applies(Instance("x", "preemptive", "mean_jct", _cluster(12.0), (_job("a"),)))


def test_a_gpu_freed_by_a_completion_within_the_tolerance_or_by_a_stop_at_the_next_start():
    """Job a completes at 10 s; b starts on its GPU 1e-12 s before: the engine pops a's completion first (within
    its tolerance) and the closed form agrees; 1 ms before, it leaves the schedule to the engine, which rejects it."""
    inst = Instance("x", "preemptive", "mean_jct", _cluster(8.0), (_job("a"), _job("b")))
    for gap, ok in ((1e-12, True), (1e-3, False)):
        sched = Schedule("x", "t", (Segment("a", 0.0, None, Allocation(("n:0",))),
                                    Segment("b", 10.0 - gap, None, Allocation(("n:0",)))))
        cols = checked_segments(inst, sched)
        got = closed_form(inst, cols)
        assert (got is not None) == ok
        assert got == _engine_verdict(inst, cols.per_job(), frozenset())
        assert replay(inst, sched).valid == ok
    # a stop frees the GPU at its time, with no tolerance: at equal times the engine stops, then starts
    for gap, ok in ((0.0, True), (1e-12, False)):
        sched = Schedule("x", "t", (Segment("a", 0.0, 4.0, Allocation(("n:0",))),
                                    Segment("b", 4.0 - gap, None, Allocation(("n:0",))),
                                    Segment("a", 4.0, None, Allocation(("n:1",)))))
        cols = checked_segments(inst, sched)
        got = closed_form(inst, cols)
        assert (got is not None) == ok
        assert got == _engine_verdict(inst, cols.per_job(), frozenset())
        assert replay(inst, sched).valid == ok


def test_a_resumed_job_pays_the_restart_on_its_first_segment():
    inst = Instance("x", "preemptive", "mean_jct", dataclasses.replace(_cluster(8.0), restart_s=30.0), (_job("a"),))
    sched = Schedule("x", "t", (Segment("a", 5.0, 10.0, Allocation(("n:0",))), Segment("a", 10.0, None, Allocation(("n:1",)))))
    cols = checked_segments(inst, sched)
    # the second segment pays 30 s; the first does 5 of the job's 10 s, or nothing when it pays them too
    for resumed, completion in ((frozenset(), 45.0), (frozenset({0}), 50.0)):
        got = closed_form(inst, cols, resumed)
        assert got is not None and got == engine_run(inst, cols.per_job(), resumed)
        assert got.completion[0] == pytest.approx(completion)


def test_parameter_servers_and_cpu_levels_go_to_the_engine():
    inst = offline_instance(gpus=8, nodes=2, jobs=6, seed=3, ps=True, problem="preemptive")
    sched, rep = simulate(inst, policy_factory("fifo-firstfit")(inst, seed=0))
    assert rep.valid and any(s.alloc.ps_nodes for s in sched.segments)
    assert closed_form(inst, checked_segments(inst, sched)) is None
    inst2, sched2 = _simulated(1, 4, 4, 30.0, "fifo-firstfit")
    leveled = dataclasses.replace(sched2, segments=tuple(
        dataclasses.replace(s, alloc=dataclasses.replace(s.alloc, cpus_per_gpu=4.0, mem_gb_per_gpu=32.0))
        for s in sched2.segments))
    assert closed_form(inst2, checked_segments(inst2, leveled)) is None
    assert not replay(inst2, leveled).valid     # no cpu_mem table: the engine refuses the level


def test_nodes_counted_past_64_nodes():
    """The closed form counts a segment's nodes 64 at a time (bits of their indices): random placement on 80 nodes
    of 2 GPUs spreads 8-GPU jobs over nodes of both words; the counts must be the nodes' and the engine's numbers
    must still come out."""
    inst = offline_instance(gpus=160, nodes=80, jobs=40, seed=3, variability=0.1, locality_penalty=1.3, max_size=8,
                            problem="preemptive", restart_s=30.0, interarrival_s=120.0)
    sched, rep = simulate(inst, policy_factory("fifo+random-nonsticky")(inst, seed=1))
    assert rep.valid, rep.error
    cols = checked_segments(inst, sched)
    node_of = {g.id: g.node for g in inst.cluster.gpus}
    first_64 = {n.name for n in inst.cluster.nodes[:64]}
    on = [{node_of[g] for g in s.alloc.gpus} for s in sched.segments]
    assert max(map(len, on)) >= 4 and {ns <= first_64 for ns in on} == {True, False}   # past the first 64 too
    assert _nodes_touched(inst, cols).tolist() == [len(ns) for ns in on]
    got = closed_form(inst, cols)
    assert got is not None and got == engine_run(inst, cols.per_job(), frozenset())


def test_a_gpu_of_a_type_the_job_cannot_use_goes_to_the_engine():
    """Job a runs on V100s only: on the K80 the closed form leaves the verdict to the engine, which refuses it; on
    the V100 both give the same numbers."""
    cl = Cluster(nodes=(Node("n", 8.0, 64.0, (GPU("n", 0, "v100"),)), Node("m", 8.0, 64.0, (GPU("m", 0, "k80"),))))
    inst = Instance("x", "preemptive", "mean_jct", cl, (_job("a"), Job("b", 0.0, 1.0, 100.0, {"v100": 10.0, "k80": 5.0})))
    for gpu_a, gpu_b, ok in (("n:0", "m:0", True), ("m:0", "n:0", False)):
        sched = Schedule("x", "t", (Segment("a", 0.0, None, Allocation((gpu_a,))),
                                    Segment("b", 0.0, None, Allocation((gpu_b,)))))
        cols = checked_segments(inst, sched)
        got = closed_form(inst, cols)
        assert (got is not None) == ok
        assert got == _engine_verdict(inst, cols.per_job(), frozenset())
        assert replay(inst, sched).valid == ok
