"""The core's reference online policy: FIFO with first-fit placement, no preemption.

It exists so the core can run end to end on its own (the demo, the Philly-scale benchmark); the
baselines package brings the published policies.
"""

from __future__ import annotations

from typing import Iterable

from .model import Allocation, Instance
from .simulate import Action, Simulator, Start


class FifoFirstFit:
    """Start waiting jobs in arrival order while the head fits; its largest allowed size that fits
    the free GPUs; the first node with room for all of them, else GPUs in node order."""

    def __init__(self, inst: Instance, seed: int = 0):
        self.inst = inst
        self.order = [n.name for n in inst.cluster.nodes]
        self.gpu_type = {g.id: g.type for g in inst.cluster.gpus}

    def decide(self, sim: Simulator) -> Iterable[Action]:
        eng = sim.engine
        free_total = eng.free_total
        actions = []
        taken: set[str] = set()
        for j in list(sim.waiting):
            job = self.inst.jobs[j]
            fits = [n for n in job.sizes if n <= free_total]
            if not fits:
                break
            gpus = self._place(sim, job, max(fits), taken) or next(
                (g for n in sorted(fits[:-1], reverse=True) if (g := self._place(sim, job, n, taken))), None)
            if gpus is None:
                break  # strict FIFO: the head blocks the queue
            taken.update(gpus)
            free_total -= len(gpus)
            actions.append(Start(j, Allocation(tuple(gpus))))
        return actions

    def _place(self, sim: Simulator, job, n: int, taken: set[str]) -> list[str] | None:
        free = sim.engine.free
        spread: list[str] = []
        for name in self.order:
            ok = [g for g in free[name] if g not in taken and job.can_use(self.gpu_type[g])]
            if len(ok) >= n:
                return sorted(ok, key=_gpu_index)[:n]
            if len(spread) < n:
                spread.extend(ok)
        return sorted(spread[:n], key=_gpu_index) if len(spread) >= n else None


def _gpu_index(g: str) -> tuple[str, int]:
    node, i = g.rsplit(":", 1)
    return node, int(i)


def fifo_firstfit(inst: Instance, seed: int = 0) -> FifoFirstFit:
    return FifoFirstFit(inst, seed)
