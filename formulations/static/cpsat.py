"""CP-SAT model of the static class: set packing over candidate allocations.

One Boolean per candidate (:mod:`formulations.static.candidates`: count vectors over classes of identical GPUs,
so identical GPUs are never distinguished), ``ExactlyOne`` per job, a capacity row per GPU class
(and per node / GPU type when relaxed candidates exist), node CPU and memory rows where they can
bind. Costs are ``weight × duration`` scaled to integers by rounding down (bound stays valid);
``makespan`` uses an integer T ≥ each job's scaled duration. Every variable is hinted from the hint
schedule or the heuristic incumbent. CPU/memory rows are scaled exactly to integers when the
numbers allow (×1, ×2, ..., ×10^6); otherwise usage is rounded down and capacity up (a relaxation:
the bound stays valid, and a decoded schedule is still checked by replay).

Workers: one thread runs one worker with ``linearization_level = 2``; 2–7 threads name the
full-problem workers explicitly, ``max_lp`` first (:data:`SMALL_PORTFOLIO`) — the default portfolio
of so few workers has no full-LP worker and cannot close the set-packing gap.

Deterministic preset: ``threads=1`` runs one CP-SAT worker with a fixed seed; the time limit is
wall-clock, so a run that stops on the limit may differ between machines, but a run that finishes
(proves optimality) returns the same schedule every time.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import ortools
from ortools.sat.python import cp_model

from jctlab.model import Instance, Schedule
from jctlab.result import Result

from ..budget import Budget
from .milp import highs_backend
from .packing import BackendAnswer, PackingModel, Row, integer_costs
from .pipeline import StaticParams, solve_static

SOLVER = "cpsat"

#: full-problem CP-SAT workers used with 2–7 threads (first ``threads`` of them)
SMALL_PORTFOLIO = ("max_lp", "default_lp", "core", "quick_restart", "no_lp", "reduced_costs", "pseudo_costs")


def _version() -> str:
    return f"ortools {ortools.__version__}"


def integer_row(row: Row) -> tuple[list[int], int, bool]:
    """Scale a row to integers; the flag says whether the scaling is exact (else a relaxation)."""
    vals = list(row.coefs) + [row.ub]
    for m in (1, 2, 4, 5, 8, 10, 100, 1000, 10_000, 1_000_000):
        if all(abs(x * m - round(x * m)) <= 1e-9 * max(1.0, abs(x * m)) for x in vals):
            return [int(round(c * m)) for c in row.coefs], int(round(row.ub * m)), True
    m = 1_000_000
    return [int(math.floor(c * m)) for c in row.coefs], int(math.ceil(row.ub * m)), False


def backend(threads: int, seed: int, params: dict[str, Any]):
    """A back end for :func:`formulations.static.pipeline.solve_static`."""

    def run(model: PackingModel, hint_cols: Sequence[int | None] | None, dl: Budget) -> BackendAnswer:
        m = cp_model.CpModel()
        z = [m.NewBoolVar(f"z{i}") for i in range(len(model.cols))]
        for g in model.groups:
            m.AddExactlyOne([z[i] for i in g])
        exact_rows = True
        for row in model.rows:
            coefs, ub, exact = integer_row(row)
            exact_rows &= exact
            m.Add(sum(c * z[i] for c, i in zip(coefs, row.cols)) <= ub)
        ints, scale = integer_costs(model.cost, len(model.groups), rel=1e-7)
        if model.makespan:
            T = m.NewIntVar(0, max(ints), "T")
            for g in model.groups:
                m.Add(T >= sum(ints[i] * z[i] for i in g))
            m.Minimize(T)
        else:
            m.Minimize(sum(ints[i] * z[i] for i in range(len(z)) if ints[i]))
        if hint_cols is not None and all(h is not None for h in hint_cols):
            on = set(hint_cols)  # type: ignore[arg-type]
            for i, v in enumerate(z):
                m.AddHint(v, i in on)
        s = cp_model.CpSolver()
        p = s.parameters
        p.num_workers = max(1, threads)
        p.random_seed = seed
        # the set-packing proof lives in the LP: with few workers CP-SAT's default portfolio has no
        # full-linearization worker (2 workers: default_lp only, whose root bound stalls ~0.4 % below
        # the LP on 64/8/32), so ask for one (max_lp) first; from 8 workers the default has it
        if threads <= 1:
            p.linearization_level = 2
        elif threads < 8:
            p.subsolvers.extend(list(SMALL_PORTFOLIO[:threads]))
        p.log_search_progress = False
        left = dl.left()
        if math.isfinite(left):
            p.max_time_in_seconds = max(0.01, left - 0.05)
        for k, v in params.items():
            setattr(p, k, v)
        st = s.Solve(m)
        info = {"cpsat_status": s.StatusName(st), "cpsat_wall_s": round(s.WallTime(), 3), "int_scale": scale,
                "exact_rows": exact_rows}
        if st == cp_model.INFEASIBLE:
            return BackendAnswer(None, None, infeasible=exact_rows, info=info)
        bound = s.BestObjectiveBound() / scale * (1 - 1e-12) if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) \
            or math.isfinite(s.BestObjectiveBound()) else None
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return BackendAnswer(None, bound if (bound is not None and bound > 0) else None, info=info)
        chosen = []
        for g in model.groups:
            chosen.append(next(i for i in g if s.BooleanValue(z[i])))
        return BackendAnswer(tuple(chosen), bound, proven=st == cp_model.OPTIMAL, info=info)

    return run


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, warm: bool = True, reduce: bool = True, primal: bool = True,
          sat_params: dict[str, Any] | None = None, params: StaticParams = StaticParams()) -> Result:
    """Solve a static instance with CP-SAT (``sat_params``: raw CP-SAT parameters; ``reduce``: LP
    reduced-cost filtering of large models first, see :func:`formulations.static.pipeline.solve_static`;
    ``primal``: in that filtering, HiGHS first finds an upper bound on the smallest column set — only
    its solution is used (as UB and hint), the optimality proof and every bound come from CP-SAT;
    ``params``: the pipeline's knobs)."""
    sat_params = dict(sat_params or {})
    info = {"backend": "cpsat", **sat_params}
    prim = None
    if primal:
        prim = highs_backend(threads, seed)
        info["primal"] = "highs"
    return solve_static(inst, SOLVER, backend(threads, seed, sat_params), time_limit=time_limit, threads=threads,
                        seed=seed, hint=hint, warm=warm, solver=SOLVER, version=_version(), params=info,
                        reduce=reduce, primal=prim, settings=params)
