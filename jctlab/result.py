"""What every offline method returns, and the Protocol a solver implements (PyJobShop-style)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Mapping, Protocol

from .model import Claimed, Instance, Schedule


class SolveStatus(StrEnum):
    """A method's status (SPEC §4 ``claimed.status``). A ``str``: it equals, prints and serialises as its
    value (``SolveStatus.OPTIMAL == "optimal"``), so the JSON contract is the plain string."""

    OPTIMAL = "optimal"                          # objective − lower bound within the replay tolerance
    FEASIBLE = "feasible"                        # a valid schedule; the bound (if any) leaves a gap
    BOUND_ONLY = "bound_only"                    # a lower bound and no schedule of the instance's class
    INFEASIBLE = "infeasible"                    # proven: no schedule exists
    TIMEOUT_NO_SOLUTION = "timeout_no_solution"  # no schedule within the limit (maybe a bound)
    ERROR = "error"                              # the method did not run (``params["error"]`` says why)

    @property
    def proven(self) -> bool:
        """Nothing better exists: optimal, or infeasible."""
        return self in (SolveStatus.OPTIMAL, SolveStatus.INFEASIBLE)


@dataclass(frozen=True)
class Result:
    """A method's answer: its schedule (None when it has none), objective, proven bound and status.

    ``objective`` is always the replayed objective of ``schedule``; ``lower_bound`` bounds the
    optimum of the instance's problem class (or of the class named in ``bound_class``).
    """

    schedule: Schedule | None
    objective: float | None
    lower_bound: float | None
    status: SolveStatus
    runtime_s: float
    solver: str
    version: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a plain string is accepted (plug-ins, cached results) and must be one of SPEC's statuses
        object.__setattr__(self, "status", SolveStatus(self.status))

    def claimed_schedule(self) -> Schedule | None:
        if self.schedule is None:
            return None
        return self.schedule.with_claim(Claimed(self.objective, self.lower_bound, self.status.value, self.runtime_s))

    def with_(self, **changes: Any) -> "Result":
        return replace(self, **changes)


class Solver(Protocol):
    """An offline method: ``jctlab solve --method NAME`` calls it through the registry.

    Method-specific options arrive as keyword arguments (``--samples 64`` → ``samples=64``).
    """

    def __call__(self, inst: Instance, *, time_limit: float | None = None, threads: int = 1,
                 seed: int = 0, hint: Schedule | None = None, **options: Any) -> Result: ...
