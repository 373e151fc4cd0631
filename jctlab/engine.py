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
from .model import Allocation, Instance, Job
from .resources import count_per_node, demand_on, exact_fair_shares, fair_shares
from .speed import BaseTimes, SpeedError, alloc_switches, switch_factor

EPS = 1e-9
_NO_SWITCHES: frozenset[tuple[str, int]] = frozenset()


def time_tol(t: float) -> float:
    """Tolerance for comparing two event times that were computed in different ways."""
    return EPS * max(1.0, abs(t))


def earliest_start(job: Job) -> float:
    """The earliest start a segment of ``job`` may have: its arrival, within the tolerance."""
    return job.arrival - time_tol(job.arrival)


def uses_every_type(job: Job, types: tuple[str, ...]) -> bool:
    """Whether ``job`` may run on each of the cluster's GPU types (then no start needs a per-GPU type check)."""
    return all(job.can_use(t) for t in types)


@dataclass(slots=True)
class _Run:
    alloc: Allocation
    nodes: frozenset[str]
    switches: frozenset[tuple[str, int]]
    base: float          # iteration time without interference
    factor: float        # interference multiplier now in force
    restart_until: float
    last: float          # progress integrated up to here
    held_since: float
    # (node, CPUs, GB) held on every node it touches, given back on release; None while nodes are not accounted
    held: list[tuple[str, float, float]] | None
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
        # node -> its free GPUs, and GPU -> its node's set there: kept from the first read of ``free`` on (a policy
        # that keeps its own index never reads it), so starts and stops update them only then
        self._free: dict[str, set[str]] | None = None
        self._free_of: dict[str, set[str]] = {}
        self.free_total = len(self.cluster.gpus)
        self._cpu_used = {nd.name: 0.0 for nd in self.cluster.nodes}
        self._mem_used = {nd.name: 0.0 for nd in self.cluster.nodes}
        self._node_jobs: dict[str, set[int]] = {nd.name: set() for nd in self.cluster.nodes}
        self.switch_jobs: dict[tuple[str, int], set[int]] = {}
        self._heap: list[tuple[float, int, int]] = []
        self._stamp = 0  # versions of completion predictions, unique across runs
        self._interfere = self.cluster.has_interference or self.cluster.has_switch_interference
        self._base = BaseTimes(inst.jobs, self.cluster)
        # looked up once: what every start checks per GPU and per node
        cl = self.cluster
        self._gpu_node = {g.id: g.node for g in cl.gpus}
        self._gpu_type = {g.id: g.type for g in cl.gpus}
        types = cl.gpu_types
        self._any_type = [uses_every_type(job, types) for job in inst.jobs]
        self._switched = any(g.switch is not None for g in cl.gpus)
        self._fair = fair_shares(cl)
        self._fair_held = {n: [(n, c, m) for c, m in rows] for n, rows in self._fair.items()}   # as _Run.held has them
        # while every start is at the fair share without servers, on nodes whose shares add exactly, a node's
        # CPUs and GB in use are its share times its busy GPUs: no capacity check can fail (closed_form's
        # argument), so starts skip it; the first other start turns this off for good
        self._fair_only = all(map(exact_fair_shares, cl.nodes))
        # and then nothing needs the nodes' CPUs, GB and jobs but a reader (interference reads the jobs): they are
        # accounted from the first read on (see _account_nodes), not at every start and stop
        self._accounted = self._interfere or not self._fair_only
        self._earliest = [earliest_start(job) for job in inst.jobs]
        self._iterations = [job.iterations for job in inst.jobs]
        self._finish_at = [job.iterations * (1 - EPS) for job in inst.jobs]   # a stop there completes the job
        self._static = inst.problem == "static"
        self._restart_s = cl.restart_s
        self._cap = {nd.name: (nd.cpus + EPS * max(1.0, nd.cpus), nd.mem_gb + EPS * max(1.0, nd.mem_gb))
                     for nd in cl.nodes}
        self.now = 0.0

    @property
    def free(self) -> dict[str, set[str]]:
        """node -> its free GPUs (every node, in cluster order; each set in no particular order)."""
        if self._free is None:
            owners = self.gpu_owner
            self._free = {nd.name: {g.id for g in nd.gpus if g.id not in owners} for nd in self.cluster.nodes}
            self._free_of = {g.id: self._free[g.node] for g in self.cluster.gpus}
        return self._free

    @property
    def base_times(self) -> BaseTimes:
        """The speed model's memo of base iteration times, as the starts so far filled it (pure: a replay may use it)."""
        return self._base

    @property
    def cpu_used(self) -> dict[str, float]:
        """node -> CPUs held there now (SPEC §4)."""
        self._account_nodes()
        return self._cpu_used

    @property
    def mem_used(self) -> dict[str, float]:
        """node -> GB of memory held there now."""
        self._account_nodes()
        return self._mem_used

    @property
    def node_jobs(self) -> dict[str, set[int]]:
        """node -> the running jobs holding GPUs or a parameter server there (each set in no particular order)."""
        self._account_nodes()
        return self._node_jobs

    def _account_nodes(self) -> None:
        """Start accounting the nodes' CPUs, GB and jobs, from the running jobs, if it is not on yet. It is off
        only while every start has been at the fair share without servers on nodes whose shares add exactly:
        then each amount is its share times the node's busy GPUs whatever the order of the starts and stops,
        so the sums built here equal those the starts and stops would have kept, bit for bit."""
        if self._accounted:
            return
        self._accounted = True
        cpu_used, mem_used, node_jobs, gpu_node, fair_held = (
            self._cpu_used, self._mem_used, self._node_jobs, self._gpu_node, self._fair_held)
        for j, r in self.running.items():
            per = count_per_node(map(gpu_node.__getitem__, r.alloc.gpus))
            r.held = [fair_held[n][k] for n, k in per.items()]
            for n, c, m in r.held:
                cpu_used[n] += c
                mem_used[n] += m
                node_jobs[n].add(j)

    def shared(self) -> tuple:
        """The engine's constants and memos: pure, so a copy of the engine (a forked episode) may share them."""
        return (self._base, self._gpu_node, self._gpu_type, self._any_type, self._cap, self._fair, self._fair_held,
                self._earliest, self._iterations, self._finish_at)

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
        """Job j's per-iteration time on ``alloc`` without interference (memoised speed model)."""
        nodes = {self._gpu_node[g] for g in alloc.gpus}
        nodes.update(alloc.ps_nodes)
        return self._base.get(j, alloc, len(nodes))

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
        job = self.inst.jobs[j]
        if self.completion[j] is not None:
            raise InvalidSchedule(f"job {job.name} starts at {t:g} but completed at {self.completion[j]:g}")
        if j in self.running:
            raise InvalidSchedule(f"job {job.name} starts at {t:g} while it is already running")
        if t < self._earliest[j]:
            raise InvalidSchedule(f"job {job.name} starts at {t:g} before its arrival {job.arrival:g}")
        if self._static and t != 0:
            raise InvalidSchedule(f"job {job.name} starts at {t:g}; static schedules start every job at 0")
        gpus = alloc.gpus
        ng = len(gpus)
        if ng > 1 and len(set(gpus)) != ng:
            raise InvalidSchedule(f"job {job.name}: a GPU appears twice in its segment")
        if ng not in job.sizes:
            raise InvalidSchedule(f"job {job.name} gets {ng} GPUs; allowed sizes are {list(job.sizes)}")
        gpu_node, owners = self._gpu_node, self.gpu_owner
        if not (self._any_type[j] and owners.keys().isdisjoint(gpus)):
            self._check_gpus(j, gpus, t)      # raises, naming the first GPU at fault
        ps_nodes = alloc.ps_nodes
        # the fair share (every start of a queue policy), and the nodes not accounted: only their number is needed
        fair = not ps_nodes and alloc.cpus_per_gpu is None and alloc.mem_gb_per_gpu is None
        per: dict[str, int] = {}          # node -> GPUs of the allocation there, in first-named order
        try:
            if fair and not self._accounted:
                nodes = frozenset(map(gpu_node.__getitem__, gpus))
            else:
                per = count_per_node(map(gpu_node.__getitem__, gpus))
        except KeyError:
            self._check_gpus(j, gpus, t)      # a GPU that does not exist: raises, naming the first at fault
            raise
        if ps_nodes:
            for n in ps_nodes:
                if n not in self.cluster.node:
                    raise InvalidSchedule(f"job {job.name}: PS node {n} does not exist")
            if job.ps is None:
                raise InvalidSchedule(f"job {job.name} has parameter servers but no `ps` configuration")
            nodes = frozenset(per) | frozenset(ps_nodes)
        elif per:
            nodes = frozenset(per)
        try:
            base = self._base.get(j, alloc, len(nodes))
        except SpeedError as e:
            raise InvalidSchedule(str(e)) from None
        if fair:
            if self._accounted:           # demand_on's table values, looked up here
                fair_held = self._fair_held
                held = [fair_held[n][k] for n, k in per.items()]
            else:
                held = None
        else:
            self._account_nodes()         # before the first start that may not be exact
            self._fair_only = False
            cpu, mem = demand_on(job, alloc, per, self.cluster, self._fair)
            held = [(n, c, mem.get(n, 0.0)) for n, c in cpu.items()]
        cpu_used, mem_used, cap = self._cpu_used, self._mem_used, self._cap
        if not self._fair_only:
            for n, c, m in held:
                cap_cpu, cap_mem = cap[n]
                if cpu_used[n] + c > cap_cpu:
                    raise InvalidSchedule(f"node {n} needs {cpu_used[n] + c:g} CPUs at time {t:g} "
                                          f"(capacity {self.cluster.node[n].cpus:g})")
                if mem_used[n] + m > cap_mem:
                    raise InvalidSchedule(f"node {n} needs {mem_used[n] + m:g} GB at time {t:g} "
                                          f"(capacity {self.cluster.node[n].mem_gb:g})")
        # commit
        if t > self.now:
            self.now = t
        if held is not None:
            node_jobs = self._node_jobs
            for n, c, m in held:       # every node the job touches (GPUs' and servers')
                cpu_used[n] += c
                mem_used[n] += m
                node_jobs[n].add(j)
        for g in gpus:
            owners[g] = j
        if self._free is not None:
            free_of = self._free_of
            for g in gpus:
                free_of[g].discard(g)
        self.free_total -= ng
        restart = self._restart_s if self.segments_started[j] > 0 else 0.0
        self.segments_started[j] += 1
        if self.first_start[j] is None:
            self.first_start[j] = t
        switches = alloc_switches(alloc, self.cluster) if self._switched else _NO_SWITCHES
        run = _Run(alloc, nodes, switches, base, 1.0, t + restart, t, t, held)
        self.running[j] = run
        for s in switches:
            self.switch_jobs.setdefault(s, set()).add(j)
        if self._interfere:
            run.factor = self._factor(j, run)
            for i in self._neighbours(j, nodes):   # sharing a switch implies sharing its node
                self._refactor(i, t)
        self._predict(j, run)

    def _check_gpus(self, j: int, gpus: tuple[str, ...], t: float) -> None:
        """Each GPU of a start exists, has a type job j may use and is free; else InvalidSchedule."""
        job = self.inst.jobs[j]
        for g in gpus:
            if g not in self._gpu_node:
                raise InvalidSchedule(f"job {job.name}: GPU {g} does not exist")
            if not job.can_use(self._gpu_type[g]):
                raise InvalidSchedule(f"job {job.name} cannot run on GPU {g} of type {self._gpu_type[g]}")
            owner = self.gpu_owner.get(g)
            if owner is not None:
                raise InvalidSchedule(
                    f"GPU {g} hosts job {self.inst.jobs[owner].name} and job {job.name} at time {t:g}")

    def stop(self, j: int, t: float) -> None:
        """Preempt job j at time t (it keeps its progress)."""
        r = self.running.get(j)
        if r is None:
            raise InvalidSchedule(f"job {self.inst.jobs[j].name} is stopped at {t:g} but is not running")
        self.progress[j] += self._gain(r, t)
        if self.progress[j] >= self._finish_at[j]:
            # finishing exactly at the stop: count it as a completion
            self._finish(j, t)
            return
        self._release(j, r, t)

    # ------------------------------------------------------------------ internals
    def _gain(self, r: _Run, t: float) -> float:
        begin = max(r.last, r.restart_until)
        if t <= begin:
            return 0.0
        return (t - begin) / (r.base * r.factor)

    def _predict(self, j: int, r: _Run) -> None:
        """Push running job j's (run ``r``'s) completion as it stands now; earlier pushes of it become stale."""
        self._stamp += 1
        r.version = self._stamp
        left = max(0.0, self._iterations[j] - self.progress[j])
        tc = max(r.last, r.restart_until) + left * r.base * r.factor
        heap = self._heap
        heapq.heappush(heap, (tc, r.version, j))
        if len(heap) > 4 * len(self.running) + 256:
            self._compact()

    def _compact(self) -> None:
        """Drop the heap's stale predictions (of stopped jobs, or superseded by a re-prediction), in place.
        Every running job has exactly one live entry, and entries are unique (versions are), so the heap
        pops the same live entries in the same order; this only keeps it, and each push and pop, small
        when non-sticky rounds stop and restart jobs by the hundred thousand."""
        running = self.running
        live = [e for e in self._heap if (r := running.get(e[2])) is not None and r.version == e[1]]
        self._heap[:] = live
        heapq.heapify(self._heap)

    def _neighbours(self, j: int, nodes: frozenset[str]) -> set[int]:
        out: set[int] = set()
        for n in nodes:
            out |= self._node_jobs[n]
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
        self._predict(i, r)

    def _finish(self, j: int, t: float) -> None:
        r = self.running[j]
        self.progress[j] = self.inst.jobs[j].iterations
        self.completion[j] = t
        self._release(j, r, t)

    def _release(self, j: int, r: _Run, t: float) -> None:
        if t > self.now:
            self.now = t
        del self.running[j]
        gpus = r.alloc.gpus
        self.gpu_seconds[j] += max(0.0, t - r.held_since) * len(gpus)
        owners = self.gpu_owner
        for g in gpus:
            del owners[g]
        if self._free is not None:
            free_of = self._free_of
            for g in gpus:
                free_of[g].add(g)
        self.free_total += len(gpus)
        if r.held is not None:
            cpu_used, mem_used, node_jobs = self._cpu_used, self._mem_used, self._node_jobs
            for n, c, m in r.held:     # every node the job touches
                cpu_used[n] -= c
                mem_used[n] -= m
                node_jobs[n].discard(j)
        for s in r.switches:
            self.switch_jobs[s].discard(j)
        if self._interfere:
            for i in self._neighbours(j, r.nodes):
                self._refactor(i, t)
