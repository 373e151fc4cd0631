"""Rate bands and GPU literals: the speed a relaxed spread job really gets from the GPUs it holds.

A relaxed spread pattern (:func:`formulations.offline.classes.spread_pattern_options`) takes the best c_g GPUs of
each node group for its duration, whoever holds them. For a job j with such options, weigh every GPU g
by j's rate on it, ρ_j(g) (0 where j cannot run). Job j's duration on a spread allocation A of n GPUs
with rate sum σ(A) = Σ_{g∈A} ρ_j(g) is at least D(σ) = iterations · (batch / σ + comm_lb(n)) · penalty /
max speedup (split ``proportional``; jobs with measured tables are left out), decreasing in σ.

*Rate bands*: each pattern option P is split at thresholds t_1 > ... > t_L (below P's best rate sum
t_0) into bands (t_{l+1}, t_l] (t_{L+1} = 0): band l keeps P's demands and lasts max(d_P, D(t_l)).

*GPU literals* (:func:`add_spread_gpus`): a job with bands also gets q_g = "j holds GPU g", each an optional
interval on g's no-overlap with j's start, duration and end; the chosen pattern fixes their count per
node group (at most n − 1 per node), and band l needs ⌈SCALE · t_{l+1}⌉ ≤ Σ_g ⌈SCALE · ρ_j(g)⌉ q_g and
Σ_g ⌊SCALE · ρ_j(g)⌋ q_g ≤ ⌊SCALE · t_l⌋. Every offline schedule maps onto a solution: q the GPUs j holds,
the band that holds σ(A) (no longer than A, and its two rate rows hold: Σ⌈·⌉ ≥ SCALE σ > SCALE t_{l+1},
Σ⌊·⌋ ≤ SCALE σ ≤ SCALE t_l); model times are rounded down as in every model (intervals disjoint in
real time stay disjoint). So the model stays a relaxation, j's GPU occupancy is exact, and only its
duration is relaxed, to its band's: exact for an allocation whose rate sum is a threshold (minus ``EPS``).
``EPS`` exceeds the rounding slack (≤ one unit per GPU), so a faster band cannot take an incumbent's GPUs.
The thresholds come in rounds (:func:`formulations.offline.cpsat_rounds.rate_rounds`, :func:`next_thresholds`): the incumbents'
rate sums, the model solution's own GPUs (relaxed jobs without literals placed around its concrete sets),
and the middle of each band it chose; and dense ones in the incumbent's own pattern (:func:`fine_thresholds`),
where a better schedule often differs only in which GPUs of the same nodes it takes.

Measured against *rate capacities* (one cumulative per node of j's rate sum there and the weights the
others hold, which these literals replaced: where a spread job's nodes had more free GPUs than it took,
they let it claim the rate of GPUs it did not hold): spread-heavy instances, 32 GPUs / 20 jobs, 30 s, 0/4
proven, 0.26 % mean certified gap → 3/4, 0.01 %.
"""

from __future__ import annotations

import dataclasses
import math

from ortools.sat.python import cp_model

from jctlab.model import Instance, Schedule

from .durations import comm_lb
from .options import Option, hostable, max_speedup, rho, single_node

SCALE = 1_000_000      # rate units per sample/s
EPS = 64 / SCALE       # thresholds sit this far above an incumbent's rate sum (> the rounding slack)
FINE_BANDS = 64       # dense bands of one pattern at most (fine_thresholds) ...
FINE_JOBS = 2         # ... and none where more spread jobs than this would get them (spread-heavy instances,
#                       32 GPUs / 20 jobs, 30 s: 1/4 proven with them, 3/4 without)
MIN_BAND_S = 1e-3      # a band whose durations differ by less is not split further


def _is_pattern(o: Option) -> bool:
    return o.cls is not None and o.cls[0] == "spread" and len(o.cls) > 3


def need(o: Option) -> int | None:
    """A rate band's least scaled rate sum, None for other options."""
    return o.cls[4] if o.cls is not None and len(o.cls) > 4 else None


def eligible(inst: Instance, j: int) -> bool:
    job = inst.jobs[j]
    return (inst.cluster.split == "proportional" and not any(job.measured.values())
            and not any(math.isinf(rho(job, g)) for g in hostable(inst, job)))


def weights(inst: Instance, j: int) -> dict:
    """GPU id → job j's rate on it (0 where it cannot run)."""
    job = inst.jobs[j]
    return {g.id: (rho(job, g) if job.can_use(g.type) else 0.0) for g in inst.cluster.gpus}


