"""The limits of the contract (SPEC §7): every number a file or the command line may hold, and the guarded
JSON reader that refuses huge or deeply nested files before anything is computed.

One table, read by the instance/schedule readers (:mod:`jctlab.model`), the JSON Schemas
(:mod:`jctlab.schema`), the command line's argument types (:mod:`jctlab.argtypes`) and SPEC's table
(a test checks that SPEC §7 lists these very values). The ranges are far beyond any real cluster or
trace and small enough that no product of two of them overflows a float: a value outside them is a
typo or an attack, and refusing it up front is a clear answer where accepting it gave an overflow,
a solver that never ends or a wrong objective.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from typing import Any

from .errors import InputError


@dataclass(frozen=True)
class Range:
    """A closed interval ``[lo, hi]`` (``lo_open``: ``lo`` itself excluded; ``zero``: 0 allowed as well,
    e.g. a rate of 0 means "cannot host"), of integers when ``integer``. Also usable as
    ``typing.Annotated`` metadata of a method's or policy's option (see :mod:`jctlab.argtypes`)."""

    lo: float
    hi: float
    lo_open: bool = False
    zero: bool = False
    integer: bool = False
    unit: str = ""

    def problem(self, x: float) -> str | None:
        """Why ``x`` (a finite int or float) is outside the range, or None when it is inside."""
        if self.integer and not float(x).is_integer():
            return f"must be an integer, got {x!r}"
        if self.zero and x == 0:
            return None
        if x < self.lo or (self.lo_open and x == self.lo) or x > self.hi:
            return f"must be {self.describe()}, got {shorten(int(x) if self.integer else x)}"
        return None

    def describe(self) -> str:
        lo = f"{'(' if self.lo_open else '['}{_g(self.lo)}, {_g(self.hi)}]"
        return ("0 or in " if self.zero else "in ") + lo


def _g(x: float) -> str:
    return f"{x:g}" if not float(x).is_integer() or abs(x) >= 1e6 else str(int(x))


def shorten(x: Any) -> str:
    s = repr(x)
    return s if len(s) <= 40 else s[:37] + "..."


# --------------------------------------------------------------------------- the table (SPEC §7)
#: seconds: arrivals, restart_s, segment starts and ends (31.7 years)
TIME = Range(0, 1e9, unit="s")
#: iterations of a job
ITERATIONS = Range(0, 1e12, lo_open=True)
#: samples per iteration
BATCH = Range(0, 1e9, lo_open=True)
#: one GPU's samples/s for a job (0: that type cannot host it)
RATE = Range(1e-6, 1e9, zero=True, unit="samples/s")
#: measured whole-job iterations/s
MEASURED = Range(1e-6, 1e9, unit="iterations/s")
#: intra- and inter-node bandwidth
BANDWIDTH = Range(1e-6, 1e6, unit="Gbps")
#: gradient volume per iteration
COMM_MB = Range(0, 1e9, unit="MB")
#: per-GPU per-class slowdown factor
VARIABILITY = Range(1e-3, 1e3)
#: interference coefficient between two classes; also pcie_interference (per job sharing a PCIe switch)
INTERFERENCE = Range(0, 100)
#: locality penalty factor; also the cross-socket factor qpi_factor (SPEC v1.1 topology)
LOCALITY = Range(1, 1e3)
#: a node's CPUs, a CPU/memory level's CPUs per GPU, a PS's CPUs
CPUS = Range(0, 1e6)
#: a node's memory, a level's memory per GPU
MEM_GB = Range(0, 1e9, unit="GB")
#: a cpu_mem level's speedup
SPEEDUP = Range(1e-3, 1e3)
#: Optimus' PS overhead terms t1..t4
THETA = Range(0, 1e6, unit="s")
#: a job's weight
WEIGHT = Range(1e-6, 1e6)
#: claimed runtime of a method
RUNTIME = Range(0, 1e9, unit="s")

#: counts
MAX_NODES = 100_000
MAX_GPUS = 1_000_000          # in the whole cluster
MAX_JOBS = 1_000_000
MAX_SEGMENTS = 10_000_000
MAX_LEVELS = 1_000            # cpu_mem levels of one job
MAX_PS = 1_024                # parameter servers of one job (and no more than the cluster's CPUs hold)

#: files
MAX_FILE_MB_DEFAULT = 256     # JSON input files (override: $JCTLAB_MAX_FILE_MB)
MAX_DEPTH = 64                # nesting of objects and lists, unknown fields included

#: command line
MAX_TIME_LIMIT = 1e6          # --time-limit, s
TIME_LIMIT = Range(0, MAX_TIME_LIMIT, lo_open=True, unit="s")   # a solver's time limit, flag or file
MAX_THREADS = 1_024
MAX_SEED = 2**31 - 1          # CP-SAT's seeds are 32-bit

#: a GPU's socket and switch numbers within its node (SPEC v1.1 topology; null: none)
TOPOLOGY_ID = Range(0, MAX_GPUS, integer=True)

#: the online simulator (jctlab.simulate)
MAX_ROUNDS = 1_000_000        # rounds the instance needs at least (its horizon's lower bound / round)
MAX_RESTART_ROUNDS = 1_000    # rounds a resumed job spends restarting (restart_s / round)

#: (field, range) rows of SPEC §7, in its order (tests compare them with the SPEC text)
TABLE: tuple[tuple[str, Range], ...] = (
    ("arrival, restart_s, segment start/end", TIME),
    ("iterations", ITERATIONS),
    ("batch", BATCH),
    ("samples_per_s", RATE),
    ("measured", MEASURED),
    ("intra_node_gbps, inter_node_gbps", BANDWIDTH),
    ("comm_mb", COMM_MB),
    ("variability", VARIABILITY),
    ("interference", INTERFERENCE),
    ("locality_penalty", LOCALITY),
    ("qpi_factor", LOCALITY),
    ("pcie_interference", INTERFERENCE),
    ("socket, switch", TOPOLOGY_ID),
    ("cpus, cpus_per_gpu, ps_cpus", CPUS),
    ("mem_gb, mem_gb_per_gpu", MEM_GB),
    ("cpu_mem speedup", SPEEDUP),
    ("ps theta", THETA),
    ("weight", WEIGHT),
    ("claimed.runtime_s", RUNTIME),
)


def max_file_bytes() -> int:
    env = os.environ.get("JCTLAB_MAX_FILE_MB")
    try:
        mb = float(env) if env else MAX_FILE_MB_DEFAULT
    except ValueError:
        mb = MAX_FILE_MB_DEFAULT
    return int(mb * 2**20) if math.isfinite(mb) and mb > 0 else MAX_FILE_MB_DEFAULT * 2**20


# --------------------------------------------------------------------------- guarded JSON
_KEEP = b'"[]{}'
_NOT_KEPT = bytes(b for b in range(256) if b not in _KEEP)
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting(data: bytes) -> int:
    """Deepest nesting of objects and lists in a JSON text, brackets inside strings not counted. Linear,
    and all but the last step in C (bytes methods, ``map`` and ``accumulate``), without numpy, which the
    verbs that read files do not otherwise need: about 0.1 s on the 83-MB full Philly instance."""
    # drop escaped characters (an escaped backslash first), so that every quote left opens or closes a string
    clean = data.replace(b"\\\\", b"").replace(b'\\"', b"") if b"\\" in data else data
    # brackets and quotes only; the even pieces between quotes lie outside every string
    outside = b"".join(clean.translate(None, _NOT_KEPT).split(b'"')[0::2])
    return max(0, max(accumulate(map(_STEP.__getitem__, outside)), default=0))


def _int(s: str) -> int | float:
    # Python refuses int() of more than 4,300 digits; a number that long is out of every range anyway,
    # and as a float (inf past 1e308) the readers reject it naming its field
    return int(s) if len(s) <= 18 else float(s)


def json_safe(x: Any) -> Any:
    """``x`` with every non-finite float (nan, ±inf: not JSON numbers) replaced by None, through dicts, lists and
    tuples: what a writer with ``allow_nan=False`` can take. A solver's diagnostics may hold one (HiGHS reports a
    MIP gap of inf when it has no incumbent of its own)."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [json_safe(v) for v in x]
    return x


