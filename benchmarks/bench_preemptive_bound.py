"""Preemptive LP bound on long loaded queues: time and value (pytest-benchmark).

    pytest benchmarks/bench_preemptive_bound.py --benchmark-only -s

160 jobs of 1-8 GPUs arriving every ~2 min on 32 GPUs (8 nodes): more work than GPUs, as in PAL's
Sia-Philly workloads. One GPU type: ``plain`` is the 160-bucket LP without the busy-time tangents, ``tangents``
the one with them (``lower_bound`` without a limit). Three types: ``lower_bound`` with a 5-s limit (coarse bucket
grids first: its 160-bucket LP takes over a minute there; per-job modes charge the slower types' run time and
GPU-seconds). Each case prints the bound and its
ratio to Σ(a_j + p_j)/n; compare times within one run (the machine is shared).
"""

from __future__ import annotations

import pytest

from formulations.offline import preemptive_bound
from formulations.offline.classes import class_options, trivial_bound
from jctlab.generators import offline_instance


def _queue(types):
    return offline_instance(gpus=32, nodes=8, jobs=160, types=types, interarrival_s=120, duration_h=(0.05, 2),
                            max_size=8, variability=0.05, locality_penalty=1.5, seed=0)


@pytest.mark.parametrize("case", ["plain", "tangents", "3-types-5s"])
def test_preemptive_lp_on_a_long_queue(benchmark, case):
    inst = _queue(("v100", "p100", "k80") if case == "3-types-5s" else ("v100",))
    class_options(inst)             # memoised options: time the LPs, not the option build
    kw = {"time_limit": 5.0} if case == "3-types-5s" else {"tangents": case == "tangents"}
    lb = benchmark.pedantic(lambda: preemptive_bound.lower_bound(inst, **kw), rounds=1, iterations=1)
    ratio = lb / trivial_bound(inst)
    benchmark.extra_info.update(bound=lb, over_trivial=ratio)
    print(f"\n{case}: bound {lb:.1f} = {ratio:.3f} × Σ(a_j + p_j)/n")
    assert ratio > 1.0                 # a queue: the LP sees the GPUs run out
