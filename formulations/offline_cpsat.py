"""CP-SAT oracle for the offline class (SPEC §3): non-preemptive jobs arriving over time.

Two models over the option structure of :mod:`formulations.offline_candidates`:

* **exact model** (concrete options): one optional fixed-size interval per job and option sharing
  the job's start; no-overlap per GPU; redundant GPU-count cumulatives per node and for the
  cluster; CPU/memory cumulatives per node where an option can hold more than the fair share.
  When the option enumeration is complete its bound is a bound of the offline class.
* **hybrid models** (lazy variability, :func:`offline_candidates.hybrid_node_options`): some jobs with
  every single-node GPU set on chosen nodes (exact durations), their relaxed classes elsewhere; a
  relaxation too (proof in that function), tighter where the class model gives jobs GPUs they cannot all
  get.
* **relaxed model** (classes "n GPUs on node v" / "n GPUs spread"): durations are lower bounds over
  every allocation of the class (best GPUs under variability, best cpu_mem level, smallest PS
  overhead, no locality penalty on one node); per-node and cluster GPU-count cumulatives. Every
  offline schedule maps onto a feasible solution of it with no larger completion times, so its
  proven bound is a bound of the offline class, whatever the size of the instance. Its solution is
  decoded (order + class) into concrete GPUs by list scheduling. Spread allocations are split by
  their GPU count per node group (:func:`offline_candidates.spread_pattern_options`), still a relaxation.
* **exact node decode** (incumbents): a solution's node assignment solved exactly per node
  (:func:`node_decode`).

Times are integers in units ``u``. Bound side: durations and release dates are rounded DOWN, which
keeps every offline schedule feasible (floor(s)+floor(p) ≤ floor(s+p); a set of jobs active at an
integer instant of the rounded schedule is active together just before the next one in the real
schedule), so the rounded optimum is a lower bound. Incumbents never use model times: the ORDER and
allocations are decoded and re-timed exactly by earliest-start list scheduling through the
simulator (interference included), then replayed; the objective is the replayed one.

Status: ``optimal`` when the replayed objective and the proven bound agree within the replay
tolerance (relative 1e-6, which covers the rounding unit); ``feasible`` with the bound otherwise;
``infeasible`` when some job fits no allocation; ``timeout_no_solution`` with the bound.
"""

from __future__ import annotations

import dataclasses
import math
import time

from ortools.sat.python import cp_model

from jctlab.errors import InputError
from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus
from jctlab.speed import duration

from . import offline_candidates as oc
from . import offline_deadlines
from . import offline_rates
from . import offline_symmetry
from . import time_indexed_bound
from .common import GAP_TOL, checked_bound

OPT_RTOL = GAP_TOL   # the one "zero gap" rule (SPEC §4), also used by checked_bound
SOLVER = "cpsat"
#: for every model: probing cost seconds of presolve (follow-up 5); presolve's symmetry fixing is not
#: interruptible and took 10-14 s on node-exact models of identical GPUs with PS options (4-s limits; follow-up 16)
SAT_PARAMS: dict = {"cp_model_probing_level": 0, "symmetry_level": 0}
#: rate bands (follow-up 31): at most this many node-exact models with rate bands after a proven one (0: none),
#: none after this many in a row that raised neither the bound nor the incumbent, none with less time left (s)
RATE_ROUNDS = 12
#: dense bands in the patterns of the incumbent's spread jobs (offline_rates.fine_thresholds), each shortening the
#: duration by at most this share of the zero-gap tolerance (OPT_RTOL × U); follow-up 36
FINE_SHARE = 1.0
RATE_PATIENCE = 3
RATE_MIN_S = 0.5
LP_SHARE = 0.4     # of the time left: time-indexed LP bound after an unproven class model
PRE_SHARE = 0.15   # of the limit, at most: the preemptive LP (its refinements stop within it)
EXACT_SHARE = 0.6   # of the limit (after local search): the exact model; then, if unproven, ...
CLASS_SHARE = 0.4   # ... of the time left: the class model (if it has COARSER times fewer options); the LP
COARSER = 3         # bounds get the rest
QUEUE = 1.05        # preemptive LP / Σ(a_j + p_j) above this: a queue (jobs must wait), see after_exact
PIN_WALL_S = 1.0    # s: most wall time of one GPU pinning (pin_gpus)
DECODE_SHARE = 0.02  # of the limit (at most PIN_WALL_S) kept after the last model for its decode's pinning
TWINS = True       # order identical nodes by their first job in the relaxations (offline_symmetry)
DEADLINE_SHARE = 0.3   # of the limit, at most: latest completions from the incumbent (offline_deadlines) ...
DEADLINE_S_PER_JOB = 0.35   # ... where that share is at least this per job (30 jobs: 92 relaxations took 12-15 s;
#                             at 30 s the phase left the 30-job benchmark seed 3 a worse incumbent: docs, follow-up 30)
DEADLINE_BATCH = 2   # deadline relaxations solved at once, threads // DEADLINE_BATCH workers each (follow-up 37)
CORE_SHARE = 0.6   # of the class model's time: core-based workers when the default ones have not proven it
SKIP_CORE_WITHOUT_SOLUTION = True   # ... unless they found no solution at all (local search gets that time)


def core_params(threads: int) -> dict | None:
    """SAT parameters that put CP-SAT's core-based lower-bound search on the class model, or None where
    the default portfolio already runs it (≥ 4 workers). With 1-3 workers the default portfolio has no
    core worker; on loaded instances (jobs queue behind spread jobs) it is the one that proves the class
    model (16 GPUs / 10 jobs, seed 0: 5.7 s with [core, default_lp] against unproven in 30 s)."""
    if threads >= 4:
        return None
    if threads == 1:
        return {**SAT_PARAMS, "optimize_with_core": True}
    return {**SAT_PARAMS, "subsolvers": ["core", "default_lp"] + (["fixed"] if threads == 3 else [])}


def exact_params(threads: int, node_exact: bool = False, deadlines: bool = False) -> dict | None:
    """SAT parameters of the complete exact model and (``node_exact``) of the node-exact and banded models: with
    2-3 workers a core-based worker and a default LP worker (``max_lp`` beside it on the node-exact models), both on
    the whole problem (no LNS worker: the pipeline's incumbent is hinted, complete), or None (the default
    portfolio: it has a core worker from 4 workers on; with 1 the core worker alone is far weaker).

    ``deadlines`` (node-exact and banded models under objective-driven deadlines,
    :mod:`formulations.offline_deadlines`): ``max_lp`` and ``default_lp``, no core worker. Under the deadlines the LP workers close the bound faster
    (docs/oracle-offline.md, follow-up 37; each model captured from the pipeline, 2 threads, CP-SAT seeds 0-5):
    the node-exact models of the 60-s benchmark proven in 9.3-10.6 s against 13.5-15.8 s (30 / 32 seed 3), 5.8-6.1
    against 8.6-8.9 s (50 / 64 seed 0), 6.3-8.3 against 8.6-15.5 s (50 / 64 seed 2), 9.8-14.6 against 12.9-16.9 s
    (30 / 32 seed 1); seed 1's first banded model in 6.6-11.4 s (mean 9.5) against 8.1-17.0 s (mean 13.5).

    ``max_lp`` on the node-exact models (docs/oracle-offline.md, follow-up 35; 60-s benchmark, three runs):
    50 jobs / 64 GPUs seed 0 proven in 21.9-22.2 s (0.114 % gap at 60 s with ``default_lp``, proven in one
    run of four), seed 2 in 26.5-27.9 s (30.6-44.1 s), 30 / 32 seed 3 in 29.2-36.8 s (37.9-44.7 s), seed 1's
    node-exact model proven 15-23 s from its start in 6 of 6 runs (0.0024-0.0029 % at 60 s); the spread-heavy 16 x 10 and
    32 x 20 rows within the noise. The complete exact model keeps ``default_lp`` (PS and CPU/memory levels on 4
    GPUs, 10 s: 4 x 8 at 13.0 % with ``max_lp`` against 11.4 %).

    Measured on the node-exact model of the 30-job benchmark, 2 threads (docs/oracle-offline.md, follow-up
    24): the default workers prove seeds 0, 2 and 4 in 8-16 s but not seeds 1 and 3 in 420 s; the core
    worker proves seed 1 in 80-86 s and seed 3 in 147 s, not seed 4 in 90 s; the two side by side prove
    seed 1 in 86 s and seed 4 in 32 s (from a greedy hint). Not ``core_minimization_level`` 0: it proves seed 1 in
    20 s and seed 3 in 12 s, but it certified seed 3 optimal at 2 476.29 and 2 476.06, above a replayed schedule
    of 2 475.79 (wrong proofs; follow-up 25)."""
    if threads < 2 or threads >= 4:
        return None
    if node_exact and deadlines:
        workers = ["max_lp", "default_lp"]
    else:
        workers = ["core", "max_lp" if node_exact else "default_lp"]
    return {**SAT_PARAMS, "subsolvers": workers, "num_full_subsolvers": 2}


def _unit(inst: Instance, opts) -> float:
    h = max(j.arrival for j in inst.jobs) + sum(max((o.dur for o in ol), default=0.0) for ol in opts)
    return max(h, 1.0) / 1e9


def _int_weights(inst: Instance) -> tuple[list[int], int]:
    w = oc.weights(inst)
    if all(x == w[0] for x in w):
        return [1] * len(w), 1
    k = 1000
    return [max(1, math.floor(x * k)) for x in w], k


