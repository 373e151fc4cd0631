"""The pooled problem's order (formulations.offline.pooled): a start order for the free-GPU rule, its schedule
replayed; ``auto`` takes it as the members' hint on long queues where it is better."""

from __future__ import annotations

import math

import pytest

from formulations.offline import free_gpus, pooled
from formulations.schedules import start_order
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.replay import replay
from oracle import portfolio
from oracle.dispatch import dispatch

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

#: jobs of 1-8 GPUs queueing on three nodes of 4 V100s
QUEUE = offline_instance(gpus=12, nodes=3, jobs=14, types=("v100",), interarrival_s=120, duration_h=(0.05, 2),
                         max_size=8, elastic=0.0, seed=5)


def test_the_pooled_order_is_list_scheduled_by_the_free_gpu_rule():
    """The result is the rule's schedule of its own start order (so exact and replayed), and no worse than the
    rule's schedule of the arrival order here."""
    inst = QUEUE
    inc = pooled.incumbent(inst, None, 2.0, 1, 0, "test")
    assert inc.found
    rep = replay(inst, inc.schedule)
    assert rep.valid and rep.objective == pytest.approx(inc.objective, rel=1e-12)
    order = start_order(inst, inc.schedule)
    by_job = {sg.job: (sg.start, sg.alloc) for sg in inc.schedule.segments}
    assert {sg.job: (sg.start, sg.alloc) for sg in free_gpus.list_schedule(inst, order, "test").segments} == by_job
    arrival = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    assert inc.objective <= free_gpus.incumbent(inst, arrival, "test").objective + 1e-9


def test_no_pooled_schedule_where_the_rule_does_not_apply():
    inst = offline_instance(gpus=8, nodes=2, jobs=6, ps=True, seed=1)
    assert not pooled.incumbent(inst, None, 1.0, 1, 0, "test").found


def test_auto_hands_the_pooled_schedule_to_its_racing_members_where_it_is_better():
    """With the job threshold lowered to this queue, ``auto`` with 2 threads races its members after the pooled
    step: it records the pooled schedule's objective, and returns no worse a schedule (the hint is a candidate).
    On this one-type cluster the free-GPU climb races in CP-SAT's place; on two types CP-SAT stays."""
    inst = QUEUE
    params = portfolio.PortfolioParams(exact_first=False, race_max_s_per_job=math.inf, pooled_min_jobs=1)
    r = portfolio.portfolio(inst, time_limit=8, threads=2, member=dispatch, params=params)
    assert r.params["parallel"] is True and r.params["queue"] is True
    assert r.params["members"] == ["milp", portfolio.CLIMB]          # the climb races in CP-SAT's place
    assert set(r.params["member_status"]) == {"milp-highs", portfolio.CLIMB}
    assert r.params["pooled"] is not None and math.isfinite(r.params["pooled"])
    assert r.objective <= r.params["pooled"] + 1e-6
    assert replay(inst, r.schedule).objective == pytest.approx(r.objective, rel=1e-9)
    two_types = offline_instance(gpus=12, nodes=3, jobs=14, types=("v100", "k80"), interarrival_s=120,
                                 duration_h=(0.05, 2), max_size=8, elastic=0.0, seed=5)
    mixed = portfolio.portfolio(two_types, time_limit=6, threads=2, member=dispatch, params=params).params
    assert mixed["queue"] is True and "pooled" in mixed and mixed["members"] == ["milp", "cpsat"]
    off = portfolio.PortfolioParams(exact_first=False, race_max_s_per_job=math.inf)     # 14 jobs: below the default
    below = portfolio.portfolio(inst, time_limit=6, threads=2, member=dispatch, params=off).params
    assert "pooled" not in below and below["members"] == ["milp", "cpsat"]


def test_the_climb_member_returns_a_replayed_schedule_no_worse_than_its_hint_and_no_bound():
    """The racing member that replaces CP-SAT after the pooled step: the free-GPU climb from the hint's start order,
    its schedule replayed, never worse than the rule's list schedule of that order, with no bound of its own; the
    same schedule from the same seed (without a limit it makes a fixed number of moves); nothing without a hint."""
    inst = QUEUE
    arrival = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    hint = free_gpus.list_schedule(inst, arrival, "hint")
    r = portfolio._climb(inst, None, 0, hint)
    assert r.solver == portfolio.CLIMB and r.lower_bound is None and r.status.value == "feasible"
    assert replay(inst, r.schedule).objective == pytest.approx(r.objective, rel=1e-12)
    assert r.objective <= free_gpus.incumbent(inst, arrival, "test").objective + 1e-9
    assert r.schedule.segments == portfolio._climb(inst, None, 0, hint).schedule.segments
    assert portfolio._climb(inst, 5.0, 0, None).schedule is None


def test_the_pooled_model_minimises_the_instances_objective():
    """Two jobs released together on one GPU, the longer one of weight 100: under ``weighted_jct`` the pooled order
    runs it first (Smith's rule); under ``mean_jct`` the shorter one goes first (SPT)."""
    d = offline_instance(gpus=1, nodes=1, jobs=2, types=("v100",), max_size=1, elastic=0.0, seed=0,
                         objective="weighted_jct").to_dict()
    for k, job in enumerate(d["jobs"]):
        job["arrival"], job["sizes"] = 0.0, [1]
        job["iterations"] = (10 if k == 0 else 1) * d["jobs"][1]["iterations"]
        job["weight"] = 100.0 if k == 0 else 1.0
    weighted = Instance.from_dict(d)
    plain = Instance.from_dict({**d, "objective": "mean_jct"})
    assert start_order(weighted, pooled.incumbent(weighted, None, 5.0, 1, 0, "test").schedule) == [0, 1]
    assert start_order(plain, pooled.incumbent(plain, None, 5.0, 1, 0, "test").schedule) == [1, 0]
