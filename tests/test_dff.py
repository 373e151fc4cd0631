"""Dual feasible functions (formulations.offline.dff) and the preemptive LP rows built on them."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import preemptive_bound
from formulations.offline.dff import DffParams, dff_rows, u_k, u_threshold
from jctlab.generators import offline_instance
from jctlab.model import Instance

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _fitting_multisets(cap: int, sizes: list[int]):
    """Every multiset of ``sizes`` whose sum is at most ``cap`` (maximal ones suffice, all are yielded)."""
    def rec(i: int, left: int, acc: list[int]):
        if i == len(sizes):
            yield list(acc)
            return
        n = sizes[i]
        for k in range(left // n + 1):
            yield from rec(i + 1, left - k * n, acc + [n] * k)
    yield from rec(0, cap, [])


@pytest.mark.parametrize("cap", [2, 3, 4, 5, 7, 8, 12, 16])
def test_every_function_weighs_at_most_one_on_whatever_fits(cap):
    """The DFF law, exhaustively: any GPU counts that fit in ``cap`` have weights summing to at most 1."""
    sizes = list(range(1, cap + 1))
    funcs = [lambda n, k=k: u_k(n, cap, k) for k in range(1, 6)]
    funcs += [lambda n, c=c: u_threshold(n, cap, c) for c in range(0, cap // 2 + 1)]
    for items in _fitting_multisets(cap, sizes):
        for f in funcs:
            assert sum(f(n) for n in items) <= 1


@settings(max_examples=60, deadline=None)
@given(cap=st.integers(2, 64), sizes=st.sets(st.integers(1, 64), min_size=1, max_size=6),
       pick=st.lists(st.integers(0, 5), min_size=1, max_size=12))
def test_rows_weigh_at_most_one_and_more_than_the_shares(cap, sizes, pick):
    """Rows of :func:`dff_rows` are DFFs on the sizes present (a random fitting multiset weighs ≤ 1), and each
    raises some size above its share n/cap (else the GPU-second row would already imply it)."""
    sizes = {n for n in sizes if n <= cap} or {1}
    order = sorted(sizes)
    items, used = [], 0
    for i in pick:
        n = order[i % len(order)]
        if used + n <= cap:
            items.append(n)
            used += n
    for phi in dff_rows(sizes, cap):
        assert sum(phi[n] for n in items) <= 1 + 1e-12
        assert any(phi[n] > n / cap + 1e-12 for n in sizes)


def test_two_large_jobs_weigh_one_each():
    """On 32 GPUs two 24-GPU jobs never run together: some row gives each weight 1."""
    assert any(phi[24] == 1.0 for phi in dff_rows({1, 4, 12, 24}, 32))


def _two_rigid_jobs() -> Instance:
    """Two 3-GPU jobs (1 000 s each on 3 GPUs) at t = 0 on one 4-GPU node: one waits for the other."""
    d = offline_instance(gpus=4, nodes=1, jobs=2, max_size=4, elastic=0.0, interarrival_s=60,
                         duration_h=(0.1, 0.5), variability=0.0, locality_penalty=1.0, seed=0).to_dict()
    for job in d["jobs"]:
        job.update(arrival=0.0, sizes=[3], batch=3.0, iterations=1000.0, comm_mb=0.0,
                   samples_per_s={t: 1.0 for t in job["samples_per_s"]})
    return Instance.from_dict(d)


def test_dff_rows_make_two_large_rigid_jobs_queue():
    """The GPU-second row lets both 3-GPU jobs share the 4 GPUs at 2/3 of their rates (mean JCT 1 250 in the LP);
    with the DFF rows one runs after the other in the LP too, and the bound reaches the optimum (completions
    1 000 and 2 000), never above brute force."""
    inst = _two_rigid_jobs()
    opt = brute.solve(inst).objective
    assert math.isclose(opt, 1500.0, rel_tol=1e-6)
    without = preemptive_bound.lower_bound(inst, dff=None)
    with_dff = preemptive_bound.lower_bound(inst, dff=DffParams())
    assert without < with_dff <= opt * (1 + 1e-9)
    assert with_dff > 0.99 * opt