def build_and_solve(inst: Instance, opts: list[list[oc.Option]], resources: set, *, time_limit, threads, seed,
                    hint: dict | None = None, unit: float | None = None,
                    sat_params: dict | None = None, aggregate: bool = True, semi_active: bool = True,
                    twins: bool = False, latest_end: dict | None = None, hint_gpus: dict | None = None):
    """Solve the option model. Returns dict(status, bound (objective units), choice, start, twins, gpus).

    ``twins``: identical nodes are ordered by their first job and the hint is mirrored to match
    (:mod:`formulations.offline_symmetry`). Only for models that relax the whole instance (class, hybrid,
    node-exact, complete exact): their bound is unchanged; callers pass ``TWINS``.

    ``aggregate``: the single-node GPU sets of a job (without binding CPU/memory) share one optional
    interval per GPU (present iff the chosen set holds that GPU) and one per (node, size) for the
    GPU-count cumulatives, all with the job's start and its duration variable (the chosen set's). The
    same constraints as one interval per set (``aggregate=False``), but no-overlaps over jobs instead of
    over sets (node-exact model of the 30-job benchmark, seed 2: proven in 11 s, per set not in 60 s;
    docs/oracle-offline.md, follow-up 5).

    ``semi_active``: every start equals the job's release or another job's end. Left-shifting a job
    never breaks a release, a no-overlap or a cumulative and never delays a completion, so some optimum
    of every model is semi-active (a start s > release with no job ending at s can move to s − 1: the
    jobs running just before s are running at s too) and the optimum and the bound are unchanged. It
    helps CP-SAT prove small cumulative models (class model of 10 jobs on 16 GPUs, 2 threads: OPTIMAL in
    13 s in follow-up 6, without it the bound stuck 22 % lower after 60 s; that model now needs the
    core-based workers, :func:`core_params`; docs/oracle-offline.md, follow-ups 6 and 10).

    GPU-count cumulatives over the nodes of a node group T (``("set", T)`` in ``resources``,
    :func:`offline_candidates.node_groups`): spread options carry their own proven lower-bound demand on T,
    others their GPU count on T.

    ``latest_end``: {job: latest completion (s)} from :mod:`formulations.offline_deadlines` (e_j ≤ it, rounded
    up: model times are rounded down); the model then holds only the schedules at least as good as the
    incumbent the deadlines came from, and its bound must be capped at that incumbent's objective.

    Jobs with rate bands (:func:`offline_rates.banded`) get GPU literals (a relaxation still; ``out["gpus"]``:
    the GPUs they hold in the solution); ``hint_gpus``: their hinted GPUs (:func:`offline_rates.spread_gpus`).

    ``time_limit`` covers building the model too (CP-SAT gets what is left of it).
    """
    t_build = time.perf_counter()
    u = unit or _unit(inst, opts)
    cap = oc.capacities(inst)
    m = cp_model.CpModel()
    sets = [r[1] for r in resources if r[0] == "set"]
    H = math.floor(max(j.arrival for j in inst.jobs) / u) + sum(
        max(math.floor(o.dur / u) for o in ol) for ol in opts) + 1
    starts, ends, xs = [], [], []
    durs: list = []            # j → (duration variable, option durations in units)
    aggregated: list = []      # (y or z literal, j, options that set it) of the aggregated sets
    per_res: dict = {}
    banded = {j for j, ol in enumerate(opts) if any(offline_rates.need(o) is not None for o in ol)}
    for j, ol in enumerate(opts):
        rel = math.floor(inst.jobs[j].arrival / u)
        dd = [math.floor(o.dur / u) for o in ol]
        s = m.NewIntVar(rel, H, f"s{j}")
        d = m.NewIntVarFromDomain(cp_model.Domain.FromValues(sorted(set(dd))), f"d{j}")
        e = m.NewIntVar(rel + min(dd), H + max(dd), f"e{j}")
        if latest_end and j in latest_end:
            m.Add(e <= math.ceil(latest_end[j] / u) + 2)
        m.Add(e == s + d)
        x = [m.NewBoolVar(f"x{j}_{k}") for k in range(len(ol))]
        m.AddExactlyOne(x)
        m.Add(d == sum(dk * xk for dk, xk in zip(dd, x)))
        on_gpu: dict = {}      # aggregated single-node GPU sets: GPU → literals, (node, size) → literals
        on_node: dict = {}
        for k, (o, xk) in enumerate(zip(ol, x)):
            v1 = oc._single_node(o.alloc) if o.alloc is not None else None
            if aggregate and v1 is not None and all(r[0] in ("g", "n", "all") for r in o.demand if r in resources):
                for g in o.alloc.gpus:
                    on_gpu.setdefault(g, []).append(k)
                on_node.setdefault((v1, len(o.alloc.gpus)), []).append(k)
                continue
            iv = m.NewOptionalFixedSizeIntervalVar(s, dd[k], xk, f"i{j}_{k}")
            dem = {r: v for r, v in o.demand.items() if r in resources}
            for T in sets:
                if ("set", T) not in dem and not (o.cls is not None and o.cls[0] == "spread"):
                    tv = sum(o.demand.get(("n", v), 0) for v in T)   # concrete / single-node: exact count
                    if tv:
                        dem[("set", T)] = tv
            for r, v in dem.items():
                per_res.setdefault(r, []).append((iv, v, j))
        # aggregated single-node sets: y = "the chosen set holds GPU g", z = "it is size n on node v"
        for g, ks in on_gpu.items():
            if ("g", g) not in resources:
                continue
            y = m.NewBoolVar(f"y{j}_{g}")
            m.Add(y == sum(x[k] for k in ks))
            aggregated.append((y, j, set(ks)))
            ivg = m.NewOptionalIntervalVar(s, d, e, y, f"ig{j}_{g}")
            per_res.setdefault(("g", g), []).append((ivg, 1, j))
        for (v, n), ks in on_node.items():
            z = m.NewBoolVar(f"z{j}_{v}_{n}")
            m.Add(z == sum(x[k] for k in ks))
            aggregated.append((z, j, set(ks)))
            iv = m.NewOptionalIntervalVar(s, d, e, z, f"in{j}_{v}_{n}")
            for r in [("n", v), ("all",)] + [("set", T) for T in sets if v in T]:
                if r in resources:
                    per_res.setdefault(r, []).append((iv, n, j))
        starts.append(s)
        ends.append(e)
        xs.append(x)
        durs.append((d, dd))
    qs = {j: offline_rates.add_spread_gpus(m, inst, opts, j, starts[j], durs[j][0], ends[j], xs[j], per_res, resources)
          for j in sorted(banded)}
    for r, items in per_res.items():
        if len({j for _, _, j in items}) < 2:
            continue
        c = cap[r]
        if r[0] == "g":
            m.AddNoOverlap([iv for iv, _, _ in items])
        else:
            if sum(v for _, v, _ in items) <= c:
                continue
            scale = 1 if all(float(v).is_integer() for _, v, _ in items) and float(c).is_integer() else 1000
            m.AddCumulative([iv for iv, _, _ in items], [math.floor(v * scale + 1e-9) for _, v, _ in items],
                            math.ceil(c * scale - 1e-9))
    groups = offline_symmetry.twin_groups(inst) if twins else []
    if groups:
        offline_symmetry.add_twin_breaking(m, opts, xs, groups)
        renamed = offline_symmetry.canonical_hint(opts, hint, groups)
        if renamed != hint:        # twins renamed: the hinted GPUs are not the renamed schedule's
            hint, hint_gpus = renamed, None
    wi, _ = _int_weights(inst)
    semi: dict = {}   # j → [at its release, at the end of job i ≠ j ...]
    if semi_active:   # a start is a release or another job's end (see the docstring)
        for j, s in enumerate(starts):
            b0 = m.NewBoolVar(f"b{j}")
            m.Add(s == math.floor(inst.jobs[j].arrival / u)).OnlyEnforceIf(b0)
            lits = [b0]
            for i, e in enumerate(ends):
                if i != j:
                    b = m.NewBoolVar(f"b{j}_{i}")
                    m.Add(s == e).OnlyEnforceIf(b)
                    lits.append(b)
            m.AddBoolOr(lits)
            semi[j] = lits
    z_max = None
    if inst.objective == "makespan":
        z_max = m.NewIntVar(0, 2 * H + 1, "z")
        for e in ends:
            m.Add(z_max >= e)
        m.Minimize(z_max)
    else:
        m.Minimize(sum(w * e for w, e in zip(wi, ends)))
    for j, (k, _) in (hint or {}).items():     # the chosen option
        if k is None:
            continue
        for kk, xk in enumerate(xs[j]):
            m.AddHint(xk, kk == k)
    for j, q in qs.items():      # GPU literals: none for a hinted option that is not spread, else the hinted GPUs
        k = (hint or {}).get(j, (None,))[0]
        spread = k is not None and opts[j][k].cls is not None and opts[j][k].cls[0] == "spread"
        if k is not None and (not spread or j in (hint_gpus or {})):
            held_j = hint_gpus[j] if spread else ()
            for g, lit in q.items():
                m.AddHint(lit, g in held_j)
    full = complete_hint(inst, hint, u, H, [dd for _, dd in durs])
    if full is not None:
        # every variable hinted: CP-SAT takes the incumbent as its first solution at once (an incomplete
        # hint is only a search guide; the node-exact model of the 30-job benchmark found its first solution
        # after ~10 s with one)
        end_u = {j: su + durs[j][1][k] for j, (k, su) in full.items()}
        for j, (k, su) in full.items():
            m.AddHint(starts[j], su)
            m.AddHint(durs[j][0], durs[j][1][k])
            m.AddHint(ends[j], end_u[j])
        for lit, j, ks in aggregated:
            m.AddHint(lit, full[j][0] in ks)
        for j, lits in semi.items():
            su = full[j][1]
            m.AddHint(lits[0], su == math.floor(inst.jobs[j].arrival / u))
            for i, b in zip((i for i in range(len(ends)) if i != j), lits[1:]):
                m.AddHint(b, end_u[i] == su)
        if z_max is not None:
            m.AddHint(z_max, max(end_u.values()))
    elif hint:
        for j, (k, st) in hint.items():
            if k is None:
                continue
            rel = math.floor(inst.jobs[j].arrival / u)
            m.AddHint(starts[j], max(rel, min(H, math.floor(st / u))))
            if j in semi:   # a hinted start at the release: that literal; a later one: not it
                at_rel = math.floor(st / u) <= rel
                m.AddHint(semi[j][0], at_rel)
                for b in semi[j][1:] if at_rel else ():
                    m.AddHint(b, False)
    solver = cp_model.CpSolver()
    p = solver.parameters
    p.num_workers = max(1, int(threads))
    p.random_seed = int(seed)
    if time_limit is not None:
        p.max_time_in_seconds = max(0.01, float(time_limit) - (time.perf_counter() - t_build))
    for k, v in (SAT_PARAMS if sat_params is None else sat_params).items():
        if isinstance(v, (list, tuple)):
            getattr(p, k).extend(v)
        else:
            setattr(p, k, v)
    st = solver.Solve(m)
    if st == cp_model.MODEL_INVALID:   # never take a bound from an invalid model
        raise RuntimeError(f"offline CP-SAT model invalid: {m.Validate()[:300]}")
    out = {"status": solver.StatusName(st), "unit": u, "choice": None, "start": None, "twins": groups}
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out["choice"] = [next(k for k, xk in enumerate(x) if solver.Value(xk)) for x in xs]
        out["start"] = [solver.Value(s) for s in starts]
        out["gpus"] = {j: held for j, q in qs.items() if (held := tuple(sorted(g for g, lit in q.items()
                                                                                if solver.Value(lit))))}
        out["bound_units"] = solver.BestObjectiveBound()
    elif st == cp_model.INFEASIBLE:
        out["bound_units"] = math.inf
    else:
        out["bound_units"] = solver.BestObjectiveBound()
    return out


