"""The live planner: running jobs never move, every plan replays as valid, the bound bounds every live plan,
and the decision comes within the time limit."""

from __future__ import annotations

import itertools
import time
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jctlab.model import Allocation
from jctlab.replay import replay
from jctlab.simulate import simulate
from live import synthetic
from live.decode import Decoder, timed
from live.instance import LiveInstance
from live.planner import Planner, PlannerConfig
from live.policy import factory as live_policy
from live.state import ClusterSpec, GpuSpec, LiveState, NodeSpec, QueuedJob, RunningJob, Work


def check_plan(state: LiveState, plan, objective: str = "mean_jct") -> None:
    """The rules every emitted plan obeys."""
    li = LiveInstance(state, objective)
    if not li.instance.jobs:     # nothing to plan (an instance needs a job: nothing to replay)
        assert not (plan.running or plan.start_now or plan.later)
        return
    rep = replay(li.instance, li.schedule_of(plan))
    assert rep.valid, rep.error
    assert rep.objective == pytest.approx(plan.objective, rel=1e-9)
    held = {r.name: r.gpus for r in state.running}
    assert {p.job: p.gpus for p in plan.running} == held                     # never moved
    assert all(p.start == state.now for p in plan.running + plan.start_now)  # nor delayed
    busy = state.busy_gpus
    assert not any(set(p.gpus) & busy for p in plan.start_now)
    placed = [p.job for p in plan.start_now + plan.later]
    assert sorted(placed) == sorted(q.name for q in state.queued)
    assert all(p.start >= state.now for p in plan.later)


def test_a_running_job_at_its_end_still_holds_its_gpus():
    """0 s left (the simulator has not popped its completion yet): its GPUs are not free now."""
    cl = ClusterSpec("one", (NodeSpec("a", (GpuSpec(0, "v100"),)),))
    state = LiveState(cl, 50.0, (QueuedJob("q", 0.0, (1,), Work({"v100": 100.0})),),
                      (RunningJob("r", 0.0, 0.0, ("a:0",), 0.0, 50.0),))
    with Planner(PlannerConfig(method="none", floor_s=0.0)) as planner:
        plan = planner.plan(state)
    assert not plan.start_now and [p.job for p in plan.later] == ["q"] and plan.later[0].start == pytest.approx(50.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 9999), nodes=st.integers(1, 4), per=st.sampled_from([2, 4, 8]),
       queued=st.integers(0, 12), running=st.integers(0, 8), mixed=st.booleans())
def test_heuristic_plans_never_move_running_jobs_and_replay(seed, nodes, per, queued, running, mixed):
    types = ("v100", "p100") if mixed else ("v100",)
    state = synthetic.state(seed, nodes, per, queued, running, types)
    with Planner(PlannerConfig(time_limit=5, method="none")) as planner:
        plan = planner.plan(state)
        check_plan(state, plan)
        again = planner.plan(state, plan)            # the warm start: never worse than the plan it carries
        check_plan(state, again)
        assert again.objective <= plan.objective + 1e-9


def _tiny(weights: tuple[float, ...]) -> LiveState:
    cl = ClusterSpec("tiny", (NodeSpec("a", (GpuSpec(0, "v100"), GpuSpec(1, "v100"))),
                              NodeSpec("b", (GpuSpec(0, "v100"), GpuSpec(1, "p100")))), inter_node_gbps=10.0)
    q = (QueuedJob("q0", 0.0, (2,), Work({"v100": 4000.0}, comm_mb=200.0, steps=100), weights[0]),
         QueuedJob("q1", 5.0, (1,), Work({"v100": 300.0, "p100": 500.0}), weights[1]),
         QueuedJob("q2", 5.0, (1,), Work({"v100": 1500.0}), weights[2]),
         QueuedJob("q3", 8.0, (1,), Work(model="ResNet-18 (batch size 64)", iterations=3000), weights[3]))
    r = (RunningJob("r0", 0.0, 1.0, ("a:0",), 900.0, 10.0), RunningJob("r1", 0.0, 2.0, ("b:1",), 200.0, 10.0))
    return LiveState(cl, 10.0, q, r)


def brute_force(state: LiveState, objective: str) -> float:
    """The live optimum: every order of the queue x every allocation of each job, list-scheduled (any
    schedule left-shifts into one of these, so their least objective is the optimum)."""
    li = LiveInstance(state, objective)
    options = []
    for j in li.queued:
        job = li.instance.jobs[j]
        options.append([Allocation(g) for n in job.sizes for g in itertools.combinations(li.usable[j], n)])
    dec = Decoder(li)
    best = float("inf")
    for perm in itertools.permutations(range(len(options))):
        for allocs in itertools.product(*(options[k] for k in perm)):
            order = [(li.n_running + k, a) for k, a in zip(perm, allocs)]
            best = min(best, timed(li, dec.decode_pairs(order), "brute").objective)
    return best


@pytest.mark.parametrize("objective,weights", [("mean_jct", (1, 1, 1, 1)), ("weighted_jct", (1, 3, 0.5, 2))])
def test_oracle_plan_and_bound_against_brute_force(objective, weights):
    state = _tiny(weights)
    opt = brute_force(state, objective)
    config = PlannerConfig(time_limit=8, method="cpsat", objective=objective, isolate=False, fallbacks=())
    with Planner(config) as planner:
        plan = planner.plan(state)
    check_plan(state, plan, objective)
    assert plan.lower_bound is not None
    assert opt * (1 - 1e-4) <= plan.lower_bound <= opt * (1 + 1e-6)   # valid, and tight once proven
    assert plan.objective >= opt * (1 - 1e-9)
    assert plan.status == "optimal" and plan.objective == pytest.approx(opt, rel=1e-6)


def test_decision_within_the_time_limit_when_the_oracle_is_late():
    state = synthetic.state(3, queued=50, running=20)
    with Planner(PlannerConfig(time_limit=1.0, method="cpsat", overrun_s=0.0, oracle_share=1.0)) as planner:
        time.sleep(1.5)    # the worker's imports, as a daemon has them done between events
        for _ in range(2):
            t0 = time.perf_counter()
            plan = planner.plan(state)
            assert time.perf_counter() - t0 <= 1.0 + 0.5
            check_plan(state, plan)
        assert planner.solves == 2


def test_live_policy_in_the_simulator():
    state = synthetic.state(7, nodes=2, gpus_per_node=4, queued=12, running=0)
    base = LiveInstance(state).instance
    inst = base.replace_jobs([replace(j, arrival=300.0 * k) for k, j in enumerate(base.jobs)])
    pol = live_policy(inst, time_limit=2.0, method="none")
    sched, rep = simulate(inst, pol, method="live")
    assert rep.valid and replay(inst, sched).valid
    assert all(p.running or p.start_now or p.later for p in pol.plans)
