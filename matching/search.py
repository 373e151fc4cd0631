"""Repair and local search over option choices (capacity per GPU type), with a fairness-aware score.

score(d) = mean(d) · (1 + fairness · (1 − Jain(d / ref))), ref = a job's run time alone on its best
homogeneous allocation, spanning types where none fits (jctlab.metrics.ReferenceDurations, the slowdown
reference of replay).
fairness = 0 is plain mean JCT.
"""

from __future__ import annotations

import numpy as np

from jctlab.metrics import ReferenceDurations, strip_variability

from .categories import Menu
from .jit import njit


def score(d: np.ndarray, ref: np.ndarray | None, fairness: float) -> float:
    """The score of one choice's durations ``d`` (see the module docstring)."""
    return float(scores(np.asarray(d, dtype=float)[None, :], ref, fairness)[0])


def scores(d: np.ndarray, ref: np.ndarray | None, fairness: float) -> np.ndarray:
    """:func:`score` of each row of ``d`` (choices × jobs)."""
    m = d.mean(axis=1)
    if fairness <= 0 or ref is None:
        return m
    x = d / ref
    s2 = (x * x).sum(axis=1)
    jn = np.where(s2 > 0, x.sum(axis=1) ** 2 / (x.shape[1] * np.where(s2 > 0, s2, 1.0)), 1.0)  # Jain
    return m * (1.0 + fairness * (1.0 - jn))


def reference(menu: Menu) -> np.ndarray:
    """Per job of the menu, its reference run time alone (``ReferenceDurations``: the slowdown references)."""
    ref_of = ReferenceDurations(strip_variability(menu.inst.cluster))
    r = np.array([ref_of(menu.inst.jobs[j]) for j in menu.jobs])
    return np.where(np.isfinite(r) & (r > 0), r, 1.0)


def _ok(menu: Menu, allowed: np.ndarray | None) -> np.ndarray:
    ok = np.isfinite(menu.D)
    return ok if allowed is None else (allowed & ok)


def repair(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None) -> np.ndarray | None:
    """Move jobs to options that use fewer over-demanded GPUs, cheapest extra time per GPU freed,
    until the choice fits; None when impossible within ``allowed``."""
    ch = np.array(choice, dtype=np.int64)
    return ch if repair_kernel(menu.C, menu.D, menu.cap, _ok(menu, allowed), ch) else None


def one_opt(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None, fairness: float = 0.0,
            ref: np.ndarray | None = None, max_sweeps: int = 50) -> np.ndarray:
    """Best single-job option changes that fit the free capacity, until none improves the score."""
    ch = np.array(choice, dtype=np.int64)
    r = np.ones(menu.J) if ref is None else np.asarray(ref, dtype=float)
    one_opt_kernel(menu.C, menu.D, menu.cap, _ok(menu, allowed), ch, float(fairness), r, max_sweeps)
    return ch


def two_opt(menu: Menu, choice: np.ndarray, allowed: np.ndarray | None = None, top: int = 6,
            max_sweeps: int = 5) -> np.ndarray:
    """Pair moves for plain mean JCT: job a takes one of its ``top`` cheapest options that does not fit,
    paid for by another job b moving to any option; keeps the best improving pair, repeats."""
    ch = np.array(choice, dtype=np.int64)
    _two_opt(menu.C, menu.D, menu.cap, _ok(menu, allowed), ch, top, max_sweeps)
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
    ok = _ok(menu, allowed)
    order = np.argsort(-np.where(ok, menu.D, np.inf).min(axis=1), kind="stable")
    choice = np.zeros(menu.J, dtype=np.int64)
    found = _beam(menu.C, menu.D, menu.cap, ok, order, np.asarray(lam, dtype=float), int(width), choice)
    return choice if found else None


# ----------------------------------------------------------------------------- compiled loops
# C (J, O, T) GPUs per type, D (J, O) durations, cap (T,) free GPUs, ok (J, O) allowed options;
# choices ``ch`` (J,) are changed in place.


@njit
def _usage(C, ch):
    J, _, T = C.shape
    use = np.zeros(T, dtype=np.int64)
    for a in range(J):
        for t in range(T):
            use[t] += C[a, ch[a], t]
    return use


