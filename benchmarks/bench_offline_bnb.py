"""Small queues: the exact branch and bound against CP-SAT (pytest-benchmark, one run each).

    pytest benchmarks/bench_offline_bnb.py --benchmark-only -s

4 GPUs on 2 nodes, 10 jobs arriving every 5 minutes (jobs wait for GPUs), seeds 0-3: ``bnb`` to its
proof (limit 60 s), then ``cpsat`` with 30 s and 2 threads on the same instance. Each case prints both
results; the assertions are on validity and on the bounds (CP-SAT's bound below the proven optimum). Then the
small queues' 12-job family, which the search proves with its node prices.
"""

from __future__ import annotations

import pytest

from evaluation.generators import small_queue_instance
from formulations.offline import bnb as offline_bnb
from formulations.offline import cpsat as offline_cpsat
from jctlab.generators import offline_instance
from jctlab.replay import replay


def _queue(seed: int):
    return offline_instance(gpus=4, nodes=2, jobs=10, interarrival_s=300, duration_h=(0.1, 2), max_size=4,
                            variability=0.05, locality_penalty=1.2, seed=seed)


@pytest.mark.parametrize("seed", range(4))
def test_bnb_small_queue(benchmark, seed):
    inst = _queue(seed)
    r = benchmark.pedantic(lambda: offline_bnb.solve(inst, time_limit=60), rounds=1, iterations=1)
    assert replay(inst, r.claimed_schedule()).valid
    c = offline_cpsat.solve(inst, time_limit=30, threads=2, seed=0)
    assert replay(inst, c.claimed_schedule()).valid
    if r.status == "optimal":
        assert c.lower_bound <= r.objective * (1 + 1e-9) <= c.objective * (1 + 1e-9)
    gap_c = (c.objective - c.lower_bound) / c.lower_bound
    benchmark.extra_info.update(status=r.status, objective=r.objective, nodes=r.params["nodes"],
                                runtime_s=r.runtime_s, cpsat_status=c.status, cpsat_gap=gap_c)
    print(f"\n4x10 queue seed={seed}: bnb {r.status} obj={r.objective:.2f} t={r.runtime_s:.2f}s "
          f"nodes={r.params['nodes']} | cpsat 30 s: {c.status} obj={c.objective:.2f} lb={c.lower_bound:.2f} "
          f"gap={gap_c:.2%}")


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_bnb_with_node_prices_on_12_job_queues(benchmark, seed):
    """The small queues' 12-job family (6 GPUs of three types, 153-288 options; training seeds): ``bnb`` alone,
    no hint, 60 s. Without its node prices it proved one of this family's three development seeds in 60 s
    (docs/history/oracle-offline-queues.md)."""
    inst = small_queue_instance(seed)
    r = benchmark.pedantic(lambda: offline_bnb.solve(inst, time_limit=60), rounds=1, iterations=1)
    assert replay(inst, r.claimed_schedule()).valid
    benchmark.extra_info.update(status=r.status, objective=r.objective, nodes=r.params["nodes"], runtime_s=r.runtime_s)
    print(f"\n12-job queue seed={seed}: bnb {r.status} obj={r.objective:.2f} t={r.runtime_s:.2f}s nodes={r.params['nodes']}")
    assert r.status == "optimal"
