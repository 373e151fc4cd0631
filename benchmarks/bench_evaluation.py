"""The evaluation harness: its own cost per cell, policy decision latency, cold process vs warm call.

Run: ``make bench`` (saves and compares with the last saved run) or
``pytest benchmarks/bench_evaluation.py --benchmark-only -s``. What each figure is:

- ``test_harness_overhead_per_cell[SUITE]``: a whole ``jctlab evaluate`` run (inline executor, so no
  process start-up is counted) of a cheap method over the suite; ``extra_info`` has the median and mean
  per-cell overhead (everything but the method: loading, keys, replay and metrics of solver schedules,
  the synced JSON line, the table) in ms. Floor: median <= 20 ms on the static and offline suites.
- ``test_policy_decision_latency[POLICY]``: a simulation of a 160-job, 64-GPU preemptive instance through
  the harness's latency wrapper; ``extra_info`` has the p50 / p99 / max ms per ``decide`` call (warm).
- ``test_cold_process_solve`` vs ``test_warm_solve``: ``jctlab solve INSTANCE --method M`` as a new
  process (interpreter start, imports, numba kernels loaded from cache) against the same solve called in
  a warm process; the ratio is what one-off commands hide.
Simulator events per second: ``bench_core.py``; solve time per method and size: ``bench_oracle_*.py``,
``bench_matching.py``.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from evaluation.cells import TimedPolicy, latency_summary
from evaluation.methods import resolve_all
from evaluation.runner import RunConfig, evaluate
from evaluation.suites import load_suite
from jctlab import registry
from jctlab.generators import offline_instance
from jctlab.model import load_instance
from jctlab.simulate import simulate

OVERHEAD_FLOOR_MS = 20.0


@pytest.mark.parametrize("suite,method", [("static-hetero", "matching"), ("offline-small", "fifo-firstfit"),
                                          ("quick", "fifo-firstfit")])
def test_harness_overhead_per_cell(benchmark, suite, method):
    s = load_suite(suite)
    if not s.instances:
        pytest.skip(f"suite {suite} is not built")
    methods = resolve_all(method)
    walls = []

    def once():
        with tempfile.TemporaryDirectory() as d:
            t = time.perf_counter()
            table = evaluate(RunConfig(s, methods, Path(d), None, 10.0, 1, "inline", progress=False))
            walls.append(time.perf_counter() - t)
            return table

    table = benchmark.pedantic(once, rounds=3, iterations=1)
    per_cell = (table["cell_s"] - table["runtime_s"]).to_numpy() * 1000
    run_level = (min(walls) - table["runtime_s"].sum()) / len(table) * 1000
    benchmark.extra_info.update(cells=len(table), overhead_median_ms=float(statistics.median(per_cell)),
                                overhead_mean_ms_whole_run=float(run_level))
    print(f"\n{suite}/{method}: {len(table)} cells, per-cell overhead median {statistics.median(per_cell):.2f} ms, "
          f"whole run (plan, keys, synced rows, table) {run_level:.2f} ms per cell")
    assert statistics.median(per_cell) <= OVERHEAD_FLOOR_MS


@pytest.mark.parametrize("policy", ["fifo+packed-sticky", "srtf+pal", "gavel-max-min-fairness", "policy:matching"])
def test_policy_decision_latency(benchmark, policy):
    inst = offline_instance(gpus=64, nodes=16, jobs=160, seed=10_000, variability=0.1, locality_penalty=1.7,
                            problem="preemptive", interarrival_s=300.0)
    factory = resolve_all(policy)[0].load()
    pols = []

    def once():
        pol = TimedPolicy(factory(inst, seed=0))
        pols.append(pol)
        return simulate(inst, pol, method=policy)

    benchmark.pedantic(once, rounds=3, iterations=1)
    lat = latency_summary(pols[-1].latencies_ns)
    benchmark.extra_info.update(decisions=len(pols[-1].latencies_ns), **lat)
    print(f"\n{policy}: {len(pols[-1].latencies_ns)} decisions, p50 {lat['latency_p50_ms']:.3f} ms, "
          f"p99 {lat['latency_p99_ms']:.3f} ms (warm)")


def _static_instance() -> Path:
    s = load_suite("quick")
    si = next((i for i in s.instances if i.problem == "static" and i.file), None)
    if si is None:
        pytest.skip("the quick suite has no static instance file")
    return s.folder / si.file


@pytest.mark.parametrize("method", ["sampling", "cpsat"])
def test_cold_process_solve(benchmark, method):
    path = _static_instance()
    cmd = [sys.executable, "-m", "jctlab.cli", "solve", str(path), "--method", method, "--time-limit", "10", "--json"]
    r = benchmark.pedantic(lambda: subprocess.run(cmd, capture_output=True, check=True), rounds=3, iterations=1)
    assert b'"valid": true' in r.stdout


@pytest.mark.parametrize("method", ["sampling", "cpsat"])
def test_warm_solve(benchmark, method):
    inst = load_instance(_static_instance())
    fn = registry.method(method)
    fn(inst, time_limit=10.0, threads=1, seed=0)       # the first call loads kernels: not a warm call
    res = benchmark(fn, inst, time_limit=10.0, threads=1, seed=0)
    assert res.schedule is not None
