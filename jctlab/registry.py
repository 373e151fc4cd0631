"""Plug-in points, read from entry points so the core imports none of the other packages.

Groups (declared in pyproject.toml by each package):
- ``jctlab.methods``: NAME = module:solver  (a :class:`jctlab.result.Solver`)
- ``jctlab.policies``: NAME = module:factory  (``factory(inst, seed=0, **options) -> Policy``)
- ``jctlab.policy_families``: NAME = module:resolve  (``resolve(name) -> factory | None``, for
  composite names such as ``fifo+pal``; optional attributes ``pattern``, what it accepts, and ``featured``,
  the names the leaderboard runs by default)
- ``jctlab.commands``: NAME = module:register  (``register(subparsers)`` adds CLI verbs)
- ``jctlab.instance_kinds``: NAME = module:kind  (an object with ``help``, ``add_arguments(parser)``
  and ``build(args) -> Instance``, for ``jctlab make-instance NAME``)
"""

from __future__ import annotations

from functools import lru_cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

from .errors import InputError


@lru_cache(maxsize=None)
def group(name: str) -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=name)}


def load(group_name: str, name: str) -> Any | None:
    ep = group(group_name).get(name)
    return None if ep is None else _load(ep)


def _load(ep: EntryPoint) -> Any:
    """Load a plug-in; a broken or missing one is a clear error, never a traceback."""
    try:
        return ep.load()
    except (ImportError, AttributeError) as e:
        raise InputError("plug-in", f"{ep.group}:{ep.name}",
                         f"cannot load {ep.value} ({e.__class__.__name__}: {e})") from None


def method(name: str) -> Callable[..., Any] | None:
    return load("jctlab.methods", name)


def policy_factory(name: str) -> Callable[..., Any] | None:
    f = load("jctlab.policies", name)
    if f is not None:
        return f
    broken = None
    for ep in sorted(group("jctlab.policy_families").values(), key=lambda e: e.name):
        try:
            resolve = _load(ep)
        except Exception as e:  # one broken family must not hide the others
            broken = broken or e
            continue
        f = resolve(name)
        if f is not None:
            return f
    if broken is not None:
        raise broken
    return None


def names(group_name: str) -> list[str]:
    return sorted(group(group_name))


def family_patterns() -> list[str]:
    """What each policy family accepts, as its resolver's optional ``pattern`` attribute says (else its
    entry-point name); a family that fails to load is named with "(failed to load)"."""
    out = []
    for ep in sorted(group("jctlab.policy_families").values(), key=lambda e: e.name):
        try:
            out.append(str(getattr(_load(ep), "pattern", ep.name)))
        except Exception:
            out.append(f"{ep.name} (failed to load)")
    return out


def featured_policies() -> list[str]:
    """The names policy families ask the leaderboard to run by default (their resolver's optional
    ``featured`` attribute: e.g. the shipped learned policies), in family order; a family that fails to
    load features nothing."""
    out: list[str] = []
    for ep in sorted(group("jctlab.policy_families").values(), key=lambda e: e.name):
        try:
            out += [str(n) for n in getattr(_load(ep), "featured", ())]
        except Exception:  # noqa: BLE001 - one broken family must not hide the others
            continue
    return out
