"""Gavel's allocation policies (Narayanan et al., OSDI'20) as LPs over job x GPU-type time fractions.

Every function takes plain arrays (jobs in rows, GPU types in columns) and returns the allocation
``X[i, j]``: the fraction of time job i should spend on ``scale_factor[i]`` GPUs of type j. The
constraints are Gavel's ``Policy.get_base_constraints``: ``X >= 0``, ``sum_j X[i, j] <= 1`` and
``sum_i sf[i] * X[i, j] <= cap[j]``.

Gavel solves these with cvxpy/ECOS, an interior-point method. Max-min LPs are highly degenerate
(many optimal allocations), and Gavel's round mechanism can behave differently on a vertex (each
job on one type) than on the central solution an interior-point method returns (each job spread
over types). So the LPs here are solved with HiGHS' interior-point method without crossover
(through PuLP), which lands in the relative interior of the optimal face as ECOS does; simplex is
the fallback if the IPM does not report an optimum.

- :func:`max_min_fairness` — Gavel's ``MaxMinFairnessPolicyWithPerf`` (``max_min_fairness_perf``)
  when given measured throughputs and the isolated throughputs; with ``T = 1`` and no
  normalisation it is the heterogeneity-agnostic ``MaxMinFairnessPolicy``.
- :func:`isolated_allocation` — that agnostic allocation (Gavel's "isolated" equal share).
- :func:`finish_time_fairness` — ``FinishTimeFairnessPolicyWithPerf``: minimise the largest ratio
  rho_i of expected finish time under X to that under the isolated share; a generalized
  linear-fractional program, solved exactly by a short sequence of LPs (Crouzeix-Ferland-Schaible's
  Dinkelbach-type method) instead of a conic solve.
- :func:`fifo_perf` — ``FIFOPolicyWithPerf``: not an LP, a greedy in arrival order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from jctlab.lp import pulp

TOL = 1e-7


@dataclass(frozen=True)
class LPResult:
    x: np.ndarray          # allocation, clipped to [0, 1] as Gavel does
    objective: float       # the LP optimum (max-min value, or rho for finish-time fairness)
    status: str            # "optimal" or the solver's status
    solves: int = 1


def _solver(method: str) -> pulp.LpSolver:
    if method == "ipm":
        return pulp.HiGHS(msg=False, threads=1, solver="ipm", run_crossover="off")
    return pulp.HiGHS(msg=False, threads=1, solver="simplex")


def _row_lp(g: np.ndarray, h: np.ndarray, r: np.ndarray, sf: np.ndarray, cap: np.ndarray, maximize: bool,
            method: str = "ipm") -> tuple[np.ndarray, float]:
    """Optimise z s.t. sum_j g[i, j] X[i, j] + h[i] z >= r[i] for every job i, and Gavel's base constraints."""
    m, n = g.shape
    prob = pulp.LpProblem("gavel", pulp.LpMaximize if maximize else pulp.LpMinimize)
    x = [[prob.add_variable(f"x_{i}_{j}", lowBound=0) for j in range(n)] for i in range(m)]
    z = prob.add_variable("z")
    prob += z
    for i in range(m):
        prob += pulp.lpSum(float(g[i, j]) * x[i][j] for j in range(n) if g[i, j] != 0) + float(h[i]) * z >= float(r[i])
        prob += pulp.lpSum(x[i]) <= 1
    for j in range(n):
        prob += pulp.lpSum(float(sf[i]) * x[i][j] for i in range(m)) <= float(cap[j])
    prob.solve(_solver(method))
    status = pulp.LpStatus[prob.status]
    if status != "Optimal" and method == "ipm":
        return _row_lp(g, h, r, sf, cap, maximize, "simplex")
    if status != "Optimal":
        raise RuntimeError(f"Gavel LP not solved: {status}")
    X = np.array([[v.value() or 0.0 for v in row] for row in x], dtype=float)
    return np.clip(X, 0.0, 1.0), float(z.value())