@njit
def repair_kernel(C, D, cap, ok, ch):
    """:func:`repair` in place; True when the choice fits."""
    J, O, T = C.shape
    use = _usage(C, ch)
    for _ in range(10 * cap.sum() + J + 10):
        E = 0
        for t in range(T):
            E += max(use[t] - cap[t], 0)
        if E == 0:
            return True
        best, ba, bo = np.inf, -1, -1
        for a in range(J):
            cur = ch[a]
            for o in range(O):
                if not ok[a, o]:
                    continue
                newE = 0
                for t in range(T):
                    newE += max(use[t] - C[a, cur, t] + C[a, o, t] - cap[t], 0)
                gain = E - newE
                if gain <= 0:
                    continue
                dd = D[a, o] - D[a, cur]
                r = dd * gain if dd < 0 else dd / max(gain, 1)
                if r < best:
                    best, ba, bo = r, a, o
        if ba < 0:
            return False
        for t in range(T):
            use[t] += C[ba, bo, t] - C[ba, ch[ba], t]
        ch[ba] = bo
    return False


@njit
def _score(d, ref, fairness):
    """:func:`score` of durations ``d``."""
    J = d.shape[0]
    m = d.sum() / J
    if fairness <= 0:
        return m
    s1, s2 = 0.0, 0.0
    for a in range(J):
        x = d[a] / ref[a]
        s1 += x
        s2 += x * x
    jn = s1 * s1 / (J * s2) if s2 > 0 else 1.0
    return m * (1.0 + fairness * (1.0 - jn))


@njit
def _fits(C, cap, use, a, cur, o):
    for t in range(C.shape[2]):
        if C[a, o, t] > cap[t] - use[t] + C[a, cur, t]:
            return False
    return True


@njit
def one_opt_kernel(C, D, cap, ok, ch, fairness, ref, max_sweeps):
    """:func:`one_opt` in place: each job in turn takes its best-scoring option that fits."""
    J, O, T = C.shape
    use = _usage(C, ch)
    d = np.empty(J)
    for a in range(J):
        d[a] = D[a, ch[a]]
    for _ in range(max_sweeps):
        improved = False
        for a in range(J):
            cur = ch[a]
            bo = -1
            if fairness <= 0:
                best = np.inf
                for o in range(O):
                    if ok[a, o] and D[a, o] < best and _fits(C, cap, use, a, cur, o):
                        best, bo = D[a, o], o
                if bo < 0 or not best < d[a] * (1 - 1e-12):
                    continue
            else:
                s1, s2, tot = 0.0, 0.0, 0.0
                for b in range(J):
                    if b != a:
                        x = d[b] / ref[b]
                        s1 += x
                        s2 += x * x
                        tot += d[b]
                best = np.inf
                for o in range(O):
                    if not (ok[a, o] and _fits(C, cap, use, a, cur, o)):
                        continue
                    xo = D[a, o] / ref[a]
                    S1, S2 = s1 + xo, s2 + xo * xo
                    jn = S1 * S1 / (J * S2) if S2 > 0 else 1.0
                    sc = (tot + D[a, o]) / J * (1 + fairness * (1 - jn))
                    if sc < best:
                        best, bo = sc, o
                if bo < 0 or not best < _score(d, ref, fairness) * (1 - 1e-12):
                    continue
            for t in range(T):
                use[t] += C[a, bo, t] - C[a, cur, t]
            ch[a] = bo
            d[a] = D[a, bo]
            improved = True
        if not improved:
            break


