"""The candidate planner as first written (rl.candidates before its rewrite for speed), kept as the
reference that tests/test_rl_planner.py holds the rewrite to: same candidates on random states. The
shape enumeration and the interference met (``shapes_for``, ``met_now``) were not rewritten and are shared; what the law covers is the
counting of free GPUs per type, the placements and their prices."""
from __future__ import annotations

import math
from typing import Iterable, Mapping, Sequence

from jctlab.engine import Engine
from jctlab.model import GPU, Allocation, Instance, Job
from jctlab.resources import cpus_fit, gpu_room, node_demand
from jctlab.speed import SpeedError, spans_sockets, switch_factor
from rl.candidates import RULES, Candidate, Shape, met_now, shapes_for

class ReferencePlanner:
    """Candidates for the jobs waiting at one decision point (one per decision: it caches placements
    by (size, type, class) and prices by (job, GPUs) across jobs)."""

    def __init__(self, inst: Instance, engine: Engine, max_shapes: int = 8, waiting: Iterable[int] = ()):
        self.inst = inst
        self.waiting_classes = sorted({inst.jobs[j].job_class for j in waiting} - {None})
        self.cl = inst.cluster
        self.eng = engine
        self.max_shapes = max_shapes
        # free GPUs whose node still has CPUs for them at the fair share
        self.free: dict[str, list[GPU]] = {}
        for nd in self.cl.nodes:
            ids = sorted(engine.free[nd.name], key=lambda g: self.cl.gpu[g].index)
            room = gpu_room(self.cl, nd.name, engine.cpu_used)
            k = int(min(len(ids), room))
            if k > 0:
                self.free[nd.name] = [self.cl.gpu[g] for g in ids[:k]]
        self.free_count = sum(len(v) for v in self.free.values())
        self._place_cache: dict[tuple, tuple[GPU, ...] | None] = {}
        self._pools: dict[tuple[str, ...], dict[str, list[GPU]]] = {}
        self._node_pressure = self._pressure()

    # ------------------------------------------------------------------ shapes (level 1)
    def shapes(self, j: int) -> list[Shape]:
        """Up to ``max_shapes`` shapes for job j that fit the free GPUs now, fastest first per size."""
        job = self.inst.jobs[j]
        by_type: dict[str, int] = {}
        for gl in self.free.values():
            for g in gl:
                if job.can_use(g.type):
                    by_type[g.type] = by_type.get(g.type, 0) + 1
        return shapes_for(job, by_type, self.max_shapes)   # the enumeration itself was not rewritten

    # ------------------------------------------------------------------ placements (level 2)
    def candidates(self, j: int) -> list[list[Candidate | None]]:
        """For each shape of job j, one candidate per placement rule (None: no fit, or a duplicate)."""
        out = []
        for shape in self.shapes(j):
            row: list[Candidate | None] = []
            seen: set[tuple[str, ...]] = set()
            for r in range(len(RULES)):
                c = self._candidate(j, shape, r)
                if c is not None and c.alloc.gpus in seen:
                    c = None
                if c is not None:
                    seen.add(c.alloc.gpus)
                row.append(c)
            out.append(row)
        return out

    def _candidate(self, j: int, shape: Shape, rule: int) -> Candidate | None:
        job = self.inst.jobs[j]
        key = (shape.n, shape.types, job.job_class, rule) if len(shape.types) == 1 else None
        if key is not None and key in self._place_cache:
            gpus = self._place_cache[key]
        else:
            gpus = self._place(job, shape, rule)
            if key is not None:
                self._place_cache[key] = gpus
        if gpus is None:
            return None
        ids = tuple(g.id for g in gpus)
        ps_nodes = self._ps_nodes(job, gpus, shape.ps)
        if ps_nodes is None:
            return None
        alloc = Allocation(ids, ps_nodes)
        # the free GPUs already have their fair CPU share (and memory) free; parameter servers need more
        if ps_nodes and not cpus_fit(self.cl, self.eng.cpu_used, node_demand(job, alloc, self.cl)[0]):
            return None
        try:
            base = self.eng.base_time(j, alloc)
        except SpeedError:
            return None
        coloc, share = met_now(self.inst, self.eng, job, alloc)
        nodes = {g.node for g in gpus} | set(ps_nodes)
        it = base * (1.0 + coloc) * switch_factor(self.cl, share)
        return Candidate(j, shape, rule, alloc, it, base, len(nodes), spans_sockets(gpus), share, coloc)

    def _ps_nodes(self, job: Job, gpus: Sequence[GPU], p: int) -> tuple[str, ...] | None:
        """``p`` parameter servers: on the job's GPU nodes with CPU room (most GPUs first, round robin),
        then on other nodes; None when the CPUs do not hold them. ``()`` for a job without PS."""
        if job.ps is None:
            return ()
        cl = self.cl
        cpu = dict(self.eng.cpu_used)
        for g in gpus:
            cpu[g.node] = cpu.get(g.node, 0.0) + cl.node[g.node].fair_cpus
        on: dict[str, int] = {}
        for g in gpus:
            on[g.node] = on.get(g.node, 0) + 1
        order = sorted(on, key=lambda v: -on[v]) + [nd.name for nd in cl.nodes if nd.name not in on]
        out: list[str] = []
        while len(out) < p:
            placed = False
            for v in order:
                if len(out) < p and cpus_fit(cl, cpu, {v: job.ps.ps_cpus}):
                    cpu[v] = cpu.get(v, 0.0) + job.ps.ps_cpus
                    out.append(v)
                    placed = True
            if not placed:
                return None
        return tuple(sorted(out))

    def _pressure(self) -> dict[str, float]:
        """Per node: running jobs there (interference the next job may meet or cause)."""
        return {v: float(len(js)) for v, js in self.eng.node_jobs.items()}

    def _pool(self, types: tuple[str, ...]) -> dict[str, list[GPU]]:
        pool = self._pools.get(types)
        if pool is None:
            pool = {v: [g for g in gl if g.type in types] for v, gl in self.free.items()}
            pool = self._pools[types] = {v: gl for v, gl in pool.items() if gl}
        return pool

    def _place(self, job: Job, shape: Shape, rule: int) -> tuple[GPU, ...] | None:
        n, cls = shape.n, job.job_class
        pool = self._pool(shape.types)
        if sum(len(gl) for gl in pool.values()) < n:
            return None
        others = [c for c in self.waiting_classes if c != cls] if RULES[rule] == "match" else []
        value: dict[str, float] = {}
        for gl in pool.values():
            for g in gl:
                f = g.factor(cls)
                x = job.samples_per_s.get(g.type, 0.0) / f if f > 0 else math.inf
                if others:        # comparative advantage: the speed over the other classes' mean speed
                    x = x / (sum(1.0 / max(g.factor(c), 1e-12) for c in others) / len(others))
                value[g.id] = x
        speed = lambda g: value[g.id]  # noqa: E731
        if RULES[rule] == "fast":
            size = {v: len(gl) for v, gl in pool.items()}
            allg = sorted((g for gl in pool.values() for g in gl), key=lambda g: (-speed(g), -size[g.node], g.node, g.index))
            return _in_gpu_order(allg[:n])
        quiet = RULES[rule] == "quiet"
        hosts = [v for v, gl in pool.items() if len(gl) >= n]
        if hosts:
            if RULES[rule] == "match":
                key = lambda v: (-_best_sum(pool[v], n, speed), len(pool[v]), v)  # noqa: E731
            elif quiet:
                key = lambda v: (self._node_pressure.get(v, 0.0), len(pool[v]), v)  # noqa: E731
            else:
                key = lambda v: (len(pool[v]), -_best_sum(pool[v], n, speed), v)  # noqa: E731
            v = min(hosts, key=key)
            return _in_gpu_order(_within_node(pool[v], n, speed, quiet, self.eng.switch_jobs))
        # spread: nodes with the most eligible GPUs first (fewest nodes), quiet ones first for ``quiet``
        order = sorted(pool, key=lambda v: ((self._node_pressure.get(v, 0.0) if quiet else 0.0), -len(pool[v]), v))
        out: list[GPU] = []
        for v in order:
            take = min(n - len(out), len(pool[v]))
            out.extend(_within_node(pool[v], take, speed, quiet, self.eng.switch_jobs))
            if len(out) == n:
                break
        return _in_gpu_order(out)


