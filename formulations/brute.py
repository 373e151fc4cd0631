"""Brute force for tiny static and offline instances (the reference the models are tested against).

It shares no modelling code with the CP-SAT/MILP formulations: allocations are raw GPU subsets
(``itertools.combinations`` over GPU ids, no symmetry reduction), every CPU/memory level (and the
null fair share), every PS multiset over all nodes; durations come from ``jctlab.speed.duration``.

Static (exact): depth-first search over jobs, each job taking every allocation disjoint from the
previous jobs' GPUs with node CPU/memory capacities respected; the partial objective (a sum of
non-negative terms, or a maximum) prunes. Every static schedule is one leaf, so the best leaf is
the optimum.

Offline (exact): depth-first search over (next job, its allocation) pairs, i.e. over every job
permutation × every allocation vector, placing each job with the *serial schedule generation
scheme*: at the earliest time ≥ its arrival at which its GPUs, CPUs and memory are free for its
whole duration given the jobs already placed (inserting into earlier gaps is allowed). Exactness:
take an optimal schedule S*, list its jobs by start time, and run the scheme on that list with S*'s
allocations. By induction each job i gets a start ≤ S*_i: every job placed before i started no
later than in S* and has the same duration, so it ends no later; a job active at some τ ≥ S*_i in the
partial schedule started at ≤ τ and ends ≤ its S* end, and it started in S* at ≤ S*_i ≤ τ, hence is
active at τ in S* too. The resources needed at every τ of [S*_i, S*_i + d_i) are thus a subset of
those used in S*, so S*_i is feasible and the scheme starts i no later. Completion times are no
later, the objective is regular, so this (order, allocation) leaf is optimal too. Placed jobs never
move, so the partial objective is a valid pruning bound.

Interference is ignored while searching (SPEC §2: it only slows jobs down, so the search optimum is
a valid lower bound); the best schedule is replayed with interference — for the offline class its
starts are first realised on the event engine in start order, which delays a start if a slowed-down
neighbour still holds a resource — and reported with its replayed objective. Without interference
the bound equals the objective and the status is ``optimal``.
"""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Sequence

from jctlab.errors import InputError
from jctlab.model import Allocation, Instance
from jctlab.resources import node_demand
from jctlab.result import Result
from jctlab.speed import ps_counts

from .budget import Budget
from .gpu_sets import timed_allocations
from .offline.retime import realize
from .results import result_of_schedule
from .schedules import objective_weights, static_schedule, timed_schedule

SOLVER = "brute"
VERSION = "1"
MAX_ALLOCATIONS = 200_000  # per job: beyond this brute force is refused as bad input


def job_allocations(inst: Instance, j: int, limit: int = MAX_ALLOCATIONS) -> list[tuple[float, Allocation]]:
    """Every allocation of job j with its duration (no interference), fastest first."""
    job = inst.jobs[j]
    ids = [g.id for g in inst.cluster.gpus if job.can_use(g.type)]
    levels = job.level_choices
    names = [n.name for n in inst.cluster.nodes]

    def ps_sets(n: int) -> list[tuple[str, ...]]:
        # every multiset of nodes for 1..p* servers (jctlab.speed.ps_counts: more are dominated, exact)
        if job.ps is None:
            return [()]
        return [ps for p in ps_counts(job, n) for ps in itertools.combinations_with_replacement(names, p)]

    def n_ps_sets(n: int) -> int:   # counted, not listed: the lists can be astronomically long
        return 1 if job.ps is None else sum(math.comb(len(names) + p - 1, p) for p in ps_counts(job, n))

    count = sum(math.comb(len(ids), n) * n_ps_sets(n) for n in job.sizes) * len(levels)
    if count > limit:
        raise InputError(inst.name, f"jobs[{j}]", f"too large for brute force ({count} allocations > {limit})")
    gpu_sets = (gs for n in job.sizes for gs in itertools.combinations(ids, n))
    sets_of_size = {n: ps_sets(n) for n in job.sizes}
    out = timed_allocations(job, inst.cluster, gpu_sets, lambda gs: sets_of_size[len(gs)])
    out.sort(key=lambda x: x[0])
    return out


def _usage(inst: Instance, j: int, a: Allocation) -> dict[str, tuple[float, float]]:
    cpu, mem = node_demand(inst.jobs[j], a, inst.cluster)
    return {v: (c, mem.get(v, 0.0)) for v, c in cpu.items()}


def _over(inst: Instance, v: str, cpu: float, mem: float) -> bool:
    nd = inst.cluster.node[v]
    return cpu > nd.cpus * (1 + 1e-9) + 1e-9 or mem > nd.mem_gb * (1 + 1e-9) + 1e-9


def _params(time_limit: float | None, seed: int) -> dict[str, Any]:
    return {"time_limit": time_limit, "seed": seed, "interference": "ignored in search, replayed"}


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Any = None) -> Result:
    """Exact by enumeration (static or offline); preemptive instances are refused (status error)."""
    t0 = time.perf_counter()
    if inst.problem == "static":
        return _static(inst, time_limit, seed, t0)
    if inst.problem == "offline":
        return _offline(inst, time_limit, seed, t0)
    return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION, _params(time_limit, seed),
                  error="brute force covers the static and offline classes only")