def loads(data: bytes | str, source: str) -> Any:
    """``json.loads`` for untrusted input: InputError (naming ``source``) for malformed JSON, nesting beyond
    MAX_DEPTH or text that is not UTF-8. Integer literals beyond 18 digits become floats and ``NaN`` /
    ``Infinity`` non-finite floats: the readers then reject them naming the field."""
    raw = data.encode() if isinstance(data, str) else data
    depth = nesting(raw)
    if depth > MAX_DEPTH:
        raise InputError(source, "", f"JSON nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(source, "", f"not UTF-8 text (byte {e.start})") from None
    try:
        return json.loads(text, parse_int=_int)
    except json.JSONDecodeError as e:
        raise InputError(source, "", f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (ValueError, RecursionError) as e:  # pragma: no cover - guarded above; kept as the last line of defence
        raise InputError(source, "", f"unreadable JSON ({e.__class__.__name__})") from None


def read_json(path: str | os.PathLike) -> Any:
    """A JSON file, refused with one line (InputError) when missing, unreadable, larger than
    :func:`max_file_bytes`, malformed or nested deeper than MAX_DEPTH, before anything is parsed."""
    return loads(read_bytes(path), str(path))


def read_text(path: str | os.PathLike) -> str:
    """A text input file (YAML, CSV), refused as :func:`read_bytes` does, or when it is not UTF-8 (a byte-order
    mark, as spreadsheets write, is dropped)."""
    try:
        return read_bytes(path).decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(str(path), "", f"not UTF-8 text (byte {e.start})") from None


def read_bytes(path: str | os.PathLike) -> bytes:
    """An input file's bytes: one line (InputError) when missing, a directory, unreadable or larger than
    :func:`max_file_bytes`, and never more than that read."""
    p = Path(path)
    limit = max_file_bytes()
    try:
        if p.is_dir():
            raise InputError(str(p), "", "is a directory, not a JSON file")
        size = p.stat().st_size
        if size > limit:
            raise InputError(str(p), "", f"{size / 2**20:.0f} MB is larger than the limit of {limit / 2**20:.0f} MB "
                             "(set JCTLAB_MAX_FILE_MB to raise it)")
        with p.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise InputError(str(p), "", "no such file") from None
    except OSError as e:
        raise InputError(str(p), "", f"cannot read: {e.strerror or e.__class__.__name__}") from None
    if len(data) > limit:   # a pipe or a file that grew: never read more than the limit
        raise InputError(str(p), "", f"larger than the limit of {limit / 2**20:.0f} MB")
    return data


def check_free_value(v: Any, source: str, path: str) -> None:
    """An unknown (kept) field's value: every number in it finite, so that it can be written back."""
    stack = [(v, path)]
    while stack:
        x, p = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            raise InputError(source, p, f"must be finite, got {x}")
        if isinstance(x, dict):
            stack.extend((y, f"{p}.{k}") for k, y in x.items())
        elif isinstance(x, list):
            stack.extend((y, f"{p}[{i}]") for i, y in enumerate(x))
