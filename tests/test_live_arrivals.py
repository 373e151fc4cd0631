"""Arrival-aware decisions (live.arrivals): the model, the rollout, and the rule that holds a long job back
for predicted short arrivals — only decisions about real jobs, every plan replayed, same seed same decisions."""

from __future__ import annotations

import argparse
import io
import json
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.cli import main
from jctlab.replay import replay
from jctlab.simulate import simulate
from live.arrivals import ArrivalConfig, ArrivalModel, Sample, rollout
from live.daemon import open_daemon, register
from live.instance import LiveInstance
from live.options import add_planner_arguments, planner_config
from live.planner import Planner, PlannerConfig
from live.policy import factory as live_policy
from live.state import ClusterSpec, GpuSpec, LiveState, NodeSpec, QueuedJob, RunningJob, Work

from tests.test_live_planner import check_plan, spt_list_value

PAIR = ClusterSpec("pair", (NodeSpec("a", (GpuSpec(0, "v100"), GpuSpec(1, "v100"))),))


def short_stream_instance():
    """Two GPUs. ``anchor`` (9,000 s) holds one from time 0; a 100-s job arrives every 200 s until 7,850;
    ``long`` (5,000 s) arrives at 3,000.5, when the other GPU is free. Sample then, it makes the 24 short
    jobs that arrive during its run wait for it (about 2,500 s each on average); held, they run at once and
    it waits for ``anchor``'s GPU at most (6,000 s): holding wins by an order of magnitude."""
    arr = {"anchor": (0.0, 9000.0), "long": (3000.5, 5000.0)}
    arr.update({f"s{k:02d}": (50.0 + 200.0 * k, 100.0) for k in range(40)})
    queued = tuple(QueuedJob(n, 0.0, (1,), Work({"v100": w}, steps=1)) for n, (_, w) in arr.items())
    base = LiveInstance(LiveState(PAIR, 0.0, queued)).instance
    return base.replace_jobs([replace(j, arrival=arr[j.name][0]) for j in base.jobs])


def run(inst, arrivals: bool, seed: int = 0):
    pol = live_policy(inst, seed=seed, method="none", time_limit=10, max_evaluations=2000, arrivals=arrivals)
    try:
        sched, rep = simulate(inst, pol, method="live")
    finally:
        pol.close()
    assert rep.valid and replay(inst, sched).valid
    return sched, rep, pol


def test_holding_a_gpu_for_predicted_short_arrivals_helps():
    inst = short_stream_instance()
    off, rep_off, _ = run(inst, False)
    on, rep_on, pol = run(inst, True)
    start_off = {s.job: s.start for s in off.segments}
    start_on = {s.job: s.start for s in on.segments}
    assert start_off["long"] == pytest.approx(3000.5)   # without prediction: SRTF's decision, at once
    assert start_on["long"] > 3000.5 + 200.0             # held for the stream of short jobs
    assert pol.planner.holds > 0 and any(p.source.endswith("+hold") for p in pol.plans)
    # every short job that arrives while `long` is held starts at its arrival
    held_until = start_on["long"]
    for j in inst.jobs:
        if j.name.startswith("s") and 3000.5 < j.arrival < held_until - 100.0:
            assert start_on[j.name] == pytest.approx(j.arrival)
    assert rep_on.objective < 0.5 * rep_off.objective


def test_same_seed_same_decisions():
    inst = short_stream_instance()
    a, _, pa = run(inst, True, seed=3)
    b, _, pb = run(inst, True, seed=3)
    assert a.segments == b.segments
    assert [(p.start_now, p.later) for p in pa.plans] == [(p.start_now, p.later) for p in pb.plans]


def primed_model(run_s: float = 100.0, n: int = 30, gap: float = 200.0, until: float = 6000.0,
                 config: ArrivalConfig = ArrivalConfig()) -> ArrivalModel:
    m = ArrivalModel(config)
    m.observe({f"h{k}": until - gap * (n - k) for k in range(n)})
    for k in range(n):
        m.observe_work(Sample(until - gap * (n - k), f"h{k}", 1, run_s))
    return m


def long_job_state(running: bool) -> LiveState:
    """At 6,000: ``long`` (5,000 s) queued, one GPU free; the other held for 4,000 s more (or free)."""
    run_ = (RunningJob("anchor", 0.0, 0.0, ("a:0",), 4000.0, 6000.0),) if running else ()
    return LiveState(PAIR, 6000.0, (QueuedJob("long", 5990.0, (1,), Work({"v100": 5000.0}, steps=1)),), run_)


@pytest.mark.parametrize("running", [True, False])
def test_predicted_jobs_never_in_plans_and_no_hold_on_an_idle_cluster(running):
    state = long_job_state(running)
    with Planner(PlannerConfig(method="none", floor_s=0.0, arrivals=True)) as planner:
        planner.model = primed_model()
        plan = planner.plan(state)
    check_plan(state, plan)   # replays; places exactly the queued jobs, no predicted one
    assert [p.job for p in plan.start_now + plan.later] == ["long"]
    if running:   # short jobs every 200 s, a GPU busy for 4,000 s more: keep the free one for them
        assert plan.start_now == () and plan.source.endswith("+hold")
        assert plan.later[0].start > state.now
    else:         # nothing else runs: no event would wake the loop, so the job starts
        assert [p.job for p in plan.start_now] == ["long"]


