"""The core's reference online policy: FIFO with first-fit placement, no preemption.

It exists so the core can run end to end on its own (the demo, the Philly-scale benchmark); the
baselines package brings the published policies.
"""

from __future__ import annotations

from typing import Iterable

from .model import Allocation, Instance
from .resources import gpu_room, node_demand, ps_placement
from .simulate import Action, Simulator, Start


class FifoFirstFit:
    """Start waiting jobs in arrival order while the head fits; its largest allowed size that fits
    the free GPUs; the first node with room for all of them, else GPUs in node order."""

    def __init__(self, inst: Instance, seed: int = 0):
        self.inst = inst
        self.order = [n.name for n in inst.cluster.nodes]
        self.gpu_type = {g.id: g.type for g in inst.cluster.gpus}
        # every job runs at the fair share: only parameter servers can leave a free GPU without its CPUs
        self.cpu_binds = any(j.ps is not None for j in inst.jobs)

    def decide(self, sim: Simulator) -> Iterable[Action]:
        eng = sim.engine
        cl = self.inst.cluster
        free_total = eng.free_total
        actions = []
        taken: set[str] = set()
        cpu = dict(eng.cpu_used) if self.cpu_binds else {}
        for j in list(sim.waiting):
            job = self.inst.jobs[j]
            fits = [n for n in job.sizes if n <= free_total]
            if not fits:
                break
            alloc = None
            for n in sorted(fits, reverse=True):      # the largest size that fits, GPUs and CPUs
                gpus = self._place(sim, job, n, taken, cpu)
                ps = None if gpus is None else ps_placement(job, gpus, cl, cpu)   # () without PS
                if ps is not None:
                    alloc = Allocation(tuple(gpus), ps)
                    break
            if alloc is None:
                break  # strict FIFO: the head blocks the queue
            taken.update(alloc.gpus)
            free_total -= len(alloc.gpus)
            if self.cpu_binds:
                for v, c in node_demand(job, alloc, cl)[0].items():
                    cpu[v] = cpu.get(v, 0.0) + c
            actions.append(Start(j, alloc))
        return actions

    def _place(self, sim: Simulator, job, n: int, taken: set[str], cpu: dict[str, float]) -> list[str] | None:
        free = sim.engine.free
        spread: list[str] = []
        for name in self.order:
            ok = [g for g in sorted(free[name], key=_gpu_index) if g not in taken and job.can_use(self.gpu_type[g])]
            if self.cpu_binds:
                room = gpu_room(self.inst.cluster, name, cpu)    # GPUs whose fair share of CPUs is free
                if room < len(ok):
                    ok = sorted(ok, key=_gpu_index)[:int(room)]
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
