"""A lower bound valid for EVERY preemptive schedule (hence for every offline and static one).

Time-indexed LP relaxation ("mean busy time" over per-job *modes*)
-------------------------------------------------------------------
Notation for job j: a_j arrival, w_j weight.

* Modes (:func:`job_modes`). Every allocation of j maps onto one of its relaxed classes
  (:func:`formulations.offline.classes.class_options`: a node and a GPU count, or a spread pattern of GPU
  counts per node group) whose duration is no longer (proofs in :mod:`formulations.offline.classes`).
  A class whose GPUs all lie on nodes where j can use one type τ holds n GPUs of τ; a spread pattern holds
  c_g GPUs in each group g, of g's type when g has one; GPUs of unknown type otherwise. A *mode* m of j is
  (d_m, n_m, c_{m,τ}): while j runs on an allocation G of mode m, G holds n_m GPUs, at least c_{m,τ} of them
  of type τ, and j runs at rate ≤ 1/d_m. Classes of one GPU count with the same types in mixed proportions
  merge into one mode (the least duration, the least count of each type, the rest of unknown type), which
  keeps every statement true and the LP small. Also d_m ≥ 1/(Σ_τ c_{m,τ}·η_{j,τ} + (n_m − Σ_τ c_{m,τ})·
  max_τ η_{j,τ}), the run time of a perfect split, where η_{j,τ} (:func:`rate_caps`) bounds j's progress per
  GPU-second on one GPU of type τ: from SPEC §2, t_iter ≥ batch/Σρ_g / s_max (the equal split only makes
  compute slower, comm ≥ 0, penalty ≥ 1, interference ≥ 1) with ρ_g ≤ sps_τ / f_min,τ, and for a measured
  single-type set t_iter ≥ f_min,τ / measured[τ][n] / s_max. A mode whose duration and charges below are all
  at least another's is dropped (the LP can move its work to the other).
* Buckets [b_t, b_{t+1}) over arrivals and a uniform grid, plus a last bucket [b_T, ∞) with no capacity limit.

Variables x_{j,m,t} ≥ 0: the fraction of j's work done in bucket t while on an allocation of mode m.
Constraints, satisfied by the x of any preemptive schedule:
  Σ_{m,t} x = 1 (all work done);
  Σ_m d_m·x_{j,m,t} ≤ |[b_t,b_{t+1}) ∩ [a_j,∞)| (j's run time in the bucket: the work x takes ≥ d_m·x seconds
  on mode m; nothing before a_j);
  Σ_{j,m} c_{m,τ}·d_m·x_{j,m,t} ≤ M_τ·(b_{t+1}−b_t) (type-τ GPU-seconds: those seconds hold ≥ c_{m,τ} GPUs of
  τ) and Σ_{j,m} n_m·d_m·x_{j,m,t} ≤ M·(b_{t+1}−b_t) (all GPU-seconds).
  The same capacities through dual feasible functions φ (:mod:`.dff`): Σ_{j,m} φ(n_m)·d_m·x_{j,m,t} ≤
  b_{t+1}−b_t, and per type with φ(c_{m,τ}) on M_τ: at each instant the jobs running hold at most M GPUs (M_τ of
  τ), so their φ sum to at most 1 (the definition of a DFF), and x takes ≥ d_m·x seconds of the bucket. These
  see that large rigid jobs cannot run side by side (two 24-GPU jobs on 32 GPUs), which the GPU-second row
  does not: PAL's workload 1 (160 jobs, 32 GPUs) 6 200 → 6 358.
  Where a job's fastest allocations hold the scarce type, running it elsewhere costs run time (its rate)
  and the other type's GPU-seconds: a heterogeneous queue of 160 jobs on 32 GPUs of 3 types gets a bound
  18 % higher (20 buckets: 6 263 against 5 319) than from a rate cap at the fastest run time and per-type rows
  that charge a perfect split's compute only.
Completion, with p_j = min_m d_m: the mean busy time B_j = ∫ t·r_j(t) dt (r_j the work rate, ∫ r_j = 1) is
  at least Σ_t y_{j,t}·max(b_t, a_j), y_{j,t} = Σ_m x_{j,m,t}; and with r_j ≤ 1/p_j, B_j ≤ C_j − p_j/2 (the
  latest possible profile is full rate on [C_j − p_j, C_j]). So C_j ≥ Σ_t max(b_t,a_j)·y_{j,t} + p_j/2, and
  C_j ≥ a_j + p_j.
Tangents: the part y_{j,t} done in bucket t, at rate ≤ 1/p_j, from s_t = max(b_t, a_j) on,
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
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import coo_matrix

from jctlab.model import Instance, Schedule
from jctlab.result import Result, SolveStatus

from ..schedules import job_weights
from .classes import class_options, p_min, trivial_bound
from .dff import DffParams, dff_rows
from .greedy import greedy
from .options import hostable, max_speedup


def rate_caps(inst: Instance) -> list[dict[str, float]]:
    """η_{j,τ} of the module docstring (fraction of the job per GPU-second on one GPU of type τ)."""
    out = []
    for job in inst.jobs:
        smax = max_speedup(job)
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
N_GRID = 160          # the bucket count of the finest LP (the default n_grid)
GROWTH = 5.0          # an LP with twice the buckets takes up to about this many times as long
TANGENT_GROWTH = 2.5  # ... and with the tangents on the same buckets (measured 1.7-2×)
TANGENTS = (0.5, 1.0)               # tangent points of p·y²/2, as fractions of the most y a bucket allows
TANGENT_MIN = 0.05                  # no tangents where a bucket can hold less than this fraction of a job


@dataclass(frozen=True)
class Mode:
    """How job j may run, as the LP sees it (module docstring): at rate ≤ 1/dur while holding ``gpus`` GPUs, at
    least ``by_type[τ]`` of them of type τ."""
    dur: float
    gpus: int
    by_type: tuple[tuple[str, int], ...] = ()

    def covers(self, other: Mode) -> bool:
        """Every charge of ``self`` at most ``other``'s: work on ``other`` can move to ``self``."""
        mine = dict(self.by_type)
        theirs = dict(other.by_type)
        return (self.dur <= other.dur and self.gpus * self.dur <= other.gpus * other.dur
                and all(mine.get(t, 0) * self.dur <= theirs.get(t, 0) * other.dur for t in set(mine) | set(theirs)))