def rate_lb(inst: Instance, j: int, n: int, sigma: float) -> float:
    """D(σ): a lower bound on the duration of every spread allocation of n GPUs with rate sum ≤ σ."""
    cl = inst.cluster
    job = inst.jobs[j]
    step = job.batch / sigma + comm_lb(job, n, cl.inter_node_gbps)
    return job.iterations * step * cl.locality_penalty / max_speedup(job)


def rate_sum(inst: Instance, j: int, gpus) -> float:
    """Job j's rate sum (samples/s) on a set of GPU ids."""
    w = weights(inst, j)
    return sum(w[g] for g in gpus)


def _spread(alloc) -> bool:
    return single_node(alloc) is None


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


def _gpus_of(inst: Instance, nodes) -> list:
    return [g.id for nd in inst.cluster.nodes if nd.name in nodes for g in nd.gpus]


def banded(inst: Instance, opts, thresholds: dict, fine: dict | None = None) -> list:
    """``opts`` with each pattern option of a job in ``thresholds`` ({job: rate sums}, non-empty) split into rate bands:
    ``cls`` + (least scaled rate sum, band ceiling). ``fine`` ({(job, pattern groups): rate sums},
    :func:`fine_thresholds`): more thresholds for one pattern of a job."""
    fine = fine or {}
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
            cuts = sorted({t + EPS for t in ts | fine.get((j, o.cls[3]), set()) if t + EPS < top}, reverse=True)
            for hi, lo in zip([top] + cuts, cuts + [0.0]):
                d = max(o.dur, rate_lb(inst, j, o.cls[1], hi))
                new.append(dataclasses.replace(o, dur=d, cls=o.cls[:4] + (math.ceil(SCALE * lo), hi)))
        out.append(new)
    return out


def rate_at(inst: Instance, j: int, n: int, dur: float) -> float:
    """The rate sum σ with D(σ) = ``dur`` (:func:`rate_lb` inverted; inf where ``dur`` is at or below D(∞))."""
    cl = inst.cluster
    job = inst.jobs[j]
    per_step = dur * max_speedup(job) / (job.iterations * cl.locality_penalty) - comm_lb(
        job, n, cl.inter_node_gbps)
    return job.batch / per_step if per_step > 0 else math.inf


def fine_thresholds(inst: Instance, opts, sched: Schedule | None, step_s: float, max_jobs: int = FINE_JOBS) -> dict:
    """Dense thresholds for the patterns that ``sched``'s spread jobs run in: from each one's rate sum up to
    its pattern's top, so that D drops by at most ``step_s`` within a band (at most ``FINE_BANDS`` bands, else
    wider ones; nothing where ``sched`` spreads more than ``max_jobs`` jobs). {(job, pattern groups): rate sums},
    for :func:`banded`'s ``fine``.

    Rate rounds from rate sums alone add a threshold or two a round, each round a new model: seed 1 of the
    30-job benchmark needed two to four (6-14 s each) after its node-exact model. Its optimum lies in the
    incumbent's pattern, 9.4 samples/s above the incumbent's rate sum; with 45 bands there (each 0.09 s
    shorter), the first round proved it."""
    out: dict = {}
    spread = [(j, alloc) for j, alloc in _spread_segments(inst, sched) if eligible(inst, j)]
    if len(spread) > max_jobs or not step_s > 0:
        return out
    for j, alloc in spread:
        gpus = set(alloc.gpus)
        r = rate_sum(inst, j, gpus)
        for o in opts[j]:
            if not _is_pattern(o) or len(gpus) != o.cls[1] or any(
                    sum(g in gpus for g in _gpus_of(inst, grp)) != c for grp, c in o.cls[3]):
                continue
            top = pattern_top(inst, o)
            lo, hi = rate_lb(inst, j, o.cls[1], r), rate_lb(inst, j, o.cls[1], top)
            k = min(FINE_BANDS, max(1, math.ceil((lo - hi) / step_s)))
            out.setdefault((j, o.cls[3]), set()).update(
                t for i in range(1, k) if r < (t := rate_at(inst, j, o.cls[1], lo - (lo - hi) * i / k)) < top)
    return out


