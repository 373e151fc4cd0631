"""Typed command-line values: argparse ``type=`` functions and the options of methods and policies.

Every number on the command line is parsed by a :class:`jctlab.limits.Range`: a value that is not a
number, not finite, or outside its range is refused with one line naming the flag (exit 2), before
anything is read or computed. ``--key value`` options that argparse leaves to a method or policy are
typed by that function's signature: ``Annotated[float, Range(...)]`` or ``Annotated[str, Choice(...)]``
where the plug-in declares them, else the type of the annotation or of the default (``int``, ``float``,
``bool``, ``str``); an option the function does not take is refused.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from . import limits as L
from .errors import InputError


@dataclass(frozen=True)
class Choice:
    """``typing.Annotated`` metadata: the option is one of ``options``."""

    options: tuple[str, ...]


@dataclass(frozen=True)
class Listed:
    """``typing.Annotated`` metadata: the option is a comma-separated list of numbers, each in ``item``
    (given to the function as a tuple of floats)."""

    item: L.Range


def _bad(msg: str) -> argparse.ArgumentTypeError:
    return argparse.ArgumentTypeError(msg)


def parse_number(raw: str, rng: L.Range) -> float | int:
    """``raw`` as a number in ``rng`` (an int when ``rng.integer``); ValueError with the reason otherwise."""
    s = raw.strip()
    try:
        x = float(s)
    except ValueError:
        raise ValueError(f"expected {'an integer' if rng.integer else 'a number'}, got {L.shorten(raw)}") from None
    if not math.isfinite(x):
        raise ValueError(f"must be finite, got {L.shorten(raw)}")
    why = rng.problem(x)
    if why is not None:
        raise ValueError(why)
    if rng.integer:
        try:
            return int(s)
        except ValueError:
            return int(x)
    return x


def number(rng: L.Range) -> Callable[[str], float | int]:
    """An argparse type: a number in ``rng``."""
    def parse(raw: str) -> float | int:
        try:
            return parse_number(raw, rng)
        except ValueError as e:
            raise _bad(str(e)) from None
    parse.__name__ = "integer" if rng.integer else "number"
    return parse


def integer(lo: int, hi: int) -> Callable[[str], int]:
    return number(L.Range(lo, hi, integer=True))  # type: ignore[return-value]


#: common flags
SEED = integer(0, L.MAX_SEED)
THREADS = integer(1, L.MAX_THREADS)
TIME_LIMIT = number(L.TIME_LIMIT)
ROUND = number(L.Range(0, L.TIME.hi, lo_open=True))


def text(raw: str) -> str:
    """A non-empty string (names, paths)."""
    if not raw.strip():
        raise _bad("must not be empty")
    return raw


def names(raw: str) -> list[str]:
    """A comma-separated list of at least one non-empty name."""
    out = [x.strip() for x in raw.split(",")]
    if not raw.strip() or any(not x for x in out):
        raise _bad(f"expected a comma-separated list of names, got {L.shorten(raw)}")
    return out


def integers(lo: int, hi: int) -> Callable[[str], list[int]]:
    """A comma-separated list of at least one integer in [lo, hi]."""
    item = L.Range(lo, hi, integer=True)

    def parse(raw: str) -> list[int]:
        parts = [x for x in raw.split(",")]
        if not raw.strip() or any(not x.strip() for x in parts):
            raise _bad(f"expected a comma-separated list of integers, got {L.shorten(raw)}")
        try:
            return [int(parse_number(x, item)) for x in parts]
        except ValueError as e:
            raise _bad(str(e)) from None
    parse.__name__ = "integer list"
    return parse


# --------------------------------------------------------------------------- options of plug-ins
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def _coerce(v: str) -> Any:
    """An untyped option (no annotation, no default to read a type from): int, finite float, bool or str."""
    for f in (int, float):
        try:
            x = f(v)
        except ValueError:
            continue
        if isinstance(x, float) and not math.isfinite(x):
            raise ValueError(f"must be finite, got {L.shorten(v)}")
        return x
    if v.lower() in ("true", "false"):
        return v.lower() == "true"
    return v


def _spec(fn: Callable[..., Any], name: str) -> tuple[Any, tuple[Any, ...], inspect.Parameter | None]:
    """(base type or None, Annotated metadata, parameter) of option ``name`` of ``fn``."""
    target = fn.__init__ if inspect.isclass(fn) else fn  # type: ignore[misc]
    try:
        param = inspect.signature(fn).parameters.get(name)
    except (TypeError, ValueError):
        return None, (), None
    try:
        hint = typing.get_type_hints(target, include_extras=True).get(name)
    except Exception:  # noqa: BLE001 - a hint that does not resolve: fall back on the default's type
        hint = None
    meta: tuple[Any, ...] = ()
    if typing.get_origin(hint) is typing.Annotated:
        hint, *rest = typing.get_args(hint)
        meta = tuple(rest)
    return hint, meta, param


def _base(hint: Any, default: Any) -> tuple[Any, bool]:
    """(one of int/float/bool/str or None, whether None is allowed)."""
    optional = default is None
    if hint is not None:
        args = typing.get_args(hint)
        if type(None) in args:
            optional = True
            rest = [a for a in args if a is not type(None)]
            hint = rest[0] if len(rest) == 1 else (str if str in rest else None)   # text covers the others
        if hint in (int, float, bool, str):
            return hint, optional
        return None, optional
    if default is not None and type(default) in (int, float, bool, str):
        return type(default), optional
    return None, optional


def parse_option(fn: Callable[..., Any], name: str, raw: str) -> Any:
    """The value of option ``name`` of ``fn`` from its command-line text; ValueError with the reason."""
    hint, meta, param = _spec(fn, name)
    default = None if param is None or param.default is inspect.Parameter.empty else param.default
    base, optional = _base(hint, default)
    if optional and raw.lower() in ("none", "null"):
        return None
    rng = next((m for m in meta if isinstance(m, L.Range)), None)
    choice = next((m for m in meta if isinstance(m, Choice)), None)
    listed = next((m for m in meta if isinstance(m, Listed)), None)
    if listed is not None:
        parts = raw.split(",")
        if not raw.strip() or any(not x.strip() for x in parts):
            raise ValueError(f"expected a comma-separated list of numbers, got {L.shorten(raw)}")
        return tuple(float(parse_number(x, listed.item)) for x in parts)
    if base is bool:
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise ValueError(f"expected true or false, got {L.shorten(raw)}")
    if base in (int, float):
        r = rng or L.Range(-math.inf, math.inf, integer=base is int)
        if base is int and not r.integer:
            r = L.Range(r.lo, r.hi, r.lo_open, r.zero, True)
        return parse_number(raw, r)
    if base is str or choice is not None:
        if choice is not None and raw not in choice.options:
            raise ValueError(f"must be one of {'|'.join(choice.options)}, got {L.shorten(raw)}")
        if not raw:
            raise ValueError("must not be empty")
        return raw
    x = _coerce(raw)
    if rng is not None and isinstance(x, (int, float)) and not isinstance(x, bool):
        why = rng.problem(x)
        if why is not None:
            raise ValueError(why)
    return x


def parse_options(fn: Callable[..., Any], extra: list[str] | tuple[str, ...], what: str) -> dict[str, Any]:
    """``--key value`` / ``--key=value`` pairs left over by argparse, typed by ``fn``'s signature; an
    InputError naming the flag for a pair that is malformed, unknown to ``fn`` or of the wrong type."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = None
    open_ended = params is None or any(p.kind is p.VAR_KEYWORD for p in params.values())
    opts: dict[str, Any] = {}
    it = iter(extra)
    for tok in it:
        if not tok.startswith("--") or len(tok) < 3:
            raise InputError("command line", tok, "unexpected argument")
        key, eq, val = tok[2:].partition("=")
        flag = f"--{key}"
        if not eq:
            nxt = next(it, None)
            if nxt is None or nxt.startswith("--"):
                raise InputError("command line", flag, "needs a value")
            val = nxt
        name = key.replace("-", "_")
        if not name.isidentifier():
            raise InputError("command line", flag, "not an option name")
        if params is not None and not open_ended and name not in params:
            raise InputError("command line", flag, f"not an option of {what}")
        if name in ("inst", "instance", "self", "time_limit", "threads", "seed", "hint"):
            raise InputError("command line", flag, f"not an option of {what} (a flag of the verb, or internal)")
        if name in opts:
            raise InputError("command line", flag, "given twice")
        try:
            opts[name] = parse_option(fn, name, val)
        except ValueError as e:
            raise InputError("command line", flag, str(e)) from None
    return opts


