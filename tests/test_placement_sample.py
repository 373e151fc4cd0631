"""``baselines.placement.sample_range`` is ``random.Random.sample(range(n), k)``: the same positions and
the generator left in the same state (random placement's schedules depend on that stream)."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.placement import sample_range


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(0, 5000), k=st.integers(0, 60), draws=st.integers(1, 4))
def test_sample_range_is_random_sample_of_a_range(seed, n, k, draws):
    k = min(k, n)
    ours, theirs = random.Random(seed), random.Random(seed)
    for _ in range(draws):          # several draws: the state after each one matters too
        assert sample_range(ours, n, k) == theirs.sample(range(n), k)
    assert ours.getrandbits(64) == theirs.getrandbits(64)


@pytest.mark.parametrize("n", [1, 5, 21, 22, 100])
def test_every_branch_of_sample_matches(n):
    # the pool branch (n <= 21 + table size), the set branch, and k > 5 (a larger table)
    for k in range(0, min(n, 12) + 1):
        for seed in range(20):
            assert sample_range(random.Random(seed), n, k) == random.Random(seed).sample(range(n), k)


def test_a_sample_larger_than_the_population_is_refused():
    with pytest.raises(ValueError):
        sample_range(random.Random(0), 3, 4)
    with pytest.raises(ValueError):
        random.Random(0).sample(range(3), 4)
