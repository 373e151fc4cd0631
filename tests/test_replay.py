"""Replay (SPEC §4): one failing case per validity rule, and exact piecewise integration."""

from __future__ import annotations

import copy

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jctlab.columns import read_segments
from jctlab.errors import InputError, InvalidSchedule
from jctlab.model import Instance, Schedule
from jctlab.replay import _name_the_order_fault, check_order, replay

from .conftest import tiny_dict


def seg(job, start, gpus, end=None, **kw):
    return {"job": job, "start": start, "end": end, "gpus": list(gpus), **kw}


def sched(segments, instance="tiny", claimed=None):
    d = {"format": "jctlab.schedule/1", "instance": instance, "method": "test", "segments": segments}
    if claimed is not None:
        d["claimed"] = claimed
    return Schedule.from_dict(d)


GOOD = [seg("a", 0.0, ["n0:0"]), seg("b", 5.0, ["n1:0", "n1:1"])]


def test_valid_schedule_replays_with_hand_computed_completions(tiny):
    r = replay(tiny, sched(GOOD))
    assert r.valid, r.error
    ca = 100 * 0.64
    cb = 5.0 + 50 * (32 / 64)  # two P100s, comm 0: 32 / (32+32)
    assert r.completion == pytest.approx({"a": ca, "b": cb})
    assert r.objective == pytest.approx(((ca - 0) + (cb - 5)) / 2)
    assert r.metrics["makespan"] == pytest.approx(max(ca, cb))
    busy = ca * 1 + (cb - 5) * 2
    assert r.metrics["utilization"] == pytest.approx(busy / (4 * max(ca, cb)))


@pytest.mark.parametrize("segments, problem, message", [
    ([seg("a", 0.0, ["n0:0"])], "offline", "no segment"),
    ([seg("a", 0.0, ["n0:0"]), seg("b", 1.0, ["n1:0"])], "offline", "before its arrival"),
    ([seg("a", 0.0, ["n0:0", "n0:0"]), seg("b", 5.0, ["n1:0"])], "offline", "twice"),
    ([seg("a", 0.0, ["n0:0", "n0:1", "n1:0"]), seg("b", 5.0, ["n1:1"])], "offline", "allowed sizes"),
    ([seg("a", 0.0, ["n0:0"]), seg("b", 5.0, ["n0:0"])], "offline", "hosts job"),
    ([seg("a", 0.0, ["n0:0"], end=10.0), seg("b", 5.0, ["n1:0"])], "offline", "run to completion"),
    ([seg("a", 0.0, ["n0:0"]), seg("a", 70.0, ["n0:0"]), seg("b", 5.0, ["n1:0"])], "offline", "one per job"),
    ([seg("a", 0.0, ["n0:0"], end=20.0), seg("a", 10.0, ["n0:1"]), seg("b", 5.0, ["n1:0"])], "preemptive", "time order"),
    ([seg("a", 10.0, ["n0:0"], end=10.0), seg("a", 20.0, ["n0:1"]), seg("b", 5.0, ["n1:0"])], "preemptive", "not after its start"),
    ([seg("a", 0.0, ["n0:0"], end=20.0), seg("b", 5.0, ["n1:0"])], "preemptive", "does not complete"),
    ([seg("a", 0.0, ["n0:0"], end=200.0), seg("a", 300.0, ["n0:0"]), seg("b", 5.0, ["n1:0"])], "preemptive", "before its segment 0 ends"),
    ([seg("a", 0.0, ["n0:0"]), seg("b", 0.0, ["n1:0"])], "static", None),  # static: arrivals are 0 → valid
])
def test_validity_rules(segments, problem, message):
    d = tiny_dict()
    d["problem"] = problem
    if problem == "static":
        d["jobs"][1]["arrival"] = 0.0
    r = replay(Instance.from_dict(d), sched(segments))
    if message is None:
        assert r.valid, r.error
    else:
        assert not r.valid
        assert message in r.error


def test_static_schedules_start_every_job_at_zero():
    d = tiny_dict()
    d["problem"] = "static"
    d["jobs"][1]["arrival"] = 0.0
    r = replay(Instance.from_dict(d), sched([seg("a", 0.0, ["n0:0"]), seg("b", 1.0, ["n1:0"])]))
    assert not r.valid and "static" in r.error


