"""``QUEUE+PLACEMENT`` policy names (entry point ``jctlab.policy_families``: ``queue-placement``).

``resolve("fifo+pal")`` returns ``factory(inst, seed=0, round_s=360.0, lam=None, thresholds=None,
backfill=False, locality="sf-node")``; the mechanism follows ``inst.problem``: ``preemptive`` ->
:class:`baselines.rounds.RoundPolicy` (exposes ``round_s``, so ``jctlab simulate --policy fifo+pal``
runs in rounds; ``--round S`` overrides), otherwise -> :class:`baselines.eventdriven.EventPolicy`.

queues: fifo, sjf, srtf, las, gittins. placements: packed-sticky, packed-nonsticky, random-sticky,
random-nonsticky, pm-first, pal. Options: ``round_s`` (s), ``lam`` (PAL's across-node factor; default
the instance's locality penalty when > 1, else 1.7), ``thresholds`` (las, GPU-seconds, comma list),
``backfill`` (event-driven only), ``locality`` (PM-First tie-break: ``sf-node`` = free GPUs of the same
node and slowdown, ``node`` = free GPUs of the node).
"""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Callable

from jctlab.argtypes import Choice, Listed, RoundS
from jctlab.limits import LOCALITY, Range
from jctlab.model import Instance

from .eventdriven import EventPolicy
from .placement import PLACEMENTS, make_placement
from .queues import QUEUES, make_queue, rigid_size
from .rounds import RoundPolicy


def _bool(v) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _floats(v):
    if v is None:
        return None
    if isinstance(v, str):
        return tuple(float(x) for x in v.split(",") if x.strip())
    if isinstance(v, (int, float)):
        return (float(v),)
    return tuple(float(x) for x in v)


def sizes_of(inst: Instance) -> list[int]:
    """Each job's rigid size: its largest allowed size that the cluster can hold, GPUs and CPUs (a PS
    job's server needs CPUs beside its GPUs' fair shares)."""
    cl = inst.cluster
    cpus = sum(nd.cpus for nd in cl.nodes)
    fair = min(nd.fair_cpus for nd in cl.nodes)      # the counting rule of the oracles' job_infeasible
    per_type = Counter(g.type for g in cl.gpus)
    out = []
    for job in inst.jobs:
        usable = sum(c for t, c in per_type.items() if job.can_use(t))
        if job.ps is not None and fair > 0:
            usable = min(usable, int((cpus - job.ps.ps_cpus + 1e-9) // fair))
        out.append(rigid_size(job, usable))
    return out


def build(queue: str, placement: str, inst: Instance, seed: int = 0, round_s: float = 360.0, lam: float | None = None,
          thresholds=None, backfill=False, locality: str = "sf-node", index: bool = True):
    """The policy; ``index=False`` places by scanning the free GPUs (the placements' definition, slow on
    large clusters) instead of the maintained index; both emit the same schedule."""
    sizes = sizes_of(inst)
    q = make_queue(queue, inst, sizes, _floats(thresholds))
    p, sticky = make_placement(placement, inst, int(seed), None if lam is None else float(lam), locality)
    if inst.problem == "preemptive":
        pol = RoundPolicy(inst, q, p, sizes, sticky, float(round_s), index)
    else:
        pol = EventPolicy(inst, q, p, sizes, _bool(backfill), index)
    pol.name = f"{queue}+{placement}"
    return pol


def resolve(name: str) -> Callable | None:
    if not isinstance(name, str) or "+" not in name:
        return None
    queue, placement = (s.strip().lower() for s in name.split("+", 1))
    if queue not in QUEUES or placement not in PLACEMENTS:
        return None

    def factory(inst: Instance, seed: int = 0, round_s: RoundS = 360.0,
                lam: Annotated[float | None, LOCALITY] = None,
                thresholds: Annotated[tuple[float, ...] | None, Listed(Range(0, 1e15, lo_open=True))] = None,
                backfill: bool = False, locality: Annotated[str, Choice(("sf-node", "node"))] = "sf-node"):
        return build(queue, placement, inst, seed, round_s, lam, thresholds, backfill, locality)

    factory.__name__ = f"{queue}+{placement}"
    return factory


resolve.pattern = f"QUEUE+PLACEMENT with QUEUE in {'|'.join(QUEUES)}, PLACEMENT in {'|'.join(PLACEMENTS)}"

__all__ = ["resolve", "build", "sizes_of"]
