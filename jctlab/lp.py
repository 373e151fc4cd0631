"""PuLP, for the project's LP and MILP models: import it from here (``from jctlab.lp import pulp``).

PuLP keeps the error of each solver it could not load as a class attribute (``COPT_DLL.err``, ``CPLEX_PY.err``...),
traceback included. A traceback holds its frames, and each frame the one that called it, so every frame on the stack
when PuLP was first imported stayed alive with its local variables until the process ended: the instance, policy
and million-segment schedule of the ``jctlab simulate`` that resolved a policy family, for one, and then the
seconds it takes to free them at exit. The tracebacks are dropped here once; the errors keep their messages.
"""

from __future__ import annotations

import sys

import pulp


def _drop_tracebacks(e: BaseException | None) -> None:
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__context__ or e.__cause__


def _drop_stored_tracebacks() -> None:
    """Every exception a PuLP module or one of its classes holds, without its traceback."""
    for name, module in list(sys.modules.items()):
        if name != "pulp" and not name.startswith("pulp."):
            continue
        for value in list(vars(module).values()):
            if isinstance(value, BaseException):
                _drop_tracebacks(value)
            elif isinstance(value, type):
                for attr in list(vars(value).values()):
                    if isinstance(attr, BaseException):
                        _drop_tracebacks(attr)


_drop_stored_tracebacks()

__all__ = ["pulp"]
