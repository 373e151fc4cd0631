"""Sampling of categories (the paper's sparsification): uniform and importance samplers.

A category is a size vector n = (n_1..n_J) (how many workers each job gets). A sampler draws N
categories i.i.d. from a distribution P; each is solved inside (:func:`inner`, deterministic) and the
best score is kept.

**Guarantee.** Let q_ε be the ε-quantile of the inner score under P (the score that a fraction ε of
P's mass is at least as good as). The best of N i.i.d. draws is ≤ q_ε with probability
≥ 1 − (1 − ε)^N, since each draw misses that top-ε set with probability ≤ 1 − ε, independently.
Draws are exact samples of P conditioned on Σ n_j ≤ #GPUs (a weight table, no rejection);
draws whose inner problem is infeasible per GPU type are rejected and redrawn. For
:class:`UniformSampler` P is uniform over the size categories that fit, so "top ε fraction" is
literally a fraction of the category set. For :class:`ImportanceSampler` the fraction is of P's mass, P(n) ∝
Π_j exp(−(r_j(n_j) − min r_j) / (τ · min r_j)), r_j(n) the reduced cost (duration + market prices ·
GPUs) of job j's best size-n option at the market-clearing prices: categories near the market's
choice get more mass. Rejected draws are redrawn (and counted) — the guarantee is conditional on
feasibility. N for a target: :func:`samples_for` (ε, δ) = ⌈ln δ / ln(1 − ε)⌉.
"""

from __future__ import annotations

import math

import numpy as np

from matching.categories import Menu
from matching.jit import njit
from matching.search import beam, one_opt, one_opt_kernel, repair, repair_kernel


def guarantee(n: int, eps: float) -> float:
    """P(best of n draws is in the top ε fraction) ≥ this."""
    return 1.0 - (1.0 - eps) ** n


def samples_for(eps: float, delta: float) -> int:
    """Smallest N with 1 − (1 − ε)^N ≥ 1 − δ."""
    if not (0 < eps < 1 and 0 < delta < 1):
        raise ValueError("need 0 < eps, delta < 1")
    return int(math.ceil(math.log(delta) / math.log(1.0 - eps)))


class _Sampler:
    """Per job: the sizes it has options of, ``SZ[a, :nv[a]]`` (ascending), the best reduced cost
    (duration + λ·counts) of each, ``RED[a, :nv[a]]``, and the draw probabilities ``P`` (subclasses)."""

    def __init__(self, menu: Menu, lam: np.ndarray):
        self.menu = menu
        self.lam = lam
        red = menu.D + menu.C @ lam
        real = np.arange(menu.D.shape[1])[None, :] < menu.n_opt[:, None]          # (J, O) real options
        vals = np.unique(menu.S[real])
        of_size = (menu.S[:, :, None] == vals[None, None, :]) & real[:, :, None]  # (J, O, V)
        best = np.where(of_size, red[:, :, None], np.inf).min(axis=1, initial=np.inf)
        has = of_size.any(axis=1)
        left = np.argsort(~has, axis=1, kind="stable")                             # sizes it has, first
        self.nv = has.sum(axis=1)
        self.SZ = vals[left] if vals.size else np.zeros((menu.J, 0), dtype=np.int64)
        self.RED = np.take_along_axis(best, left, axis=1)
        self.real = np.arange(self.SZ.shape[1])[None, :] < self.nv[:, None]
        self.total = int(menu.cap.sum())
        self.P = np.zeros(self.SZ.shape)

    @property
    def sizes(self) -> list[np.ndarray]:
        return [self.SZ[a, :n] for a, n in enumerate(self.nv)]

    def probs(self, a: int) -> np.ndarray:
        return self.P[a, :self.nv[a]]

    def _table(self) -> np.ndarray:
        """W[a, r] ∝ total weight of size vectors for jobs a.. with Σ sizes ≤ r (rows rescaled)."""
        return _weights(self.SZ, self.P, self.nv, self.total)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One exact draw from P conditioned on Σ sizes ≤ #GPUs (:func:`draw_many` with n = 1)."""
        return draw_many(self, rng, 1)[0]


class UniformSampler(_Sampler):
    def __init__(self, menu: Menu, lam: np.ndarray):
        super().__init__(menu, lam)
        self.P = np.where(self.real, 1.0 / np.maximum(self.nv, 1)[:, None], 0.0)


class ImportanceSampler(_Sampler):
    def __init__(self, menu: Menu, lam: np.ndarray, temperature: float = 0.05):
        super().__init__(menu, lam)
        lo = np.where(self.real, self.RED, np.inf).min(axis=1, keepdims=True, initial=np.inf)
        with np.errstate(invalid="ignore"):
            z = (self.RED - lo) / (max(temperature, 1e-9) * np.maximum(np.abs(lo), 1e-9))
            w = np.where(self.real, np.exp(-z), 0.0)
        self.P = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-300)


