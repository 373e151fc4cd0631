"""What both MILP back ends need of CBC beyond PuLP: its proven bound, read from its log (PuLP does not return
it), and its thread option."""

from __future__ import annotations

import re


def cbc_log_bound(log: str) -> float | None:
    """The last bound CBC printed in its log (``Lower bound:`` / ``best possible``), or None.

    PuLP does not expose CBC's bound; both MILP back ends read it from the solver's log."""
    vals = []
    for pat in (r"Lower bound:\s*([-+0-9.eE]+)", r"best possible\s*([-+0-9.eE]+)"):
        for m in re.finditer(pat, log):
            try:
                vals.append(float(m.group(1)))
            except ValueError:
                pass
    return vals[-1] if vals else None


def cbc_threads(threads: int) -> int | None:
    """CBC's ``threads`` option for ``threads`` threads: None (the option left out) for one. With ``threads 1``
    CBC runs its parallel search with one worker thread, and where the root solves the problem that worker can
    wait 10 s to start before CBC exits ("Thread 0 used 0 times, waiting to start 10.000211"), far past a short
    time limit (docs/hardening.md). Left out, CBC searches in its own thread."""
    return threads if threads > 1 else None