def complete_hint(inst: Instance, hint: dict | None, u: float, H: int, dds: list) -> dict | None:
    """Start units of a hint that covers every job ({j: (option, start seconds)}), left-shifted so that
    each start is the job's release or another job's end (``build_and_solve``'s semi-active rule), or
    None when the hint misses a job or an option. ``dds[j][k]``: option k's duration in units.

    The hinted schedule is feasible in units: its starts and durations round down, so two jobs that did
    not overlap in seconds do not in units. In hinted-start order each job j moves back to
    c = max(release, the latest end ≤ its start among the jobs already moved). Feasible: no moved job ends
    in (c, s_j], so every moved job that runs at some t in [c, s_j) still runs at s_j, and j fitted beside
    those at s_j; jobs after j in the order start at or after s_j and are checked against j when they move.
    A start never grows, so the objective never does either."""
    if not hint or len(hint) < len(dds) or any(k is None for k, _ in hint.values()):
        return None
    out: dict = {}
    ends: list = []
    for j in sorted(hint, key=lambda j: (hint[j][1], j)):
        k, st = hint[j]
        rel = math.floor(inst.jobs[j].arrival / u)
        su = max(rel, min(H, math.floor(st / u)))
        c = max([rel] + [e for e in ends if e <= su])
        out[j] = (k, c)
        ends.append(c + dds[j][k])
    return out


def node_exact(inst: Instance, mixed, v: str, S, unit: float, *, time_limit, threads: int, seed: int,
             hint: dict | None = None):
    """Exact model of the jobs S on node v alone: ``(R, sol)``. R (seconds) ≤ Σ_{j∈S} C_j of every offline
    schedule in which every job of S runs on node v alone (as a logic-based Benders cut in the
    class/hybrid models it did not pay off, see docs/oracle-offline.md; incumbents: :func:`node_decode`).

    Proof of R: such a schedule restricted to S is a schedule of S on v alone (release dates, each GPU
    of v used by one job at a time, v's CPU/memory); removing the other jobs and the resources of other
    nodes only relaxes it. ``mixed`` holds every single-node allocation of each job on v
    (:func:`offline_candidates.node_complete_options`, complete up to dominance), so the exact option
    model of S on v in unit u (rounded down as every model) has an optimum ≤ that restriction's rounded
    Σ e_j ≤ Σ C_j/u, and CP-SAT's proven bound L on it is ≤ its optimum: R = L·u. R = inf when some job
    has no single-node allocation on v.
    ``sol``: the sub-model solution {j: (option of ``mixed[j]`` on v, start units)} or None.
    ``hint``: {j: (allocation, start seconds)} (a previous schedule's jobs on v).
    """
    S = list(S)
    sub = inst.replace_jobs([inst.jobs[j] for j in S])
    sopts = [[o for o in mixed[j] if o.alloc is not None and oc._single_node(o.alloc) == v] for j in S]
    if any(not ol for ol in sopts):
        return math.inf, None
    gpus = {("g", g.id) for g in inst.cluster.node[v].gpus}
    res = gpus | {("n", v)} | {r for r in oc.binding_resources(sub, sopts) if r[1] == v}
    h = None
    if hint:
        h = {}
        for i, j in enumerate(S):
            if j in hint:
                a, st = hint[j]
                k = next((k for k, o in enumerate(sopts[i]) if o.alloc == a), None)
                if k is not None:
                    h[i] = (k, st)
    sol = build_and_solve(sub, sopts, res, time_limit=time_limit, threads=threads, seed=seed, unit=unit, hint=h)
    b = sol["bound_units"]
    R = b if not math.isfinite(b) else math.ceil(b - 1e-6) * sol["unit"]
    out = None
    if sol["choice"] is not None:
        out = {j: (sopts[i][sol["choice"][i]], sol["start"][i]) for i, j in enumerate(S)}
    return R, out


def node_decode(inst: Instance, mixed, assign: dict, order_key: dict, unit: float, *, deadline, threads: int,
                seed: int, hint: Schedule | None = None, per_node: float | None = 3.0):
    """Exact decode of a node assignment (incumbents only): the jobs that ``assign`` puts on node v alone
    (j → v; other jobs, j → None, are spread and take their fastest free spread set) are scheduled
    exactly on v by :func:`node_exact`'s model (every single-node GPU set, ≤ ``per_node`` s a node,
    hinted with ``hint``'s allocations; no limit when ``per_node`` and ``deadline`` are None); the
    per-node solutions (options + start order, spread jobs at ``order_key``) are re-timed by the
    simulator and replayed. Returns (schedule, replay) or (None, None)."""
    n = len(inst.jobs)
    hs = {}
    if hint is not None:
        for seg in hint.segments:
            hs[inst.index[seg.job]] = (seg.alloc, seg.start)
    choice: list = [None] * n
    start: list = [None] * n
    vs = sorted({x for x in assign.values() if x is not None}, key=lambda v: sum(x == v for x in assign.values()))
    for i, v in enumerate(vs):
        S = [j for j in range(n) if assign[j] == v]
        tl = per_node
        if deadline is not None:   # what is left, shared by the nodes still to solve (smallest first)
            tl = min(math.inf if tl is None else tl, (deadline - time.perf_counter()) / (len(vs) - i))
            if tl < 0.05:
                return (None, None)
        _, sol = node_exact(inst, mixed, v, S, unit, time_limit=tl, threads=threads, seed=seed, hint=hs)
        if sol is None:
            return (None, None)
        for j, (o, st) in sol.items():
            choice[j] = mixed[j].index(o)
            start[j] = st
    for j in range(n):
        if choice[j] is None:
            n_j = order_key[j][1]
            k = next((k for k, o in enumerate(mixed[j]) if o.cls is not None and o.cls[0] == "spread"
                      and o.cls[1] == n_j), None)
            if k is None:
                return (None, None)
            choice[j] = k
            start[j] = order_key[j][0]
    return decode(inst, mixed, {"choice": choice, "start": start}, SOLVER)


def assignment_of(inst: Instance, opts, sol, unit: float) -> tuple[dict, dict]:
    """(j → node or None, j → (start units, size)) of a model solution."""
    a, key = {}, {}
    for j, k in enumerate(sol["choice"]):
        o = opts[j][k]
        a[j] = _on_node(o)
        size = o.cls[1] if (o.cls is not None and o.cls[0] == "spread") else (
            o.cls[2] if o.cls is not None else len(o.alloc.gpus))
        key[j] = (sol["start"][j] * sol["unit"] / unit, size)
    return a, key


def assignment_of_schedule(inst: Instance, sched: Schedule, unit: float) -> tuple[dict, dict]:
    a, key = {}, {}
    for seg in sched.segments:
        j = inst.index[seg.job]
        a[j] = oc._single_node(seg.alloc)
        key[j] = (math.floor(seg.start / unit), len(seg.alloc.gpus))
    return a, key


def _on_node(o) -> str | None:
    """The node an option keeps the job on alone (class ("node", v, n) or a single-node GPU set), else None."""
    if o.cls is not None:
        return o.cls[1] if o.cls[0] == "node" else None
    return oc._single_node(o.alloc)


def bound_from_units(inst: Instance, b: float, u: float) -> float:
    """Objective lower bound from the rounded model's bound (see the module docstring)."""
    jobs = inst.jobs
    if not math.isfinite(b):
        return b
    if inst.objective == "makespan":
        lb = b * u - min(j.arrival for j in jobs)
    else:
        wi, k = _int_weights(inst)
        w = oc.weights(inst)
        lb = (b * u / k - sum(x * j.arrival for x, j in zip(w, jobs))) / sum(w)
    return lb - 1e-9 * abs(lb)


