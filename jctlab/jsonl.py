"""Append-only JSON-lines files that a kill cannot spoil.

Long runs (the evaluation runner's cells, DAgger's episodes, the daemon's decision log, the fuzz log and the
figure scripts) record each finished piece of work as one JSON line the moment it is done, so that a killed run
resumes where it stopped and loses nothing. :class:`Writer` writes a line whole (its newline last), flushes
and fsyncs it before the next; a run killed while writing leaves at most the bytes of one line without its
newline. :func:`read` and :func:`last` skip them (and with ``repair`` cut them off; a :class:`Writer` cuts them
before it appends), so the next line starts on a line of its own. A whole line that is not JSON is an
:class:`~jctlab.errors.InputError` naming the file and the byte (the file was edited). Blank lines are
skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, Callable, Iterator

from . import limits as L
from .errors import InputError

CHUNK = 65536     # bytes read back at a time from a file's end


def read(path: str | os.PathLike, *, repair: bool = False) -> Iterator[tuple[int, Any]]:
    """(byte offset, value) of every whole line of ``path`` (nothing when it does not exist). The bytes after
    the last newline (a run killed while writing) are skipped, and cut off when ``repair``; a whole line that
    is not JSON is an InputError naming the file and its byte."""
    p = Path(path)
    if not p.exists():
        return
    cut = None
    with open(p, "rb") as f:
        off = 0
        for line in f:
            if not line.endswith(b"\n"):        # only the last line can lack one
                cut = off
                break
            if line.strip():
                try:
                    value = L.loads(line, str(p))      # nesting checked before parsing (no RecursionError)
                except InputError:
                    raise InputError(str(p), f"byte {off}", "not a JSON line (the file was edited?)") from None
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
    before :meth:`write` returns. A partial last line that a kill left is cut off first, so that the first
    new line starts on a line of its own."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _cut_partial_tail(self.path)
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


def last(path: str | os.PathLike, *, repair: bool = False) -> Any:
    """The value of the last whole line of ``path`` (None when there is none), reading the file back from its
    end only (a long log costs no more than a short one). Bytes after the last newline (a kill mid-write) are
    skipped, and cut off when ``repair``; a last whole line that is not JSON is an InputError."""
    p = Path(path)
    if not p.exists():
        return None
    with open(p, "r+b" if repair else "rb") as f:
        size, pos, tail = _read_back(f, lambda tail, pos: bool(_whole_lines(tail, pos)))
        if repair:
            _cut_after_last_newline(f, size, pos, tail)
    lines = _whole_lines(tail, pos)
    return L.loads(lines[-1], str(p)) if lines else None


def _read_back(f: IO[bytes], enough: Callable[[bytes, int], bool]) -> tuple[int, int, bytes]:
    """The file's size, and its bytes from offset ``pos`` on, read back from the end in CHUNK steps until
    ``enough(tail, pos)`` or the start: (size, pos, tail)."""
    size = f.seek(0, os.SEEK_END)
    pos, tail = size, b""
    while pos > 0 and not enough(tail, pos):
        step = min(CHUNK, pos)
        pos -= step
        f.seek(pos)
        tail = f.read(step) + tail
    return size, pos, tail


def _cut_after_last_newline(f: IO[bytes], size: int, pos: int, tail: bytes) -> None:
    end = pos + tail.rfind(b"\n") + 1            # 0 when the file holds no newline at all
    if end < size:
        f.truncate(end)


def _whole_lines(tail: bytes, pos: int) -> list[bytes]:
    """The non-blank lines of ``tail`` (the file's bytes from offset ``pos`` on) known to be whole: ended by a
    newline, and begun by one too unless ``pos`` is the file's start."""
    parts = tail[:tail.rfind(b"\n") + 1].split(b"\n")[:-1]
    return [x for x in parts[(0 if pos == 0 else 1):] if x.strip()]


def _cut_partial_tail(path: Path) -> None:
    """Cut the bytes after the last newline of ``path`` (nothing when it ends with one, or does not exist)."""
    if not path.exists():
        return
    with open(path, "r+b") as f:
        _cut_after_last_newline(f, *_read_back(f, lambda tail, pos: b"\n" in tail))


def append(path: str | os.PathLike, value: Any) -> None:
    """One line appended to ``path`` (a :class:`Writer` opened and closed for it)."""
    with Writer(path) as w:
        w.write(value)
