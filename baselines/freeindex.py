"""Free GPUs indexed by (count, node) and by (slowdown bin, node), maintained on every take and give.

The placements of :mod:`baselines.placement` are defined as scans over a map node -> free GPU ids
(their ``place``). A cluster of 4,096 GPUs rescanned and resorted for each of millions of placements
is what made PAL and PM-First unusable at the traces' scale; this index answers the same questions
in time proportional to the bins, the per-node GPU counts and the GPUs returned, not to the free GPUs.

Representation. Nodes are numbered in cluster order and GPUs by their position on their node, so that
the cluster's GPU order (node order, then position) is the order of (node number, bit). A node's free
GPUs are one int bitmask; for every count ``c``, ``by_count[c]`` is the bitmask of the nodes with
exactly ``c`` free GPUs, so "the first node with at least n free GPUs" is a lowest set bit among at
most (GPUs per node) masks. A :class:`Scheme` does the same per slowdown value (PM-First's cells
(value, node)) and per prefix of values (PAL's "free GPUs of slowdown <= s on a node"). Every query
visits nodes by ascending lowest bit, which is node order, so each tie is broken exactly as the scans
break it (first in node order, GPUs in GPU order); ``tests/test_freeindex.py`` checks each query
against the scan it replaces.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Iterable, Sequence

from jctlab.model import Cluster


def _low_bits(mask: int, k: int) -> list[int]:
    """The positions of the ``k`` lowest set bits of ``mask`` (fewer if it has fewer), ascending."""
    out = []
    while mask and len(out) < k:
        low = mask & -mask
        out.append(low.bit_length() - 1)
        mask ^= low
    return out


#: the set bits of every mask of up to 12 bits (nodes of up to 12 GPUs), ascending
_BITS = [tuple(p for p in range(12) if m >> p & 1) for m in range(1 << 12)]


class Scheme:
    """One slowdown vector over the cluster's GPUs, binned by distinct value (ascending).

    ``cell_nodes[b][c]``: nodes with exactly c free GPUs of value b; ``pre_nodes[u][c]``: nodes with
    exactly c free GPUs of value <= values[u]; ``pre_total[u]``: free GPUs of value <= values[u].
    """

    def __init__(self, index: "FreeIndex", sf: Sequence[float]):
        self.values = sorted(set(sf))
        self.pos = {v: i for i, v in enumerate(self.values)}
        K = len(self.values)
        self.K = K
        maxc = index.maxc
        V = len(index.size)
        self.bin_mask = [[0] * K for _ in range(V)]       # node -> value -> GPU bits
        for i, v in enumerate(sf):
            node = index.node_of[i]
            self.bin_mask[node][self.pos[v]] |= index.bit[i]
        self.pre_mask = []
        for v in range(V):
            acc, row = 0, []
            for b in range(K):
                acc |= self.bin_mask[v][b]
                row.append(acc)
            self.pre_mask.append(row)
        self.cell = [[0] * K for _ in range(V)]
        self.pre = [[0] * K for _ in range(V)]
        self.cell_nodes = [[0] * (maxc + 1) for _ in range(K)]
        self.pre_nodes = [[0] * (maxc + 1) for _ in range(K)]
        self.pre_total = [0] * K
        self.bin_total = [0] * K
        everyone = (1 << V) - 1          # every node starts at count 0, then gets its real counts
        for b in range(K):
            self.cell_nodes[b][0] = everyone
            self.pre_nodes[b][0] = everyone
        for v in range(V):
            self.update(v, index.free[v])

    def update(self, v: int, free: int) -> None:
        """Node v's free GPUs are now ``free`` (bitmask): move it between the count masks."""
        bit = 1 << v
        cell, pre = self.cell[v], self.pre[v]
        masks = self.bin_mask[v]
        acc = 0
        for b in range(self.K):
            c = (free & masks[b]).bit_count()
            acc += c
            _recount(self.cell_nodes[b], cell, self.bin_total, b, bit, c)
            _recount(self.pre_nodes[b], pre, self.pre_total, b, bit, acc)


def _recount(nodes_by_count: list[int], counts: list[int], totals: list[int], b: int, bit: int, c: int) -> None:
    """Bin b of the node ``bit`` now holds c free GPUs: move the node to count c's mask, keep the total."""
    old = counts[b]
    if c != old:
        nodes_by_count[old] ^= bit
        nodes_by_count[c] |= bit
        counts[b] = c
        totals[b] += c - old


class FlatScheme:
    """A slowdown vector with one value: its counts are the index's own (nothing to maintain)."""

    def __init__(self, index: "FreeIndex", value: float):
        self.index = index
        self.values = [value]
        self.pos = {value: 0}
        self.K = 1
        full = [[(1 << s) - 1] for s in index.size]
        self.bin_mask = self.pre_mask = full
        self.cell_nodes = self.pre_nodes = [index.by_count]

    @property
    def pre_total(self) -> list[int]:
        return [self.index.total]

    bin_total = pre_total


