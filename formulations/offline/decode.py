"""Decoding a model solution into an incumbent: the model's order and choices, re-timed exactly.

A model solution fixes each job's option and its start in model units; relaxed options (classes) still
need concrete GPUs. :func:`decode` list-schedules the solution's start order with several choosers (the
class's fastest free set; spread jobs anywhere; GPUs pinned consistently with the model's own times,
:func:`pin_gpus`; node classes on any node of the same GPU types; CPU/memory levels free; PS placement as
the model chose) and keeps the best replayed schedule. The objective is always the replayed one.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

from ortools.sat.python import cp_model

from jctlab.model import Instance

from ..results import Incumbent
from .cpsat_model import ModelSolution
from .options import Option, allocations_on, level_of, node_groups, rho, single_node
from .retime import best_retime, fixed_chooser, mixed_chooser


@dataclass(frozen=True)
class DecodeParams:
    """Time for the GPU pinning of a decode."""

    pin_wall_s: float = 1.0      # s: most wall time of one pinning (pin_gpus)
    share: float = 0.02          # of the limit (at most pin_wall_s) kept after the last model for its decode's pinning


def decode(inst: Instance, opts: list[list[Option]], sol: ModelSolution, method: str, until: float | None = None,
           params: DecodeParams = DecodeParams()) -> Incumbent:
    """Order + choices of a model solution → the best re-timed valid schedule of several variants. ``until``
    (``time.perf_counter()``): the GPU pinning (:func:`pin_gpus`) stops there."""
    order = sorted(range(len(inst.jobs)), key=lambda j: (sol.start[j], inst.jobs[j].arrival, j))
    chosen = {j: opts[j][k] for j, k in enumerate(sol.choice)}
    if all(o.alloc is not None for o in chosen.values()):
        allocs = {j: o.alloc for j, o in chosen.items()}
        return best_retime(inst, order, lambda: fixed_chooser(allocs), method)
    best = best_retime(inst, order, lambda: mixed_chooser(chosen), method)
    if any(o.cls is not None and len(o.cls) > 2 and o.cls[0] == "spread" for o in chosen.values()):
        # variant: spread jobs take the fastest free spread set on any nodes (not only their support)
        loose = {j: dataclasses.replace(o, cls=o.cls[:2]) if o.cls is not None and o.cls[0] == "spread" else o
                 for j, o in chosen.items()}
        best = best.better(best_retime(inst, order, lambda: mixed_chooser(loose), method))
    # variants: GPUs consistent with the model's own times, relaxed jobs pinned and concrete ones moved,
    # or (when the model chose concrete sets) those kept as they are and relaxed jobs placed around them
    keeps = (False, True) if any(o.alloc is not None for o in chosen.values()) else (False,)
    seen: list = []
    for keep in keeps:
        wall = None if until is None else until - time.perf_counter()
        pinned = pin_gpus(inst, opts, sol, keep_concrete=keep, wall=wall, params=params)
        if pinned and pinned not in seen:
            seen.append(pinned)
            chosen_p = {**chosen, **pinned}
            # pinned sets carry the fastest PS placement, chosen without the CPUs: placed when they start
            best = best.better(best_retime(inst, order, lambda: mixed_chooser(chosen_p, ps_free=set(pinned)),
                                               method))
    groups = {v: g for g in node_groups(inst) if len(g) > 1 for v in g}
    if any(o.cls is not None and o.cls[0] == "node" and o.cls[1] in groups for o in chosen.values()):
        # variant: a node class may run on any node with the same GPU types (a group pattern's count on a
        # group of several nodes is not tied to one of them, so the model's node may not have its GPUs)
        moved = {j: dataclasses.replace(o, cls=("nodes", groups[o.cls[1]], o.cls[2]))
                 if o.cls is not None and o.cls[0] == "node" and o.cls[1] in groups else o for j, o in chosen.items()}
        best = best.better(best_retime(inst, order, lambda: mixed_chooser(moved), method))
    if any(o.level is not None and o.alloc is None for o in chosen.values()):
        # variant: classes split by CPU/memory level take the fastest level that fits when they start
        best = best.better(best_retime(inst, order, lambda: mixed_chooser(chosen, levels=False), method))
    if any(o.ps_local is not None for o in chosen.values()):
        # variant: PS jobs keep their parameter servers on or off their node, as the model chose
        best = best.better(best_retime(inst, order, lambda: mixed_chooser(chosen, ps_side=True), method))
    return best


def pin_gpus(inst: Instance, opts: list[list[Option]], sol: ModelSolution, time_limit: float = 2.0,
             keep_concrete: bool = False, wall: float | None = None, params: DecodeParams = DecodeParams()
             ) -> dict[int, Option]:
    """Concrete GPUs for every job of a model solution, consistent with the model's own times.

    The model fixes, per job, an interval [s, s + d) in its time unit and a node and size
    (single-node options, ``("node", v, n)`` classes), a GPU count per node group (spread patterns),
    on its support (spread supports) or in the cluster (the plain spread class); a multi-node concrete
    set stays as it is. A small CP-SAT
    model picks the GPUs (b[j, g] = 1 when job j holds GPU g, with the counts of its option): first
    as few GPUs held twice at a model start as possible (none when the model's counts allow it; they
    are counts, not GPUs, so they may not), then the largest Σ_j d_j Σ_g b[j, g]·ρ_jg / max ρ_j (long
    jobs on their fast GPUs). Returns job → option with that allocation (its fastest PS/level choice)
    for the jobs whose GPUs differ from the model's; {} when nothing is found within ``time_limit``
    (CP-SAT deterministic time, so the same solution gives the same GPUs; ``wall`` and
    ``params.pin_wall_s`` cap its wall-clock time too). The
    re-timing then delays whatever still clashes. ``keep_concrete``: every concrete option keeps its
    GPUs and only relaxed jobs get GPUs, around them (a node-exact solution with one spread job: the
    moved-GPUs variant lengthens exact jobs, 30 jobs / 32 GPUs seed 1: 3026.79, this one 3019.83 against
    a model value of 3019.66).

    Plain list scheduling instead gives a spread job the fastest GPUs free *now*, which can take the
    GPUs that a later job of the model needs and push it back (16 GPUs / 10 jobs, seed 0: decoded
    10 155 against a model optimum of 7 826; with this, 7 836).
    """
    u = sol.unit
    if u is None or sol.start is None or (wall is not None and wall < 0.05):
        return {}
    cl = inst.cluster
    n = len(inst.jobs)
    chosen = [opts[j][k] for j, k in enumerate(sol.choice)]
    start = list(sol.start)                                         # model units
    end = [start[j] + math.floor(chosen[j].dur / u) for j in range(n)]
    m = cp_model.CpModel()
    b: dict = {}
    obj = []
    for j, o in enumerate(chosen):
        job = inst.jobs[j]
        v1 = single_node(o.alloc) if o.alloc is not None else None
        if j in sol.gpus:
            groups, fixed = [], sol.gpus[j]                         # the model's own GPUs (GPU literals)
        elif o.alloc is not None and (v1 is None or keep_concrete):
            groups, fixed = [], o.alloc.gpus                           # concrete set as it is
        elif o.alloc is not None:
            groups, fixed = [((v1,), len(o.alloc.gpus))], ()
        elif o.cls is not None and o.cls[0] == "node":
            groups, fixed = [((o.cls[1],), o.cls[2])], ()
        elif o.cls is not None and o.cls[0] == "spread" and len(o.cls) > 3:
            groups, fixed = list(o.cls[3]), ()
        elif o.cls is not None and o.cls[0] == "spread":             # on its support S, or anywhere
            groups, fixed = [(o.cls[2] if len(o.cls) > 2 else tuple(nd.name for nd in cl.nodes), o.cls[1])], ()
        else:
            return {}
        top = max(rho(job, g) for g in cl.gpus if job.can_use(g.type))
        for nodes, c in groups:
            gl = [g for nd in cl.nodes if nd.name in nodes for g in nd.gpus if job.can_use(g.type)]
            for g in gl:
                b[j, g.id] = m.NewBoolVar(f"b{j}_{g.id}")
                obj.append(b[j, g.id] * round(1000 * o.dur / 3600 * min(1.0, rho(job, g) / top)))
            m.Add(sum(b[j, g.id] for g in gl) == c)
        for g in fixed:
            b[j, g] = m.NewConstant(1)
    clash = []       # GPUs held twice at a model start: penalised, not forbidden (the MILP model does
    for t in sorted(set(start)):                     # not hold group counts, so it may need them)
        run = [j for j in range(n) if start[j] <= t < end[j]]
        for g in cl.gpus:
            lits = [b[j, g.id] for j in run if (j, g.id) in b]
            if len(lits) > 1:
                z = m.NewIntVar(0, len(lits) - 1, "")
                m.Add(sum(lits) <= 1 + z)
                clash.append(z)
    m.Maximize(sum(obj) - 10 ** 7 * sum(clash))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_deterministic_time = time_limit      # reproducible, unlike a wall-clock limit
    # ... but a loaded machine can stretch it to seconds (4.6 s at 20 GPUs / 9 jobs): a wall cap too
    solver.parameters.max_time_in_seconds = params.pin_wall_s if wall is None else min(params.pin_wall_s, wall)
    if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {}
    out = {}
    for j, o in enumerate(chosen):
        gids = tuple(sorted(g.id for g in cl.gpus if (j, g.id) in b and solver.Value(b[j, g.id])))
        if o.alloc is not None and set(gids) == set(o.alloc.gpus):
            continue
        alloc = [a for a, _ in allocations_on(inst, inst.jobs[j], gids)]
        lv = o.level if o.alloc is None else level_of(o.alloc)
        if lv is not None:
            # the model's CPU/memory level (a faster one may take CPUs it gave others)
            alloc = [a for a in alloc if level_of(a) == lv] or alloc
        if o.ps_local and o.cls is not None and o.cls[0] == "node":
            # the model's servers: all on the node, that many (the fastest placement may take CPUs it gave others)
            alloc = [a for a in alloc if set(a.ps_nodes) == {o.cls[1]} and len(a.ps_nodes) == (o.ps_count or
                                                                                                 len(a.ps_nodes))] or alloc
        if alloc:
            out[j] = dataclasses.replace(o, alloc=alloc[0], cls=None)
    return out


def last_model_time(time_limit: float | None, left: float | None, params: DecodeParams = DecodeParams()
                    ) -> float | None:
    """The time of a pipeline's last model: what is left, less ``params.share`` of the limit (at most
    ``params.pin_wall_s``) for the GPU pinning of its decode (the node-exact decode of a spread job pinned around
    concrete sets gave 30 jobs / 32 GPUs seed 1 its best schedule)."""
    if time_limit is None or left is None:
        return left
    return max(0.05, left - min(params.pin_wall_s, params.share * time_limit))
