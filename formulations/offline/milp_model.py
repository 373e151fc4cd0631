"""The MILP model of the offline oracle (PuLP with HiGHS or CBC): a disjunctive job-pair formulation.

Options come from :mod:`formulations.offline.concrete` (the complete enumeration on small instances: exact)
or :mod:`formulations.offline.classes` (the relaxed classes, whose durations are lower bounds: the model is
then a relaxation and its bound stays valid).

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
starts every job by L_j (:func:`formulations.offline.time_indexed_bound.latest_starts`), so the bound, capped
at the incumbent, is valid.

The bound is HiGHS' ``mip_dual_bound`` or CBC's logged bound; the incumbent is decoded (order + options) and
re-timed exactly, then replayed.
"""

from __future__ import annotations

import itertools
import math
import os
import tempfile
import time
from dataclasses import dataclass

from jctlab.lp import pulp
from jctlab.model import Instance

from ..cbc_log import cbc_log_bound, cbc_threads
from ..schedules import job_weights
from . import symmetry
from .options import Option, capacities
from .time_indexed_bound import latest_starts


@dataclass(frozen=True)
class MilpModelParams:
    """How far the capacity-set rows are enumerated (beyond: fewer rows, still a relaxation)."""

    subset_budget: int = 4000      # capacity sets a resource, smallest first
    level_limit: int = 100_000     # job sets of one size kept for extension while enumerating them
    nnz_budget: int = 300_000      # nonzeros of all capacity-set rows (CBC reads a 2M-nonzero model for seconds)


@dataclass(frozen=True)
class MilpModel:
    """A built model: the PuLP problem, x[j][k] (job j on option k), s[j] (start), and whether every capacity
    set has its row (else a relaxation)."""

    prob: pulp.LpProblem
    x: list[list[pulp.LpVariable]]
    s: list[pulp.LpVariable]
    exact: bool


@dataclass(frozen=True)
class MilpAnswer:
    """What the solver returned: a solution exists, it is proven optimal, the bound (model units, or None),
    the model is infeasible."""

    has_solution: bool
    proven: bool
    bound: float | None
    infeasible: bool


def _subsets(opts, r, cap, budget, window=None, until: float | None = None, level_limit: int = 100_000):
    """Job sets whose maximum demands on r exceed its capacity, smallest first; (sets, exact).
    ``window[j] = (earliest start, latest end)``: only sets whose windows share an instant (others
    never run together, so they need no row). At ``until`` (``time.perf_counter()``) the sets found
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
            if len(nxt) > level_limit:     # too many sets to extend (a large capacity): stop, still a relaxation
                return out, False
            if until is not None and time.perf_counter() > until:
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


def build(inst: Instance, opts: list[list[Option]], resources: set, params: MilpModelParams = MilpModelParams(),
          until: float | None = None, incumbent: float | None = None, twins: bool = True) -> MilpModel:
    """The model; ``exact`` is False when the set enumeration stopped at ``params.subset_budget`` sets a
    resource, at ``params.nnz_budget`` nonzeros or at ``until`` (``time.perf_counter()``): fewer constraints, so
    still a relaxation. ``incumbent``: the objective of a known schedule; starts are then limited to
    the latest start of a semi-active schedule of objective ≤ it
    (:func:`formulations.offline.time_indexed_bound.latest_starts`; the model keeps such an optimum, so its
    bound, capped at the incumbent, stays valid), which gives each pair of jobs its own big-M, fixes
    the order of pairs whose windows do not meet and drops capacity sets that never run together.
    ``twins``: identical nodes ordered by their first job, as in the CP-SAT relaxations."""
    jobs = inst.jobs
    nj = len(jobs)
    cap = capacities(inst)
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
    if twins:
        # identical nodes ordered by their first job, as in the CP-SAT relaxations (formulations.offline.symmetry;
        # the exact and class options here relax the whole instance)
        for lhs, rhs in symmetry.twin_rows(opts, symmetry.twin_groups(inst)):
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
        sets, ok = _subsets(opts, r, cap[r], params.subset_budget, window, until, params.level_limit)
        exact &= ok
        cands += [(len(S), i, S, tot) for S, tot in sets]
    cands.sort(key=lambda c: c[:2])
    for _, i, S, tot in cands:
        if nnz > params.nnz_budget or (until is not None and time.perf_counter() > until):
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
    w = job_weights(inst)
    if inst.objective == "makespan":
        z = pulp.LpVariable("z")
        for j in range(nj):
            prob += z >= C[j]
        prob += z
    else:
        prob += pulp.lpSum(w[j] * C[j] for j in range(nj))
    return MilpModel(prob, x, s, exact)


def to_objective(inst: Instance, v: float) -> float:
    """The instance's objective from the model's (Σ w_j C_j, or the makespan's last completion)."""
    jobs = inst.jobs
    if inst.objective == "makespan":
        return v - min(j.arrival for j in jobs)
    w = job_weights(inst)
    return (v - sum(wi * j.arrival for wi, j in zip(w, jobs))) / sum(w)


def run_solver(prob: pulp.LpProblem, backend: str, time_limit: float | None, threads: int, seed: int) -> MilpAnswer:
    """Solve with HiGHS or CBC."""
    if backend == "highs":
        kw = dict(msg=False, gapRel=0.0, gapAbs=0.0, threads=max(1, threads), random_seed=int(seed),
                  mip_feasibility_tolerance=1e-9, primal_feasibility_tolerance=1e-9)
        if time_limit is not None:
            kw["timeLimit"] = max(0.05, float(time_limit))
        try:
            prob.solve(pulp.HiGHS(**kw))
        except (pulp.PulpSolverError, IndexError, ValueError):
            # coefficients beyond HiGHS' infinity (1e20: durations of 1e27 s are valid input) break PuLP's
            # read-back of the solution: no solution from the MILP, the caller keeps its other schedules
            return MilpAnswer(False, False, None, False)
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
        return MilpAnswer(has, opt, bound, infeasible)
    fd, log = tempfile.mkstemp(suffix=".log")
    os.close(fd)
    try:
        # tolerances as for HiGHS: with a big-M near the horizon, a binary off by 1e-7 lets a pair overlap 1e-7·M
        kw = dict(msg=False, gapRel=0.0, gapAbs=0.0, threads=cbc_threads(threads), logPath=log,
                  options=[f"randomCbcSeed {int(seed) + 1}", "integerTolerance 1e-9", "primalTolerance 1e-9"])
        if time_limit is not None:
            kw["timeLimit"] = max(0.5, float(time_limit))
        try:
            prob.solve(pulp.PULP_CBC_CMD(**kw))
        except pulp.PulpSolverError:
            return MilpAnswer(False, False, None, False)
        text = open(log).read()
    finally:
        os.unlink(log)
    has = prob.sol_status in (1, 2)
    opt = prob.sol_status == 1 and prob.status == 1 and "Optimal solution found" in text
    bound = cbc_log_bound(text)
    if opt and has:
        bound = pulp.value(prob.objective)  # proven at zero gap (ratioGap = allowableGap = 0)
    return MilpAnswer(has, opt, bound, prob.status == -1)
