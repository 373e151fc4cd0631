"""The event-driven progress engine shared by replay and online simulation.

It holds which job runs on which GPUs, integrates each job's progress piecewise (rates change when a
co-located neighbour starts or stops: class interference on a shared node, PCIe interference on a
shared switch; and a resumed segment makes no progress for ``restart_s``), and
predicts completions with a heap. Every start is checked against the validity rules of SPEC §4 that
depend on the moment (free GPUs, CPU/memory capacity, arrival), so replay and policies share one
rulebook.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from .errors import InvalidSchedule
from .model import Allocation, Instance
from .resources import node_demand
from .speed import SpeedError, alloc_nodes, alloc_switches, base_iteration_time, switch_factor

EPS = 1e-9


def time_tol(t: float) -> float:
    """Tolerance for comparing two event times that were computed in different ways."""
    return EPS * max(1.0, abs(t))


@dataclass
class _Run:
    alloc: Allocation
    nodes: frozenset[str]
    switches: frozenset[tuple[str, int]]
    base: float          # iteration time without interference
    factor: float        # interference multiplier now in force
    restart_until: float
    last: float          # progress integrated up to here
    held_since: float
    cpu: dict[str, float]  # CPUs and GB held per node (given back on release)
    mem: dict[str, float]
    version: int = 0


class Engine:
    def __init__(self, inst: Instance, resumed: frozenset[int] = frozenset()):
        """``resumed``: jobs that ran before time 0 (a live state's preempted jobs): their first segment
        pays ``restart_s`` like any resumed segment."""
        self.inst = inst
        self.cluster = inst.cluster
        n = len(inst.jobs)
        self.progress = [0.0] * n
        self.segments_started = [1 if j in resumed else 0 for j in range(n)]
        self.completion: list[float | None] = [None] * n
        self.first_start: list[float | None] = [None] * n
        self.gpu_seconds = [0.0] * n            # GPU-time held (attained service, LAS)
        self.running: dict[int, _Run] = {}
        self.gpu_owner: dict[str, int] = {}
        self.free: dict[str, set[str]] = {nd.name: {g.id for g in nd.gpus} for nd in self.cluster.nodes}
        self.free_total = len(self.cluster.gpus)
        self.cpu_used = {nd.name: 0.0 for nd in self.cluster.nodes}
        self.mem_used = {nd.name: 0.0 for nd in self.cluster.nodes}
        self.node_jobs: dict[str, set[int]] = {nd.name: set() for nd in self.cluster.nodes}
        self.switch_jobs: dict[tuple[str, int], set[int]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._stamp = 0  # versions of completion predictions, unique across runs
        self._interfere = self.cluster.has_interference or self.cluster.has_switch_interference
        self._base_cache: dict[tuple[int, Allocation], float] = {}
        self.now = 0.0

    # ------------------------------------------------------------------ queries
    def remaining(self, j: int, t: float | None = None) -> float:
        """Iterations left for job j at time t (default: now)."""
        done = self.progress[j]
        r = self.running.get(j)
        if r is not None:
            t = self.now if t is None else t
            done += self._gain(r, t)
        return max(0.0, self.inst.jobs[j].iterations - done)

    def attained(self, j: int, t: float | None = None) -> float:
        """GPU-seconds held by job j so far (Tiresias' attained service)."""
        r = self.running.get(j)
        extra = 0.0
        if r is not None:
            t = self.now if t is None else t
            extra = (t - r.held_since) * len(r.alloc.gpus)
        return self.gpu_seconds[j] + extra

    def next_completion(self) -> float:
        while self._heap:
            t, v, j = self._heap[0]
            r = self.running.get(j)
            if r is None or r.version != v:
                heapq.heappop(self._heap)
                continue
            return t
        return math.inf

    def base_time(self, j: int, alloc: Allocation) -> float:
        key = (j, alloc)
        t = self._base_cache.get(key)
        if t is None:
            t = base_iteration_time(self.inst.jobs[j], alloc, self.cluster)
            self._base_cache[key] = t
        return t

    # ------------------------------------------------------------------ events
    def pop_completions(self, until: float) -> list[tuple[int, float]]:
        """Complete, in time order, every job predicted to finish at or before ``until``."""
        done = []
        while True:
            t = self.next_completion()
            if t == math.inf or t > until:
                return done
            _, _, j = heapq.heappop(self._heap)
            self._finish(j, t)
            done.append((j, t))

    def start(self, j: int, alloc: Allocation, t: float) -> None:
        inst, job = self.inst, self.inst.jobs[j]
        if self.completion[j] is not None:
            raise InvalidSchedule(f"job {job.name} starts at {t:g} but completed at {self.completion[j]:g}")
        if j in self.running:
            raise InvalidSchedule(f"job {job.name} starts at {t:g} while it is already running")
        if t < job.arrival - time_tol(job.arrival):
            raise InvalidSchedule(f"job {job.name} starts at {t:g} before its arrival {job.arrival:g}")
        if inst.problem == "static" and t != 0:
            raise InvalidSchedule(f"job {job.name} starts at {t:g}; static schedules start every job at 0")
        gpus = alloc.gpus
        if len(set(gpus)) != len(gpus):
            raise InvalidSchedule(f"job {job.name}: a GPU appears twice in its segment")
        if len(gpus) not in job.sizes:
            raise InvalidSchedule(f"job {job.name} gets {len(gpus)} GPUs; allowed sizes are {list(job.sizes)}")
        for g in gpus:
            gpu = self.cluster.gpu.get(g)
            if gpu is None:
                raise InvalidSchedule(f"job {job.name}: GPU {g} does not exist")
            if not job.can_use(gpu.type):
                raise InvalidSchedule(f"job {job.name} cannot run on GPU {g} of type {gpu.type}")
            owner = self.gpu_owner.get(g)
            if owner is not None:
                raise InvalidSchedule(
                    f"GPU {g} hosts job {inst.jobs[owner].name} and job {job.name} at time {t:g}")
        for n in alloc.ps_nodes:
            if n not in self.cluster.node:
                raise InvalidSchedule(f"job {job.name}: PS node {n} does not exist")
        if alloc.ps_nodes and job.ps is None:
            raise InvalidSchedule(f"job {job.name} has parameter servers but no `ps` configuration")
        try:
            base = self.base_time(j, alloc)
        except SpeedError as e:
            raise InvalidSchedule(str(e)) from None
        cpu, mem = self._demand(j, alloc)
        for n, c in cpu.items():
            node = self.cluster.node[n]
            if self.cpu_used[n] + c > node.cpus + EPS * max(1.0, node.cpus):
                raise InvalidSchedule(
                    f"node {n} needs {self.cpu_used[n] + c:g} CPUs at time {t:g} (capacity {node.cpus:g})")
            m = mem.get(n, 0.0)
            if self.mem_used[n] + m > node.mem_gb + EPS * max(1.0, node.mem_gb):
                raise InvalidSchedule(
                    f"node {n} needs {self.mem_used[n] + m:g} GB at time {t:g} (capacity {node.mem_gb:g})")
        # commit
        self.now = max(self.now, t)
        for n, c in cpu.items():
            self.cpu_used[n] += c
            self.mem_used[n] += mem.get(n, 0.0)
        for g in gpus:
            self.gpu_owner[g] = j
            self.free[g.split(":", 1)[0]].discard(g)
        self.free_total -= len(gpus)
        restart = self.cluster.restart_s if self.segments_started[j] > 0 else 0.0
        self.segments_started[j] += 1
        if self.first_start[j] is None:
            self.first_start[j] = t
        nodes = alloc_nodes(alloc)
        switches = alloc_switches(alloc, self.cluster)
        run = _Run(alloc, nodes, switches, base, 1.0, t + restart, t, t, cpu, mem)
        self.running[j] = run
        for n in nodes:
            self.node_jobs[n].add(j)
        for s in switches:
            self.switch_jobs.setdefault(s, set()).add(j)
        if self._interfere:
            run.factor = self._factor(j, run)
            for i in self._neighbours(j, nodes):   # sharing a switch implies sharing its node
                self._refactor(i, t)
        self._predict(j)

    def stop(self, j: int, t: float) -> None:
        """Preempt job j at time t (it keeps its progress)."""
        r = self.running.get(j)
        if r is None:
            raise InvalidSchedule(f"job {self.inst.jobs[j].name} is stopped at {t:g} but is not running")
        self.progress[j] += self._gain(r, t)
        if self.progress[j] >= self.inst.jobs[j].iterations * (1 - EPS):
            # finishing exactly at the stop: count it as a completion
            self._finish(j, t)
            return
        self._release(j, r, t)

    # ------------------------------------------------------------------ internals
    def _demand(self, j: int, alloc: Allocation) -> tuple[dict[str, float], dict[str, float]]:
        return node_demand(self.inst.jobs[j], alloc, self.cluster)

    def _gain(self, r: _Run, t: float) -> float:
        begin = max(r.last, r.restart_until)
        if t <= begin:
            return 0.0
        return (t - begin) / (r.base * r.factor)

    def _predict(self, j: int) -> None:
        r = self.running[j]
        self._stamp += 1
        r.version = self._stamp
        left = max(0.0, self.inst.jobs[j].iterations - self.progress[j])
        tc = max(r.last, r.restart_until) + left * r.base * r.factor
        heapq.heappush(self._heap, (tc, r.version, j))

    def _neighbours(self, j: int, nodes: frozenset[str]) -> set[int]:
        out: set[int] = set()
        for n in nodes:
            out |= self.node_jobs[n]
        out.discard(j)
        return out

    def _factor(self, j: int, r: _Run) -> float:
        """SPEC §2's co-location multiplier of running job j: classes on shared nodes, jobs on shared switches."""
        jobs = self.inst.jobs
        cls = jobs[j].job_class
        f = 1.0 + sum(self.cluster.interference_of(cls, jobs[i].job_class) for i in self._neighbours(j, r.nodes))
        if r.switches:
            on_switch: set[int] = set()
            for s in r.switches:
                on_switch |= self.switch_jobs[s]
            f *= switch_factor(self.cluster, len(on_switch) - 1)
        return f

    def _refactor(self, i: int, t: float) -> None:
        r = self.running[i]
        f = self._factor(i, r)
        if f == r.factor:
            return
        self.progress[i] += self._gain(r, t)
        r.last = max(r.last, t)
        r.factor = f
        self._predict(i)

    def _finish(self, j: int, t: float) -> None:
        r = self.running[j]
        self.progress[j] = self.inst.jobs[j].iterations
        self.completion[j] = t
        self._release(j, r, t)

    def _release(self, j: int, r: _Run, t: float) -> None:
        self.now = max(self.now, t)
        del self.running[j]
        self.gpu_seconds[j] += max(0.0, t - r.held_since) * len(r.alloc.gpus)
        for g in r.alloc.gpus:
            del self.gpu_owner[g]
            self.free[g.split(":", 1)[0]].add(g)
        self.free_total += len(r.alloc.gpus)
        for n, c in r.cpu.items():
            self.cpu_used[n] -= c
            self.mem_used[n] -= r.mem.get(n, 0.0)
        for n in r.nodes:
            self.node_jobs[n].discard(j)
        for s in r.switches:
            self.switch_jobs[s].discard(j)
        if self._interfere:
            for i in self._neighbours(j, r.nodes):
                self._refactor(i, t)
