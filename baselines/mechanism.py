"""What the two mechanisms (rounds, event-driven) share: the queue, the placement, the rigid sizes and
the free GPUs a walk places jobs on.

The free GPUs are a *state* with three operations, ``try_place(j)``, ``take(j, alloc)`` and
``give(j, alloc)``, in two implementations that make the same choices:

- :class:`ScanState`: the placements' definition, a map node -> free GPU ids plus the CPUs in use,
  rebuilt from the engine at each decision and scanned by ``Placement.place``. It is the only one that
  handles parameter servers (they hold CPUs that GPUs at the fair share need, so a free GPU can be
  unusable).
- :class:`IndexState`: a :class:`baselines.freeindex.FreeIndex` kept across decisions and queried by
  ``Placement.place_indexed``; a job that may use only some of the cluster's GPU types is placed by
  the scan on the index's filtered map.

:class:`Mechanism` picks the index unless an instance has parameter servers or ``index=False``
(the scans, kept to check the index against: ``tests/test_mechanism_index.py``).
"""

from __future__ import annotations

from typing import Iterable

from jctlab.model import Allocation, Instance
from jctlab.resources import node_demand, ps_placement, with_cpu_room

from .freeindex import FreeIndex
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


class ScanState:
    """The free map and the CPUs in use, scanned by ``Placement.place`` (the definition)."""

    def __init__(self, mech: "Mechanism", free_sets: dict[str, set[str]], cpu: dict[str, float]):
        self.m = mech
        self.free = mech.view.build(free_sets)
        self.cpu = cpu

    def try_place(self, j: int) -> Allocation | None:
        m = self.m
        job = m.inst.jobs[j]
        n = m.sizes[j]
        f = m.view.for_job(job, self.free)
        if m.cpu_binds:
            f = with_cpu_room(m.inst.cluster, f, self.cpu)
        if sum(len(gl) for gl in f.values()) < n:
            return None
        gpus = m.placement.place(j, n, f)
        if gpus is None:
            return None
        ps = ps_placement(job, gpus, m.inst.cluster, self.cpu)
        if ps is None:
            return None
        return Allocation(tuple(gpus), ps)

    def take(self, j: int, alloc: Allocation) -> None:
        self.m.view.take(self.free, alloc.gpus, self.m.node_of)
        self._charge(j, alloc, 1.0)

    def give(self, j: int, alloc: Allocation) -> None:
        self.m.view.give(self.free, alloc.gpus, self.m.node_of)
        self._charge(j, alloc, -1.0)

    def _charge(self, j: int, alloc: Allocation, sign: float) -> None:
        """Add (sign=+1) or remove job j's CPUs on ``alloc`` (GPUs' fair shares and its PS)."""
        m, cpu = self.m, self.cpu
        for n, c in node_demand(m.inst.jobs[j], alloc, m.inst.cluster)[0].items():
            cpu[n] = cpu.get(n, 0.0) + sign * c


class IndexState:
    """A :class:`FreeIndex` queried by ``Placement.place_indexed`` (instances without parameter servers,
    so CPUs never bind and every allocation's PS part is empty)."""

    def __init__(self, mech: "Mechanism"):
        self.m = mech
        self.idx = mech.placement.index()
        inst = mech.inst
        types = set(inst.cluster.gpu_types)
        gtype = {g.id: g.type for g in inst.cluster.gpus}
        # jobs that cannot use every GPU type get the scan on their GPUs: filter of GPU ids, or None
        self.only: list = [None if all(job.can_use(t) for t in types) else
                           (lambda g, job=job: job.can_use(gtype[g])) for job in inst.jobs]

    def try_place(self, j: int) -> Allocation | None:
        m, idx = self.m, self.idx
        n = m.sizes[j]
        if idx.total < n:
            return None
        ok = self.only[j]
        if ok is None:
            gpus = m.placement.place_indexed(j, n, idx)
        else:
            f = idx.as_map(ok)
            if sum(len(gl) for gl in f.values()) < n:
                return None
            gpus = m.placement.place(j, n, f)
        return None if gpus is None else Allocation(tuple(gpus))

    def take(self, j: int, alloc: Allocation) -> None:
        self.idx.take(alloc.gpus)

    def give(self, j: int, alloc: Allocation) -> None:
        self.idx.give(alloc.gpus)

    def reset(self) -> None:
        """Every GPU free again (what giving back every placement the index holds leaves)."""
        self.idx.reset()


class Mechanism:
    """Shared state: queue, placement, rigid sizes, the free-GPU view; ``index``: keep a
    :class:`FreeIndex` (False: scan the free map at every placement, the definition)."""

    round_s: float | None = None

    def __init__(self, inst: Instance, queue: Queue, placement: Placement, sizes: list[int], index: bool = True):
        self.inst = inst
        self.queue = queue
        self.placement = placement
        self.sizes = sizes
        self.node_of = {g.id: g.node for g in inst.cluster.gpus}
        self.view = FreeView(inst, placement.gidx)
        self.total_gpus = len(inst.cluster.gpus)
        # every job runs at the fair share: only parameter servers can leave a free GPU without its CPUs
        self.cpu_binds = any(j.ps is not None for j in inst.jobs)
        self.state: IndexState | None = IndexState(self) if index and not self.cpu_binds else None
        self.held: dict[int, Allocation] = {}     # what the index holds taken: job -> allocation
        self.indexed = bool(index)
        self.rank = [CLASS_RANK.get(j.job_class, 4) for j in inst.jobs]
        self.ranked = len(set(self.rank)) > 1

    def order(self, sim, with_running: bool) -> list[int]:
        """The waiting jobs (and the running ones) in queue order; with ``index``, kept between calls."""
        if self.indexed:
            return self.queue.order_live(sim, with_running)
        jobs = list(sim.waiting) + list(sim.engine.running) if with_running else sim.waiting
        return self.queue.order(sim, jobs)

    def class_sorted(self, order: list[int], capacity: int) -> list[int]:
        """PAL/PM-First: the prefix of ``order`` whose demand fits ``capacity``, stable-sorted by class."""
        if not self.ranked:      # one class rank for every job: the stable sort keeps the order
            return order
        sizes = self.sizes
        acc = 0
        k = 0
        for j in order:
            acc += sizes[j]
            if acc > capacity:
                break
            k += 1
        head = sorted(order[:k], key=self.rank.__getitem__)
        return head + order[k:]

    def engine_state(self, eng) -> ScanState | IndexState:
        """The free GPUs as the engine has them now: the index, brought up to date with the jobs that
        completed since the last decision, or a fresh scan state."""
        if self.state is None:
            return ScanState(self, eng.free, dict(eng.cpu_used))
        held, running = self.held, eng.running
        if len(held) != len(running):     # only this policy starts jobs: running is a subset of held
            for j in [j for j in held if j not in running]:
                self.state.give(j, held.pop(j))
        return self.state

    def commit(self, preempted: Iterable[int], started: Iterable[tuple[int, Allocation]]) -> None:
        """Record in ``held`` what the engine will hold once these actions apply (the index already has it)."""
        if self.state is None:
            return
        for v in preempted:
            del self.held[v]
        for j, a in started:
            self.held[j] = a
