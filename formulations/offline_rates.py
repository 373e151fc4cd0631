"""Rate capacities: the speed a relaxed spread job can really get from the GPUs the others leave it.

A relaxed spread pattern (:func:`offline_candidates.spread_pattern_options`) takes the best c_g GPUs of
each node group for its duration, whoever holds them. For a job j with such options, weigh every GPU g
by j's rate on it, ρ_j(g) (0 where j cannot run). At every instant, on every node v, the GPUs that j and
the other jobs hold are disjoint, so

    σ_jv + Σ_{k ≠ j running on v} ρ_j(GPUs k holds on v)  ≤  Σ_{g ∈ v} ρ_j(g)          (one cumulative per v)

where σ_jv is the rate sum of j's own GPUs on v. The others' terms are exact for concrete GPU sets and,
for a relaxed option that only says "c GPUs on v", the c smallest weights of v (no larger than what
they hold). Job j's duration on a spread allocation of n GPUs with rate sum σ = Σ_v σ_jv is at least
D(σ) = iterations · (batch / σ + comm_lb(n)) · penalty / max speedup (split ``proportional``; jobs with
measured tables are left out), decreasing in σ.

*Rate bands*: each pattern option P is split at thresholds t_1 > ... > t_L (below P's best rate sum
t_0) into bands (t_{l+1}, t_l] (t_{L+1} = 0): band l keeps P's GPUs and demands, lasts max(d_P, D(t_l))
and needs σ̃_j ≥ ⌈SCALE · t_{l+1}⌉. An allocation of pattern P with rate sum σ lies in one band, which
is no longer than it and whose need it meets. So every offline schedule maps onto a solution: σ̃_jv its
rate sums scaled and rounded up (a group bound gets + 1 per node for that), the others' weights rounded
down, the capacity + 1 (Σ⌊·⌋ + Σ⌈·⌉ ≤ the real sum + 1); model times are rounded down as in every model
(a job active at a model instant is active just before the next one in the real schedule). The model
stays a relaxation, and is exact for an allocation whose rate sum is a threshold (minus ``EPS``) wherever
the nodes it uses are packed (the GPUs free to j on v are exactly those it takes: the spread job of the
30-job benchmark's seed 1 runs on the one free V100 of n0, two of n3 and five K80s). ``EPS`` covers the
rounding slack, so a faster band cannot take an incumbent's GPUs. The thresholds come in rounds
(``offline_cpsat.rate_rounds``, :func:`next_thresholds`): the incumbents' rate sums, the model
solution's relaxed jobs placed on GPUs around its concrete sets, and the middle of each band it chose.
"""

from __future__ import annotations

import dataclasses
import math

from ortools.sat.python import cp_model

from jctlab.model import Instance, Schedule

from . import offline_candidates as oc

SCALE = 1_000_000      # rate units per sample/s
EPS = 64 / SCALE       # thresholds sit this far above an incumbent's rate sum (> the rounding slack)
MIN_BAND_S = 1e-3      # a band whose durations differ by less is not split further


def _is_pattern(o: oc.Option) -> bool:
    return o.cls is not None and o.cls[0] == "spread" and len(o.cls) > 3


def need(o: oc.Option) -> int | None:
    """A rate band's least scaled rate sum, None for other options."""
    return o.cls[4] if o.cls is not None and len(o.cls) > 4 else None


def eligible(inst: Instance, j: int) -> bool:
    job = inst.jobs[j]
    return (inst.cluster.split == "proportional" and not any(job.measured.values())
            and not any(math.isinf(oc.rho(job, g)) for g in oc.hostable(inst, job)))


def weights(inst: Instance, j: int) -> dict:
    """GPU id → job j's rate on it (0 where it cannot run)."""
    job = inst.jobs[j]
    return {g.id: (oc.rho(job, g) if job.can_use(g.type) else 0.0) for g in inst.cluster.gpus}


def rate_lb(inst: Instance, j: int, n: int, sigma: float) -> float:
    """D(σ): a lower bound on the duration of every spread allocation of n GPUs with rate sum ≤ σ."""
    cl = inst.cluster
    job = inst.jobs[j]
    step = job.batch / sigma + oc._comm_lb(job, n, cl.inter_node_gbps)
    return job.iterations * step * cl.locality_penalty / oc.max_speedup(job)


def rate_sum(inst: Instance, j: int, gpus) -> float:
    """Job j's rate sum (samples/s) on a set of GPU ids."""
    w = weights(inst, j)
    return sum(w[g] for g in gpus)


def _spread(alloc) -> bool:
    return oc._single_node(alloc) is None


def _spread_segments(inst: Instance, sched: Schedule | None):
    """(job, allocation) of every segment of ``sched`` spread over several nodes."""
    for seg in (sched.segments if sched is not None else ()):
        j = inst.index.get(seg.job)
        if j is not None and _spread(seg.alloc):
            yield j, seg.alloc


def spread_rates(inst: Instance, sched: Schedule | None) -> dict:
    """{job: rate sums (samples/s) of its spread allocations} in ``sched``."""
    out: dict = {}
    for j, alloc in _spread_segments(inst, sched):
        out.setdefault(j, set()).add(rate_sum(inst, j, alloc.gpus))
    return out


def _top(w: dict, gpus, c: int) -> float:
    """The sum of the c largest weights of ``gpus``."""
    return sum(sorted((w[g] for g in gpus), reverse=True)[:c])


def _gpus_of(inst: Instance, nodes) -> list:
    return [g.id for nd in inst.cluster.nodes if nd.name in nodes for g in nd.gpus]