def _class_types(inst: Instance, job, cls: tuple) -> tuple[dict[str, int], int]:
    """The GPUs of type known per type, and the GPU count, of every allocation mapped onto relaxed class ``cls``."""
    def only_type(nodes) -> str | None:
        ts = {g.type for g in hostable(inst, job) if g.node in nodes}
        return next(iter(ts)) if len(ts) == 1 else None

    if cls[0] == "node":
        t = only_type([cls[1]])
        return ({t: cls[2]} if t else {}), cls[2]
    n = cls[1]
    if len(cls) == 4:                      # group pattern: c_g GPUs in each node group g
        known: dict[str, int] = {}
        for group, c in cls[3]:
            t = only_type(group)
            if t:
                known[t] = known.get(t, 0) + c
        return known, n
    t = only_type(cls[2] if len(cls) == 3 else [nd.name for nd in inst.cluster.nodes])
    return ({t: n} if t else {}), n


def job_modes(inst: Instance, caps: list[dict[str, float]] | None = None) -> list[list[Mode]]:
    """Per job, its LP modes (module docstring): from its relaxed classes, classes of one GPU count with the same
    types in mixed proportions merged, durations at least a perfect split's, modes another covers dropped.
    ``caps``: :func:`rate_caps` of ``inst``, when the caller has them."""
    caps = rate_caps(inst) if caps is None else caps
    out = []
    for job, opts, eta in zip(inst.jobs, class_options(inst), caps):
        merged: dict[tuple, tuple[float, dict[str, int]]] = {}
        for o in opts:
            known, n = _class_types(inst, job, o.cls)
            pure = len(known) == 1 and sum(known.values()) == n
            key = (n, tuple(sorted(known.items()))) if pure else (n, tuple(sorted(known)), "mixed")
            d, cnt = merged.get(key, (math.inf, None))
            cnt = dict(known) if cnt is None else {t: min(c, known.get(t, 0)) for t, c in cnt.items()}
            merged[key] = (min(d, o.dur), cnt)
        modes = []
        eta_max = max(eta.values(), default=0.0)
        for (n, *_), (d, cnt) in merged.items():
            cnt = {t: c for t, c in cnt.items() if c > 0}
            rate = sum(c * eta[t] for t, c in cnt.items()) + (n - sum(cnt.values())) * eta_max
            modes.append(Mode(max(d, 1.0 / rate) if rate > 0 else d, n, tuple(sorted(cnt.items()))))
        keep = [m for i, m in enumerate(modes)
                if not any(o.covers(m) and (not m.covers(o) or k < i) for k, o in enumerate(modes) if k != i)]
        out.append(keep)
    return out


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


