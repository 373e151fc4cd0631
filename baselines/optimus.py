"""Optimus (Peng et al., EuroSys'18): marginal-gain allocation of workers and parameter servers.

Every job starts with its smallest allowed number of workers (GPUs) and, for a parameter-server job
(SPEC ``ps``), one PS; then, repeatedly, the job whose *remaining time* falls most per unit of the
dominant resource share of the task added gets one more worker (its next allowed size) or one more
PS (up to ``max_ps``), until no addition fits or helps. Remaining time = remaining iterations x the
iteration time that :mod:`jctlab.speed` gives for the concrete placement. Placement (Optimus §5.2):
the fewest nodes that hold the job's tasks, workers and PS spread evenly over them.

- ``preemptive`` instances: every ``round_s`` (and at arrivals/completions when GPUs are idle) the
  allocation of *all* active jobs is recomputed; a job whose (workers, PS) count is unchanged keeps
  its placement, the others are preempted and restarted (paying ``restart_s``).
- ``offline`` instances: jobs are allocated once, when they start; the greedy only grows the jobs
  being started, on the resources free at that moment.

Resources: a worker takes one GPU and its node's fair CPU/memory share (``cpus_per_gpu = null``);
a PS takes ``ps_cpus`` CPUs on its node. A worker's dominant share is 1/#GPUs; a PS's is
ps_cpus/#CPUs. Jobs without ``ps`` are all-reduce jobs: they only get workers. Entry point:
``baselines.optimus:factory``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jctlab.argtypes import RoundS
from jctlab.errors import InputError
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import Action, Preempt, Simulator, Start
from jctlab.speed import SpeedError

EPS = 1e-9


@dataclass
class _Free:
    """Tentative free resources: GPU ids per node (in index order) and CPUs per node."""

    gpus: dict[str, list[str]]
    cpus: dict[str, float]
    mem: dict[str, float]

    def copy(self) -> "_Free":
        return _Free({k: list(v) for k, v in self.gpus.items()}, dict(self.cpus), dict(self.mem))


class Optimus:
    def __init__(self, inst: Instance, seed: int = 0, round_s: float = 600.0):
        if not round_s > 0:
            raise InputError("options", "round_s", "must be > 0")
        self.inst = inst
        self.cl = inst.cluster
        self.preemptive = inst.problem == "preemptive"
        self.round_s = float(round_s) if self.preemptive else None
        self.total_gpus = len(self.cl.gpus)
        self.total_cpus = sum(n.cpus for n in self.cl.nodes) or 1.0
        self.node_order = [n.name for n in self.cl.nodes]
        # looked up once: place() runs for every job at every greedy step of every round
        self._rank = {name: k for k, name in enumerate(self.node_order)}
        self._fair = {n.name: (n.fair_cpus, n.fair_mem_gb, EPS * max(1.0, n.fair_cpus), EPS * max(1.0, n.fair_mem_gb))
                      for n in self.cl.nodes}
        self._node_type = {n.name: n.gpus[0].type if n.gpus else None for n in self.cl.nodes}
        self._gpu_type = {g.id: g.type for g in self.cl.gpus}
        self._gpu_node = {g.id: g.node for g in self.cl.gpus}
        self._gkey = {g.id: _gidx(g.id) for g in self.cl.gpus}
        self._neg_speed: dict[str, dict[str, float]] = {}     # job -> node -> -samples/s there
        types = self.cl.gpu_types
        self._any_type = {job.name: all(job.can_use(t) for t in types) for job in inst.jobs}
        for j, job in enumerate(inst.jobs):
            if job.ps is not None and job.ps.ps_cpus > max(n.cpus for n in self.cl.nodes) + EPS:
                raise InputError(inst.name, f"jobs[{j}].ps.ps_cpus", "no node has that many CPUs")

    # ------------------------------------------------------------------ resources
    def _free_now(self, sim: Simulator, exclude: set[int] = frozenset()) -> _Free:
        """Free resources now, counting the jobs in ``exclude`` as gone."""
        eng = sim.engine
        gkey = self._gkey.__getitem__
        gpus = {n: sorted(eng.free[n], key=gkey) for n in self.node_order}
        cpus = {n.name: n.cpus - eng.cpu_used[n.name] for n in self.cl.nodes}
        mem = {n.name: n.mem_gb - eng.mem_used[n.name] for n in self.cl.nodes}
        for j in exclude:
            run = sim.running[j]
            for n, c, m in self._demand(self.inst.jobs[j], run.alloc):
                cpus[n] += c
                mem[n] += m
            for g in run.alloc.gpus:
                gpus[self._gpu_node[g]].append(g)
        for n in gpus:
            gpus[n].sort(key=gkey)
        return _Free(gpus, cpus, mem)

    def _demand(self, job: Job, alloc: Allocation) -> list[tuple[str, float, float]]:
        out: dict[str, list[float]] = {}
        gpu_node, fair = self._gpu_node, self._fair
        for g in alloc.gpus:
            name = gpu_node[g]
            fc, fm, _, _ = fair[name]
            d = out.setdefault(name, [0.0, 0.0])
            d[0] += fc
            d[1] += fm
        if job.ps is not None:
            for n in alloc.ps_nodes:
                out.setdefault(n, [0.0, 0.0])[0] += job.ps.ps_cpus
        return [(n, c, m) for n, (c, m) in out.items()]

    def _take(self, free: _Free, job: Job, alloc: Allocation, sign: float = -1.0) -> None:
        for n, c, m in self._demand(job, alloc):
            free.cpus[n] += sign * c
            free.mem[n] += sign * m
        gpu_node = self._gpu_node
        if sign < 0:
            for g in alloc.gpus:
                free.gpus[gpu_node[g]].remove(g)
        else:
            for g in alloc.gpus:
                free.gpus[gpu_node[g]].append(g)
            for n in {gpu_node[g] for g in alloc.gpus}:
                free.gpus[n].sort(key=self._gkey.__getitem__)

    def place(self, job: Job, n: int, p: int, free: _Free) -> Allocation | None:
        """Fewest nodes holding n workers (+ p PS), workers and PS spread evenly over them."""
        every, gtype, fair = self._any_type[job.name], self._gpu_type, self._fair
        usable = {}
        for name in self.node_order:
            gl = free.gpus[name]
            if not gl:
                continue
            ok = gl if every else [g for g in gl if job.can_use(gtype[g])]
            # a worker needs the node's fair CPU/memory share: how many shares fit, at the engine's tolerance
            fc, fm, tc, tm = fair[name]
            cap = min(len(ok), (1 << 30) if fc <= 0 else math.floor((free.cpus[name] + tc) / fc),
                      (1 << 30) if fm <= 0 else math.floor((free.mem[name] + tm) / fm))
            if cap > 0:
                usable[name] = ok[:cap]
        # most free slots first, faster GPUs for this job first
        neg = self._neg_speed.get(job.name)
        if neg is None:
            sps = job.samples_per_s
            neg = self._neg_speed[job.name] = {nm: -(sps.get(t, 0.0) if t is not None else 0.0)
                                               for nm, t in self._node_type.items()}
        rank = self._rank
        order = sorted(usable, key=lambda nm: (-len(usable[nm]), neg[nm], rank[nm]))
        slots = 0
        for k, nm in enumerate(order, 1):
            slots += len(usable[nm])
            if slots < n:
                continue
            nodes = order[:k]
            gpus = _spread([usable[x] for x in nodes], n)
            if gpus is None:
                continue
            ps_nodes: list[str] = []
            if p:
                ps_nodes = self._place_ps(job, p, nodes, gpus, free)
                if ps_nodes is None:
                    continue
            return Allocation(tuple(gpus), tuple(ps_nodes))
        return None

    def _place_ps(self, job: Job, p: int, nodes: list[str], gpus: list[str], free: _Free) -> list[str] | None:
        cl = self.cl
        left = dict(free.cpus)
        for g in gpus:
            left[g.split(":")[0]] -= cl.node[g.split(":")[0]].fair_cpus
        cands = nodes + [nm for nm in self.node_order if nm not in nodes]
        out: list[str] = []
        # round-robin over the job's nodes first (spread evenly), other nodes if needed
        for _ in range(p):
            pick = None
            for nm in sorted(cands, key=lambda x: (out.count(x), cands.index(x))):
                if left[nm] + EPS >= job.ps.ps_cpus:
                    pick = nm
                    break
            if pick is None:
                return None
            out.append(pick)
            left[pick] -= job.ps.ps_cpus
        return out

    # ------------------------------------------------------------------ marginal gain
    def _remaining_time(self, j: int, alloc: Allocation, sim: Simulator) -> float:
        try:   # the engine's memo of base_iteration_time (the same float)
            return sim.engine.remaining(j) * sim.engine.base_time(j, alloc)
        except SpeedError:
            return math.inf

    def allocate(self, jobs: list[int], sim: Simulator, free: _Free, max_steps: int | None = None) -> dict[int, Allocation]:
        """Optimus' greedy over ``jobs`` (in priority order) on ``free``; returns their allocations.
        ``max_steps`` stops after that many greedy additions (for inspection)."""
        inst = self.inst
        alloc: dict[int, Allocation] = {}
        counts: dict[int, tuple[int, int]] = {}
        for j in jobs:  # every job first gets its minimum (one PS for PS jobs)
            job = inst.jobs[j]
            n, p = job.sizes[0], (1 if job.ps is not None else 0)
            a = self.place(job, n, p, free)
            if a is None:
                continue
            self._take(free, job, a)
            alloc[j], counts[j] = a, (n, p)
        share_w = 1.0 / self.total_gpus
        steps = 0
        while max_steps is None or steps < max_steps:
            steps += 1
            best = None
            for j in alloc:
                job = inst.jobs[j]
                n, p = counts[j]
                cur = self._remaining_time(j, alloc[j], sim)
                moves = []
                bigger = [s for s in job.sizes if s > n]
                if bigger:
                    moves.append((bigger[0], p, (bigger[0] - n) * share_w))
                if job.ps is not None and p < job.ps.max_ps:
                    moves.append((n, p + 1, job.ps.ps_cpus / self.total_cpus))
                if not moves:
                    continue
                self._take(free, job, alloc[j], +1.0)
                for n2, p2, share in moves:
                    a2 = self.place(job, n2, p2, free)
                    if a2 is None:
                        continue
                    gain = (cur - self._remaining_time(j, a2, sim)) / max(share, EPS)
                    if gain > EPS and (best is None or gain > best[0]):
                        best = (gain, j, a2, (n2, p2))
                self._take(free, job, alloc[j])
            if best is None:
                return alloc
            _, j, a2, c2 = best
            self._take(free, inst.jobs[j], alloc[j], +1.0)
            self._take(free, inst.jobs[j], a2)
            alloc[j], counts[j] = a2, c2
        return alloc

    # ------------------------------------------------------------------ policy entry
    def decide(self, sim: Simulator) -> list[Action]:
        inst = self.inst
        order = lambda j: (inst.jobs[j].arrival, j)  # noqa: E731
        if not self.preemptive:
            if not sim.waiting or sim.engine.free_total == 0:
                return []
            free = self._free_now(sim)
            jobs = sorted(sim.waiting, key=order)
            return [Start(j, a) for j, a in self.allocate(jobs, sim, free).items()]
        if "round" not in sim.reasons and not (sim.waiting and sim.engine.free_total > 0):
            return []
        active = sorted(list(sim.running) + list(sim.waiting), key=order)
        free = self._free_now(sim, exclude=set(sim.running))
        target = self.allocate(active, sim, free.copy())
        # keep jobs whose (workers, PS) count is unchanged on their GPUs; place the others afresh
        free = self._free_now(sim, exclude=set(sim.running))
        final: dict[int, Allocation] = {}
        for j, a in target.items():
            run = sim.running.get(j)
            if run is not None and (len(run.alloc.gpus), len(run.alloc.ps_nodes)) == (len(a.gpus), len(a.ps_nodes)):
                final[j] = run.alloc
                self._take(free, inst.jobs[j], run.alloc)
        for j, a in target.items():
            if j in final:
                continue
            job = inst.jobs[j]
            n, p = len(a.gpus), len(a.ps_nodes)
            b = self.place(job, n, p, free)
            while b is None and n > job.sizes[0]:
                n = max(s for s in job.sizes if s < n)
                b = self.place(job, n, p, free)
            if b is not None:
                final[j] = b
                self._take(free, job, b)
        actions: list[Action] = [Preempt(j) for j, run in sim.running.items() if final.get(j) != run.alloc]
        actions += [Start(j, a) for j, a in final.items() if sim.running.get(j) is None or sim.running[j].alloc != a]
        return actions


def _gidx(g: str) -> tuple[str, int]:
    n, i = g.rsplit(":", 1)
    return n, int(i)


def _spread(lists: list[list[str]], n: int) -> list[str] | None:
    """n GPUs taken round-robin over the nodes' lists (an even spread)."""
    out: list[str] = []
    idx = [0] * len(lists)
    while len(out) < n:
        moved = False
        for k, l in enumerate(lists):
            if len(out) == n:
                break
            if idx[k] < len(l):
                out.append(l[idx[k]])
                idx[k] += 1
                moved = True
        if not moved:
            return None
    return out


def factory(inst: Instance, seed: int = 0, round_s: RoundS = 600.0) -> Optimus:
    """Optimus (preemptive: re-allocates every ``round_s``; offline: allocates on start only)."""
    return Optimus(inst, seed=seed, round_s=round_s)
