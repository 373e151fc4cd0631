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

Restart costs are the engine's (``cluster.restart_s`` on every resumed segment). Per round the work is
O(active jobs · log) for the order plus O(GPUs) per placed job.
"""

from __future__ import annotations

from typing import Iterable

from jctlab.model import Allocation, Instance
from jctlab.resources import node_demand, ps_placement, with_cpu_room
from jctlab.simulate import Action, Preempt, Start

from .placement import Placement
from .queues import Queue

CLASS_RANK = {"A": 0, "B": 1, "C": 2, "D": 3}


class FreeView:
    """Free GPUs per node, in cluster order, each list in GPU order; filtered per job by GPU type."""

    def __init__(self, inst: Instance, gidx: dict[str, int]):
        self.inst = inst
        self.gidx = gidx
        self.gtype = {g.id: g.type for g in inst.cluster.gpus}
        self.node_order = [nd.name for nd in inst.cluster.nodes]
        self.single_type = len(inst.cluster.gpu_types) <= 1

    def build(self, free_sets: dict[str, set[str]]) -> dict[str, list[str]]:
        gidx = self.gidx
        return {n: sorted(free_sets[n], key=gidx.__getitem__) for n in self.node_order if free_sets.get(n)}

    def for_job(self, job, free: dict[str, list[str]]) -> dict[str, list[str]]:
        if self.single_type:
            return free
        gt = self.gtype
        out = {}
        for n, gl in free.items():
            ok = [g for g in gl if job.can_use(gt[g])]
            if ok:
                out[n] = ok
        return out

    @staticmethod
    def take(free: dict[str, list[str]], gpus: Iterable[str], node_of: dict[str, str]) -> None:
        for g in gpus:
            n = node_of[g]
            gl = free[n]
            gl.remove(g)
            if not gl:
                del free[n]

    def give(self, free: dict[str, list[str]], gpus: Iterable[str], node_of: dict[str, str]) -> None:
        for g in gpus:
            n = node_of[g]
            gl = free.setdefault(n, [])
            gl.append(g)
            gl.sort(key=self.gidx.__getitem__)
        # keep node order
        if len(free) > 1:
            items = sorted(free.items(), key=lambda kv: self.gidx[kv[1][0]])
            free.clear()
            free.update(items)


class Mechanism:
    """Shared state: queue, placement, rigid sizes, the free-GPU view."""

    round_s: float | None = None

    def __init__(self, inst: Instance, queue: Queue, placement: Placement, sizes: list[int]):
        self.inst = inst
        self.queue = queue
        self.placement = placement
        self.sizes = sizes
        self.node_of = {g.id: g.node for g in inst.cluster.gpus}
        self.view = FreeView(inst, placement.gidx)
        self.total_gpus = len(inst.cluster.gpus)
        # every job runs at the fair share: only parameter servers can leave a free GPU without its CPUs
        self.cpu_binds = any(j.ps is not None for j in inst.jobs)

    def class_sorted(self, order: list[int], capacity: int) -> list[int]:
        """PAL/PM-First: the prefix of ``order`` whose demand fits ``capacity``, stable-sorted by class."""
        jobs, sizes = self.inst.jobs, self.sizes
        acc = 0
        k = 0
        for j in order:
            acc += sizes[j]
            if acc > capacity:
                break
            k += 1
        head = sorted(order[:k], key=lambda j: CLASS_RANK.get(jobs[j].job_class, 4))
        return head + order[k:]

    def try_place(self, j: int, free: dict[str, list[str]], cpu_used: dict[str, float]) -> Allocation | None:
        job = self.inst.jobs[j]
        n = self.sizes[j]
        f = self.view.for_job(job, free)
        if self.cpu_binds:
            f = with_cpu_room(self.inst.cluster, f, cpu_used)
        if sum(len(gl) for gl in f.values()) < n:
            return None
        gpus = self.placement.place(j, n, f)
        if gpus is None:
            return None
        ps = ps_placement(job, gpus, self.inst.cluster, cpu_used)
        if ps is None:
            return None
        return Allocation(tuple(gpus), ps)

    def _charge(self, cpu: dict[str, float], j: int, alloc: Allocation, sign: float = 1.0) -> None:
        """Add (sign=+1) or remove job j's CPUs on ``alloc`` (GPUs' fair shares and its PS)."""
        for n, c in node_demand(self.inst.jobs[j], alloc, self.inst.cluster)[0].items():
            cpu[n] = cpu.get(n, 0.0) + sign * c


class RoundPolicy(Mechanism):
    def __init__(self, inst: Instance, queue: Queue, placement: Placement, sizes: list[int],
                 sticky: bool, round_s: float = 360.0):
        super().__init__(inst, queue, placement, sizes)
        if not round_s > 0:
            raise ValueError("round_s must be > 0")
        self.sticky = sticky
        self.round_s = float(round_s)

    def decide(self, sim) -> list[Action]:
        if "round" not in sim.reasons:
            return []
        running = sim.running
        active = list(sim.waiting) + list(running)
        if not active:
            return []
        order = self.queue.order(sim, active)
        if self.placement.class_sort:
            order = self.class_sorted(order, self.total_gpus)
        if self.sticky:
            return self._sticky(sim, order)
        return self._nonsticky(sim, order)

    def _nonsticky(self, sim, order: list[int]) -> list[Action]:
        eng = sim.engine
        running = sim.running
        all_free = {n: set(s) for n, s in eng.free.items()}
        for j, r in running.items():
            for g in r.alloc.gpus:
                all_free[self.node_of[g]].add(g)
        cpu = {n: 0.0 for n in eng.cpu_used}   # every allocation is cleared
        free = self.view.build(all_free)
        placed: dict[int, Allocation] = {}
        for j in order:
            alloc = self.try_place(j, free, cpu)
            if alloc is None:
                break
            placed[j] = alloc
            self.view.take(free, alloc.gpus, self.node_of)
            self._charge(cpu, j, alloc)
        actions: list[Action] = []
        starts: list[Action] = []
        for j, r in running.items():
            a = placed.get(j)
            if a is not None and sorted(a.gpus) == sorted(r.alloc.gpus) and a.ps_nodes == r.alloc.ps_nodes:
                continue   # same GPUs: keeps running
            actions.append(Preempt(j))
            if a is not None:
                starts.append(Start(j, a))
        for j, a in placed.items():
            if j not in running:
                starts.append(Start(j, a))
        return actions + starts

    def _sticky(self, sim, order: list[int]) -> list[Action]:
        eng = sim.engine
        running = set(sim.running)
        run_alloc = {j: r.alloc for j, r in sim.running.items()}
        free = self.view.build(eng.free)
        cpu = dict(eng.cpu_used)
        preempt: list[int] = []
        starts: list[Action] = []
        for idx, j in enumerate(order):
            if j in running:
                continue
            alloc = self.try_place(j, free, cpu)
            if alloc is None:
                # preempt lower-priority running jobs, lowest first, until j fits
                for v in reversed(order[idx + 1:]):
                    if v not in running:
                        continue
                    running.discard(v)
                    preempt.append(v)
                    a = run_alloc[v]
                    self.view.give(free, a.gpus, self.node_of)
                    self._charge(cpu, v, a, -1.0)
                    alloc = self.try_place(j, free, cpu)
                    if alloc is not None:
                        break
            if alloc is None:
                break
            self.view.take(free, alloc.gpus, self.node_of)
            self._charge(cpu, j, alloc)
            starts.append(Start(j, alloc))
        return [Preempt(v) for v in preempt] + starts
