"""Per-node exact models: a bound for the jobs of one node, and the exact decode of a node assignment."""

from __future__ import annotations

import math
import time
from typing import Sequence

from jctlab.model import Instance, Schedule

from ..results import NO_INCUMBENT, Incumbent
from .cpsat_model import CpsatRun, ModelHint, ModelSolution, solve_option_model
from .decode import decode
from .options import Option, binding_resources, on_node, single_node


def node_exact(inst: Instance, mixed: list[list[Option]], v: str, S: Sequence[int], unit: float, run: CpsatRun,
               hint: dict | None = None) -> tuple[float, dict | None]:
    """Exact model of the jobs S on node v alone: ``(R, sol)``. R (seconds) ≤ Σ_{j∈S} C_j of every offline
    schedule in which every job of S runs on node v alone (as a logic-based Benders cut in the
    class/hybrid models it did not pay off; incumbents: :func:`node_decode`).

    Proof of R: such a schedule restricted to S is a schedule of S on v alone (release dates, each GPU
    of v used by one job at a time, v's CPU/memory); removing the other jobs and the resources of other
    nodes only relaxes it. ``mixed`` holds every single-node allocation of each job on v
    (:func:`formulations.offline.classes.node_complete_options`, complete up to dominance), so the exact option
    model of S on v in unit u (rounded down as every model) has an optimum ≤ that restriction's rounded
    Σ e_j ≤ Σ C_j/u, and CP-SAT's proven bound L on it is ≤ its optimum: R = L·u. R = inf when some job
    has no single-node allocation on v.
    ``sol``: the sub-model solution {j: (option of ``mixed[j]`` on v, start units)} or None.
    ``hint``: {j: (allocation, start seconds)} (a previous schedule's jobs on v).
    """
    S = list(S)
    sub = inst.replace_jobs([inst.jobs[j] for j in S])
    sopts = [[o for o in mixed[j] if o.alloc is not None and single_node(o.alloc) == v] for j in S]
    if any(not ol for ol in sopts):
        return math.inf, None
    gpus = {("g", g.id) for g in inst.cluster.node[v].gpus}
    res = gpus | {("n", v)} | {r for r in binding_resources(sub, sopts) if r[1] == v}
    h = None
    if hint:
        h = {}
        for i, j in enumerate(S):
            if j in hint:
                a, st = hint[j]
                k = next((k for k, o in enumerate(sopts[i]) if o.alloc == a), None)
                if k is not None:
                    h[i] = (k, st)
    sol = solve_option_model(sub, sopts, res, run, None if h is None else ModelHint(h), unit=unit)
    b = sol.bound_units
    R = b if not math.isfinite(b) else math.ceil(b - 1e-6) * sol.unit
    out = None
    if sol.found:
        out = {j: (sopts[i][sol.choice[i]], sol.start[i]) for i, j in enumerate(S)}
    return R, out


def node_decode(inst: Instance, mixed: list[list[Option]], assign: dict, order_key: dict, unit: float, *,
                until: float | None, threads: int, seed: int, method: str, hint: Schedule | None = None,
                per_node: float | None = 3.0) -> Incumbent:
    """Exact decode of a node assignment (incumbents only): the jobs that ``assign`` puts on node v alone
    (j → v; other jobs, j → None, are spread and take their fastest free spread set) are scheduled
    exactly on v by :func:`node_exact`'s model (every single-node GPU set, ≤ ``per_node`` s a node,
    hinted with ``hint``'s allocations; no limit when ``per_node`` and ``until`` are None); the
    per-node solutions (options + start order, spread jobs at ``order_key``) are re-timed by the
    simulator and replayed."""
    n = len(inst.jobs)
    hs = {}
    if hint is not None:
        for seg in hint.segments:
            hs[inst.index[seg.job]] = (seg.alloc, seg.start)
    choice: list = [None] * n
    start: list = [None] * n
    vs = sorted({x for x in assign.values() if x is not None}, key=lambda v: sum(x == v for x in assign.values()))
    for i, v in enumerate(vs):
        S = [j for j in range(n) if assign[j] == v]
        tl = per_node
        if until is not None:   # what is left, shared by the nodes still to solve (smallest first)
            tl = min(math.inf if tl is None else tl, (until - time.perf_counter()) / (len(vs) - i))
            if tl < 0.05:
                return NO_INCUMBENT
        _, sol = node_exact(inst, mixed, v, S, unit, CpsatRun(tl, threads, seed), hint=hs)
        if sol is None:
            return NO_INCUMBENT
        for j, (o, st) in sol.items():
            choice[j] = mixed[j].index(o)
            start[j] = st
    for j in range(n):
        if choice[j] is None:
            n_j = order_key[j][1]
            k = next((k for k, o in enumerate(mixed[j]) if o.cls is not None and o.cls[0] == "spread"
                      and o.cls[1] == n_j), None)
            if k is None:
                return NO_INCUMBENT
            choice[j] = k
            start[j] = order_key[j][0]
    return decode(inst, mixed, ModelSolution("-", None, -math.inf, choice, start), method)


def assignment_of(inst: Instance, opts: list[list[Option]], sol: ModelSolution, unit: float) -> tuple[dict, dict]:
    """(j → node or None, j → (start in ``unit``, size)) of a model solution."""
    a, key = {}, {}
    for j, k in enumerate(sol.choice):
        o = opts[j][k]
        a[j] = on_node(o)
        size = o.cls[1] if (o.cls is not None and o.cls[0] == "spread") else (
            o.cls[2] if o.cls is not None else len(o.alloc.gpus))
        key[j] = (sol.start[j] * sol.unit / unit, size)
    return a, key


def assignment_of_schedule(inst: Instance, sched: Schedule, unit: float) -> tuple[dict, dict]:
    """(j → node or None, j → (start in ``unit``, size)) of a schedule."""
    a, key = {}, {}
    for seg in sched.segments:
        j = inst.index[seg.job]
        a[j] = single_node(seg.alloc)
        key[j] = (math.floor(seg.start / unit), len(seg.alloc.gpus))
    return a, key
