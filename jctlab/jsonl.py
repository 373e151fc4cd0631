"""Append-only JSON-lines files that a kill cannot spoil.

Long runs (the evaluation runner's cells, DAgger's episodes, the daemon's decision log, the fuzz log and the
figure scripts) record each finished piece of work as one JSON line the moment it is done, so that a killed run
resumes where it stopped and loses nothing. :class:`Writer` writes a line whole, flushes and fsyncs it before
the next; a run killed while writing leaves at most one partial last line. :func:`read` skips that line (and
with ``repair`` cuts it off, so that the next line appended starts on a line of its own); a bad line anywhere
else is an :class:`~jctlab.errors.InputError` naming the file and the byte (the file was edited). Blank lines
are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, Iterator

from . import limits as L
from .errors import InputError


def read(path: str | os.PathLike, *, repair: bool = False) -> Iterator[tuple[int, Any]]:
    """(byte offset, value) of every whole line of ``path`` (nothing when it does not exist). A last line
    that is not whole JSON ending in a newline (a run killed while writing) is skipped, and cut off when
    ``repair``; any other line that is not JSON is an InputError."""
    p = Path(path)
    if not p.exists():
        return
    size = p.stat().st_size
    cut = None
    with open(p, "rb") as f:
        off = 0
        for line in f:
            last = off + len(line) == size
            if line.strip():
                try:
                    if not line.endswith(b"\n"):
                        raise ValueError("partial line")
                    value = L.loads(line, str(p))      # nesting checked before parsing (no RecursionError)
                except (ValueError, InputError):
                    if not last:
                        raise InputError(str(p), f"byte {off}", "not a JSON line (the file was edited?)") from None
                    cut = off
                    break
                yield off, value
            off += len(line)
    if cut is not None and repair:
        with open(p, "r+b") as f:
            f.truncate(cut)


def read_all(path: str | os.PathLike, *, repair: bool = False) -> list[Any]:
    """The values of :func:`read`, in order."""
    return [v for _, v in read(path, repair=repair)]


class Writer:
    """Appends JSON lines to ``path`` (made with its folder when missing), each whole, flushed and fsynced
    before :meth:`write` returns. Open it after reading the file with ``repair`` (a partial last line left by a
    kill would otherwise join the first new one)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f: IO[str] | None = open(self.path, "a", encoding="utf-8")

    def write(self, value: Any) -> None:
        """One JSON value as one line (NaN and infinities refused: write None for them)."""
        self.write_json(json.dumps(value, allow_nan=False, separators=(",", ":")))

    def write_json(self, text: str) -> None:
        """One JSON text serialised already (a single line)."""
        if "\n" in text:
            raise ValueError("a JSON line may not hold a newline")
        assert self._f is not None, "Writer.write after close"
        self._f.write(text + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())

    @property
    def empty(self) -> bool:
        """Nothing written to the file yet (by anyone)."""
        assert self._f is not None
        return self._f.tell() == 0

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def append(path: str | os.PathLike, value: Any) -> None:
    """One line appended to ``path`` (a :class:`Writer` opened and closed for it)."""
    with Writer(path) as w:
        w.write(value)
