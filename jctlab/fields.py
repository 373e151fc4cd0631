"""Typed reading of parsed JSON: every problem becomes an :class:`InputError` naming the file and the field as a
JSON path (``jobs[3].samples_per_s.v100``), numbers checked against the limits of SPEC §7.

The instance and schedule readers (:mod:`jctlab.model`) and the suite reader of the evaluation harness build on
:class:`FieldReader`.
"""

from __future__ import annotations

import math
from typing import Any

from . import limits as L
from .errors import InputError


class FieldReader:
    """Small typed accessors that turn every problem into an InputError with a JSON path (the instance and
    schedule readers here, the suite reader of the evaluation harness)."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, reason: str) -> InputError:
        return InputError(self.source, path, reason)

    def obj(self, v: Any, path: str) -> dict:
        if not isinstance(v, dict):
            raise self.fail(path, f"expected an object, got {json_kind(v)}")
        return v

    def lst(self, v: Any, path: str) -> list:
        if not isinstance(v, list):
            raise self.fail(path, f"expected a list, got {json_kind(v)}")
        return v

    def get(self, d: dict, key: str, path: str) -> Any:
        if key not in d:
            raise self.fail(join_path(path, key), "missing required field")
        return d[key]

    def num(self, v: Any, path: str, rng: L.Range) -> float:
        """A JSON number (never a boolean, string or null), finite and in ``rng`` (SPEC §7)."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(path, f"expected a number, got {json_kind(v)}")
        try:
            x = float(v)
        except OverflowError:
            x = math.inf
        if not math.isfinite(x):
            raise self.fail(path, f"must be finite, got {L.shorten(v)}")
        why = rng.problem(x)
        if why is not None:
            raise self.fail(path, why)
        return x

    def int_(self, v: Any, path: str, lo: int = 0, hi: int = L.MAX_GPUS) -> int:
        """A JSON integer (``2.0`` too; never a boolean) in ``[lo, hi]``."""
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(path, f"expected an integer, got {json_kind(v)}")
        if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
            raise self.fail(path, f"expected an integer, got {L.shorten(v)}")
        if not lo <= v <= hi:
            raise self.fail(path, f"must be in [{lo}, {hi}], got {L.shorten(v)}")
        return int(v)

    def opt_obj(self, v: Any, path: str) -> dict:
        """An optional object: null means empty; any other non-object (``[]``, ``""``, ``0``) is an error."""
        return {} if v is None else self.obj(v, path)

    def opt_lst(self, v: Any, path: str) -> list:
        return [] if v is None else self.lst(v, path)

    def count(self, items: list, path: str, most: int, what: str) -> list:
        if len(items) > most:
            raise self.fail(path, f"{len(items)} {what} (at most {most})")
        return items

    def extra(self, d: dict, known: set[str], path: str) -> dict[str, Any]:
        """Unknown fields, kept and written back: their numbers must be finite."""
        out = {k: v for k, v in d.items() if k not in known}
        for k, v in out.items():
            L.check_free_value(v, self.source, join_path(path, k))
        return out

    def str_(self, v: Any, path: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(path, f"expected a non-empty string, got {json_kind(v)}")
        return v

    def choice(self, v: Any, path: str, options: tuple[str, ...]) -> str:
        if v not in options:
            raise self.fail(path, f"must be one of {'|'.join(options)}, got {v!r}")
        return v

    def fmt(self, d: dict, expected: str) -> None:
        f = d.get("format")
        if f is None:
            raise self.fail("format", f"missing required field (expected {expected!r})")
        if f != expected:
            raise self.fail("format", f"unsupported format {f!r} (this jctlab reads {expected!r})")


def json_kind(v: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), type(v).__name__
    )


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


__all__ = ["FieldReader", "join_path", "json_kind"]