def hint_assignment(inst: Instance, opts, sched: Schedule | None) -> dict | None:
    """Map a schedule onto option indices and start times (concrete: same allocation; class: same class)."""
    if sched is None:
        return None
    out = {}
    for seg in sched.segments:
        j = inst.index.get(seg.job)
        if j is None:
            continue
        k = None
        held = most = None
        for kk, o in enumerate(opts[j]):
            if o.alloc is not None and o.alloc == seg.alloc:
                k = kk
                break
            if o.cls is not None and len(o.cls) > 3:      # group pattern: same GPU count per node group
                need = offline_rates.need(o)               # ... and, for a rate band, its rate sum in the band
                if _pattern_of(seg.alloc, o.cls) == o.cls[3] and (
                        need is None or need <= offline_rates.scaled_rate(inst, j, seg.alloc)):
                    k = kk
                    break
                continue
            if o.level is not None and o.level != oc.level_of(seg.alloc):
                continue
            if o.cls is not None and _same_class(o.cls, class_of(seg.alloc)):
                # a class may have variants (parameter servers on the node or not, how many): of those whose
                # CPUs/memory the allocation holds, the shortest (then the most CPUs/memory), which is no
                # longer than the allocation (a relaxation maps every allocation onto such a variant), so the
                # hinted schedule stays feasible in the model (the most CPUs alone was a slower variant, with
                # more servers, on PS jobs)
                held = held or oc.demand_of(inst, inst.jobs[j], seg.alloc)
                need = sum(v for r, v in o.demand.items() if r[0] in ("cpu", "mem"))
                if all(v <= held.get(r, 0) + 1e-9 for r, v in o.demand.items() if r[0] in ("cpu", "mem")):
                    if most is None or (o.dur, -need) < most:
                        k, most = kk, (o.dur, -need)
                elif most is None:
                    k = kk
        out[j] = (k, seg.start)
    return out


def _pattern_of(alloc, cls: tuple) -> tuple | None:
    """GPU counts of a spread allocation per node group of ``cls[3]`` (None when not that pattern's size)."""
    nodes = [g.split(":", 1)[0] for g in alloc.gpus]
    if len(set(nodes)) < 2 or len(nodes) != cls[1]:
        return None
    groups = [g for g, _ in cls[3]]
    if any(not any(v in g for g in groups) for v in nodes):
        return None
    return tuple((g, sum(v in g for v in nodes)) for g in groups)


def class_of(alloc) -> tuple:
    nodes = {g.split(":", 1)[0] for g in alloc.gpus}
    n = len(alloc.gpus)
    return ("node", next(iter(nodes)), n) if len(nodes) == 1 else ("spread", n, tuple(sorted(nodes)))


def _same_class(cls: tuple, c: tuple) -> bool:
    if cls == c:
        return True
    if cls[0] == "spread" and c[0] == "spread" and cls[1] == c[1]:
        return len(cls) == 2 or tuple(sorted(cls[2])) == c[2]
    return False


def rate_rounds(inst: Instance, opts, res, sol, best, lb: float, deadlines, time_limit, left, end,
                threads: int, seed: int, params: dict, t0: float):
    """Rate bands (:mod:`formulations.offline_rates`) for a proven node-exact model (options ``opts``, solution
    ``sol``) whose bound leaves a gap: the spread patterns split at the rate sums that cut its solution off (the
    incumbent's, the relaxed jobs' GPUs around the concrete sets, the middle of each chosen band; and dense bands,
    ``FINE_SHARE`` of the zero-gap tolerance apart, from the incumbent's rate sum to the top of its pattern), solved again
    with the incumbent hinted, while each model is proven, the gap open and time left. ``deadlines(incumbent)``
    returns (options, latest completions or None, cap) under that incumbent's deadlines; each model gets those of
    the best incumbent of the moment (a better one keeps fewer options and completions) and its bound is capped
    at ``cap``. Each model is a relaxation, so every bound holds; returns (best, lb)."""
    ths: dict = {}
    fine: dict = {}          # (job, pattern) → dense thresholds around the incumbents' spread allocations
    w = oc.weights(inst)
    cur = opts
    stats = params["rate_bands"] = {"rounds": 0, "proven": 0}
    stale = 0         # rounds in a row that raised neither bound nor incumbent
    while (sol["status"] == "OPTIMAL" and gap_open(objective_of(best), lb) and stats["rounds"] < RATE_ROUNDS
           and stale < RATE_PATIENCE and (left() is None or left() > RATE_MIN_S)):
        pinned = pin_gpus(inst, cur, sol, keep_concrete=True, wall=None if left() is None else left())
        new = offline_rates.next_thresholds(inst, cur, sol, [best[0]], pinned)
        merged = {j: ths.get(j, set()) | new.get(j, set()) for j in set(ths) | set(new)}
        if merged == ths:
            break
        ths = merged
        base, latest, cap = deadlines(best)
        step = FINE_SHARE * OPT_RTOL * objective_of(best) * sum(w) / max(w)
        for key, ts in offline_rates.fine_thresholds(inst, base, best[0], step).items():
            fine[key] = fine.get(key, set()) | ts
        cur = offline_rates.banded(inst, base, ths, fine)
        sol = build_and_solve(inst, cur, res, time_limit=last_model_time(time_limit, left()), threads=threads,
                              seed=seed, hint=hint_assignment(inst, cur, best[0]),
                              sat_params=exact_params(threads, True, latest is not None),
                              twins=TWINS, latest_end=latest, hint_gpus=offline_rates.spread_gpus(inst, best[0]))
        before = (lb, objective_of(best))
        lb = max(lb, min(cap, bound_from_units(inst, sol["bound_units"], sol["unit"])))
        if sol["choice"] is not None:
            best = better(best, decode(inst, cur, sol, SOLVER, end))
        gain = lb - before[0] + before[1] - objective_of(best)
        stale = 0 if gain > OPT_RTOL * lb else stale + 1
        stats["rounds"] += 1
        stats["proven"] += sol["status"] == "OPTIMAL"
        stats["thresholds"] = sum(map(len, ths.values()))
        _phase(params, "rate-bands", sol, lb, best, t0)
    return best, lb


def last_model_time(time_limit: float | None, left: float | None) -> float | None:
    """The time of a pipeline's last model: what is left, less ``DECODE_SHARE`` of the limit (at most
    ``PIN_WALL_S``) for the GPU pinning of its decode (the node-exact decode of a spread job pinned around
    concrete sets gave 30 jobs / 32 GPUs seed 1 its best schedule, follow-up 9)."""
    if time_limit is None or left is None:
        return left
    return max(0.05, left - min(PIN_WALL_S, DECODE_SHARE * time_limit))


def decode(inst: Instance, opts, sol, method: str, deadline: float | None = None):
    """Order + choices of a model solution → re-timed valid schedule (schedule, replay). ``deadline``
    (``perf_counter``): the GPU pinning (:func:`pin_gpus`) stops there."""
    order = sorted(range(len(inst.jobs)), key=lambda j: (sol["start"][j], inst.jobs[j].arrival, j))
    chosen = {j: opts[j][k] for j, k in enumerate(sol["choice"])}
    if all(o.alloc is not None for o in chosen.values()):
        allocs = {j: o.alloc for j, o in chosen.items()}
        return oc.best_retime(inst, order, lambda: oc.fixed_chooser(allocs), method)
    best = oc.best_retime(inst, order, lambda: oc.mixed_chooser(chosen), method)
    if any(o.cls is not None and len(o.cls) > 2 and o.cls[0] == "spread" for o in chosen.values()):
        # variant: spread jobs take the fastest free spread set on any nodes (not only their support)
        loose = {j: dataclasses.replace(o, cls=o.cls[:2]) if o.cls is not None and o.cls[0] == "spread" else o
                 for j, o in chosen.items()}
        best = better(best, oc.best_retime(inst, order, lambda: oc.mixed_chooser(loose), method))
    # variants: GPUs consistent with the model's own times, relaxed jobs pinned and concrete ones moved,
    # or (when the model chose concrete sets) those kept as they are and relaxed jobs placed around them
    keeps = (False, True) if any(o.alloc is not None for o in chosen.values()) else (False,)
    seen: list = []
    for keep in keeps:
        wall = None if deadline is None else deadline - time.perf_counter()
        pinned = pin_gpus(inst, opts, sol, keep_concrete=keep, wall=wall)
        if pinned and pinned not in seen:
            seen.append(pinned)
            chosen_p = {**chosen, **pinned}
            # pinned sets carry the fastest PS placement, chosen without the CPUs: placed when they start
            best = better(best, oc.best_retime(inst, order, lambda: oc.mixed_chooser(chosen_p, ps_free=set(pinned)),
                                               method))
    groups = {v: g for g in oc.node_groups(inst) if len(g) > 1 for v in g}
    if any(o.cls is not None and o.cls[0] == "node" and o.cls[1] in groups for o in chosen.values()):
        # variant: a node class may run on any node with the same GPU types (a group pattern's count on a
        # group of several nodes is not tied to one of them, so the model's node may not have its GPUs)
        moved = {j: dataclasses.replace(o, cls=("nodes", groups[o.cls[1]], o.cls[2]))
                 if o.cls is not None and o.cls[0] == "node" and o.cls[1] in groups else o for j, o in chosen.items()}
        best = better(best, oc.best_retime(inst, order, lambda: oc.mixed_chooser(moved), method))
    if any(o.level is not None and o.alloc is None for o in chosen.values()):
        # variant: classes split by CPU/memory level take the fastest level that fits when they start
        best = better(best, oc.best_retime(inst, order, lambda: oc.mixed_chooser(chosen, levels=False), method))
    if any(o.ps_local is not None for o in chosen.values()):
        # variant: PS jobs keep their parameter servers on or off their node, as the model chose
        best = better(best, oc.best_retime(inst, order, lambda: oc.mixed_chooser(chosen, ps_side=True), method))
    return best


