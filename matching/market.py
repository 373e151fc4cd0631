"""Matching markets with market-clearing prices.

Two markets appear in the placement problem:

1. **Unit-demand assignment market** (workers ↔ job slots): buyer i values item k at ``v[i, k]``;
   :func:`dgs_auction` is Demange–Gale–Sotomayor's ascending (approximate) auction: every
   unassigned buyer bids on a most-profitable item at price + δ. With integer values and
   δ < 1/min(#buyers, #items) it ends in an optimal assignment (the total value equals
   ``scipy.optimize.linear_sum_assignment``'s) with prices that clear the market up to δ
   (:func:`clears`). :func:`min_clearing_prices` gives the exact minimum Walrasian prices (DGS'
   exact auction outcome) by shortest paths on the optimal assignment.

2. **Multi-unit market of GPU types** (job sizing): a price λ_t per GPU of type t; each job demands
   its cheapest option of duration + λ·counts (:func:`type_market`). The ascending auction raises the
   prices of over-demanded types exactly to the next point where some job changes its demand, until
   demand ≤ supply. The prices are Lagrange multipliers of the capacity constraints: Σ_j min_o
   (d_jo + λ·c_jo) − λ·cap is a lower bound of the optimum for every λ ≥ 0 (:func:`dual_bound`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from .jit import njit


# ----------------------------------------------------------------------------- unit demand


def dgs_auction(values: np.ndarray, delta: float | None = None, max_rounds: int = 10_000_000
                ) -> tuple[np.ndarray, np.ndarray]:
    """DGS ascending auction. ``values[i, k]`` ≥ 0 (−inf: k unacceptable to i).

    Returns (assign, prices): ``assign[i]`` = item of buyer i or −1; buyers may stay unassigned when
    every item's surplus is negative (reservation utility 0). Deterministic (ties to the lowest index).
    """
    v = np.asarray(values, dtype=float)
    nb, ni = v.shape
    if delta is None:
        delta = 1.0 / (min(nb, ni) + 1)
    prices = np.zeros(ni)
    owner = np.full(ni, -1)
    assign = np.full(nb, -1)
    queue = list(range(nb))
    rounds = 0
    while queue:
        rounds += 1
        if rounds > max_rounds:
            raise RuntimeError("auction did not converge")
        i = queue.pop(0)
        surplus = v[i] - prices
        k = int(np.argmax(surplus))
        if not surplus[k] >= 0:          # nothing worth buying (also -inf rows)
            continue
        prev = owner[k]
        owner[k] = i
        assign[i] = k
        prices[k] += delta
        if prev >= 0:
            assign[prev] = -1
            queue.append(prev)
    return assign, prices


def clears(values: np.ndarray, prices: np.ndarray, assign: np.ndarray, tol: float = 1e-9) -> bool:
    """Market clearing (competitive equilibrium up to ``tol``): every buyer gets an item of its demand
    set (max surplus, ≥ 0; unassigned buyers have no positive surplus), no item sold twice, and unsold
    items have price ≤ tol... within the auction's δ this is ``clears(v, p - δ on sold, a, δ)``."""
    v = np.asarray(values, dtype=float)
    nb, ni = v.shape
    sold = assign[assign >= 0]
    if len(set(sold.tolist())) != len(sold):
        return False
    for i in range(nb):
        best = max(0.0, float(np.max(v[i] - prices))) if ni else 0.0
        if assign[i] < 0:
            if best > tol:
                return False
        elif v[i, assign[i]] - prices[assign[i]] < best - tol:
            return False
    unsold = np.setdiff1d(np.arange(ni), sold)
    return bool(np.all(prices[unsold] <= tol))


def optimal_value(values: np.ndarray) -> float:
    """Maximum total value of an assignment (buyers may stay unassigned) via linear_sum_assignment."""
    v = np.where(np.isfinite(values), np.maximum(values, 0.0), 0.0)
    r, c = linear_sum_assignment(v, maximize=True)
    return float(sum(values[i, k] for i, k in zip(r, c) if np.isfinite(values[i, k]) and values[i, k] > 0))


def assignment_value(values: np.ndarray, assign: np.ndarray) -> float:
    return float(sum(values[i, k] for i, k in enumerate(assign) if k >= 0))


