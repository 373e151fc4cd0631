"""Round-based mechanism for the ``preemptive`` class (Tiresias, PAL, Gavel-style rounds).

Every ``round_s`` seconds (the simulator's ``round`` decision points; other events are ignored, so
jobs start, stop and move only at round boundaries, as in PAL's and Blox's simulators) the policy
orders every active job (waiting and running) by its queue, then:

- ``class_sort`` placements (PAL, PM-First): the queue prefix whose GPU demand fits in the cluster is
  stable-sorted by class (A, B, C, D, others last), followed by the rest of the queue.
- non-sticky: every allocation is cleared and jobs are placed in that order on the whole cluster,
  stopping at the first job that does not fit; a running job that gets the very same GPUs keeps
  running (no preemption), any other running job is preempted (and restarted elsewhere if placed).
- sticky: a running job keeps its GPUs; a waiting job is placed on the free GPUs, and when it does
  not fit, running jobs of lower priority are preempted, lowest first, until it fits; the walk stops
  at the first job that cannot be placed even so.

Restart costs are the engine's (``cluster.restart_s`` on every resumed segment).

Cost per round: O(active jobs · log) for the order, plus the placements, each in time independent of
the number of free GPUs (:mod:`baselines.freeindex`). Non-sticky rounds with a deterministic placement
(all but random) place only the jobs after the first change: job k's GPUs depend only on the jobs
placed before it (every round starts from an empty cluster), so when the order begins with the same
jobs as the last round's walk, those jobs get the same GPUs again; the walk gives back the last
round's placements from the first difference on and goes on from there. When the order is unchanged
up to and including the job that stopped the last walk, nothing is placed at all.
"""

from __future__ import annotations

from jctlab.model import Allocation, Instance
from jctlab.simulate import Action, Preempt, Start

from .mechanism import Mechanism, ScanState
from .placement import Placement
from .queues import Queue


class RoundPolicy(Mechanism):
    def __init__(self, inst: Instance, queue: Queue, placement: Placement, sizes: list[int],
                 sticky: bool, round_s: float = 360.0, index: bool = True):
        super().__init__(inst, queue, placement, sizes, index)
        if not round_s > 0:
            raise ValueError("round_s must be > 0")
        self.sticky = sticky
        self.round_s = float(round_s)
        # non-sticky with the index: the last round's walk (order up to the job that stopped it) and
        # its placements, which the index holds taken
        self._walked: list[int] = []
        self._placed: list[tuple[int, Allocation]] = []
        self._seq = [0] * len(inst.jobs)      # when each job last started (the engine's running order)
        self._clock = 0

    def decide(self, sim) -> list[Action]:
        if "round" not in sim.reasons:
            return []
        if not sim.waiting and not sim.running:
            return []
        order = self.order(sim, True)
        if self.placement.class_sort:
            order = self.class_sorted(order, self.total_gpus)
        if self.sticky:
            return self._sticky(sim, order)
        return self._nonsticky(sim, order)

    def _walk(self, state, order: list[int], start: int, placed: list[tuple[int, Allocation]]) -> None:
        """Place ``order[start:]`` in turn on ``state`` until the first job that does not fit."""
        for j in order[start:] if start else order:
            alloc = state.try_place(j)
            if alloc is None:
                return
            placed.append((j, alloc))
            state.take(j, alloc)

    def _nonsticky(self, sim, order: list[int]) -> list[Action]:
        eng = sim.engine
        running = sim.running
        if self.state is None:
            all_free = {n: set(s) for n, s in eng.free.items()}
            for j, r in running.items():
                for g in r.alloc.gpus:
                    all_free[self.node_of[g]].add(g)
            placed_list: list[tuple[int, Allocation]] = []
            state = ScanState(self, all_free, {n: 0.0 for n in eng.cpu_used})   # every allocation is cleared
            self._walk(state, order, 0, placed_list)
            k, movable = 0, list(running)
        else:
            got = self._replace(order)
            if got is None:
                return []        # the last round's placements, which the engine holds
            placed_list, k, old_tail = got
            # only jobs placed after the first change can move or stop; in the engine's order, which is the
            # order they started in: with k == 0, every running job (each was placed by the last walk)
            if k == 0:
                movable = list(running)
            else:
                movable = sorted((j for j, _ in old_tail if j in running), key=self._seq.__getitem__)
        fresh = placed_list[k:]
        placed = dict(fresh)
        actions: list[Action] = []
        starts: list[Start] = []
        for j in movable:
            r = running[j]
            a = placed.get(j)
            if a is not None and _same_gpus(a.gpus, r.alloc.gpus) and a.ps_nodes == r.alloc.ps_nodes:
                continue   # same GPUs: keeps running
            actions.append(Preempt(j))
            if a is not None:
                starts.append(Start(j, a))
        for j, a in fresh:
            if j not in running:
                starts.append(Start(j, a))
        for st in starts:        # the engine's running jobs are in the order they started
            self._seq[st.job] = self._clock
            self._clock += 1
        return actions + starts

    def _replace(self, order: list[int]):
        """This round's placements on the index, re-placing from the first change of the order: (all
        placements, k = how many are the last round's first k, the last round's placements after k);
        None when all are the last round's."""
        last, old = self._walked, self._placed
        k = 0
        if self.placement.deterministic:
            k = _common_prefix(order, last)
        if k > len(old):           # same jobs up to the one that stopped the last walk: same round
            return None
        state = self.state
        tail = old[k:]
        if k == 0:
            state.reset()        # it held exactly the last walk's placements
        else:
            for j, a in reversed(tail):
                state.give(j, a)
        placed = old[:k]
        self._walk(state, order, k, placed)
        self._walked = order[:len(placed) + 1]
        self._placed = placed
        return placed, k, tail

    def _sticky(self, sim, order: list[int]) -> list[Action]:
        eng = sim.engine
        running = set(sim.running)
        run_alloc = {j: r.alloc for j, r in sim.running.items()}
        state = self.engine_state(eng)
        preempt: list[int] = []
        starts: list[Start] = []
        for idx, j in enumerate(order):
            if j in running:
                continue
            alloc = state.try_place(j)
            if alloc is None:
                # preempt lower-priority running jobs, lowest first, until j fits
                for v in reversed(order[idx + 1:]):
                    if v not in running:
                        continue
                    running.discard(v)
                    preempt.append(v)
                    state.give(v, run_alloc[v])
                    alloc = state.try_place(j)
                    if alloc is not None:
                        break
            if alloc is None:
                break
            state.take(j, alloc)
            starts.append(Start(j, alloc))
        self.commit(preempt, ((s.job, s.alloc) for s in starts))
        return [Preempt(v) for v in preempt] + starts


def _same_gpus(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two allocations' GPU tuples (each without repeats) hold the same GPUs, in any order."""
    if a == b:
        return True
    return len(a) == len(b) and a[0] in b and sorted(a) == sorted(b)


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two lists (binary search on slice equality)."""
    lo, hi = 0, min(len(a), len(b))
    if a[:hi] == b[:hi]:
        return hi
    while lo < hi:             # a[:lo] == b[:lo], a[:hi + 1] != b[:hi + 1]
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
