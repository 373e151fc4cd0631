"""MILP oracle for the offline class (PuLP with HiGHS or CBC): disjunctive job-pair formulation.

Options come from :mod:`formulations.offline_candidates`: the complete concrete enumeration on
small instances (exact), else the relaxed classes ("n GPUs on node v" / "spread"), whose durations
are lower bounds (the model is then a relaxation and its bound stays valid).

Variables: x_o ∈ {0,1} (job j takes option o, Σ_o x_o = 1), s_j ∈ [a_j, L_j] (start, continuous, exact
float durations so no rounding), y_ab ∈ {0,1} for jobs that may compete (y_ab = 1 ⇒ a ends before
b starts: s_b ≥ s_a + Σ_o d_o x_o − M_ab(1 − y_ab); y_ab + y_ba ≤ 1). L_j is the latest start of a
semi-active schedule (of objective ≤ the incumbent's, when there is one), M_ab = L_a + max d_a − a_b
(no row when ≤ 0), and a pair whose windows [a_j, L_j + max d_j] do not meet has its order fixed.
Resources: a GPU g (capacity 1): y_ab + y_ba ≥ u_ag + u_bg − 1 with u_jg = Σ_{o∋g} x_o. A cumulative
resource r of capacity K (node CPU/memory, node and cluster GPU counts of the relaxed classes): for
every set S of ≥ 2 jobs whose largest demands exceed K,
  Σ_{j∈S} d_jr(x) ≤ K + (Σ_{j∈S} D_jr − K)·Σ_{a≠b∈S} y_ab.
If no pair of S is ordered the intervals pairwise overlap and (Helly, intervals) share an instant,
where the capacity must hold; otherwise the constraint is void. So with every such S the model is
exact; only sets whose windows share an instant need a row; the enumeration stops at a budget of sets
(smallest first) and is then a relaxation, still a valid bound. Some optimal (left-shifted) schedule
starts every job by L_j (:func:`formulations.time_indexed_bound.latest_starts`), so the bound, capped at
the incumbent, is valid.

The bound is HiGHS' ``mip_dual_bound`` or CBC's logged bound (reduced by 1e-7 relative for solver
tolerances); the incumbent is decoded (order + options) and re-timed exactly, then replayed.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
import time

import pulp

from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

from . import offline_candidates as oc
from . import offline_cpsat, offline_symmetry
from .common import cbc_log_bound
from .offline_cpsat import (QUEUE, better, check_offline, class_resources, finish, gap_open, improve, last_model_time,
                            objective_of, preemptive_lb, queued, time_indexed_lb)
from .time_indexed_bound import latest_starts

BOUND_SAFETY = 1e-7
SUBSET_BUDGET = 4000   # capacity sets a resource, smallest first
LEVEL_LIMIT = 100_000  # job sets of one size kept for extension while enumerating them
NNZ_BUDGET = 300_000  # nonzeros of all capacity-set rows (CBC reads a 2M-nonzero model for seconds)
TI_MIN_TIME = 0.5     # s left after an unproven MILP: worth a time-indexed LP
BUILD_SHARE = 0.3     # of the time left, at most, for adding capacity-set constraints
#: handing a built model to the solver, and its answer back, in units of the build's time (kept out of the
#: solver's limit): HiGHS through highspy about 1×; CBC writes an MPS file, starts, presolves and writes a
#: solution outside its own clock: 1.3-1.6 s beyond its limit after a 1.16-s build (128 GPUs with PS)
HANDOVER = {"highs": 1.0, "cbc": 2.0}
CLASS_LEVEL_LIMIT = 6000  # most options of a class model split by CPU/memory level (where node CPUs/memory can
                         # bind; follow-up 19); beyond it the coarse classes (256 GPUs / 64 jobs with levels and PS:
                         # 20 675 split options, whose model overran a 2-s limit by 4 s)
QUEUE_MILP_SHARE = 0.8   # of the time left, for the solver on a queue; then the local search
TI_SHARE = 0.25          # of the limit: the time-indexed LP before the MILP on a queue


def _subsets(opts, r, cap, budget, window=None, deadline: float | None = None):
    """Job sets whose maximum demands on r exceed its capacity, smallest first; (sets, exact).
    ``window[j] = (earliest start, latest end)``: only sets whose windows share an instant (others
    never run together, so they need no row). At ``deadline`` (``time.perf_counter()``) the sets found
    so far (not exact: fewer rows, still a relaxation)."""
    dem = {}
    for j, ol in enumerate(opts):
        d = max((o.demand.get(r, 0) for o in ol), default=0)
        if d > 0:
            dem[j] = d
    jobs = sorted(dem)
    out = []
    # level by level: the sets of size k whose windows share an instant (max start < min end), each
    # extended by a later job
    level = [((j,), dem[j], -math.inf if window is None else window[j][0],
              math.inf if window is None else window[j][1]) for j in jobs]
    pos = {j: i for i, j in enumerate(jobs)}
    for _ in range(2, len(jobs) + 1):
        nxt = []
        for S, tot, lo, hi in level:
            if len(nxt) > LEVEL_LIMIT:     # too many sets to extend (a large capacity): stop, still a relaxation
                return out, False
            if deadline is not None and time.perf_counter() > deadline:
                return out, False
            for j in jobs[pos[S[-1]] + 1:]:
                lo2, hi2 = (lo, hi) if window is None else (max(lo, window[j][0]), min(hi, window[j][1]))
                if lo2 >= hi2:
                    continue
                T, t2 = S + (j,), tot + dem[j]
                nxt.append((T, t2, lo2, hi2))
                if t2 > cap + 1e-9:
                    out.append((T, t2))
                    if len(out) > budget:
                        return out[:budget], False
        if not nxt:
            break
        level = nxt
    return out, True


def build(inst: Instance, opts, resources, budget=SUBSET_BUDGET, deadline: float | None = None,
          incumbent: float | None = None):
    """The model; ``exact`` is False when the set enumeration stopped at ``budget`` sets a resource,
    at ``NNZ_BUDGET`` nonzeros or at ``deadline`` (``time.perf_counter()``): fewer constraints, so
    still a relaxation. ``incumbent``: the objective of a known schedule; starts are then limited to
    the latest start of a semi-active schedule of objective ≤ it
    (:func:`formulations.time_indexed_bound.latest_starts`; the model keeps such an optimum, so its
    bound, capped at the incumbent, stays valid), which gives each pair of jobs its own big-M, fixes
    the order of pairs whose windows do not meet and drops capacity sets that never run together."""
    jobs = inst.jobs
    nj = len(jobs)
    cap = oc.capacities(inst)
    late = latest_starts(inst, opts, incumbent)
    pmax = [max(o.dur for o in ol) for ol in opts]
    window = [(jobs[j].arrival, max(jobs[j].arrival, late[j]) + pmax[j]) for j in range(nj)]
    prob = pulp.LpProblem("offline", pulp.LpMinimize)
    x = [[pulp.LpVariable(f"x_{j}_{k}", cat="Binary") for k in range(len(ol))] for j, ol in enumerate(opts)]
    s = [pulp.LpVariable(f"s_{j}", lowBound=jobs[j].arrival, upBound=max(jobs[j].arrival, late[j]))
         for j in range(nj)]
    D = [pulp.lpSum(o.dur * xk for o, xk in zip(ol, x[j])) for j, ol in enumerate(opts)]
    C = [s[j] + D[j] for j in range(nj)]
    for j in range(nj):
        prob += pulp.lpSum(x[j]) == 1
    if offline_cpsat.TWINS:
        # identical nodes ordered by their first job, as in the CP-SAT relaxations (formulations.offline_symmetry;
        # the exact and class options here relax the whole instance)
        for lhs, rhs in offline_symmetry.twin_rows(opts, offline_symmetry.twin_groups(inst)):
            prob += pulp.lpSum(x[j][k] for j, k in lhs) <= pulp.lpSum(x[i][k] for i, k in rhs)
    y: dict = {}

    def Y(a, b):
        if (a, b) not in y:
            # a pair whose windows do not meet runs in one order: that y is fixed to 1, the other to 0
            first = a if window[a][1] <= window[b][0] else b if window[b][1] <= window[a][0] else None
            for u, v in ((a, b), (b, a)):
                fix = None if first is None else int(u == first)     # (PuLP resets a Binary's bounds)
                y[(u, v)] = (pulp.LpVariable(f"y_{u}_{v}", cat="Binary") if fix is None else
                             pulp.LpVariable(f"y_{u}_{v}", lowBound=fix, upBound=fix, cat="Integer"))
        return y[(a, b)]

    exact, nnz = True, 0
    use = {}  # (j, r) -> expression of demand
    resources = sorted(resources, key=repr)       # a set's order would change the model with the hash seed
    for r in resources:
        for j, ol in enumerate(opts):
            terms = [(o.demand[r], xk) for o, xk in zip(ol, x[j]) if o.demand.get(r, 0) > 0]
            if terms:
                use[(j, r)] = terms
    cands = []    # (size, resource index, set, total demand): all resources' pairs first, then triples, ...
    for i, r in enumerate(resources):
        users = sorted(j for (j, rr) in use if rr == r)
        if len(users) < 2:
            continue
        if r[0] == "g":
            for a, b in itertools.combinations(users, 2):
                Y(a, b)
                prob += y[(a, b)] + y[(b, a)] >= pulp.lpSum(v for _, v in use[(a, r)]) + pulp.lpSum(
                    v for _, v in use[(b, r)]) - 1
            continue
        sets, ok = _subsets(opts, r, cap[r], budget, window, deadline)
        exact &= ok
        cands += [(len(S), i, S, tot) for S, tot in sets]
    cands.sort(key=lambda c: c[:2])
    for _, i, S, tot in cands:
        if nnz > NNZ_BUDGET or (deadline is not None and time.perf_counter() > deadline):
            exact = False
            break
        r = resources[i]
        coef: dict = {}
        for j in S:
            for c, v in use[(j, r)]:
                coef[v] = coef.get(v, 0.0) + c
        for a, b in itertools.combinations(S, 2):
            Y(a, b)
            coef[y[(a, b)]] = coef[y[(b, a)]] = -(tot - cap[r])
        prob += pulp.LpAffineExpression(coef) <= cap[r]
        nnz += len(coef)
    for (a, b), v in list(y.items()):
        if a < b:
            prob += y[(a, b)] + y[(b, a)] <= 1
        big_m = window[a][1] - jobs[b].arrival      # s_a + D_a − s_b never exceeds it
        if big_m > 0:
            prob += s[b] >= s[a] + D[a] - big_m * (1 - v)
    w = oc.weights(inst)
    if inst.objective == "makespan":
        z = pulp.LpVariable("z")
        for j in range(nj):
            prob += z >= C[j]
        prob += z
    else:
        prob += pulp.lpSum(w[j] * C[j] for j in range(nj))
    return prob, x, s, exact


def _to_obj(inst: Instance, v: float) -> float:
    jobs = inst.jobs
    if inst.objective == "makespan":
        return v - min(j.arrival for j in jobs)
    w = oc.weights(inst)
    return (v - sum(wi * j.arrival for wi, j in zip(w, jobs))) / sum(w)


def run_solver(prob, backend: str, time_limit, threads: int, seed: int):
    """Solve; returns (has_solution, proven_optimal, bound in model objective units or None)."""
    if backend == "highs":
        kw = dict(msg=False, gapRel=0.0, gapAbs=0.0, threads=max(1, threads), random_seed=int(seed),
                  mip_feasibility_tolerance=1e-9, primal_feasibility_tolerance=1e-9)
        if time_limit is not None:
            kw["timeLimit"] = max(0.05, float(time_limit))
        prob.solve(pulp.HiGHS(**kw))
        has = prob.sol_status in (1, 2)
        bound = None
        try:
            bound = float(prob.solverModel.getInfo().mip_dual_bound)
        except Exception:
            pass
        opt = prob.sol_status == 1 and prob.status == 1
        if opt and has:
            v = pulp.value(prob.objective)
            bound = v if bound is None or not math.isfinite(bound) else min(bound, v)
        infeasible = prob.status == -1
        return has, opt, bound, infeasible
    fd, log = tempfile.mkstemp(suffix=".log")
    os.close(fd)
    try:
        # tolerances as for HiGHS: with a big-M near the horizon, a binary off by 1e-7 lets a pair overlap 1e-7·M
        kw = dict(msg=False, gapRel=0.0, gapAbs=0.0, threads=max(1, threads), logPath=log,
                  options=[f"randomCbcSeed {int(seed) + 1}", "integerTolerance 1e-9", "primalTolerance 1e-9"])
        if time_limit is not None:
            kw["timeLimit"] = max(0.5, float(time_limit))
        prob.solve(pulp.PULP_CBC_CMD(**kw))
        text = open(log).read()
    finally:
        os.unlink(log)
    has = prob.sol_status in (1, 2)
    opt = prob.sol_status == 1 and prob.status == 1 and "Optimal solution found" in text
    bound = cbc_log_bound(text)
    if opt and has:
        bound = pulp.value(prob.objective)  # proven at zero gap (ratioGap = allowableGap = 0)
    return has, opt, bound, prob.status == -1


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, backend: str = "highs", warm: bool = True, ls_share: float = 0.05) -> Result:
    """Offline oracle by MILP (``backend`` "highs" or "cbc").

    The bound is the largest of the MILP's own, the per-job bound Σ(a_j + p_j), the preemptive LP and the
    time-indexed LP over the same options (all relaxations of the same problem, as in
    :func:`formulations.offline_cpsat.solve`). Where the greedy schedule is above ``QUEUE`` × the per-job
    bound (jobs wait; the big-M MILP's bound and incumbents are weak there), with a time limit, before the
    MILP: the preemptive LP, list-scheduling local search (:func:`formulations.offline_cpsat.improve`,
    ``ls_share`` of the limit) whose schedule competes with the MILP's, and, if the incumbent is still
    that far above the bound, the time-indexed LP (``TI_SHARE`` of the limit). Otherwise the time-indexed
    LP runs when the MILP stops unproven before its limit, with the time left. On a queue the solver gets
    ``QUEUE_MILP_SHARE`` of the time left and the local search what is still left after it."""
    t0 = time.perf_counter()

    def left_():      # seconds left of the limit (only called with a time limit)
        return time_limit - (time.perf_counter() - t0)

    check_offline(inst, "offline_milp")
    if backend not in ("highs", "cbc"):
        raise ValueError(f"unknown backend {backend!r}")
    solver = f"milp-{backend}"
    params = {"time_limit": time_limit, "threads": threads, "seed": seed, "backend": backend}
    concrete, complete = oc.concrete_options(inst, deadline=oc.setup_deadline(t0, time_limit))
    bad = oc.job_infeasible(inst, concrete, complete)
    if bad is not None:
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, solver, pulp.__version__,
                      {**params, "reason": f"job {inst.jobs[bad].name} fits no allocation"})
    lb = oc.trivial_bound(inst)
    best = oc.greedy(inst, solver, oc.greedy_deadline(t0, time_limit)) if warm else (None, None)
    if hint is not None:
        r = replay(inst, hint.with_claim(None) if hint.claimed else hint)
        if r.valid:
            best = better(best, (hint, r))
    ls_opts = None      # list-scheduling local search where jobs wait (and durations are fixed)
    if time_limit is not None and queued(inst, objective_of(best)):
        # jobs wait: the MILP's own bound on Σ C_j may stay near Σ(a_j + p_j) (its big-M LP is weak there),
        # and so may its incumbents
        lb = max(lb, preemptive_lb(inst, left_(), time_limit))
        if ls_share > 0:
            ls_opts = oc.search_options(inst, concrete, complete, None if complete else oc.node_complete_options(inst))
    if ls_opts is not None:
        best = better(best, improve(inst, ls_opts, best, left_, ls_share, time_limit, seed))
    if time_limit is not None and left_() <= 0:
        # the incumbent and bounds took the limit (a large instance at a short limit): no model
        params["model"] = "none (no time left)"
        return finish(inst, best, lb, t0, solver, pulp.__version__, params)
    if complete:
        opts = concrete
        res = {r for r in oc.capacities(inst) if r[0] == "g"} | oc.binding_resources(inst, concrete)
        ti_res = res
    else:
        opts = oc.class_options(inst, True)
        levels = sum(map(len, opts)) <= CLASS_LEVEL_LIMIT
        opts = opts if levels else oc.class_options(inst)
        res = {r for r in oc.capacities(inst) if r[0] in ("n", "all")} | oc.binding_resources(inst, opts)
        ti_res = class_resources(inst, levels)
    ti_done = False
    if time_limit is not None and objective_of(best) > QUEUE * lb:
        # still a queue after the preemptive LP: the time-indexed LP is the stronger bound there
        lb = max(lb, time_indexed_lb(inst, opts, ti_res, best, TI_SHARE * time_limit))
        ti_done = True
    tb = time.perf_counter()
    u = objective_of(best)      # windows from it (a hair above: the incumbent itself stays in the model)
    prob, x, s, exact = build(inst, opts, res, deadline=None if time_limit is None else tb + BUILD_SHARE * left_(),
                              incumbent=u * (1 + 1e-9) if math.isfinite(u) else None)
    params["model"] = ("exact" if complete else "relaxed") + ("" if exact else "+budget")
    # handing the model to the solver (highspy calls, or an MPS file for CBC) costs about as much as
    # building it (CBC twice that), outside the solver's own clock: keep that time out of its limit
    now = time.perf_counter()
    left = last_model_time(time_limit, None if time_limit is None else time_limit - (now - t0) - HANDOVER[backend] * (now - tb))
    if left is not None and ls_opts is not None:
        left *= QUEUE_MILP_SHARE      # on a queue the local search keeps the rest (its schedules beat the MILP's)
    has, opt, bound, infeasible = run_solver(prob, backend, left, threads, seed)
    if bound is not None and math.isfinite(bound):
        b = _to_obj(inst, bound)
        lb = max(lb, b - BOUND_SAFETY * abs(b) - 1e-9)
    if has:
        choice = [max(range(len(xj)), key=lambda k: xj[k].value() or 0.0) for xj in x]
        start = [v.value() for v in s]
        from .offline_cpsat import decode

        best = better(best, decode(inst, opts, {"choice": choice, "start": start, "unit": 1.0}, solver,
                                   None if time_limit is None else t0 + time_limit))
    if not ti_done and time_limit is not None and left_() > TI_MIN_TIME and gap_open(objective_of(best), lb):
        lb = max(lb, time_indexed_lb(inst, opts, ti_res, best, left_()))
    if ls_opts is not None and time_limit is not None and left_() > TI_MIN_TIME and gap_open(objective_of(best), lb):
        # the rest of the limit (QUEUE_MILP_SHARE kept it, or the MILP proved its own model early): local search
        best = better(best, improve(inst, ls_opts, best, left_, 1.0, time_limit, seed + 1))
    return finish(inst, best, lb, t0, solver, pulp.__version__, params)