def lower_bound(inst: Instance, time_limit: float | None = None, threads: int = 1, *, n_grid: int = N_GRID,
                tangents: bool = True, dff: DffParams | None = DffParams()) -> float:
    """Lower bound on the objective of every preemptive schedule (proof in the module docstring).

    Without a time limit: the LP over ``n_grid`` buckets (with the busy-time tangents when ``tangents``). With
    one: the plain LP over GRIDS buckets (coarse first) up to ``n_grid``, each only while the time left covers the
    last doubling's time ratio (GROWTH before there is one; within [2, GROWTH]) × the previous LP's time; then,
    with ``tangents``, the LP with tangents on the last grid solved if the time left covers TANGENT_GROWTH × its
    plain LP's time (never lower on the same buckets; up to 6 % higher on loaded queues). A heterogeneous queue
    of 160 jobs on 32 GPUs of 3 types: 2.6 s, 12 s and 58 s for the plain LP on 20, 40 and 80 buckets (with as
    many arrivals), 4.4 s with tangents on 20. The largest optimum is kept; every one is a valid bound.
    ``dff``: which dual-feasible-function rows to add (None: none)."""
    t0 = time.perf_counter()
    if any(math.isinf(p) for p in p_min(inst)):
        return math.inf  # a job that no allocation can host: no schedule at all
    best = trivial_bound(inst)
    caps = rate_caps(inst)
    modes = job_modes(inst, caps)
    pm = [min(m.dur for m in ms) for ms in modes]

    def left() -> float | None:
        return None if time_limit is None else time_limit - (time.perf_counter() - t0)

    if time_limit is None:
        val = _solve_lp(inst, _buckets(inst, pm, caps, n_grid), pm, modes, tangents, None, dff)
        return best if val is None else max(best, val)
    took: list[float] = []
    solved = None
    for k in tuple(g for g in GRIDS if g < n_grid) + (n_grid,):
        growth = GROWTH if len(took) < 2 else min(GROWTH, max(2.0, took[-1] / max(took[-2], 1e-3)))
        if left() <= 0.05 or (took and left() < growth * took[-1]):
            break
        t1 = time.perf_counter()
        val = _solve_lp(inst, _buckets(inst, pm, caps, k), pm, modes, False, left(), dff)
        took.append(time.perf_counter() - t1)
        if val is None:
            break
        best, solved = max(best, val), k
    if tangents and solved is not None and left() > max(0.05, TANGENT_GROWTH * took[-1]):
        val = _solve_lp(inst, _buckets(inst, pm, caps, solved), pm, modes, True, left(), dff)
        best = best if val is None else max(best, val)
    return best


