"""Slurm adapters: the cluster from ``sinfo --json`` and the queue and running jobs from ``squeue --json``.

The formats are Slurm's JSON output (``--json``, the ``data_parser`` plugin of Slurm 23.02 and later,
OpenAPI schemas ``v0.0.39``-``v0.0.41``; documented in SchedMD's REST API reference,
https://slurm.schedmd.com/rest_api.html, and the ``squeue(1)``/``sinfo(1)`` man pages). Numbers there are
either plain or ``{"set": bool, "infinite": bool, "number": N}``; states are a string or a list of flags;
both forms are read. Older output (Slurm 21.08/22.05: ``sinfo --json`` as ``{"nodes": [...]}`` with
``gres`` strings) is read too.

What is taken (and why; see ``docs/live.md``):

* nodes: ``nodes.nodes`` (or ``name``), ``gres.total`` such as ``gpu:a100:4(S:0-1)`` (type, count, socket
  range), ``cpus.total``, ``memory.maximum`` (MB). Nodes that are down, drained, failed, powered down or
  not responding are left out: no new job goes there.
* jobs: ``job_id`` (array tasks as ``ARRAY_TASK``), ``job_state`` PENDING -> queued, RUNNING -> running,
  others ignored; ``submit_time``, ``start_time``, ``end_time``, ``time_limit`` (minutes); the GPU count
  from ``tres_req_str``/``tres_alloc_str`` (``gres/gpu=N``, ``gres/gpu:TYPE=N``) or ``tres_per_node``;
  held GPUs from ``gres_detail`` (``gpu:a100:2(IDX:0-1)``, one entry per node of ``nodes``).
* work estimate: a ``comment`` of the form ``jctlab:model=NAME;iterations=N`` or
  ``jctlab:work_v100=SECONDS;...`` (``remaining_s=S`` for a running job) when the job has one; otherwise
  its time limit (Slurm's only estimate, usually generous), i.e. ``work_<type>`` = limit x GPUs on every
  type it may use, and for a running job ``end_time - now``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Mapping

from jctlab import limits as L
from jctlab.errors import InputError

from .readers import MAX_LIVE_GPUS, Where, number, queued_job, running_job
from .state import ClusterSpec, GpuSpec, NodeSpec, QueuedJob, RunningJob

UNAVAILABLE = {"DOWN", "DRAIN", "DRAINED", "DRAINING", "FAIL", "FAILING", "FUTURE", "POWERED_DOWN",
               "POWERING_DOWN", "NOT_RESPONDING", "NO_RESPOND", "INVALID", "INVALID_REG", "MAINTENANCE",
               "REBOOT_ISSUED", "UNKNOWN"}
_GRES = re.compile(r"^gpu(?::(?P<type>[^:(]+))?:(?P<count>\d+)(?:\((?P<detail>[^)]*)\))?$")


def value(v: Any) -> Any:
    """A Slurm number: plain, or ``{"set", "infinite", "number"}`` (None when unset or infinite)."""
    if isinstance(v, Mapping) and "number" in v:
        if not v.get("set", True) or v.get("infinite", False):
            return None
        return v["number"]
    return v


def _amount(v: Any, rng: L.Range, src: str, field: str, scale: float = 1.0) -> float:
    """A node's CPUs or memory: 0 when unset, else a finite number whose value × ``scale`` is in ``rng``."""
    if v is None:
        return 0.0
    x = number(v, Where(src), field, nonneg=True)     # the live readers' number rule
    why = rng.problem(x * scale)
    if why is not None:
        raise InputError(src, field, why + (f" (as {rng.unit})" if scale != 1 else ""))
    return x


def states(v: Any) -> set[str]:
    items = v if isinstance(v, list) else re.split(r"[+,]", v) if isinstance(v, str) else []
    return {str(s).upper() for s in items if s}


