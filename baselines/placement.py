"""Placement policies: which free GPUs a job gets.

A placement sees ``free``: node name -> list of free GPU ids of that node, nodes in cluster order and
GPUs in index order (the order PAL's artifact builds from its GPU table), already filtered to the GPU
types the job can use, and returns ``n`` GPU ids or ``None``.

- ``packed`` (PAL artifact's Default-Packed): the first node whose free GPUs are exactly ``n``; else
  the node with the fewest free GPUs that are still enough (first such); else spread over the nodes
  with the most free GPUs (``Counter.most_common`` order, ties in node order).
- ``random``: ``n`` free GPUs drawn uniformly (seeded ``random.Random``).
- ``pm-first`` (PAL artifact): per class, GPUs binned by k-means into slowdown factors (:class:`Bins`);
  free GPUs sorted by (slowdown, |#free GPUs of the same node and slowdown − n|, GPU order), first n.
- ``pal``: for 1 < n ≤ GPUs per node, walk the (slowdown × locality) options of the job's class
  sorted by product (within one node ×1, across nodes ×λ), take the first that can be satisfied:
  within a node = a node with n free GPUs of slowdown ≤ s (the node with most such GPUs, then
  node order; the n first of them at the least maximum slowdown), across = PM-First among the free
  GPUs of slowdown ≤ s. Other sizes use PM-First.

Sticky/non-sticky is a property of the round mechanism (:mod:`baselines.rounds`); the placement
names carry it (``packed-sticky``...). PM-First and PAL are non-sticky, as in the artifact.

Each rule has two implementations: ``place`` scans a map node -> free GPUs (the definition, short and
plain; used where a job may use only some GPU types or parameter servers hold CPUs), and
``place_indexed`` asks a maintained :class:`baselines.freeindex.FreeIndex` the same question in time
independent of the number of free GPUs. Both return the same GPUs in the same order
(``tests/test_freeindex.py``).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Mapping, Sequence

from jctlab.model import Instance

from .freeindex import FreeIndex, RankedFree

Free = Mapping[str, Sequence[str]]


def gpu_order(inst: Instance) -> dict[str, int]:
    return {g.id: i for i, g in enumerate(inst.cluster.gpus)}


class Placement:
    name = "placement"
    class_sort = False     # PAL/PM-First: stable-sort the queue prefix that fits by class A..D
    deterministic = True   # the choice depends on the free GPUs only (not on a random stream)

    def __init__(self, inst: Instance, seed: int = 0):
        self.inst = inst
        self.gidx = gpu_order(inst)
        self.node_of = {g.id: g.node for g in inst.cluster.gpus}

    def place(self, j: int, n: int, free: Free) -> list[str] | None:
        raise NotImplementedError

    def index(self) -> FreeIndex | RankedFree:
        """A fresh index (every GPU free) with what :meth:`place_indexed` queries."""
        return FreeIndex(self.inst.cluster)

    def place_indexed(self, j: int, n: int, idx) -> Sequence[str] | None:
        """:meth:`place` on every free GPU of ``idx`` (the same GPUs in the same order; a list or a tuple)."""
        raise NotImplementedError


class Packed(Placement):
    name = "packed"

    def place(self, j, n, free):
        for node, gl in free.items():
            if len(gl) == n:
                return list(gl)
        best, best_len = None, None
        for node, gl in free.items():
            if len(gl) >= n and (best_len is None or len(gl) < best_len):
                best, best_len = node, len(gl)
        if best is not None:
            return list(free[best][:n])
        if sum(len(gl) for gl in free.values()) < n:
            return None
        cnt = Counter({node: len(gl) for node, gl in free.items() if gl})
        out: list[str] = []
        while len(out) < n:
            node, c = cnt.most_common(1)[0]
            k = min(c, n - len(out))
            out.extend(free[node][:k])
            cnt[node] -= k
        return out

    def place_indexed(self, j, n, idx):
        v = idx.first_node_with(n)
        if v is not None:
            return idx.gpus_of(v, idx.free[v], n)
        if idx.total < n:
            return None
        out: list[str] = []
        for v in idx.nodes_by_count_desc():
            out.extend(idx.gpus_of(v, idx.free[v], n - len(out)))
            if len(out) == n:
                return out
        return None   # unreachable: total >= n


class Random(Placement):
    name = "random"
    deterministic = False

    def __init__(self, inst, seed=0):
        super().__init__(inst, seed)
        self.rng = random.Random(seed)

    def place(self, j, n, free):
        pool = [g for gl in free.values() for g in gl]
        if len(pool) < n:
            return None
        return [pool[k] for k in sample_positions(self.rng, len(pool), n)]

    def index(self):
        return RankedFree(self.inst.cluster)

    def place_indexed(self, j, n, idx):
        if idx.total < n:
            return None
        return idx.draw(sample_positions(self.rng, idx.total, n))


def sample_positions(rng: random.Random, n: int, k: int) -> list[int]:
    """``rng.sample(range(n), k)``: the same draws from the generator and the same result (CPython's
    algorithm, written out). The call itself (its type checks and per-draw method calls) costs more
    than the draws when a non-sticky round re-places every running job; written out, the draws are
    also pinned to this algorithm whatever a later Python's ``sample`` does."""
    if not 0 <= k <= n:
        raise ValueError(f"cannot draw {k} of {n} positions")
    bits = rng.getrandbits
    setsize = 21        # CPython's choice between a pool list and a set of drawn positions
    if k > 5:
        setsize += 4 ** math.ceil(math.log(k * 3, 4))
    out = [0] * k
    if n <= setsize:
        pool = list(range(n))
        for i in range(k):
            m = n - i
            b = m.bit_length()
            r = bits(b)
            while r >= m:
                r = bits(b)
            out[i] = pool[r]
            pool[r] = pool[m - 1]
        return out
    b = n.bit_length()
    drawn: list[int] = []
    if k <= 16:                    # a few are found faster in the list itself than in a set
        while k:
            r = bits(b)
            if r < n and r not in drawn:
                drawn.append(r)
                k -= 1
        return drawn
    seen: set[int] = set()
    while len(drawn) < k:
        r = bits(b)
        if r < n and r not in seen:
            drawn.append(r)
            seen.add(r)
    return drawn


