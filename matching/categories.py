"""Feasible-solution categorization: per-job option menus, categories, and their realization on GPUs.

A static placement gives every job j a GPU set G_j. Without per-GPU variability and interference, the
speed model (SPEC §2) makes j's duration depend only on

* the **count vector** c_j = (#GPUs of each type in G_j), and
* whether G_j lies on **one node** (``local``) or spans several (``spread``): bandwidth, locality
  penalty and the measured-vs-spread tables only ever look at ``k == 1`` versus ``k > 1``.

A job's *menu* is the list of its options (c, local, duration), fastest first, without the options that
another one dominates (no more GPUs of any type, as easy to place, no slower). Durations come from
:func:`jctlab.speed_tables.step_time_table`, all options of all job profiles at once; with per-GPU
variability from :func:`jctlab.speed.base_iteration_time` on one canonical allocation per option. Two
categorizations of the feasible solutions are used:

* **size categories** (the paper's): the vector of worker counts (n_1..n_J);
* **count categories**: the vector of count vectors (c_1..c_J) — finer; inside one, only the choice of
  concrete GPUs (which node) remains.

:func:`realize` turns a choice of options into concrete disjoint GPU sets: local jobs first (largest
first, best-fit node), spread jobs on what is left, smallest remnants first.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

import numpy as np

from jctlab.model import Allocation, Instance, Job
from jctlab.speed import SpeedError, base_iteration_time
from jctlab.speed_tables import step_time_table


def compositions(n: int, caps: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """All vectors c ≥ 0 with Σc = n and c_t ≤ caps[t], the first type's count highest first (the order of
    :func:`formulations.static.candidates.count_vectors`, the lazy form of the same enumeration: a tested law)."""
    return iter([tuple(c) for c in _count_vectors([n], caps).tolist()])


def _count_vectors(sizes: Sequence[int], caps: Sequence[int]) -> np.ndarray:
    """Rows c ≥ 0 with c_t ≤ caps[t] and Σc in ``sizes``: sizes in the given order, each in decreasing
    lexicographic order. Built type by type: a partial row with ``rem`` GPUs left branches on the
    counts min(rem, cap), ..., max(0, rem − room of the later types); the last type takes the rest."""
    rest = sum(caps)                                               # room of the types still to come
    rem = np.array([n for n in sizes if 0 <= n <= rest], dtype=np.int64)   # GPUs each partial row has left
    rows = np.zeros((len(rem), 0), dtype=np.int64)
    for cap in caps[:-1]:
        rest -= cap
        lo = np.maximum(rem - rest, 0)
        cnt = np.minimum(rem, cap) - lo + 1                        # >= 1: every partial row can be completed
        ends = np.cumsum(cnt)
        src = np.repeat(np.arange(len(rem)), cnt)                  # the branches of each row, in order
        x = np.repeat(lo + ends, cnt) - np.arange(1, len(src) + 1)  # ... with counts highest first
        rows = np.concatenate([rows.take(src, axis=0), x[:, None]], axis=1)
        rem = rem.take(src) - x
    return np.concatenate([rows, rem[:, None]], axis=1) if len(caps) else rows


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
    """Menus of ``jobs`` (default all) on the ``free`` GPUs (node -> ids; default the whole cluster).

    Without variability a duration depends only on (job profile, count vector, local/spread) (see
    the module docstring): the options of all profiles are priced at once and cached for the process
    (:func:`_cached_options`; :func:`clear_caches` empties the caches). With variability: per-call
    canonical GPUs, one jctlab.speed call each.
    """
    cl = inst.cluster
    jobs = list(range(len(inst.jobs))) if jobs is None else list(jobs)
    types = list(cl.gpu_types)
    fr = _free_by_node(cl, free)
    node_cnt = {nm: [len(per.get(t, ())) for t in types] for nm, per in fr.items()}   # free GPUs per type
    cap = np.array([sum(x) for x in zip(*node_cnt.values())], dtype=np.int64)

    variability = any(g.variability for g in cl.gpus)
    reasons = []
    if variability:
        reasons.append("per-GPU variability: GPUs of one type are not interchangeable")
    if any(len(per) > 1 for per in fr.values()):
        reasons.append("mixed-type nodes")
    if cl.has_interference:
        reasons.append("interference")

    index: dict[tuple, int] = {}                  # distinct job profiles, numbered as they first appear
    reps: list[Job] = []                          # reps[p]: the first job of profile p
    prof = []                                     # prof[a]: the profile of job a
    for j in jobs:
        p = index.setdefault(_profile(inst.jobs[j]), len(reps))
        if p == len(reps):
            reps.append(inst.jobs[j])
        prof.append(p)
    canon: dict[tuple, Allocation | None] = {}
    if variability:
        def canonical(c: tuple[int, ...], local: bool, ps: bool) -> Allocation | None:
            key = (c, local, ps)
            if key in canon:
                return canon[key]
            alloc = _canonical(c, local, fr, node_cnt, types, cl)
            if alloc is not None and ps:
                alloc = Allocation(alloc.gpus, (alloc.gpus[0].split(":", 1)[0],))
            canon[key] = alloc
            return alloc

        options = [_canonical_options(job, types, cap, canonical, cl, max_size, prune) for job in reps]
    else:
        options = _cached_options(list(index), reps, cl, types, cap, node_cnt, max_size, prune)
    C, D, L, S, n_opt = _padded(inst, jobs, prof, options, len(types), skip_cost)
    return Menu(inst, jobs, types, cap, fr, C, D, L, S, n_opt, {k: v for k, v in canon.items() if v is not None},
                exact_packing=not reasons, reasons=reasons)


Options = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]   # (counts, sizes, step times, local)

_MENU_CACHE: dict[tuple, Options] = {}
_ENUM_CACHE: dict[tuple, tuple] = {}           # (counts, local, beats) of the placeable pairs
_CACHE_MAX = 200_000


def clear_caches() -> None:
    """Forget every cached option list and pair enumeration (for cold-start timings)."""
    _MENU_CACHE.clear()
    _ENUM_CACHE.clear()


def cache_sizes() -> dict[str, int]:
    return {"menus": len(_MENU_CACHE), "pairs": len(_ENUM_CACHE)}


def _remember(cache: dict, key: tuple, value):
    """Store ``value`` under ``key`` (emptying a full cache first) and return it."""
    if len(cache) > _CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


def _free_by_node(cl, free: Mapping[str, Iterable[str]] | None) -> dict[str, dict[str, list[str]]]:
    """node -> type -> the free GPU ids in cluster order (default: every GPU is free)."""
    fr: dict[str, dict[str, list[str]]] = {}
    for node in cl.nodes:
        ids = None if free is None else set(free.get(node.name, ()))
        per: dict[str, list[str]] = {}
        for g in node.gpus:
            gid = g.id
            if ids is None or gid in ids:
                per.setdefault(g.type, []).append(gid)
        fr[node.name] = per
    return fr


def _cached_options(keys: list[tuple], reps: list[Job], cl, types: list[str], cap: np.ndarray, node_cnt,
                    max_size: int | None, prune: bool) -> list[Options]:
    """Options of every profile ``keys[p]`` (``reps[p]``: a job with it) on GPUs without variability.

    Option lists are cached per (profile, cluster speed signature, free-count structure of the
    nodes); the missing ones are priced together, one :func:`jctlab.speed_tables.step_time_table` call per
    (usable types, sizes) group of profiles on its (count vector, local/spread) pairs (:func:`_pairs`).
    """
    sig = (tuple(types), cl.intra_node_gbps, cl.inter_node_gbps, cl.locality_penalty, cl.split)
    shape = tuple(sorted(tuple(v) for v in node_cnt.values() if any(v)))
    out: list[Options | None] = [_MENU_CACHE.get((key, sig, shape, max_size, prune)) for key in keys]
    todo: dict[tuple, list[int]] = {}             # (usable type indices, sizes) -> missing profiles
    for p, job in enumerate(reps):
        if out[p] is None:
            uix = tuple([i for i, t in enumerate(types) if job.can_use(t)])
            todo.setdefault((uix, tuple(job.sizes)), []).append(p)
    for (uix, sizes), group in todo.items():
        pc, pl, beats = _pairs(sig, shape, cap, uix, sizes, max_size)
        d = step_time_table([reps[p] for p in group], cl, types, pc, ~pl)   # null cpu_mem level: no speedup
        keep = _undominated(d, beats) if prune else ~np.isnan(d)
        for p, opts in zip(group, _sorted_options(pc, pl, d, keep)):
            out[p] = _remember(_MENU_CACHE, (keys[p], sig, shape, max_size, prune), opts)
    return out


def _pairs(sig: tuple, shape: tuple[tuple[int, ...], ...], cap: np.ndarray, uix: tuple[int, ...],
           sizes: tuple[int, ...], max_size: int | None) -> tuple:
    """The (count vector, local) pairs with a canonical allocation — ``pc[m]``, ``pl[m]``, each count
    vector local first — and their :func:`_beats`; cached per (signature, node shape, usable types,
    sizes, max size)."""
    ekey = (sig, shape, uix, sizes, max_size)
    hit = _ENUM_CACHE.get(ekey)
    if hit is None:
        cs = _vectors(sizes, cap, uix, max_size)
        m, spread = np.nonzero(_placeable(cs, shape))
        pc, pl = cs.take(m, axis=0), spread == 0
        hit = _remember(_ENUM_CACHE, ekey, (pc, pl, _beats(pc, pl)))
    return hit


def _placeable(cs: np.ndarray, shape: tuple[tuple[int, ...], ...]) -> np.ndarray:
    """ok[m, 0] / ok[m, 1]: whether count vector m (within the free counts) has a local / a spread
    canonical allocation, from the free counts per node alone — the same answer as :func:`_canonical`:
    local iff one node holds c; spread iff n ≥ 2 and the used types' free GPUs lie on two nodes or more."""
    mult = Counter(shape)                                          # distinct node vectors, how many of each
    nodes = np.array(list(mult), dtype=np.int64).reshape(-1, cs.shape[1])
    ok = np.empty((len(cs), 2), dtype=bool)
    ok[:, 0] = np.all(cs[:, None, :] <= nodes[None, :, :], axis=2).any(axis=1)
    spans = ((cs > 0) @ (nodes > 0).T) @ np.array(list(mult.values()), dtype=np.int64).reshape(-1)
    ok[:, 1] = (cs.sum(axis=1) >= 2) & (spans >= 2)
    return ok


