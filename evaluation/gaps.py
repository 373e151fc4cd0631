"""What a gap means (SPEC §3), in one place.

A gap is ``(objective - reference) / reference`` and always names its reference kind:

- ``opt``: a proven optimum of the same or a wider class: the true gap;
- ``lb``: a proven lower bound: the gap is an *upper* bound on the true gap, printed ``≤ x %``;
- ``best``: the best schedule known: no guarantee either way (a negative gap is a new best schedule).

A reference is usable for a cell only when its class is at least as wide as the class the method was
allowed to schedule in (the instance's problem class): an optimum of the non-preemptive class says
nothing about a preemptive policy, which may beat it. The strongest usable reference is taken: ``opt``,
else ``lb``, else ``best``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

from .suites import CLASSES, Reference

#: relative tolerance of SPEC §4 (a claimed objective equals the replayed one within it)
REL_TOL = 1e-6


def wider_or_equal(ref_class: str, cell_class: str) -> bool:
    """True when a reference of ``ref_class`` covers every schedule of ``cell_class``."""
    return CLASSES.index(ref_class) >= CLASSES.index(cell_class)


def usable(refs: Iterable[Reference], cell_class: str) -> list[Reference]:
    return [r for r in refs if wider_or_equal(r.problem_class, cell_class)]


def choose(refs: Iterable[Reference], cell_class: str) -> Reference | None:
    """The strongest reference usable for a cell of ``cell_class`` (opt, then lb, then best)."""
    ok = usable(refs, cell_class)
    for kind in ("opt", "lb", "best"):
        of_kind = [r for r in ok if r.kind == kind]
        if of_kind:
            # several of a kind cannot come from one manifest; from merged ones, the tightest
            return max(of_kind, key=lambda r: r.value) if kind == "lb" else min(of_kind, key=lambda r: r.value)
    return None


@dataclass(frozen=True)
class Gap:
    value: float | None
    kind: str | None
    reference: float | None
    #: a valid schedule below a proven bound or optimum: the reference (or the replay) is wrong
    violation: bool = False

    @property
    def text(self) -> str:
        return gap_text(self.value, self.kind)


def gap(objective: float | None, ref: Reference | None) -> Gap:
    if ref is None:
        return Gap(None, None, None)
    if objective is None or not math.isfinite(objective) or ref.value <= 0:
        return Gap(None, ref.kind, ref.value)
    g = (objective - ref.value) / ref.value
    violation = ref.kind in ("opt", "lb") and g < -REL_TOL
    return Gap(g, ref.kind, ref.value, violation)


def gap_text(value: float | None, kind: str | None) -> str:
    """``opt``: ``3.21 %``; ``lb``: ``≤ 3.21 %`` (an upper bound on the true gap); ``best``: ``3.21 % (best)``."""
    if value is None or kind is None:
        return "-"
    pct = f"{100 * value:.2f} %"
    if kind == "lb":
        return f"≤ {pct}"
    if kind == "best":
        return f"{pct} (best)"
    return pct