def pattern_top(inst: Instance, o: Option) -> float:
    """The largest rate sum of a spread pattern: the best c_g GPUs of each group."""
    w = weights(inst, o.job)
    return sum(sum(sorted((w[g] for g in _gpus_of(inst, grp)), reverse=True)[:c]) for grp, c in o.cls[3])


def next_thresholds(inst: Instance, opts, sol, scheds, pinned: dict) -> dict:
    """Thresholds that cut a model solution off where it is not exact: the rate sums of spread
    allocations in ``scheds`` (incumbents) and in ``pinned`` (job → option: the model's own GPUs of a job
    with GPU literals, else its relaxed jobs on GPUs around its concrete sets), and the middle of each band
    the solution chose (its ceiling is the rate the model assumed; of an unsplit pattern only when nothing
    else cuts it: the middle of all its rate sums is far from any schedule's)."""
    out: dict = {}
    for sched in scheds:
        for j, rs in spread_rates(inst, sched).items():
            out.setdefault(j, set()).update(rs)
    for j, o in pinned.items():
        if o.alloc is not None and _spread(o.alloc):
            out.setdefault(j, set()).add(rate_sum(inst, j, o.alloc.gpus))
    for j, k in enumerate(sol.choice):
        o = opts[j][k]
        if not _is_pattern(o) or not eligible(inst, j) or (len(o.cls) <= 5 and out.get(j)):
            continue        # an unsplit pattern: its middle only when nothing else cuts it
        n = o.cls[1]
        lo, hi = (o.cls[4] / SCALE, o.cls[5]) if len(o.cls) > 5 else (0.0, pattern_top(inst, o))
        lo = max(lo, sum(sorted(r for r in weights(inst, j).values() if r > 0)[:n]))   # the slowest n GPUs
        if lo < hi and rate_lb(inst, j, n, lo) - rate_lb(inst, j, n, hi) > MIN_BAND_S:
            out.setdefault(j, set()).add((lo + hi) / 2 - EPS)
    return {j: {t for t in ts if t > 0} for j, ts in out.items()}


def add_spread_gpus(m: cp_model.CpModel, inst: Instance, opts, j: int, s, d, e, x: list, per_res: dict,
                    resources: set) -> dict:
    """GPU literals of job ``j`` (start ``s``, duration ``d``, end ``e``, option literals ``x``; see the
    module docstring): their intervals join ``per_res``'s GPU no-overlaps. Returns {GPU id: q}."""
    w = weights(inst, j)
    by_node = {nd.name: [g.id for g in nd.gpus if w[g.id] > 0] for nd in inst.cluster.nodes}
    q = {g: m.NewBoolVar(f"q{j}_{g}") for gs in by_node.values() for g in gs}
    for g, lit in q.items():
        iv = m.NewOptionalIntervalVar(s, d, e, lit, f"iq{j}_{g}")
        if ("g", g) in resources:
            per_res.setdefault(("g", g), []).append((iv, 1, j))
    spread = [(o, xk) for o, xk in zip(opts[j], x) if o.cls is not None and o.cls[0] == "spread"]
    m.Add(sum(q.values()) == sum(o.cls[1] * xk for o, xk in spread))          # none unless spread
    for gs in by_node.values():                                              # ≤ n − 1 on a node
        if gs:
            m.Add(sum(q[g] for g in gs) <= sum((o.cls[1] - 1) * xk for o, xk in spread))
    for o, xk in spread:
        if not _is_pattern(o):
            continue
        for grp, c in o.cls[3]:
            m.Add(sum(q[g] for g in _gpus_of(inst, grp) if g in q) == c).OnlyEnforceIf(xk)
        if need(o) is not None:
            m.Add(sum(math.ceil(SCALE * w[g]) * lit for g, lit in q.items()) >= need(o)).OnlyEnforceIf(xk)
            m.Add(sum(math.floor(SCALE * w[g]) * lit for g, lit in q.items())
                  <= math.floor(SCALE * o.cls[5])).OnlyEnforceIf(xk)
    return q


def spread_gpus(inst: Instance, sched: Schedule | None) -> dict:
    """{job: GPU ids} of the jobs of ``sched`` spread over several nodes (one segment each)."""
    return {j: set(alloc.gpus) for j, alloc in _spread_segments(inst, sched)}


def scaled_rate(inst: Instance, j: int, alloc) -> int:
    """An allocation's rate sum for job j, scaled and rounded up (what a band's need is compared with)."""
    return math.ceil(SCALE * rate_sum(inst, j, alloc.gpus))