def test_no_hold_when_arrivals_are_long():
    """Arrivals that run longer than the job: holding it for them only delays it."""
    state = long_job_state(True)
    with Planner(PlannerConfig(method="none", floor_s=0.0, arrivals=True)) as planner:
        planner.model = primed_model(run_s=20000.0)
        plan = planner.plan(state)
    assert [p.job for p in plan.start_now] == ["long"]


def test_model_rate_and_futures():
    hour = ArrivalConfig(tau_s=3600.0, samples=200)
    m = primed_model(gap=60.0, n=600, until=36000.0, config=hour)   # 10 hours of one arrival a minute
    assert m.rate(36000.0) == pytest.approx(1 / 60.0, rel=0.02)
    assert m.rate(36000.0 + 4 * 3600.0) < m.rate(36000.0) / 40   # a burst is forgotten within a few tau
    f1, f2 = m.futures(36000.0, 3600.0, seed=1), m.futures(36000.0, 3600.0, seed=1)
    assert f1 == f2 and len(f1) == m.config.scenarios
    assert all(0 < r <= 3600.0 and p == 100.0 and n == 1 for fut in f1 for r, p, n in fut)
    assert 40 < sum(len(fut) for fut in f1) / len(f1) < 64   # Poisson(60), capped at 64
    assert not ArrivalModel().ready() and m.ready()


def test_rollout_dispatches_at_events_after_now():
    # GPU 0 free now, GPU 1 at 100: a job waiting now starts at the first event, not at 0 (that decision is
    # the one evaluated)
    assert rollout([0.0, 100.0], [(0.0, 50.0, 1)]) == pytest.approx(150.0)
    # an arrival at 30 is such an event: it is shorter, so it runs first (30-40), the 50-s job from 40 to 90
    assert rollout([0.0, 100.0], [(0.0, 50.0, 1), (30.0, 10.0, 1)]) == pytest.approx(10.0 + 90.0)
    # a two-GPU job waits for both
    assert rollout([0.0, 100.0], [(0.0, 50.0, 2)]) == pytest.approx(150.0)


@settings(max_examples=40, deadline=None)
@given(gpus=st.integers(1, 4), secs=st.lists(st.integers(1, 50).map(float), min_size=1, max_size=8))
def test_rollout_on_an_idle_pool_is_spt(gpus, secs):
    """All GPUs free and no arrival: non-delay shortest-first dispatch is SPT list scheduling."""
    assert rollout([0.0] * gpus, [(0.0, s, 1) for s in secs]) == pytest.approx(spt_list_value([0.0] * gpus, secs))


def test_command_line_flag():
    p = argparse.ArgumentParser()
    add_planner_arguments(p)
    assert planner_config(p.parse_args(["--arrivals"])).arrivals
    assert not planner_config(p.parse_args([])).arrivals


def test_model_from_store_records_equals_the_model_that_saw_the_states():
    """A restarted daemon rebuilds its model from the store's records (live and finished jobs)."""
    state = long_job_state(True)
    seen = ArrivalModel()
    seen.observe_state(state)
    records = [q.to_dict() for q in state.queued] + [r.to_dict() for r in state.running]
    rebuilt = ArrivalModel()
    rebuilt.observe_records(records)
    assert rebuilt == seen and set(seen.seen) == {"anchor"} and set(seen.submits) == {"anchor", "long"}


def test_the_daemon_holds_with_arrivals_and_rebuilds_its_model(tmp_path, monkeypatch):
    """The constructed stream as daemon events (each job completes at its predicted end): with --arrivals the
    long job is not started at its arrival; after a restart the model holds every job the store has seen."""
    inst = short_stream_instance()
    (tmp_path / "c.yaml").write_text("name: pair\nnodes:\n  - name: a\n    cpus: 8\n    mem_gb: 64\n"
                                     "    gpus:\n      - {type: v100, count: 2}\n")
    work = {j.name: j.iterations / j.samples_per_s["v100"] for j in inst.jobs}
    subs = sorted((j.arrival, j.name) for j in inst.jobs if j.arrival < 3200.0)
    evs = [{"id": f"s-{n}", "type": "submit", "time": t,
            "job": {"name": n, "submit": t, "sizes": 1, "work": {"v100": work[n]}}} for t, n in subs]
    # short jobs complete 100 s after their arrival (they start at once on the free GPU)
    done = [{"id": f"c-{n}", "type": "complete", "time": t + 100.0, "job": n} for t, n in subs if n.startswith("s")]
    lines = sorted(evs + done, key=lambda e: (e["time"], e["type"] == "submit"))
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(e) for e in lines) + "\n"))
    state, log = tmp_path / "s.db", tmp_path / "d.jsonl"
    args = ["schedule-daemon", "--cluster", str(tmp_path / "c.yaml"), "--method", "none", "--time-limit", "60",
            "--max-evaluations", "400", "--state", str(state), "--log", str(log), "--arrivals"]
    assert main(args) == 0
    recs = [json.loads(x) for x in log.read_text().splitlines()]
    started = [s["job"] for r in recs for s in r["start"]]
    assert "long" not in started and sorted(started) == sorted(n for _, n in subs if n != "long")
    assert next(r for r in recs if r["event"] == "s-long")["plan"]["source"].endswith("+hold")
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="verb")
    register(sub)
    d = open_daemon(p.parse_args(args[:1] + args[3:]), PlannerConfig(method="none", arrivals=True))
    try:
        assert set(d.planner.model.submits) == {n for _, n in subs}
    finally:
        d.planner.close()
        d.store.close()
