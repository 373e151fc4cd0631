"""Symmetry breaking for identical nodes in the offline option models.

Two nodes are *twins* when they have the same CPUs, memory and, index by index, the same GPU type and
variability, and when swapping them (node names, their GPUs index by index, their CPU/memory/GPU-count
resources, node sets) maps the model onto itself: every job's options onto its options (same integer
duration, same demands), the resources onto the resources. Then every solution has a mirror image with
the same objective, and CP-SAT (whose own symmetry detection is off, ``offline_cpsat.SAT_PARAMS``) would
search both.

Rule (:func:`add_twin_breaking`): in a group of pairwise twins v_1, …, v_m, job j may run on v_{k+1}
(single-node options) only if an earlier job i < j runs on v_k. Valid: permuting the nodes of a group
so that they are sorted by the first job that runs on each (unused nodes last) maps any solution onto
one that satisfies the rule, with the same objective, because the model is invariant under each
adjacent swap and therefore under every permutation of the group. So the optimum and every proven
bound are unchanged (test ``test_twin_node_breaking_keeps_the_optimum``). For a relaxation it is enough
that the *instance* is symmetric (identical nodes) and that every schedule maps onto options on the nodes
of its single-node allocations: the mirror image of an optimal schedule that obeys the rule maps onto a
model solution, so the model's optimum under the rule is still at most the optimum. The model check is
kept anyway (it is what lets a hint be mirrored option by option).

Used by the CP-SAT models (``offline_cpsat.build_and_solve``) and the MILP (``offline_milp.build``, as
rows), switched by ``offline_cpsat.TWINS``.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from jctlab.model import Allocation, Instance

from . import offline_candidates as oc


def _node_key(nd) -> tuple:
    return (nd.cpus, nd.mem_gb, tuple((g.type, tuple(sorted(g.variability.items()))) for g in nd.gpus))


def _renaming(node: Callable[[str], str]) -> tuple:
    """The maps that a renaming of nodes (their GPUs follow index by index) induces on resources,
    classes and allocations."""
    def gpu(g):
        v, k = g.split(":", 1)
        return f"{node(v)}:{k}"

    def res(r):
        if r[0] == "g":
            return ("g", gpu(r[1]))
        if r[0] == "set":
            return ("set", tuple(sorted(map(node, r[1]))))
        return (r[0], node(r[1])) if len(r) == 2 else r

    def cls(c):
        if c is None:
            return None
        if c[0] == "node":
            return ("node", node(c[1]), *c[2:])
        out = list(c)
        if len(c) > 2:
            out[2] = tuple(sorted(map(node, c[2])))
        if len(c) > 3:
            out[3] = tuple((tuple(sorted(map(node, nodes))), n) for nodes, n in c[3])
        return tuple(out)

    def alloc(al: Allocation | None):
        if al is None:
            return None
        return (tuple(sorted(map(gpu, al.gpus))), tuple(sorted(map(node, al.ps_nodes))), al.cpus_per_gpu,
                al.mem_gb_per_gpu)

    return res, cls, alloc


def _swap(a: str, b: str) -> tuple:
    return _renaming(lambda v: b if v == a else a if v == b else v)


_SAME = _renaming(lambda v: v)


def _signature(o: oc.Option, du: int, resources: set, ren: tuple = _SAME) -> tuple:
    res, cls, alloc = ren
    dem = frozenset((res(r), round(v, 9)) for r, v in o.demand.items() if r in resources)
    return (du, cls(o.cls), alloc(o.alloc), dem, o.ps_local, o.ps_count)


def _invariant(inst: Instance, opts, durs, resources: set, cap: dict, a: str, b: str) -> bool:
    ren = _swap(a, b)
    if {ren[0](r) for r in resources} != resources or any(cap.get(ren[0](r)) != cap.get(r) for r in resources):
        return False
    for ol, dl in zip(opts, durs):
        if Counter(_signature(o, d, resources) for o, d in zip(ol, dl)) != Counter(
                _signature(o, d, resources, ren) for o, d in zip(ol, dl)):
            return False
    return True


def twin_groups(inst: Instance, opts, durs, resources: set) -> list[list[str]]:
    """Groups (≥ 2 nodes, cluster order) of pairwise twins of the model ``opts`` (integer durations
    ``durs``) over ``resources``: identical nodes whose adjacent swaps each map the model onto itself."""
    cap = oc.capacities(inst)
    by: dict = {}
    for nd in inst.cluster.nodes:
        by.setdefault(_node_key(nd), []).append(nd.name)
    groups = []
    for names in by.values():
        cur = [names[0]]
        for v in names[1:]:
            if _invariant(inst, opts, durs, resources, cap, cur[-1], v):
                cur.append(v)
            else:
                if len(cur) > 1:
                    groups.append(cur)
                cur = [v]
        if len(cur) > 1:
            groups.append(cur)
    return groups


def on_node(o: oc.Option) -> str | None:
    """The node of a single-node option (class or concrete), else None."""
    if o.alloc is not None:
        return oc._single_node(o.alloc)
    return o.cls[1] if o.cls is not None and o.cls[0] == "node" else None


def twin_rows(opts, groups: list[list[str]]) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """The rule as rows (lhs, rhs) of option indices (j, k): Σ lhs ≤ Σ rhs, i.e. per group and adjacent
    pair (v_k, v_{k+1}) and job j: "j's option is on v_{k+1}" ≤ "some option of a job i < j is on v_k"."""
    rows = []
    for grp in groups:
        on = {v: [[(j, k) for k, o in enumerate(ol) if on_node(o) == v] for j, ol in enumerate(opts)] for v in grp}
        for v, w in zip(grp, grp[1:]):
            earlier: list = []
            for j in range(len(opts)):
                if on[w][j]:
                    rows.append((on[w][j], list(earlier)))
                earlier += on[v][j]
    return rows


def add_twin_breaking(m, opts, xs, groups: list[list[str]]) -> int:
    """Adds the rule (:func:`twin_rows`) to a CP-SAT model over option literals ``xs``; returns the row count."""
    rows = twin_rows(opts, groups)
    for lhs, rhs in rows:
        m.Add(sum(xs[j][k] for j, k in lhs) <= sum(xs[i][k] for i, k in rhs))
    return len(rows)


def canonical_hint(opts, durs, resources: set, hint: dict | None, groups: list[list[str]]) -> dict | None:
    """The mirror image of a hint (job → (option index, start)) that satisfies the rule: per group, the
    nodes renamed in the order of the first hinted job on each, each option mapped onto its image."""
    if not hint or not groups:
        return hint
    perm: dict = {}
    for grp in groups:
        first = {v: min((j for j, (k, _) in hint.items() if k is not None and on_node(opts[j][k]) == v),
                        default=len(opts)) for v in grp}
        order = sorted(grp, key=lambda v: (first[v], grp.index(v)))
        perm.update({old: new for old, new in zip(order, grp) if old != new})
    if not perm:
        return hint
    ren = _renaming(lambda v: perm.get(v, v))
    out = {}
    for j, (k, st) in hint.items():
        if k is None:
            out[j] = (k, st)
            continue
        want = _signature(opts[j][k], durs[j][k], resources, ren)
        out[j] = (next((kk for kk, o in enumerate(opts[j]) if _signature(o, durs[j][kk], resources) == want), None), st)
    return out