class FreeIndex:
    """The free GPUs of a cluster, with the count and slowdown-bin indexes the placements query.

    ``schemes``: slowdown vectors (one value per GPU, cluster order) to index; equal vectors share one
    :class:`Scheme`. Starts with every GPU free.
    """

    def __init__(self, cluster: Cluster, schemes: Iterable[Sequence[float]] = ()):
        self.ids: list[str] = []
        self.node_of: list[int] = []
        self.bit: list[int] = []
        self.base: list[int] = []
        self.size: list[int] = []
        for v, nd in enumerate(cluster.nodes):
            self.base.append(len(self.ids))
            self.size.append(len(nd.gpus))
            for k, g in enumerate(nd.gpus):
                self.ids.append(g.id)
                self.node_of.append(v)
                self.bit.append(1 << k)
        self.gi = {g: i for i, g in enumerate(self.ids)}
        self.loc = {g: (self.node_of[i], self.bit[i]) for i, g in enumerate(self.ids)}
        self.node_ids = [self.ids[b:b + s] for b, s in zip(self.base, self.size)]
        self.maxc = max(self.size, default=0)
        self.free = [(1 << s) - 1 for s in self.size]
        self.count = list(self.size)
        self.by_count = [0] * (self.maxc + 1)
        for v, s in enumerate(self.size):
            self.by_count[s] |= 1 << v
        self.total = len(self.ids)
        self._schemes: dict[tuple[float, ...], Scheme] = {}
        self.schemes: list[Scheme] = []
        for sf in schemes:
            self.scheme(sf)

    def scheme(self, sf: Sequence[float]) -> Scheme | FlatScheme:
        """The (shared) scheme of slowdown vector ``sf``, created on first use."""
        key = tuple(sf)
        s = self._schemes.get(key)
        if s is None:
            if len(set(key)) == 1:
                s = self._schemes[key] = FlatScheme(self, key[0])
            else:
                s = self._schemes[key] = Scheme(self, key)
                self.schemes.append(s)     # maintained on every change
        return s

    # ------------------------------------------------------------------ updates
    def _set(self, v: int, new: int) -> None:
        c = new.bit_count()
        old = self.count[v]
        if c != old:
            bit = 1 << v
            self.by_count[old] ^= bit
            self.by_count[c] |= bit
            self.count[v] = c
            self.total += c - old
        self.free[v] = new
        for s in self.schemes:
            s.update(v, new)

    def reset(self) -> None:
        """Every GPU free again: the nodes not wholly free are set so (the state is a function of the
        free GPUs alone, so it equals giving every used GPU back)."""
        free = self.free
        for v, s in enumerate(self.size):
            full = (1 << s) - 1
            if free[v] != full:
                self._set(v, full)

    def take(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` (ids, all free) as used."""
        self._change(gpus, False)

    def give(self, gpus: Iterable[str]) -> None:
        """Mark ``gpus`` (ids, all used) as free again."""
        self._change(gpus, True)

    def _change(self, gpus: Iterable[str], free: bool) -> None:
        loc = self.loc
        per: dict[int, int] = {}
        for g in gpus:
            v, b = loc[g]
            per[v] = per.get(v, 0) | b
        cur_free = self.free
        for v, m in per.items():
            cur = cur_free[v]
            if free:
                if cur & m:
                    raise ValueError("a GPU given back is already free")
                self._set(v, cur | m)
            else:
                if cur & m != m:
                    raise ValueError("a GPU taken is not free")
                self._set(v, cur & ~m)

    # ------------------------------------------------------------------ views
    def gpus_of(self, v: int, mask: int, k: int) -> list[str]:
        """The first ``k`` GPUs (GPU order) of node v among ``mask``."""
        ids = self.node_ids[v]
        pos = _BITS[mask][:k] if mask < 4096 else _low_bits(mask, k)
        return [ids[p] for p in pos]

    def as_map(self, ok=None) -> dict[str, list[str]]:
        """node name -> free GPU ids (the scans' view), nodes in order, empty nodes left out; ``ok``
        filters GPU ids."""
        out = {}
        for v, m in enumerate(self.free):
            if m:
                gl = self.gpus_of(v, m, self.size[v])
                if ok is not None:
                    gl = [g for g in gl if ok(g)]
                if gl:
                    out[gl[0].split(":", 1)[0]] = gl
        return out

    # ------------------------------------------------------------------ queries
    def first_node_with(self, n: int) -> int | None:
        """The node with the fewest free GPUs that are still >= n (first in node order), else None."""
        by = self.by_count
        for c in range(max(n, 1), self.maxc + 1):
            m = by[c]
            if m:
                return (m & -m).bit_length() - 1
        return None

    def nodes_by_count_desc(self):
        """Nodes with free GPUs, most free first, ties in node order."""
        by = self.by_count
        for c in range(self.maxc, 0, -1):
            m = by[c]
            while m:
                low = m & -m
                yield low.bit_length() - 1
                m ^= low

    def pmfirst(self, s: Scheme | FlatScheme, n: int, top: int, node_locality: bool) -> list[str] | None:
        """PM-First among the free GPUs of value <= values[top]: cells (value, node) by value, then
        |cell count − n| (``node_locality``: the node's count of such GPUs), then node order; each
        cell's GPUs in GPU order; the first n."""
        if s.pre_total[top] < n:
            return None
        out: list[str] = []
        need = n
        maxc = self.maxc
        for b in range(top + 1):
            if not s.bin_total[b]:
                continue
            if node_locality:
                nz = 0
                for m in s.cell_nodes[b][1:]:
                    nz |= m
                rows = [m & nz for m in s.pre_nodes[top]]
            else:
                rows = s.cell_nodes[b]
            d = 0
            while True:
                lo, hi = n - d, n + d
                if lo < 1 and hi > maxc:
                    break
                mask = rows[lo] if 1 <= lo <= maxc else 0
                if d and hi <= maxc:
                    mask |= rows[hi]
                while mask:
                    low = mask & -mask
                    v = low.bit_length() - 1
                    mask ^= low
                    got = self.gpus_of(v, self.free[v] & s.bin_mask[v][b], need)
                    out.extend(got)
                    need -= len(got)
                    if not need:
                        return out
                d += 1
        return None   # unreachable: pre_total[top] >= n

    def within(self, s: Scheme | FlatScheme, n: int, top: int) -> list[str] | None:
        """PAL's within-node option at slowdown <= values[top]: among nodes with >= n such free GPUs,
        the least n-th smallest value, then the most such GPUs, then node order; its first n GPUs of
        value <= that n-th smallest one."""
        maxc = self.maxc
        if n > maxc:
            return None
        for u in range(top + 1):
            row = s.pre_nodes[u]
            mu = 0
            for c in range(n, maxc + 1):
                mu |= row[c]
            if mu:
                break
        else:
            return None
        row = s.pre_nodes[top]
        for c in range(maxc, n - 1, -1):
            x = row[c] & mu
            if x:
                v = (x & -x).bit_length() - 1
                return self.gpus_of(v, self.free[v] & s.pre_mask[v][u], n)
        return None   # unreachable: mu's nodes have >= n at top too


class RankedFree:
    """The free GPUs as one sorted list of cluster positions, for "the k-th free GPU" (random
    placement, which needs nothing else). A plain list: at cluster sizes (thousands of GPUs) a
    C-level insert or delete costs less than a balanced structure's Python-level one. Starts with
    every GPU free; ``take``/``give``/``as_map`` as :class:`FreeIndex`'s."""

    def __init__(self, cluster: Cluster):
        self.ids = [g.id for g in cluster.gpus]
        self.gi = {g: i for i, g in enumerate(self.ids)}
        self.node = [g.node for g in cluster.gpus]
        self._every = list(range(len(self.ids)))     # copied at each reset: cheaper than a new range's ints
        self.ranked = self._every.copy()
        self.total = len(self.ids)
        # the last draw (its GPUs, their positions): a take of exactly those GPUs next deletes by position
        self._drawn: tuple[tuple[str, ...], list[int]] | None = None

    def draw(self, positions: list[int]) -> tuple[str, ...]:
        """The free GPUs at these distinct positions (0-based, in cluster order)."""
        ids, ranked = self.ids, self.ranked
        gpus = tuple([ids[ranked[k]] for k in positions])
        self._drawn = (gpus, positions)
        return gpus

    def take(self, gpus: Iterable[str]) -> None:
        ranked, drawn = self.ranked, self._drawn
        self._drawn = None
        if drawn is not None and (gpus is drawn[0] or tuple(gpus) == drawn[0]):
            pos = drawn[1]
            if len(pos) == 1:
                del ranked[pos[0]]
            else:
                for k in sorted(pos, reverse=True):     # later positions first: earlier ones stay put
                    del ranked[k]
        else:
            gi = self.gi
            for g in gpus:
                i = gi[g]
                k = bisect_left(ranked, i)
                if k == len(ranked) or ranked[k] != i:
                    raise ValueError("a GPU taken is not free")
                del ranked[k]
        self.total = len(ranked)

    def give(self, gpus: Iterable[str]) -> None:
        ranked, gi = self.ranked, self.gi
        self._drawn = None
        for g in gpus:
            i = gi[g]
            k = bisect_left(ranked, i)
            if k < len(ranked) and ranked[k] == i:
                raise ValueError("a GPU given back is already free")
            ranked.insert(k, i)
        self.total = len(ranked)

    def reset(self) -> None:
        """Every GPU free again."""
        self._drawn = None
        self.ranked = self._every.copy()
        self.total = len(self.ids)

    def nth_free(self, k: int) -> str:
        """The k-th (0-based) free GPU in cluster order."""
        return self.ids[self.ranked[k]]

    def as_map(self, ok=None) -> dict[str, list[str]]:
        """node name -> free GPU ids, nodes in order, empty nodes left out; ``ok`` filters GPU ids."""
        out: dict[str, list[str]] = {}
        for i in self.ranked:
            g = self.ids[i]
            if ok is None or ok(g):
                out.setdefault(self.node[i], []).append(g)
        return out
