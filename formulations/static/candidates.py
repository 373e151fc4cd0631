"""Candidate allocations of the static models: per job, count vectors over GPU classes, priced exactly.

* :func:`enumerate_candidates` — per job, every count vector over one node's GPU classes
  (:mod:`formulations.gpu_classes`), every CPU/memory level (Pareto-filtered per node) and PS multiset,
  each priced by :func:`jctlab.speed.duration`; multi-node allocations exactly when few. Where exhaustive
  enumeration would explode, *relaxed* candidates stand in for a whole family of allocations with a
  duration that is a lower bound of every member (:func:`optimistic_duration`): a model over exact +
  relaxed candidates is a relaxation of the static problem (its bound is valid), and a solution that uses
  no relaxed candidate is feasible (hence optimal if proven).
* Single-node candidates of plain all-reduce jobs are priced in bulk with numpy
  (:func:`_node_candidates_fast`); dominated count vectors are dropped there.

Interference is relaxed (durations are ``speed.duration``, without it); schedules are always reported
with their replayed objective, and since interference only slows jobs down the bounds stay valid.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from jctlab.model import Allocation, Instance, Job
from jctlab.resources import ps_placements
from jctlab.speed import SpeedError, allreduce_s, duration, ps_counts, ps_overhead_s, spans_sockets

from ..budget import Budget
from ..gpu_classes import GpuClass, gpu_classes


#: enumeration caps (per job): above them relaxed candidates are used instead of explicit ones
#: PS servers may go on any node when the cluster has at most this many nodes (then the candidates of a
#: PS job are complete)
PS_FULL_NODES = 6


@dataclass(frozen=True)
class CandidateParams:
    """Enumeration caps per job: above them relaxed candidates stand in for explicit ones."""

    node_cap: int = 4000      # count vectors of one (job, node, size)
    spread_cap: int = 64      # multi-node count vectors of one (job, size)


@dataclass(frozen=True)
class Candidate:
    """One allocation choice of one job.

    ``kind``: ``node`` (all GPUs on one node), ``spread`` (several nodes) — both exact, priced by
    ``speed.duration`` — or ``relaxed-node`` / ``relaxed-spread``: a family of allocations (one node,
    resp. several nodes, with the GPU-type counts ``type_counts``) whose ``duration`` is a lower
    bound of every member; relaxed candidates use no CPU/memory and only aggregate GPU capacity,
    except *sub-families* (:func:`formulations.static.families.split_family`): relaxed candidates with ``counts``, whose GPUs of
    those classes are fixed (class rows) and whose other GPUs stay aggregated.
    """

    job: int
    kind: str
    duration: float
    n: int
    counts: tuple[tuple[int, int], ...] = ()          # (GPU class index, count), exact kinds only
    node: str | None = None                           # the node of node / relaxed-node kinds
    type_counts: tuple[tuple[str, int], ...] = ()
    level: tuple[float, float] | None = None          # (cpus_per_gpu, mem_gb_per_gpu) or None (fair share)
    ps_nodes: tuple[str, ...] = ()
    cpu: tuple[tuple[str, float], ...] = ()           # CPUs used per node
    mem: tuple[tuple[str, float], ...] = ()           # memory used per node
    node_counts: tuple[tuple[str, int], ...] = ()     # GPUs used per node (exact kinds)

    @property
    def exact(self) -> bool:
        return not self.kind.startswith("relaxed")

    def allocation(self, classes: Sequence[GpuClass], taken: Mapping[int, int] | None = None) -> Allocation:
        """A concrete allocation: the first free GPUs of each class (``taken[c]`` already used)."""
        if not self.exact:
            raise ValueError("a relaxed candidate has no concrete allocation")
        gpus: list[str] = []
        for c, k in self.counts:
            off = 0 if taken is None else taken.get(c, 0)
            gpus.extend(classes[c].ids[off:off + k])
        cpg, mpg = (None, None) if self.level is None else self.level
        return Allocation(tuple(gpus), self.ps_nodes, cpg, mpg)


@dataclass(frozen=True)
class CandidateSet:
    """Candidates of every job. ``complete``: every allocation of the instance is represented by an
    exact candidate with the same resources or by a relaxed candidate that bounds it (so a model
    over them is a relaxation: its bound is valid and its infeasibility is the instance's)."""

    classes: tuple[GpuClass, ...]
    per_job: tuple[tuple[Candidate, ...], ...]
    complete: bool
    enum_s: float = 0.0

    @property
    def relaxed(self) -> bool:
        return any(not c.exact for cs in self.per_job for c in cs)

    def size(self) -> int:
        return sum(len(cs) for cs in self.per_job)


def count_vectors(caps: Sequence[int], n: int) -> Iterator[tuple[int, ...]]:
    """All vectors x with 0 <= x[i] <= caps[i] and sum(x) == n (lexicographically decreasing)."""
    m = len(caps)
    suffix = [0] * (m + 1)
    for i in range(m - 1, -1, -1):
        suffix[i] = suffix[i + 1] + caps[i]

    def rec(i: int, left: int, acc: list[int]) -> Iterator[tuple[int, ...]]:
        if i == m:
            if left == 0:
                yield tuple(acc)
            return
        if left > suffix[i]:
            return
        for k in range(min(caps[i], left), -1, -1):
            acc.append(k)
            yield from rec(i + 1, left - k, acc)
            acc.pop()

    if n > suffix[0]:
        return iter(())
    return rec(0, n, [])


def count_vectors_number(caps: Sequence[int], n: int) -> int:
    """How many vectors :func:`count_vectors` yields (a DP, no enumeration; memoised)."""
    return _cvn(tuple(caps), n)


@functools.lru_cache(maxsize=65536)
def _cvn(caps: tuple[int, ...], n: int) -> int:
    ways = [1] + [0] * n
    for c in caps:
        new = [0] * (n + 1)
        for s, w in enumerate(ways):
            if w:
                for k in range(0, min(c, n - s) + 1):
                    new[s + k] += w
        ways = new
    return ways[n]


def _level_options(job: Job) -> list[tuple[float, float] | None]:
    """``Job.level_choices`` with the fair share as None (the candidates' level field)."""
    return [None if c is None else (c, m) for c, m in job.level_choices]  # type: ignore[misc]


def _usage(inst: Instance, job: Job, node_counts: Mapping[str, int], level: tuple[float, float] | None,
           ps_nodes: Sequence[str]) -> tuple[dict[str, float], dict[str, float]]:
    """CPU and memory a job uses per node (the engine's rule: null level = node fair share)."""
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    for v, k in node_counts.items():
        nd = inst.cluster.node[v]
        cpu[v] = k * (nd.fair_cpus if level is None else level[0])
        mem[v] = k * (nd.fair_mem_gb if level is None else level[1])
    if job.ps is not None:
        for v in ps_nodes:
            cpu[v] = cpu.get(v, 0.0) + job.ps.ps_cpus
            mem.setdefault(v, 0.0)
    return cpu, mem


def _ps_options(inst: Instance, job: Job, nodes: Sequence[str], n: int = 1) -> tuple[list[tuple[str, ...]], bool]:
    """PS node multisets for a GPU set of ``n`` GPUs on ``nodes``; the flag says whether the list is exhaustive
    (:func:`jctlab.resources.ps_placements`: 1..p* servers, which loses nothing, at most MAX_PS_PLACEMENTS)."""
    if job.ps is None:
        return [()], True
    full = len(inst.cluster.nodes) <= PS_FULL_NODES
    pool = [v.name for v in inst.cluster.nodes] if full else sorted(nodes)
    out, complete = ps_placements(job, n, sorted(nodes), pool)
    return out, full and complete


def _pareto(options: list[tuple[tuple, dict[str, float], dict[str, float], float]]) -> list[tuple]:
    """Drop (level, ps) options using no less CPU and memory on every node for no more speed (an exact tie:
    the later one). Long lists (every PS placement × level of a count vector) go through numpy."""
    return _pareto_np(options) if len(options) > 16 else _pareto_loop(options)


def _pareto_loop(options: list[tuple[tuple, dict[str, float], dict[str, float], float]]) -> list[tuple]:
    keep = []
    for i, (key, cpu, mem, dur) in enumerate(options):
        dominated = False
        for k, (key2, cpu2, mem2, dur2) in enumerate(options):
            if k == i or dur2 > dur or set(cpu2) - set(cpu) or set(mem2) - set(mem):
                continue
            if all(cpu2.get(v, 0.0) <= cpu[v] for v in cpu) and all(mem2.get(v, 0.0) <= mem[v] for v in mem):
                strictly = dur2 < dur or any(cpu2.get(v, 0.0) < cpu[v] for v in cpu) or any(
                    mem2.get(v, 0.0) < mem[v] for v in mem)
                if strictly or k < i:
                    dominated = True
                    break
        if not dominated:
            keep.append(options[i])
    return keep


def _pareto_np(options: list[tuple[tuple, dict[str, float], dict[str, float], float]]) -> list[tuple]:
    """:func:`_pareto` with arrays: k dominates i when it is no longer, touches no node i does not (per
    resource), holds no more on any node, and is strictly better somewhere or an earlier exact tie."""
    n = len(options)
    nodes = sorted({v for _, cpu, mem, _ in options for v in (*cpu, *mem)})
    col = {v: c for c, v in enumerate(nodes)}
    val = np.zeros((2, n, len(nodes)))
    has = np.zeros((2, n, len(nodes)), dtype=bool)
    for i, (_, cpu, mem, _) in enumerate(options):
        for r, use in enumerate((cpu, mem)):
            for v, x in use.items():
                val[r, i, col[v]] = x
                has[r, i, col[v]] = True
    dur = np.array([o[3] for o in options])
    val = val.transpose(1, 0, 2).reshape(n, -1)
    has = has.transpose(1, 0, 2).reshape(n, -1)
    dominated = np.zeros(n, dtype=bool)
    for a in range(0, n, 256):          # rows i in blocks: the (i, k, resource) arrays stay small
        i = slice(a, min(n, a + 256))
        no_more = (dur[None, :] <= dur[i, None]) & ~np.any(has[None, :, :] & ~has[i, None, :], axis=2) \
            & np.all(val[None, :, :] <= val[i, None, :], axis=2)
        strictly = (dur[None, :] < dur[i, None]) | np.any(val[None, :, :] < val[i, None, :], axis=2)
        earlier = np.arange(n)[None, :] < np.arange(a, i.stop)[:, None]
        beats = no_more & (strictly | earlier)
        beats[np.arange(i.stop - a), np.arange(a, i.stop)] = False
        dominated[i] = beats.any(axis=1)
    return [o for o, d in zip(options, dominated) if not d]


#: memo of ``speed.duration`` per (job, multiset of (type, factor), nodes spanned, level, #PS, spans
#: sockets): the speed model depends on nothing else (SPEC §2), so identical keys give identical durations
_DUR_MEMO: dict[tuple, float | None] = {}


_FACTORS_MEMO: dict[tuple, dict[str, list[float]]] = {}


_DUR_MEMO_INST: list[Any] = [None]


def _memo_for(inst: Instance) -> None:
    """Memos are per instance: clear them when another instance comes (the reference kept here
    keeps the old one alive, so identity cannot be reused)."""
    if _DUR_MEMO_INST[0] is not inst:
        _DUR_MEMO.clear()
        _FACTORS_MEMO.clear()
        _DUR_MEMO_INST[0] = inst


def _memo_duration(inst: Instance, j: int, classes: Sequence[GpuClass], counts: Sequence[tuple[int, int]],
                   gpus: tuple[str, ...], ps: tuple[str, ...], level: tuple[float, float] | None,
                   nodes: Iterable[str]) -> float | None:
    _memo_for(inst)
    job = inst.jobs[j]
    sig: dict[tuple[str, float], int] = {}
    for c, k in counts:
        key_c = (classes[c].type, classes[c].factor(job.job_class))
        sig[key_c] = sig.get(key_c, 0) + k
    gpu = inst.cluster.gpu
    key = (j, tuple(sorted(sig.items())), len(set(nodes) | set(ps)), level, len(ps),
           spans_sockets(gpu[g] for g in gpus))
    if key in _DUR_MEMO:
        return _DUR_MEMO[key]
    cpg, mpg = (None, None) if level is None else level
    try:
        d: float | None = duration(job, Allocation(gpus, ps, cpg, mpg), inst.cluster)
    except SpeedError:
        d = None
    if len(_DUR_MEMO) > 1_000_000:
        _DUR_MEMO.clear()
    _DUR_MEMO[key] = d
    return d


def exact_candidates(inst: Instance, j: int, classes: Sequence[GpuClass], sel: Sequence[int],
                      vec: Sequence[int], kind: str) -> tuple[list[Candidate], bool]:
    """Exact candidates of job j for the count vector ``vec`` over classes ``sel``."""
    job = inst.jobs[j]
    counts = tuple((c, k) for c, k in zip(sel, vec) if k)
    node_counts: dict[str, int] = {}
    type_counts: dict[str, int] = {}
    gpus: list[str] = []
    for c, k in counts:
        cl = classes[c]
        node_counts[cl.node] = node_counts.get(cl.node, 0) + k
        type_counts[cl.type] = type_counts.get(cl.type, 0) + k
        gpus.extend(cl.ids[:k])
    ps_opts, ps_full = _ps_options(inst, job, list(node_counts), sum(vec))
    options = []
    for level in _level_options(job):
        for ps in ps_opts:
            d = _memo_duration(inst, j, classes, counts, tuple(gpus), tuple(ps), level, node_counts)
            if d is None:
                continue
            cpu, mem = _usage(inst, job, node_counts, level, ps)
            options.append(((level, ps), cpu, mem, d))
    out = []
    n = sum(vec)
    for (level, ps), cpu, mem, d in _pareto(options):
        out.append(Candidate(
            job=j, kind=kind, duration=d, n=n, counts=counts,
            node=next(iter(node_counts)) if kind == "node" else None,
            type_counts=tuple(sorted(type_counts.items())), level=level, ps_nodes=tuple(ps),
            cpu=tuple(sorted(cpu.items())), mem=tuple(sorted(mem.items())),
            node_counts=tuple(sorted(node_counts.items())),
        ))
    return out, ps_full


def optimistic_duration(inst: Instance, job: Job, pool: Sequence[GpuClass], type_counts: Mapping[str, int],
                        spread: bool) -> float:
    """A lower bound of ``speed.duration`` over every allocation that takes ``type_counts[t]`` GPUs of
    type t from ``pool`` (one node when ``spread`` is False, several nodes otherwise), with any
    CPU/memory level and any PS placement. It mirrors SPEC §2 with each free choice made optimistically:
    the fastest GPUs of each type, the best level, the best PS count, no interference."""
    c = inst.cluster
    cls = job.job_class
    n = sum(type_counts.values())
    _memo_for(inst)
    fkey = (cls, tuple((g.index, g.node, g.type, g.size) for g in pool))
    factors = _FACTORS_MEMO.get(fkey)  # type: ignore[assignment]
    if factors is None:
        factors = {}
        for g in pool:
            factors.setdefault(g.type, []).extend([g.factor(cls)] * g.size)
        for t in factors:
            factors[t].sort()
        if len(_FACTORS_MEMO) > 10_000:
            _FACTORS_MEMO.clear()
        _FACTORS_MEMO[fkey] = factors
    pen = c.locality_penalty if spread else 1.0
    step = None
    if job.ps is None and len(type_counts) == 1:
        t, k = next(iter(type_counts.items()))
        worst = factors[t][k - 1]                      # the worst of k GPUs is at least the k-th best
        if not spread and k in job.measured.get(t, {}):
            step = worst / job.measured[t][k]
        elif spread and k in job.measured.get(f"{t}/spread", {}):
            step = worst / job.measured[f"{t}/spread"][k]
        elif spread and k in job.measured.get(t, {}):
            step = worst / job.measured[t][k] * c.locality_penalty
    if step is None:
        if c.split == "proportional":
            s = 0.0
            for t, k in type_counts.items():
                s += sum(math.inf if f == 0 else job.samples_per_s[t] / f for f in factors[t][:k])
            compute = job.batch / s
        else:
            rmin = min(math.inf if factors[t][k - 1] == 0 else job.samples_per_s[t] / factors[t][k - 1]
                       for t, k in type_counts.items())
            compute = job.batch / (n * rmin)
        if job.ps is not None:
            comm = min(ps_overhead_s(job.ps.theta, n, p) for p in ps_counts(job, n))
        else:
            comm = allreduce_s(job.comm_mb, n, c.inter_node_gbps if spread else c.intra_node_gbps)
        step = (compute + comm) * pen
    best_speedup = max([1.0] + ([s for _, _, s in job.cpu_mem.levels] if job.cpu_mem is not None else []))
    return job.iterations * step / best_speedup


def _type_vectors(job: Job, avail: Mapping[str, int], n: int) -> Iterator[dict[str, int]]:
    types = [t for t in sorted(avail) if job.can_use(t) and avail[t] > 0]
    for vec in count_vectors([avail[t] for t in types], n):
        yield {t: k for t, k in zip(types, vec) if k}


_VEC_CACHE: dict[tuple[tuple[int, ...], int], Any] = {}


def count_matrix(caps: Sequence[int], n: int) -> Any:
    """:func:`count_vectors` as an int array (rows in the same order), cached per (caps, n)."""
    key = (tuple(caps), n)
    m = _VEC_CACHE.get(key)
    if m is None:
        rows = list(count_vectors(caps, n))
        m = np.array(rows, dtype=np.int64).reshape(len(rows), len(caps))
        if len(_VEC_CACHE) > 4096:
            _VEC_CACHE.clear()
        _VEC_CACHE[key] = m
    return m


#: vectorised durations are lowered by this relative amount so that rounding differences with
#: ``speed.duration`` (summation order) can never make a model cost exceed the true duration
VEC_SAFETY = 1e-13


def _fast_job(job: Job) -> bool:
    """Jobs whose single-node durations :func:`_node_candidates_fast` computes in bulk: all-reduce,
    no CPU/memory levels, no measured table (SPEC §2: compute + all-reduce only)."""
    return job.ps is None and job.cpu_mem is None and not job.measured


def _node_candidates_fast(inst: Instance, j: int, sel: Sequence[GpuClass], n: int, sizes_exact: set[int],
                          prune: bool) -> list[Candidate]:
    """Exact single-node candidates of a :func:`_fast_job` on the classes ``sel`` (one node), all
    count vectors at once with numpy. With ``prune``, a vector is dropped when the best ``n1`` of its
    GPUs (``n1 < n`` a size enumerated exactly on this node) are at least as fast: that candidate
    uses a subset of the GPUs, CPUs and memory for no longer, so some optimum never uses the
    dropped one (the model's optimum and infeasibility are unchanged)."""
    job = inst.jobs[j]
    c = inst.cluster
    cls = job.job_class
    facs = [cl.factor(cls) for cl in sel]
    rho = np.array([job.samples_per_s[cl.type] / f for cl, f in zip(sel, facs)], dtype=float)
    V = count_matrix([cl.size for cl in sel], n)
    comm = allreduce_s(job.comm_mb, n, c.intra_node_gbps)
    sockets = sorted({cl.socket for cl in sel if cl.socket is not None})
    # classes × sockets: a row spanning two sockets is qpi_factor slower (SPEC §2, v1.1)
    on_socket = np.array([[cl.socket == s for s in sockets] for cl in sel], dtype=float).reshape(len(sel), -1)

    def qpi(vecs: Any) -> Any:
        if c.qpi_factor == 1.0 or len(sockets) < 2:
            return 1.0
        return np.where(((vecs @ on_socket) > 0).sum(axis=1) > 1, c.qpi_factor, 1.0)

    def step(k: int, vecs: Any) -> Any:
        if c.split == "proportional":
            return (job.batch / (vecs @ rho) + allreduce_s(job.comm_mb, k, c.intra_node_gbps)) * qpi(vecs)
        mn = np.where(vecs > 0, rho[None, :], np.inf).min(axis=1)
        return (job.batch / (k * mn) + allreduce_s(job.comm_mb, k, c.intra_node_gbps)) * qpi(vecs)

    st = step(n, V)
    keep = np.ones(len(V), dtype=bool)
    if prune and n > 1:
        order = np.argsort(-rho, kind="stable")
        Vs = V[:, order]
        before = np.cumsum(Vs, axis=1) - Vs
        for n1 in sorted(sizes_exact):
            if n1 >= n:
                continue
            take = np.clip(n1 - before, 0, Vs)
            sub = np.empty_like(V)
            sub[:, order] = take
            keep &= ~(step(n1, sub) <= st)
    del comm
    dur = job.iterations * st * (1.0 - VEC_SAFETY)
    node = sel[0].node
    nd = c.node[node]
    meta = _row_meta(tuple((cl.index, cl.type, cl.size) for cl in sel), V, n)
    cpu = ((node, n * nd.fair_cpus),)
    mem = ((node, n * nd.fair_mem_gb),)
    ncount = ((node, n),)
    durs = dur.tolist()
    return [Candidate(j, "node", durs[r], n, meta[r][0], node, meta[r][1], None, (), cpu, mem, ncount)
            for r in np.nonzero(keep)[0].tolist()]


_META_CACHE: dict[tuple, list[tuple[tuple, tuple]]] = {}


def _row_meta(sig: tuple[tuple[int, str, int], ...], V: Any, n: int) -> list[tuple[tuple, tuple]]:
    """(counts, type_counts) of every row of ``V`` over the classes ``sig`` (index, type, size: the sizes and
    ``n`` determine ``V``, so the cache, shared by every instance of the process, keys on them)."""
    key = (sig, n)
    got = _META_CACHE.get(key)
    if got is None:
        got = []
        for vec in V.tolist():
            counts = tuple((ci, k) for (ci, _, _), k in zip(sig, vec) if k)
            tcs: dict[str, int] = {}
            for (_, t, _), k in zip(sig, vec):
                if k:
                    tcs[t] = tcs.get(t, 0) + k
            got.append((counts, tuple(sorted(tcs.items()))))
        if len(_META_CACHE) > 4096:
            _META_CACHE.clear()
        _META_CACHE[key] = got
    return got


def _relaxed_node(inst: Instance, j: int, sel: Sequence[GpuClass], v: str, n: int) -> list[Candidate]:
    job = inst.jobs[j]
    avail: dict[str, int] = {}
    for cl in sel:
        avail[cl.type] = avail.get(cl.type, 0) + cl.size
    out = []
    for tv in _type_vectors(job, avail, n):
        d = optimistic_duration(inst, job, sel, tv, spread=False)
        out.append(Candidate(j, "relaxed-node", d, n, node=v, type_counts=tuple(sorted(tv.items()))))
    return out


def enumerate_candidates(inst: Instance, params: CandidateParams = CandidateParams(),
                         exact_spread: bool | None = None, budget: Budget | None = None,
                         prune: bool = True) -> CandidateSet:
    """Candidate allocations of every job (see the module docstring).

    Single-node allocations are enumerated exactly (count vectors over the node's classes) unless a
    (job, node, size) has more than ``params.node_cap`` of them; multi-node ones exactly when a (job, size)
    has at most ``params.spread_cap`` of them (or ``exact_spread`` forces it), otherwise by relaxed
    candidates per GPU-type count vector.

    Speed: single-node candidates of plain all-reduce jobs are priced in bulk with numpy
    (:func:`_node_candidates_fast`, with dominance pruning when ``prune``); the others go through
    ``speed.duration``. ``budget``: once it has run out, the remaining jobs get relaxed candidates
    only (one per node and GPU-type vector, one per spread type vector), so the set stays complete
    (a relaxation: bounds remain valid) and the enumeration returns promptly.
    """
    t0 = time.perf_counter()
    classes = gpu_classes(inst)
    by_node: dict[str, list[GpuClass]] = {}
    for cl in classes:
        by_node.setdefault(cl.node, []).append(cl)
    complete = True
    per_job = []
    cut = False
    for j, job in enumerate(inst.jobs):
        if not cut and budget is not None and budget.expired():
            cut = True
        cands: list[Candidate] = []
        usable = [cl for cl in classes if job.can_use(cl.type)]
        fast = _fast_job(job) and all(cl.factor(job.job_class) > 0 for cl in usable)
        for n in job.sizes:
            # ---- one node
            for v, cls_v in by_node.items():
                sel = [cl for cl in cls_v if job.can_use(cl.type)]
                caps = [cl.size for cl in sel]
                if sum(caps) < n:
                    continue
                # within a job too, vector by vector: the exact candidates of one PS job can take long
                # (every placement × level); past the budget its relaxed ones cover the rest
                if not cut and count_vectors_number(caps, n) <= params.node_cap:
                    if fast:
                        exact_sizes = {k for k in job.sizes if count_vectors_number(caps, k) <= params.node_cap}
                        cands.extend(_node_candidates_fast(inst, j, sel, n, exact_sizes, prune))
                        continue
                    for vec in count_vectors(caps, n):
                        if budget is not None and budget.expired():
                            cut = True
                            cands.extend(_relaxed_node(inst, j, sel, v, n))
                            break
                        cs, full = exact_candidates(inst, j, classes, [cl.index for cl in sel], vec, "node")
                        cands.extend(cs)
                        complete &= full
                else:
                    cands.extend(_relaxed_node(inst, j, sel, v, n))
            # ---- several nodes
            if n < 2 or len({cl.node for cl in usable}) < 2:
                continue
            caps = [cl.size for cl in usable]
            total = count_vectors_number(caps, n)
            single = sum(count_vectors_number([cl.size for cl in cls_v if job.can_use(cl.type)], n)
                         for cls_v in by_node.values())
            do_exact = exact_spread if exact_spread is not None else (total - single <= params.spread_cap)
            if do_exact and not cut:
                for vec in count_vectors(caps, n):
                    if budget is not None and budget.expired():
                        cut = True          # the relaxed spread candidates below cover the vectors left
                        break
                    if len({usable[i].node for i, k in enumerate(vec) if k}) < 2:
                        continue
                    cs, full = exact_candidates(inst, j, classes, [cl.index for cl in usable], vec, "spread")
                    cands.extend(cs)
                    complete &= full
            if not do_exact or cut:
                avail = {}
                for cl in usable:
                    avail[cl.type] = avail.get(cl.type, 0) + cl.size
                for tv in _type_vectors(job, avail, n):
                    d = optimistic_duration(inst, job, usable, tv, spread=True)
                    cands.append(Candidate(j, "relaxed-spread", d, n, type_counts=tuple(sorted(tv.items()))))
        per_job.append(tuple(cands))
    return CandidateSet(classes, tuple(per_job), complete, time.perf_counter() - t0)