class Bins:
    """PAL's per-class slowdown factors of every GPU (k-means bins, centre / median centre).

    ``clusters`` bins for the values up to mean + ``outlier_sigma``·σ, plus one bin per outlier, as the
    artifact ran (its k chooser returns at k=2). Uses :func:`jctlab.loaders.pal.bins`.
    """

    def __init__(self, inst: Instance, clusters: int = 2, outlier_sigma: float = 3.0):
        from jctlab.loaders.pal import bins as kmeans_bins   # here: the loaders import pandas

        gpus = inst.cluster.gpus
        classes = sorted({c for j in inst.jobs if (c := j.job_class) is not None})
        self.sf: dict[str | None, dict[str, float]] = {}
        for c in classes:
            vals = [g.factor(c) for g in gpus]
            if len(set(vals)) <= 1:
                self.sf[c] = {g.id: 1.0 for g in gpus}
                continue
            factors, assign = kmeans_bins(vals, clusters, outlier_sigma)
            self.sf[c] = {g.id: factors[a] for g, a in zip(gpus, assign)}
        self.flat = {g.id: 1.0 for g in gpus}

    def of(self, job_class: str | None) -> dict[str, float]:
        return self.sf.get(job_class, self.flat)


class PMFirst(Placement):
    name = "pm-first"
    class_sort = True

    def __init__(self, inst, seed=0, clusters: int = 2, locality: str = "sf-node"):
        super().__init__(inst, seed)
        self.bins = Bins(inst, clusters)
        if locality not in ("sf-node", "node"):
            raise ValueError("locality must be 'sf-node' or 'node'")
        self.locality = locality
        self._schemes: tuple[FreeIndex, dict] | None = None

    def index(self):
        gpus = self.inst.cluster.gpus
        vecs = [[sf[g.id] for g in gpus] for sf in list(self.bins.sf.values()) + [self.bins.flat]]
        return FreeIndex(self.inst.cluster, vecs)

    def scheme(self, idx: FreeIndex, job_class: str | None):
        """The index's scheme for this class's slowdown vector (cached per index)."""
        cache = self._schemes
        if cache is None or cache[0] is not idx:
            cache = self._schemes = (idx, {})
        s = cache[1].get(job_class)
        if s is None:
            sf = self.bins.of(job_class)
            s = cache[1][job_class] = idx.scheme([sf[g.id] for g in self.inst.cluster.gpus])
        return s

    def pmfirst(self, cand: list[str], n: int, sf: Mapping[str, float]) -> list[str] | None:
        """PM-First over candidate GPUs (in GPU order): by slowdown, then best-match locality."""
        if len(cand) < n:
            return None
        node_of = self.node_of
        if self.locality == "sf-node":
            cnt = Counter((sf[g], node_of[g]) for g in cand)
            loc = {g: abs(cnt[(sf[g], node_of[g])] - n) for g in cand}
        else:
            cnt = Counter(node_of[g] for g in cand)
            loc = {g: abs(cnt[node_of[g]] - n) for g in cand}
        gidx = self.gidx
        return sorted(cand, key=lambda g: (sf[g], loc[g], gidx[g]))[:n]

    def place(self, j, n, free):
        sf = self.bins.of(self.inst.jobs[j].job_class)
        return self.pmfirst([g for gl in free.values() for g in gl], n, sf)

    def place_indexed(self, j, n, idx):
        s = self.scheme(idx, self.inst.jobs[j].job_class)
        return idx.pmfirst(s, n, s.K - 1, self.locality == "node")


