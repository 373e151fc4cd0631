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

import math
from typing import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment


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
    moves just past it. Returns (prices, choice, steps). Raises ValueError if even the smallest
    options do not fit (no feasible placement of all jobs).
    """
    J, O, T = C.shape
    lam = np.zeros(T) if start is None else np.array(start, dtype=float)
    rows = np.arange(J)
    steps = 0
    Cf = C.astype(float)
    Df = np.asarray(D, dtype=float)
    fin = np.isfinite(Df)
    fin_use = fin & (C.sum(axis=2) > 0)
    per_gpu = (Df / np.maximum(C.sum(axis=2), 1))[fin_use]
    base_step = 1e-4 * (float(np.median(per_gpu)) if per_gpu.size else 1.0)
    capf = np.asarray(cap, dtype=float) + 1e-9
    inf = np.full(Df.shape, np.inf)
    if T <= 12:
        # a proof of infeasibility: some set S of types that the jobs' least S-using options overfill
        for mask in range(1, 1 << T):
            s_ = np.array([(mask >> t) & 1 for t in range(T)], dtype=float)
            least = np.where(fin, Cf @ s_, np.inf).min(axis=1).sum()
            if least > float(capf @ s_):
                raise ValueError("no placement of every job fits the free GPUs")
    C2 = Cf.reshape(J * O, T)                                   # 2-D: one BLAS call per price vector
    per_set: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}    # over-demanded set -> (uO, uO or inf)
    while True:
        red = Df + (C2 @ lam).reshape(J, O)                     # demand at λ (ties: lowest index)
        choice = red.argmin(axis=1)
        use = Cf[rows, choice].sum(axis=0)
        over = use > capf
        if not over.any():
            return lam, choice, steps
        steps += 1
        if steps > max_steps:
            raise RuntimeError("type market did not clear")
        key = over.tobytes()
        if key not in per_set:
            of = over.astype(float)
            uO = (C2 @ of).reshape(J, O)                        # (J, O) use of over-demanded types
            uO_fin = np.where(fin, uO, np.inf)
            if uO_fin.min(axis=1).sum() > float(capf @ of):
                # every job already needs at least this many GPUs of the over-demanded types: a proof
                raise ValueError("no placement of every job fits the free GPUs")
            per_set[key] = (uO, uO_fin)
        uO, uO_fin = per_set[key]
        cur_u = uO[rows, choice][:, None]
        less = uO_fin < cur_u
        # θ: the raise at which some job becomes indifferent to an option using fewer O-GPUs
        theta = np.divide(red - red[rows, choice][:, None], cur_u - uO, out=inf.copy(), where=less)
        th = float(theta.min()) if theta.size else math.inf
        if not math.isfinite(th):
            raise ValueError("no placement of every job fits the free GPUs")
        # at least a small geometric step: demand need not be monotone (options mix types), and a
        # job can flip between two options forever on exact breakpoints
        lam[over] += max(th * (1 + 1e-9), rel_step * float(lam[over].max()), base_step)
        if not np.isfinite(lam).all():
            raise RuntimeError("type market did not clear (prices diverged)")
