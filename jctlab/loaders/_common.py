"""Shared helpers of the loaders: data directory, shipped tables, checked CSV reading, clusters."""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from ..errors import InputError

TABLES = Path(__file__).resolve().parent.parent / "tables"

# Default CPU / memory per GPU of a node: Synergy's fair share (a 24-CPU, 500-GB, 8-GPU server).
CPUS_PER_GPU = 3.0
MEM_GB_PER_GPU = 62.5


def default_data_dir() -> Path | None:
    """The raw public data directory, or None when there is none.

    ``$JCTLAB_DATA`` if set (even when it does not exist, so a wrong value is noticed), else
    ``<repo>/../shared/data`` located from the package's parent directory, else from the current
    directory (``./../shared/data`` and ``./shared/data``), the first that exists.
    """
    env = os.environ.get("JCTLAB_DATA")
    if env:
        p = Path(env).expanduser()
        return p if p.is_dir() else None
    repo = Path(__file__).resolve().parent.parent.parent
    for cand in (repo.parent / "shared" / "data", Path.cwd().parent / "shared" / "data",
                 Path.cwd() / "shared" / "data"):
        if cand.is_dir():
            return cand.resolve()
    return None


def require_data_dir(data_dir: str | os.PathLike | None, what: str) -> Path:
    """``data_dir`` or the default one; InputError naming ``what`` when neither exists."""
    if data_dir is not None:
        p = Path(data_dir)
        if not p.is_dir():
            raise InputError(str(p), "", f"data directory not found (needed for {what})")
        return p
    p = default_data_dir()
    if p is None:
        raise InputError("JCTLAB_DATA", "", f"no data directory: set JCTLAB_DATA or pass a path "
                         f"(needed for {what}; see the data README for where to get the files)")
    return p


@lru_cache(maxsize=None)
def _table_text(name: str) -> str:
    path = TABLES / name
    try:
        return path.read_text()
    except OSError as e:
        raise InputError(str(path), "", f"shipped table missing ({e.strerror}); run scripts/derive_tables.py") from None


def load_table(name: str) -> dict[str, Any]:
    """A shipped table of ``jctlab/tables`` by file name (a fresh copy each call)."""
    return json.loads(_table_text(name if name.endswith(".json") else name + ".json"))


def read_csv(path: str | os.PathLike, columns: Sequence[str], **kw: Any) -> pd.DataFrame:
    """Read a CSV and check that ``columns`` are present; InputError names the file and column."""
    p = Path(path)
    if not p.is_file():
        raise InputError(str(p), "", "file not found")
    try:
        df = pd.read_csv(p, **kw)
    except (OSError, ValueError, pd.errors.ParserError) as e:
        raise InputError(str(p), "", f"unreadable CSV: {str(e).splitlines()[0]}") from None
    for c in columns:
        if c not in df.columns:
            raise InputError(str(p), c, "missing column")
    return df


def check_numeric(df: pd.DataFrame, path: str | os.PathLike, column: str, *, positive: bool = False,
                  nonneg: bool = False) -> None:
    """InputError naming file, column and the first bad row when a column is not a clean number."""
    v = pd.to_numeric(df[column], errors="coerce")
    bad = v.isna()
    if positive:
        bad |= v <= 0
    elif nonneg:
        bad |= v < 0
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        need = "a positive number" if positive else "a number ≥ 0" if nonneg else "a number"
        raise InputError(str(path), column, f"row {i + 2}: {df[column].iloc[i]!r} is not {need}")


def node_dicts(groups: Iterable[tuple[str, int, int]], *, cpus_per_gpu: float = CPUS_PER_GPU,
               mem_gb_per_gpu: float = MEM_GB_PER_GPU, prefix: str = "n") -> list[dict[str, Any]]:
    """SPEC node dicts for groups of (gpu type, node count, GPUs per node), named n0, n1, ..."""
    nodes = []
    for gpu_type, count, per_node in groups:
        for _ in range(int(count)):
            nodes.append({"name": f"{prefix}{len(nodes)}", "cpus": cpus_per_gpu * per_node,
                          "mem_gb": mem_gb_per_gpu * per_node,
                          "gpus": [{"type": gpu_type} for _ in range(int(per_node))]})
    return nodes


def parse_counts(spec: str | Sequence[int], n: int, what: str) -> list[int]:
    """'4:4:4' / '4,4,8' / [4, 4, 8] -> list of n non-negative ints; InputError otherwise."""
    if isinstance(spec, str):
        parts = spec.replace(",", ":").split(":")
    else:
        parts = list(spec)
    try:
        vals = [int(p) for p in parts]
    except (TypeError, ValueError):
        raise InputError(what, "", f"{spec!r}: expected {n} integers separated by ':' or ','") from None
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n or any(v < 0 for v in vals):
        raise InputError(what, "", f"{spec!r}: expected {n} non-negative integers")
    return vals
