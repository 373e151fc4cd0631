"""Core throughput: replay and online simulation events per second, replay of many segments (closed form against
the engine), and the full Philly trace.

Run: ``make bench`` (or ``pytest benchmarks/bench_core.py --benchmark-only``).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from jctlab.closed_form import closed_form
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.policies import FifoFirstFit
from jctlab.registry import policy_factory
from jctlab.replay import checked_segments, engine_run, replay
from jctlab.simulate import simulate


def _events(sched) -> int:
    return sum(2 if s.end is not None else 1 for s in sched.segments) + len({s.job for s in sched.segments})


@pytest.mark.parametrize("interference", [0.0, 0.2])
def test_replay_events_per_second(benchmark, interference):
    inst = offline_instance(gpus=256, nodes=32, jobs=5000, interarrival_s=60, seed=1, interference=interference)
    sched, _ = simulate(inst, FifoFirstFit(inst))
    r = benchmark(replay, inst, sched, "<bench>", False)
    assert r.valid
    benchmark.extra_info["events"] = _events(sched)
    benchmark.extra_info["events_per_s"] = _events(sched) / benchmark.stats.stats.mean


@pytest.fixture(scope="module")
def nonsticky_schedule():
    """Random placement re-drawn every 360-s round on a preemptive queue: many segments, restarts."""
    inst = offline_instance(gpus=128, nodes=16, jobs=2000, interarrival_s=60, seed=1, problem="preemptive")
    sched, r = simulate(inst, policy_factory("fifo+random-nonsticky")(inst, seed=0))
    assert r.valid
    return inst, sched


@pytest.mark.parametrize("path", ["closed-form", "engine"])
def test_replay_of_many_segments(benchmark, nonsticky_schedule, path):
    """The same checked segments replayed in closed form (it applies: no interference) and by the engine
    (``engine_run``), warm calls: the closed form's speed-up where a schedule has many segments."""
    inst, sched = nonsticky_schedule
    cols = checked_segments(inst, sched)
    done = (benchmark(closed_form, inst, cols, frozenset()) if path == "closed-form"
            else benchmark(engine_run, inst, cols.per_job(), frozenset()))
    assert done is not None
    benchmark.extra_info["segments"] = len(sched.segments)
    benchmark.extra_info["us_per_segment"] = benchmark.stats.stats.mean / len(sched.segments) * 1e6


def test_online_simulation_events_per_second(benchmark):
    inst = offline_instance(gpus=256, nodes=32, jobs=5000, interarrival_s=60, seed=1)
    sched, r = benchmark.pedantic(simulate, args=(inst, FifoFirstFit(inst)), rounds=3, iterations=1)
    assert r.valid
    benchmark.extra_info["events_per_s"] = _events(sched) / benchmark.stats.stats.mean


PHILLY = """
import json, resource, sys, time
from jctlab.loaders.philly import load_philly
from jctlab.policies import FifoFirstFit
from jctlab.simulate import simulate
inst = load_philly(nodes=512, gpus_per_node=8, problem="offline")
t0 = time.perf_counter()
sched, rep = simulate(inst, FifoFirstFit(inst))
dt = time.perf_counter() - t0
print(json.dumps({"jobs": len(inst.jobs), "gpus": len(inst.cluster.gpus), "valid": rep.valid, "sim_s": dt,
                  "mean_jct": rep.objective, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


@pytest.mark.skipif(default_data_dir() is None, reason="needs the raw Philly trace (../shared/data or $JCTLAB_DATA)")
def test_full_philly_trace_fifo_first_fit(benchmark):
    """82,247 jobs on 4,096 GPUs: load, simulate, replay — floor: under 30 s, under 2 GB."""

    def once():
        p = subprocess.run([sys.executable, "-c", PHILLY], capture_output=True, text=True, check=True)
        return json.loads(p.stdout)

    out = benchmark.pedantic(once, rounds=1, iterations=1)
    benchmark.extra_info.update(out)
    assert out["valid"] and out["jobs"] == 82247 and out["gpus"] == 4096
    assert benchmark.stats.stats.max < 30.0
    assert out["max_rss_mb"] < 2048


def test_cli_start_up_replay_whole_process(benchmark, tmp_path):
    """``jctlab replay`` of a 6-job instance as a whole process (interpreter start-up, imports, replay,
    metrics): what every Gavel-simulator comparison and shell loop pays per call. Floor: under 1 s of CPU
    (it was 1.6 s when the core verbs loaded every plug-in: torch, pandas)."""
    inst = offline_instance(gpus=8, nodes=2, jobs=6, seed=3)
    sched, _ = simulate(inst, FifoFirstFit(inst))
    (tmp_path / "i.json").write_text(json.dumps(inst.to_dict()))
    (tmp_path / "s.json").write_text(json.dumps(sched.to_dict()))
    argv = [sys.executable, "-m", "jctlab.cli", "replay", str(tmp_path / "i.json"), str(tmp_path / "s.json")]
    cpu: list[float] = []

    def once():
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)

    benchmark.pedantic(once, rounds=10, iterations=1)
    cpu.sort()
    benchmark.extra_info["cpu_median_s"] = cpu[len(cpu) // 2]
    assert cpu[len(cpu) // 2] < 1.0
