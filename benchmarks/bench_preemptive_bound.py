"""Preemptive LP bound on a long loaded queue: time and value of its two LPs (pytest-benchmark).

    pytest benchmarks/bench_preemptive_bound.py --benchmark-only -s

160 jobs of 1-8 GPUs arriving every ~2 min on 32 GPUs (8 nodes): more work than GPUs, as in PAL's
Sia-Philly workloads. ``plain``: the LP with the all-GPU area row, no busy-time tangents (the first LP of
``lower_bound``); ``tangents``: both LPs, as ``lower_bound`` runs them. Each case prints the bound and its
ratio to Σ(a_j + p_j)/n; compare times within one run (the machine is shared).
"""

from __future__ import annotations

import pytest

from formulations import offline_candidates as oc
from formulations import preemptive_bound
from jctlab.generators import offline_instance


def _queue():
    return offline_instance(gpus=32, nodes=8, jobs=160, interarrival_s=120, duration_h=(0.05, 2), max_size=8,
                            variability=0.05, locality_penalty=1.5, seed=0)


@pytest.mark.parametrize("tangents", [False, True], ids=["plain", "tangents"])
def test_preemptive_lp_on_a_long_queue(benchmark, tangents):
    inst = _queue()
    oc.class_options(inst)             # memoised options: time the LPs, not the option build
    lb = benchmark.pedantic(lambda: preemptive_bound.lower_bound(inst, tangents=tangents), rounds=3, iterations=1)
    ratio = lb / oc.trivial_bound(inst)
    benchmark.extra_info.update(bound=lb, over_trivial=ratio)
    print(f"\ntangents={tangents}: bound {lb:.1f} = {ratio:.3f} × Σ(a_j + p_j)/n")
    assert ratio > 1.0                 # a queue: the LP sees the GPUs run out