def pin_gpus(inst: Instance, opts, sol, time_limit: float = 2.0,   # deterministic seconds
             keep_concrete: bool = False, wall: float | None = None) -> dict:
    """Concrete GPUs for every job of a model solution, consistent with the model's own times.

    The model fixes, per job, an interval [s, s + d) in its time unit and a node and size
    (single-node options, ``("node", v, n)`` classes), a GPU count per node group (spread patterns),
    on its support (spread supports) or in the cluster (the plain spread class); a multi-node concrete
    set stays as it is. A small CP-SAT
    model picks the GPUs (b[j, g] = 1 when job j holds GPU g, with the counts of its option): first
    as few GPUs held twice at a model start as possible (none when the model's counts allow it; they
    are counts, not GPUs, so they may not), then the largest Σ_j d_j Σ_g b[j, g]·ρ_jg / max ρ_j (long
    jobs on their fast GPUs). Returns job → option with that allocation (its fastest PS/level choice)
    for the jobs whose GPUs differ from the model's; {} when nothing is found within ``time_limit``
    (CP-SAT deterministic time, so the same solution gives the same GPUs). The
    re-timing then delays whatever still clashes. ``keep_concrete``: every concrete option keeps its
    GPUs and only relaxed jobs get GPUs, around them (a node-exact solution with one spread job: the
    moved-GPUs variant lengthens exact jobs, 30 jobs / 32 GPUs seed 1: 3026.79, this one 3019.83 against
    a model value of 3019.66; docs/oracle-offline.md, follow-up 9).

    Plain list scheduling instead gives a spread job the fastest GPUs free *now*, which can take the
    GPUs that a later job of the model needs and push it back (16 GPUs / 10 jobs, seed 0: decoded
    10 155 against a model optimum of 7 826; with this, 7 836; docs/oracle-offline.md, follow-up 6).
    """
    u = sol.get("unit")
    if u is None or sol.get("start") is None or (wall is not None and wall < 0.05):
        return {}
    cl = inst.cluster
    n = len(inst.jobs)
    chosen = [opts[j][k] for j, k in enumerate(sol["choice"])]
    start = list(sol["start"])                                         # model units
    end = [start[j] + math.floor(chosen[j].dur / u) for j in range(n)]
    m = cp_model.CpModel()
    b: dict = {}
    obj = []
    for j, o in enumerate(chosen):
        job = inst.jobs[j]
        v1 = oc._single_node(o.alloc) if o.alloc is not None else None
        if j in sol.get("gpus", {}):
            groups, fixed = [], sol["gpus"][j]                         # the model's own GPUs (GPU literals)
        elif o.alloc is not None and (v1 is None or keep_concrete):
            groups, fixed = [], o.alloc.gpus                           # concrete set as it is
        elif o.alloc is not None:
            groups, fixed = [((v1,), len(o.alloc.gpus))], ()
        elif o.cls is not None and o.cls[0] == "node":
            groups, fixed = [((o.cls[1],), o.cls[2])], ()
        elif o.cls is not None and o.cls[0] == "spread" and len(o.cls) > 3:
            groups, fixed = list(o.cls[3]), ()
        elif o.cls is not None and o.cls[0] == "spread":             # on its support S, or anywhere
            groups, fixed = [(o.cls[2] if len(o.cls) > 2 else tuple(nd.name for nd in cl.nodes), o.cls[1])], ()
        else:
            return {}
        top = max(oc.rho(job, g) for g in cl.gpus if job.can_use(g.type))
        for nodes, c in groups:
            gl = [g for nd in cl.nodes if nd.name in nodes for g in nd.gpus if job.can_use(g.type)]
            for g in gl:
                b[j, g.id] = m.NewBoolVar(f"b{j}_{g.id}")
                obj.append(b[j, g.id] * round(1000 * o.dur / 3600 * min(1.0, oc.rho(job, g) / top)))
            m.Add(sum(b[j, g.id] for g in gl) == c)
        for g in fixed:
            b[j, g] = m.NewConstant(1)
    clash = []       # GPUs held twice at a model start: penalised, not forbidden (the MILP model does
    for t in sorted(set(start)):                     # not hold group counts, so it may need them)
        run = [j for j in range(n) if start[j] <= t < end[j]]
        for g in cl.gpus:
            lits = [b[j, g.id] for j in run if (j, g.id) in b]
            if len(lits) > 1:
                z = m.NewIntVar(0, len(lits) - 1, "")
                m.Add(sum(lits) <= 1 + z)
                clash.append(z)
    m.Maximize(sum(obj) - 10 ** 7 * sum(clash))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = time_limit      # reproducible, unlike a wall-clock limit
    # ... but a loaded machine can stretch it to seconds (4.6 s at 20 GPUs / 9 jobs): a wall cap too
    solver.parameters.max_time_in_seconds = PIN_WALL_S if wall is None else min(PIN_WALL_S, wall)
    if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {}
    out = {}
    for j, o in enumerate(chosen):
        gids = tuple(sorted(g.id for g in cl.gpus if (j, g.id) in b and solver.Value(b[j, g.id])))
        if o.alloc is not None and set(gids) == set(o.alloc.gpus):
            continue
        alloc = [a for a, _ in oc.allocations_on(inst, inst.jobs[j], gids)]
        lv = o.level if o.alloc is None else oc.level_of(o.alloc)
        if lv is not None:
            # the model's CPU/memory level (a faster one may take CPUs it gave others)
            alloc = [a for a in alloc if oc.level_of(a) == lv] or alloc
        if o.ps_local and o.cls is not None and o.cls[0] == "node":
            # the model's servers: all on the node, that many (the fastest placement may take CPUs it gave others)
            alloc = [a for a in alloc if set(a.ps_nodes) == {o.cls[1]} and len(a.ps_nodes) == (o.ps_count or
                                                                                                 len(a.ps_nodes))] or alloc
        if alloc:
            out[j] = dataclasses.replace(o, alloc=alloc[0], cls=None)
    return out


def check_offline(inst: Instance, who: str) -> None:
    if inst.problem != "offline":
        raise InputError(inst.name, "problem", f"{who} solves offline instances, got {inst.problem!r}")


def preemptive_lb(inst: Instance, time_left: float | None, time_limit: float | None = None, threads: int = 1) -> float:
    """The preemptive LP bound (:mod:`formulations.preemptive_bound`) within ``time_left``, and at most
    PRE_SHARE of ``time_limit`` when given; −inf if it fails: it is an extra, the other bounds stay valid."""
    from . import preemptive_bound

    if time_left is not None and time_limit is not None:
        time_left = min(time_left, PRE_SHARE * time_limit)
    try:
        return preemptive_bound.lower_bound(inst, time_limit=time_left, threads=threads)
    except Exception:
        return -math.inf


def time_indexed_lb(inst: Instance, opts, res: set, best, time_limit: float | None) -> float:
    """The time-indexed LP bound of the option model ``opts`` (:mod:`formulations.time_indexed_bound`)
    with the incumbent ``best`` for its horizon and slots; −inf when not solved in ``time_limit``."""
    return time_indexed_bound.lower_bound(inst, opts, res, incumbent=objective_of(best), time_limit=time_limit,
                                          focus=_last_completion(best))


def _last_completion(best) -> float | None:
    """The incumbent's last completion (where the time-indexed LP puts most of its slots)."""
    return max(best[1].completion.values()) if best[1] is not None and best[1].completion else None


def class_resources(inst: Instance, levels: bool = False) -> set:
    """The capacities of a class model: node and cluster GPU counts, node-set cumulatives (no GPU identity),
    and the node CPUs/memory that class options can overload (parameter servers kept on the node, CPU/memory
    levels when the classes are split by ``levels``)."""
    return {r for r in oc.capacities(inst) if r[0] in ("n", "all", "set")} | oc.binding_resources(
        inst, oc.class_options(inst, levels))


def refine_levels(inst: Instance, sol, classes, best, lb: float, time_limit: float | None, threads: int, seed: int,
                  params: dict, t0: float, sat_params: dict | None = None):
    """After a proven class model, where node CPUs or memory can bind: the class model split by CPU/memory
    level (:func:`offline_candidates.class_options` with ``levels``), a tighter relaxation (the coarse one
    gives a class the fastest level's speed and the cheapest level's CPUs) that CP-SAT may need much longer
    for (64 GPUs / 50 jobs with levels: unproven after 30 s, the coarse one proven in 1.7 s). Its bound
    and decoded schedule count either way; when it is proven it replaces the coarse model for what
    follows. Returns (solution, classes, best, lb)."""
    fine = oc.class_options(inst, levels=True)
    if (sol["status"] != "OPTIMAL" or not any(o.level is not None for ol in fine for o in ol)
            or not gap_open(objective_of(best), lb) or (time_limit is not None and time_limit < 0.2)):
        return sol, classes, best, lb
    sol_f, best, lb = solve_classes(inst, fine, class_resources(inst, True), best, lb, time_limit, threads, seed,
                                    sat_params)
    _phase(params, "relaxed-levels", sol_f, lb, best, t0)
    return (sol_f, fine, best, lb) if sol_f["status"] == "OPTIMAL" else (sol, classes, best, lb)


def solve_classes(inst: Instance, classes, res_cls: set, best, lb: float, time_limit: float | None, threads: int,
                  seed: int, sat_params: dict | None = None):
    """The class model (a relaxation): hinted with the incumbent, its proven bound raises ``lb`` and its
    decoded solution competes with ``best``. Returns (solution, best, lb)."""
    sol = build_and_solve(inst, classes, res_cls, time_limit=time_limit, threads=threads, seed=seed,
                          hint=hint_assignment(inst, classes, best[0]),
                          sat_params=sat_params, twins=TWINS)
    lb = max(lb, bound_from_units(inst, sol["bound_units"], sol["unit"]))
    if sol["choice"] is not None:
        best = better(best, decode(inst, classes, sol, SOLVER))
    return sol, best, lb


def after_exact(inst: Instance, concrete, res: set, best, lb: float, queue: bool, left, threads: int, seed: int,
                params: dict, t0: float):
    """More bounds for an exact model CP-SAT did not prove in its share of the limit. Unless the
    preemptive LP showed a ``queue`` (its bound above ``QUEUE`` × Σ(a_j + p_j)), and if the class model
    is ``COARSER`` times smaller (CPU/memory levels, PS): the class model (``CLASS_SHARE`` of the time
    left; CP-SAT often proves it in a fraction of a second). Then the time-indexed LP over the exact
    options (on a queue CP-SAT's bound on Σ C_j may still be Σ(a_j + p_j), and the class model's would
    not move either)."""
    classes = oc.class_options(inst)
    if not queue and sum(map(len, concrete)) >= COARSER * sum(map(len, classes)) and gap_open(objective_of(best), lb):
        t_cls, t1 = left() * CLASS_SHARE, time.perf_counter()
        sol, best, lb = solve_classes(inst, classes, class_resources(inst), best, lb, t_cls, threads, seed)
        _phase(params, "relaxed", sol, lb, best, t0)
        _, _, best, lb = refine_levels(inst, sol, classes, best, lb, t_cls - (time.perf_counter() - t1), threads,
                                       seed, params, t0)
    if gap_open(objective_of(best), lb):
        lb = max(lb, time_indexed_lb(inst, concrete, {r for r in res if r[0] not in ("n", "all")}, best, left()))
    _phase(params, "lp-bounds", {"status": "-"}, lb, best, t0)
    return best, lb