def _vectors(sizes: Sequence[int], cap: np.ndarray, uix: Sequence[int], max_size: int | None) -> np.ndarray:
    """Count vectors over all types (zeros for unusable ones) of every allowed size that fits the free
    GPUs of the usable types ``uix``: sizes in order, each in :func:`compositions` order."""
    allowed = [n for n in sizes if max_size is None or n <= max_size]
    sub = _count_vectors(allowed, [int(cap[i]) for i in uix])
    cs = np.zeros((len(sub), len(cap)), dtype=np.int64)
    cs[:, list(uix)] = sub
    return cs


def _canonical_options(job: Job, types: list[str], cap: np.ndarray, canonical, cl, max_size: int | None,
                       prune: bool) -> Options:
    """Options of one job priced on this call's canonical GPUs (per-GPU variability), one
    jctlab.speed call each."""
    uix = [i for i, t in enumerate(types) if job.can_use(t)]
    cs, base, loc = [], [], []
    for c in map(tuple, _vectors(job.sizes, cap, uix, max_size).tolist()):
        for local in (True, False):
            alloc = canonical(c, local, job.ps is not None)
            if alloc is None:
                continue
            try:
                b = base_iteration_time(job, alloc, cl)
            except SpeedError:
                continue
            cs.append(c)
            base.append(b)
            loc.append(local)
    cs_a = np.array(cs, dtype=np.int64).reshape(-1, len(types))
    loc_a = np.array(loc, dtype=bool)
    d = np.array([base], dtype=float)
    keep = _undominated(d, _beats(cs_a, loc_a)) if prune else np.ones(d.shape, dtype=bool)
    return _sorted_options(cs_a, loc_a, d, keep)[0]


