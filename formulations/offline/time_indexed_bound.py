"""Non-preemptive time-indexed LP bound over an option model (loaded offline instances).

CP-SAT's own bound on a queue (many more jobs than GPUs, mean JCT) comes from search, and it can stay
at Σ(a_j + p_j) for minutes: 11 jobs on 3 GPUs, an exact model of 135 options, no bound move in
120 s. The classic strong relaxation of such problems is the time-indexed LP (x_{o,t}: option o
starts in slot t). It is built here over the same options and resources as a CP-SAT model
(:mod:`formulations.offline.cpsat`), so it relaxes whatever that model relaxes and nothing more.

Validity. Slots are [τ_t, τ_{t+1}) for increasing boundaries τ_0 = the earliest arrival < … < τ_K
(:func:`grid`). Map any schedule of the option model (start s_j in slot t_j, option o_j of duration p)
to "o_j starts in slot t_j" and let it occupy every slot q with t_j ≤ q and τ_{q+1} ≤ τ_{t_j} + p. Such
a job runs in the real schedule at the instant τ_{q+1} − ε (it started before τ_{q+1}, as s_j <
τ_{t_j+1} ≤ τ_{q+1}, and ends at s_j + p ≥ τ_{t_j} + p ≥ τ_{q+1}), so the jobs occupying slot q all run
together then, and every capacity (GPU, node and cluster counts, CPU/memory) holds slot by slot. Also
t_j ≥ slot(a_j) and C_j = s_j + p ≥ max(a_j, τ_{t_j}) + p, the LP's completion cost. Hence the mapped
schedule is feasible for the LP with a cost no larger than its objective. (With uniform slots of Δ this is
an occupancy of ⌊p/Δ⌋ slots.)

Horizon. A semi-active schedule (every start a release or another job's end; some optimum is one)
starts every job by max a + Σ_{i≠j} max p_i. With an incumbent of objective U, a schedule of
objective ≤ U also has C_j − a_j ≤ (U − Σ_{i≠j} ω_i·min p_i)/ω_j (mean and weighted JCT, objective
Σ ω_j (C_j − a_j), :func:`formulations.schedules.objective_weights`) or
C_j ≤ min a + U (makespan); the LP only admits starts before both limits, so its optimum bounds every
schedule of objective ≤ U, and min(LP, U) bounds them all. (A real schedule, interference included,
has a model image with the same starts and options and no larger completions; left-shifting that
image inside the model to a semi-active one only moves starts earlier, so both limits hold for it.)

LP: with Z_{o,t} = Σ_{t' ≤ t} x_{o,t'} (monotone in t), slot q's use of o is Z_{o,min(q,l)} −
Z_{o,t*(q)−1} (the starts that occupy q form the range [t*(q), min(q, l)]), two nonzeros per option,
slot and resource. Solved by HiGHS (scipy); the optimum is lowered by 1e-7
relative for the solver's tolerances. A time-limited or failed LP gives no bound (−inf).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

from jctlab.model import Instance

from ..schedules import objective_weights
from .options import Option, capacities

NNZ_BUDGET = 400_000     # most nonzeros of an LP (bounds the slot count)
MAX_SLOTS = 1000
MIN_SLOTS = 25           # the first LP is cheap, so a short limit still gets a bound
MIN_LP_TIME = 0.25       # s: HiGHS may ignore a shorter limit (a 0.04 s limit ran 4 s to optimality)
GROWTH = 2.5             # an LP with twice the slots takes about this many times as long (measured: 2.5-3.5)
METHOD = "highs-ipm"       # interior point: 10x faster than dual simplex on these LPs (11 jobs, 100 slots)
PRESOLVE_NNZ = 250_000     # larger LPs skip HiGHS' presolve: after it, interior point ignores the time limit


def lp_options(time_limit: float | None, nnz: int) -> dict:
    """Options of scipy's ``linprog(method=METHOD)``. After presolve HiGHS' interior point runs past its time
    limit: on an LP of 935 000 nonzeros (200 jobs, 128 GPUs) a 0.44-s limit ran 45 s; without presolve it
    stops at 0.8 s (dual simplex stops either way). Smaller LPs keep presolve."""
    opts: dict = {"presolve": nnz <= PRESOLVE_NNZ}
    if time_limit is not None:
        opts["time_limit"] = max(0.05, float(time_limit))
    return opts


def latest_starts(inst: Instance, opts: list[list[Option]], incumbent: float | None) -> list[float]:
    """Per job, the latest start of a semi-active schedule of objective ≤ ``incumbent``."""
    jobs = inst.jobs
    pmax = [max(o.dur for o in ol) for ol in opts]
    pmin = [min(o.dur for o in ol) for ol in opts]
    amax, amin = max(j.arrival for j in jobs), min(j.arrival for j in jobs)
    tot = sum(pmax)
    out = [amax + tot - pmax[j] for j in range(len(jobs))]
    if incumbent is not None and math.isfinite(incumbent):
        if inst.objective == "makespan":
            out = [min(s, amin + incumbent - pmin[j]) for j, s in enumerate(out)]
        else:
            w = objective_weights(inst)
            slack = sum(wi * p for wi, p in zip(w, pmin))
            out = [min(s, jobs[j].arrival + (incumbent - (slack - w[j] * pmin[j])) / w[j] - pmin[j]) if w[j] > 0
                   else s for j, s in enumerate(out)]
    return out


def lower_bound(inst: Instance, opts: list[list[Option]], resources: set, *, incumbent: float | None = None,
                time_limit: float | None = None, slots: int | None = None, focus: float | None = None,
                max_slots: int = MAX_SLOTS) -> float:
    """The time-indexed LP bound of the option model ``opts`` with capacities ``resources`` (module
    docstring). ``incumbent``: the objective of a known schedule (it tightens the horizon, and the
    result is at most it). ``focus``: an instant by which good schedules have started their jobs
    (:func:`grid`; any value keeps the bound valid). ``slots=None``: MIN_SLOTS slots, then twice as
    many while the time limit and NNZ_BUDGET allow, up to ``max_slots``, the best bound kept. −inf when no LP is solved in
    ``time_limit``."""
    t0 = time.perf_counter()
    if slots is not None:
        return _bound(inst, opts, resources, incumbent, time_limit, slots, focus)
    best, k, last = -math.inf, MIN_SLOTS, 0.0
    while k <= max_slots:
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if left is not None and (left <= 0 or (last > 0 and left < GROWTH * last)):
            break         # twice the slots take about GROWTH times as long, and HiGHS may overrun its limit
        t1 = time.perf_counter()
        b = _bound(inst, opts, resources, incumbent, left, k, focus)
        last = time.perf_counter() - t1
        if b == -math.inf:
            break
        best = max(best, b)
        if (incumbent is not None and best >= incumbent) or _nnz(opts, resources) * k * 2 > NNZ_BUDGET:
            break
        k *= 2
    return best


def _nnz(opts, resources) -> int:
    """Nonzeros per slot (two per option in its monotone row and per resource it holds)."""
    return sum(2 + 2 * sum(1 for r in o.demand if r in resources) for ol in opts for o in ol)


def grid(origin: float, end: float, k: int, focus: float | None = None) -> np.ndarray:
    """k + 1 slot boundaries from ``origin`` to ``end``: uniform, or with 3/4 of the slots before
    ``focus`` (the incumbent's last completion: where good schedules start their jobs)."""
    if focus is None or not origin < focus < end or k < 4:
        return np.linspace(origin, end, k + 1)
    k1 = (3 * k) // 4
    return np.concatenate([np.linspace(origin, focus, k1 + 1), np.linspace(focus, end, k - k1 + 1)[1:]])


def _bound(inst, opts, resources, incumbent, time_limit, k, focus=None) -> float:
    t0 = time.perf_counter()
    jobs = inst.jobs
    nj = len(jobs)
    if not nj or any(not ol for ol in opts):
        return -math.inf          # nothing to bound (a job without options: the caller reports infeasible)
    cap = capacities(inst)
    late = latest_starts(inst, opts, incumbent)
    if any(s < j.arrival - 1e-9 for s, j in zip(late, jobs)):
        return incumbent          # no schedule beats the incumbent
    origin = min(j.arrival for j in jobs)
    end = max(late[j] + max(o.dur for o in opts[j]) for j in range(nj))
    tau = grid(origin, end, k, focus)
    w = objective_weights(inst)

    def slot(x: float) -> int:    # the slot of instant x: the last boundary ≤ x
        return int(min(k - 1, max(0, np.searchsorted(tau, x, side="right") - 1)))

    first = [slot(j.arrival) for j in jobs]
    last = [max(first[j], slot(late[j])) for j in range(nj)]
    # variable blocks: option o of job j has Z_{o,t}, t = first[j] .. last[j]
    offs, olist = [], []
    n = 0
    for j, ol in enumerate(opts):
        for o in ol:
            offs.append(n)
            olist.append(o)
            n += last[j] - first[j] + 1
    mk = inst.objective == "makespan"
    nvar = n + (1 if mk else 0)
    c = np.zeros(nvar)
    rows, cols, vals = [], [], []        # inequality rows A_ub z ≤ b
    b_ub: list[float] = []
    eq_rows, eq_cols = [], []
    res_index = {r: i for i, r in enumerate(sorted(resources, key=repr)) if r in cap}
    cap_rows = []
    for oi, o in enumerate(olist):
        j = o.job
        f, l_ = first[j], last[j]
        ts = np.arange(f, l_ + 1)
        idx = offs[oi] + (ts - f)
        comp = np.maximum(jobs[j].arrival, tau[ts]) + o.dur
        if mk:
            # makespan M ≥ Σ_t comp_t x_t − min a for this job (row per job, built below)
            cost = comp - origin
        else:
            cost = w[j] * (comp - jobs[j].arrival)
        # Σ_t cost_t (Z_t − Z_{t−1}) = Σ_{t<l} (cost_t − cost_{t+1}) Z_t + cost_l Z_l
        coef = np.append(cost[:-1] - cost[1:], cost[-1])
        if mk:
            cap_rows.append((j, idx, coef))
        else:
            c[idx] += coef
        # monotone: Z_{t−1} − Z_t ≤ 0 (t > f), −Z_f ≤ 0 through the bounds below
        if len(ts) > 1:
            base = len(b_ub)
            r_ids = base + np.arange(len(ts) - 1)
            rows += [r_ids, r_ids]
            cols += [idx[:-1], idx[1:]]
            vals += [np.ones(len(ts) - 1), -np.ones(len(ts) - 1)]
            b_ub += [0.0] * (len(ts) - 1)
        eq_rows.append(j)
        eq_cols.append(idx[-1])
    n_mono = len(b_ub)
    # capacities, row (r, slot q): option o started in slot t holds r during q iff t ≤ q and
    # τ_{q+1} ≤ τ_t + p_o, i.e. t ∈ [t*(q), min(q, l)]: Σ_o d_{o,r} (Z_{o,min(q,l)} − Z_{o,t*(q)−1}) ≤ cap_r
    crow, ccol, cval = [], [], []
    for oi, o in enumerate(olist):
        j = o.job
        f, l_ = first[j], last[j]
        qs = np.arange(f, k)
        hi = np.minimum(qs, l_)
        lo = np.maximum(np.searchsorted(tau, tau[qs + 1] - o.dur * (1 - 1e-12), side="left"), f)
        keep = lo <= hi
        qs, hi, lo = qs[keep], hi[keep], lo[keep]
        if not len(qs):
            continue
        sub = lo - 1 >= f
        for r, d in o.demand.items():
            ri = res_index.get(r)
            if ri is None or d <= 0:
                continue
            rid = ri * k + qs
            crow += [rid, rid[sub]]
            ccol += [offs[oi] + hi - f, offs[oi] + lo[sub] - 1 - f]
            cval += [np.full(len(qs), float(d)), np.full(int(sub.sum()), -float(d))]
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            return -math.inf
    if crow:
        rid = np.concatenate(crow)
        used, inv = np.unique(rid, return_inverse=True)
        rows.append(n_mono + inv)
        cols.append(np.concatenate(ccol))
        vals.append(np.concatenate(cval))
        caps_by_res = {i: float(cap[r]) for r, i in res_index.items()}
        b_ub += [caps_by_res[int(u) // k] for u in used]
    if mk:
        # M ≥ Σ cost Z (per job): Σ coef Z − M ≤ 0
        base = len(b_ub)
        for j in range(nj):
            b_ub.append(0.0)
        for j, idx, coef in cap_rows:
            rows.append(np.full(len(idx), base + j))
            cols.append(idx)
            vals.append(coef)
        rows.append(base + np.arange(nj))
        cols.append(np.full(nj, n))
        vals.append(-np.ones(nj))
        c[n] = 1.0
    a_ub = csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(len(b_ub), nvar))
    a_eq = csr_matrix((np.ones(len(eq_cols)), (np.array(eq_rows), np.array(eq_cols))), shape=(nj, nvar))
    bounds = np.zeros((nvar, 2))
    bounds[:, 1] = 1.0
    if mk:
        bounds[n] = (0.0, np.inf)
    res = None
    for method in (METHOD, "highs-ds"):
        # the LP is feasible (it admits every semi-active schedule); an interior point run that says
        # otherwise hit a numerical failure (seen on a makespan instance), so dual simplex tries again
        left = None if time_limit is None else time_limit - (time.perf_counter() - t0)
        if left is not None and left < MIN_LP_TIME:
            return -math.inf
        res = linprog(c, A_ub=a_ub, b_ub=np.array(b_ub), A_eq=a_eq, b_eq=np.ones(nj), bounds=bounds,
                      method=method, options=lp_options(left, a_ub.nnz))
        if res.status in (0, 1):      # solved, or out of time / iterations: no retry
            break
    if res.status != 0:
        return -math.inf
    lb = float(res.fun)
    lb -= 1e-7 * abs(lb)
    return lb if incumbent is None else min(lb, incumbent)
