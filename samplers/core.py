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
from matching.search import beam, one_opt, repair


def guarantee(n: int, eps: float) -> float:
    """P(best of n draws is in the top ε fraction) ≥ this."""
    return 1.0 - (1.0 - eps) ** n


def samples_for(eps: float, delta: float) -> int:
    """Smallest N with 1 − (1 − ε)^N ≥ 1 − δ."""
    if not (0 < eps < 1 and 0 < delta < 1):
        raise ValueError("need 0 < eps, delta < 1")
    return int(math.ceil(math.log(delta) / math.log(1.0 - eps)))


class _Sampler:
    def __init__(self, menu: Menu, lam: np.ndarray):
        self.menu = menu
        self.lam = lam
        red = menu.D + menu.C @ lam
        self.sizes: list[np.ndarray] = []
        self.red: list[np.ndarray] = []
        for a in range(menu.J):
            k = int(menu.n_opt[a])
            s = menu.S[a, :k]
            us = np.unique(s)
            self.sizes.append(us)
            self.red.append(np.array([red[a, :k][s == n].min() for n in us]))
        self.total = int(menu.cap.sum())

    def probs(self, a: int) -> np.ndarray:
        raise NotImplementedError

    def _table(self) -> np.ndarray:
        """W[a, r] ∝ total weight of size vectors for jobs a.. with Σ sizes ≤ r (rows rescaled)."""
        J, G = self.menu.J, self.total
        W = np.zeros((J + 1, G + 1))
        W[J] = 1.0
        for a in range(J - 1, -1, -1):
            w = self.probs(a)
            for n, x in zip(self.sizes[a], w):
                n = int(n)
                if n <= G:
                    W[a, n:] += x * W[a + 1, :G + 1 - n]
            m = W[a].max()
            if m > 0:
                W[a] /= m
        return W

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """Exact draw from P conditioned on Σ sizes ≤ #GPUs (sequential, by the weight table)."""
        if not hasattr(self, "_W"):
            self._W = self._table()
        W, r, out = self._W, self.total, []
        for a in range(self.menu.J):
            sz = self.sizes[a]
            w = self.probs(a) * np.array([W[a + 1, r - int(n)] if int(n) <= r else 0.0 for n in sz])
            if w.sum() <= 0:
                raise ValueError("no size category fits the cluster")
            n = int(sz[rng.choice(len(sz), p=w / w.sum())])
            out.append(n)
            r -= n
        return np.array(out)


class UniformSampler(_Sampler):
    def probs(self, a: int) -> np.ndarray:
        n = len(self.sizes[a])
        return np.full(n, 1.0 / n)


class ImportanceSampler(_Sampler):
    def __init__(self, menu: Menu, lam: np.ndarray, temperature: float = 0.05):
        super().__init__(menu, lam)
        self.p = []
        for r in self.red:
            lo = float(r.min())
            z = (r - lo) / (max(temperature, 1e-9) * max(abs(lo), 1e-9))
            w = np.exp(-z)
            self.p.append(w / w.sum())

    def probs(self, a: int) -> np.ndarray:
        return self.p[a]


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