def test_type_that_cannot_host(tiny_d):
    tiny_d["jobs"][0]["samples_per_s"]["p100"] = 0
    r = replay(Instance.from_dict(tiny_d), sched([seg("a", 0.0, ["n1:0"]), seg("b", 5.0, ["n0:0"])]))
    assert not r.valid and "cannot run" in r.error


def test_cpu_and_memory_capacity(tiny_d):
    tiny_d["jobs"][0]["cpu_mem"] = {"levels": [[6, 32, 1.2], [4, 32, 1.0]]}
    inst = Instance.from_dict(tiny_d)
    # 6 CPUs on n0:0 plus fair share (4) for b's GPU on n0:1 = 10 > 8
    over = sched([seg("a", 0.0, ["n0:0"], cpus_per_gpu=6, mem_gb_per_gpu=32), seg("b", 5.0, ["n0:1"])])
    r = replay(inst, over)
    assert not r.valid and "CPUs" in r.error
    ok = sched([seg("a", 0.0, ["n0:0"], cpus_per_gpu=6, mem_gb_per_gpu=32), seg("b", 5.0, ["n1:1"])])
    r = replay(inst, ok)
    assert r.valid, r.error
    assert r.completion["a"] == pytest.approx(64.0 / 1.2)
    tiny_d["cluster"]["nodes"][0]["mem_gb"] = 60
    r = replay(Instance.from_dict(tiny_d), sched([seg("a", 0.0, ["n0:0"], cpus_per_gpu=4, mem_gb_per_gpu=32),
                                                   seg("b", 5.0, ["n0:1"])]))
    assert not r.valid and "GB" in r.error


def test_ps_cpus_count_against_the_node(tiny_d):
    tiny_d["jobs"][0]["ps"] = {"max_ps": 2, "ps_cpus": 3, "theta": [0, 0, 0, 0]}
    inst = Instance.from_dict(tiny_d)
    r = replay(inst, sched([seg("a", 0.0, ["n0:0", "n0:1"], ps_nodes=["n0"]), seg("b", 5.0, ["n1:0"])]))
    assert not r.valid and "CPUs" in r.error  # 8 fair + 3 PS > 8
    r = replay(inst, sched([seg("a", 0.0, ["n0:0", "n0:1"], ps_nodes=["n1"]), seg("b", 5.0, ["n1:0"])]))
    assert r.valid, r.error


def test_claimed_objective_and_bound_are_checked(tiny):
    good = replay(tiny, sched(GOOD)).objective
    assert replay(tiny, sched(GOOD, claimed={"objective": good, "lower_bound": good * 0.9})).valid
    r = replay(tiny, sched(GOOD, claimed={"objective": good * 0.99}))
    assert not r.valid and "claimed objective" in r.error
    r = replay(tiny, sched(GOOD, claimed={"objective": good, "lower_bound": good * 1.01}))
    assert not r.valid and "lower bound" in r.error


@pytest.mark.parametrize("segments, field", [
    ([seg("a", 0.0, ["n9:0"]), seg("b", 5.0, ["n1:0"])], "segments[0].gpus[0]"),
    ([seg("a", 0.0, ["n0:7"]), seg("b", 5.0, ["n1:0"])], "segments[0].gpus[0]"),
    ([seg("zz", 0.0, ["n0:0"])], "segments[0].job"),
    ([seg("a", 0.0, ["n0:0"], ps_nodes=["nope"])], "segments[0].ps_nodes[0]"),
])
def test_unresolvable_references_are_bad_input(tiny, segments, field):
    with pytest.raises(InputError) as e:
        replay(tiny, sched(segments), source="s.json")
    assert e.value.field == field and "s.json" in str(e.value)


def test_schedule_for_another_instance_is_bad_input(tiny):
    with pytest.raises(InputError):
        replay(tiny, sched(GOOD, instance="other"))


def test_interference_is_integrated_piecewise():
    """a (class A) slows by 50% while b (class B) shares its node; b is unaffected."""
    d = tiny_dict(interference={"A": {"B": 0.5}})
    d["jobs"][0].update(iterations=100, batch=100, comm_mb=0)  # 1 s/iteration on n0:0
    d["jobs"][1].update(arrival=0.0, iterations=50, batch=64)  # 1 s/iteration on n0:1 (class B)
    inst = Instance.from_dict(d)
    r = replay(inst, sched([seg("a", 0.0, ["n0:0"]), seg("b", 0.0, ["n0:1"])]))
    assert r.valid, r.error
    assert r.completion["b"] == pytest.approx(50.0)
    assert r.completion["a"] == pytest.approx(50.0 + (100 - 50 / 1.5))
    # on different nodes there is no interference
    r = replay(inst, sched([seg("a", 0.0, ["n0:0"]), seg("b", 0.0, ["n1:0"])]))
    assert r.completion["a"] == pytest.approx(100.0)


