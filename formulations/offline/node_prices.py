"""Lagrangian prices at the branch and bound's nodes (:mod:`.bnb`): the root's multipliers, reused everywhere.

Why. The search's own bounds (earliest completions, GPU areas, mean busy time) see the GPUs' capacity but not
that a multi-GPU job holds all of its GPUs for its whole run; on queues of 12 jobs on 6 GPUs of three types they
are 30-40 % below the optimum at the root, and the search then enumerates millions of nodes. The time-indexed
relaxation of :mod:`.lagrangian_bound` over every allocation is within a few per cent of the optimum there, and
tightens as jobs are fixed; re-solving it at each node costs 0.3 s. Its multipliers λ from the root, kept fixed,
price a node in microseconds: per job a table lookup per allocation.

The node bound. A node fixes the placed jobs (their allocations and starts) and the last start t; every
completion of it starts each job j left on allocation o no earlier than s_{j,o} (its arrival, t, its GPUs' and
CPUs'/memory's free times: the search's child start, :meth:`.bnb.Search._evaluate`). Take the node's problem
(that completion over the time-indexed rows of :mod:`.lagrangian_bound`) and relax its rows with the multipliers
λ'_q = λ_q for slots q ≥ u_t (the slot of t) and 0 before: any λ' ≥ 0 gives a bound on it (weak duality), so

    Σ_placed w_j C_j + Σ_placed Σ_{q ≥ u_t, occupied} price_q + Σ_left min_o min_{starts ≥ s_{j,o}} (cost + price)
        − Σ_{q ≥ u_t} Σ_r cap_r λ_{r,q}

is at most the objective of every completion. Placed jobs count at their true completion (at least their cost
in the relaxation) and occupy the slots the module's rule gives their start slot (fewer slots than they run:
the rows only get looser). A left job starting in the slot u of s_{j,o} costs at least w_j (s_{j,o} + d − a_j)
and occupies what a start at τ_u would; in a later slot, the tabled cost. Every price is ≥ 0, every start of a
completion is in some slot counted, so the minimum is a lower bound; slots before u_t have λ' = 0 and so
neither capacity nor occupancy there counts (where t has passed, capacity left unused would only lower it).

Tests: ``tests/test_node_prices.py`` (Hypothesis: with any multipliers ≥ 0, the search with prices returns the
brute-force optimum; the node bound at the root is at least the multipliers' value; on any node, the bound equals
its terms above summed one by one).
"""

from __future__ import annotations

import bisect
import math

import numpy as np

from jctlab.model import Instance

from . import lagrangian_bound
from .lagrangian_bound import LagrangianParams, Multipliers
from .options import Option


class NodePrices:
    """The node bound of the module docstring for one instance (its jobs' ``arrivals``) and one set of
    multipliers. ``norm``: what the search's values are divided by (its objective weights are the jobs' weights
    over their sum)."""

    def __init__(self, m: Multipliers, arrivals: list[float]) -> None:
        rel = m.relaxation
        self.value = m.value
        self.tau = rel.tau.tolist()
        self.norm = float(rel.w.sum())
        T = len(self.tau) - 1
        prices = m.prices
        prefix = np.zeros((prices.shape[0], T + 1))
        np.cumsum(prices, axis=1, out=prefix[:, 1:])
        self.prefix = prefix.tolist()
        after = np.zeros(T + 1)
        after[:T] = np.cumsum(m.cap_prices[::-1])[::-1]
        self.cap_after = after.tolist()            # Σ_r cap_r λ_{r,q} over slots q from u on
        # per (job, allocation) of the flat enumeration, indexed by start slot u: ``occ`` what the slots a start in
        # u occupies cost, ``best`` the least cost + occupancy over starts in slot u or later (a completion, in
        # Σ w_j C_j units, so the job's arrival is added), ``ends`` the slot after a start in u's occupancy
        n = len(rel.choices)
        self.occ = np.zeros((n, T + 2))
        full = np.full((n, T + 2), math.inf)
        ends = np.full((n, T + 2), T, dtype=int)
        for r, c in enumerate(rel.choices):
            p = prefix[c.key]
            self.occ[r, c.starts] = p[c.ends] - p[c.starts]
            full[r, c.starts] = c.cost + self.occ[r, c.starts] + rel.w[c.job] * arrivals[c.job]
            ends[r, c.starts] = c.ends
        self.best = np.minimum.accumulate(full[:, ::-1], axis=1)[:, ::-1]
        self.ends = ends.tolist()
        self.key = [c.key for c in rel.choices]
        self.weight = np.array([rel.w[c.job] for c in rel.choices], dtype=float)
        self.tau_array = rel.tau        # ``tau`` as an array: :meth:`bound` looks up many times at once, ``slot`` one

    @classmethod
    def at_root(cls, inst: Instance, options: tuple[list[list[Option]], set], target: float | None,
                time_limit: float | None, params: LagrangianParams) -> NodePrices | None:
        """The subgradient's multipliers over ``options`` (an option model and its capacities: the allocations the
        search enumerates, or the class model), steered by ``target`` (an incumbent's objective), within
        ``time_limit``; None where :func:`.lagrangian_bound.multipliers` gives none."""
        m = lagrangian_bound.multipliers(inst, time_limit, target=target, params=params, options=options)
        return None if m is None else cls(m, [job.arrival for job in inst.jobs])

    def slot(self, s: float) -> int:
        """The slot holding time ``s`` (0 before the grid)."""
        return max(0, bisect.bisect_right(self.tau, s) - 1)

    def place(self, index: int, start: float) -> tuple[int, int, int]:
        """What a job placed on option ``index`` at ``start`` occupies: (its key, first slot, slot after)."""
        u = self.slot(start)
        return self.key[index], u, self.ends[index][u]

    def _placed(self, t: float, val: float, placed: list[tuple[int, int, int]]) -> tuple[float, float]:
        """The node bound's terms before the jobs left's (the placed jobs' value and occupancy from the slot of
        ``t`` on, less the capacities' prices there), and the sum of their magnitudes (for the rounding)."""
        ut = self.slot(t)
        total = val * self.norm - self.cap_after[ut]
        scale = abs(val * self.norm) + self.cap_after[ut]
        prefix = self.prefix
        for key, u, e in placed:
            if e > ut:
                p = prefix[key]
                x = p[e] - p[u if u > ut else ut]
                total += x
                scale += x
        return total, scale

    def bound(self, t: float, val: float, placed: list[tuple[int, int, int]], index: np.ndarray,
              completion: np.ndarray, start: np.ndarray, groups: np.ndarray) -> float:
        """The node bound, in the search's units: ``val`` the placed jobs' Σ w_j C_j (normalised), ``placed`` what
        they occupy (:meth:`place`), and every child of the jobs left as arrays, each job's consecutive (``groups``
        where each job's begin): its option's ``index`` in the flat enumeration the multipliers priced, its
        ``completion`` and ``start`` (:meth:`.bnb.Search._evaluate`). Lowered by 1e-9 of the magnitudes summed, for
        rounding."""
        total, scale = self._placed(t, val, placed)
        u = np.searchsorted(self.tau_array, start, side="right") - 1
        v = np.minimum(self.weight[index] * completion + self.occ[index, u], self.best[index, u + 1])
        least = float(np.minimum.reduceat(v, groups).sum()) if len(v) else 0.0
        total += least
        scale += least
        return (total - 1e-9 * scale) / self.norm
