"""Symmetry breaking for identical nodes in the offline relaxations.

Two nodes are *twins* when they have the same CPUs, memory and, index by index, the same GPU type and
variability (nothing else in an instance tells nodes apart). Renaming twins (a node's GPUs follow index
by index, and so do parameter servers) maps every schedule onto a schedule with the same objective, so
a model over options per node would search every mirror image; CP-SAT's own symmetry detection is off
for the offline models (``formulations.offline.cpsat_model.SAT_PARAMS``).

Rule (:func:`twin_rows`): in a group of twins v_1, …, v_m (cluster order), job j may run on v_{k+1}
(a single-node option) only if an earlier job i < j runs on v_k.

Valid for every *relaxation* in which each schedule maps onto a model solution whose single-node
options lie on the nodes of the schedule's single-node allocations (the class, hybrid, node-exact and
complete exact models, CP-SAT and MILP): take an optimal schedule and rename the twins of each group so
that they are sorted by the first job that runs on each (unused ones last). That is a schedule with the
same objective that obeys the rule, and its model image obeys it too, so the model's optimum under the
rule is still at most the optimum: every proven bound stays valid. Models that are not relaxations (a
restricted option space, an LNS window, one node's subproblem) do not get the rule: it could cut off
their only solutions. Tests ``test_twin_node_breaking_keeps_the_optimum`` (exact and class models against
brute force) and ``test_milp_twin_rows_keep_the_optimum``.
"""

from __future__ import annotations

from jctlab.model import Instance

from ..gpu_classes import node_key
from .options import Option, on_node


def twin_groups(inst: Instance) -> list[list[str]]:
    """Groups (≥ 2 nodes, cluster order) of identical nodes."""
    by: dict = {}
    for nd in inst.cluster.nodes:
        by.setdefault(node_key(nd), []).append(nd.name)
    return [names for names in by.values() if len(names) > 1]


def twin_rows(opts, groups: list[list[str]]) -> list[tuple[list[tuple[int, int]], list[tuple[int, int]]]]:
    """The rule as rows (lhs, rhs) of option indices (j, k): Σ lhs ≤ Σ rhs, i.e. per group, adjacent pair
    (v_k, v_{k+1}) and job j: "j's option is on v_{k+1}" ≤ "some option of a job i < j is on v_k"."""
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


def _rename(perm: dict):
    def node(v):
        return perm.get(v, v)

    def gpu(g):
        v, k = g.split(":", 1)
        return f"{node(v)}:{k}"

    def key(o: Option, mapped: bool) -> tuple:
        n, gp = (node, gpu) if mapped else (lambda v: v, lambda g: g)
        c = o.cls
        if c is not None and c[0] == "node":
            c = ("node", n(c[1]), *c[2:])
        elif c is not None:
            c = (*c[:2], *((tuple(sorted(map(n, c[2]))),) if len(c) > 2 else ()),
                 *((tuple((tuple(sorted(map(n, nodes))), cnt) for nodes, cnt in c[3]),) if len(c) > 3 else ()))
        a = None if o.alloc is None else (tuple(sorted(map(gp, o.alloc.gpus))), tuple(sorted(map(n, o.alloc.ps_nodes))),
                                          o.alloc.cpus_per_gpu, o.alloc.mem_gb_per_gpu)
        return (round(o.dur, 6), c, a, o.ps_local, o.ps_count, o.level)

    return node, key


def canonical_hint(opts, hint: dict | None, groups: list[list[str]]) -> dict | None:
    """The mirror image of a hint (job → (option index, start)) that obeys the rule: per group, the twins
    renamed in the order of the first hinted job on each; a hinted option that mentions a renamed node is
    mapped onto the job's option with the renamed class/GPUs (dropped from the hint when it has none)."""
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
    _, key = _rename(perm)
    out = {}
    for j, (k, st) in hint.items():
        if k is not None:
            want = key(opts[j][k], True)
            if want != key(opts[j][k], False):
                k = next((kk for kk, o in enumerate(opts[j]) if key(o, False) == want), None)
        out[j] = (k, st)
    return out