def finish(inst: Instance, best, lb: float, t0: float, solver: str, version: str, params: dict) -> Result:
    """Result from the best (schedule, replay) and the proven bound."""
    runtime = time.perf_counter() - t0
    sched, rep = best
    if sched is None:
        return Result(None, None, lb, SolveStatus.TIMEOUT_NO_SOLUTION, runtime, solver, version, params)
    obj = rep.objective
    lb = checked_bound(lb, obj, params)
    status = SolveStatus.OPTIMAL if lb is not None and obj - lb <= OPT_RTOL * max(abs(obj), 1e-12) else SolveStatus.FEASIBLE
    sched = sched.__class__(sched.instance, solver, sched.segments, None, sched.extra)
    return Result(sched, obj, lb, status, runtime, solver, version, params)


def queued(inst: Instance, objective: float) -> bool:
    """Jobs wait for GPUs (a queue): ``objective`` (a schedule's, or a bound) is above ``QUEUE`` ×
    Σ(a_j + p_j). There the job-level models' bounds stay near Σ(a_j + p_j) and their first incumbents
    are poor: the LP bounds and list scheduling do the work (docs/oracle-offline.md, follow-ups 11-14)."""
    return objective > QUEUE * oc.trivial_bound(inst)


def gap_open(obj: float, lb: float) -> bool:
    """Gap not closed (no incumbent counts as open)."""
    return not math.isfinite(obj) or obj - lb > OPT_RTOL * abs(obj)


def objective_of(best) -> float:
    """The replayed objective of an incumbent (schedule, replay); inf without one."""
    return best[1].objective if best[1] is not None else math.inf


def better(a, b):
    if b[0] is None or (b[1] is not None and not b[1].valid):
        return a
    if a[0] is None or b[1].objective < a[1].objective - 1e-12:
        return b
    return a


LS_ITERS = 4000   # local-search moves per call when there is no time limit (deterministic)
SGS_OPTION_S = 1.5e-5   # s per option to set up list scheduling (measured 9-17 µs at 110 000-150 000 options)
LS_MIN_S = 0.15       # s of local search at least (beyond its set-up) ...
LS_MAX_SHARE = 0.15   # ... where that is at most this share of the time limit


def improve(inst: Instance, opts, best, left, share: float, time_limit, seed: int, extra: list | None = None):
    """Local search (:func:`offline_candidates.local_search`) from the incumbent's start order and
    allocations and from the arrival order, ``share`` of the time limit (``LS_ITERS`` moves without
    one); the result is re-timed by the simulator and replayed (objective = replayed)."""
    n = len(inst.jobs)
    seeds: list = [sorted(range(n), key=lambda j: (inst.jobs[j].arrival, j))]
    if best[0] is not None:
        segs = {inst.index[sg.job]: sg for sg in best[0].segments}
        if len(segs) == n:
            order = sorted(range(n), key=lambda j: (segs[j].start, j))
            seeds.insert(0, (order, {j: sg.alloc for j, sg in segs.items()}))
            seeds.insert(1, order)
    seeds += extra or []
    for sd in seeds:
        if isinstance(sd, tuple):       # the seed's own allocations, so its list schedule is no worse than it
            opts = oc.with_allocations(inst, opts, sd[1])
    # at least LS_MIN_S of search beyond its set-up where LS_MAX_SHARE of the limit allows: at 4 s a 40-job queue
    # on 16 GPUs got no search at all (its 0.2-s share was below the set-up estimate) and ended at 17 711 s
    # mean JCT against 10 431 s at 5 s (docs/oracle-offline.md, follow-up 29)
    setup = SGS_OPTION_S * sum(map(len, opts)) + 0.05
    if time_limit is not None:
        budget = min(left(), max(share * time_limit, min(setup + LS_MIN_S, LS_MAX_SHARE * time_limit)))
    deadline = None if time_limit is None else time.perf_counter() + budget
    if deadline is not None and deadline - time.perf_counter() < setup:
        return (None, None)         # not even time to set the list scheduler up (256 GPUs with PS: 1.3 s)
    r = oc.local_search(inst, opts, seeds, deadline, rng_seed=seed,
                        max_iters=LS_ITERS if time_limit is None else None)
    if r is None:
        return (None, None)
    _, order, allocs = r
    return oc.best_retime(inst, order, lambda: oc.fixed_chooser(allocs), SOLVER)


def lns(inst: Instance, opts, best, res: set, deadline: float | None, threads: int, seed: int, window: int = 8,
        rounds: int = 20):
    """Large-neighbourhood search in the exact option model (incumbents only, never a bound).

    Jobs outside a window of ``window`` consecutive jobs (incumbent start order) keep the incumbent's
    option (one option each), window jobs get all theirs; CP-SAT re-solves that restricted model
    (hinted with the incumbent, ≤ 3 s) and its solution is decoded, re-timed and replayed."""
    import random

    rnd = random.Random(seed)
    n = len(inst.jobs)
    for _ in range(rounds):
        if deadline is not None and time.perf_counter() > deadline - 0.2:
            break
        hint = hint_assignment(inst, opts, best[0])
        if hint is None or len(hint) < n or any(k is None for k, _ in hint.values()):
            break
        order = sorted(range(n), key=lambda j: (hint[j][1], j))
        w = min(window, n)
        i0 = rnd.randrange(n - w + 1)
        free = set(order[i0:i0 + w])
        sub = [opts[j] if j in free else [opts[j][hint[j][0]]] for j in range(n)]
        sub_hint = {j: ((k if j in free else 0), st) for j, (k, st) in hint.items()}
        tl = 3.0 if deadline is None else max(0.05, min(3.0, deadline - time.perf_counter()))
        sol = build_and_solve(inst, sub, res, time_limit=tl, threads=threads, seed=seed, hint=sub_hint)
        if sol["choice"] is not None:
            best = better(best, decode(inst, sub, sol, SOLVER))
    return best


def _cheaters(inst: Instance, opts, sol) -> set[int]:
    """Jobs on a relaxed class option in ``sol`` whose fastest concrete realisation in the decoded
    schedule is slower than the class duration (heuristic choice of jobs to make exact)."""
    sched, rep = decode(inst, opts, sol, SOLVER)
    out = set()
    if sched is None:
        return {j for j, k in enumerate(sol["choice"]) if opts[j][k].alloc is None}
    for seg in sched.segments:
        j = inst.index[seg.job]
        o = opts[j][sol["choice"][j]]
        if o.alloc is None and duration(inst.jobs[j], seg.alloc, inst.cluster) > o.dur * (1 + 1e-9) + 1e-9:
            out.add(j)
    return out


def class_rest_bound(inst: Instance, classes, res_cls: set, sched: Schedule | None, threads: int, seed: int):
    """The class model as :data:`offline_deadlines.LowerBound`: a lower bound on Σ w (C − a) of a job subset,
    its jobs held to their latest completions, hinted with the incumbent's restriction."""
    w = oc.weights(inst)

    def bound(S: list[int], latest: dict[int, float], t: float) -> float:
        sub = inst.replace_jobs([inst.jobs[k] for k in S])
        lat = {i: latest[k] for i, k in enumerate(S)}
        sopts = offline_deadlines.restrict(sub, [classes[k] for k in S], lat)
        if sopts is None:
            return -math.inf
        names = {inst.jobs[k].name for k in S}
        sb = None if sched is None else dataclasses.replace(
            sched, segments=tuple(x for x in sched.segments if x.job in names))
        sol = build_and_solve(sub, sopts, res_cls, time_limit=t, threads=threads, seed=seed,
                              hint=hint_assignment(sub, sopts, sb),
                              twins=TWINS, latest_end=lat)
        b = bound_from_units(sub, sol["bound_units"], sol["unit"])
        return b * sum(w[k] for k in S) if math.isfinite(b) else -math.inf

    return bound


