"""The set-packing model of the static class, which every static back end (CP-SAT, HiGHS, CBC) reads.

One binary per candidate (:mod:`formulations.static.candidates`), exactly one per job, capacity rows per GPU
class / node / GPU type (relaxed families) / node CPU / node memory (only where they can bind). Costs are
exact (weight × duration), so the convex compute term needs no outer approximation. A back end is a
function ``(model, hint_cols, budget) -> BackendAnswer``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from jctlab.model import Allocation, Instance

from ..budget import Budget
from ..schedules import objective_weights
from .candidates import Candidate, CandidateSet


@dataclass(frozen=True)
class Row:
    """sum(coef * x[col]) <= ub."""

    name: str
    cols: tuple[int, ...]
    coefs: tuple[float, ...]
    ub: float


@dataclass(frozen=True)
class PackingModel:
    """Set packing over candidates: ``cols[i]`` is a candidate, ``groups[j]`` the columns of job j
    (exactly one is chosen), ``rows`` the capacity constraints, ``cost[i]`` its objective term
    (weight × duration; for makespan the duration, the objective being max over chosen)."""

    cands: CandidateSet
    cols: tuple[Candidate, ...]
    groups: tuple[tuple[int, ...], ...]
    rows: tuple[Row, ...]
    cost: tuple[float, ...]
    makespan: bool

    def trivial_bound(self) -> float:
        """Every job on its own best candidate (valid when the candidate set is complete)."""
        best = [min((self.cost[i] for i in g), default=math.inf) for g in self.groups]
        return max(best) if self.makespan else sum(best)

    def objective_of(self, chosen: Sequence[int]) -> float:
        vals = [self.cost[i] for i in chosen]
        return max(vals) if self.makespan else sum(vals)


def build_packing(inst: Instance, cset: CandidateSet) -> PackingModel:
    cols: list[Candidate] = []
    groups = []
    for cs in cset.per_job:
        groups.append(tuple(range(len(cols), len(cols) + len(cs))))
        cols.extend(cs)
    w = objective_weights(inst)
    makespan = inst.objective == "makespan"
    cost = tuple(c.duration if makespan else w[c.job] * c.duration for c in cols)
    classes = cset.classes
    rows: list[Row] = []
    # GPU class capacity
    per_class: dict[int, list[tuple[int, int]]] = {}
    per_node: dict[str, list[tuple[int, int]]] = {}
    per_type: dict[str, list[tuple[int, int]]] = {}
    has_rnode = any(c.kind == "relaxed-node" for c in cols)
    has_rspread = any(c.kind == "relaxed-spread" for c in cols)
    for i, c in enumerate(cols):
        for cl, k in c.counts:
            per_class.setdefault(cl, []).append((i, k))
        if has_rnode:
            if c.kind == "relaxed-node":
                per_node.setdefault(c.node, []).append((i, c.n))   # type: ignore[arg-type]
            for v, k in c.node_counts:
                per_node.setdefault(v, []).append((i, k))
        if has_rspread:
            for t, k in c.type_counts:
                per_type.setdefault(t, []).append((i, k))
    for cl, items in sorted(per_class.items()):
        rows.append(Row(f"class{cl}", tuple(i for i, _ in items), tuple(float(k) for _, k in items),
                        float(classes[cl].size)))
    node_size = {n.name: len(n.gpus) for n in inst.cluster.nodes}
    for v, items in sorted(per_node.items()):
        rows.append(Row(f"node:{v}", tuple(i for i, _ in items), tuple(float(k) for _, k in items), float(node_size[v])))
    type_size: dict[str, int] = {}
    for g in inst.cluster.gpus:
        type_size[g.type] = type_size.get(g.type, 0) + 1
    for t, items in sorted(per_type.items()):
        rows.append(Row(f"type:{t}", tuple(i for i, _ in items), tuple(float(k) for _, k in items), float(type_size[t])))
    # CPU / memory per node, only where they can bind (never with fair shares only: a node's GPUs
    # at their fair share use at most its CPUs and memory, and the GPU rows already hold)
    fair_only = all(j.cpu_mem is None and j.ps is None for j in inst.jobs)
    for res in (() if fair_only else ("cpu", "mem")):
        per: dict[str, list[tuple[int, float]]] = {}
        for i, c in enumerate(cols):
            for v, x in getattr(c, res):
                if x > 0:
                    per.setdefault(v, []).append((i, x))
        for v, items in sorted(per.items()):
            nd = inst.cluster.node[v]
            cap = nd.cpus if res == "cpu" else nd.mem_gb
            worst = 0.0
            by_job: dict[int, float] = {}
            for i, x in items:
                by_job[cols[i].job] = max(by_job.get(cols[i].job, 0.0), x)
            worst = sum(by_job.values())
            if worst <= cap * (1 + 1e-12):
                continue
            rows.append(Row(f"{res}:{v}", tuple(i for i, _ in items), tuple(x for _, x in items), float(cap)))
    return PackingModel(cset, tuple(cols), tuple(groups), tuple(rows), cost, makespan)


def integer_costs(costs: Sequence[float], jobs: int, rel: float = 1e-8) -> tuple[list[int], float]:
    """Scale costs to integers rounding DOWN: ``floor(c * scale)``. With J jobs the scaled optimum
    is within J/scale of the true one; ``scale`` is chosen so that this is at most ``rel`` times the
    smallest positive cost times... (a relative resolution of ``rel`` per job). Returns (ints, scale);
    any bound of the integer model divided by ``scale`` is a valid bound of the real one."""
    pos = [c for c in costs if c > 0 and math.isfinite(c)]
    if not pos:
        return [0] * len(costs), 1.0
    lo, hi = min(pos), max(pos)
    scale = 1.0 / (lo * rel)
    # keep every coefficient (and a sum over jobs) well inside int64 and CP-SAT's comfort zone
    limit = 2.0 ** 50 / max(1, jobs)
    if hi * scale > limit:
        scale = limit / hi
    return [int(math.floor(c * scale)) for c in costs], scale


def restrict(model: PackingModel, keep: Sequence[int]) -> PackingModel:
    """The packing model on the columns ``keep`` (sorted original indices); rows keep their names."""
    keep = sorted(keep)
    new = {old: k for k, old in enumerate(keep)}
    groups = tuple(tuple(new[i] for i in g if i in new) for g in model.groups)
    rows = []
    for r in model.rows:
        items = [(new[i], c) for i, c in zip(r.cols, r.coefs) if i in new]
        if items:
            rows.append(Row(r.name, tuple(i for i, _ in items), tuple(c for _, c in items), r.ub))
    return PackingModel(model.cands, tuple(model.cols[i] for i in keep), groups, tuple(rows),
                        tuple(model.cost[i] for i in keep), model.makespan)


def match_candidate(model: PackingModel, j: int, alloc: Allocation) -> int | None:
    """The column of job j that represents ``alloc`` (exact match, else the relaxed family)."""
    classes = model.cands.classes
    where: dict[str, int] = {}
    for cl in classes:
        for g in cl.ids:
            where[g] = cl.index
    try:
        cnt: dict[int, int] = {}
        for g in alloc.gpus:
            cnt[where[g]] = cnt.get(where[g], 0) + 1
    except KeyError:
        return None
    counts = tuple(sorted(cnt.items()))
    level = None if alloc.cpus_per_gpu is None else (alloc.cpus_per_gpu, alloc.mem_gb_per_gpu)
    types: dict[str, int] = {}
    nodes = set()
    for c, k in counts:
        types[classes[c].type] = types.get(classes[c].type, 0) + k
        nodes.add(classes[c].node)
    tc = tuple(sorted(types.items()))
    fallback = None
    best_exact = None
    for i in model.groups[j]:
        c = model.cols[i]
        if c.exact and tuple(sorted(c.counts)) == counts:
            if c.level == level and tuple(sorted(c.ps_nodes)) == tuple(sorted(alloc.ps_nodes)):
                return i
            if best_exact is None or c.duration < model.cols[best_exact].duration:
                best_exact = i
        elif not c.exact and c.type_counts == tc and all(cnt.get(cl, 0) >= k for cl, k in c.counts):
            if (c.kind == "relaxed-spread") == (len(nodes) > 1) and (c.node is None or c.node in nodes):
                fallback = i
    return fallback if fallback is not None else best_exact


@dataclass(frozen=True)
class BackendAnswer:
    """What a back end returns: chosen column per job (None: no solution), a valid bound of the
    packing model's optimum (None: none), whether the model is proven infeasible, and details."""

    chosen: tuple[int, ...] | None
    bound: float | None
    infeasible: bool = False
    proven: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)


#: a static back end: the model, a hinted column per job (or None), the time budget
Backend = Callable[[PackingModel, "Sequence[int | None] | None", Budget], BackendAnswer]
