"""Decision latency of the live scheduler: 8 nodes x 8 V100, about 50 queued and 20 running jobs, 200 events.

Each event (a submission while fewer than 50 jobs wait, else the completion the plan predicts first) is
applied to the state, the planner decides (CP-SAT in its worker under ``TIME_LIMIT`` seconds, solving at
every event even when nothing can start, the heuristics beside it) and the jobs it starts begin. The
latency of a decision is the wall time of ``Planner.plan`` (warm: the worker process is up). Floor: no
decision over ``TIME_LIMIT`` + 0.5 s. The state's seed is 10,000 (held out).

``test_full_decode_8x8``: one list-scheduling decode of the whole queue (50 jobs, shortest first) on the benchmark's
first state, a warm call: what each of the local search's evaluations costs at most (it re-decodes from the first
changed position).

Run: ``pytest benchmarks/bench_live.py --benchmark-only -s`` (``JCTLAB_LIVE_BENCH_LIMIT`` sets the limit,
default 2 s; the run takes about 200 x the limit; ``JCTLAB_LIVE_BENCH_METHOD=none`` times the heuristics and
the local search alone; ``JCTLAB_LIVE_BENCH_ARRIVALS=1`` adds the arrival-aware holds, ``live.arrivals``).
"""

from __future__ import annotations

import os
import statistics
import time

import numpy as np

from live import events, synthetic
from live.decode import Decoder, shortest_first
from live.instance import LiveInstance
from live.planner import Planner, PlannerConfig
from live.state import LiveState, Plan

TIME_LIMIT = float(os.environ.get("JCTLAB_LIVE_BENCH_LIMIT", "2.0"))
METHOD = os.environ.get("JCTLAB_LIVE_BENCH_METHOD", "cpsat")
ARRIVALS = os.environ.get("JCTLAB_LIVE_BENCH_ARRIVALS", "0") == "1"
EVENTS = 200
QUEUED, RUNNING = 50, 20


def next_event(state: LiveState, plan: Plan | None, rng: np.random.Generator, k: int) -> events.Event:
    if len(state.queued) < QUEUED or plan is None or not plan.running:
        t = state.now + float(rng.exponential(30.0))
        q = synthetic.queued_job(rng, f"n{k}", t, 64, state.cluster.gpu_types)
        rec = {"name": q.name, "submit": t, "sizes": list(q.sizes), **events.work_record(q.work)}
        return events.Event(f"e{k}", "submit", t, {"job": rec})
    first = min(plan.running, key=lambda p: (p.end, p.job))
    return events.Event(f"e{k}", "complete", max(state.now, first.end), {"job": first.job})


def stream(planner: Planner) -> tuple[list[float], list[int], list[int], int]:
    rng = np.random.default_rng(10_000)
    state = synthetic.state(10_000, 8, 8, QUEUED, RUNNING)
    plan = None
    lat, queued, running = [], [], []
    won = 0
    for k in range(EVENTS):
        state, _ = events.apply(state, next_event(state, plan, rng, k))
        t0 = time.perf_counter()
        plan = planner.plan(state, plan)
        lat.append(time.perf_counter() - t0)
        won += plan.source == planner.config.method
        queued.append(len(state.queued))
        running.append(len(state.running))
        state, _ = events.start(state, plan.start_now)
    return lat, queued, running, won


def test_decision_latency_8x8(benchmark):
    config = PlannerConfig(time_limit=TIME_LIMIT, method=METHOD, solve_when_full=True, arrivals=ARRIVALS)
    with Planner(config) as planner:
        time.sleep(3.0)   # the worker's imports, done once at a daemon's start
        lat, queued, running, won = benchmark.pedantic(stream, args=(planner,), rounds=1, iterations=1)
        solves = planner.solves
        kills = planner.oracle.kills if planner.oracle is not None else 0
    q = np.quantile(lat, [0.5, 0.99])
    benchmark.extra_info.update(time_limit_s=TIME_LIMIT, method=METHOD, arrivals=ARRIVALS, holds=planner.holds,
                                events=EVENTS, p50_s=float(q[0]), p99_s=float(q[1]), max_s=max(lat),
                                oracle_solves=solves, oracle_killed=kills, oracle_won=won,
                                mean_queued=statistics.mean(queued), mean_running=statistics.mean(running))
    print(f"\nlive decision latency ({METHOD}{', arrivals' if ARRIVALS else ''}, {planner.holds} holds), "
          f"limit {TIME_LIMIT:g} s, {EVENTS} events: p50 {q[0]:.3f} s, p99 {q[1]:.3f} s, "
          f"max {max(lat):.3f} s; {solves} solves, {kills} killed at the deadline, {won} plans from the oracle; "
          f"queued {statistics.mean(queued):.1f}, running {statistics.mean(running):.1f} on average")
    assert max(lat) <= TIME_LIMIT + 0.5


def test_full_decode_8x8(benchmark):
    li = LiveInstance(synthetic.state(10_000, 8, 8, QUEUED, RUNNING), "mean_jct")
    dec = Decoder(li)
    order = shortest_first(li)
    plan = benchmark(dec.decode, order)
    assert sorted(plan.order) == sorted(li.queued) and plan.objective > 0
