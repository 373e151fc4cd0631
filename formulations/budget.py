"""A wall-clock budget: the one time object of the solvers.

A solve gets a time limit (seconds, or None for no limit) and hands out shares of it to its phases. A
:class:`Budget` is that limit anchored at the instant it started (``time.perf_counter()``): ``left()`` says
how many seconds remain (``math.inf`` without a limit; negative once overrun), ``remaining()`` the same as
the solvers' optional limits take it (None without a limit, never negative), ``until`` the instant it ends.

"Deadline" in the offline oracle means something else (the latest completion of a job in a schedule at
least as good as the incumbent, :mod:`formulations.offline.latest_completions`); wall-clock instants are
called ``until`` (a ``time.perf_counter()`` value, None for none).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Budget:
    """``limit`` seconds of wall-clock time from ``t0`` (a ``time.perf_counter()`` instant); None: no limit."""

    limit: float | None
    t0: float = field(default_factory=time.perf_counter)

    @property
    def unlimited(self) -> bool:
        return self.limit is None

    @property
    def until(self) -> float | None:
        """The instant the budget ends (``time.perf_counter()``), None without a limit."""
        return None if self.limit is None else self.t0 + self.limit

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        """Seconds left: ``math.inf`` without a limit, negative once overrun."""
        if self.limit is None:
            return math.inf
        return self.limit - (time.perf_counter() - self.t0)

    def remaining(self) -> float | None:
        """Seconds left as a solver's optional limit: None without a limit, else at least 0."""
        return None if self.limit is None else max(0.0, self.limit - (time.perf_counter() - self.t0))

    def expired(self) -> bool:
        return self.left() <= 0

    def share(self, fraction: float) -> "Budget":
        """A budget of ``fraction`` of the time left, from now (no limit stays no limit)."""
        return Budget(None if self.limit is None else fraction * self.left())

    def at_most(self, seconds: float) -> "Budget":
        """A budget of the time left, at most ``seconds``, from now."""
        return Budget(seconds if self.limit is None else min(seconds, self.left()))


def until(t0: float, seconds: float | None) -> float | None:
    """The ``time.perf_counter()`` instant ``seconds`` after ``t0`` (None for None)."""
    return None if seconds is None else t0 + seconds
