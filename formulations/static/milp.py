"""MILP model of the static class: the same set-packing model as :mod:`formulations.static.cpsat`,
with exact (unscaled) costs, solved by HiGHS (through ``highspy`` directly: bulk column/row loading
and a warm start that PuLP's HiGHS wrapper lacks) or by CBC (through PuLP).

Gaps are set to zero (``mip_rel_gap = mip_abs_gap = 0`` / ``gapRel = 0``) so a solver's optimum is
proven; the bound is HiGHS' ``mip_dual_bound`` or the bound CBC prints in its log. The bound is
relaxed by 1e-9 relative for floating-point safety. ``makespan`` adds a continuous T ≥ each job's
duration.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from typing import Sequence

import highspy
import numpy as np

from jctlab.errors import InputError
from jctlab.lp import pulp
from jctlab.model import Instance, Schedule
from jctlab.result import Result

from ..budget import Budget
from ..cbc_log import cbc_log_bound, cbc_threads
from .packing import BackendAnswer, PackingModel
from .pipeline import StaticParams, solve_static

BOUND_SAFETY = 1e-9

#: seconds of time-limit margin per model column for HiGHS (see highs_backend)
HIGHS_MARGIN_PER_COL = 1e-4


def _highs_version() -> str:
    return f"highspy {highspy.Highs().version()}"


def _cbc_version() -> str:
    return f"pulp {pulp.__version__} cbc"


def _interrupt_at(h, wall_deadline: float) -> None:
    """Stop HiGHS at a wall-clock deadline: its own ``time_limit`` is only checked between phases,
    so on large models it can overrun by tens of seconds; the interrupt callbacks are checked
    inside simplex, IPM and branch-and-bound."""
    def stop(_type, _message, _out, data_in, _user) -> None:
        if time.monotonic() > wall_deadline:
            data_in.user_interrupt = True

    h.setCallback(stop, None)
    kinds = highspy.cb.HighsCallbackType
    for k in (kinds.kCallbackMipInterrupt, kinds.kCallbackSimplexInterrupt, kinds.kCallbackIpmInterrupt):
        h.startCallback(k)


def highs_backend(threads: int, seed: int):
    def run(model: PackingModel, hint_cols: Sequence[int | None] | None, dl: Budget) -> BackendAnswer:
        if hasattr(highspy.Highs, "resetGlobalScheduler"):
            highspy.Highs.resetGlobalScheduler(True)  # HiGHS keeps one scheduler per process: allow a new thread count
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("mip_rel_gap", 0.0)
        h.setOptionValue("mip_abs_gap", 0.0)
        h.setOptionValue("threads", max(1, threads))
        h.setOptionValue("random_seed", int(seed))
        left = dl.left()
        n = len(model.cols)
        if math.isfinite(left):
            # HiGHS checks its limit only between phases: on large models its root overruns by a few
            # seconds (34k columns: ≈ 3–4 s), so keep a margin that grows with the model
            margin = 0.05 + min(0.1 * left, HIGHS_MARGIN_PER_COL * n)
            h.setOptionValue("time_limit", max(0.01, left - margin))
        extra = 1 if model.makespan else 0
        cost = np.zeros(n + extra)
        if model.makespan:
            cost[n] = 1.0
        else:
            cost[:n] = model.cost
        lo = np.zeros(n + extra)
        hi = np.ones(n + extra)
        if model.makespan:
            hi[n] = highspy.kHighsInf
        h.addCols(n + extra, cost, lo, hi, 0, np.array([], dtype=np.int32), np.array([], dtype=np.int32),
                  np.array([], dtype=float))
        h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n))
        starts, idx, val, rlo, rhi = [], [], [], [], []

        def add(cols: Sequence[int], coefs: Sequence[float], a: float, b: float) -> None:
            starts.append(len(idx))
            idx.extend(cols)
            val.extend(coefs)
            rlo.append(a)
            rhi.append(b)

        for g in model.groups:
            add(g, [1.0] * len(g), 1.0, 1.0)
        for row in model.rows:
            add(row.cols, row.coefs, -highspy.kHighsInf, row.ub)
        if model.makespan:
            for g in model.groups:  # T - sum d z >= 0
                add(list(g) + [n], [-model.cost[i] for i in g] + [1.0], 0.0, highspy.kHighsInf)
        h.addRows(len(rlo), np.array(rlo), np.array(rhi), len(idx), np.array(starts, dtype=np.int32),
                  np.array(idx, dtype=np.int32), np.array(val, dtype=float))
        if hint_cols is not None and all(x is not None for x in hint_cols):
            sol = highspy.HighsSolution()
            x = [0.0] * (n + extra)
            for i in hint_cols:
                x[i] = 1.0  # type: ignore[index]
            if model.makespan:
                x[n] = max(model.cost[i] for i in hint_cols)  # type: ignore[index]
            sol.col_value = x
            sol.value_valid = True
            h.setSolution(sol)
        if math.isfinite(left):
            _interrupt_at(h, time.monotonic() + max(0.01, left - 0.05))
        h.run()
        st = h.getModelStatus()
        info_h = h.getInfo()
        info = {"highs_status": h.modelStatusToString(st), "mip_gap": float(info_h.mip_gap),
                "mip_nodes": int(info_h.mip_node_count)}
        if st == highspy.HighsModelStatus.kInfeasible:
            return BackendAnswer(None, None, infeasible=True, info=info)
        db = float(info_h.mip_dual_bound)
        bound = db - BOUND_SAFETY * abs(db) if math.isfinite(db) else None
        if info_h.primal_solution_status != 2:
            return BackendAnswer(None, bound, info=info)
        xs = h.getSolution().col_value
        chosen = tuple(max(g, key=lambda i: xs[i]) for g in model.groups)
        return BackendAnswer(chosen, bound, proven=st == highspy.HighsModelStatus.kOptimal, info=info)

    return run


def cbc_backend(threads: int, seed: int):
    def run(model: PackingModel, hint_cols: Sequence[int | None] | None, dl: Budget) -> BackendAnswer:
        prob = pulp.LpProblem("static", pulp.LpMinimize)
        z = [pulp.LpVariable(f"z{i}", cat="Binary") for i in range(len(model.cols))]
        if model.makespan:
            T = pulp.LpVariable("T", lowBound=0)
            prob += T
            for g in model.groups:
                prob += T - pulp.lpSum(model.cost[i] * z[i] for i in g) >= 0
        else:
            prob += pulp.lpSum(c * v for c, v in zip(model.cost, z))
        for k, g in enumerate(model.groups):
            prob += pulp.lpSum(z[i] for i in g) == 1, f"job{k}"
        for k, row in enumerate(model.rows):
            prob += pulp.lpSum(c * z[i] for c, i in zip(row.coefs, row.cols)) <= row.ub, f"r{k}"
        warm = hint_cols is not None and all(x is not None for x in hint_cols)
        if warm:
            on = set(hint_cols)  # type: ignore[arg-type]
            for i, v in enumerate(z):
                v.setInitialValue(1 if i in on else 0)
            if model.makespan:
                T.setInitialValue(max(model.cost[i] for i in on))
        left = dl.left()
        fd, log = tempfile.mkstemp(prefix="jctlab-cbc-", suffix=".log")
        os.close(fd)
        try:
            solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=None if not math.isfinite(left) else max(1, int(left)),
                                       threads=cbc_threads(threads), gapRel=0.0, gapAbs=0.0, warmStart=warm, logPath=log,
                                       options=[f"randomSeed {seed % 2**31 or 1}", f"randomCbcSeed {seed % 2**31 or 1}"])
            prob.solve(solver)
            with open(log) as f:
                text = f.read()
        finally:
            try:
                os.unlink(log)
            except OSError:
                pass
        info = {"cbc_status": pulp.LpStatus[prob.status], "cbc_sol_status": int(prob.sol_status)}
        if prob.status == pulp.LpStatusInfeasible:
            return BackendAnswer(None, None, infeasible=True, info=info)
        bound = _cbc_bound(text)
        optimal = prob.sol_status == pulp.LpSolutionOptimal
        has_sol = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
        if not has_sol:
            return BackendAnswer(None, bound, info=info)
        chosen = tuple(max(g, key=lambda i: z[i].value() or 0.0) for g in model.groups)
        if optimal:
            v = pulp.value(prob.objective)
            bound = max(bound or -math.inf, v - BOUND_SAFETY * abs(v) - 1e-9)
        return BackendAnswer(chosen, bound, proven=optimal, info=info)

    return run


def _cbc_bound(log: str) -> float | None:
    """CBC's bound from its log, less the safety margin of the packing model."""
    b = cbc_log_bound(log)
    return None if b is None else b - BOUND_SAFETY * abs(b) - 1e-9


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, backend: str = "highs", warm: bool = True, reduce: bool = True,
          params: StaticParams = StaticParams()) -> Result:
    """Solve a static instance with HiGHS (``backend="highs"``) or CBC (``"cbc"``); ``params``: the pipeline's
    knobs."""
    if backend == "highs":
        be, solver, version = highs_backend(threads, seed), "milp-highs", _highs_version()
    elif backend == "cbc":
        be, solver, version = cbc_backend(threads, seed), "milp-cbc", _cbc_version()
    else:
        raise InputError("command line", "--backend", f"unknown MILP backend {backend!r} (highs|cbc)")
    method = "milp" if backend == "highs" else "milp-cbc"
    return solve_static(inst, method, be, time_limit=time_limit, threads=threads, seed=seed, hint=hint, warm=warm,
                        solver=solver, version=version, params={"backend": backend}, reduce=reduce, settings=params)