def out_path(raw: str) -> str:
    """An output file that can be written, checked before any work: not empty, not a directory, not under
    a file, in a folder (or under the first existing ancestor of one) that this user may write in."""
    if not raw.strip():
        raise _bad("must not be empty")
    p = Path(raw)
    if p.is_dir() or raw.endswith(("/", os.sep)):
        raise _bad(f"{raw} is a directory, not a file")
    _writable_under(raw, p.parent)
    return raw


def out_dir(raw: str) -> str:
    """An output folder (a run folder, a checkpoint folder), checked before any work: not empty, not a
    file, not under a file; an existing one this user may write in, or one that can be created."""
    if not raw.strip():
        raise _bad("must not be empty")
    p = Path(raw)
    if p.exists() and not p.is_dir():
        raise _bad(f"{raw} is a file, not a folder")
    _writable_under(raw, p)
    return raw


def _writable_under(raw: str, folder: Path) -> None:
    """``folder``, or its first existing ancestor, is a folder this user may write in."""
    a = folder
    while not a.exists() and a != a.parent:
        a = a.parent
    if not a.is_dir():
        raise _bad(f"{raw}: {a} is a file, not a folder")
    if not os.access(a, os.W_OK | os.X_OK):
        raise _bad(f"{raw}: cannot write in {a}")


# --------------------------------------------------------------------------- option types shared by plug-ins
#: a round length in seconds
RoundS = typing.Annotated[float, L.Range(0, L.TIME.hi, lo_open=True)]
#: a count of candidates, samples, sweeps... (0 allowed)
Count = typing.Annotated[int, L.Range(0, 1_000_000, integer=True)]
#: a fairness weight
Fairness = typing.Annotated[float, L.Range(0, 1_000)]
#: a relative price step of the type market
MarketStep = typing.Annotated[float, L.Range(0, 10, lo_open=True)]
