"""A run folder: finished cells as JSON lines, schedules as files, written the moment a cell finishes.

``RUN_DIR/cells.jsonl`` holds one row per finished cell, keyed by the cell's content hash. Each line is
written whole, flushed and fsynced before the next cell is recorded; a run killed while writing leaves
at most one partial last line, which the next open cuts off (that cell runs again). Schedules go to
``RUN_DIR/schedules/KEY.json`` (atomically, before their row), so a row never names a missing file and
file names never carry a method's name (which may hold ``+``, ``:`` or ``/``).
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path
from typing import Any, Iterator

from jctlab import jsonl
from jctlab.errors import InputError
from jctlab.model import load_schedule, write_json_atomic

from .cells import METRICS, TIMING

CELLS = "cells.jsonl"


class CellStore:
    def __init__(self, run_dir: str | os.PathLike):
        self.dir = Path(run_dir)
        self.path = self.dir / CELLS
        self.rows: dict[str, dict[str, Any]] = {}
        self._f: jsonl.Writer | None = None

    def open(self) -> "CellStore":
        """Read the finished cells (cutting off a partial last line) and open the file for appending."""
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "schedules").mkdir(exist_ok=True)
        self.rows = dict(read_rows(self.path, repair=True))
        self._f = jsonl.Writer(self.path)
        return self

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "CellStore":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def done(self, key: str) -> bool:
        return key in self.rows

    def schedule_path(self, key: str) -> Path:
        return self.dir / "schedules" / f"{key}.json"

    def add(self, row: dict[str, Any], schedule: dict[str, Any] | None) -> None:
        """Record a finished cell: its schedule first, then its row (one whole, synced line)."""
        key = row["key"]
        if key in self.rows:          # a cell computed twice (never by the runners): keep the first
            return
        if schedule is not None:
            write_json_atomic(self.schedule_path(key), schedule)
            row = dict(row, schedule=f"schedules/{key}.json")
        else:
            row = dict(row, schedule=None)
        assert self._f is not None, "CellStore.add before open"
        self._f.write(row)
        self.rows[key] = row


#: what the tables and the report read of a row (cells.py writes them): field -> the JSON types allowed
_TEXT, _NUM, _OPT_NUM, _OPT_TEXT = (str,), (int, float), (int, float, type(None)), (str, type(None))
ROW_FIELDS: dict[str, tuple[type, ...]] = {
    "instance": _TEXT, "method": _TEXT, "kind": _TEXT, "status": _TEXT, "seed": (int,),
    "valid": (bool, type(None)), "objective": _OPT_NUM, "lower_bound": _OPT_NUM, "schedule": _OPT_TEXT,
    "jcts": (list, type(None)), "error": _OPT_TEXT, "bound_class": _OPT_TEXT, "decisions": (int, type(None)),
    **{f: _OPT_NUM for f in TIMING + METRICS},
}
_KEY = re.compile(r"[0-9a-f]{8,64}")


def row_problem(row: dict[str, Any]) -> str | None:
    """Why a row read back from ``cells.jsonl`` cannot be a cell's row, or None: each field of ROW_FIELDS
    of its type (numbers finite, no boolean for a number), the schedule the one file its key names."""
    for f, kinds in ROW_FIELDS.items():
        v = row.get(f)
        if not isinstance(v, kinds) or (isinstance(v, bool) and bool not in kinds):
            return f"{f}: {type(v).__name__} is not a {'/'.join(k.__name__ for k in kinds)}"
        if isinstance(v, float) and not math.isfinite(v):
            return f"{f}: not finite"
    if not _KEY.fullmatch(row["key"]):
        return "key: not a cell key"
    # a field left out reads as null, as above (rows of older versions may lack one)
    if row.get("schedule") is not None and row["schedule"] != f"schedules/{row['key']}.json":
        return "schedule: not the schedule file of its key"
    if row.get("jcts") is not None and not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                               and math.isfinite(x) and x >= 0 for x in row["jcts"]):
        return "jcts: not a list of finite numbers >= 0"
    return None


def read_rows(path: str | os.PathLike, repair: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """(key, row) of every whole line, first occurrence of a key only. A last line without its newline
    (a run killed while writing) is skipped, and cut off when ``repair`` (:func:`jctlab.jsonl.read`); a whole
    line that is not a cell's row is an error."""
    seen: set[str] = set()
    for off, row in jsonl.read(path, repair=repair):
        key = row.get("key") if isinstance(row, dict) else None
        if not isinstance(key, str):
            raise InputError(str(path), f"byte {off}", "a row without its key")
        why = row_problem(row)
        if why is not None:
            raise InputError(str(path), f"byte {off}", f"{why} (the file was edited?)")
        if key not in seen:
            seen.add(key)
            yield key, row


def check_run(run_dir: str | os.PathLike) -> None:
    """A resumed run's finished cells read back before anything is written: every row (:func:`read_rows`) and the
    schedule file it names (the report draws them). Files that another program damaged are refused, naming the
    file; the store never leaves one so (each is written whole before its row)."""
    d = Path(run_dir)
    for key, row in read_rows(d / CELLS):
        if row.get("schedule") is None:
            continue
        try:
            load_schedule(d / row["schedule"])
        except InputError as e:
            raise InputError(e.source, e.field, f"{e.reason} (a damaged cell: delete the line of key {key} in "
                             f"{CELLS} to run it again)") from None
