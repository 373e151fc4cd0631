"""What every offline method returns, and the Protocol a solver implements (PyJobShop-style)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Protocol

from .model import Claimed, Instance, Schedule


@dataclass(frozen=True)
class Result:
    """A method's answer: its schedule (None when it has none), objective, proven bound and status.

    ``objective`` is always the replayed objective of ``schedule``; ``lower_bound`` bounds the
    optimum of the instance's problem class (or of the class named in ``bound_class``).
    """

    schedule: Schedule | None
    objective: float | None
    lower_bound: float | None
    status: str
    runtime_s: float
    solver: str
    version: str = ""
    params: Mapping[str, Any] = field(default_factory=dict)

    def claimed_schedule(self) -> Schedule | None:
        if self.schedule is None:
            return None
        return self.schedule.with_claim(Claimed(self.objective, self.lower_bound, self.status, self.runtime_s))

    def with_(self, **changes: Any) -> "Result":
        return replace(self, **changes)


class Solver(Protocol):
    """An offline method: ``jctlab solve --method NAME`` calls it through the registry.

    Method-specific options arrive as keyword arguments (``--samples 64`` → ``samples=64``).
    """

    def __call__(self, inst: Instance, *, time_limit: float | None = None, threads: int = 1,
                 seed: int = 0, hint: Schedule | None = None, **options: Any) -> Result: ...