def _beats(cs: np.ndarray, loc: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pairs (i[e], o[e]) of distinct options where i dominates o when it is no slower: i uses no
    more GPUs of any type and is at least as easy to place (i spread, or both local). ``strict``: the
    pairs where o likewise covers i and i comes later — the first of two such options is kept, so
    the later one dominates only when strictly faster."""
    cover = ~loc[:, None] | loc[None, :]
    for x in np.ascontiguousarray(cs.T, dtype=np.int32):           # cs[i] <= cs[o], type by type
        cover &= x[:, None] <= x[None, :]
    np.fill_diagonal(cover, False)
    e = np.flatnonzero(cover)
    i = e // max(len(cs), 1)
    o = e - i * len(cs)
    return i, o, np.flatnonzero(cover.T.ravel()[e] & (i > o))


def _undominated(d: np.ndarray, beats: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """keep[p, o]: whether o is an option of row p (duration ``d[p, o]``, nan = none) that no other
    option of the row dominates (see :func:`_beats`)."""
    i, o, strict = beats
    beaten = d.take(i, axis=1) <= d.take(o, axis=1)                # beaten[p, e]: i[e] dominates o[e]
    beaten[:, strict] = d.take(i[strict], axis=1) < d.take(o[strict], axis=1)
    at = o + d.shape[1] * np.arange(len(d))[:, None]               # at[p, e]: (p, o[e]) in d.ravel()
    dominated = np.zeros(d.size, dtype=bool)
    dominated[at[beaten]] = True
    return ~np.isnan(d) & ~dominated.reshape(d.shape)


def _sorted_options(cs: np.ndarray, loc: np.ndarray, d: np.ndarray, keep: np.ndarray) -> list[Options]:
    """Per row p, the kept options (count vectors, sizes, durations ``d[p]``, local flags): fastest
    first, local before spread at equal durations, else in the given order."""
    col = np.argsort(~loc, kind="stable")                          # the local options first, each in order
    dk = np.where(keep, d, np.nan).take(col, axis=1)               # nan (not kept) sorts last
    order = np.argsort(dk, axis=1, kind="stable")
    n = keep.sum(axis=1)
    lead = np.arange(d.shape[1]) < n[:, None]                      # the kept ones lead their row
    base = dk[np.arange(len(d))[:, None], order][lead]
    k = col.take(order[lead])
    cs, size, loc = cs.take(k, axis=0), cs.sum(axis=1).take(k), loc.take(k)
    ends = np.cumsum(n).tolist()
    return [(cs[a:b], size[a:b], base[a:b], loc[a:b]) for a, b in zip([0] + ends, ends)]


def _padded(inst: Instance, jobs: list[int], prof: list[int], options: list[Options], T: int,
            skip_cost: Sequence[float] | None) -> tuple[np.ndarray, ...]:
    """:class:`Menu`'s padded C, D, L, S, n_opt: job a gets the options ``options[prof[a]]`` of its profile
    (D = iterations × step time), then the zero-GPU option of cost ``skip_cost[a]`` when given."""
    prof = np.array(prof, dtype=np.int64)
    lens_p = np.array([len(o[0]) for o in options], dtype=np.int64)
    lens = lens_p.take(prof)
    O = max(1, int(lens.max(initial=0)) + (skip_cost is not None))
    slot = np.arange(O)
    real = slot < lens[:, None]
    # src[a, o]: row of job a's option o in the profiles' options stacked, padding the extra last row
    src = np.where(real, (np.cumsum(lens_p) - lens_p).take(prof)[:, None] + slot, int(lens_p.sum()))
    C = np.concatenate([o[0] for o in options] + [np.zeros((1, T), dtype=np.int64)]).take(src, axis=0)
    S = np.concatenate([o[1] for o in options] + [np.zeros(1, dtype=np.int64)]).take(src)
    base = np.concatenate([o[2] for o in options] + [np.zeros(1)]).take(src)
    L = np.concatenate([o[3] for o in options] + [np.zeros(1, dtype=bool)]).take(src)
    iters = np.array([inst.jobs[j].iterations for j in jobs], dtype=float)
    D = np.where(real, iters[:, None] * base, np.inf)
    n_opt = lens
    if skip_cost is not None:
        D[np.arange(len(jobs)), lens] = skip_cost
        n_opt = lens + 1
    return C, D, L, S, n_opt


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
    rank = {nm: i for i, nm in enumerate(order_nodes)}
    left_on = {nm: sum(len(v) for v in free[nm].values()) for nm in order_nodes}   # free GPUs per node
    for a in local:
        need = [(t, int(x)) for t, x in zip(types, menu.C[a, choice[a]]) if x]
        n = sum(x for _, x in need)
        best, best_left = None, math.inf
        for nm in order_nodes:   # best fit: the node left with the fewest free GPUs
            per = free[nm]
            if left_on[nm] - n < best_left and all(len(per.get(t, ())) >= x for t, x in need):
                best, best_left = nm, left_on[nm] - n
        if best is None:
            ok = False
            spread.append(a)
            continue
        gpus = []
        for t, x in need:
            gpus.extend(free[best][t][:x])
            del free[best][t][:x]
        left_on[best] -= n
        allocs[a] = Allocation(tuple(gpus), _ps(menu, a, gpus))
    for a in spread:
        gpus = []
        for t, x in zip(types, menu.C[a, choice[a]]):
            left = int(x)
            if not left:
                continue
            # smallest remnants first: keeps whole nodes whole for later local jobs
            for nm in sorted(order_nodes, key=lambda nm: (len(free[nm].get(t, ())), rank[nm])):
                if left == 0:
                    break
                ids = free[nm].get(t, [])
                if not ids:
                    continue
                take = ids[:left]
                gpus.extend(take)
                del ids[:len(take)]
                left_on[nm] -= len(take)
                left -= len(take)
            if left:
                raise ValueError("choice exceeds the free GPUs of type " + t)
        allocs[a] = Allocation(tuple(gpus), _ps(menu, a, gpus))
    return allocs, ok


def _ps(menu: Menu, a: int, gpus: list[str]) -> tuple[str, ...]:
    if menu.inst.jobs[menu.jobs[a]].ps is None:
        return ()
    return (gpus[0].split(":", 1)[0],)
