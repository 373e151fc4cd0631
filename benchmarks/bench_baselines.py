"""Speed of the baselines (pytest-benchmark): one 160-job PAL Sia-Philly workload under PAL in < 2 s."""

from __future__ import annotations

import pytest

from baselines.families import resolve
from jctlab.generators import offline_instance
from jctlab.loaders import default_data_dir
from jctlab.simulate import simulate

DATA = default_data_dir()


def _run(inst, name):
    pol = resolve(name)(inst, seed=0)
    sched, rep = simulate(inst, pol, round_s=pol.round_s, method=name)
    assert rep.valid
    return rep


@pytest.mark.skipif(DATA is None, reason="raw public data not found (PAL workloads)")
def test_bench_pal_160_jobs(benchmark):
    from jctlab.loaders.pal import load_pal

    inst = load_pal(1, data_dir=DATA, variability="identity", seed=0)
    assert len(inst.jobs) == 160
    benchmark.pedantic(_run, args=(inst, "fifo+pal"), rounds=3, iterations=1)
    assert benchmark.stats.stats.max < 2.0


@pytest.mark.parametrize("name", ["las+packed-sticky", "gittins+pal", "srtf+random-nonsticky"])
def test_bench_synthetic_preemptive(benchmark, name):
    inst = offline_instance(gpus=64, nodes=16, jobs=300, interarrival_s=120.0, seed=0, variability=0.05,
                            problem="preemptive", locality_penalty=1.7)
    benchmark.pedantic(_run, args=(inst, name), rounds=1, iterations=1)
    assert benchmark.stats.stats.max < 10.0
