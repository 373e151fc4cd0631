"""The oracle methods behind ``jctlab solve --method cpsat|milp|milp-cbc|brute|bnb|auto``.

Each has the signature ``fn(inst, *, time_limit=None, threads=1, seed=0, hint=None, cache=None,
**options) -> Result`` and dispatches on ``inst.problem``:

========== ===================================== ===================================================
class      cpsat / milp / milp-cbc               brute / auto
========== ===================================== ===================================================
static     formulations.static_cpsat / _milp     formulations.brute / oracle.portfolio
offline    formulations.offline_cpsat / _milp    formulations.brute / oracle.portfolio
preemptive formulations.preemptive_bound         (error) / preemptive_bound (``bound_only``)
========== ===================================== ===================================================

``bnb`` (:mod:`formulations.offline_bnb`, small offline instances: exact branch and bound) gives a Result
with status ``error`` and the reason on any instance it does not apply to.

Offline instances whose jobs fall into busy periods (the cluster can be idle before a later job arrives) are
solved block by block with the same method (:mod:`oracle.blocks`: the bounds and schedules add up).

Modules of other classes are imported lazily; one that does not exist yet gives a Result with
status ``error`` and a message. ``cache`` (None: off; a path; ``True`` or ``"default"``: the default
file, see :mod:`oracle.cache`) returns a stored result instead of solving when one is valid.
Options: ``warm`` (bool, heuristic incumbent/hint, default true) for the static models.
"""

from __future__ import annotations

import importlib
import time
from typing import Any, Callable

from jctlab.model import Instance, Schedule
from jctlab.result import Result, SolveStatus

from . import blocks
from .cache import cached_call


def _error(method: str, message: str, t0: float) -> Result:
    return Result(None, None, None, SolveStatus.ERROR, time.perf_counter() - t0, method, "", {"error": message})


def _module(name: str, method: str, t0: float) -> tuple[Any, Result | None]:
    try:
        return importlib.import_module(name), None
    except ImportError as e:
        return None, _error(method, f"{name} is not available yet ({e})", t0)


def _dispatch(method: str, inst: Instance, time_limit: float | None, threads: int, seed: int,
              hint: Schedule | None, options: dict[str, Any]) -> Result:
    """Offline instances whose jobs fall into busy periods are solved block by block (:mod:`oracle.blocks`)."""
    if method in blocks.METHODS and inst.problem == "offline":
        t0 = time.perf_counter()
        found = blocks.split(inst)
        if found is not None:
            return blocks.solve(method, inst, found[0], found[1], time_limit=time_limit, threads=threads, seed=seed,
                                hint=hint, options=options, dispatch=_dispatch_whole, t0=t0)
    return _dispatch_whole(method, inst, time_limit, threads, seed, hint, options)


def _dispatch_whole(method: str, inst: Instance, time_limit: float | None, threads: int, seed: int,
                    hint: Schedule | None, options: dict[str, Any]) -> Result:
    t0 = time.perf_counter()
    p = inst.problem
    if method == "auto":
        from .portfolio import portfolio

        return portfolio(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, **options)
    if method == "bnb":
        from formulations import offline_bnb

        return offline_bnb.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint)
    if method == "brute":
        if p == "preemptive":
            return _error(method, "brute force covers the static and offline classes only", t0)
        from formulations import brute

        return brute.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint)
    if p == "static":
        if method == "cpsat":
            from formulations import static_cpsat

            return static_cpsat.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, **options)
        from formulations import static_milp

        backend = "highs" if method == "milp" else "cbc"
        return static_milp.solve(inst, time_limit=time_limit, threads=threads, seed=seed, hint=hint, backend=backend,
                                 **options)
    if p == "offline":
        mod_name = "formulations.offline_cpsat" if method == "cpsat" else "formulations.offline_milp"
        mod, err = _module(mod_name, method, t0)
        if err is not None:
            return err
        kw: dict[str, Any] = dict(time_limit=time_limit, threads=threads, seed=seed, hint=hint, **options)
        if method != "cpsat":
            kw["backend"] = "highs" if method == "milp" else "cbc"
        try:
            return mod.solve(inst, **kw)
        except TypeError as e:  # a colleague's signature without some option
            return _error(method, f"{mod_name}.solve: {e}", t0)
    # preemptive: a lower bound only
    mod, err = _module("formulations.preemptive_bound", method, t0)
    if err is not None:
        return err
    lb = mod.lower_bound(inst, time_limit, threads)
    return Result(None, None, float(lb), SolveStatus.BOUND_ONLY, time.perf_counter() - t0, f"preemptive-bound/{method}", "",
                  {"time_limit": time_limit, "threads": threads, "seed": seed})


def _method(name: str) -> Callable[..., Result]:
    def fn(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
           hint: Schedule | None = None, cache: Any = None, warm: bool = True) -> Result:
        options = {} if warm else {"warm": False}
        return cached_call(cache, inst, name, dict(time_limit=time_limit, threads=threads, seed=seed, **options),
                           hint, lambda: _dispatch(name, inst, time_limit, threads, seed, hint, options))

    fn.__name__ = name.replace("-", "_")
    fn.__doc__ = f"Oracle method {name!r} (see the module docstring)."
    return fn


cpsat = _method("cpsat")
milp = _method("milp")
milp_cbc = _method("milp-cbc")
brute = _method("brute")
bnb = _method("bnb")
auto = _method("auto")

METHODS = {"cpsat": cpsat, "milp": milp, "milp-cbc": milp_cbc, "brute": brute, "bnb": bnb, "auto": auto}


def solve(instance: Instance, method: str = "auto", time_limit: float | None = None, threads: int = 1,
          seed: int = 0, hint: Schedule | None = None, cache: Any = None, warm: bool = True) -> Result:
    """The oracle's front door: ``oracle.solve(instance, method="auto", ...) -> Result``."""
    from jctlab.errors import InputError

    fn = METHODS.get(method)
    if fn is None:
        raise InputError("oracle.solve", "method", f"unknown method {method!r} (known: {', '.join(METHODS)})")
    if time_limit is not None and time_limit <= 0:
        raise InputError("oracle.solve", "time_limit", "must be > 0")
    if threads < 1:
        raise InputError("oracle.solve", "threads", "must be >= 1")
    return fn(instance, time_limit=time_limit, threads=threads, seed=seed, hint=hint, cache=cache, warm=warm)
