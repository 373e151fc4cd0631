"""The paper's optimal scheme: every category, each solved exactly inside.

:func:`dp_optimum` enumerates every count category implicitly: a dynamic program over jobs whose
state is the vector of GPUs used per type; each path through it is one category (one count vector
per job), and the DP keeps, for every state, the cheapest category prefix reaching it, so its
minimum is the minimum over all categories of Σ durations. :func:`brute_force` enumerates the same
categories explicitly (small menus; tests check the two agree), and :func:`by_size_categories`
enumerates the paper's size categories, solving each exactly with the DP restricted to it.

**When the categories are exact** (DP value = the static optimum, and the realized schedule attains
it): no per-GPU variability, no interference, no PS jobs and no cpu_mem levels (so a job's duration
is a function of its option (count vector, local/spread) alone), and local jobs pack iff they fit in
aggregate — true when every node holds one GPU type, all nodes of a type have the same size, and every
size a job may use locally divides that node size (e.g. power-of-two sizes on 4- or 8-GPU servers).
When the realized schedule keeps every job on its chosen option (:func:`realize` ok), the replayed
objective equals the DP value and is optimal. Otherwise the DP value is still a lower bound (without
variability, PS or cpu_mem) and the schedule is reported ``feasible``.
"""

from __future__ import annotations

import math
import time
from typing import Sequence

import numpy as np

from .categories import Menu, enumerate_choices, enumerate_size_categories

MAX_STATES = 5_000_000


def n_states(menu: Menu) -> int:
    return int(np.prod(menu.cap + 1))


def dp_optimum(menu: Menu, allowed: np.ndarray | None = None, deadline: float | None = None
               ) -> tuple[tuple[int, ...] | None, float]:
    """Minimum Σ D[a, o_a] over choices with Σ C[a, o_a] ≤ cap (``allowed[a, o]`` restricts options).

    Returns (choice, value); (None, inf) when no choice fits. Raises MemoryError on huge state spaces.
    """
    T = len(menu.types)
    cap = [int(x) for x in menu.cap]
    if n_states(menu) * max(1, menu.J) > MAX_STATES * 8:
        raise MemoryError(f"state space too large for the exact DP ({n_states(menu)} states x {menu.J} jobs)")
    shape = tuple(c + 1 for c in cap)
    V = np.full(shape, np.inf)
    V[(0,) * T] = 0.0
    args = []
    for a in range(menu.J):
        if deadline is not None and time.perf_counter() > deadline:
            raise TimeoutError("exact DP ran out of time")
        W = np.full(shape, np.inf)
        arg = np.full(shape, -1, dtype=np.int32)
        for o in range(int(menu.n_opt[a])):
            if allowed is not None and not allowed[a, o]:
                continue
            d = menu.D[a, o]
            if not math.isfinite(d):
                continue
            c = menu.C[a, o]
            if np.any(c > menu.cap):
                continue
            dst = tuple(slice(int(x), None) for x in c)
            src = tuple(slice(0, cap[t] - int(c[t]) + 1) for t in range(T))
            cand = V[src] + d
            w = W[dst]
            better = cand < w
            if better.any():
                w[better] = cand[better]
                arg[dst][better] = o
        V = W
        args.append(arg)
    flat = int(np.argmin(V))
    best = float(V.flat[flat])
    if not math.isfinite(best):
        return None, math.inf
    state = list(np.unravel_index(flat, shape))
    choice = [0] * menu.J
    for a in range(menu.J - 1, -1, -1):
        o = int(args[a][tuple(state)])
        choice[a] = o
        for t in range(T):
            state[t] -= int(menu.C[a, o, t])
    return tuple(choice), best


def brute_force(menu: Menu, sizes: Sequence[int] | None = None) -> tuple[tuple[int, ...] | None, float]:
    """Explicit enumeration of every aggregate-feasible choice (tiny menus only)."""
    best, arg = math.inf, None
    for combo in enumerate_choices(menu, sizes):
        v = float(menu.D[np.arange(menu.J), list(combo)].sum())
        if v < best:
            best, arg = v, combo
    return arg, best


def by_size_categories(menu: Menu) -> tuple[tuple[int, ...] | None, float, int]:
    """The paper's enumeration: every size category, each solved exactly (DP restricted to it).

    Returns (best choice, value, number of categories visited)."""
    best, arg, k = math.inf, None, 0
    for cat in enumerate_size_categories(menu):
        k += 1
        allowed = menu.S == np.asarray(cat)[:, None]
        choice, v = dp_optimum(menu, allowed)
        if choice is not None and v < best:
            best, arg = v, choice
    return arg, best, k
