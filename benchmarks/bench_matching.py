"""Speed of the matching and sampling methods (pytest-benchmark).

Floor: 1,024 GPUs (K80/P100/V100 on 8-GPU servers), 128 Gavel jobs with sizes 1..16, placed in < 2 s.
Every round starts with empty duration/menu caches (:func:`matching.categories.clear_caches`), so the
figures include all jctlab.speed calls (cold); ``*_warm`` repeat with the caches kept.
``test_sampling_64_gpus_cold`` against ``test_cpsat_oracle_64_gpus`` is the runtime ratio of issue 4 on one
64-GPU instance (the suite-wide ratio: ``scripts/reproduce_sampling.py``).
Run: pytest benchmarks/bench_matching.py --benchmark-only
"""

from __future__ import annotations

import pytest

from matching.categories import clear_caches
from matching.methods import exhaustive, matching
from matching.suite import gavel_static
from samplers.methods import sampling

BIG = dict(gpus=1024, jobs=128, seed=0, gpus_per_server=8, sizes=(1, 2, 4, 8, 16))


@pytest.fixture(scope="module")
def big():
    return gavel_static(**BIG)


@pytest.fixture(scope="module")
def mid():
    return gavel_static(gpus=64, jobs=16, seed=1)


def test_matching_1024_gpus_128_jobs(benchmark, big):
    res = benchmark.pedantic(matching, args=(big,), setup=clear_caches, rounds=3, iterations=1)
    assert res.schedule is not None and res.runtime_s < 2.0
    assert res.objective <= res.lower_bound * 1.01   # within 1% of the Lagrangian bound


def test_sampling_1024_gpus_128_jobs(benchmark, big):
    res = benchmark.pedantic(sampling, args=(big,), kwargs={"samples": 8}, setup=clear_caches, rounds=3,
                             iterations=1)
    assert res.schedule is not None and res.runtime_s < 2.0


def test_sampling_1024_gpus_128_jobs_warm(benchmark, big):
    sampling(big, samples=8)
    res = benchmark.pedantic(sampling, args=(big,), kwargs={"samples": 8}, rounds=3, iterations=1)
    assert res.schedule is not None and res.runtime_s < 2.0


@pytest.mark.parametrize("samples", [4, 16, 64])
def test_sampling_64_gpus(benchmark, mid, samples):
    benchmark(sampling, mid, samples=samples)


def test_exhaustive_64_gpus(benchmark, mid):
    res = benchmark(exhaustive, mid)
    assert res.status == "optimal"


def test_sampling_64_gpus_cold(benchmark, mid):
    """Cold (empty caches) N=16, to set against the oracle below: the issue's ratio, one instance."""
    res = benchmark.pedantic(sampling, args=(mid,), kwargs={"samples": 16}, setup=clear_caches, rounds=50,
                             iterations=1)
    assert res.schedule is not None


def test_cpsat_oracle_64_gpus(benchmark, mid):
    """The static CP-SAT oracle (1 thread, no cache) on the same instance: it proves the optimum."""
    from oracle.methods import cpsat

    res = benchmark.pedantic(cpsat, args=(mid,), kwargs={"time_limit": 60, "threads": 1}, rounds=3,
                             iterations=1)
    assert res.status == "optimal"