def _static(inst: Instance, time_limit: float | None, seed: int, t0: float) -> Result:
    dl = Budget(time_limit, t0)
    J = len(inst.jobs)
    opts = [job_allocations(inst, j) for j in range(J)]
    w = objective_weights(inst)
    mk = inst.objective == "makespan"
    order = sorted(range(J), key=lambda j: len(opts[j]))
    best: list[Any] = [math.inf, None]
    chosen: list[Allocation | None] = [None] * J
    used: set[str] = set()
    cpu = {n.name: 0.0 for n in inst.cluster.nodes}
    mem = dict(cpu)
    timed_out = [False]

    def rec(k: int, val: float) -> None:
        if timed_out[0]:
            return
        if k == J:
            if val < best[0]:
                best[0], best[1] = val, list(chosen)
            return
        if dl.expired():
            timed_out[0] = True
            return
        j = order[k]
        for d, a in opts[j]:
            nv = max(val, d) if mk else val + w[j] * d
            if nv >= best[0]:
                break  # options are sorted by duration
            if used.intersection(a.gpus):
                continue
            u = _usage(inst, j, a)
            if any(_over(inst, v, cpu[v] + c, mem[v] + m) for v, (c, m) in u.items()):
                continue
            used.update(a.gpus)
            for v, (c, m) in u.items():
                cpu[v] += c
                mem[v] += m
            chosen[j] = a
            rec(k + 1, nv)
            for v, (c, m) in u.items():
                cpu[v] -= c
                mem[v] -= m
            used.difference_update(a.gpus)

    rec(0, 0.0)
    params = _params(time_limit, seed)
    if best[1] is None:
        return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION, params, infeasible=not timed_out[0])
    sched = static_schedule(inst, best[1], SOLVER)
    return result_of_schedule(inst, SOLVER, sched, None if timed_out[0] else best[0], t0, SOLVER, VERSION, params)


def earliest_start(inst: Instance, j: int, a: Allocation, d: float,
                   placed: Sequence[tuple[float, float, Allocation, dict[str, tuple[float, float]]]],
                   use: dict[str, tuple[float, float]]) -> float:
    """Serial SGS: the earliest t ≥ arrival with [t, t+d) free of GPU and CPU/memory conflicts."""
    arr = inst.jobs[j].arrival
    times = sorted({arr} | {e for _, e, _, _ in placed if e > arr})
    gs = set(a.gpus)
    for t in times:
        end = t + d
        ok = True
        for s, e, b, _ in placed:
            if s < end and t < e and gs.intersection(b.gpus):
                ok = False
                break
        if not ok:
            continue
        # CPU/memory: usage only rises at starts, so check at t and at every placed start inside
        checkpoints = [t] + [s for s, _, _, _ in placed if t < s < end]
        for tau in checkpoints:
            for v, (c, m) in use.items():
                cc, mm = c, m
                for s, e, _, u in placed:
                    if s <= tau < e and v in u:
                        cc += u[v][0]
                        mm += u[v][1]
                if _over(inst, v, cc, mm):
                    ok = False
                    break
            if not ok:
                break
        if ok:
            return t
    return math.inf  # cannot happen when the allocation fits an empty cluster


def _offline(inst: Instance, time_limit: float | None, seed: int, t0: float) -> Result:
    dl = Budget(time_limit, t0)
    J = len(inst.jobs)
    opts = [job_allocations(inst, j) for j in range(J)]
    opts = [[(d, a, _usage(inst, j, a)) for d, a in o] for j, o in enumerate(opts)]
    opts = [[x for x in o if not any(_over(inst, v, c, m) for v, (c, m) in x[2].items())] for o in opts]
    if any(not o for o in opts):
        return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION, _params(time_limit, seed), infeasible=True)
    w = objective_weights(inst)
    mk = inst.objective == "makespan"
    amin = min(job.arrival for job in inst.jobs)
    best: list[Any] = [math.inf, None]
    placed: list[tuple[float, float, Allocation, dict]] = []
    starts: list[float] = [0.0] * J
    allocs: list[Allocation | None] = [None] * J
    left = set(range(J))
    timed_out = [False]

    def rec(val: float) -> None:
        if timed_out[0]:
            return
        if not left:
            if val < best[0]:
                best[0], best[1] = val, (list(starts), list(allocs))
            return
        if dl.expired():
            timed_out[0] = True
            return
        for j in sorted(left):
            job = inst.jobs[j]
            for d, a, u in opts[j]:
                lb = max(val, job.arrival + d - amin) if mk else val + w[j] * d
                if lb >= best[0]:
                    break
                s = earliest_start(inst, j, a, d, placed, u)
                nv = max(val, s + d - amin) if mk else val + w[j] * (s + d - job.arrival)
                if nv >= best[0]:
                    continue
                placed.append((s, s + d, a, u))
                left.discard(j)
                starts[j], allocs[j] = s, a
                rec(nv)
                left.add(j)
                placed.pop()

    rec(0.0)
    params = _params(time_limit, seed)
    if best[1] is None:
        return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION, params, infeasible=not timed_out[0])
    st, al = best[1]
    if inst.cluster.has_interference:
        order = sorted(range(J), key=lambda j: (st[j], j))
        st = realize(inst, order, al, planned=st) or st
    sched = timed_schedule(inst, st, al, SOLVER)
    return result_of_schedule(inst, SOLVER, sched, None if timed_out[0] else best[0], t0, SOLVER, VERSION, params)
