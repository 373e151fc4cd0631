"""Incumbents mapped onto model options (hints), and the class of an allocation."""

from __future__ import annotations

from jctlab.model import Instance, Schedule

from ..results import Incumbent
from . import rates
from .cpsat_model import ModelHint
from .options import Option, demand_of, level_of


def hint_assignment(inst: Instance, opts: list[list[Option]], sched: Schedule | None) -> dict | None:
    """Map a schedule onto option indices and start times (concrete: same allocation; class: same class)."""
    if sched is None:
        return None
    out = {}
    for seg in sched.segments:
        j = inst.index.get(seg.job)
        if j is None:
            continue
        k = None
        held = most = None
        for kk, o in enumerate(opts[j]):
            if o.alloc is not None and o.alloc == seg.alloc:
                k = kk
                break
            if o.cls is not None and len(o.cls) > 3:      # group pattern: same GPU count per node group
                need = rates.need(o)               # ... and, for a rate band, its rate sum in the band
                if pattern_of(seg.alloc, o.cls) == o.cls[3] and (
                        need is None or need <= rates.scaled_rate(inst, j, seg.alloc)):
                    k = kk
                    break
                continue
            if o.level is not None and o.level != level_of(seg.alloc):
                continue
            if o.cls is not None and _same_class(o.cls, class_of(seg.alloc)):
                # a class may have variants (parameter servers on the node or not, how many): of those whose
                # CPUs/memory the allocation holds, the shortest (then the most CPUs/memory), which is no
                # longer than the allocation (a relaxation maps every allocation onto such a variant), so the
                # hinted schedule stays feasible in the model (the most CPUs alone was a slower variant, with
                # more servers, on PS jobs)
                held = held or demand_of(inst, inst.jobs[j], seg.alloc)
                need = sum(v for r, v in o.demand.items() if r[0] in ("cpu", "mem"))
                if all(v <= held.get(r, 0) + 1e-9 for r, v in o.demand.items() if r[0] in ("cpu", "mem")):
                    if most is None or (o.dur, -need) < most:
                        k, most = kk, (o.dur, -need)
                elif most is None:
                    k = kk
        out[j] = (k, seg.start)
    return out


def pattern_of(alloc, cls: tuple) -> tuple | None:
    """GPU counts of a spread allocation per node group of ``cls[3]`` (None when not that pattern's size)."""
    nodes = [g.split(":", 1)[0] for g in alloc.gpus]
    if len(set(nodes)) < 2 or len(nodes) != cls[1]:
        return None
    groups = [g for g, _ in cls[3]]
    if any(not any(v in g for g in groups) for v in nodes):
        return None
    return tuple((g, sum(v in g for v in nodes)) for g in groups)


def class_of(alloc) -> tuple:
    nodes = {g.split(":", 1)[0] for g in alloc.gpus}
    n = len(alloc.gpus)
    return ("node", next(iter(nodes)), n) if len(nodes) == 1 else ("spread", n, tuple(sorted(nodes)))


def _same_class(cls: tuple, c: tuple) -> bool:
    if cls == c:
        return True
    if cls[0] == "spread" and c[0] == "spread" and cls[1] == c[1]:
        return len(cls) == 2 or tuple(sorted(cls[2])) == c[2]
    return False




def model_hint(inst: Instance, opts: list[list[Option]], incumbent: Incumbent, gpus: bool = False) -> ModelHint | None:
    """The incumbent as a hint of the model over ``opts`` (:func:`hint_assignment`); ``gpus``: with its spread
    jobs' GPUs, for models with GPU literals (:func:`formulations.offline.rates.spread_gpus`)."""
    starts = hint_assignment(inst, opts, incumbent.schedule)
    if starts is None:
        return None
    return ModelHint(starts, rates.spread_gpus(inst, incumbent.schedule) if gpus else None)