def min_clearing_prices(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An optimal assignment and the minimum Walrasian prices supporting it (the exact DGS outcome).

    Prices are longest-path potentials in the exchange graph: p_k = max over alternating paths from an
    unsold (or dummy, price 0) item ending at k of the accumulated value differences.
    """
    v = np.where(np.isfinite(values), values, -1e18)
    nb, ni = v.shape
    # dummy items (reservation, value 0) so that staying out is an option
    full = np.hstack([v, np.zeros((nb, nb))])
    r, c = linear_sum_assignment(full, maximize=True)
    assign = np.full(nb, -1)
    for i, k in zip(r, c):
        if k < ni:
            assign[i] = k
    # minimum prices: p_m = max(0, max_i v[i,m] - u_i), u_i = v[i,a_i] - p_{a_i} (0 if unassigned);
    # a monotone fixed-point iteration from p = 0 (Bellman-Ford; no positive cycle as a is optimal)
    p = np.zeros(ni)
    rows = np.arange(nb)
    held = assign >= 0
    for _ in range(ni + 2):
        u = np.where(held, v[rows, np.maximum(assign, 0)] - p[np.maximum(assign, 0)], 0.0)
        req = np.max(v - u[:, None], axis=0) if nb else np.zeros(ni)
        new = np.maximum(p, np.maximum(req, 0.0))
        if np.allclose(new, p, rtol=0, atol=1e-12):
            break
        p = new
    return assign, np.maximum(p, 0.0)


# ----------------------------------------------------------------------------- many-to-one


def assign_slots(values: np.ndarray, quotas: Sequence[int], method: str = "lsa") -> np.ndarray:
    """Many-to-one assignment: job i takes exactly ``quotas[i]`` items maximizing total value.

    Jobs are expanded into unit slots; ``method`` = ``lsa`` (scipy) or ``dgs`` (the auction; values are
    scaled to integers first). Returns item → job (−1 unassigned)."""
    v = np.asarray(values, dtype=float)
    rows = np.repeat(np.arange(v.shape[0]), quotas)
    slot_v = v[rows]
    if method == "dgs":
        shift = np.nanmax(np.abs(slot_v[np.isfinite(slot_v)])) if np.isfinite(slot_v).any() else 1.0
        scaled = np.where(np.isfinite(slot_v), np.round((slot_v + shift + 1) * 1e3), -np.inf)
        a, _ = dgs_auction(scaled)
        pairs = [(s, k) for s, k in enumerate(a) if k >= 0]
    else:
        big = np.where(np.isfinite(slot_v), slot_v, -1e15)
        r, c = linear_sum_assignment(big, maximize=True)
        pairs = list(zip(r, c))
    out = np.full(v.shape[1], -1)
    for s, k in pairs:
        out[k] = rows[s]
    return out


# ----------------------------------------------------------------------------- type prices


def demand(D: np.ndarray, C: np.ndarray, lam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each job's cheapest option at prices λ (ties: lowest index) and the reduced costs."""
    red = D + C @ lam
    return np.argmin(red, axis=1), red


def dual_bound(D: np.ndarray, C: np.ndarray, cap: np.ndarray, lam: np.ndarray) -> float:
    """Lagrangian bound Σ_j min_o (d + λ·c) − λ·cap ≤ optimum of Σ d s.t. Σ c ≤ cap."""
    _, red = demand(D, C, lam)
    return float(red.min(axis=1).sum() - lam @ cap)


def type_market(D: np.ndarray, C: np.ndarray, cap: np.ndarray, max_steps: int = 100_000,
                start: np.ndarray | None = None, rel_step: float = 0.01) -> tuple[np.ndarray, np.ndarray, int]:
    """Ascending auction on GPU-type prices until no type is over-demanded.

    At each step the over-demanded set O = {t: demand_t > cap_t} gets a uniform raise θ, the smallest
    at which some job demanding O-GPUs becomes indifferent to an option using fewer of them; the price
    moves just past it (at least by ``rel_step`` of O's highest price: demand need not be monotone,
    options mix types, and a job can flip between two options forever on exact breakpoints).
    Returns (prices, choice, steps). Raises ValueError if even the smallest options do not fit (no
    feasible placement of all jobs), RuntimeError if the prices do not settle.
    """
    T = C.shape[2]
    lam = np.zeros(T) if start is None else np.array(start, dtype=float)
    choice = np.zeros(C.shape[0], dtype=np.int64)
    code, steps = _auction(np.asarray(D, dtype=float), np.asarray(C), np.asarray(cap, dtype=float) + 1e-9,
                           lam, choice, float(rel_step), int(max_steps))
    if code == _NO_FIT:
        raise ValueError("no placement of every job fits the free GPUs")
    if code == _NO_CLEAR:
        raise RuntimeError("type market did not clear (prices diverged or too many steps)")
    return lam, choice, steps


_CLEARED, _NO_FIT, _NO_CLEAR = 0, 1, 2


@njit
def _set_use(D, C, width, mask, uO):
    """uO[j, o] = GPUs of the types in ``mask`` (a bit set) that option o < width[j] of job j uses;
    returns Σ_j min over j's real options — more than the set's capacity proves that nothing fits."""
    J, O, T = C.shape
    least = 0.0
    for j in range(J):
        m = np.inf
        for o in range(width[j]):
            u = 0.0
            for t in range(T):
                if (mask >> t) & 1:
                    u += C[j, o, t]
            uO[j, o] = u
            if np.isfinite(D[j, o]) and u < m:
                m = u
        least += m
    return least


@njit
def _auction(D, C, cap, lam, choice, rel_step, max_steps):
    """The ascending auction of :func:`type_market` in place on ``lam`` and ``choice``; returns
    (_CLEARED | _NO_FIT | _NO_CLEAR, steps). Reduced costs red = D + C·λ are kept up to date
    incrementally (only the over-demanded prices move, all by the same raise); a job's options past
    its last finite duration are padding and are skipped. The smallest raise is 1e-4 of the median
    duration per GPU of the options."""
    J, O, T = C.shape
    width = np.ones(J, dtype=np.int64)
    per_gpu = np.empty(J * O)
    k = 0
    for j in range(J):
        for o in range(O):
            if np.isfinite(D[j, o]):
                width[j] = o + 1
                n = 0
                for t in range(T):
                    n += C[j, o, t]
                if n > 0:
                    per_gpu[k] = D[j, o] / n
                    k += 1
    base_step = 1e-4 * (np.median(per_gpu[:k]) if k > 0 else 1.0)
    uO = np.empty((J, O))
    if T <= 12:
        # a proof of infeasibility: some set S of types that the jobs' least S-using options overfill
        for mask in range(1, 1 << T):
            cap_s = 0.0
            for t in range(T):
                if (mask >> t) & 1:
                    cap_s += cap[t]
            if _set_use(D, C, width, mask, uO) > cap_s:
                return _NO_FIT, 0
    red = np.empty((J, O))
    for j in range(J):
        for o in range(width[j]):
            r = D[j, o]
            for t in range(T):
                r += C[j, o, t] * lam[t]
            red[j, o] = r
    use = np.empty(T)
    _demand_at(red, C, width, choice, use, 0.0, uO)
    steps = 0
    last = -1
    while True:
        mask = 0
        cap_o = 0.0
        for t in range(T):
            if use[t] > cap[t]:
                mask |= 1 << t
                cap_o += cap[t]
        if mask == 0:
            return _CLEARED, steps
        steps += 1
        if steps > max_steps:
            return _NO_CLEAR, steps
        if mask != last:
            last = mask
            if _set_use(D, C, width, mask, uO) > cap_o:
                return _NO_FIT, steps   # every job already needs more over-demanded GPUs than exist
        # θ: the raise at which some job becomes indifferent to an option using fewer O-GPUs
        th = np.inf
        for j in range(J):
            b = choice[j]
            cu = uO[j, b]
            rb = red[j, b]
            for o in range(width[j]):
                if uO[j, o] < cu and np.isfinite(D[j, o]):
                    x = (red[j, o] - rb) / (cu - uO[j, o])
                    if x < th:
                        th = x
        if not np.isfinite(th):
            return _NO_FIT, steps
        top = 0.0
        for t in range(T):
            if (mask >> t) & 1 and lam[t] > top:
                top = lam[t]
        inc = max(th * (1 + 1e-9), rel_step * top, base_step)
        for t in range(T):
            if (mask >> t) & 1:
                lam[t] += inc
                if not np.isfinite(lam[t]):
                    return _NO_CLEAR, steps
        _demand_at(red, C, width, choice, use, inc, uO)


@njit
def _demand_at(red, C, width, choice, use, inc, uO):
    """Raise the reduced costs by ``inc`` · uO (skipped when inc is 0), then each job's cheapest
    option (ties: lowest index) into ``choice`` and the GPUs of each type they use into ``use``."""
    J, _, T = C.shape
    use[:] = 0.0
    for j in range(J):
        b = 0
        for o in range(width[j]):
            if inc != 0.0:
                red[j, o] += inc * uO[j, o]
            if red[j, o] < red[j, b]:
                b = o
        choice[j] = b
        for t in range(T):
            use[t] += C[j, b, t]