@njit
def _two_opt(C, D, cap, ok, ch, top, max_sweeps):
    """:func:`two_opt` in place."""
    J, O, T = C.shape
    need = np.empty(T, dtype=np.int64)
    cand = np.empty(O)
    for _ in range(max_sweeps):
        improved = False
        for a in range(J):
            use = _usage(C, ch)
            cur = ch[a]
            k = 0
            for o in range(O):
                if ok[a, o] and D[a, o] < D[a, cur]:
                    cand[o] = D[a, o]
                    k += 1
                else:
                    cand[o] = np.inf
            k = min(top, k)
            if k == 0:
                continue
            best_gain, ba_o, bb, bb_o = -1e-9 * D[a, cur], -1, -1, -1
            for o in np.argsort(cand, kind="mergesort")[:k]:
                inside = True
                for t in range(T):
                    need[t] = C[a, o, t] - C[a, cur, t] - (cap[t] - use[t])
                    if need[t] > 0:
                        inside = False
                if inside:
                    continue                                    # one_opt's job
                tot_best, b_best, ob_best = np.inf, -1, -1
                for b in range(J):
                    if b == a:
                        continue
                    cb = ch[b]
                    for ob in range(O):
                        if not ok[b, ob]:
                            continue
                        frees = True
                        for t in range(T):
                            if C[b, cb, t] - C[b, ob, t] < need[t]:
                                frees = False
                                break
                        if frees:
                            tot = D[b, ob] - D[b, cb] + (D[a, o] - D[a, cur])
                            if tot < tot_best:
                                tot_best, b_best, ob_best = tot, b, ob
                if b_best >= 0 and -tot_best > best_gain:
                    best_gain, ba_o, bb, bb_o = -tot_best, o, b_best, ob_best
            if ba_o >= 0:
                ch[a], ch[bb] = ba_o, bb_o
                improved = True
        if not improved:
            break


@njit
def _beam(C, D, cap, ok, order, lam, width, choice):
    """:func:`beam`; fills ``choice`` and returns True, or False when no choice fits.

    A layer keeps the ``width`` distinct states of least Σ(d + λ·c) (for one state that is the least
    Σ d, as λ·c is the state's own), ties to the earlier generated, in a sorted insertion list."""
    J, O, T = C.shape
    mult = np.ones(T, dtype=np.int64)
    for t in range(1, T):
        mult[t] = mult[t - 1] * (cap[t - 1] + 1)
    U = np.zeros((1, T), dtype=np.int64)
    V = np.zeros(1)
    parents = []
    opts = []
    u = np.empty(T, dtype=np.int64)
    for a in order:
        cap_n = min(width, U.shape[0] * O)
        kU = np.empty((cap_n, T), dtype=np.int64)
        kV = np.empty(cap_n)
        kP = np.empty(cap_n)                    # priority Σ(d + λ·c), ascending
        kK = np.empty(cap_n, dtype=np.int64)    # state key
        kpar = np.empty(cap_n, dtype=np.int64)
        kopt = np.empty(cap_n, dtype=np.int64)
        nk = 0
        for p in range(U.shape[0]):
            for o in range(O):
                if not ok[a, o]:
                    continue
                fit = True
                key = 0
                pri = V[p] + D[a, o]
                for t in range(T):
                    x = U[p, t] + C[a, o, t]
                    if x > cap[t]:
                        fit = False
                        break
                    u[t] = x
                    key += x * mult[t]
                    pri += x * lam[t]
                if not fit or (nk == cap_n and pri >= kP[nk - 1]):
                    continue
                dup = -1
                for i in range(nk):
                    if kK[i] == key:
                        dup = i
                        break
                if dup >= 0:
                    if pri >= kP[dup]:
                        continue
                    pos = dup           # the same state, cheaper: take its slot, then move it up
                else:
                    pos = nk if nk < cap_n else nk - 1
                    if nk < cap_n:
                        nk += 1
                while pos > 0 and kP[pos - 1] > pri:
                    kU[pos], kV[pos], kP[pos] = kU[pos - 1], kV[pos - 1], kP[pos - 1]
                    kK[pos], kpar[pos], kopt[pos] = kK[pos - 1], kpar[pos - 1], kopt[pos - 1]
                    pos -= 1
                kU[pos], kV[pos], kP[pos], kK[pos], kpar[pos], kopt[pos] = u, V[p] + D[a, o], pri, key, p, o
        if nk == 0:
            return False
        U, V = kU[:nk].copy(), kV[:nk].copy()
        parents.append(kpar[:nk].copy())
        opts.append(kopt[:nk].copy())
    i = int(np.argmin(V))
    for layer in range(J - 1, -1, -1):
        choice[order[layer]] = opts[layer][i]
        i = parents[layer][i]
    return True
