"""What every oracle back end hands back: incumbents, the zero-gap rule and the :class:`jctlab.result.Result`.

* :class:`Incumbent` — a schedule with its replay (the replayed objective is the only objective a method
  ever reports), or none.
* :data:`GAP_TOL` and :func:`checked_bound` — the one "zero gap" rule (SPEC §4) and the guard against a
  solver's wrong proof.
* :func:`result_of_schedule` (replays the schedule first) and :func:`result_of_incumbent` — the Result with
  its status: ``optimal`` iff replayed objective − bound ≤ GAP_TOL·|objective|, ``feasible`` otherwise; with
  no schedule ``infeasible`` (when proven), ``timeout_no_solution`` or ``error``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping

from jctlab.model import Instance, Schedule
from jctlab.replay import Replay, replay
from jctlab.result import Result, SolveStatus

#: relative gap under which a replayed objective and a proven bound count as equal ("zero gap" at the
#: precision of the replay check, SPEC §4).
GAP_TOL = 1e-6


@dataclass(frozen=True)
class Incumbent:
    """A schedule and its (valid) replay, or none (both None)."""

    schedule: Schedule | None = None
    replay: Replay | None = None

    @property
    def found(self) -> bool:
        return self.schedule is not None

    @property
    def objective(self) -> float:
        """The replayed objective; ``math.inf`` without a schedule."""
        return self.replay.objective if self.replay is not None else math.inf

    def better(self, other: "Incumbent") -> "Incumbent":
        """``other`` when it is a valid schedule with a lower objective (by more than 1e-12), else ``self``."""
        if other.schedule is None or (other.replay is not None and not other.replay.valid):
            return self
        if self.schedule is None or other.replay.objective < self.replay.objective - 1e-12:  # type: ignore[union-attr]
            return other
        return self

    @staticmethod
    def of(inst: Instance, schedule: Schedule) -> "Incumbent":
        """``schedule`` replayed on ``inst`` (claims dropped); none when it is invalid."""
        rep = replay(inst, schedule.with_claim(None) if schedule.claimed else schedule)
        return Incumbent(schedule, rep) if rep.valid else Incumbent()


NO_INCUMBENT = Incumbent()


def gap_open(objective: float, bound: float) -> bool:
    """The gap between an objective and a bound is not closed (no incumbent, ``inf``, counts as open)."""
    return not math.isfinite(objective) or objective - bound > GAP_TOL * abs(objective)


def checked_bound(bound: float | None, obj: float, params: dict) -> float | None:
    """A proven ``bound`` against the replayed objective ``obj`` of a valid schedule: at most ``obj``
    (above it by floating noise: clamped to it). A bound above ``obj`` by more than GAP_TOL·|obj| is a wrong
    proof (a solver bug: CP-SAT 9.15 certified optima above a known schedule with
    ``core_minimization_level`` 0): it is dropped (None, so the status cannot be ``optimal``) and recorded in
    ``params["bound_conflict"]``."""
    if bound is None or bound <= obj:
        return bound
    if bound - obj <= GAP_TOL * abs(obj):
        return obj
    params["bound_conflict"] = {"bound": bound, "objective": obj}
    return None


def result_of_schedule(inst: Instance, method: str, schedule: Schedule | None, bound: float | None, t0: float,
                       solver: str, version: str = "", params: Mapping[str, Any] | None = None,
                       infeasible: bool = False, error: str | None = None) -> Result:
    """Build a Result: replay the schedule (objective = replayed objective), clamp the bound, set the
    status (see the module docstring)."""
    params = dict(params or {})
    if error is not None:
        params["error"] = error
    runtime = time.perf_counter() - t0
    if bound is not None and not math.isfinite(bound):
        bound = None
    if schedule is None:
        status = SolveStatus.ERROR if error is not None else (
            SolveStatus.INFEASIBLE if infeasible else SolveStatus.TIMEOUT_NO_SOLUTION)
        return Result(None, None, bound if status != SolveStatus.INFEASIBLE else None, status, runtime, solver,
                      version, params)
    sched = Schedule(inst.name, method, schedule.segments)
    rep = replay(inst, sched)
    if not rep.valid:
        params["error"] = f"internal: decoded schedule is invalid: {rep.error}"
        return Result(None, None, bound, SolveStatus.ERROR, runtime, solver, version, params)
    obj = float(rep.objective)  # type: ignore[arg-type]
    bound = checked_bound(bound, obj, params)
    status = SolveStatus.OPTIMAL if bound is not None and obj - bound <= GAP_TOL * abs(obj) else SolveStatus.FEASIBLE
    return Result(sched, obj, bound, status, runtime, solver, version, params)


def result_of_incumbent(best: Incumbent, lb: float | None, t0: float, solver: str, version: str, params: dict) -> Result:
    """Result from the best incumbent (already replayed) and the proven bound ``lb``."""
    runtime = time.perf_counter() - t0
    if best.schedule is None:
        return Result(None, None, lb, SolveStatus.TIMEOUT_NO_SOLUTION, runtime, solver, version, params)
    obj = best.objective
    bound = checked_bound(lb, obj, params)
    status = (SolveStatus.OPTIMAL if bound is not None and obj - bound <= GAP_TOL * max(abs(obj), 1e-12)
              else SolveStatus.FEASIBLE)
    sched = Schedule(best.schedule.instance, solver, best.schedule.segments, None, best.schedule.extra)
    return Result(sched, obj, bound, status, runtime, solver, version, params)


def better_result(a: Result | None, b: Result | None) -> Result | None:
    """The result with the better (lower) replayed objective; ties keep ``a``."""
    if a is None or a.objective is None:
        return b if (b is not None and b.objective is not None) else a
    if b is None or b.objective is None:
        return a
    return b if b.objective < a.objective * (1 - 1e-12) else a


def solver_versions() -> dict[str, str]:
    """The versions of the solver libraries (for ``Result.params``). Imported here, each optional: a process
    that solves with one back end need not load the others."""
    out = {}
    try:
        import ortools

        out["ortools"] = ortools.__version__
    except Exception:  # pragma: no cover
        pass
    try:
        import highspy

        out["highspy"] = highspy.Highs().version()
    except Exception:  # pragma: no cover
        pass
    try:
        import pulp

        out["pulp"] = pulp.__version__
    except Exception:  # pragma: no cover
        pass
    return out
