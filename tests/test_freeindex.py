"""The maintained free-GPU index answers every placement exactly as the full scan over the free map does.

Law: for any cluster shape, slowdown values, sequence of takes and gives, job size and class,
``place_indexed(j, n, index)`` == ``place(j, n, index.as_map())`` (same GPUs, same order), for
Packed, Random (same seed), PM-First (both locality rules) and PAL (several λ). Random's draws are
``random.Random.sample``'s, written out (:func:`baselines.placement.sample_positions`).
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.freeindex import FreeIndex, RankedFree
from baselines.placement import PAL, Packed, PMFirst, Random, sample_positions
from jctlab.model import Instance

CLASSES = ("A", "B", None)


def instance(node_sizes: list[int], values: list[float], rng: random.Random, lam: float) -> Instance:
    """Nodes of V100s; every GPU's class-A/B factor drawn from ``values`` (few distinct values, so
    bins and ties are frequent); one job per class (None = classless)."""
    nodes = [{"name": f"n{k}", "cpus": 4.0 * s, "mem_gb": 32.0 * s,
              "gpus": [{"type": "v100", "variability": {"A": rng.choice(values), "B": rng.choice(values)}}
                       for _ in range(s)]} for k, s in enumerate(node_sizes)]
    jobs = [{"name": f"j{i}", "arrival": 0.0, "batch": 1, "iterations": 10.0, "samples_per_s": {"v100": 1.0},
             "sizes": [1], **({"class": c} if c else {})} for i, c in enumerate(CLASSES)]
    d = {"format": "jctlab.instance/1", "name": "idx", "problem": "preemptive", "objective": "mean_jct",
         "cluster": {"nodes": nodes, "locality_penalty": lam, "split": "equal"}, "jobs": jobs}
    return Instance.from_dict(d, "<test>")


def check_all(placements, idx: FreeIndex, rng: random.Random, G: int) -> None:
    for p in placements:
        for _ in range(3):
            j = rng.randrange(len(CLASSES))
            n = rng.randint(1, min(G, 2 * max(idx.size)))
            want = p.place(j, n, idx.as_map())
            got = p.place_indexed(j, n, idx)
            assert got == want, (p.name, getattr(p, "locality", ""), j, n, idx.as_map())


@settings(max_examples=60, deadline=None)
@given(node_sizes=st.lists(st.integers(1, 8), min_size=1, max_size=7),
       values=st.lists(st.sampled_from([0.9, 1.0, 1.1, 1.3, 2.5]), min_size=1, max_size=4),
       lam=st.sampled_from([1.0, 1.1, 1.7, 3.0]), seed=st.integers(0, 10**6))
def test_indexed_placements_equal_the_scans(node_sizes, values, lam, seed):
    rng = random.Random(seed)
    inst = instance(node_sizes, values, rng, lam)
    G = len(inst.cluster.gpus)
    det = [Packed(inst), PMFirst(inst), PMFirst(inst, locality="node"), PAL(inst), PAL(inst, locality="node")]
    idx = det[-1].index()             # one index serves every placement (schemes are shared)
    used: list[str] = []
    for _ in range(12):
        check_all(det, idx, rng, G)
        free = [g for gl in idx.as_map().values() for g in gl]
        if free and (not used or rng.random() < 0.6):
            took = rng.sample(free, rng.randint(1, len(free)))
            idx.take(took)
            used += took
        elif used:
            back = rng.sample(used, rng.randint(1, len(used)))
            idx.give(back)
            used = [g for g in used if g not in back]
    # the index's counts agree with its free masks
    assert idx.total == sum(len(gl) for gl in idx.as_map().values())


@settings(max_examples=30, deadline=None)
@given(node_sizes=st.lists(st.integers(1, 8), min_size=1, max_size=6), seed=st.integers(0, 10**6))
def test_random_placement_draws_the_same_gpus(node_sizes, seed):
    rng = random.Random(seed)
    inst = instance(node_sizes, [1.0], rng, 1.0)
    scan, indexed = Random(inst, seed=seed), Random(inst, seed=seed)
    idx = indexed.index()
    for _ in range(10):
        n = rng.randint(1, len(inst.cluster.gpus))
        want = scan.place(0, n, idx.as_map())
        got = indexed.place_indexed(0, n, idx)
        assert (None if got is None else list(got)) == want
        if got and rng.random() < 0.5:
            idx.take(got)
        elif idx.total < len(inst.cluster.gpus):
            idx.give([g for g in inst.cluster.gpu if g not in {x for gl in idx.as_map().values() for x in gl}][:3])


@pytest.mark.parametrize("kind", [FreeIndex, RankedFree])
def test_index_refuses_double_take_and_double_give(kind):
    inst = instance([2, 2], [1.0], random.Random(0), 1.0)
    idx = kind(inst.cluster)
    idx.take(["n0:0"])
    with pytest.raises(ValueError):
        idx.take(["n0:0"])
    with pytest.raises(ValueError):
        idx.give(["n1:1"])
    idx.give(["n0:0"])
    assert idx.total == 4 and idx.as_map() == {"n0": ["n0:0", "n0:1"], "n1": ["n1:0", "n1:1"]}
    if kind is FreeIndex:
        assert idx.by_count[2] == 0b11


@settings(max_examples=200, deadline=None)
@given(n=st.integers(0, 5000), k=st.integers(0, 80), seed=st.integers(0, 2**32 - 1))
def test_sample_positions_draws_what_random_sample_draws(n, k, seed):
    """Both of CPython's ways (a pool list for small populations, a set of drawn positions for large ones), and
    the generator left in the same state."""
    k = min(k, n)
    ours, theirs = random.Random(seed), random.Random(seed)
    assert sample_positions(ours, n, k) == theirs.sample(range(n), k)
    assert ours.random() == theirs.random()


def test_a_take_after_a_draw_removes_exactly_the_drawn_gpus():
    """The last draw is taken by position when the take names its GPUs (the same tuple or an equal one); any other
    take, or one after a give, searches as usual."""
    inst = instance([4, 4, 4], [1.0], random.Random(0), 1.0)
    every = [g.id for g in inst.cluster.gpus]
    idx = RankedFree(inst.cluster)
    drawn = idx.draw([5, 0, 11])
    idx.take(tuple(drawn))                                 # equal, not the same object
    assert [g for gl in idx.as_map().values() for g in gl] == [g for g in every if g not in drawn]
    other = idx.draw([0])
    idx.take([every[7]])                                   # not the drawn GPU: searched, the draw forgotten
    free = {g for gl in idx.as_map().values() for g in gl}
    assert other[0] != every[7] and other[0] in free and every[7] not in free and idx.total == 8
    drawn = idx.draw([1, 2])
    idx.give([every[0]])                                   # a give between: positions moved, the draw forgotten
    idx.take(drawn)
    left = {g for gl in idx.as_map().values() for g in gl}
    assert left.isdisjoint(drawn) and every[0] in left and idx.total == 7
