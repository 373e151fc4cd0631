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
        real = np.arange(menu.D.shape[1])[None, :] < menu.n_opt[:, None]          # (J, O) real options
        vals = np.unique(menu.S[real])
        # best reduced cost of each size per job (inf where the job has no option of that size)
        best = np.where((menu.S[:, :, None] == vals[None, None, :]) & real[:, :, None], red[:, :, None],
                        np.inf).min(axis=1) if vals.size else np.zeros((menu.J, 0))
        has = np.zeros_like(best, dtype=bool) if not vals.size else (
            ((menu.S[:, :, None] == vals[None, None, :]) & real[:, :, None]).any(axis=1))
        self.sizes: list[np.ndarray] = [vals[has[a]] for a in range(menu.J)]
        self.red: list[np.ndarray] = [best[a, has[a]] for a in range(menu.J)]
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


def draw_many(smp: "_Sampler", rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` i.i.d. exact draws of the sampler's P conditioned on Σ sizes ≤ #GPUs, vectorized over the
    draws (the same distribution as :meth:`_Sampler.draw`, a different use of the random stream)."""
    if not hasattr(smp, "_W"):
        smp._W = smp._table()
    W, J = smp._W, smp.menu.J
    r = np.full(n, smp.total, dtype=np.int64)
    out = np.zeros((n, J), dtype=np.int64)
    u = rng.random((n, J))
    for a in range(J):
        sz = smp.sizes[a].astype(np.int64)
        rem = r[:, None] - sz[None, :]                                   # (n, k)
        w = smp.probs(a)[None, :] * np.where(rem >= 0, W[a + 1][np.maximum(rem, 0)], 0.0)
        cum = np.cumsum(w, axis=1)
        tot = cum[:, -1]
        if np.any(tot <= 0):
            raise ValueError("no size category fits the cluster")
        k = np.minimum((cum < (u[:, a] * tot)[:, None]).sum(axis=1), len(sz) - 1)
        out[:, a] = sz[k]
        r -= sz[k]
    return out


def inner_batch(menu: Menu, lam: np.ndarray, sizes: np.ndarray, sweeps: int = 1) -> np.ndarray:
    """Solve inside many size categories at once (rows of ``sizes``): every job takes its cheapest
    option of its size at the market prices λ; rows that exceed a type's capacity are repaired
    (:func:`matching.search.repair`, per row); then ``sweeps`` rounds of 1-exchange within the
    category, vectorized over the rows. Returns choices (rows, J); −1 rows are infeasible."""
    S, J = sizes.shape
    C, D, cap = menu.C, menu.D, menu.cap
    rows = np.arange(J)
    allowed = (menu.S[None, :, :] == sizes[:, :, None]) & np.isfinite(D)[None]      # (S, J, O)
    red = D + C @ lam
    ch = np.argmin(np.where(allowed, red[None], np.inf), axis=2)                     # (S, J)
    ok = allowed.any(axis=2).all(axis=1) & (sizes.sum(axis=1) <= int(cap.sum()))
    use = C[rows[None, :], ch].sum(axis=1)                                           # (S, T)
    bad = np.flatnonzero(ok & np.any(use > cap, axis=1))
    if bad.size:
        fixed = repair_batch(menu, ch[bad], allowed[bad])
        failed = fixed[:, 0] < 0
        ok[bad[failed]] = False
        good = bad[~failed]
        ch[good] = fixed[~failed]
        use[good] = C[rows[None, :], ch[good]].sum(axis=1)
    ch[~ok] = -1
    live = np.flatnonzero(ok)
    if sweeps > 0 and live.size:
        c, u, al = ch[live], use[live], allowed[live]
        idx = np.arange(len(live))
        for _ in range(sweeps):
            moved = False
            for a in range(J):
                cur = c[:, a]
                room = cap[None, :] - u + C[a, cur]                                   # (L, T)
                fit = al[:, a, :] & np.all(C[a][None, :, :] <= room[:, None, :], axis=2)
                cand = np.where(fit, D[a][None, :], np.inf)
                o = np.argmin(cand, axis=1)
                better = cand[idx, o] < D[a, cur] * (1 - 1e-12)
                if better.any():
                    moved = True
                    u[better] += C[a, o[better]] - C[a, cur[better]]
                    c[better, a] = o[better]
            if not moved:
                break
        ch[live] = c
    return ch


def repair_batch(menu: Menu, choices: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """:func:`matching.search.repair` on many rows at once (the same move rule per row: the option
    change with the cheapest extra time per over-demanded GPU freed); failed rows come back as −1."""
    ch = np.array(choices)
    B, J = ch.shape
    C, D, cap = menu.C, menu.D, menu.cap
    ok = allowed & np.isfinite(D)[None]
    rows = np.arange(J)
    active = np.arange(B)
    for _ in range(10 * int(cap.sum()) + J + 10):
        cur = C[rows[None, :], ch[active]]                                    # (A, J, T)
        use = cur.sum(axis=1)
        E = np.maximum(use - cap, 0).sum(axis=1)
        keep = E > 0
        active, cur, use, E = active[keep], cur[keep], use[keep], E[keep]
        if not active.size:
            return ch
        new_use = use[:, None, None, :] - cur[:, :, None, :] + C[None]        # (A, J, O, T)
        gain = E[:, None, None] - np.maximum(new_use - cap, 0).sum(axis=3)
        dd = D[None] - D[rows[None, :], ch[active]][:, :, None]
        good = ok[active] & (gain > 0)
        stuck = ~good.reshape(len(active), -1).any(axis=1)
        if stuck.any():
            ch[active[stuck]] = -1
            active, good, gain, dd = active[~stuck], good[~stuck], gain[~stuck], dd[~stuck]
            if not active.size:
                return ch
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(good, np.where(dd < 0, dd * gain, dd / np.maximum(gain, 1)), np.inf)
        flat = ratio.reshape(len(active), -1).argmin(axis=1)
        a, o = np.unravel_index(flat, ratio.shape[1:])
        ch[active, a] = o
    ch[active] = -1
    return ch