def _best_sum(gl: Sequence[GPU], n: int, speed) -> float:
    return sum(sorted((speed(g) for g in gl), reverse=True)[:n])


def _within_node(gl: Sequence[GPU], n: int, speed, quiet: bool,
                 switch_jobs: Mapping[tuple[str, int], set[int]]) -> list[GPU]:
    """n GPUs of one node: one socket when one holds n (the one with the fewest eligible GPUs: best fit),
    else the sockets with the most eligible GPUs; the fastest first within, and for ``quiet`` the GPUs
    under switches with no running job first."""
    def busy(g: GPU) -> int:
        return len(switch_jobs.get((g.node, g.switch), ())) if g.switch is not None else 0

    def rank(g: GPU):
        return ((busy(g) if quiet else 0), -speed(g), g.index)

    sockets: dict[int | None, list[GPU]] = {}
    for g in gl:
        sockets.setdefault(g.socket, []).append(g)
    fits = [s for s, l in sockets.items() if len(l) >= n]
    if fits:
        s = min(fits, key=lambda s: (len(sockets[s]), -1 if s is None else s))
        return sorted(sockets[s], key=rank)[:n]
    out: list[GPU] = []
    for s in sorted(sockets, key=lambda s: (-len(sockets[s]), -1 if s is None else s)):
        out.extend(sorted(sockets[s], key=rank)[: n - len(out)])
        if len(out) == n:
            break
    return out


def _in_gpu_order(gpus: Iterable[GPU]) -> tuple[GPU, ...]:
    return tuple(sorted(gpus, key=lambda g: (g.node, g.index)))