def _maxmin_lp(coef: np.ndarray, sf: np.ndarray, cap: np.ndarray, method: str = "ipm") -> LPResult:
    """max z s.t. sum_j coef[i, j] X[i, j] >= z for every i, and Gavel's base constraints."""
    m = coef.shape[0]
    X, z = _row_lp(coef, -np.ones(m), np.zeros(m), sf, cap, True, method)
    return LPResult(X, z, "optimal")


def _check(T: np.ndarray, sf: Sequence[float], cap: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T = np.asarray(T, dtype=float)
    if T.ndim != 2 or T.shape[0] == 0:
        raise ValueError("throughputs must be a non-empty jobs x types matrix")
    sf = np.asarray(sf, dtype=float).reshape(-1)
    cap = np.asarray(cap, dtype=float).reshape(-1)
    if sf.shape[0] != T.shape[0] or cap.shape[0] != T.shape[1]:
        raise ValueError("scale factors / capacities do not match the throughput matrix")
    return T, sf, cap


def isolated_allocation(m: int, sf: Sequence[float], cap: Sequence[float], weights: Sequence[float] | None = None,
                        method: str = "ipm") -> LPResult:
    """Gavel's heterogeneity-agnostic ``MaxMinFairnessPolicy``: every throughput is 1."""
    return max_min_fairness(np.ones((m, len(cap))), sf, cap, weights, normalize=None, method=method)


def max_min_fairness(T: np.ndarray, sf: Sequence[float], cap: Sequence[float],
                     weights: Sequence[float] | None = None, normalize: np.ndarray | None | str = "isolated",
                     method: str = "ipm") -> LPResult:
    """Maximise min_i sum_j T[i,j] * sf[i] / (w[i] * norm[i]) * X[i,j] (Gavel's max-min fairness).

    ``normalize="isolated"`` divides each job by its throughput under the agnostic allocation
    (``max_min_fairness_perf``); ``None`` does not normalise (the agnostic policy with ``T = 1``);
    an array gives the normalisers directly.
    """
    T, sf, cap = _check(T, sf, cap)
    m = T.shape[0]
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    if isinstance(normalize, str):
        iso = isolated_allocation(m, sf, cap, w, method).x
        norm = (T * iso).sum(axis=1)
    elif normalize is None:
        norm = np.ones(m)
    else:
        norm = np.asarray(normalize, dtype=float)
    norm = _safe_norm(norm, T)
    coef = T * (sf / (w * norm))[:, None]
    return _maxmin_lp(coef, sf, cap, method)


def _safe_norm(norm: np.ndarray, T: np.ndarray) -> np.ndarray:
    """A job whose isolated share gives it no throughput (only infeasible types) would divide by 0
    in Gavel; use its mean positive throughput instead."""
    out = norm.copy()
    for i in np.flatnonzero(~(out > 0)):
        pos = T[i][T[i] > 0]
        out[i] = pos.mean() if pos.size else 1.0
    return out


def normalized_throughputs(T: np.ndarray, X: np.ndarray, sf: Sequence[float], weights: Sequence[float],
                           norm: np.ndarray) -> np.ndarray:
    """Per-job objective terms sum_j T[i,j] sf[i] / (w[i] norm[i]) X[i,j] (for checks)."""
    sf = np.asarray(sf, dtype=float)
    return (T * X).sum(axis=1) * sf / (np.asarray(weights, dtype=float) * norm)


def finish_time_fairness(T: np.ndarray, sf: Sequence[float], cap: Sequence[float], times_since_start: Sequence[float],
                         steps_remaining: Sequence[float], weights: Sequence[float] | None = None,
                         method: str = "ipm", max_iter: int = 50, tol: float = 1e-7) -> LPResult:
    """Gavel's ``FinishTimeFairnessPolicyWithPerf``: min over X of max_i rho_i(X), with

    rho_i(X) = (t_i + R_i / s_i(X)) / E_i,   s_i(X) = sum_j T[i,j] X[i,j],   E_i = t_i + R_i / iso_i,

    iso_i the throughput under the agnostic allocation (Gavel leaves the priority weights unused
    here too). rho_i = (t_i s_i + R_i) / (E_i s_i) is a ratio of two linear functions of X, so this
    is a generalized linear-fractional program, solved exactly by the Dinkelbach-type method of
    Crouzeix, Ferland and Schaible (1985): given rho_k and the previous allocation X_{k-1}, solve the
    LP  min z  s.t.  (R_i + t_i s_i - rho_k E_i s_i) / (E_i s_i(X_{k-1})) <= z  for all i;  stop when
    z >= 0 (rho_k is optimal), else rho_{k+1} = max_i rho_i(X_k). Starts from the isolated
    allocation (rho <= 1); converges superlinearly (a handful of LPs).
    """
    T, sf, cap = _check(T, sf, cap)
    m = T.shape[0]
    w = np.ones(m) if weights is None else np.asarray(weights, dtype=float)
    t = np.asarray(times_since_start, dtype=float)
    R = np.asarray(steps_remaining, dtype=float)
    iso_x = isolated_allocation(m, sf, cap, w, method).x
    iso = _safe_norm((T * iso_x).sum(axis=1), T)
    E = t + R / iso

    def rho_of(X: np.ndarray) -> float:
        s = (T * X).sum(axis=1)
        if np.any(s <= 0):
            return float("inf")
        return float(((t + R / s) / E).max())

    x_prev, rho = iso_x, rho_of(iso_x)
    solves = 1
    if not np.isfinite(rho):
        # the agnostic share gives some job no throughput (it sits on types it cannot use):
        # start from the max-min-perf allocation instead, which gives every job some
        x_prev = _maxmin_lp(T * (sf / (w * iso))[:, None], sf, cap, method).x
        rho = rho_of(x_prev)
        solves += 1
        if not np.isfinite(rho):
            return LPResult(x_prev, rho, "optimal", solves)
    for _ in range(max_iter):
        s_prev = np.maximum((T * x_prev).sum(axis=1), 1e-12)
        d = E * s_prev
        # (R_i + (t_i - rho E_i) s_i) / d_i <= z   <=>   sum_j (rho E_i - t_i) T_ij X_ij / R_i + d_i / R_i z >= 1
        g = ((rho * E - t) / R)[:, None] * T
        h = d / R
        scale = np.maximum(np.abs(g).max(axis=1), h)       # rows of order 1 for the solver
        X, z = _row_lp(g / scale[:, None], h / scale, 1.0 / scale, sf, cap, False, method)
        solves += 1
        if z >= -tol:
            break
        new = rho_of(X)
        if not new < rho:
            break
        x_prev, rho = X, new
    return LPResult(x_prev, rho, "optimal", solves)


def fifo_perf(T: np.ndarray, sf: Sequence[float], cap: Sequence[float], type_names: Sequence[str]) -> LPResult:
    """Gavel's ``FIFOPolicyWithPerf``: jobs in arrival order (rows), each gets the free type with the
    highest throughput among those (in name order) with at least ``sf`` GPUs left, fully (1.0); the
    first job that fits nowhere stops the queue."""
    T, sf, cap = _check(T, sf, cap)
    m, n = T.shape
    avail = {k: float(cap[k]) for k in range(n)}
    order = sorted(range(n), key=lambda k: type_names[k])
    live = [k for k in order if avail[k] > 0]
    X = np.zeros((m, n))
    for i in range(m):
        if not live:
            break
        # Gavel would also pick a type where the job's throughput is 0 (and then never run it there);
        # such types are skipped here so a job can never be parked on a type it cannot use.
        fits = [k for k in live if avail[k] >= sf[i] and T[i, k] > 0]
        if not fits:
            break
        best, best_t = None, -1.0
        for k in fits:
            if T[i, k] > best_t:
                best, best_t = k, T[i, k]
        X[i, best] = 1.0
        avail[best] -= sf[i]
        if avail[best] == 0:
            live.remove(best)
    return LPResult(X, float(X.sum()), "optimal", 0)
