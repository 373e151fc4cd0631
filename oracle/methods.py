"""The oracle methods behind ``jctlab solve --method cpsat|milp|milp-cbc|brute|bnb|auto``.

Each has the signature ``fn(inst, *, time_limit=None, threads=1, seed=0, hint=None, cache=None,
warm=True) -> Result`` and dispatches on ``inst.problem`` (:mod:`oracle.dispatch`). ``bnb``
(:mod:`formulations.offline.bnb`, small offline instances: exact branch and bound) gives a Result with status
``error`` and the reason on any instance it does not apply to. ``cache`` (None: off; a path; ``True`` or
``"default"``: the default file, see :mod:`oracle.cache`) returns a stored result instead of solving when one
is valid. ``warm`` (default true): the heuristic incumbent and hint.
"""

from __future__ import annotations

from typing import Any, Callable

from jctlab.errors import InputError
from jctlab.model import Instance, Schedule
from jctlab.result import Result

from .cache import cached_call
from .dispatch import dispatch


def _method(name: str) -> Callable[..., Result]:
    def fn(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
           hint: Schedule | None = None, cache: Any = None, warm: bool = True) -> Result:
        options = {} if warm else {"warm": False}
        return cached_call(cache, inst, name, dict(time_limit=time_limit, threads=threads, seed=seed, **options),
                           hint, lambda: dispatch(name, inst, time_limit, threads, seed, hint, options))

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
    fn = METHODS.get(method)
    if fn is None:
        raise InputError("oracle.solve", "method", f"unknown method {method!r} (known: {', '.join(METHODS)})")
    if time_limit is not None and time_limit <= 0:
        raise InputError("oracle.solve", "time_limit", "must be > 0")
    if threads < 1:
        raise InputError("oracle.solve", "threads", "must be >= 1")
    return fn(instance, time_limit=time_limit, threads=threads, seed=seed, hint=hint, cache=cache, warm=warm)
