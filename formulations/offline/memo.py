"""Per-instance memo of what the offline oracles compute more than once per instance.

The option sets take 0.2-1 s on 32-64 GPUs and the greedy's dispatch rules up to a second at 256 GPUs,
and the per-job bound, the LPs, the models and the portfolio's members all start from them. An
:class:`jctlab.model.Instance` is not hashable (it holds dicts), so entries are keyed by the instance's
identity and a weak reference checks that the object is still the one that was stored (an id can be
reused once its object is gone; the entry is dropped with its instance).
"""

from __future__ import annotations

import weakref
from typing import Any, Callable

from jctlab.model import Instance

_MEMO: dict[tuple, tuple[weakref.ref, Any]] = {}


def memo(inst: Instance, key: tuple, compute: Callable[[], Any]) -> Any:
    """``compute()`` once per instance object and ``key`` (which holds every argument and parameter the
    result depends on)."""
    if not memoized(inst, key):
        remember(inst, key, compute())
    return recall(inst, key)


def remember(inst: Instance, key: tuple, value: Any) -> None:
    k = (id(inst), key)
    _MEMO[k] = (weakref.ref(inst), value)
    weakref.finalize(inst, _MEMO.pop, k, None)


def memoized(inst: Instance, key: tuple) -> bool:
    hit = _MEMO.get((id(inst), key))
    return hit is not None and hit[0]() is inst


def recall(inst: Instance, key: tuple) -> Any:
    """The value stored for ``inst`` and ``key`` (:func:`memoized` must hold)."""
    return _MEMO[(id(inst), key)][1]


def fresh_lists(opts: list[list[Any]]) -> list[list[Any]]:
    """Callers get their own lists over the same frozen options."""
    return [list(ol) for ol in opts]