def expand_hostlist(s: str) -> list[str]:
    """``gpu[01-03,07],login1`` -> gpu01, gpu02, gpu03, gpu07, login1 (one bracket group per name)."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", s or ""):
        m = re.fullmatch(r"([^\[]*)\[([^\]]*)\](.*)", part)
        if not m:
            out.append(part)
            continue
        pre, body, post = m.groups()
        for r in body.split(","):
            a, _, b = r.partition("-")
            width = len(a)
            for k in range(int(a), int(b or a) + 1):
                out.append(f"{pre}{k:0{width}d}{post}")
    return out


def _ranges(s: str) -> list[int]:
    out: list[int] = []
    for r in s.split(","):
        if not r:
            continue
        a, _, b = r.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def parse_gres(s: str) -> list[tuple[str, int, str]]:
    """GPU entries of a GRES string: [(type, count, detail)], detail like ``S:0-1`` or ``IDX:0,2``.
    Untyped GPUs get the type ``gpu``; other GRES (``tmpsize:7T``, ``mps:10``) are skipped."""
    out = []
    for part in re.split(r",(?![^(]*\))", s or ""):
        m = _GRES.match(part.strip())
        if m:
            out.append((m["type"] or "gpu", int(m["count"]), m["detail"] or ""))
    return out


def _load(path: str | Path, key: str) -> tuple[Any, str]:
    p = Path(path)
    d = L.read_json(p)          # size, nesting, huge integers and bad JSON: one line naming the file
    if not isinstance(d, dict):
        raise InputError(str(p), "", f"expected the JSON object that `{key} --json` prints")
    return d, str(p)


def read_sinfo(path: str | Path, name: str | None = None) -> ClusterSpec:
    """The cluster of ``sinfo --json`` (or ``sinfo -N --json``): one node per host name, GPUs from GRES."""
    d, src = _load(path, "sinfo")
    rows = d.get("sinfo", d.get("nodes"))
    if not isinstance(rows, list):
        raise InputError(src, "sinfo", "expected a list of node records (`sinfo --json` output)")
    nodes: dict[str, NodeSpec] = {}
    total_gpus = 0
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InputError(src, f"sinfo[{i}]", "expected an object")
        names = row.get("nodes", {}).get("nodes") if isinstance(row.get("nodes"), Mapping) else None
        names = names if names is not None else ([row["name"]] if isinstance(row.get("name"), str) else None)
        if not names:
            raise InputError(src, f"sinfo[{i}].nodes.nodes", "no node name")
        st = states((row.get("node") or {}).get("state") if isinstance(row.get("node"), Mapping) else row.get("state"))
        gres = row.get("gres")
        total = gres.get("total", "") if isinstance(gres, Mapping) else (gres or "")
        cpus = _amount(value(row["cpus"].get("total") if isinstance(row.get("cpus"), Mapping) else row.get("cpus")),
                       L.CPUS, src, f"sinfo[{i}].cpus.total")
        mem = row.get("memory")
        mem_mb = _amount(value(mem.get("maximum") if isinstance(mem, Mapping) else row.get("real_memory")),
                         L.MEM_GB, src, f"sinfo[{i}].memory.maximum", scale=1 / 1024)
        gpus: list[GpuSpec] = []
        try:
            for t, count, detail in parse_gres(total):
                socks = _ranges(detail[2:]) if detail.startswith("S:") else []
                if len(gpus) + count > MAX_LIVE_GPUS:
                    raise InputError(src, f"sinfo[{i}].gres.total", f"more GPUs than the live scheduler takes "
                                     f"in a whole cluster ({MAX_LIVE_GPUS:,})")
                for _ in range(count):
                    gpus.append(GpuSpec(len(gpus), t, socks[0] if len(socks) == 1 else None))
        except ValueError:
            raise InputError(src, f"sinfo[{i}].gres.total", f"unreadable GRES {total!r}") from None
        if not gpus or st & UNAVAILABLE:
            continue
        for n in names:
            if n not in nodes:   # a node in several partitions appears once per partition
                nodes[n] = NodeSpec(n, tuple(gpus), cpus, mem_mb / 1024.0)
                total_gpus += len(gpus)
                if total_gpus > MAX_LIVE_GPUS:
                    raise InputError(src, f"sinfo[{i}]", f"the cluster has more GPUs than the live scheduler "
                                     f"takes ({MAX_LIVE_GPUS:,})")
    if not nodes:
        raise InputError(src, "sinfo", "no available node with GPUs")
    return ClusterSpec(name or Path(src).stem, tuple(nodes.values()))


def _job_name(job: Mapping[str, Any]) -> str:
    task = value(job.get("array_task_id"))
    if task is not None and value(job.get("array_job_id")):
        return f"{value(job['array_job_id'])}_{task}"
    return str(value(job.get("job_id")))


def _gpu_request(job: Mapping[str, Any]) -> tuple[int, str | None]:
    """(GPU count, type or None) the job asks for."""
    for key in ("tres_alloc_str", "tres_req_str"):
        s = job.get(key) or ""
        typed = re.search(r"gres/gpu:([^=,]+)=(\d+)", s)
        if typed:
            return int(typed[2]), typed[1]
        plain = re.search(r"gres/gpu=(\d+)", s)
        if plain:
            return int(plain[1]), None
    per_node = re.search(r"gres[/:]gpu(?::([^:,]+))?:(\d+)", job.get("tres_per_node") or "")
    if per_node:
        nodes = value(job.get("node_count")) or 1
        return int(per_node[2]) * int(nodes), per_node[1]
    per_job = re.search(r"gres[/:]gpu(?::([^:,]+))?:(\d+)", job.get("tres_per_job") or "")
    if per_job:
        return int(per_job[2]), per_job[1]
    return 0, None


def _comment(job: Mapping[str, Any]) -> dict[str, str]:
    c = job.get("comment") or ""
    if not c.startswith("jctlab:"):
        return {}
    return {k.strip(): v.strip() for k, _, v in (kv.partition("=") for kv in c[len("jctlab:"):].split(";")) if k.strip()}


def read_squeue(path: str | Path, cluster: ClusterSpec, now: float | None = None
                ) -> tuple[tuple[QueuedJob, ...], tuple[RunningJob, ...], float]:
    """(queued, running, the snapshot's time) of ``squeue --json``. The time is ``now`` when given, else
    the file's ``last_update`` (Slurm 23.02+), else its latest submission or start."""
    d, src = _load(path, "squeue")
    jobs = d.get("jobs")
    if not isinstance(jobs, list):
        raise InputError(src, "jobs", "expected a list of jobs (`squeue --json` output)")
    if now is None and isinstance(value(d.get("last_update")), (int, float)):
        now = float(value(d["last_update"]))
    if now is None:
        times = [value(j.get(k)) for j in jobs if isinstance(j, Mapping) for k in ("submit_time", "start_time")]
        now = float(max((t for t in times if isinstance(t, (int, float)) and t > 0), default=0.0))
    node_names = {n.name for n in cluster.nodes}
    queued, running = [], []
    for i, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise InputError(src, f"jobs[{i}]", "expected an object")
        st = states(job.get("job_state"))
        name = _job_name(job)
        prefix = f"jobs[{i}] (job {name})"
        count, gtype = _gpu_request(job)
        if count == 0 or not st & {"PENDING", "RUNNING"}:
            continue   # CPU-only jobs and finished ones do not take part
        extra = _comment(job)
        limit_min = value(job.get("time_limit"))
        rec: dict[str, Any] = {"name": name, "submit": value(job.get("submit_time")), "weight": extra.get("weight")}
        if "model" in extra or any(k.startswith("work_") for k in extra):
            rec.update({k: v for k, v in extra.items() if k in ("model", "iterations", "comm_mb", "steps") or
                        k.startswith("work_")})
        elif limit_min:
            types = [gtype] if gtype else list(cluster.gpu_types)
            rec.update({f"work_{t}": float(limit_min) * 60.0 * count for t in types})
        try:
            if "PENDING" in st:
                queued.append(queued_job({**rec, "sizes": count}, cluster, Where(src, None)))
                continue
            hosts = expand_hostlist(job.get("nodes") or "")
            detail = job.get("gres_detail") or []
            gpus = []
            for host, g in zip(hosts, detail):
                for _, _, det in parse_gres(g):
                    if det.startswith("IDX:"):
                        gpus.extend(f"{host}:{k}" for k in _ranges(det[4:]))
            if any(h not in node_names for h in hosts):
                print(f"jctlab: note: {src}: job {name} runs on a node left out of the cluster "
                      f"({', '.join(h for h in hosts if h not in node_names)}); not planned", file=sys.stderr)
                continue
            end = value(job.get("end_time"))
            left = extra.get("remaining_s", max(0.0, float(end) - now) if end else None)
            running.append(running_job({**rec, "start": value(job.get("start_time")), "gpus": gpus,
                                        "remaining_s": left}, cluster, Where(src, None), now))
        except InputError as e:
            raise InputError(src, f"{prefix}.{e.field}", e.reason) from None
    return tuple(queued), tuple(running), now


__all__ = ["read_sinfo", "read_squeue", "expand_hostlist", "parse_gres", "value"]