def _solve_lp(inst: Instance, b: list[float], pm: list[float], modes: list[list[Mode]], tangents: bool,
              time_limit: float | None, dff: DffParams | None = None) -> float | None:
    """The LP of the module docstring over the bucket boundaries ``b``; its optimum lowered by 1e-7 relative,
    None when HiGHS fails or hits ``time_limit``. ``pm[j]``: j's least mode duration."""
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
            for m in range(len(modes[j])):
                var[(j, m, t)] = len(var)
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
    w = job_weights(inst)
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
    for (j, m, t), k in var.items():
        eq_r.append(j)
        eq_c.append(k)
        eq_v.append(1.0)
    by_jt: dict = {}
    by_taut: dict = {}
    by_t: dict = {}
    by_j: dict = {}
    for (j, m, t), k in var.items():
        mode = modes[j][m]
        by_jt.setdefault((j, t), []).append((k, mode.dur))
        by_j.setdefault(j, []).append((k, max(b[t], jobs[j].arrival)))
        if t + 1 < T:
            by_t.setdefault(t, []).append((k, mode.gpus * mode.dur))
            for tau, c in mode.by_type:
                by_taut.setdefault((tau, t), []).append((k, c * mode.dur))
    # run time per bucket
    for (j, t), items in by_jt.items():
        if t + 1 < T:
            add(items, b[t + 1] - max(b[t], jobs[j].arrival))
    # GPU-seconds per type and finite bucket, and of all GPUs
    for (tau, t), items in by_taut.items():
        add(items, M[tau] * (b[t + 1] - b[t]))
    for t, items in by_t.items():
        add(items, len(inst.cluster.gpus) * (b[t + 1] - b[t]))
    # the same capacities through dual feasible functions (:mod:`.dff`): rigid jobs too large to run side by side
    if dff is not None:
        by_tk: dict[int, list[tuple[int, int, int]]] = {}
        for (j, m, t), k in var.items():
            if t + 1 < T:
                by_tk.setdefault(t, []).append((k, j, m))
        caps = [(len(inst.cluster.gpus), lambda mode: mode.gpus)]
        caps += [(M[tau], lambda mode, tau=tau: dict(mode.by_type).get(tau, 0)) for tau in M]
        for cap, count in caps:
            sizes = {count(mode) for ms in modes for mode in ms}
            for phi in dff_rows(sizes - {0}, cap, dff):
                for t, items in by_tk.items():
                    coef = [(k, phi[c] * modes[j][m].dur) for k, j, m in items
                            if (c := count(modes[j][m])) > 0 and phi[c] > 0]
                    if coef:
                        add(coef, b[t + 1] - b[t])
    # tangents z ≥ p·y0·y − p·y0²/2 of z ≥ p·y²/2
    for (j, t), zk in zidx.items():
        ymax = _room(b, t, jobs[j].arrival, pm[j])
        for f in TANGENTS:
            y0 = f * ymax
            add([(k, pm[j] * y0) for k, _ in by_jt[(j, t)]] + [(zk, -1.0)], pm[j] * y0 * y0 / 2.0)
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
    opts = {"presolve": True}      # (dual simplex keeps to its limit after presolve; 7.7x faster on PAL's traces)
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
        g = greedy(inst, "preemptive-bound", None if time_limit is None else t0 + time_limit)
        if g.schedule is not None:
            s = g.schedule
            sched, obj = s.__class__(s.instance, "preemptive-bound", s.segments, None, s.extra), g.objective
            lb = min(lb, obj)
    status = SolveStatus.BOUND_ONLY if math.isfinite(lb) else SolveStatus.INFEASIBLE
    return Result(sched if status == SolveStatus.BOUND_ONLY else None, obj if status == SolveStatus.BOUND_ONLY else None,
                  lb if math.isfinite(lb) else None, status, time.perf_counter() - t0, "preemptive-lp",
                  "", {"time_limit": time_limit, "threads": threads})
