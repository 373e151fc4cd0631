"""Shared helpers of the oracle formulations (static and offline): a stable API.

What lives here
---------------
* :func:`gpu_classes` — GPUs grouped into *classes* of interchangeable GPUs (same node, same type,
  same variability vector). Two GPUs of one class are symmetric for every job, so a model decides
  *how many* GPUs of each class a job takes, never which ones (symmetry breaking by construction).
* :func:`enumerate_candidates` — per job, the candidate allocations ("patterns"): a count vector over
  GPU classes, a CPU/memory level and PS nodes, each priced by :func:`jctlab.speed.duration`. Where
  exhaustive enumeration would explode, *relaxed* candidates stand in for a whole family of
  allocations with a duration that is a lower bound of every member (:func:`optimistic_duration`);
  a model over exact + relaxed candidates is a relaxation of the static problem, so its bound is
  valid, and a solution that uses no relaxed candidate is feasible (hence optimal if proven).
* :class:`PackingModel` — the set-packing model over candidates (one binary per candidate, exactly
  one per job, capacity rows per GPU class / node / type pool / node CPU / node memory) that the
  CP-SAT, HiGHS and CBC back ends all read.
* :func:`integer_costs` — time scaling to integers for CP-SAT, rounding *down* so that the scaled
  model's bound, divided back, never exceeds the true optimum.
* :func:`static_schedule`, :func:`finish` — turn allocations into a ``jctlab.schedule/1`` schedule,
  replay it (with interference) and build the :class:`jctlab.result.Result` with the status rules.

Interference is relaxed everywhere here (durations are ``speed.duration``, without it); schedules
are always reported with their replayed objective, and since interference only slows jobs down the
bounds stay valid.
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

from jctlab.model import Allocation, Claimed, Instance, Job, Schedule, Segment
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus
from jctlab.speed import SpeedError, allreduce_s, duration, ps_overhead_s

#: relative gap under which a replayed objective and a proven bound count as equal ("zero gap" at the
#: precision of the replay check, SPEC §4).
GAP_TOL = 1e-6

#: enumeration caps (per job): above them relaxed candidates are used instead of explicit ones
NODE_CAP = 4000       # count vectors of one (job, node, size)
SPREAD_CAP = 64        # multi-node count vectors of one (job, size)
PS_FULL_NODES = 6     # PS servers may go on any node when the cluster has at most this many nodes


# --------------------------------------------------------------------------- GPU classes


@dataclass(frozen=True)
class GpuClass:
    """Interchangeable GPUs: same node, type and variability vector (ids in index order)."""

    index: int
    node: str
    type: str
    variability: tuple[tuple[str, float], ...]
    ids: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.ids)

    def factor(self, job_class: str | None) -> float:
        if job_class is None:
            return 1.0
        return dict(self.variability).get(job_class, 1.0)


def gpu_classes(inst: Instance) -> tuple[GpuClass, ...]:
    """Group the cluster's GPUs into classes of identical GPUs, node by node, in GPU order."""
    out: list[GpuClass] = []
    for node in inst.cluster.nodes:
        groups: dict[tuple, list[str]] = {}
        for g in node.gpus:
            key = (g.type, tuple(sorted(g.variability.items())))
            groups.setdefault(key, []).append(g.id)
        for (t, var), ids in groups.items():
            out.append(GpuClass(len(out), node.name, t, var, tuple(ids)))
    return tuple(out)


# --------------------------------------------------------------------------- candidates


