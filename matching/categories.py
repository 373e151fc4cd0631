"""Feasible-solution categorization: per-job option menus, categories, and their realization on GPUs.

A static placement gives every job j a GPU set G_j. Without per-GPU variability and interference, the
speed model (SPEC §2) makes j's duration depend only on

* the **count vector** c_j = (#GPUs of each type in G_j), and
* whether G_j lies on **one node** (``local``) or spans several (``spread``): bandwidth, locality
  penalty and the measured-vs-spread tables only ever look at ``k == 1`` versus ``k > 1``.

A job's *menu* is the list of its options (c, local, duration); durations come from
:func:`jctlab.speed.base_iteration_time` on one canonical allocation per option. Two categorizations
of the feasible solutions are used:

* **size categories** (the paper's): the vector of worker counts (n_1..n_J);
* **count categories**: the vector of count vectors (c_1..c_J) — finer; inside one, only the choice of
  concrete GPUs (which node) remains.

:func:`realize` turns a choice of options into concrete disjoint GPU sets: local jobs first (largest
first, best-fit node), spread jobs on what is left, smallest remnants first.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from jctlab.model import Allocation, Instance, Job
from jctlab.speed import SpeedError, base_iteration_time, step_times_by_counts


def compositions(n: int, caps: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """All vectors c ≥ 0 with Σc = n and c_t ≤ caps[t]."""
    if not caps:
        if n == 0:
            yield ()
        return
    if len(caps) == 1:
        if n <= caps[0]:
            yield (n,)
        return
    rest = sum(caps[1:])
    for first in range(min(n, caps[0]), max(0, n - rest) - 1, -1):
        for tail in compositions(n - first, caps[1:]):
            yield (first,) + tail


def _profile(job: Job) -> tuple:
    """Everything but ``iterations`` that the speed model reads from a job."""
    meas = tuple(sorted((k, tuple(sorted(v.items()))) for k, v in job.measured.items()))
    cm = None if job.cpu_mem is None else job.cpu_mem.levels
    ps = None if job.ps is None else (job.ps.max_ps, job.ps.ps_cpus, job.ps.theta)
    return (tuple(sorted(job.samples_per_s.items())), job.batch, job.comm_mb, job.job_class, meas, cm, ps,
            tuple(job.sizes))


@dataclass
class Menu:
    """Options of a set of jobs on a set of free GPUs.

    Padded arrays over jobs a (0..J-1, ``jobs[a]`` is the instance index) and options o:
    ``C[a, o, t]`` GPUs of type ``types[t]``; ``D[a, o]`` duration (s; inf = padding);
    ``L[a, o]`` local; ``S[a, o]`` size; ``n_opt[a]`` real options. ``cap[t]`` free GPUs of type t.
    With ``skip_cost`` every job also has a zero-GPU option (online use: the job waits).
    """

    inst: Instance
    jobs: list[int]
    types: list[str]
    cap: np.ndarray
    free: dict[str, dict[str, list[str]]]          # node -> type -> free GPU ids (sorted)
    C: np.ndarray
    D: np.ndarray
    L: np.ndarray
    S: np.ndarray
    n_opt: np.ndarray
    canon: dict[tuple, Allocation] = field(default_factory=dict)
    exact_packing: bool = True
    reasons: list[str] = field(default_factory=list)

    @property
    def J(self) -> int:
        return len(self.jobs)

    def duration(self, choice: Sequence[int]) -> np.ndarray:
        return self.D[np.arange(self.J), np.asarray(choice)]

    def usage(self, choice: Sequence[int]) -> np.ndarray:
        return self.C[np.arange(self.J), np.asarray(choice)].sum(axis=0)

    def feasible(self, choice: Sequence[int]) -> bool:
        return bool(np.all(self.usage(choice) <= self.cap)) and bool(np.all(np.isfinite(self.duration(choice))))

    def value(self, choice: Sequence[int]) -> float:
        return float(self.duration(choice).sum())

    def sizes(self, choice: Sequence[int]) -> tuple[int, ...]:
        return tuple(int(x) for x in self.S[np.arange(self.J), np.asarray(choice)])

    def counts(self, choice: Sequence[int]) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(x) for x in self.C[a, o]) for a, o in enumerate(choice))


def build_menu(inst: Instance, jobs: Sequence[int] | None = None,
               free: Mapping[str, Iterable[str]] | None = None,
               skip_cost: Sequence[float] | None = None, max_size: int | None = None,
               prune: bool = True) -> Menu:
    """Menus of ``jobs`` (default all) on the ``free`` GPUs (node -> ids; default the whole cluster)."""
    cl = inst.cluster
    jobs = list(range(len(inst.jobs))) if jobs is None else list(jobs)
    if free is None:
        free = {n.name: [g.id for g in n.gpus] for n in cl.nodes}
    types = list(cl.gpu_types)
    tix = {t: i for i, t in enumerate(types)}
    fr: dict[str, dict[str, list[str]]] = {}
    for node in cl.nodes:
        ids = set(free.get(node.name, ()))
        per: dict[str, list[str]] = {}
        for g in node.gpus:
            if g.id in ids:
                per.setdefault(g.type, []).append(g.id)
        fr[node.name] = per
    cap = np.zeros(len(types), dtype=np.int64)
    for per in fr.values():
        for t, ids in per.items():
            cap[tix[t]] += len(ids)
    node_cnt = {nm: np.array([len(per.get(t, ())) for t in types]) for nm, per in fr.items()}

    reasons = []
    if any(g.variability for g in cl.gpus):
        reasons.append("per-GPU variability: GPUs of one type are not interchangeable")
    if any(sum(1 for v in node_cnt[n.name] if v > 0) > 1 for n in cl.nodes):
        reasons.append("mixed-type nodes")
    if cl.has_interference:
        reasons.append("interference")

    # Without variability a duration depends only on (job profile, count vector, local/spread) (see
    # the module docstring): all options of a job are priced in one vectorized call
    # (:func:`jctlab.speed.step_times_by_counts`) and option lists are cached per (profile, cluster
    # speed signature, free-count structure of the nodes), the (count vector, local/spread) pairs
    # per (node shape, usable types, sizes); both live for the process (:func:`clear_caches` empties
    # them). With variability: per-call canonical GPUs, one jctlab.speed call each.
    cacheable = not any(g.variability for g in cl.gpus)
    sig = (tuple(types), cl.intra_node_gbps, cl.inter_node_gbps, cl.locality_penalty, cl.split)
    shape = tuple(sorted(tuple(int(x) for x in v) for v in node_cnt.values() if v.any()))
    canon: dict[tuple, Allocation | None] = {}

    def canonical(c: tuple[int, ...], local: bool, ps: bool) -> Allocation | None:
        key = (c, local, ps)
        if key in canon:
            return canon[key]
        alloc = _canonical(c, local, fr, node_cnt, types, cl)
        if alloc is not None and ps:
            alloc = Allocation(alloc.gpus, (alloc.gpus[0].split(":", 1)[0],))
        canon[key] = alloc
        return alloc

    prof_cache: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    per_job = []
    for j in jobs:
        job = inst.jobs[j]
        key = _profile(job)
        if key not in prof_cache:
            mkey = (key, sig, shape, max_size, prune) if cacheable else None
            hit = _MENU_CACHE.get(mkey) if mkey is not None else None
            if hit is None:
                cache_key = (key, sig) if cacheable else None
                hit = _job_options(job, types, cap, canonical, cl, max_size, prune, cache_key,
                                   _shape_ok(shape, node_cnt) if cacheable else None)
                if mkey is not None:
                    if len(_MENU_CACHE) > _CACHE_MAX:
                        _MENU_CACHE.clear()
                    _MENU_CACHE[mkey] = hit
            prof_cache[key] = hit
        per_job.append(prof_cache[key])
    extra = 1 if skip_cost is not None else 0
    O = max(1, max((len(b) for _, b, _ in per_job), default=0) + extra)
    J, T = len(jobs), len(types)
    C = np.zeros((J, O, T), dtype=np.int64)
    D = np.full((J, O), np.inf)
    L = np.zeros((J, O), dtype=bool)
    S = np.zeros((J, O), dtype=np.int64)
    n_opt = np.zeros(J, dtype=np.int64)
    for a, (j, (cs, base, loc)) in enumerate(zip(jobs, per_job)):
        k = len(base)
        C[a, :k] = cs
        D[a, :k] = inst.jobs[j].iterations * base
        L[a, :k] = loc
        S[a, :k] = cs.sum(axis=1) if k else 0
        if skip_cost is not None:
            D[a, k] = skip_cost[a]
            k += 1
        n_opt[a] = k
    return Menu(inst, jobs, types, cap, fr, C, D, L, S, n_opt, {k: v for k, v in canon.items() if v is not None},
                exact_packing=not reasons, reasons=reasons)


_MENU_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_COMP_CACHE: dict[tuple, list[tuple[int, ...]]] = {}
_ENUM_CACHE: dict[tuple, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}   # (counts, local, covers)
_CACHE_MAX = 200_000


def clear_caches() -> None:
    """Forget every cached option list, pair enumeration and composition (for cold-start timings)."""
    _MENU_CACHE.clear()
    _COMP_CACHE.clear()
    _ENUM_CACHE.clear()


def cache_sizes() -> dict[str, int]:
    return {"menus": len(_MENU_CACHE), "pairs": len(_ENUM_CACHE)}


def _shape_ok(shape: tuple[tuple[int, ...], ...], node_cnt) -> "callable":
    """Whether (c, local) has a canonical allocation, from the free counts per node alone (the same
    answer as :func:`_canonical`: local iff one node holds c; spread iff n ≥ 2, c fits in aggregate
    and the used types' free GPUs lie on two nodes or more)."""
    vecs = sorted(set(shape))                   # distinct node vectors suffice for "one node holds c"
    tot = [sum(v[t] for v in shape) for t in range(len(shape[0]))] if shape else []
    spans: dict[tuple[int, ...], int] = {}        # used-type set -> nodes holding any of those types

    def ok(c: tuple[int, ...], local: bool) -> bool:
        if local:
            return any(all(v >= x for v, x in zip(vec, c)) for vec in vecs)
        if sum(c) < 2:
            return False
        for t, x in enumerate(c):
            if tot[t] < x:
                return False
        used = tuple(t for t, x in enumerate(c) if x > 0)
        k = spans.get(used)
        if k is None:
            k = spans[used] = sum(1 for vec in shape if any(vec[t] > 0 for t in used))
        return k >= 2

    ok.shape = shape  # type: ignore[attr-defined]
    return ok


def _vectors(sizes, total, max_size, ucap, uix, T):
    """Count vectors over all types (zeros for unusable ones) of every allowed size that fits."""
    for n in sizes:
        if n > total or (max_size is not None and n > max_size):
            continue
        for sub in _compositions(n, ucap):
            c = [0] * T
            for i, x in zip(uix, sub):
                c[i] = x
            yield tuple(c)


def _compositions(n: int, caps: tuple[int, ...]) -> list[tuple[int, ...]]:
    key = (n, caps)
    out = _COMP_CACHE.get(key)
    if out is None:
        out = _COMP_CACHE[key] = list(compositions(n, caps))
    return out


def _job_options(job: Job, types: list[str], cap: np.ndarray, canonical, cl, max_size, prune,
                 cache_key: tuple | None = None, shape_ok=None):
    usable = [t for t in types if job.can_use(t)]
    uix = [types.index(t) for t in usable]
    ucap = tuple(int(cap[i]) for i in uix)
    total = sum(ucap)
    T = len(types)
    ps = job.ps is not None
    cs, base, loc = [], [], []
    cover = None
    if cache_key is not None:
        # (c, local) pairs with a canonical allocation, per (node shape, usable types, sizes)
        ekey = (cache_key[1], shape_ok.shape, tuple(uix), tuple(job.sizes), max_size)
        pairs = _ENUM_CACHE.get(ekey)
        if pairs is None:
            lst = [(c, local) for c in _vectors(job.sizes, total, max_size, ucap, uix, T)
                   for local in (True, False) if shape_ok(c, local)]
            pc = np.array([c for c, _ in lst], dtype=np.int64).reshape(-1, T)
            pl = np.array([local for _, local in lst], dtype=bool)
            pairs = (pc, pl, _covers(pc, pl))
            if len(_ENUM_CACHE) > _CACHE_MAX:
                _ENUM_CACHE.clear()
            _ENUM_CACHE[ekey] = pairs
        pc, pl, cover = pairs
        pb = step_times_by_counts(job, cl, types, pc, ~pl)   # null cpu_mem level: no speedup
        ok = ~np.isnan(pb)
        cs, base, loc = pc[ok], pb[ok], pl[ok]
        if not ok.all():
            cover = cover[np.ix_(ok, ok)]
    else:  # per-GPU variability: durations of this call's canonical GPUs, no process-wide cache
        for c in _vectors(job.sizes, total, max_size, ucap, uix, T):
            for local in (True, False):
                alloc = canonical(c, local, ps)
                if alloc is None:
                    continue
                try:
                    b = base_iteration_time(job, alloc, cl)
                except SpeedError:
                    continue
                cs.append(c)
                base.append(b)
                loc.append(local)
    cs_a = np.array(cs, dtype=np.int64).reshape(-1, T)
    base_a = np.array(base, dtype=float)
    loc_a = np.array(loc, dtype=bool)
    if prune and len(base_a) > 1:
        keep = _undominated(cs_a, base_a, loc_a, cover)
        cs_a, base_a, loc_a = cs_a[keep], base_a[keep], loc_a[keep]
    order = np.lexsort((~loc_a, base_a))
    return cs_a[order], base_a[order], loc_a[order]


def _covers(cs: np.ndarray, loc: np.ndarray) -> np.ndarray:
    """cover[p, o]: option p uses no more GPUs of any type than o and is at least as easy to place
    (p spread, or both local) — p dominates o when it is also no slower."""
    le = np.all(cs[:, None, :] <= cs[None, :, :], axis=2)          # le[p, o]: cs[p] <= cs[o]
    return le & ((~loc[:, None]) | (loc[:, None] & loc[None, :]))


def _undominated(cs: np.ndarray, d: np.ndarray, loc: np.ndarray, cover: np.ndarray | None = None) -> np.ndarray:
    """Drop option o when another option o' uses no more GPUs of any type, is no slower, and is at
    least as easy to place (o' spread, or both local); ties keep the first. ``cover``: the
    precomputed :func:`_covers` of (cs, loc)."""
    n = len(d)
    if cover is None:
        cover = _covers(cs, loc)
    dom = cover & (d[:, None] <= d[None, :])
    strict = dom & ~(dom.T)
    idx = np.arange(n)
    tie = dom & dom.T & (idx[:, None] < idx[None, :])
    return ~np.any(strict | tie, axis=0)


def _canonical(c, local, fr, node_cnt, types, cl) -> Allocation | None:
    n = sum(c)
    if local:
        for node in cl.nodes:
            per = fr[node.name]
            if all(len(per.get(t, ())) >= x for t, x in zip(types, c)):
                gpus = []
                for t, x in zip(types, c):
                    gpus.extend(fr[node.name].get(t, [])[:x])
                return Allocation(tuple(gpus))
        return None
    if n < 2:
        return None
    # spread: take each type from nodes in order, then make sure two nodes are used
    picks: list[tuple[str, str]] = []
    for t, x in zip(types, c):
        left = x
        for node in cl.nodes:
            if left == 0:
                break
            ids = fr[node.name].get(t, [])
            take = ids[:left]
            picks.extend((node.name, g) for g in take)
            left -= len(take)
        if left:
            return None
    if len({nd for nd, _ in picks}) == 1:
        home = picks[0][0]
        for i in range(len(picks) - 1, -1, -1):
            g_type = cl.gpu[picks[i][1]].type
            alt = next((g for node in cl.nodes if node.name != home for g in fr[node.name].get(g_type, [])), None)
            if alt is not None:
                picks[i] = (cl.gpu[alt].node, alt)
                break
        else:
            return None
    return Allocation(tuple(g for _, g in picks))


# ----------------------------------------------------------------------------- categories


def size_category(menu: Menu, choice: Sequence[int]) -> tuple[int, ...]:
    """The paper's category of a solution: how many workers each job gets."""
    return menu.sizes(choice)


def count_category(menu: Menu, choice: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """The finer category: how many GPUs of each type each job gets."""
    return menu.counts(choice)


def job_sizes(menu: Menu) -> list[list[int]]:
    """Sizes each job has at least one option for."""
    return [sorted({int(s) for s in menu.S[a, :menu.n_opt[a]]}) for a in range(menu.J)]


def enumerate_size_categories(menu: Menu) -> Iterator[tuple[int, ...]]:
    """Every size vector whose total fits the free GPUs (the paper's category set)."""
    total = int(menu.cap.sum())
    for combo in itertools.product(*job_sizes(menu)):
        if sum(combo) <= total:
            yield combo


def enumerate_choices(menu: Menu, sizes: Sequence[int] | None = None) -> Iterator[tuple[int, ...]]:
    """Every aggregate-feasible option choice (optionally inside one size category). Small menus only."""
    opts = []
    for a in range(menu.J):
        o = [k for k in range(menu.n_opt[a]) if sizes is None or menu.S[a, k] == sizes[a]]
        opts.append(o)
    for combo in itertools.product(*opts):
        if np.all(menu.C[np.arange(menu.J), list(combo)].sum(axis=0) <= menu.cap):
            yield combo


# ----------------------------------------------------------------------------- realization


def realize(menu: Menu, choice: Sequence[int]) -> tuple[list[Allocation | None], bool]:
    """Concrete GPU sets for an aggregate-feasible choice; ``None`` for a zero-GPU (skip) option.

    Returns (allocations in menu job order, ok) where ok is False when some job chosen ``local``
    found no single node with room and was placed spread instead (its duration then differs).
    """
    cl = menu.inst.cluster
    types = menu.types
    free = {nm: {t: list(ids) for t, ids in per.items()} for nm, per in menu.free.items()}
    allocs: list[Allocation | None] = [None] * menu.J
    ok = True
    idx = list(range(menu.J))
    sizes = [int(menu.S[a, choice[a]]) for a in idx]
    local = [a for a in idx if menu.L[a, choice[a]] and sizes[a] > 0]
    spread = [a for a in idx if not menu.L[a, choice[a]] and sizes[a] > 0]
    local.sort(key=lambda a: (-sizes[a], a))
    spread.sort(key=lambda a: (-sizes[a], a))
    order_nodes = [n.name for n in cl.nodes]
    for a in local:
        c = menu.C[a, choice[a]]
        best, best_left = None, math.inf
        for nm in order_nodes:
            per = free[nm]
            if all(len(per.get(t, ())) >= x for t, x in zip(types, c)):
                left = sum(len(v) for v in per.values()) - int(c.sum())
                if left < best_left:
                    best, best_left = nm, left
        if best is None:
            ok = False
            spread.append(a)
            continue
        gpus = []
        for t, x in zip(types, c):
            if x:
                gpus.extend(free[best][t][:x])
                del free[best][t][:x]
        allocs[a] = Allocation(tuple(gpus), _ps(menu, a, gpus))
    for a in spread:
        c = menu.C[a, choice[a]]
        gpus = []
        for t, x in zip(types, c):
            left = int(x)
            # smallest remnants first: keeps whole nodes whole for later local jobs
            for nm in sorted(order_nodes, key=lambda nm: (len(free[nm].get(t, ())), order_nodes.index(nm))):
                if left == 0:
                    break
                ids = free[nm].get(t, [])
                if not ids:
                    continue
                take = ids[:left]
                gpus.extend(take)
                del ids[:len(take)]
                left -= len(take)
            if left:
                raise ValueError("choice exceeds the free GPUs of type " + t)
        allocs[a] = Allocation(tuple(gpus), _ps(menu, a, gpus))
    return allocs, ok


def _ps(menu: Menu, a: int, gpus: list[str]) -> tuple[str, ...]:
    if menu.inst.jobs[menu.jobs[a]].ps is None:
        return ()
    return (gpus[0].split(":", 1)[0],)