def banded(inst: Instance, opts, thresholds: dict) -> list:
    """``opts`` with each pattern option of a job in ``thresholds`` ({job: rate sums}) split into rate bands:
    ``cls`` + (least scaled rate sum, band ceiling)."""
    out = []
    for j, ol in enumerate(opts):
        ts = thresholds.get(j)
        if not ts or not eligible(inst, j):
            out.append(ol)
            continue
        new = []
        for o in ol:
            if not _is_pattern(o):
                new.append(o)
                continue
            top = pattern_top(inst, o)
            cuts = sorted({t + EPS for t in ts if t + EPS < top}, reverse=True)
            for hi, lo in zip([top] + cuts, cuts + [0.0]):
                d = max(o.dur, rate_lb(inst, j, o.cls[1], hi))
                new.append(dataclasses.replace(o, dur=d, cls=o.cls[:4] + (math.ceil(SCALE * lo), hi)))
        out.append(new)
    return out


def pattern_top(inst: Instance, o: oc.Option) -> float:
    """The largest rate sum of a spread pattern: the best c_g GPUs of each group."""
    w = weights(inst, o.job)
    return sum(_top(w, _gpus_of(inst, grp), c) for grp, c in o.cls[3])


def next_thresholds(inst: Instance, opts, sol, scheds, pinned: dict) -> dict:
    """Thresholds that cut a model solution off where it is not exact: the rate sums of spread
    allocations in ``scheds`` (incumbents) and in ``pinned`` (job → option: the model's relaxed jobs on
    GPUs around its concrete sets), and the middle of each band the solution chose (its ceiling is
    the rate the model assumed, its need only what the rate capacities granted; of an unsplit pattern only
    when nothing else cuts it: the middle of all its rate sums is far from any schedule's)."""
    out: dict = {}
    for sched in scheds:
        for j, rs in spread_rates(inst, sched).items():
            out.setdefault(j, set()).update(rs)
    for j, o in pinned.items():
        if o.alloc is not None and _spread(o.alloc):
            out.setdefault(j, set()).add(rate_sum(inst, j, o.alloc.gpus))
    for j, k in enumerate(sol["choice"]):
        o = opts[j][k]
        if not _is_pattern(o) or not eligible(inst, j) or (len(o.cls) <= 5 and out.get(j)):
            continue        # an unsplit pattern: its middle only when nothing else cuts it
        n = o.cls[1]
        lo, hi = (o.cls[4] / SCALE, o.cls[5]) if len(o.cls) > 5 else (0.0, pattern_top(inst, o))
        lo = max(lo, sum(sorted(r for r in weights(inst, j).values() if r > 0)[:n]))   # the slowest n GPUs
        if lo < hi and rate_lb(inst, j, n, lo) - rate_lb(inst, j, n, hi) > MIN_BAND_S:
            out.setdefault(j, set()).add((lo + hi) / 2 - EPS)
    return {j: {t for t in ts if t > 0} for j, ts in out.items()}


def add_rate_capacity(m: cp_model.CpModel, inst: Instance, opts, j: int, interval, x: list, held: list):
    """Rate capacities of job ``j`` (its whole interval, option literals ``x``) over ``held``: (interval,
    job, {node: GPU ids} or {node: GPU count}) of every interval that holds GPUs. Returns {node: σ̃ var}."""
    cl = inst.cluster
    w = weights(inst, j)
    by_node = {nd.name: [g.id for g in nd.gpus] for nd in cl.nodes}
    low = {v: sorted(w[g] for g in gs) for v, gs in by_node.items()}
    nmax = max(o.cls[1] for o in opts[j] if _is_pattern(o))
    sig = {v: m.NewIntVar(0, math.ceil(SCALE * _top(w, gs, nmax - 1)), f"sig{j}_{v}")
           for v, gs in by_node.items() if any(w[g] > 0 for g in gs)}
    for o, xk in zip(opts[j], x):
        if not _is_pattern(o):
            for var in sig.values():
                m.Add(var == 0).OnlyEnforceIf(xk)
            continue
        for v, var in sig.items():
            if v not in o.cls[2]:
                m.Add(var == 0).OnlyEnforceIf(xk)
        for grp, c in o.cls[3]:
            # each node's σ̃ is rounded up on its own: + one unit per node of the group
            best = math.ceil(SCALE * _top(w, _gpus_of(inst, grp), c)) + len(grp)
            m.Add(sum(sig[v] for v in grp if v in sig) <= best).OnlyEnforceIf(xk)
        if need(o):
            m.Add(sum(sig.values()) >= need(o)).OnlyEnforceIf(xk)
    for v, var in sig.items():
        ivs, dem = [interval], [var]
        for iv, k, on_nodes in held:
            if k == j or v not in on_nodes:
                continue
            h = on_nodes[v]
            d = (sum(math.floor(SCALE * w[g]) for g in h) if isinstance(h, tuple)
                 else sum(math.floor(SCALE * r) for r in low[v][:h]))
            if d > 0:
                ivs.append(iv)
                dem.append(d)
        if len(ivs) > 1:
            m.AddCumulative(ivs, dem, math.floor(SCALE * sum(w[g] for g in by_node[v])) + 1)
    return sig


def scaled_rate(inst: Instance, j: int, alloc) -> int:
    """An allocation's rate sum for job j, scaled and rounded up (what a band's need is compared with)."""
    return math.ceil(SCALE * rate_sum(inst, j, alloc.gpus))


def hint_rates(inst: Instance, sched: Schedule | None) -> dict:
    """Per job of ``sched`` spread over several nodes, {node: σ̃ (scaled rate sum, rounded up)}."""
    out: dict = {}
    for j, alloc in _spread_segments(inst, sched):
        nodes = {g.split(":", 1)[0] for g in alloc.gpus}
        out[j] = {v: math.ceil(SCALE * rate_sum(inst, j, [g for g in alloc.gpus if g.split(":", 1)[0] == v]))
                  for v in nodes}
    return out
