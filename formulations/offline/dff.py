"""Dual feasible functions: capacity rows that see that large rigid jobs cannot run side by side.

A *dual feasible function* (DFF; Fekete and Schepers 2001, Clautiaux, Alves and Valério de Carvalho 2010)
maps the sizes of items of a bin of capacity M to weights φ(n) ≥ 0 such that any items that fit together
(Σ n_i ≤ M) have Σ φ(n_i) ≤ 1. Applied to a capacity row Σ_j n_j·(run time of j in a bucket) ≤ M·|bucket|,
it gives a row Σ_j φ(n_j)·(run time of j in the bucket) ≤ |bucket| that holds for every schedule too: at each
instant the jobs running hold at most M GPUs together, so their φ sum to at most 1; integrate over the bucket.
The area row lets two 24-GPU jobs on 32 GPUs share them at 2/3 of their rates each; u⁽¹⁾ below gives each
weight 1, so together they run at most one bucket's length: they queue, as they must.

Integer sizes and capacities only, exact arithmetic (no float test of "(k+1)x is an integer"):

* u⁽ᵏ⁾ (Fekete and Schepers), k ≥ 1: φ(n) = n/M where (k+1)·n is a multiple of M, else ⌊(k+1)·n/M⌋/k.
* U⁽ᶜ⁾ (threshold c, 0 ≤ c ≤ M/2): φ(n) = 1 where n > M − c, n/M where c ≤ n ≤ M − c, 0 where n < c. Items
  above M − c fit only beside items below c, which weigh nothing; otherwise every item keeps its share.

Both are proven DFFs in the references above; ``tests/test_dff.py`` checks the law on every multiset that fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction


@dataclass(frozen=True)
class DffParams:
    """Which functions :func:`dff_rows` tries."""

    max_k: int = 4          # u⁽ᵏ⁾ for k = 1 … max_k
    max_rows: int = 6       # at most this many rows per capacity (the ones that raise the most weight)


def u_k(n: int, cap: int, k: int) -> Fraction:
    """u⁽ᵏ⁾(n / cap) of the module docstring."""
    if n <= 0:
        return Fraction(0)
    if n >= cap:
        return Fraction(1)
    if ((k + 1) * n) % cap == 0:
        return Fraction(n, cap)
    return Fraction((k + 1) * n // cap, k)


def u_threshold(n: int, cap: int, c: int) -> Fraction:
    """U⁽ᶜ⁾(n / cap) of the module docstring (0 ≤ c ≤ cap/2)."""
    if n > cap - c:
        return Fraction(1)
    if n < c:
        return Fraction(0)
    return Fraction(n, cap)


def dff_rows(sizes: set[int], cap: int, params: DffParams = DffParams()) -> list[dict[int, float]]:
    """Weights {size: φ(size)} of DFFs over the ``sizes`` present on a capacity ``cap``, each row kept only if
    some size weighs more than its share n/cap (else the plain capacity row implies it) and no kept row weighs
    at least as much on every size; the ``max_rows`` with the largest total gain over the shares."""
    sizes = {n for n in sizes if 0 < n}
    if cap <= 0 or not sizes:
        return []
    cands: list[dict[int, Fraction]] = []
    for k in range(1, params.max_k + 1):
        cands.append({n: u_k(n, cap, k) for n in sizes})
    # thresholds just above each size that is at most half the capacity: the sizes above cap − c weigh 1
    for c in sorted({n for n in sizes if 2 * n <= cap} | {cap - n + 1 for n in sizes if 2 * (cap - n + 1) <= cap}):
        cands.append({n: u_threshold(n, cap, c) for n in sizes})
    gain = [sum(max(Fraction(0), f[n] - Fraction(min(n, cap), cap)) for n in sizes) for f in cands]
    order = sorted((i for i in range(len(cands)) if gain[i] > 0), key=lambda i: -gain[i])
    kept: list[dict[int, Fraction]] = []
    for i in order:
        f = cands[i]
        if any(all(g[n] >= f[n] for n in sizes) for g in kept):
            continue
        kept = [g for g in kept if not all(f[n] >= g[n] for n in sizes)] + [f]
        if len(kept) >= params.max_rows:
            break
    return [{n: float(v) for n, v in f.items()} for f in kept]