@dataclass(frozen=True)
class Candidate:
    """One allocation choice of one job.

    ``kind``: ``node`` (all GPUs on one node), ``spread`` (several nodes) — both exact, priced by
    ``speed.duration`` — or ``relaxed-node`` / ``relaxed-spread``: a family of allocations (one node,
    resp. several nodes, with the GPU-type counts ``type_counts``) whose ``duration`` is a lower
    bound of every member; relaxed candidates use no CPU/memory and only aggregate GPU capacity,
    except *sub-families* (:func:`split_family`): relaxed candidates with ``counts``, whose GPUs of
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


def _speedup(job: Job, level: tuple[float, float] | None) -> float:
    if level is None or job.cpu_mem is None:
        return 1.0
    s = job.cpu_mem.speedup(*level)
    return 1.0 if s is None else s


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


def _ps_options(inst: Instance, job: Job, nodes: Sequence[str]) -> tuple[list[tuple[str, ...]], bool]:
    """PS node multisets for a GPU set on ``nodes``; the flag says whether the list is exhaustive."""
    if job.ps is None:
        return [()], True
    full = len(inst.cluster.nodes) <= PS_FULL_NODES
    pool = [n.name for n in inst.cluster.nodes] if full else sorted(nodes)
    out = []
    for p in range(1, job.ps.max_ps + 1):
        out.extend(itertools.combinations_with_replacement(pool, p))
    return out, full


def _pareto(options: list[tuple[tuple, dict[str, float], dict[str, float], float]]) -> list[tuple]:
    """Drop (level, ps) options using no less CPU and memory on every node for no more speed."""
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


#: memo of ``speed.duration`` per (job, multiset of (type, factor), nodes spanned, level, #PS): the
#: speed model depends on nothing else (SPEC §2), so identical keys give identical durations
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
    key = (j, tuple(sorted(sig.items())), len(set(nodes) | set(ps)), level, len(ps))
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


def _exact_candidates(inst: Instance, j: int, classes: Sequence[GpuClass], sel: Sequence[int],
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
    ps_opts, ps_full = _ps_options(inst, job, list(node_counts))
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
            comm = min(ps_overhead_s(job.ps.theta, n, p) for p in range(1, job.ps.max_ps + 1))
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
    import numpy as np

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
    import numpy as np

    job = inst.jobs[j]
    c = inst.cluster
    cls = job.job_class
    facs = [cl.factor(cls) for cl in sel]
    rho = np.array([job.samples_per_s[cl.type] / f for cl, f in zip(sel, facs)], dtype=float)
    V = count_matrix([cl.size for cl in sel], n)
    comm = allreduce_s(job.comm_mb, n, c.intra_node_gbps)

    def step(k: int, vecs: Any) -> Any:
        if c.split == "proportional":
            return job.batch / (vecs @ rho) + allreduce_s(job.comm_mb, k, c.intra_node_gbps)
        mn = np.where(vecs > 0, rho[None, :], np.inf).min(axis=1)
        return job.batch / (k * mn) + allreduce_s(job.comm_mb, k, c.intra_node_gbps)

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
    meta = _row_meta(tuple((cl.index, cl.type) for cl in sel), V, n)
    cpu = ((node, n * nd.fair_cpus),)
    mem = ((node, n * nd.fair_mem_gb),)
    ncount = ((node, n),)
    durs = dur.tolist()
    return [Candidate(j, "node", durs[r], n, meta[r][0], node, meta[r][1], None, (), cpu, mem, ncount)
            for r in np.nonzero(keep)[0].tolist()]


_META_CACHE: dict[tuple, list[tuple[tuple, tuple]]] = {}


def _row_meta(sig: tuple[tuple[int, str], ...], V: Any, n: int) -> list[tuple[tuple, tuple]]:
    """(counts, type_counts) of every row of ``V`` over the classes ``sig`` (cached)."""
    key = (sig, n)
    got = _META_CACHE.get(key)
    if got is None:
        got = []
        for vec in V.tolist():
            counts = tuple((ci, k) for (ci, _), k in zip(sig, vec) if k)
            tcs: dict[str, int] = {}
            for (_, t), k in zip(sig, vec):
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


def enumerate_candidates(inst: Instance, node_cap: int = NODE_CAP, spread_cap: int = SPREAD_CAP,
                         exact_spread: bool | None = None, deadline: "Deadline | None" = None,
                         prune: bool = True) -> CandidateSet:
    """Candidate allocations of every job (see the module docstring).

    Single-node allocations are enumerated exactly (count vectors over the node's classes) unless a
    (job, node, size) has more than ``node_cap`` of them; multi-node ones exactly when a (job, size)
    has at most ``spread_cap`` of them (or ``exact_spread`` forces it), otherwise by relaxed
    candidates per GPU-type count vector.

    Speed: single-node candidates of plain all-reduce jobs are priced in bulk with numpy
    (:func:`_node_candidates_fast`, with dominance pruning when ``prune``); the others go through
    ``speed.duration``. ``deadline``: once it has passed, the remaining jobs get relaxed candidates
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
        if not cut and deadline is not None and deadline.expired():
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
                if not cut and count_vectors_number(caps, n) <= node_cap:
                    if fast:
                        exact_sizes = {k for k in job.sizes if count_vectors_number(caps, k) <= node_cap}
                        cands.extend(_node_candidates_fast(inst, j, sel, n, exact_sizes, prune))
                        continue
                    for vec in count_vectors(caps, n):
                        cs, full = _exact_candidates(inst, j, classes, [cl.index for cl in sel], vec, "node")
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
            do_exact = exact_spread if exact_spread is not None else (total - single <= spread_cap)
            if do_exact and not cut:
                for vec in count_vectors(caps, n):
                    if len({usable[i].node for i, k in enumerate(vec) if k}) < 2:
                        continue
                    cs, full = _exact_candidates(inst, j, classes, [cl.index for cl in usable], vec, "spread")
                    cands.extend(cs)
                    complete &= full
            else:
                avail = {}
                for cl in usable:
                    avail[cl.type] = avail.get(cl.type, 0) + cl.size
                for tv in _type_vectors(job, avail, n):
                    d = optimistic_duration(inst, job, usable, tv, spread=True)
                    cands.append(Candidate(j, "relaxed-spread", d, n, type_counts=tuple(sorted(tv.items()))))
        per_job.append(tuple(cands))
    return CandidateSet(classes, tuple(per_job), complete, time.perf_counter() - t0)


#: share of the time limit that candidate enumeration may take before it falls back to relaxed families
ENUM_SHARE = 0.4

#: rounds of "expand the chosen relaxed families and solve again" (see :func:`solve_static`)
MAX_EXPAND_ROUNDS = 50

#: a chosen relaxed family is replaced by its exact members when it has at most this many count vectors
EXPAND_CAP = 3000

#: a larger chosen family is split into at most this many sub-families (:func:`split_family`), and only
#: while half of the time limit is left (larger models need the time to be solved)
SPLIT_CAP = 1000


def family_members(inst: Instance, classes: Sequence[GpuClass], fam: Candidate,
                   cap: int = EXPAND_CAP) -> tuple[list[Candidate], bool] | None:
    """The exact candidates of every allocation a relaxed family stands for (same job, same GPU-type
    counts, on ``fam.node`` for ``relaxed-node``, on two or more nodes for ``relaxed-spread``), with
    the flag of :func:`_exact_candidates` (PS placements exhaustive). None when the family has more
    than ``cap`` count vectors. Replacing a family by its members keeps a candidate set complete."""
    if fam.exact:
        return [fam], True
    job = inst.jobs[fam.job]
    tc = dict(fam.type_counts)
    fixed = dict(fam.counts)                      # a sub-family (see split_family): these GPUs are set
    fixed_types = {classes[c].type for c in fixed}
    pools: list[list[GpuClass]] = []
    for t in sorted(tc):
        if t in fixed_types:
            pool = [classes[c] for c in sorted(fixed) if classes[c].type == t]
        else:
            pool = [cl for cl in classes if cl.type == t and job.can_use(t)
                    and (fam.kind != "relaxed-node" or cl.node == fam.node)]
        pools.append(pool)

    def vectors(t: str, pool: list[GpuClass]) -> list[tuple[int, ...]]:
        if t in fixed_types:
            return [tuple(fixed[cl.index] for cl in pool)]
        return list(count_vectors([cl.size for cl in pool], tc[t]))

    total = 1
    for t, pool in zip(sorted(tc), pools):
        total *= 1 if t in fixed_types else count_vectors_number([cl.size for cl in pool], tc[t])
        if total > cap:
            return None
    sel = [cl.index for pool in pools for cl in pool]
    kind = "node" if fam.kind == "relaxed-node" else "spread"
    out: list[Candidate] = []
    full = True
    for parts in itertools.product(*[vectors(t, pool) for t, pool in zip(sorted(tc), pools)]):
        vec = [k for part in parts for k in part]
        if kind == "spread" and len({classes[c].node for c, k in zip(sel, vec) if k}) < 2:
            continue
        cs, f = _exact_candidates(inst, fam.job, classes, sel, vec, kind)
        out.extend(cs)
        full &= f
    return out, full


def split_family(inst: Instance, classes: Sequence[GpuClass], fam: Candidate,
                 cap: int = EXPAND_CAP) -> list[Candidate] | None:
    """A relaxed family too large to expand, split into sub-families by the exact GPUs of one of its
    GPU types (the type with the fewest count vectors, at most ``cap``): each sub-family fixes those
    GPUs (``counts``: class rows) and keeps the other types aggregated (type / node rows), with the
    optimistic duration over its own members (:func:`optimistic_duration` on a pool holding exactly
    the fixed GPUs of that type). The sub-families partition the family's members, so the model stays
    a relaxation, and each is tighter and expandable later (:func:`family_members`). None when no
    type qualifies (one free type only, or too many vectors)."""
    if fam.exact:
        return None
    job = inst.jobs[fam.job]
    tc = dict(fam.type_counts)
    fixed = dict(fam.counts)
    fixed_types = {classes[c].type for c in fixed}
    free_types = [t for t in sorted(tc) if t not in fixed_types]
    if len(free_types) < 2:
        return None

    def pool_of(t: str) -> list[GpuClass]:
        return [cl for cl in classes if cl.type == t and job.can_use(t)
                and (fam.kind != "relaxed-node" or cl.node == fam.node)]

    best_t = min(free_types, key=lambda t: (count_vectors_number([cl.size for cl in pool_of(t)], tc[t]), t))
    pool_t = pool_of(best_t)
    if count_vectors_number([cl.size for cl in pool_t], tc[best_t]) > cap:
        return None
    rest = [cl for t in free_types if t != best_t for cl in pool_of(t)]
    kept = [classes[c] for c in sorted(fixed)]
    out = []
    for vec in count_vectors([cl.size for cl in pool_t], tc[best_t]):
        counts = dict(fixed)
        for cl, k in zip(pool_t, vec):
            if k:
                counts[cl.index] = counts.get(cl.index, 0) + k
        # a pool with exactly the fixed GPUs (class sizes cut to the counts) + the free types' classes
        pool = [GpuClass(cl.index, cl.node, cl.type, cl.variability, cl.ids[:counts[cl.index]])
                for cl in kept + [cl for cl, k in zip(pool_t, vec) if k]] + rest
        d = optimistic_duration(inst, job, pool, tc, spread=fam.kind == "relaxed-spread")
        out.append(Candidate(fam.job, fam.kind, d, fam.n, counts=tuple(sorted(counts.items())), node=fam.node,
                             type_counts=fam.type_counts))
    return out


def expand_families(inst: Instance, cset: CandidateSet, fams: Iterable[Candidate],
                    cap: int = EXPAND_CAP, split: bool = True) -> tuple[CandidateSet, int]:
    """``cset`` with each relaxed family of ``fams`` that has at most ``cap`` members replaced by
    them, and each larger one split into sub-families (``split``, :func:`split_family`); returns (new
    set, number of families expanded or split)."""
    per_job = [list(cs) for cs in cset.per_job]
    complete = cset.complete
    done = 0
    for fam in dict.fromkeys(f for f in fams if not f.exact):
        got = family_members(inst, cset.classes, fam, cap)
        if got is None:
            subs = split_family(inst, cset.classes, fam, SPLIT_CAP) if split else None
            if subs is None:
                continue
            got = (subs, True)
        members, full = got
        lst = per_job[fam.job]
        k = lst.index(fam)
        lst[k:k + 1] = members
        complete &= full
        done += 1
    new = CandidateSet(cset.classes, tuple(tuple(x) for x in per_job), complete, cset.enum_s)
    return new, done


# --------------------------------------------------------------------------- the packing model


def objective_weights(inst: Instance) -> list[float]:
    """Per-job coefficient of a duration in the objective (static class: JCT = duration).
    For ``makespan`` every weight is 1 and the objective is the maximum instead of the sum."""
    jobs = inst.jobs
    if inst.objective == "makespan":
        return [1.0] * len(jobs)
    if inst.objective == "weighted_jct":
        w = sum(j.weight for j in jobs)
        return [j.weight / w for j in jobs]
    return [1.0 / len(jobs)] * len(jobs)


@dataclass(frozen=True)
class Row:
    """sum(coef * x[col]) <= ub."""

    name: str
    cols: tuple[int, ...]
    coefs: tuple[float, ...]
    ub: float


@dataclass(frozen=True)
class PackingModel:
    """Set packing over candidates: ``cols[i]`` is a candidate, ``groups[j]`` the columns of job j
    (exactly one is chosen), ``rows`` the capacity constraints, ``cost[i]`` its objective term
    (weight × duration; for makespan the duration, the objective being max over chosen)."""

    cands: CandidateSet
    cols: tuple[Candidate, ...]
    groups: tuple[tuple[int, ...], ...]
    rows: tuple[Row, ...]
    cost: tuple[float, ...]
    makespan: bool

    def trivial_bound(self) -> float:
        """Every job on its own best candidate (valid when the candidate set is complete)."""
        best = [min((self.cost[i] for i in g), default=math.inf) for g in self.groups]
        return max(best) if self.makespan else sum(best)

    def objective_of(self, chosen: Sequence[int]) -> float:
        vals = [self.cost[i] for i in chosen]
        return max(vals) if self.makespan else sum(vals)


def build_packing(inst: Instance, cset: CandidateSet) -> PackingModel:
    cols: list[Candidate] = []
    groups = []
    for cs in cset.per_job:
        groups.append(tuple(range(len(cols), len(cols) + len(cs))))
        cols.extend(cs)
    w = objective_weights(inst)
    makespan = inst.objective == "makespan"
    cost = tuple(c.duration if makespan else w[c.job] * c.duration for c in cols)
    classes = cset.classes
    rows: list[Row] = []
    # GPU class capacity
    per_class: dict[int, list[tuple[int, int]]] = {}
    per_node: dict[str, list[tuple[int, int]]] = {}
    per_type: dict[str, list[tuple[int, int]]] = {}
    has_rnode = any(c.kind == "relaxed-node" for c in cols)
    has_rspread = any(c.kind == "relaxed-spread" for c in cols)
    for i, c in enumerate(cols):
        for cl, k in c.counts:
            per_class.setdefault(cl, []).append((i, k))
        if has_rnode:
            if c.kind == "relaxed-node":
                per_node.setdefault(c.node, []).append((i, c.n))   # type: ignore[arg-type]
            for v, k in c.node_counts:
                per_node.setdefault(v, []).append((i, k))
        if has_rspread:
            for t, k in c.type_counts:
                per_type.setdefault(t, []).append((i, k))
    for cl, items in sorted(per_class.items()):
        rows.append(Row(f"class{cl}", tuple(i for i, _ in items), tuple(float(k) for _, k in items),
                        float(classes[cl].size)))
    node_size = {n.name: len(n.gpus) for n in inst.cluster.nodes}
    for v, items in sorted(per_node.items()):
        rows.append(Row(f"node:{v}", tuple(i for i, _ in items), tuple(float(k) for _, k in items), float(node_size[v])))
    type_size: dict[str, int] = {}
    for g in inst.cluster.gpus:
        type_size[g.type] = type_size.get(g.type, 0) + 1
    for t, items in sorted(per_type.items()):
        rows.append(Row(f"type:{t}", tuple(i for i, _ in items), tuple(float(k) for _, k in items), float(type_size[t])))
    # CPU / memory per node, only where they can bind (never with fair shares only: a node's GPUs
    # at their fair share use at most its CPUs and memory, and the GPU rows already hold)
    fair_only = all(j.cpu_mem is None and j.ps is None for j in inst.jobs)
    for res in (() if fair_only else ("cpu", "mem")):
        per: dict[str, list[tuple[int, float]]] = {}
        for i, c in enumerate(cols):
            for v, x in getattr(c, res):
                if x > 0:
                    per.setdefault(v, []).append((i, x))
        for v, items in sorted(per.items()):
            nd = inst.cluster.node[v]
            cap = nd.cpus if res == "cpu" else nd.mem_gb
            worst = 0.0
            by_job: dict[int, float] = {}
            for i, x in items:
                by_job[cols[i].job] = max(by_job.get(cols[i].job, 0.0), x)
            worst = sum(by_job.values())
            if worst <= cap * (1 + 1e-12):
                continue
            rows.append(Row(f"{res}:{v}", tuple(i for i, _ in items), tuple(x for _, x in items), float(cap)))
    return PackingModel(cset, tuple(cols), tuple(groups), tuple(rows), cost, makespan)


def integer_costs(costs: Sequence[float], jobs: int, rel: float = 1e-8) -> tuple[list[int], float]:
    """Scale costs to integers rounding DOWN: ``floor(c * scale)``. With J jobs the scaled optimum
    is within J/scale of the true one; ``scale`` is chosen so that this is at most ``rel`` times the
    smallest positive cost times... (a relative resolution of ``rel`` per job). Returns (ints, scale);
    any bound of the integer model divided by ``scale`` is a valid bound of the real one."""
    pos = [c for c in costs if c > 0 and math.isfinite(c)]
    if not pos:
        return [0] * len(costs), 1.0
    lo, hi = min(pos), max(pos)
    scale = 1.0 / (lo * rel)
    # keep every coefficient (and a sum over jobs) well inside int64 and CP-SAT's comfort zone
    limit = 2.0 ** 50 / max(1, jobs)
    if hi * scale > limit:
        scale = limit / hi
    return [int(math.floor(c * scale)) for c in costs], scale


# --------------------------------------------------------------------------- schedules and results


def static_schedule(inst: Instance, allocs: Sequence[Allocation], method: str) -> Schedule:
    """One segment per job, every start at 0 (SPEC §3 static)."""
    segs = tuple(Segment(j.name, 0.0, None, a) for j, a in zip(inst.jobs, allocs))
    return Schedule(inst.name, method, segs)


def timed_schedule(inst: Instance, starts: Sequence[float], allocs: Sequence[Allocation], method: str) -> Schedule:
    """One segment per job with the given starts (offline class)."""
    segs = tuple(Segment(j.name, float(s), None, a) for j, s, a in zip(inst.jobs, starts, allocs))
    return Schedule(inst.name, method, segs)


def replay_objective(inst: Instance, sched: Schedule) -> float | None:
    """The replayed objective of a schedule, or None when it is invalid."""
    rep = replay(inst, sched.with_claim(Claimed()) if sched.claimed else sched)
    return rep.objective if rep.valid else None


def hint_allocations(inst: Instance, hint: Schedule | None) -> list[Allocation] | None:
    """The per-job allocations of a hint schedule (None when it does not cover every job)."""
    if hint is None:
        return None
    by = {s.job: s.alloc for s in hint.segments}
    if any(j.name not in by for j in inst.jobs):
        return None
    return [by[j.name] for j in inst.jobs]


def match_candidate(model: PackingModel, j: int, alloc: Allocation) -> int | None:
    """The column of job j that represents ``alloc`` (exact match, else the relaxed family)."""
    classes = model.cands.classes
    where: dict[str, int] = {}
    for cl in classes:
        for g in cl.ids:
            where[g] = cl.index
    try:
        cnt: dict[int, int] = {}
        for g in alloc.gpus:
            cnt[where[g]] = cnt.get(where[g], 0) + 1
    except KeyError:
        return None
    counts = tuple(sorted(cnt.items()))
    level = None if alloc.cpus_per_gpu is None else (alloc.cpus_per_gpu, alloc.mem_gb_per_gpu)
    types: dict[str, int] = {}
    nodes = set()
    for c, k in counts:
        types[classes[c].type] = types.get(classes[c].type, 0) + k
        nodes.add(classes[c].node)
    tc = tuple(sorted(types.items()))
    fallback = None
    best_exact = None
    for i in model.groups[j]:
        c = model.cols[i]
        if c.exact and tuple(sorted(c.counts)) == counts:
            if c.level == level and tuple(sorted(c.ps_nodes)) == tuple(sorted(alloc.ps_nodes)):
                return i
            if best_exact is None or c.duration < model.cols[best_exact].duration:
                best_exact = i
        elif not c.exact and c.type_counts == tc and all(cnt.get(cl, 0) >= k for cl, k in c.counts):
            if (c.kind == "relaxed-spread") == (len(nodes) > 1) and (c.node is None or c.node in nodes):
                fallback = i
    return fallback if fallback is not None else best_exact


def solver_versions() -> dict[str, str]:
    out = {}
    try:
        import ortools

        out["ortools"] = ortools.__version__
    except Exception:  # pragma: no cover
        pass
    try:
        import highspy

        out["highspy"] = highspy.Highs().version()
    except Exception:  # pragma: no cover
        pass
    try:
        import pulp

        out["pulp"] = pulp.__version__
    except Exception:  # pragma: no cover
        pass
    return out


def checked_bound(bound: float | None, obj: float, params: dict) -> float | None:
    """A proven ``bound`` against the replayed objective ``obj`` of a valid schedule: at most ``obj``
    (above it by floating noise: clamped to it). A bound above ``obj`` by more than GAP_TOL·|obj| is a wrong
    proof (a solver bug: CP-SAT 9.15 certified optima above a known schedule with
    ``core_minimization_level`` 0, docs/oracle-offline.md, follow-up 25): it is dropped (None, so the status
    cannot be ``optimal``) and recorded in ``params["bound_conflict"]``."""
    if bound is None or bound <= obj:
        return bound
    if bound - obj <= GAP_TOL * abs(obj):
        return obj
    params["bound_conflict"] = {"bound": bound, "objective": obj}
    return None


def finish(inst: Instance, method: str, schedule: Schedule | None, bound: float | None, t0: float, solver: str,
           version: str = "", params: Mapping[str, Any] | None = None, infeasible: bool = False,
           error: str | None = None) -> Result:
    """Build a Result: replay the schedule (objective = replayed objective), clamp the bound, set the
    status (SPEC §4): ``optimal`` iff replayed objective − bound ≤ GAP_TOL·objective (a zero-gap
    certificate at replay precision), ``feasible`` otherwise; with no schedule ``infeasible`` (when
    proven), ``timeout_no_solution`` or ``error``."""
    params = dict(params or {})
    if error is not None:
        params["error"] = error
    runtime = time.perf_counter() - t0
    if bound is not None and not math.isfinite(bound):
        bound = None
    if schedule is None:
        status = SolveStatus.ERROR if error is not None else (SolveStatus.INFEASIBLE if infeasible else SolveStatus.TIMEOUT_NO_SOLUTION)
        return Result(None, None, bound if status != SolveStatus.INFEASIBLE else None, status, runtime, solver, version, params)
    sched = Schedule(inst.name, method, schedule.segments)
    rep = replay(inst, sched)
    if not rep.valid:
        params["error"] = f"internal: decoded schedule is invalid: {rep.error}"
        return Result(None, None, bound, SolveStatus.ERROR, runtime, solver, version, params)
    obj = float(rep.objective)  # type: ignore[arg-type]
    bound = checked_bound(bound, obj, params)
    status = SolveStatus.OPTIMAL if bound is not None and obj - bound <= GAP_TOL * abs(obj) else SolveStatus.FEASIBLE
    return Result(sched, obj, bound, status, runtime, solver, version, params)


def better(a: Result | None, b: Result | None) -> Result | None:
    """The result with the better (lower) replayed objective; ties keep ``a``."""
    if a is None or a.objective is None:
        return b if (b is not None and b.objective is not None) else a
    if b is None or b.objective is None:
        return a
    return b if b.objective < a.objective * (1 - 1e-12) else a


@dataclass(frozen=True)
class Deadline:
    """A wall-clock budget: ``left()`` seconds remain (inf without a limit)."""

    limit: float | None
    t0: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        if self.limit is None:
            return math.inf
        return self.limit - (time.perf_counter() - self.t0)

    def expired(self) -> bool:
        return self.left() <= 0


def chunks(xs: Iterable[Any], k: int) -> Iterator[list[Any]]:
    it = iter(xs)
    while True:
        c = list(itertools.islice(it, k))
        if not c:
            return
        yield c


# --------------------------------------------------------------------------- static driver

#: share of the remaining time the greedy heuristic may take (after the market matching)
GREEDY_SHARE = 0.05


def matching_allocations(inst: Instance, seed: int = 0) -> list[Allocation] | None:
    """Per-job allocations of ``matching.methods.matching`` (market prices + polish, replay-valid),
    or None when it does not apply to the instance (other objectives or features) or fails."""
    try:
        from matching.methods import matching

        r = matching(inst, seed=seed)
    except Exception:  # noqa: BLE001 - an optional incumbent: any failure just means "none"
        return None
    if r.schedule is None or r.objective is None:
        return None
    return hint_allocations(inst, r.schedule)



@dataclass(frozen=True)
class BackendAnswer:
    """What a back end returns: chosen column per job (None: no solution), a valid bound of the
    packing model's optimum (None: none), whether the model is proven infeasible, and details."""

    chosen: tuple[int, ...] | None
    bound: float | None
    infeasible: bool = False
    proven: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


def _within_deadline(backend: Any) -> Any:
    """``backend`` that builds no model once its deadline has passed (no solution, no bound: the caller keeps
    its incumbent and bound). Building the full model of 64 jobs on 256 GPUs (121 000 columns) alone takes
    4 s: after a reduced-cost LP that ran out of time, a 3-s ``cpsat`` solve returned after 7.5 s."""

    def run(model: PackingModel, hint_cols: Sequence[int | None] | None, dl: Deadline) -> BackendAnswer:
        if dl.left() <= 0:
            return BackendAnswer(None, None, info={"skipped": "out of time"})
        return backend(model, hint_cols, dl)

    return run


def static_gpu_shortage(inst: Instance) -> str | None:
    """Why no static schedule exists, by counting GPUs, or None. Every job runs from time 0 on at least
    its smallest size; so for every set T of GPU types, the jobs that can use types of T only need
    at most as many GPUs as T has (Hall's condition; solvers otherwise take seconds to prove it)."""
    have: dict[str, int] = {}
    for g in inst.cluster.gpus:
        have[g.type] = have.get(g.type, 0) + 1
    types = sorted(have)
    need = []
    for job in inst.jobs:
        usable = frozenset(t for t in types if job.can_use(t))
        n = min(job.sizes)
        if n > sum(have[t] for t in usable):
            return f"job {job.name} needs {n} GPUs of types {sorted(usable)}"
        need.append((usable, n))
    for k in range(1, len(types) + 1):
        for T in itertools.combinations(types, k):
            want = sum(n for u, n in need if u <= set(T))
            if want > sum(have[t] for t in T):
                return f"jobs that can only use {list(T)} need {want} GPUs at once, the cluster has {sum(have[t] for t in T)}"
    return None


def solve_static(inst: Instance, method: str, backend: Any, *, time_limit: float | None, threads: int, seed: int,
                 hint: Schedule | None, warm: bool, solver: str, version: str, params: dict[str, Any],
                 reduce: bool = True, primal: Any = None) -> Result:
    """The static pipeline shared by every model back end: enumerate candidates, build the packing
    model, get a heuristic incumbent (``warm``) and the hint, call ``backend(model, hint_cols,
    deadline)``, decode (repairing relaxed choices), keep the better of model and heuristic schedules,
    and report the largest valid bound. ``primal``: an optional second back end used only for upper
    bounds (its solutions, never its bounds) in the reduced-cost rounds, see :func:`_reduced_solve`."""
    from .heuristic import repair, static_greedy

    t0 = time.perf_counter()
    short = static_gpu_shortage(inst)
    if short is not None:
        return finish(inst, method, None, None, t0, solver, version, {**params, "reason": short}, infeasible=True)
    dl = Deadline(time_limit, t0)
    backend = _within_deadline(backend)
    # enumeration may use up to ENUM_SHARE of the limit; after that the remaining jobs get relaxed
    # candidates only (still a relaxation), so the limit holds
    cset = enumerate_candidates(inst, deadline=None if time_limit is None else Deadline(ENUM_SHARE * time_limit, t0))
    model = build_packing(inst, cset)
    params = dict(params)
    params.update(candidates=len(model.cols), relaxed_candidates=sum(not c.exact for c in model.cols),
                  complete=cset.complete, enum_s=round(cset.enum_s, 3),
                  model_s=round(time.perf_counter() - t0, 3), time_limit=time_limit, threads=threads,
                  seed=seed, warm=warm, reduce=reduce, versions=solver_versions())
    if any(not g for g in model.groups):
        j = next(k for k, g in enumerate(model.groups) if not g)
        return finish(inst, method, None, None, t0, solver, version, params, infeasible=True,
                      error=None if cset.complete else f"job {inst.jobs[j].name} has no candidate")
    trivial = model.trivial_bound()
    incumbent: Result | None = None
    hint_allocs = hint_allocations(inst, hint)
    if hint_allocs is not None:
        incumbent = finish(inst, method, static_schedule(inst, hint_allocs, method), None, t0, solver, version, params)
        if incumbent.objective is None:
            hint_allocs, incumbent = None, None
    if warm:
        # market matching (matching.methods.matching): a replay-valid schedule within a few % of
        # the optimum in ~50 ms, far better than the greedy; the greedy still runs (it also covers
        # objectives and job features the matching does not take)
        th = time.perf_counter()
        m_allocs = matching_allocations(inst, seed)
        if m_allocs is not None:
            r = finish(inst, method, static_schedule(inst, m_allocs, method), None, t0, solver, version, params)
            if r.objective is not None and (incumbent is None or r.objective < incumbent.objective):
                incumbent, hint_allocs = r, m_allocs
            params["matching_objective"] = r.objective
        sub = Deadline(None if time_limit is None else max(0.05, GREEDY_SHARE * dl.left()))
        h = static_greedy(inst, model, seed=seed, deadline=sub)
        if h is not None:
            r = finish(inst, method, static_schedule(inst, h, method), None, t0, solver, version, params)
            if r.objective is not None and (incumbent is None or r.objective < incumbent.objective):
                incumbent, hint_allocs = r, h
        params["heuristic_s"] = round(time.perf_counter() - th, 3)
    params["heuristic_objective"] = None if incumbent is None else incumbent.objective
    expanded = 0
    bound = trivial
    best = incumbent
    for it in range(MAX_EXPAND_ROUNDS + 1):
        hint_cols = None
        if hint_allocs is not None:
            hint_cols = [match_candidate(model, j, a) for j, a in enumerate(hint_allocs)]
        if reduce and not model.makespan and len(model.cols) > REDUCE_MIN:
            ans, rinfo = _reduced_solve(model, backend, hint_cols, dl, primal=primal)
            params.update(rinfo)
        else:
            ans = backend(model, hint_cols, dl)
        params.update(ans.info)
        if cset.complete and ans.bound is not None:
            bound = max(bound, ans.bound)
        if ans.chosen is None:
            break
        cols = [model.cols[i] for i in ans.chosen]
        if all(c.exact for c in cols):
            taken: dict[int, int] = {}
            allocs = []
            for c in cols:
                allocs.append(c.allocation(model.cands.classes, taken))
                for cl, k in c.counts:
                    taken[cl] = taken.get(cl, 0) + k
        else:
            allocs = repair(inst, model, list(ans.chosen), dl)
            params["repaired"] = True
        if allocs is not None:
            r = finish(inst, method, static_schedule(inst, allocs, method), None, t0, solver, version, params)
            if r.objective is not None:
                best = better(best, r)
                if best is r:
                    hint_allocs = allocs
        if all(c.exact for c in cols) or not cset.complete or dl.left() <= 0.05:
            break
        if best is not None and best.objective is not None and best.objective - bound <= GAP_TOL * abs(best.objective):
            break
        # the answer picked relaxed families and the gap is open: replace them by their exact members
        # (the model stays a relaxation) and solve again, while enough time is left
        if time_limit is not None and dl.left() < 0.25 * time_limit:
            break
        t_x = time.perf_counter()
        cset2, done = expand_families(inst, cset, [c for c in cols if not c.exact],
                                      split=time_limit is None or dl.left() >= 0.5 * time_limit)
        if not done:
            break
        expanded += done
        cset = cset2
        model = build_packing(inst, cset)
        params.update(candidates=len(model.cols), relaxed_candidates=sum(not c.exact for c in model.cols),
                      complete=cset.complete)
        params.setdefault("expand_log", []).append((done, len(model.cols), round(time.perf_counter() - t_x, 3)))
    params["expanded"] = expanded
    if best is None or best.schedule is None:
        return finish(inst, method, None, bound, t0, solver, version, params,
                      infeasible=ans.infeasible and cset.complete)
    return finish(inst, method, best.schedule, bound, t0, solver, version, params)


# --------------------------------------------------------------------------- LP reduced-cost filtering


def restrict(model: PackingModel, keep: Sequence[int]) -> PackingModel:
    """The packing model on the columns ``keep`` (sorted original indices); rows keep their names."""
    keep = sorted(keep)
    new = {old: k for k, old in enumerate(keep)}
    groups = tuple(tuple(new[i] for i in g if i in new) for g in model.groups)
    rows = []
    for r in model.rows:
        items = [(new[i], c) for i, c in zip(r.cols, r.coefs) if i in new]
        if items:
            rows.append(Row(r.name, tuple(i for i, _ in items), tuple(c for _, c in items), r.ub))
    return PackingModel(model.cands, tuple(model.cols[i] for i in keep), groups, tuple(rows),
                        tuple(model.cost[i] for i in keep), model.makespan)


def _matrix(model: PackingModel):
    import numpy as np
    from scipy.sparse import csr_matrix

    ri, ci, v, lo, hi = [], [], [], [], []
    for k, g in enumerate(model.groups):
        ri += [k] * len(g)
        ci += list(g)
        v += [1.0] * len(g)
        lo.append(1.0)
        hi.append(1.0)
    base = len(model.groups)
    for k, r in enumerate(model.rows):
        ri += [base + k] * len(r.cols)
        ci += list(r.cols)
        v += list(r.coefs)
        lo.append(-math.inf)
        hi.append(r.ub)
    A = csr_matrix((v, (ri, ci)), shape=(base + len(model.rows), len(model.cols)))
    return A, np.array(lo), np.array(hi)


def lp_reduced_costs(model: PackingModel, dl: Deadline, per_job: int = 8, max_rounds: int = 60
                     ) -> tuple[float, Any] | None:
    """LP relaxation of a sum-objective packing model by column generation with HiGHS: start from
    each job's ``per_job`` cheapest columns, price every column exactly (rc = c − Aᵀy), add the most
    negative ones, repeat until none is negative. Returns (LP optimum, reduced costs of all columns)
    or None (infeasible, out of time, or makespan). Reduced-cost fixing then keeps only columns with
    rc ≤ UB − LP: any solution using another column costs more than UB."""
    import highspy
    import numpy as np

    if model.makespan or not model.cols:
        return None
    A, lo, hi = _matrix(model)
    At = A.T.tocsr()
    Acsc = A.tocsc()
    cost = np.array(model.cost)
    active: set[int] = set()
    for g in model.groups:
        active.update(sorted(g, key=lambda i: cost[i])[:per_job])
    # ensure the LP is feasible at the start: include columns of a greedy feasible packing if possible
    if hasattr(highspy.Highs, "resetGlobalScheduler"):
        highspy.Highs.resetGlobalScheduler(True)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    inf = highspy.kHighsInf
    nrow = A.shape[0]
    h.addRows(nrow, np.where(np.isfinite(lo), lo, -inf), hi, 0, np.zeros(nrow, dtype=np.int32),
              np.array([], dtype=np.int32), np.array([], dtype=float))
    # artificial columns make every LP feasible (big cost on the job rows)
    big = 10.0 * float(cost.sum() + 1.0)
    ng = len(model.groups)
    h.addCols(ng, np.full(ng, big), np.zeros(ng), np.full(ng, inf), ng, np.arange(ng, dtype=np.int32),
              np.arange(ng, dtype=np.int32), np.ones(ng))
    order: list[int] = []

    def add(cols: list[int]) -> None:
        sub = Acsc[:, cols]
        h.addCols(len(cols), cost[cols], np.zeros(len(cols)), np.ones(len(cols)), sub.nnz,
                  sub.indptr[:-1].astype(np.int32), sub.indices.astype(np.int32), sub.data)
        order.extend(cols)

    add(sorted(active))
    for _ in range(max_rounds):
        if dl.left() <= 0:
            return None
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        y = np.array(h.getSolution().row_dual)
        rc = cost - At.dot(y)
        cand = np.where(rc < -1e-9 * max(1.0, abs(h.getInfo().objective_function_value)))[0]
        cand = [i for i in cand if i not in active]
        if not cand:
            x = np.array(h.getSolution().col_value)
            if x[:ng].max(initial=0.0) > 1e-7:
                return None  # artificial columns in use: the relaxation is infeasible
            return float(h.getInfo().objective_function_value), rc
        # the most negative few per job
        byjob: dict[int, list[int]] = {}
        for i in sorted(cand, key=lambda i: rc[i]):
            lst = byjob.setdefault(model.cols[i].job, [])
            if len(lst) < per_job:
                lst.append(i)
        new = sorted(i for lst in byjob.values() for i in lst)
        active.update(new)
        add(new)
    return None


#: models with more columns than this go through LP reduced-cost filtering first (sum objectives)
REDUCE_MIN = 1500


#: share of the remaining time the primal back end may take for its first upper bound
PRIMAL_SHARE = 0.25


def _reduced_solve(model: PackingModel, backend: Any, hint_cols: Sequence[int | None] | None,
                   dl: Deadline, primal: Any = None) -> tuple[BackendAnswer, dict[str, Any]]:
    """Solve through LP reduced-cost filtering (exact): LP bound LB and reduced costs rc by column
    generation; an upper bound UB from the hint and from the back end on the columns with small rc;
    then the back end on the columns with rc ≤ UB − LB (every solution better than UB lies there).
    The returned bound is max(LB, min(UB, bound of the filtered model)), valid for the full model.

    ``primal`` (optional, e.g. HiGHS under CP-SAT): a back end run first on the columns with
    rc ≤ δ₀ for an upper bound only — its solution (decoded and priced on the full model) becomes
    UB and the hint, its bound is ignored; a good UB shrinks the final column set rc ≤ UB − LB.
    δ starts at min(δ₀, UB − LB), so with a good UB the first round is already the final one."""
    import numpy as np

    t = time.perf_counter()
    lp = lp_reduced_costs(model, dl)
    info: dict[str, Any] = {"lp_s": round(time.perf_counter() - t, 3)}
    if lp is None:
        info["reduce"] = "lp failed or out of time"
        return backend(model, hint_cols, dl), info
    lb, rc = lp
    info["lp_bound"] = lb
    hint_ok = hint_cols is not None and all(h is not None for h in hint_cols)
    ub = model.objective_of(hint_cols) if hint_ok else math.inf  # type: ignore[arg-type]
    best_cols = list(hint_cols) if hint_ok else None  # type: ignore[arg-type]
    tol = 1e-7 * max(1.0, abs(lb))

    def sub_solve(keep_mask: Any, share: float | None) -> tuple[BackendAnswer, list[int]]:
        keep = set(np.nonzero(keep_mask)[0].tolist())
        if best_cols is not None:
            keep.update(best_cols)
        keep_l = sorted(keep)
        sub = restrict(model, keep_l)
        pos = {old: k for k, old in enumerate(keep_l)}
        h = None if best_cols is None else [pos[i] for i in best_cols]
        sdl = dl if share is None else Deadline(max(0.05, share))
        return backend(sub, h, sdl), keep_l

    # iterative reduced-cost fixing: solve the model on the columns with rc <= delta. Any solution
    # using another column costs at least LB + delta (LB + sum of its columns' reduced costs), so
    # min(restricted bound, LB + delta) is a valid bound; stop once UB <= LB + delta (proven), else
    # grow delta (at most to UB - LB, where the restricted model holds every improving solution).
    delta = max(1e-4 * abs(lb), tol)
    if primal is not None and not (math.isfinite(ub) and ub - lb <= delta):
        t_p = time.perf_counter()
        left = dl.left()
        keep = set(np.nonzero(rc <= delta + tol)[0].tolist())
        if best_cols is not None:
            keep.update(best_cols)
        keep_l = sorted(keep)
        pos = {old: k for k, old in enumerate(keep_l)}
        pans = primal(restrict(model, keep_l), None if best_cols is None else [pos[i] for i in best_cols],
                      dl if not math.isfinite(left) else Deadline(max(0.05, PRIMAL_SHARE * left)))
        if pans.chosen is not None:
            cols_p = [keep_l[i] for i in pans.chosen]
            v = model.objective_of(cols_p)
            if v < ub:
                ub, best_cols = v, cols_p
        info.update(primal_s=round(time.perf_counter() - t_p, 3), primal_ub=ub if math.isfinite(ub) else None)
    if math.isfinite(ub):
        delta = max(min(delta, ub - lb), tol)
    info["ub_first"] = ub if math.isfinite(ub) else None
    bound = lb * (1 - 1e-9)
    proven = False
    ans = None
    rounds = 0
    round_log: list[tuple] = []
    info["round_log"] = round_log
    while True:
        rounds += 1
        final = math.isfinite(ub) and delta >= ub - lb
        left = dl.left()
        share = None if (final or not math.isfinite(left)) else 0.5 * left
        t_r = time.perf_counter()
        ans, keep = sub_solve(rc <= delta + tol, share)
        round_log.append((len(keep), round(time.perf_counter() - t_r, 3), ans.proven,
                          None if ans.bound is None else round(ans.bound, 3)))
        if ans.chosen is not None:
            cols_r = [keep[i] for i in ans.chosen]
            v = model.objective_of(cols_r)
            if v < ub:
                ub, best_cols = v, cols_r
        b_r = ans.bound if ans.bound is not None else -math.inf
        if ans.proven and ans.chosen is not None:
            b_r = max(b_r, model.objective_of([keep[i] for i in ans.chosen]) * (1 - 1e-12))
        bound = max(bound, min(b_r, lb + delta) * (1 - 1e-12))
        if math.isfinite(ub) and bound >= ub * (1 - 1e-9):
            proven = True
            break
        if final or dl.left() <= 0.05 or not math.isfinite(ub):
            break
        delta = min(max(4 * delta, tol), ub - lb + tol)
        # the next round's model, priced at this round's seconds per column, must fit in the time left
        # (setting up 31 000 columns in HiGHS took 2.1 s of a 0.4-s remainder at 256 GPUs)
        per_col = (time.perf_counter() - t_r) / max(1, len(keep))
        if per_col * int((rc <= delta + tol).sum()) > dl.left():
            info["rc_stop"] = "no time for the next round"
            break
    info.update(ub_model=ub if math.isfinite(ub) else None, rc_rounds=rounds, rc_delta=delta,
                kept_columns=int((rc <= delta + tol).sum()))
    if best_cols is None:
        info["reduce"] = "no upper bound"
        return BackendAnswer(None, bound, False, False, {**ans.info, **info}), info
    chosen = tuple(best_cols)
    return BackendAnswer(chosen, bound, False, proven, {**ans.info, **info}), info


def cbc_log_bound(log: str) -> float | None:
    """The last bound CBC printed in its log (``Lower bound:`` / ``best possible``), or None.

    PuLP does not expose CBC's bound; both MILP back ends read it from the solver's log."""
    import re

    vals = []
    for pat in (r"Lower bound:\s*([-+0-9.eE]+)", r"best possible\s*([-+0-9.eE]+)"):
        for m in re.finditer(pat, log):
            try:
                vals.append(float(m.group(1)))
            except ValueError:
                pass
    return vals[-1] if vals else None
