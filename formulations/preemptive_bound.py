"""A lower bound valid for EVERY preemptive schedule (hence for every offline and static one).

Time-indexed LP relaxation ("mean busy time" with per-type GPU capacity)
------------------------------------------------------------------------
Notation for job j: a_j arrival, w_j weight, I_j iterations.

* p_j = min over every allocation of its run time, a lower bound computed in
  :mod:`formulations.offline_candidates` (best GPUs under variability, no locality penalty on one
  node, best cpu_mem speedup, smallest PS overhead; interference and restarts only add time).
  Whatever a preemptive schedule does, j progresses at a rate of at most 1/p_j of its work.
* η_{j,τ}: a per-GPU rate cap for type τ such that, on any set G, j's progress rate is at most
  Σ_{g∈G} η_{j,type(g)}. From SPEC §2: t_iter ≥ batch/Σρ_g / s_max (the equal split only makes
  compute slower, comm ≥ 0, penalty ≥ 1, interference ≥ 1) with ρ_g ≤ sps_τ / f_min,τ; for a
  measured single-type set t_iter ≥ f_min,τ / measured[τ][n] / s_max, i.e. a per-GPU share of
  measured/n. So η_{j,τ} = s_max/(I_j·f_min,τ)·max(sps_τ/batch, max_n measured/n).
* Buckets [b_t, b_{t+1}) over arrivals and a uniform grid, plus a last bucket [b_T, ∞) with no
  capacity limit.

Variables y_{j,τ,t} ≥ 0: the fraction of j's work done in bucket t attributed to type τ (split the
instantaneous rate of a set G over its types in proportion to Σ_{g∈G_τ} η_{j,τ}).
Constraints, satisfied by the y of any preemptive schedule:
  Σ_{τ,t} y = 1 (all work done); Σ_τ y_{j,τ,t} ≤ |[b_t,b_{t+1}) ∩ [a_j,∞)| / p_j (rate cap; nothing
  before a_j); Σ_j y_{j,τ,t}/η_{j,τ} ≤ M_τ·(b_{t+1}−b_t) (type-τ GPU-seconds: the attributed rate
  of type τ is at most |G_τ|·η_{j,τ}).
  All GPUs: Σ_{j,τ} A_j·y_{j,τ,t} ≤ M·(b_{t+1}−b_t), M the cluster's GPUs, A_j = min over j's relaxed classes
  of n·(class duration) (:func:`gpu_areas`). On a set G of n GPUs j does the fraction dt/p(G) of its work
  in dt while holding n GPUs, i.e. n·p(G) ≥ A_j GPU-seconds per unit of work (every allocation of n GPUs
  maps onto a class of n GPUs that is no longer: see :mod:`formulations.offline_candidates`). The per-type
  rows charge only 1/η_{j,τ}, the compute of a perfect split; on loaded queues of multi-GPU jobs A_j is
  1.7-1.9× that (communication, locality penalty, imperfect scaling), and this row lifts the bound of
  PAL's 160-job workloads on 32-64 GPUs by 15-36 %.
Completion: the mean busy time B_j = ∫ t·r_j(t) dt (r_j the work rate, ∫ r_j = 1) is at least
  Σ_t y_{j,·,t}·max(b_t, a_j); and with r_j ≤ 1/p_j, B_j ≤ C_j − p_j/2 (the latest possible profile
  is full rate on [C_j − p_j, C_j]). So C_j ≥ Σ_t max(b_t,a_j)·y_{j,·,t} + p_j/2, and C_j ≥ a_j + p_j.
Tangents: the part y_{j,t} = Σ_τ y_{j,τ,t} done in bucket t, at rate ≤ 1/p_j, from s_t = max(b_t, a_j) on,
  contributes at least ∫_{s_t}^{s_t+y·p_j} t/p_j dt = s_t·y + p_j·y²/2 to B_j. So
  C_j ≥ Σ_t (s_t·y_{j,t} + z_{j,t}) + p_j/2 with z_{j,t} ≥ p_j·y²/2, relaxed to tangents
  z ≥ p_j·(y0·y − y0²/2) at y0 ∈ TANGENTS × the most y the bucket holds (buckets that hold ≥ TANGENT_MIN of
  j). A job done within one bucket then gets C_j ≥ s_t + p_j.
Minimising the objective over this LP therefore gives at most the objective of every preemptive
schedule with restart_s ≥ 0 and interference ≥ 0: a valid lower bound. The LP optimum is reduced by
1e-7 relative to absorb the solver's tolerances; a failed or time-limited LP falls back to the
closed-form bound from C_j ≥ a_j + p_j.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from jctlab.model import Instance, Schedule
from jctlab.result import Result

from . import offline_candidates as oc


def rate_caps(inst: Instance) -> list[dict[str, float]]:
    """η_{j,τ} of the module docstring (fraction of the job per GPU-second on one GPU of type τ)."""
    out = []
    for job in inst.jobs:
        smax = oc.max_speedup(job)
        caps: dict[str, float] = {}
        for tau in inst.cluster.gpu_types:
            if not job.can_use(tau):
                continue
            fmin = min(g.factor(job.job_class) for g in inst.cluster.gpus if g.type == tau)
            if fmin == 0:
                caps[tau] = math.inf
                continue
            per = job.samples_per_s[tau] / job.batch
            for key in (tau, f"{tau}/spread"):
                for n, x in job.measured.get(key, {}).items():
                    per = max(per, x / n)
            caps[tau] = smax * per / (job.iterations * fmin)
        out.append(caps)
    return out


GRIDS = (20, 40, 80)  # coarser bucket counts solved first under a time limit (then n_grid)
GROWTH = 5.0          # an LP with twice the buckets takes up to about this many times as long
TANGENT_GROWTH = 3.0  # ... and with the tangents on the same buckets (measured 2-2.5×)
TANGENTS = (0.5, 1.0)               # tangent points of p·y²/2, as fractions of the most y a bucket allows
TANGENT_MIN = 0.05                  # no tangents where a bucket can hold less than this fraction of a job


def gpu_areas(inst: Instance) -> list[float]:
    """Per job, a lower bound on the GPU-seconds of its whole work on any allocation: n · duration over its
    relaxed classes (every allocation of n GPUs maps onto a class of n GPUs that is no longer)."""
    return [min((o.demand[("all",)] * o.dur for o in opts), default=math.inf) for opts in oc.class_options(inst)]


def _buckets(inst: Instance, pm: list[float], caps, n_grid: int) -> list[float]:
    """``n_grid`` uniform buckets up to a horizon no schedule needs to pass, plus the arrivals as boundaries (at
    most ``n_grid`` of them, evenly spaced in arrival order). Any increasing boundaries keep the LP valid: a
    job arriving inside a bucket only uses the part after its arrival (rate cap and completion rows)."""
    arr = sorted({j.arrival for j in inst.jobs})
    a0, amax = arr[0], arr[-1]
    tot = len(inst.cluster.gpus)
    work = 0.0
    for c in caps:
        eta = max(c.values())
        work += 0.0 if math.isinf(eta) else 1.0 / eta
    end = amax + max(pm) + work / max(tot, 1) * 2.0
    grid = np.linspace(a0, end, n_grid + 1).tolist()
    step = max(1, math.ceil(len(arr) / n_grid))
    return sorted(set(arr[::step]) | set(grid))


def lower_bound(inst: Instance, time_limit: float | None = None, threads: int = 1, *, n_grid: int = 160,
                tangents: bool = True) -> float:
    """Lower bound on the objective of every preemptive schedule (proof in the module docstring).

    Without a time limit: the LP over ``n_grid`` buckets. With one: over GRIDS buckets (coarse first) up to
    ``n_grid``, each only while the time left covers GROWTH × the previous LP's time (a heterogeneous queue of
    160 jobs on 32 GPUs of 3 types: 1.8 s at 20 buckets, 9.7 s at 40, over 30 s at 80, with as many arrivals). Then,
    with ``tangents`` and time left, the LP with the busy-time tangents on the last grid (2-3× slower, up to
    3 % higher on loaded queues). The largest optimum is kept; every one is a valid bound."""
    t0 = time.perf_counter()
    pm = oc.p_min(inst)
    if any(math.isinf(p) for p in pm):
        return math.inf  # a job that no allocation can host: no schedule at all
    best = oc.trivial_bound(inst)
    caps = rate_caps(inst)
    area = gpu_areas(inst)
    grids = (n_grid,) if time_limit is None else tuple(k for k in GRIDS if k < n_grid) + (n_grid,)
    runs = [(k, False) for k in grids]
    last = None
    while runs:
        k, with_tangents = runs.pop(0)
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if left is not None and (left <= 0.05 or (last is not None and left < (TANGENT_GROWTH if with_tangents
                                                                                else GROWTH) * last)):
            break
        t1 = time.perf_counter()
        bk = _buckets(inst, pm, caps, k)
        val = _solve_lp(inst, bk, pm, caps, area, with_tangents, left)
        last = time.perf_counter() - t1
        if val is None:
            break
        best = max(best, val)
        if not runs and tangents and not with_tangents:
            runs.append((k, True))
    return best


def _solve_lp(inst: Instance, b: list[float], pm: list[float], caps, area: list[float], tangents: bool,
              time_limit: float | None) -> float | None:
    """The LP of the module docstring over the bucket boundaries ``b``; its optimum lowered by 1e-7 relative,
    None when HiGHS fails or hits ``time_limit``."""
    jobs = inst.jobs
    T = len(b)  # buckets 0..T-2 finite, T-1 = [b[-1], inf)
    M = {tau: sum(1 for g in inst.cluster.gpus if g.type == tau) for tau in inst.cluster.gpu_types}
    nj = len(jobs)
    var = {}
    for j, job in enumerate(jobs):
        for t in range(T):
            hi = b[t + 1] if t + 1 < T else math.inf
            if hi <= job.arrival:
                continue
            for tau in caps[j]:
                var[(j, tau, t)] = len(var)
    nC = len(var)
    cidx = {j: nC + j for j in range(nj)}
    mk = nC + nj                               # the makespan variable (makespan objective only)
    nz0 = mk + (1 if inst.objective == "makespan" else 0)
    zidx: dict = {}                            # z_{j,t}: the tangents' bound on p_j·y_{j,t}²/2
    if tangents:
        for j, job in enumerate(jobs):
            for t in range(T):
                if pm[j] > 0 and _room(b, t, job.arrival, pm[j]) >= TANGENT_MIN:
                    zidx[(j, t)] = nz0 + len(zidx)
    nv = nz0 + len(zidx)
    w = oc.weights(inst)
    cost = np.zeros(nv)
    if inst.objective == "makespan":
        cost[mk] = 1.0
    else:
        for j in range(nj):
            cost[cidx[j]] = w[j]
    eq_r, eq_c, eq_v = [], [], []
    ub_r, ub_c, ub_v, ub_b = [], [], [], []
    row = 0

    def add(items, rhs):
        nonlocal row
        for k, c in items:
            ub_r.append(row)
            ub_c.append(k)
            ub_v.append(c)
        ub_b.append(rhs)
        row += 1

    # all work done
    for (j, tau, t), k in var.items():
        eq_r.append(j)
        eq_c.append(k)
        eq_v.append(1.0)
    by_jt: dict = {}
    by_taut: dict = {}
    by_t: dict = {}
    by_j: dict = {}
    for (j, tau, t), k in var.items():
        by_jt.setdefault((j, t), []).append(k)
        by_j.setdefault(j, []).append((k, max(b[t], jobs[j].arrival)))
        if t + 1 < T:
            by_t.setdefault(t, []).append((k, area[j]))
            if not math.isinf(caps[j][tau]):
                by_taut.setdefault((tau, t), []).append((k, 1.0 / caps[j][tau]))
    # rate caps
    for (j, t), ks in by_jt.items():
        if t + 1 < T:
            add([(k, 1.0) for k in ks], (b[t + 1] - max(b[t], jobs[j].arrival)) / pm[j] if pm[j] > 0 else math.inf)
    # capacity per type and finite bucket
    for (tau, t), items in by_taut.items():
        add(items, M[tau] * (b[t + 1] - b[t]))
    # all GPUs per finite bucket: GPU-seconds ≥ work done × the job's least GPU area
    for t, items in by_t.items():
        add(items, len(inst.cluster.gpus) * (b[t + 1] - b[t]))
    # tangents z ≥ p·y0·y − p·y0²/2 of z ≥ p·y²/2
    for (j, t), zk in zidx.items():
        ymax = _room(b, t, jobs[j].arrival, pm[j])
        for f in TANGENTS:
            y0 = f * ymax
            add([(k, pm[j] * y0) for k in by_jt[(j, t)]] + [(zk, -1.0)], pm[j] * y0 * y0 / 2.0)
    for (j, t), zk in zidx.items():
        by_j[j].append((zk, 1.0))
    # completion: sum max(b_t,a_j) y + sum z - C_j <= -p_j/2
    for j, items in by_j.items():
        add(items + [(cidx[j], -1.0)], -pm[j] / 2.0)
        if inst.objective == "makespan":
            add([(cidx[j], 1.0), (mk, -1.0)], 0.0)
    ub_b = np.array(ub_b)
    finite = np.isfinite(ub_b)
    A_ub = coo_matrix((ub_v, (ub_r, ub_c)), shape=(row, nv)).tocsr()[finite]
    A_eq = coo_matrix((eq_v, (eq_r, eq_c)), shape=(nj, nv)).tocsr()
    bounds = [(0, None)] * nC + [(jobs[j].arrival + pm[j], None) for j in range(nj)]
    if inst.objective == "makespan":
        bounds.append((None, None))
    bounds += [(0, None)] * len(zidx)
    opts = {"presolve": True}
    if time_limit is not None:
        opts["time_limit"] = max(0.05, float(time_limit))
    try:
        res = linprog(cost, A_ub=A_ub, b_ub=ub_b[finite], A_eq=A_eq, b_eq=np.ones(nj), bounds=bounds,
                      method="highs", options=opts)
    except Exception:
        return None
    if res.status != 0:
        return None
    val = float(res.fun)
    if inst.objective == "makespan":
        lb = val - min(j.arrival for j in jobs)
    else:
        lb = (val - sum(wi * j.arrival for wi, j in zip(w, jobs))) / sum(w)
    return lb - (1e-7 * abs(lb) + 1e-9)


def _room(b: list[float], t: int, arrival: float, p: float) -> float:
    """The most of a job (fraction of its work) that bucket ``t`` can hold at rate ≤ 1/p."""
    lo = max(b[t], arrival)
    hi = b[t + 1] if t + 1 < len(b) else math.inf
    return 0.0 if hi <= lo else min(1.0, (hi - lo) / p)


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, incumbent: bool = True) -> Result:
    """``bound_only`` result: the LP bound and, optionally, a greedy non-preemptive incumbent
    (one segment per job, valid in the preemptive class too)."""
    t0 = time.perf_counter()
    lb = lower_bound(inst, time_limit=time_limit, threads=threads)
    sched = obj = None
    if incumbent and math.isfinite(lb):
        s, r = oc.greedy(inst, "preemptive-bound", None if time_limit is None else t0 + time_limit)
        if s is not None:
            sched, obj = s.__class__(s.instance, "preemptive-bound", s.segments, None, s.extra), r.objective
            lb = min(lb, obj)
    status = "bound_only" if math.isfinite(lb) else "infeasible"
    return Result(sched if status == "bound_only" else None, obj if status == "bound_only" else None,
                  lb if math.isfinite(lb) else None, status, time.perf_counter() - t0, "preemptive-lp",
                  "", {"time_limit": time_limit, "threads": threads})
