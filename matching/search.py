"""Repair and local search over option choices (capacity per GPU type), with a fairness-aware score.

score(d) = mean(d) · (1 + fairness · (1 − Jain(d / ref))), ref = a job's run time alone on its best
homogeneous allocation (jctlab.metrics.ReferenceDurations, the slowdown reference of replay).
fairness = 0 is plain mean JCT.
"""

from __future__ import annotations


import numpy as np

from .categories import Menu


def jain(x: np.ndarray) -> float:
    s2 = float(np.sum(x * x))
    return float(np.sum(x) ** 2 / (len(x) * s2)) if s2 > 0 else 1.0


def score(d: np.ndarray, ref: np.ndarray | None, fairness: float) -> float:
    m = float(np.mean(d))
    if fairness <= 0 or ref is None:
        return m
    return m * (1.0 + fairness * (1.0 - jain(d / ref)))


def reference(menu: Menu) -> np.ndarray:
    from jctlab.metrics import ReferenceDurations, strip_variability

    ref_of = ReferenceDurations(strip_variability(menu.inst.cluster))
    r = np.array([ref_of(menu.inst.jobs[j]) for j in menu.jobs])
    return np.where(np.isfinite(r) & (r > 0), r, 1.0)


def repair(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray | None:
    """Move jobs to options that use fewer over-demanded GPUs, cheapest extra time per GPU freed,
    until the choice fits; None when impossible within ``allowed``."""
    ch = np.array(choice)
    J = menu.J
    rows = np.arange(J)
    C, D, cap = menu.C, menu.D, menu.cap
    ok = np.isfinite(D) if allowed is None else (allowed & np.isfinite(D))
    for _ in range(10 * int(cap.sum()) + J + 10):
        use = C[rows, ch].sum(axis=0)
        exc = np.maximum(use - cap, 0)
        E = int(exc.sum())
        if E == 0:
            return ch
        new_use = use[None, None, :] - C[rows, ch][:, None, :] + C          # (J, O, T)
        new_E = np.maximum(new_use - cap, 0).sum(axis=2)
        gain = E - new_E
        dd = D - D[rows, ch][:, None]
        good = ok & (gain > 0)
        if not good.any():
            return None
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(good, np.where(dd < 0, dd * gain, dd / np.maximum(gain, 1)), np.inf)
        a, o = np.unravel_index(int(np.argmin(ratio)), ratio.shape)
        ch[a] = o
    return None


def one_opt(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None, fairness: float = 0.0,
            ref: np.ndarray | None = None, max_sweeps: int = 50) -> np.ndarray:
    """Best single-job option changes that fit the free capacity, until none improves the score."""
    ch = np.array(choice)
    J = menu.J
    rows = np.arange(J)
    C, D, cap = menu.C, menu.D, menu.cap
    ok = np.isfinite(D) if allowed is None else (allowed & np.isfinite(D))
    if ref is None:
        ref = np.ones(J)
    d = D[rows, ch].copy()
    use = C[rows, ch].sum(axis=0)
    for _ in range(max_sweeps):
        improved = False
        for a in range(J):
            room = cap - use + C[a, ch[a]]
            fit = ok[a] & np.all(C[a] <= room, axis=1)
            if not fit.any():
                continue
            if fairness <= 0:
                cand = np.where(fit, D[a], np.inf)
                o = int(np.argmin(cand))
                if cand[o] < d[a] * (1 - 1e-12):
                    use += C[a, o] - C[a, ch[a]]
                    ch[a] = o
                    d[a] = D[a, o]
                    improved = True
                continue
            x = d / ref
            s1, s2, tot = x.sum() - x[a], (x * x).sum() - x[a] ** 2, d.sum() - d[a]
            xo = np.where(fit, D[a] / ref[a], np.nan)
            S1, S2 = s1 + xo, s2 + xo * xo
            with np.errstate(invalid="ignore", divide="ignore"):
                jn = np.where(S2 > 0, S1 * S1 / (J * S2), 1.0)
                sc = (tot + np.where(fit, D[a], np.nan)) / J * (1 + fairness * (1 - jn))
            sc = np.where(fit, sc, np.inf)
            o = int(np.argmin(sc))
            if sc[o] < score(d, ref, fairness) * (1 - 1e-12):
                use += C[a, o] - C[a, ch[a]]
                ch[a] = o
                d[a] = D[a, o]
                improved = True
        if not improved:
            break
    return ch


def two_opt(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None, top: int = 6,
            max_sweeps: int = 5) -> np.ndarray:
    """Pair moves for plain mean JCT: job a takes one of its ``top`` cheapest options that does not fit,
    paid for by another job b moving to any option; keeps the best improving pair, repeats."""
    ch = np.array(choice)
    J = menu.J
    rows = np.arange(J)
    C, D, cap = menu.C, menu.D, menu.cap
    ok = np.isfinite(D) if allowed is None else (allowed & np.isfinite(D))
    for _ in range(max_sweeps):
        improved = False
        for a in range(J):
            use = C[rows, ch].sum(axis=0)
            free = cap - use
            cand = np.where(ok[a] & (D[a] < D[a, ch[a]]), D[a], np.inf)
            k = min(top, int(np.isfinite(cand).sum()))
            if k == 0:
                continue
            best_gain, best = -1e-9 * D[a, ch[a]], None
            cur_b = C[rows, ch]                                    # (J, T)
            relief = cur_b[:, None, :] - C                         # GPUs b frees moving to o_b
            dd_b = D - D[rows, ch][:, None]
            for o in np.argsort(cand)[:k]:
                need = C[a, o] - C[a, ch[a]] - free                # what b must free (may be <= 0)
                if np.all(need <= 0):
                    continue                                       # one_opt's job
                fits = ok & np.all(relief >= need, axis=2)
                fits[a] = False
                if not fits.any():
                    continue
                tot = np.where(fits, dd_b, np.inf) + (D[a, o] - D[a, ch[a]])
                b, ob = np.unravel_index(int(np.argmin(tot)), tot.shape)
                if -tot[b, ob] > best_gain:
                    best_gain, best = -tot[b, ob], (int(o), int(b), int(ob))
            if best is not None:
                o, b, ob = best
                ch[a], ch[b] = o, ob
                improved = True
        if not improved:
            break
    return ch


def polish(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None, fairness: float = 0.0,
           ref: np.ndarray | None = None, pairs: bool = True, rounds: int | None = None,
           top: int | None = None, sweeps: int | None = None) -> np.ndarray:
    """1-exchange, then (plain mean JCT) up to ``rounds`` rounds of pair moves (``top`` candidate
    options per job, ``sweeps`` sweeps each) + 1-exchange; never worsens the score. The caps default
    to 3 rounds / top 6 / 5 sweeps, and 1 / 3 / 1 beyond 32 jobs."""
    ch = one_opt(menu, choice, allowed, fairness, ref)
    if pairs and fairness <= 0:
        big = menu.J > 32  # pair moves cost O(J^2 * options): fewer candidates and one round when large
        rounds = (1 if big else 3) if rounds is None else rounds
        top = (3 if big else 6) if top is None else top
        sweeps = (1 if big else 5) if sweeps is None else sweeps
        for _ in range(rounds):
            before = menu.value(ch)
            ch = two_opt(menu, ch, allowed, top=top, max_sweeps=sweeps)
            ch = one_opt(menu, ch, allowed)
            if menu.value(ch) >= before * (1 - 1e-12):
                break
    return ch


def beam(menu: Menu, lam: np.ndarray, width: int = 64, allowed: np.ndarray | None = None
         ) -> np.ndarray | None:
    """Beam search over jobs (largest first) on the used-capacity state, ranking partial choices by
    their reduced cost Σ (d + λ·c) (the Lagrangian estimate of what the rest will cost); identical
    states keep the cheapest. Exact when ``width`` ≥ the number of distinct states (it is then the DP)."""
    J, T = menu.J, len(menu.types)
    C, D, cap = menu.C, menu.D, menu.cap
    ok = np.isfinite(D) if allowed is None else (allowed & np.isfinite(D))
    order = np.argsort(-np.where(ok, D, np.inf).min(axis=1), kind="stable")
    mult = np.cumprod(np.concatenate([[1], cap[:-1] + 1])).astype(np.int64)
    U = np.zeros((1, T), dtype=np.int64)
    V = np.zeros(1)
    parents, opts = [], []
    for a in order:
        oa = np.flatnonzero(ok[a])
        if oa.size == 0:
            return None
        U2 = (U[:, None, :] + C[a, oa][None, :, :]).reshape(-1, T)
        V2 = (V[:, None] + D[a, oa][None, :]).reshape(-1)
        par = np.repeat(np.arange(len(U)), len(oa))
        opt = np.tile(oa, len(U))
        fit = np.all(U2 <= cap, axis=1)
        if not fit.any():
            return None
        U2, V2, par, opt = U2[fit], V2[fit], par[fit], opt[fit]
        key = U2 @ mult
        o = np.lexsort((V2, key))
        first = np.ones(len(o), dtype=bool)
        first[1:] = key[o][1:] != key[o][:-1]
        keep = o[first]
        pri = V2[keep] + U2[keep] @ lam
        if len(keep) > width:
            keep = keep[np.argsort(pri, kind="stable")[:width]]
        U, V = U2[keep], V2[keep]
        parents.append(par[keep])
        opts.append(opt[keep])
    i = int(np.argmin(V))
    choice = np.zeros(J, dtype=np.int64)
    for layer in range(J - 1, -1, -1):
        choice[order[layer]] = opts[layer][i]
        i = int(parents[layer][i])
    return choice
