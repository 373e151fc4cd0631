"""Event-driven mechanism for the ``offline`` class: no preemption; a job once started keeps its GPUs.

At every decision point (arrivals, completions, and rounds when the simulator is given some) the
waiting jobs are ordered by the queue; ``class_sort`` placements (PAL, PM-First) stable-sort the
prefix whose demand fits the free GPUs by class A..D. Jobs are placed in that order on the free
GPUs and the walk stops at the first job that does not fit (strict order, as PAL's artifact and
Tiresias do); ``backfill=True`` skips such a job and goes on. Without preemption no job ever
has attained service while it waits, so ``las`` and ``gittins`` reduce to FIFO and ``srtf`` to ``sjf``.
Work per decision: O(waiting · log) for the order plus the placements (:mod:`baselines.freeindex`).
"""

from __future__ import annotations

from jctlab.model import Instance
from jctlab.simulate import Action, Start

from .placement import Placement
from .queues import Queue
from .rounds import Mechanism


class EventPolicy(Mechanism):
    round_s = None

    def __init__(self, inst: Instance, queue: Queue, placement: Placement, sizes: list[int], backfill: bool = False,
                 index: bool = True):
        super().__init__(inst, queue, placement, sizes, index)
        self.backfill = bool(backfill)

    def decide(self, sim) -> list[Action]:
        eng = sim.engine
        if not sim.waiting or eng.free_total == 0:
            return []
        order = self.order(sim, False)
        if self.placement.class_sort:
            order = self.class_sorted(order, eng.free_total)
        state = self.engine_state(eng)
        left = eng.free_total
        out: list[Start] = []
        for j in order:
            if left == 0:
                break
            alloc = state.try_place(j) if self.sizes[j] <= left else None
            if alloc is None:
                if self.backfill:
                    continue
                break
            state.take(j, alloc)
            left -= len(alloc.gpus)
            out.append(Start(j, alloc))
        self.commit((), ((s.job, s.alloc) for s in out))
        return out
