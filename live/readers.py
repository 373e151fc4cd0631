"""Readers of the live state's files: the cluster (YAML), the queue and the running jobs (CSV), and the job
records of daemon events (JSON). Formats: ``docs/live.md``; examples: ``examples/small-lab/``.

Every problem is an :class:`~jctlab.errors.InputError` naming the file, the row (CSV: the line number,
header = line 1; YAML: the line) and the field, raised before anything is written. A job record is read
by one function whichever file or event it comes from (:func:`queued_job`, :func:`running_job`).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from jctlab.errors import InputError
from jctlab.limits import read_text

from .instance import gavel_job_types, job_fields
from .state import DEFAULT_STEPS, ClusterSpec, GpuSpec, NodeSpec, QueuedJob, RunningJob, Work

QUEUE_COLUMNS = ("name", "submit", "sizes", "model", "iterations", "comm_mb", "steps", "weight")
RUNNING_COLUMNS = ("name", "submit", "start", "gpus", "remaining_s", "model", "iterations", "comm_mb", "steps",
                   "weight")
WORK_PREFIX = "work_"
#: GPUs of the largest cluster the live scheduler takes: its heuristics scan every GPU at each event, and
#: beyond this size that scan alone can outlast a decision's time limit (docs/live.md, "Limits")
MAX_LIVE_GPUS = 16_384
_SPLIT = re.compile(r"[|; ]+")


@dataclass(frozen=True)
class Where:
    """Where a record comes from: ``source`` (file or event) and ``row`` (None for events)."""

    source: str
    row: int | None = None

    def fail(self, field: str, reason: str) -> InputError:
        return InputError(self.source, field if self.row is None else f"row {self.row}, {field}", reason)


# --------------------------------------------------------------------------- fields


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def number(v: Any, where: Where, field: str, *, positive: bool = False, nonneg: bool = False) -> float:
    try:
        x = float(v.strip() if isinstance(v, str) else v)
    except (TypeError, ValueError):
        raise where.fail(field, f"{v!r} is not a number") from None
    if isinstance(v, bool) or not math.isfinite(x):
        raise where.fail(field, f"{v!r} is not a finite number")
    if positive and x <= 0:
        raise where.fail(field, f"must be > 0, got {v!r}")
    if nonneg and x < 0:
        raise where.fail(field, f"must be >= 0, got {v!r}")
    return x


def parse_time(v: Any, where: Where, field: str) -> float:
    """Seconds (a number) or an ISO 8601 date/time (UTC when it names no zone) -> seconds since the epoch."""
    if isinstance(v, str) and not re.fullmatch(r"\s*[-+]?[0-9.eE+-]+\s*", v):
        try:
            t = datetime.fromisoformat(v.strip())
        except ValueError:
            raise where.fail(field, f"{v!r} is neither seconds nor an ISO 8601 date/time") from None
        if t.tzinfo is None:
            t = t.replace(tzinfo=timezone.utc)
        return t.timestamp()
    return number(v, where, field)


def _items(v: Any) -> list[Any]:
    if isinstance(v, (list, tuple)):
        return list(v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return [v]
    if isinstance(v, str):
        return [s for s in _SPLIT.split(v.strip()) if s]
    return [v]


def parse_sizes(v: Any, where: Where) -> tuple[int, ...]:
    out = set()
    for s in _items(v):
        try:
            n = int(str(s))
        except ValueError:
            raise where.fail("sizes", f"{s!r} is not a GPU count") from None
        if n < 1:
            raise where.fail("sizes", f"GPU counts are >= 1, got {s!r}")
        out.add(n)
    if not out:
        raise where.fail("sizes", "needs at least one allowed GPU count (e.g. 1 or 1|2|4)")
    return tuple(sorted(out))


def parse_gpus(v: Any, cluster: ClusterSpec, where: Where) -> tuple[str, ...]:
    ids = [str(g) for g in _items(v)]
    known = set(cluster.gpu_ids)
    if not ids:
        raise where.fail("gpus", "a running job holds at least one GPU (ids node:index, separated by |)")
    for g in ids:
        if g not in known:
            raise where.fail("gpus", f"unknown GPU {g!r} (ids are node:index, e.g. {cluster.gpu_ids[0]})")
    if len(set(ids)) != len(ids):
        raise where.fail("gpus", "a GPU appears twice")
    return tuple(ids)


def parse_work(rec: Mapping[str, Any], cluster: ClusterSpec, where: Where, required: bool = True) -> Work | None:
    """``model`` + ``iterations`` (a Gavel job type), or ``work_<type>`` seconds on one GPU of that type
    (events may give them as one mapping ``work: {type: seconds}``), with optional ``comm_mb`` and ``steps``."""
    seconds: dict[str, float] = {}
    nested = rec.get("work")
    if isinstance(nested, Mapping):
        for t, s in nested.items():
            seconds[str(t)] = number(s, where, f"work.{t}", nonneg=True)
    elif not _blank(nested):
        raise where.fail("work", "expected a mapping {gpu type: seconds on one GPU}")
    for k, s in rec.items():
        if isinstance(k, str) and k.startswith(WORK_PREFIX) and not _blank(s):
            seconds[k[len(WORK_PREFIX):]] = number(s, where, k, nonneg=True)
    model = rec.get("model")
    types = cluster.gpu_types
    if not _blank(model):
        if seconds:
            raise where.fail("model", "give either model and iterations or work_<type> seconds, not both")
        table = gavel_job_types()
        model = str(model).strip()
        if model not in table:
            close = [t for t in sorted(table) if t.lower().startswith(model.split(" ")[0].lower())][:4]
            raise where.fail("model", f"unknown model {model!r}" + (f" (known: {', '.join(close)}, ...)" if close else
                                                                     " (see jctlab/tables/gavel_job_types.json)"))
        if _blank(rec.get("iterations")):
            raise where.fail("iterations", f"model {model!r} needs an iteration count")
        w = Work(model=model, iterations=number(rec["iterations"], where, "iterations", positive=True))
        if not job_fields(w, types)["samples_per_s"]:
            raise where.fail("model", f"{model!r} has no throughput for this cluster's GPU types "
                                      f"({', '.join(types)}); give work_<type> seconds instead")
        return w
    if not seconds:
        if not required:
            return None
        raise where.fail("work", "no work estimate: give model and iterations, or work_<type> seconds "
                                 f"(types here: {', '.join(types)})")
    if not any(s > 0 for t, s in seconds.items() if t in types):
        raise where.fail("work", f"no work_<type> for a GPU type of the cluster ({', '.join(types)})")
    comm = 0.0 if _blank(rec.get("comm_mb")) else number(rec["comm_mb"], where, "comm_mb", nonneg=True)
    steps = DEFAULT_STEPS if _blank(rec.get("steps")) else number(rec["steps"], where, "steps", positive=True)
    return Work(seconds, comm_mb=comm, steps=steps)


def _name(rec: Mapping[str, Any], where: Where) -> str:
    name = rec.get("name")
    if _blank(name):
        raise where.fail("name", "missing job name")
    name = str(name).strip()
    if ":" in name:
        raise where.fail("name", f"{name!r}: job names may not contain ':'")
    return name


def _weight(rec: Mapping[str, Any], where: Where) -> float:
    return 1.0 if _blank(rec.get("weight")) else number(rec["weight"], where, "weight", positive=True)


def queued_job(rec: Mapping[str, Any], cluster: ClusterSpec, where: Where) -> QueuedJob:
    name = _name(rec, where)
    if _blank(rec.get("submit")):
        raise where.fail("submit", "missing submission time")
    submit = parse_time(rec["submit"], where, "submit")
    sizes = parse_sizes(rec.get("sizes", 1) if not _blank(rec.get("sizes")) else 1, where)
    work = parse_work(rec, cluster, where)
    assert work is not None
    usable = sum(1 for n in cluster.nodes for g in n.gpus if job_fields(work, (g.type,))["samples_per_s"])
    if sizes[0] > usable:
        raise where.fail("sizes", f"no allowed size fits the {usable} GPUs that can host this job")
    return QueuedJob(name, submit, tuple(s for s in sizes if s <= usable), work, _weight(rec, where))


def running_job(rec: Mapping[str, Any], cluster: ClusterSpec, where: Where, estimated_at: float) -> RunningJob:
    name = _name(rec, where)
    start = parse_time(rec.get("start"), where, "start") if not _blank(rec.get("start")) else None
    if start is None:
        raise where.fail("start", "missing start time")
    submit = start if _blank(rec.get("submit")) else parse_time(rec["submit"], where, "submit")
    gpus = parse_gpus(rec.get("gpus"), cluster, where)
    if _blank(rec.get("remaining_s")):
        raise where.fail("remaining_s", "missing estimated remaining seconds")
    left = number(rec["remaining_s"], where, "remaining_s", nonneg=True)
    return RunningJob(name, submit, start, gpus, left, estimated_at, parse_work(rec, cluster, where, required=False),
                      _weight(rec, where))


# --------------------------------------------------------------------------- files


class _LineLoader(yaml.SafeLoader):
    """Safe YAML that remembers the line of every mapping (key ``__line__``) for error messages. A cluster file
    has no dates: a value that looks like one stays text (the field's check then names it), not a timestamp that
    PyYAML builds, or fails to build (``2025-13-45``), before any field is read."""

    yaml_implicit_resolvers = {k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
                               for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}

    def construct_mapping(self, node, deep=False):   # type: ignore[override]
        m = super().construct_mapping(node, deep=deep)
        m["__line__"] = node.start_mark.line + 1
        return m


def read_cluster(path: str | Path) -> ClusterSpec:
    """The cluster YAML (``docs/live.md``): nodes with ``gpus`` entries ``{type, count, socket}``."""
    src = str(path)
    try:
        d = yaml.load(read_text(path), Loader=_LineLoader)   # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        why = getattr(e, "problem", None)
        raise InputError(src, f"line {mark.line + 1}" if mark else "",
                         "malformed YAML" + (f" ({why})" if why else "")) from None
    except ValueError as e:    # a value PyYAML cannot build (an explicit !!timestamp, an integer of 5,000 digits)
        raise InputError(src, "", f"malformed YAML ({' '.join(str(e).split())})") from None
    if not isinstance(d, dict):
        raise InputError(src, "", "expected a mapping with a `nodes` list")

    def fail(m: Any, field: str, reason: str) -> InputError:
        line = m.get("__line__") if isinstance(m, dict) else None
        return InputError(src, f"line {line}, {field}" if line else field, reason)

    def num(m: dict, key: str, field: str, default: float, lo: float = 0.0, strict: bool = False) -> float:
        v = m.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo or (strict and v == lo):
            raise fail(m, field, f"must be a number {'>' if strict else '>='} {lo:g}, got {v!r}")
        return float(v)

    known_top = {"name", "nodes", "intra_node_gbps", "inter_node_gbps", "locality_penalty", "restart_s", "qpi_factor",
                 "__line__"}
    for k in d:
        if k not in known_top:
            raise fail(d, str(k), f"unknown field (known: {', '.join(sorted(known_top - {'__line__'}))})")
    nodes_raw = d.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise fail(d, "nodes", "expected a non-empty list of nodes")
    nodes, names = [], set()
    total = 0
    for i, n in enumerate(nodes_raw):
        p = f"nodes[{i}]"
        if not isinstance(n, dict):
            raise fail(d, p, "expected a mapping with name and gpus")
        for k in n:
            if k not in ("name", "cpus", "mem_gb", "gpus", "__line__"):
                raise fail(n, f"{p}.{k}", "unknown field (known: name, cpus, mem_gb, gpus)")
        name = n.get("name")
        if not isinstance(name, str) or not name or ":" in name or name in names:
            raise fail(n, f"{p}.name", f"needs a unique name without ':', got {name!r}")
        names.add(name)
        gpus: list[GpuSpec] = []
        entries = n.get("gpus")
        if not isinstance(entries, list) or not entries:
            raise fail(n, f"{p}.gpus", "expected a non-empty list of {type, count, socket} entries")
        for k, g in enumerate(entries):
            gp = f"{p}.gpus[{k}]"
            if not isinstance(g, dict) or not isinstance(g.get("type"), str) or not g["type"]:
                raise fail(g if isinstance(g, dict) else n, f"{gp}.type", "each entry needs a GPU type")
            count = g.get("count", 1)
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise fail(g, f"{gp}.count", f"must be an integer >= 1, got {count!r}")
            total += count
            if total > MAX_LIVE_GPUS:
                raise fail(g, f"{gp}.count", f"the cluster would have {total:,} GPUs or more; the live scheduler "
                           f"decides within its time limit for clusters of up to {MAX_LIVE_GPUS:,}")
            sock = g.get("socket")
            if sock is not None and (isinstance(sock, bool) or not isinstance(sock, int) or sock < 0):
                raise fail(g, f"{gp}.socket", f"must be an integer >= 0, got {sock!r}")
            for _ in range(count):
                gpus.append(GpuSpec(len(gpus), g["type"], sock))
        nodes.append(NodeSpec(name, tuple(gpus), num(n, "cpus", f"{p}.cpus", 0.0), num(n, "mem_gb", f"{p}.mem_gb", 0.0)))
    name = d.get("name", Path(src).stem)
    return ClusterSpec(str(name), tuple(nodes),
                       num(d, "intra_node_gbps", "intra_node_gbps", 100.0, strict=True),
                       num(d, "inter_node_gbps", "inter_node_gbps", 25.0, strict=True),
                       num(d, "locality_penalty", "locality_penalty", 1.0, lo=1.0),
                       num(d, "restart_s", "restart_s", 0.0),
                       num(d, "qpi_factor", "qpi_factor", 1.0, lo=1.0))   # SPEC §2: a job whose GPUs span sockets


def _csv_records(path: str | Path, known: Iterable[str], required: Iterable[str]) -> list[tuple[int, dict]]:
    """(line number, row) of a CSV with a header; unknown columns (other than ``work_<type>``) are errors."""
    src = str(path)
    text = read_text(path)
    reader = csv.DictReader(text.splitlines())
    header = reader.fieldnames or []
    if not header:
        raise InputError(src, "", "empty file: expected a header line")
    known = set(known)
    for c in header:
        if c is None or (c not in known and not c.startswith(WORK_PREFIX)):
            raise InputError(src, f"row 1, {c}", f"unknown column (known: {', '.join(sorted(known))}, work_<type>)")
    for c in required:
        if c not in header:
            raise InputError(src, f"row 1, {c}", "missing column")
    out = []
    try:
        for rec in reader:
            if None in rec:
                raise InputError(src, f"row {reader.line_num}", "more fields than columns")
            if all(_blank(v) for v in rec.values()):
                continue
            out.append((reader.line_num, rec))
    except csv.Error as e:
        raise InputError(src, f"row {reader.line_num}", f"malformed CSV: {e}") from None
    return out


def read_queue(path: str | Path, cluster: ClusterSpec) -> tuple[QueuedJob, ...]:
    rows = _csv_records(path, QUEUE_COLUMNS, ("name", "submit"))
    jobs = tuple(queued_job(rec, cluster, Where(str(path), r)) for r, rec in rows)
    _unique([(j.name, Where(str(path), r)) for j, (r, _) in zip(jobs, rows)])
    return jobs


def read_running(path: str | Path, cluster: ClusterSpec, estimated_at: float | None = None) -> tuple[RunningJob, ...]:
    """Running jobs; their ``remaining_s`` is taken as of ``estimated_at`` (default: the latest start)."""
    rows = _csv_records(path, RUNNING_COLUMNS, ("name", "start", "gpus", "remaining_s"))
    at = estimated_at
    if at is None:
        starts = [parse_time(rec["start"], Where(str(path), r), "start") for r, rec in rows if not _blank(rec.get("start"))]
        at = max(starts, default=0.0)
    jobs = tuple(running_job(rec, cluster, Where(str(path), r), at) for r, rec in rows)
    _unique([(j.name, Where(str(path), r)) for j, (r, _) in zip(jobs, rows)])
    held: dict[str, str] = {}
    for j, (r, _) in zip(jobs, rows):
        for g in j.gpus:
            if g in held:
                raise Where(str(path), r).fail("gpus", f"GPU {g} is already held by running job {held[g]}")
            held[g] = j.name
    return jobs


def _unique(names: list[tuple[str, Where]]) -> None:
    seen: set[str] = set()
    for n, w in names:
        if n in seen:
            raise w.fail("name", f"duplicate job name {n!r}")
        seen.add(n)


def check_disjoint(queued: Iterable[QueuedJob], running: Iterable[RunningJob], source: str) -> None:
    """A job is queued or running, not both."""
    q = {j.name for j in queued}
    for r in running:
        if r.name in q:
            raise InputError(source, "name", f"job {r.name!r} is both queued and running")