def rest_bounds(inst: Instance, classes, res_cls: set, best, time_limit: float, left: float, threads: int,
                seed: int, params: dict) -> list[float] | None:
    """Lower bounds L_j on the other jobs' Σ w (C − a) for the objective-driven deadlines of
    :mod:`formulations.offline_deadlines` (class model relaxations, at most ``DEADLINE_SHARE`` of the limit),
    or None where they do not apply (makespan, no incumbent)."""
    if inst.objective == "makespan" or best[0] is None:
        return None
    t1 = time.perf_counter()
    w = oc.weights(inst)
    stats: dict = {}
    batch = max(1, min(DEADLINE_BATCH, threads))
    lower = offline_deadlines.rest_bounds(
        inst, objective_of(best) * sum(w), [x * p for x, p in zip(w, oc.p_min(inst))],
        class_rest_bound(inst, classes, res_cls, best[0], max(1, threads // batch), seed),
        deadline=t1 + min(DEADLINE_SHARE * time_limit, 0.5 * left), batch=batch, stats=stats)
    params["deadlines"] = {**stats, "t": round(time.perf_counter() - t1, 2)}
    return lower


def _phase(params: dict, name: str, sol: dict, lb: float, best, t0: float) -> None:
    """Diagnostics: per phase, CP-SAT status, bound so far, best replayed objective so far, elapsed."""
    params.setdefault("phases", []).append(
        {"phase": name, "status": sol["status"], "bound": lb,
         "objective": best[1].objective if best[1] is not None else None, "t": time.perf_counter() - t0})


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, relaxed_share: float = 0.5,
          node_complete: bool = True, warm: bool = True, ls_share: float = 0.05,
          hybrid_rounds: int = 12, hybrid_share: float = 0.3, hybrid_add: int = 300,
          lns_share: float = 0.15, hybrid_stop: float = 0.4,
          node_decode_share: float = 0.05) -> Result:
    """Offline oracle by CP-SAT. See the module docstring for the models and what ``status`` means.

    Complete instances (every allocation enumerated), with a time limit: the preemptive LP (when the
    greedy schedule is above ``QUEUE`` × Σ(a_j + p_j)); on a queue (:func:`after_exact`) list-scheduling local search (``ls_share``, where durations are fixed); the
    exact model (``EXACT_SHARE`` of what is left; :func:`exact_params` workers); then, if unproven, :func:`after_exact` (the class
    model unless the instance is a queue, the time-indexed LP). Without a limit: the exact model only.

    Large instances, in order: greedy; list-scheduling local search (``ls_share`` of the limit; jobs
    larger than every node get concrete spread candidates); class model (``relaxed_share`` of what is
    left; with a time limit and < 4 threads, ``1 − CORE_SHARE`` of that with the default workers, then,
    if unproven, the rest with the core-based ones, which then also solve the later models); where node
    CPUs/memory can bind, the class model split by CPU/memory level with what is left of the class model's
    time (:func:`refine_levels`); the preemptive LP where the default workers leave the class model unproven
    (before the core-based ones, within the class model's time); once the class model is proven, with
    enough time (``DEADLINE_SHARE`` of the limit, at least ``DEADLINE_S_PER_JOB`` per job), objective-driven
    deadlines (:func:`rest_bounds`, :mod:`formulations.offline_deadlines`; relaxations ``DEADLINE_BATCH`` at a
    time): the later models keep only options and completions that a schedule
    at least as good as the incumbent can have, and their bounds are capped at it (the hybrid rounds and the
    second local search are then skipped); lazy-variability hybrid rounds (at most ``hybrid_rounds``, each
    ``hybrid_share`` of what is left,
    none started after ``hybrid_stop`` of the limit, ≤ ``hybrid_add`` new options a round; a cheater
    becomes exact only on the node the model put it on, :func:`offline_candidates.hybrid_node_options`);
    local search again; LNS in the exact option
    model (``lns_share`` of what is left; not with deadlines); node-exact model for the rest (without one, too many options:
    local search for the rest, or where it does not apply the exact model over restricted options); once it
    is proven with a gap left, rate rounds (:func:`rate_rounds`, :mod:`formulations.offline_rates`) while time
    is left (each with the deadlines of the best incumbent of the moment). The node assignments of the
    class solution, of each hybrid solution and of the incumbent before the node-exact phase are also
    decoded exactly per node (:func:`node_decode`, ``node_decode_share`` of the limit each). The bound
    is the max of the proven bounds of the class, hybrid, node-exact and banded models, the preemptive LP and
    the per-job bound (all relaxations); incumbents are re-timed and replayed. ``Result.params["phases"]``
    lists per phase the CP-SAT status, bound, best objective and elapsed time.
    """
    from ortools import __version__ as ver

    t0 = time.perf_counter()
    check_offline(inst, "offline_cpsat")
    params = {"time_limit": time_limit, "threads": threads, "seed": seed}

    def left():
        return None if time_limit is None else max(0.0, time_limit - (time.perf_counter() - t0))

    end = None if time_limit is None else t0 + time_limit
    concrete, complete = oc.concrete_options(inst, deadline=oc.setup_deadline(t0, time_limit))
    bad = oc.job_infeasible(inst, concrete, complete)
    if bad is not None:
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, SOLVER, ver,
                      {**params, "reason": f"job {inst.jobs[bad].name} fits no allocation"})
    lb = oc.trivial_bound(inst)
    best = oc.greedy(inst, SOLVER, oc.greedy_deadline(t0, time_limit)) if warm else (None, None)
    if hint is not None:
        r = replay(inst, hint.with_claim(None) if hint.claimed else hint)
        if r.valid:
            best = better(best, (hint, r))
    cap_res = set(oc.capacities(inst))
    if complete:
        res = {r for r in cap_res if r[0] in ("g", "n", "all")} | oc.binding_resources(inst, concrete)
        # a queue: the preemptive LP is above QUEUE × Σ(a_j + p_j); it cannot be when greedy is not (LP ≤ greedy)
        pre = None
        if time_limit is not None and queued(inst, objective_of(best)):
            pre = preemptive_lb(inst, left(), time_limit)
            lb = max(lb, pre)
        queue = pre is not None and queued(inst, pre)
        if queue and ls_share > 0 and oc.search_options(inst, concrete, True) is not None:
            # CP-SAT's first incumbents of a queue are poor; list scheduling finds good ones in milliseconds
            best = better(best, improve(inst, concrete, best, left, ls_share, time_limit, seed))
            _phase(params, "local-search", {"status": "-"}, lb, best, t0)
        t_exact = None if time_limit is None else left() * EXACT_SHARE
        # with 2-3 threads first the core-based and default LP workers (as on the node-exact model) for
        # CORE_SHARE of the exact model's time, then, if unproven, the default ones (better incumbents):
        # 4-GPU instances with PS and CPU/memory levels, 30 s: 3 of 6 proven, 8.4 % mean certified gap (default
        # workers only: 1 of 6, 11.3 %; core workers only: 3 of 6, 9.9 %); docs/oracle-offline.md, follow-up 26
        sp = exact_params(threads)
        rounds = [(sp, t_exact)]
        if sp is not None:
            params["exact_subsolvers"] = list(sp["subsolvers"])
            if t_exact is not None:
                rounds = [(sp, t_exact * CORE_SHARE), (None, t_exact * (1 - CORE_SHARE))]
        for k, (sat, t_round) in enumerate(rounds):
            if k:   # unproven by the core workers: the default ones (their LNS finds better schedules)
                if sol["status"] in ("OPTIMAL", "INFEASIBLE") or not gap_open(objective_of(best), lb):
                    break
                _phase(params, "exact-core", sol, lb, best, t0)
            sol = build_and_solve(inst, concrete, res, time_limit=t_round, threads=threads, seed=seed,
                                  hint=hint_assignment(inst, concrete, best[0]), twins=TWINS, sat_params=sat)
            lb = max(lb, bound_from_units(inst, sol["bound_units"], sol["unit"]))
            if sol["choice"] is not None:
                best = better(best, decode(inst, concrete, sol, SOLVER, end))
        params["model"] = "exact"
        if time_limit is not None and gap_open(objective_of(best), lb):
            if pre is None:
                lb = max(lb, preemptive_lb(inst, left(), time_limit))
            best, lb = after_exact(inst, concrete, res, best, lb, queue, left, threads, seed, params, t0)
        return finish(inst, best, lb, t0, SOLVER, ver, params)

    # large instance: relaxed model for the bound (and a decoded incumbent) ...

    mixed_opts = oc.node_complete_options(inst) if node_complete else None
    res_all = {r for r in cap_res if r[0] in ("g", "n", "all", "set")} | (
        oc.binding_resources(inst, mixed_opts) if mixed_opts is not None else set())
    sgs_opts = oc.search_options(inst, concrete, False, mixed_opts)
    use_ls = ls_share > 0 and sgs_opts is not None
    if use_ls:
        best = better(best, improve(inst, sgs_opts, best, left, ls_share, time_limit, seed))
        _phase(params, "local-search", {"status": "-"}, lb, best, t0)
    if time_limit is not None and left() <= 0:
        # the incumbent and the bounds took the limit (256 GPUs with parameter servers at 1 s): no model
        params["model"] = "none (no time left)"
        return finish(inst, best, lb, t0, SOLVER, ver, params)
    classes = oc.class_options(inst)
    t_rel, t1 = None if time_limit is None else left() * relaxed_share, time.perf_counter()
    res_cls = class_resources(inst)
    core = core_params(threads) if t_rel is not None else None
    t_default = None if t_rel is None else t_rel * (1 - CORE_SHARE if core else 1)
    sol, best, lb = solve_classes(inst, classes, res_cls, best, lb, t_default, threads, seed)
    params["model"] = "relaxed"
    _phase(params, "relaxed", sol, lb, best, t0)
    loaded = None       # the core-based parameters, once they proved the class model (also for the later models)
    # no class solution at all from the default workers (a long loaded queue): the core-based ones do not
    # prove such a model either (PAL's 160-job workloads), so local search takes their time
    skip_core = SKIP_CORE_WITHOUT_SOLUTION and use_ls and sol["choice"] is None
    if sol["status"] != "OPTIMAL":
        # the preemptive LP only where the default workers leave the class model unproven, within the class model's
        # time: below every proven class bound of the 16 benchmark and spread-heavy instances measured, and
        # 0.3-2.1 s of their preamble (follow-up 37)
        lb = max(lb, preemptive_lb(inst, left(), time_limit, threads))
    if core and sol["status"] != "OPTIMAL" and not skip_core:
        # not proven by the default workers: the core-based ones for the rest of the class model's time
        sol2, best, lb = solve_classes(inst, classes, res_cls, best, lb, t_rel - (time.perf_counter() - t1), threads,
                                       seed, core)
        if sol2["choice"] is not None:
            sol = sol2
        loaded = core if sol2["status"] == "OPTIMAL" else None
        _phase(params, "relaxed-core", sol2, lb, best, t0)
    sol, classes, best, lb = refine_levels(inst, sol, classes, best, lb,
                                           None if t_rel is None else t_rel - (time.perf_counter() - t1), threads, seed,
                                           params, t0, loaded)
    res_cls = class_resources(inst, any(o.level is not None for ol in classes for o in ol))
    # no class solution in its time (a long queue: 160 jobs on 32 GPUs): the node-exact model, far larger,
    # finds none either; local search takes the rest of the time
    ls_rest = use_ls and (mixed_opts is None or sol["choice"] is None)
    if sol["status"] != "OPTIMAL" and time_limit is not None and gap_open(objective_of(best), lb):
        lb = max(lb, time_indexed_lb(inst, classes, res_cls, best, left() * LP_SHARE))
        _phase(params, "time-indexed-lp", {"status": "-"}, lb, best, t0)
    u_mix = _unit(inst, mixed_opts) if mixed_opts is not None else None

    def exact_decode(best_, opts_=None, sol_=None):
        # exact decode (every single-node GPU set, per node) of the node assignment of a model
        # solution (opts_, sol_), or without one of the incumbent schedule best_[0]
        if not node_decode_share or u_mix is None or not gap_open(objective_of(best_), lb):
            return best_
        if sol_ is not None:
            a, key = assignment_of(inst, opts_, sol_, u_mix)
        elif best_[0] is not None:
            a, key = assignment_of_schedule(inst, best_[0], u_mix)
        else:
            return best_
        dl = None if time_limit is None else time.perf_counter() + min(left(), node_decode_share * time_limit)
        return better(best_, node_decode(inst, mixed_opts, a, key, u_mix, deadline=dl, threads=threads, seed=seed,
                                         hint=best_[0], per_node=None if time_limit is None else 3.0))

    if sol["choice"] is not None:
        best = exact_decode(best, classes, sol)
        _phase(params, "node-decode", {"status": "-"}, lb, best, t0)
    obj = best[1].objective if best[1] is not None else math.inf
    # objective-driven deadlines: every schedule at least as good as the incumbent completes each job j by
    # a_j + (U − L_j)/w_j; the later models keep only such schedules and their bounds are capped at U
    mixed0, lower = mixed_opts, None
    latest, cap = None, math.inf

    def restrict_to_incumbent(incumbent=None):
        nonlocal latest, cap, mixed_opts
        if lower is None:
            return
        u_obj = objective_of(best if incumbent is None else incumbent)
        dl = offline_deadlines.latest(inst, u_obj * sum(oc.weights(inst)), lower)
        m_r = offline_deadlines.restrict(inst, mixed0, dl)
        if m_r is not None:
            latest, cap, mixed_opts = dl, u_obj, m_r
            params["deadlines"]["options"] = [sum(map(len, mixed0)), sum(map(len, m_r))]

    if (mixed_opts is not None and time_limit is not None and sol["status"] == "OPTIMAL" and gap_open(obj, lb)
            and min(DEADLINE_SHARE * time_limit, 0.5 * left()) >= DEADLINE_S_PER_JOB * len(inst.jobs)):
        lower = rest_bounds(inst, classes, res_cls, best, time_limit, left(), threads, seed, params)
        restrict_to_incumbent()
        _phase(params, "deadlines", {"status": "-"}, lb, best, t0)
    # with deadlines the node-exact model gets the hybrid rounds' time: its bound passed theirs on the benchmark
    if mixed_opts is not None and hybrid_rounds and sol["status"] == "OPTIMAL" and latest is None:
        # lazy variability: jobs whose relaxed class duration the decoded solution does not reach get
        # every single-node GPU set (hybrid model), re-solved while the model is solved to optimality
        cnt = [sum(o.alloc is not None for o in ol) for ol in mixed_opts]
        exact = {j for j in range(len(cnt)) if cnt[j] <= len(inst.cluster.nodes) + 1}
        exact_nodes: set = set()
        cnt_v: dict = {}
        for j, ol in enumerate(mixed_opts):
            for o in ol:
                if o.alloc is not None:
                    cnt_v[(j, oc._single_node(o.alloc))] = cnt_v.get((j, oc._single_node(o.alloc)), 0) + 1
        cur_opts, cur_sol = classes, sol
        for rnd in range(hybrid_rounds):
            if not gap_open(obj, lb) or (left() is not None and left() < 0.5):
                break
            cheat = _cheaters(inst, cur_opts, cur_sol) - exact
            # per node: the cheater becomes exact on the node the model put it on only
            pairs = set()
            for j in cheat:
                o = cur_opts[j][cur_sol["choice"][j]]
                if o.cls is not None and o.cls[0] == "node" and (j, o.cls[1]) not in exact_nodes:
                    pairs.add((j, o.cls[1]))
            if not pairs:
                break
            added = 0
            for j, v in sorted(pairs, key=lambda p: (cnt_v.get(p, 0), p)):
                if added and added + cnt_v.get((j, v), 0) > hybrid_add:
                    break
                exact_nodes.add((j, v))
                added += cnt_v.get((j, v), 0)
            hyb = oc.hybrid_node_options(mixed_opts, classes, exact, exact_nodes)
            n_exact = f"{len(exact)}+{len(exact_nodes)} node"
            t_h = None if time_limit is None else min(left() * hybrid_share,
                                                      hybrid_stop * time_limit - (time.perf_counter() - t0))
            if t_h is not None and t_h < 0.5:
                break
            sol = build_and_solve(inst, hyb, res_all, time_limit=t_h, threads=threads, seed=seed,
                                  hint=hint_assignment(inst, hyb, best[0]), sat_params=loaded, twins=TWINS)
            lb = max(lb, bound_from_units(inst, sol["bound_units"], sol["unit"]))
            if sol["choice"] is not None:
                best = better(best, decode(inst, hyb, sol, SOLVER, end))
                best = exact_decode(best, hyb, sol)
                if use_ls:
                    order = sorted(range(len(cnt)), key=lambda j: (sol["start"][j], j))
                    al = {j: hyb[j][k].alloc for j, k in enumerate(sol["choice"]) if hyb[j][k].alloc is not None}
                    best = better(best, improve(inst, sgs_opts, best, left, ls_share / 2, time_limit, seed + 2,
                                                extra=[(order, al), order]))
            obj = objective_of(best)
            params["model"] = "relaxed+hybrid"
            _phase(params, f"hybrid{rnd}({n_exact} exact)", sol, lb, best, t0)
            if sol["status"] != "OPTIMAL" or sol["choice"] is None:
                break
            cur_opts, cur_sol = hyb, sol
    if use_ls and gap_open(obj, lb) and (ls_rest or latest is None):
        # without the node-exact model (too many options, or no class solution) local search takes the rest of
        # the time, not the restricted exact model: CP-SAT's presolve of that alone takes 2.4 s at 64 GPUs / 50 jobs
        # with PS, and it did not improve an incumbent in our runs (docs/oracle-offline.md, follow-up 18)
        share = (ls_share if not ls_rest or time_limit is None
                 else last_model_time(time_limit, left()) / time_limit)
        # the last model solution's start order is one more seed (the class model's, without hybrid rounds)
        extra = [sorted(range(len(inst.jobs)), key=lambda j: (sol["start"][j], j))] if sol.get("start") else None
        best = better(best, improve(inst, sgs_opts, best, left, share, time_limit, seed + 1, extra=extra))
        _phase(params, "local-search", {"status": "-"}, lb, best, t0)
        obj = objective_of(best)
    # with deadlines the node-exact model's decode and the rate rounds find the better schedules: no LNS (its time
    # goes to them; 30 / 32 seed 1, 60 s: docs/oracle-offline.md, follow-up 35)
    if (use_ls and mixed_opts is not None and lns_share > 0 and gap_open(obj, lb) and (left() is None or left() > 1)
            and latest is None):
        best = lns(inst, mixed_opts, best, res_all, None if time_limit is None else time.perf_counter() + left() * lns_share,
                   threads, seed)
        obj = objective_of(best)
        _phase(params, "lns", {"status": "-"}, lb, best, t0)
    if mixed_opts is not None and best[0] is not None and gap_open(obj, lb):
        best = exact_decode(best)
        obj = objective_of(best)
        _phase(params, "node-decode", {"status": "-"}, lb, best, t0)
    restrict_to_incumbent()    # the incumbent may have improved since: tighter deadlines
    mixed = mixed_opts if node_complete and gap_open(obj, lb) and not ls_rest else None
    if mixed is not None and (left() is None or left() > 0.05):
        # ... then every single-node allocation exactly, spread ones relaxed: still a valid bound,
        # and exact (variability included) for schedules without spread jobs
        sol = build_and_solve(inst, mixed, res_all, time_limit=last_model_time(time_limit, left()), threads=threads,
                              seed=seed,
                              hint=hint_assignment(inst, mixed, best[0]),
                              sat_params=exact_params(threads, True, latest is not None), twins=TWINS, latest_end=latest)
        lb = max(lb, min(cap, bound_from_units(inst, sol["bound_units"], sol["unit"])))
        if sol["choice"] is not None:
            best = better(best, decode(inst, mixed, sol, SOLVER, end))
        params["model"] = "relaxed+node-exact"
        _phase(params, "node-exact", sol, lb, best, t0)
        if RATE_ROUNDS:
            def deadlines(incumbent):
                restrict_to_incumbent(incumbent)     # the last model's decode may have found a better incumbent
                return mixed_opts, latest, cap

            best, lb = rate_rounds(inst, mixed, res_all, sol, best, lb, deadlines, time_limit, left, end, threads,
                                   seed, params, t0)
        return finish(inst, best, lb, t0, SOLVER, ver, params)
    # ... otherwise, where local search does not apply (interference), the exact model over a restricted
    # concrete space for a better incumbent
    if gap_open(obj, lb) and all(concrete) and (left() is None or left() > 0.05 and not use_ls):
        res = {r for r in cap_res if r[0] in ("g", "n", "all")} | oc.binding_resources(inst, concrete)
        sol2 = build_and_solve(inst, concrete, res, time_limit=last_model_time(time_limit, left()), threads=threads,
                               seed=seed,
                               hint=hint_assignment(inst, concrete, best[0]))
        if sol2["choice"] is not None:
            best = better(best, decode(inst, concrete, sol2, SOLVER, end))
        _phase(params, "restricted-exact", sol2, lb, best, t0)
    return finish(inst, best, lb, t0, SOLVER, ver, params)
