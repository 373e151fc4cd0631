"""Which back end solves an instance for a method, per problem class; busy periods solved block by block.

========== ======================================= =================================================
class      cpsat / milp / milp-cbc                 brute / bnb / auto
========== ======================================= =================================================
static     formulations.static.cpsat / .milp       formulations.brute / (error) / oracle.portfolio
offline    formulations.offline.cpsat / .milp      formulations.brute / formulations.offline.bnb /
                                                   oracle.portfolio
preemptive oracle.preemptive                       (error) / (error) / oracle.preemptive
========== ======================================= =================================================

``cpsat``, ``milp``, ``milp-cbc`` and ``auto`` first try the exact polynomial special cases
(:mod:`formulations.special`: SPT, WSPT, Horn's and Bruno-Coffman-Sethi's assignments, SRPT), which answer
``optimal`` at once when the instance is one of them.

Offline instances whose jobs fall into busy periods (the cluster can be idle before a later job arrives) are
solved block by block with the same method (:mod:`oracle.blocks`: the bounds and schedules add up).
The back ends are imported when first used: a process that solves with one method does not load the
solvers of the others.
"""

from __future__ import annotations

import time
from typing import Any

from jctlab.model import Instance, Schedule
from jctlab.result import Result, SolveStatus

from . import blocks

#: the methods that try the textbook special cases first (brute and bnb stay independent cross-checks)
SPECIAL_METHODS = ("cpsat", "milp", "milp-cbc", "auto")


def error(method: str, message: str, t0: float) -> Result:
    return Result(None, None, None, SolveStatus.ERROR, time.perf_counter() - t0, method, "", {"error": message})


def dispatch(method: str, inst: Instance, time_limit: float | None, threads: int, seed: int,
             hint: Schedule | None, options: dict[str, Any]) -> Result:
    """Solve ``inst`` with ``method`` (offline instances with busy periods block by block)."""
    if method in blocks.METHODS and inst.problem == "offline":
        t0 = time.perf_counter()
        found = blocks.split(inst)
        if found is not None:
            # bounds shared by another solver are the whole instance's, not a block's
            options = {k: v for k, v in options.items() if k != "shared"}
            return blocks.solve(method, inst, found.parts, found.witness, time_limit=time_limit, threads=threads,
                                seed=seed, hint=hint, options=options, dispatch=dispatch_whole, t0=t0)
    return dispatch_whole(method, inst, time_limit, threads, seed, hint, options)


def dispatch_whole(method: str, inst: Instance, time_limit: float | None, threads: int, seed: int,
                   hint: Schedule | None, options: dict[str, Any]) -> Result:
    """Solve ``inst`` with ``method`` as one instance. The imports below keep each back end's solver libraries
    out of the processes that use another."""
    t0 = time.perf_counter()
    p = inst.problem
    if method in SPECIAL_METHODS:
        from formulations.special.solve import solve as special_solve

        found = special_solve(inst, method)
        if found is not None:
            return found
        if p == "preemptive":
            from . import preemptive

            return preemptive.solve(method, inst, time_limit, threads, seed, hint, options, member=dispatch)
    if method == "auto":
        from .portfolio import portfolio

        return portfolio(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, member=dispatch,
                         **options)
    if method == "bnb":
        from formulations.offline import bnb

        return bnb.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint)
    if method == "brute":
        if p == "preemptive":
            return error(method, "brute force covers the static and offline classes only", t0)
        from formulations import brute

        return brute.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint)
    if p == "static":
        if method == "cpsat":
            from formulations.static import cpsat as static_cpsat

            return static_cpsat.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, **options)
        from formulations.static import milp as static_milp

        backend = "highs" if method == "milp" else "cbc"
        return static_milp.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, backend=backend,
                                 **options)
    if p == "offline":
        from formulations.special import bound as special_bound

        # the textbook optimum with the releases shifted bounds every schedule: it lifts the back end's bound
        shift = special_bound.release_shift_bound(inst)
        left = None if time_limit is None else max(0.01, time_limit - (time.perf_counter() - t0))
        if method == "cpsat":
            from formulations.offline import cpsat as offline_cpsat

            r = offline_cpsat.solve(inst, time_limit=left, threads=threads, seed=seed, hint=hint, **options)
            return special_bound.lifted(r, shift)
        from formulations.offline import milp as offline_milp

        backend = "highs" if method == "milp" else "cbc"
        r = offline_milp.solve(inst, time_limit=left, threads=threads, seed=seed, hint=hint, backend=backend,
                               **options)
        return special_bound.lifted(r, shift)
    return error(method, f"no back end for the {p} class", t0)
