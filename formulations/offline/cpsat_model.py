"""The CP-SAT model of the offline oracle over any option set (exact, class, hybrid, node-exact, banded).

:func:`solve_option_model` builds the model of a list of options per job (:mod:`formulations.offline.options`)
and the resources that can bind, solves it and returns a :class:`ModelSolution`. What the model means
depends on its options: over every allocation it is exact; over relaxed classes (and mixes with exact
options) it is a relaxation whose proven bound bounds the offline optimum.

Times are integers in units ``u`` (:func:`time_unit`). Bound side: durations and release dates are rounded
DOWN, which keeps every offline schedule feasible (floor(s)+floor(p) ≤ floor(s+p); a set of jobs active at
an integer instant of the rounded schedule is active together just before the next one in the real
schedule), so the rounded optimum is a lower bound (:func:`bound_from_units`). Incumbents never use model
times: the ORDER and allocations are decoded and re-timed exactly (:mod:`formulations.offline.decode`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from ortools.sat.python import cp_model

from jctlab.model import Instance

from ..schedules import job_weights
from . import rates, symmetry
from .options import Option, capacities, single_node

#: for every model: probing costs seconds of presolve; presolve's symmetry fixing is not interruptible and
#: took 10-14 s on node-exact models of identical GPUs with PS options (within 4-s limits)
SAT_PARAMS: dict = {"cp_model_probing_level": 0, "symmetry_level": 0}


@dataclass(frozen=True)
class CpsatRun:
    """How to run CP-SAT on one model: wall-clock limit (None: none), workers, seed, SAT parameters (None:
    :data:`SAT_PARAMS`)."""

    time_limit: float | None
    threads: int
    seed: int
    sat_params: dict | None = None


@dataclass(frozen=True)
class ModelHint:
    """An incumbent mapped onto a model: {job: (option index or None, start in seconds)}, and the GPUs of its
    spread jobs where the model has GPU literals (rate bands)."""

    starts: dict[int, tuple[int | None, float]]
    gpus: dict[int, set[str]] | None = None


@dataclass(frozen=True)
class ModelSolution:
    """What CP-SAT returned: its status name, the time unit, the proven bound in units (``math.inf`` when the
    model is infeasible), and when it found a solution the option and start (units) of each job and the GPUs
    of its banded jobs. Other solvers' solutions (the MILP's, per-node decodes) take the same form."""

    status: str
    unit: float | None           # None: times are not in model units (a decode without GPU pinning)
    bound_units: float
    choice: list[int] | None = None
    start: list[Any] | None = None
    gpus: dict[int, tuple[str, ...]] = field(default_factory=dict)
    twins: list[list[str]] = field(default_factory=list)     # the groups of identical nodes the model ordered

    @property
    def proven(self) -> bool:
        return self.status == "OPTIMAL"

    @property
    def found(self) -> bool:
        return self.choice is not None

    def bound(self, inst: Instance) -> float:
        """The proven bound in objective units (:func:`bound_from_units`)."""
        return bound_from_units(inst, self.bound_units, self.unit)


NO_MODEL = ModelSolution("-", 1.0, -math.inf)    # a phase that solved no model (its record's status)


def solve_option_model(inst: Instance, opts: list[list[Option]], resources: set, run: CpsatRun,
                       hint: ModelHint | None = None, *, unit: float | None = None, twins: bool = False,
                       latest_end: dict | None = None, aggregate: bool = True,
                       semi_active: bool = True) -> ModelSolution:
    """Build the option model of ``opts`` over ``resources`` and solve it with CP-SAT as ``run`` says.

    One optional fixed-size interval per option sharing the job's start (or, aggregated, per GPU and per
    (node, size)); a no-overlap per GPU, a cumulative per node, node group, cluster, node CPUs and memory
    wherever the options can overload it; minimise Σ w_j e_j (or the makespan). ``hint``: the incumbent's
    options and starts (every variable is hinted when it covers every job, :func:`complete_hint`).

    ``twins``: identical nodes are ordered by their first job and the hint is mirrored to match
    (:mod:`formulations.offline.symmetry`). Only for models that relax the whole instance (class, hybrid,
    node-exact, complete exact): their bound is unchanged.

    ``aggregate``: the single-node GPU sets of a job (without binding CPU/memory) share one optional
    interval per GPU (present iff the chosen set holds that GPU) and one per (node, size) for the
    GPU-count cumulatives, all with the job's start and its duration variable (the chosen set's). The
    same constraints as one interval per set (``aggregate=False``), but no-overlaps over jobs instead of
    over sets (the node-exact model of the 30-job benchmark, seed 2, is proven in 11 s aggregated and not in
    60 s per set).

    ``semi_active``: every start equals the job's release or another job's end. Left-shifting a job
    never breaks a release, a no-overlap or a cumulative and never delays a completion, so some optimum
    of every model is semi-active (a start s > release with no job ending at s can move to s − 1: the
    jobs running just before s are running at s too) and the optimum and the bound are unchanged. It
    helps CP-SAT prove small cumulative models (a class model of 10 jobs on 16 GPUs is proven with it, and
    its bound stays 22 % lower after 60 s without).

    GPU-count cumulatives over the nodes of a node group T (``("set", T)`` in ``resources``,
    :func:`formulations.offline.options.node_groups`): spread options carry their own proven lower-bound demand on T,
    others their GPU count on T.

    ``latest_end``: {job: latest completion (s)} from :mod:`formulations.offline.latest_completions` (e_j ≤ it, rounded
    up: model times are rounded down); the model then holds only the schedules at least as good as the
    incumbent the deadlines came from, and its bound must be capped at that incumbent's objective.

    Jobs with rate bands (:func:`formulations.offline.rates.banded`) get GPU literals (a relaxation still;
    ``ModelSolution.gpus``: the GPUs they hold in the solution); ``hint.gpus``: their hinted GPUs
    (:func:`formulations.offline.rates.spread_gpus`).

    ``run.time_limit`` covers building the model too (CP-SAT gets what is left of it).
    """
    t_build = time.perf_counter()
    hint_gpus = None if hint is None else hint.gpus
    hint = None if hint is None else hint.starts
    u = unit or time_unit(inst, opts)
    cap = capacities(inst)
    m = cp_model.CpModel()
    sets = [r[1] for r in resources if r[0] == "set"]
    H = math.floor(max(j.arrival for j in inst.jobs) / u) + sum(
        max(math.floor(o.dur / u) for o in ol) for ol in opts) + 1
    starts, ends, xs = [], [], []
    durs: list = []            # j → (duration variable, option durations in units)
    aggregated: list = []      # (y or z literal, j, options that set it) of the aggregated sets
    per_res: dict = {}
    banded = {j for j, ol in enumerate(opts) if any(rates.need(o) is not None for o in ol)}
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
            v1 = single_node(o.alloc) if o.alloc is not None else None
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
    qs = {j: rates.add_spread_gpus(m, inst, opts, j, starts[j], durs[j][0], ends[j], xs[j], per_res, resources)
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
    groups = symmetry.twin_groups(inst) if twins else []
    if groups:
        symmetry.add_twin_breaking(m, opts, xs, groups)
        renamed = symmetry.canonical_hint(opts, hint, groups)
        if renamed != hint:        # twins renamed: the hinted GPUs are not the renamed schedule's
            hint, hint_gpus = renamed, None
    wi, _ = int_weights(inst)
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
    p.num_workers = max(1, int(run.threads))
    p.random_seed = int(run.seed)
    if run.time_limit is not None:
        p.max_time_in_seconds = max(0.01, float(run.time_limit) - (time.perf_counter() - t_build))
    for k, v in (SAT_PARAMS if run.sat_params is None else run.sat_params).items():
        if isinstance(v, (list, tuple)):
            getattr(p, k).extend(v)
        else:
            setattr(p, k, v)
    st = solver.Solve(m)
    if st == cp_model.MODEL_INVALID:   # never take a bound from an invalid model
        raise RuntimeError(f"offline CP-SAT model invalid: {m.Validate()[:300]}")
    status = solver.StatusName(st)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return ModelSolution(
            status, u, solver.BestObjectiveBound(),
            [next(k for k, xk in enumerate(x) if solver.Value(xk)) for x in xs], [solver.Value(s) for s in starts],
            {j: held for j, q in qs.items() if (held := tuple(sorted(g for g, lit in q.items() if solver.Value(lit))))},
            groups)
    return ModelSolution(status, u, math.inf if st == cp_model.INFEASIBLE else solver.BestObjectiveBound(),
                         twins=groups)


def complete_hint(inst: Instance, hint: dict | None, u: float, H: int, dds: list) -> dict | None:
    """Start units of a hint that covers every job ({j: (option, start seconds)}), left-shifted so that
    each start is the job's release or another job's end (:func:`solve_option_model`'s semi-active rule), or
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


def time_unit(inst: Instance, opts) -> float:
    h = max(j.arrival for j in inst.jobs) + sum(max((o.dur for o in ol), default=0.0) for ol in opts)
    return max(h, 1.0) / 1e9


def int_weights(inst: Instance) -> tuple[list[int], int]:
    w = job_weights(inst)
    if all(x == w[0] for x in w):
        return [1] * len(w), 1
    k = 1000
    return [max(1, math.floor(x * k)) for x in w], k


def bound_from_units(inst: Instance, b: float, u: float) -> float:
    """Objective lower bound from the rounded model's bound (see the module docstring)."""
    jobs = inst.jobs
    if not math.isfinite(b):
        return b
    if inst.objective == "makespan":
        lb = b * u - min(j.arrival for j in jobs)
    else:
        wi, k = int_weights(inst)
        w = job_weights(inst)
        lb = (b * u / k - sum(x * j.arrival for x, j in zip(w, jobs))) / sum(w)
    return lb - 1e-9 * abs(lb)
