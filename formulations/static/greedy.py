"""Incumbents of the static models: a greedy placement with 1-opt, and the repair of relaxed answers.

* :func:`static_greedy` — several greedy passes (job orders × a GPU-count penalty λ), each giving every job,
  in turn, the fitting allocation that minimises ``duration × (1 + λ·n/n̄)`` while keeping enough GPUs for
  the jobs still to place, then 1-opt local search (re-place one job at a time on its best fitting
  allocation). Deterministic given ``seed``.
* :func:`repair` — concrete allocations for a model answer that picked relaxed families.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from jctlab.model import Allocation, Instance
from jctlab.resources import node_demand
from jctlab.speed import SpeedError, duration, ps_counts

from ..budget import Budget
from ..gpu_sets import fastest_gpu_sets
from ..schedules import objective_weights
from .candidates import Candidate
from .packing import PackingModel


class Placement:
    """Free GPUs (ids per class and per node) and CPU/memory used per node, for static placement."""

    def __init__(self, inst: Instance, model: PackingModel):
        self.inst = inst
        self.classes = model.cands.classes
        self.free_ids = {cl.index: list(cl.ids) for cl in self.classes}
        self.cls_of = {g: cl.index for cl in self.classes for g in cl.ids}
        self.cpu = {n.name: 0.0 for n in inst.cluster.nodes}
        self.mem = {n.name: 0.0 for n in inst.cluster.nodes}

    def free_count(self) -> int:
        return sum(len(v) for v in self.free_ids.values())

    def alloc_of(self, c: Candidate) -> Allocation | None:
        gpus = []
        for cl, k in c.counts:
            ids = self.free_ids[cl]
            if len(ids) < k:
                return None
            gpus.extend(ids[:k])
        cpg, mpg = (None, None) if c.level is None else c.level
        return Allocation(tuple(gpus), c.ps_nodes, cpg, mpg)

    def usage(self, job_i: int, a: Allocation) -> tuple[dict[str, float], dict[str, float]]:
        return node_demand(self.inst.jobs[job_i], a, self.inst.cluster)

    def fits(self, job_i: int, a: Allocation) -> bool:
        for g in a.gpus:
            if g not in self.free_ids[self.cls_of[g]]:
                return False
        cpu, mem = self.usage(job_i, a)
        for v, x in cpu.items():
            cap = self.inst.cluster.node[v].cpus
            if self.cpu[v] + x > cap * (1 + 1e-9) + 1e-9:
                return False
        for v, x in mem.items():
            cap = self.inst.cluster.node[v].mem_gb
            if self.mem[v] + x > cap * (1 + 1e-9) + 1e-9:
                return False
        return True

    def take(self, job_i: int, a: Allocation) -> None:
        for g in a.gpus:
            self.free_ids[self.cls_of[g]].remove(g)
        cpu, mem = self.usage(job_i, a)
        for v, x in cpu.items():
            self.cpu[v] += x
        for v, x in mem.items():
            self.mem[v] += x

    def release(self, job_i: int, a: Allocation) -> None:
        for g in a.gpus:
            lst = self.free_ids[self.cls_of[g]]
            lst.append(g)
            lst.sort(key=lambda x: int(x.rsplit(":", 1)[1]))
        cpu, mem = self.usage(job_i, a)
        for v, x in cpu.items():
            self.cpu[v] -= x
        for v, x in mem.items():
            self.mem[v] -= x


def _free_options(inst: Instance, j: int, st: Placement) -> list[tuple[float, Allocation]]:
    """Allocations built from free GPUs directly: per node and size the fastest free GPUs, and the
    fastest free GPUs of the cluster; each with its best fitting level and PS placement."""
    job = inst.jobs[j]
    sets = fastest_gpu_sets(inst, job, [g for ids in st.free_ids.values() for g in ids])
    out = []
    for gs in dict.fromkeys(sets):
        nodes = sorted({g.split(":", 1)[0] for g in gs})
        ps_opts: list[tuple[str, ...]] = [()]
        if job.ps is not None:
            ps_opts = []
            for p in ps_counts(job, len(gs)):
                ps_opts.append(tuple((nodes * p)[:p]))
                ps_opts.extend([(v.name,) * p for v in inst.cluster.nodes if v.name not in nodes][:2])
        best = None
        for c, m in job.level_choices:
            for ps in ps_opts:
                a = Allocation(gs, ps, c, m)
                try:
                    d = duration(job, a, inst.cluster)
                except SpeedError:
                    continue
                if st.fits(j, a) and (best is None or d < best[0]):
                    best = (d, a)
        if best is not None:
            out.append(best)
    return out


def _options(inst: Instance, model: PackingModel, j: int, st: Placement) -> list[tuple[float, Allocation]]:
    out = []
    for i in model.groups[j]:
        c = model.cols[i]
        if not c.exact:
            continue
        a = st.alloc_of(c)
        if a is not None and st.fits(j, a):
            out.append((c.duration, a))
    if not out or model.cands.relaxed:
        out.extend(_free_options(inst, j, st))
    return out


def _value(inst: Instance, durs: Sequence[float]) -> float:
    if inst.objective == "makespan":
        return max(durs)
    w = objective_weights(inst)
    return sum(wi * d for wi, d in zip(w, durs))


def static_greedy(inst: Instance, model: PackingModel, seed: int = 0,
                  budget: Budget | None = None) -> list[Allocation] | None:
    """The best allocations found (one per job), or None when no pass placed every job."""
    budget = budget or Budget(None)
    J = len(inst.jobs)
    w = objective_weights(inst)
    best_d = [min((model.cols[i].duration for i in g), default=math.inf) for g in model.groups]
    min_n = [min(job.sizes) for job in inst.jobs]
    nbar = max(1.0, len(inst.cluster.gpus) / J)
    rng = np.random.default_rng(seed)
    orders = [sorted(range(J), key=lambda j: -w[j] * best_d[j]), sorted(range(J), key=lambda j: w[j] * best_d[j]),
              sorted(range(J), key=lambda j: (-max(inst.jobs[j].sizes), j))]
    orders.append(list(rng.permutation(J)))
    best: tuple[float, list[Allocation]] | None = None
    for lam in (0.0, 0.5, 2.0):
        for order in orders:
            if best is not None and budget.left() < 0:
                break
            st = Placement(inst, model)
            allocs: list[Allocation | None] = [None] * J
            durs = [0.0] * J
            ok = True
            for pos, j in enumerate(order):
                if best is not None and budget.left() < 0:
                    ok = False
                    break
                reserve = sum(min_n[k] for k in order[pos + 1:])
                opts = _options(inst, model, j, st)
                choice = None
                for d, a in sorted(opts, key=lambda x: (x[0] * (1 + lam * len(x[1].gpus) / nbar), x[1].gpus)):
                    if st.free_count() - len(a.gpus) >= reserve:
                        choice = (d, a)
                        break
                if choice is None and opts:
                    choice = min(opts, key=lambda x: (len(x[1].gpus), x[0]))
                if choice is None:
                    ok = False
                    break
                st.take(j, choice[1])
                allocs[j], durs[j] = choice[1], choice[0]
            if not ok:
                continue
            allocs2, durs2 = _local_search(inst, model, st, allocs, durs, budget)  # type: ignore[arg-type]
            v = _value(inst, durs2)
            if best is None or v < best[0] - 1e-12:
                best = (v, allocs2)
    return None if best is None else best[1]


def _local_search(inst: Instance, model: PackingModel, st: Placement, allocs: list[Allocation], durs: list[float],
                  budget: Budget, rounds: int = 5) -> tuple[list[Allocation], list[float]]:
    """1-opt: re-place each job on its best fitting allocation while that improves the objective."""
    allocs, durs = list(allocs), list(durs)
    for _ in range(rounds):
        improved = False
        for j in range(len(allocs)):
            if budget.left() < 0:
                return allocs, durs
            st.release(j, allocs[j])
            cur = _value(inst, durs)
            best = (cur, allocs[j], durs[j])
            for d, a in _options(inst, model, j, st):
                old = durs[j]
                durs[j] = d
                v = _value(inst, durs)
                durs[j] = old
                if v < best[0] * (1 - 1e-12):
                    best = (v, a, d)
            st.take(j, best[1])
            if best[1] != allocs[j]:
                improved = True
            allocs[j], durs[j] = best[1], best[2]
        if not improved:
            break
    return allocs, durs


def _family_options(inst: Instance, j: int, fam: Candidate, st: Placement) -> list[tuple[float, Allocation]]:
    """Members of a relaxed family built from free GPUs: the family's GPU-type counts taken from the
    fastest free GPUs of each type (on the family's node for ``relaxed-node``; for ``relaxed-spread``
    over the whole cluster, and also spread over as few nodes as possible), fair-share level."""
    job = inst.jobs[j]
    gpu = inst.cluster.gpu
    want = dict(fam.type_counts)
    if not want:
        return []
    free = [g for ids in st.free_ids.values() for g in ids]
    if fam.kind == "relaxed-node":
        free = [g for g in free if gpu[g].node == fam.node]
    fac = {g: gpu[g].factor(job.job_class) for g in free}
    sets = []
    pick = []
    for t, k in want.items():
        c = sorted((g for g in free if gpu[g].type == t), key=lambda g: (fac[g], g))
        if len(c) < k:
            return []
        pick.extend(c[:k])
    sets.append(tuple(pick))
    if fam.kind == "relaxed-spread":
        # fill nodes with the most free GPUs of the wanted types first (fewer nodes, same types)
        by_node: dict[str, list[str]] = {}
        for g in free:
            if gpu[g].type in want:
                by_node.setdefault(gpu[g].node, []).append(g)
        left = dict(want)
        pick = []
        for v in sorted(by_node, key=lambda v: (-len(by_node[v]), v)):
            for g in sorted(by_node[v], key=lambda g: (fac[g], g)):
                if left.get(gpu[g].type, 0) > 0:
                    pick.append(g)
                    left[gpu[g].type] -= 1
        if not any(left.values()):
            sets.append(tuple(pick))
    out = []
    for gs in dict.fromkeys(sets):
        a = Allocation(gs, (), None, None) if job.ps is None else None
        if a is None:
            continue
        try:
            d = duration(job, a, inst.cluster)
        except SpeedError:
            continue
        if st.fits(j, a):
            out.append((d, a))
    return out


def repair(inst: Instance, model: PackingModel, chosen: list[int],
           budget: Budget | None = None) -> list[Allocation] | None:
    """The better of :func:`repair_once` without and with family-shaped options (see there); past
    ``budget`` the first only, with no improving moves."""
    dl = budget or Budget(None)
    best = None
    for fam in (False, True):
        if fam and best is not None and dl.left() <= 0:
            break
        a = repair_once(inst, model, chosen, family=fam, budget=dl)
        if a is None:
            continue
        try:
            v = _value(inst, [duration(inst.jobs[j], x, inst.cluster) for j, x in enumerate(a)])
        except SpeedError:
            continue
        if best is None or v < best[0] - 1e-12 * abs(best[0]):
            best = (v, a)
    return None if best is None else best[1]


def repair_once(inst: Instance, model: PackingModel, chosen: list[int], family: bool = True,
                budget: Budget | None = None) -> list[Allocation] | None:
    """Concrete allocations for a model answer that uses relaxed candidates: exact choices are kept
    (first free GPUs of each class), relaxed ones are placed greedily on the remaining resources
    (preferring the relaxed family's GPU types), then 1-opt improves the whole. None on failure."""
    J = len(inst.jobs)
    st = Placement(inst, model)
    allocs: list[Allocation | None] = [None] * J
    durs = [0.0] * J
    todo = []
    for j, i in enumerate(chosen):
        c = model.cols[i]
        a = st.alloc_of(c) if c.exact else None
        if a is not None and st.fits(j, a):
            st.take(j, a)
            allocs[j], durs[j] = a, c.duration
        else:
            todo.append(j)
    for j in sorted(todo, key=lambda j: -model.cols[chosen[j]].n):
        fam = model.cols[chosen[j]]
        want = dict(fam.type_counts)
        opts = _options(inst, model, j, st) + (_family_options(inst, j, fam, st) if family else [])
        if not opts:
            return None

        def key(x: tuple[float, Allocation]) -> tuple:
            tc: dict[str, int] = {}
            for g in x[1].gpus:
                t = inst.cluster.gpu[g].type
                tc[t] = tc.get(t, 0) + 1
            return (tc != want, x[0])

        d, a = min(opts, key=key)
        st.take(j, a)
        allocs[j], durs[j] = a, d
    out, _ = _local_search(inst, model, st, allocs, durs, budget or Budget(None), rounds=3)  # type: ignore[arg-type]
    return out
