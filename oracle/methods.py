"""The oracle methods behind ``jctlab solve --method cpsat|milp|milp-cbc|brute|bnb|auto``.

Each has the signature ``fn(inst, *, time_limit=None, threads=1, seed=0, hint=None, cache=None,
warm=True) -> Result`` and dispatches on ``inst.problem`` (:mod:`oracle.dispatch`). ``bnb``
(:mod:`formulations.offline.bnb`, small offline instances: exact branch and bound) gives a Result with status
``error`` and the reason on an offline instance it does not apply to (too many jobs or GPU subsets). A method
asked for a problem class or objective it does not cover (:data:`COVERS`: ``brute`` on a preemptive instance,
``bnb`` on a static or preemptive one or on ``makespan``) raises :class:`InputError` naming the instance's
field, before anything is computed (exit 2 on the command line). ``cache`` (None: off; a path; ``True`` or
``"default"``: the default file, see :mod:`oracle.cache`) returns a stored result instead of solving when one
is valid. ``warm`` (default true): the heuristic incumbent and hint.
"""

from __future__ import annotations

from typing import Any, Callable

from jctlab.errors import InputError
from jctlab.model import OBJECTIVES, PROBLEMS, Instance, Schedule
from jctlab.result import Result

from .cache import cached_call
from .dispatch import dispatch


#: (problem classes, objectives) each method covers
COVERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "brute": (("static", "offline"), OBJECTIVES),
    "bnb": (("offline",), ("mean_jct", "weighted_jct")),
}


def check_covers(name: str, inst: Instance) -> None:
    """InputError (naming the instance and field) when method ``name`` does not cover ``inst``'s class or objective."""
    problems, objectives = COVERS.get(name, (PROBLEMS, OBJECTIVES))
    if inst.problem not in problems:
        raise InputError(inst.name, "problem", f"method {name} covers {' and '.join(problems)} instances, "
                         f"not {inst.problem}")
    if inst.objective not in objectives:
        raise InputError(inst.name, "objective", f"method {name} minimizes {' or '.join(objectives)}, "
                         f"not {inst.objective}")


def _method(name: str) -> Callable[..., Result]:
    def fn(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
           hint: Schedule | None = None, cache: str | bool | None = None, warm: bool = True) -> Result:
        check_covers(name, inst)
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
