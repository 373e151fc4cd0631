"""matching.search (compiled loops): repair, 1-/2-exchange, polish and beam against brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.generators import static_instance
from matching.categories import build_menu, enumerate_choices
from matching.exhaustive import brute_force
from matching.market import type_market
from matching.search import beam, one_opt, polish, repair, score, scores, two_opt

SMALL = settings(max_examples=25, deadline=None)


def _menu(seed: int, jobs: int):
    inst = static_instance(gpus=8, nodes=2, jobs=jobs, seed=seed, sizes=(1, 2, 4), types=("v100", "k80"))
    return build_menu(inst)


def _random_choice(m, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([rng.integers(m.n_opt[a]) for a in range(m.J)])


def _one_move_improves(m, ch) -> bool:
    """Whether some single job can switch to a faster option that fits the capacity."""
    use = m.usage(ch)
    for a in range(m.J):
        for o in range(m.n_opt[a]):
            if m.D[a, o] < m.D[a, ch[a]] * (1 - 1e-12) and np.all(use - m.C[a, ch[a]] + m.C[a, o] <= m.cap):
                return True
    return False


@SMALL
@given(st.integers(0, 10_000), st.integers(2, 4))
def test_repair_fits_or_proves_nothing_fits(seed, jobs):
    m = _menu(seed, jobs)
    ch = repair(m, _random_choice(m, seed))
    if ch is None:  # the rule may give up, but only where brute force also finds nothing
        assert next(enumerate_choices(m), None) is None
    else:
        assert m.feasible(ch)


@SMALL
@given(st.integers(0, 10_000), st.integers(2, 4))
def test_local_search_keeps_feasibility_never_worsens_and_ends_one_optimal(seed, jobs):
    m = _menu(seed, jobs)
    start = repair(m, _random_choice(m, seed))
    if start is None:
        return
    one = one_opt(m, start)
    assert m.feasible(one) and m.value(one) <= m.value(start) * (1 + 1e-12)
    assert not _one_move_improves(m, one)
    two = two_opt(m, one)
    assert m.feasible(two) and m.value(two) <= m.value(one) * (1 + 1e-12)
    pol = polish(m, start)
    assert m.feasible(pol) and m.value(pol) <= m.value(one) * (1 + 1e-12)
    assert m.value(pol) >= brute_force(m)[1] * (1 - 1e-12)


@SMALL
@given(st.integers(0, 10_000), st.integers(2, 4))
def test_wide_beam_is_the_exact_optimum(seed, jobs):
    m = _menu(seed, jobs)
    lam, _, _ = type_market(m.D, m.C, m.cap)
    best = beam(m, lam, width=10 ** 6)
    _, opt = brute_force(m)
    if not np.isfinite(opt):
        assert best is None
        return
    assert m.feasible(best) and m.value(best) == pytest.approx(opt, rel=1e-12)
    narrow = beam(m, lam, width=2)
    assert narrow is None or (m.feasible(narrow) and m.value(narrow) >= opt * (1 - 1e-12))


@SMALL
@given(st.lists(st.lists(st.floats(1.0, 100.0), min_size=3, max_size=3), min_size=1, max_size=5),
       st.floats(0.0, 2.0))
def test_scores_is_score_per_row(rows, fairness):
    d = np.array(rows)
    ref = np.array([1.0, 2.0, 3.0])
    got = scores(d, ref, fairness)
    assert got == pytest.approx([score(r, ref, fairness) for r in d], rel=1e-12)
