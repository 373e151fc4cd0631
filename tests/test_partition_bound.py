"""The partition bound (:mod:`formulations.offline.partition_bound`) against brute force."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formulations import brute
from formulations.offline import partition_bound
from formulations.offline.classes import trivial_bound
from jctlab.generators import offline_instance
from jctlab.model import Instance

SMALL = partition_bound.PartitionParams(max_part=2)


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 9_999), jobs=st.integers(3, 5), gpus=st.integers(2, 3),
       objective=st.sampled_from(["mean_jct", "weighted_jct"]), interference=st.sampled_from([0.0, 0.3]))
def test_never_above_the_brute_force_optimum(seed, jobs, gpus, objective, interference):
    inst = offline_instance(gpus=gpus, nodes=1, jobs=jobs, interarrival_s=600, duration_h=(0.1, 1.0), max_size=2,
                            variability=0.1, locality_penalty=1.3, interference=interference, objective=objective,
                            seed=seed)
    opt = brute.solve(inst).objective
    b = partition_bound.lower_bound(inst, params=SMALL)
    assert b <= opt * (1 + 1e-9)
    assert b >= trivial_bound(inst) * (1 - 1e-9)      # every part at least its jobs' least run times


def test_independent_parts_give_the_optimum():
    """Two bursts so far apart that the first is done before the second arrives: the sum of the parts' optima is
    the optimum (parts of the burst size); parts of one job give Σ(a_j + p_j) only."""
    base = offline_instance(gpus=2, nodes=1, jobs=6, interarrival_s=60, duration_h=(0.2, 1.0), max_size=2,
                            variability=0.1, seed=7)
    d = base.to_dict()
    for k, job in enumerate(d["jobs"]):
        job["arrival"] = (0.0 if k < 3 else 1e6) + 10.0 * k
    inst = Instance.from_dict(d, "<test>")
    opt = brute.solve(inst).objective
    assert partition_bound.lower_bound(inst, params=partition_bound.PartitionParams(max_part=3)) == \
        pytest.approx(opt, rel=1e-9)
    assert partition_bound.lower_bound(inst, params=partition_bound.PartitionParams(max_part=1)) == \
        pytest.approx(trivial_bound(inst), rel=1e-9)
    assert trivial_bound(inst) < opt * (1 - 1e-3)     # the instance queues within a burst: the test can tell