class PAL(PMFirst):
    name = "pal"

    def __init__(self, inst, seed=0, lam: float | None = None, clusters: int = 2, locality: str = "sf-node"):
        super().__init__(inst, seed, clusters, locality)
        lp = inst.cluster.locality_penalty
        self.lam = float(lam) if lam is not None else (lp if lp > 1.0 else 1.7)
        self.gpn = max(len(nd.gpus) for nd in inst.cluster.nodes)
        self.walk: dict[str | None, list[tuple[float, int, float]]] = {}

    def options(self, job_class: str | None) -> list[tuple[float, int, float]]:
        """(slowdown, within-node flag, slowdown × locality) sorted by product (stable)."""
        w = self.walk.get(job_class)
        if w is None:
            sf = self.bins.of(job_class)
            seen: list[float] = []
            for g in self.inst.cluster.gpus:
                v = sf[g.id]
                if v not in seen:
                    seen.append(v)
            w = []
            for v in seen:
                w.append((v, 1, v))
                w.append((v, 0, self.lam * v))
            w.sort(key=lambda t: t[2])
            self.walk[job_class] = w
        return w

    def place(self, j, n, free):
        c = self.inst.jobs[j].job_class
        sf = self.bins.of(c)
        cand = [g for gl in free.values() for g in gl]
        if len(cand) < n:
            return None
        if not (1 < n <= self.gpn):
            return self.pmfirst(cand, n, sf)
        for s, within, _ in self.options(c):
            if within:
                best = None
                for node, gl in free.items():
                    q = [g for g in gl if sf[g] <= s]
                    if len(q) < n:
                        continue
                    m = sorted(sf[g] for g in q)[n - 1]
                    key = (m, -len(q))
                    if best is None or key < best[0]:
                        best = (key, q, m)
                if best is not None:
                    _, q, m = best
                    return [g for g in q if sf[g] <= m][:n]
            else:
                q = [g for g in cand if sf[g] <= s]
                if len(q) >= n:
                    return self.pmfirst(q, n, sf)
        return None

    def place_indexed(self, j, n, idx):
        c = self.inst.jobs[j].job_class
        sc = self.scheme(idx, c)
        if idx.total < n:
            return None
        node_loc = self.locality == "node"
        if not (1 < n <= self.gpn):
            return idx.pmfirst(sc, n, sc.K - 1, node_loc)
        for s, within, _ in self.options(c):
            top = sc.pos[s]
            if within:
                got = idx.within(sc, n, top)
                if got is not None:
                    return got
            elif sc.pre_total[top] >= n:
                return idx.pmfirst(sc, n, top, node_loc)
        return None


#: name -> (placement class, sticky)
PLACEMENTS = {
    "packed-sticky": (Packed, True),
    "packed-nonsticky": (Packed, False),
    "random-sticky": (Random, True),
    "random-nonsticky": (Random, False),
    "pm-first": (PMFirst, False),
    "pal": (PAL, False),
}


def make_placement(name: str, inst: Instance, seed: int = 0, lam: float | None = None,
                   locality: str = "sf-node") -> tuple[Placement, bool]:
    cls, sticky = PLACEMENTS[name]
    if cls is PAL:
        return PAL(inst, seed, lam=lam, locality=locality), sticky
    if cls is PMFirst:
        return PMFirst(inst, seed, locality=locality), sticky
    return cls(inst, seed), sticky
