"""CBC's proven bound, read from its log (PuLP does not return it)."""

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