def inner(menu: Menu, lam: np.ndarray, sizes: np.ndarray, width: int = 8, fairness: float = 0.0,
          ref: np.ndarray | None = None) -> np.ndarray | None:
    """Solve inside one size category: beam search with market prices (then repair), then 1-exchange."""
    allowed = (menu.S == sizes[:, None]) & np.isfinite(menu.D)
    if not allowed.any(axis=1).all():
        return None
    if int(sizes.sum()) > int(menu.cap.sum()):
        return None
    ch = beam(menu, lam, width, allowed) if width > 0 else None
    if ch is None:
        red = np.where(allowed, menu.D + menu.C @ lam, np.inf)
        ch = repair(menu, np.argmin(red, axis=1), allowed)
        if ch is None:
            return None
    return one_opt(menu, ch, allowed, fairness, ref, max_sweeps=3)


def draw_many(smp: "_Sampler", rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` i.i.d. exact draws of the sampler's P conditioned on Σ sizes ≤ #GPUs (the same
    distribution as :meth:`_Sampler.draw`, a different use of the random stream: one uniform per
    job and draw, inverted on the cumulative weights)."""
    if not hasattr(smp, "_W"):
        smp._W = smp._table()
    out = np.zeros((n, smp.menu.J), dtype=np.int64)
    if not _draw(smp.SZ, smp.P, smp.nv, smp._W, smp.total, rng.random((n, smp.menu.J)), out):
        raise ValueError("no size category fits the cluster")
    return out


def inner_batch(menu: Menu, lam: np.ndarray, sizes: np.ndarray, sweeps: int = 1) -> np.ndarray:
    """Solve inside many size categories at once (rows of ``sizes``): every job takes its cheapest
    option of its size at the market prices λ; rows that exceed a type's capacity are repaired
    (:func:`matching.search.repair`'s rule); then ``sweeps`` rounds of 1-exchange within the
    category (:func:`matching.search.one_opt`'s rule). Returns choices (rows, J); −1 rows are
    infeasible."""
    red = menu.D + menu.C @ np.asarray(lam, dtype=float)
    ch = np.zeros(np.shape(sizes), dtype=np.int64)
    _inner_rows(menu.C, menu.D, menu.S, menu.cap, red, np.asarray(sizes, dtype=np.int64), sweeps, ch)
    return ch


@njit
def _weights(SZ, P, nv, G):
    J = SZ.shape[0]
    W = np.zeros((J + 1, G + 1))
    W[J] = 1.0
    for a in range(J - 1, -1, -1):
        for k in range(nv[a]):
            n = SZ[a, k]
            if n <= G:
                for r in range(n, G + 1):
                    W[a, r] += P[a, k] * W[a + 1, r - n]
        m = W[a].max()
        if m > 0:
            W[a] /= m
    return W


@njit
def _draw(SZ, P, nv, W, total, u, out):
    """Fill ``out`` (n, J) by inverting ``u`` on the conditional weights; False when nothing fits."""
    n, J = out.shape
    cum = np.empty(SZ.shape[1])
    for i in range(n):
        r = total
        for a in range(J):
            acc = 0.0
            for k in range(nv[a]):
                rem = r - SZ[a, k]
                acc += P[a, k] * (W[a + 1, rem] if rem >= 0 else 0.0)
                cum[k] = acc
            if not acc > 0:
                return False
            target = u[i, a] * acc
            k = 0
            while k < nv[a] - 1 and cum[k] < target:
                k += 1
            out[i, a] = SZ[a, k]
            r -= SZ[a, k]
    return True


@njit
def _inner_rows(C, D, S, cap, red, sizes, sweeps, ch):
    """:func:`inner_batch` row by row (in place on ``ch``)."""
    R, J = sizes.shape
    O = C.shape[1]
    ok = np.zeros((J, O), dtype=np.bool_)
    ones = np.ones(J)
    total = cap.sum()
    for i in range(R):
        feasible = sizes[i].sum() <= total
        for a in range(J):
            best, bo = np.inf, -1
            for o in range(O):
                ok[a, o] = S[a, o] == sizes[i, a] and np.isfinite(D[a, o])
                if ok[a, o] and (bo < 0 or red[a, o] < best):
                    best, bo = red[a, o], o
            if bo < 0:
                feasible = False
            ch[i, a] = max(bo, 0)
        if feasible:
            row = ch[i]
            feasible = repair_kernel(C, D, cap, ok, row)
            if feasible and sweeps > 0:
                one_opt_kernel(C, D, cap, ok, row, 0.0, ones, sweeps)
        if not feasible:
            ch[i, :] = -1