def test_interference_counts_restart_time_as_running():
    d = tiny_dict(interference={"A": {"B": 1.0}}, restart_s=10.0)
    d["problem"] = "preemptive"
    d["jobs"][0].update(iterations=100, batch=100, comm_mb=0)
    d["jobs"][1].update(arrival=0.0, iterations=20, batch=64)  # b: 1 s/iteration
    inst = Instance.from_dict(d)
    # b runs [0,10) then resumes at 10: restart until 20 (holding GPUs: a still slowed), done at 20+10=30
    s = sched([seg("a", 0.0, ["n0:0"]), seg("b", 0.0, ["n0:1"], end=10.0), seg("b", 10.0, ["n0:1"])])
    r = replay(inst, s)
    assert r.valid, r.error
    assert r.completion["b"] == pytest.approx(30.0)
    assert r.completion["a"] == pytest.approx(30.0 + (100 - 30 / 2))
    assert r.metrics["preemptions"] == 1


def test_resumed_segments_pay_restart(tiny_d):
    tiny_d["problem"] = "preemptive"
    tiny_d["jobs"][0].update(batch=100, comm_mb=0)  # 1 s/iteration on n0:0, 100 iterations
    inst = Instance.from_dict(tiny_d)
    s = sched([seg("a", 0.0, ["n0:0"], end=40.0), seg("a", 50.0, ["n0:0"]), seg("b", 5.0, ["n1:0"])])
    r = replay(inst, s)
    assert r.valid, r.error
    assert r.completion["a"] == pytest.approx(50 + 10 + 60)


def test_gpu_freed_at_t_can_be_taken_at_t(tiny):
    ca = 64.0
    r = replay(tiny, sched([seg("a", 0.0, ["n0:0"]), seg("b", ca, ["n0:0"])]))
    assert r.valid, r.error


def test_replay_does_not_mutate_and_is_repeatable(tiny):
    s = sched(GOOD)
    before = copy.deepcopy(s.to_dict())
    r1, r2 = replay(tiny, s), replay(tiny, s)
    assert r1 == r2 and s.to_dict() == before


@st.composite
def segment_lists(draw):
    """Each job's segments as a chain: a start, then per segment a length (or no end) and a gap to the next start,
    the gaps around the tolerance (start − previous end within ±1.2 ε·|start|); the jobs' lists interleaved."""
    out = []
    for job in ("a", "b"):
        t = draw(st.sampled_from([0.0, 5.0, 1e12]))
        for _ in range(draw(st.integers(0 if job == "b" else 1, 3))):
            length = draw(st.sampled_from([None, 3.0, 1e-3, 0.0, -1e-3]))
            end = None if length is None else t + length
            out.append((job, t, end))
            base = t if end is None else end
            t = base + draw(st.sampled_from([-1.2e-9, -0.8e-9, 0.0, 1.0, -1.0])) * max(1.0, abs(base))
    return draw(st.permutations(out))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["offline", "preemptive"]), segment_lists())
@example("offline", [("a", 0.0, None), ("a", 5.0, None), ("b", 0.0, None)])      # two segments, neither ends
def test_the_order_rules_on_arrays_find_a_fault_where_the_segment_by_segment_loop_does(problem, drawn):
    """``check_order`` checks a schedule's lists of segments on arrays and leaves naming the fault to the loop over
    segments; it must see a fault exactly where the loop does (else it would pass a schedule the rules refuse)."""
    d = tiny_dict()
    d["problem"] = problem
    inst = Instance.from_dict(d)
    s = sched([seg(j, max(0.0, start), ["n0:0"], None if end is None else max(0.0, end)) for j, start, end in drawn])
    cols = read_segments(inst, s)
    try:
        _name_the_order_fault(inst, cols.per_job())
        loop = None
    except InvalidSchedule as e:
        loop = str(e)
    try:
        check_order(inst, cols)
        arrays = None
    except InvalidSchedule as e:
        arrays = str(e)
    assert arrays == loop
