"""The instance and schedule model of SPEC §1 and §4: frozen dataclasses, JSON load/save, validation.

Every reader raises :class:`InputError` naming the file, the field (as a JSON path such as
``jobs[3].samples_per_s.v100``) and the reason. Unknown optional fields are kept in ``extra`` and
written back unchanged; an unknown ``format`` version is an error.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from dataclasses import dataclass, field, fields, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from . import limits as L
from .errors import InputError
from .fields import FieldReader, join_path, json_kind
from .hardware import GPU, Cluster, Node

INSTANCE_FORMAT = "jctlab.instance/1"
SCHEDULE_FORMAT = "jctlab.schedule/1"
PROBLEMS = ("static", "offline", "preemptive")
OBJECTIVES = ("mean_jct", "weighted_jct", "makespan")
SPLITS = ("proportional", "equal")
_TOPOLOGY_MAX = int(L.TOPOLOGY_ID.hi)   # socket and switch numbers (SPEC §7)
STATUSES = ("optimal", "feasible", "bound_only", "infeasible", "timeout_no_solution", "error")


# --------------------------------------------------------------------------- instance


@dataclass(frozen=True)
class CpuMem:
    """Synergy-style sensitivity: (cpus_per_gpu, mem_gb_per_gpu, speedup); fair share has speedup 1."""

    levels: tuple[tuple[float, float, float], ...]

    def speedup(self, cpus_per_gpu: float, mem_gb_per_gpu: float) -> float | None:
        for c, m, s in self.levels:
            if math.isclose(c, cpus_per_gpu, rel_tol=1e-9, abs_tol=1e-9) and math.isclose(
                m, mem_gb_per_gpu, rel_tol=1e-9, abs_tol=1e-9
            ):
                return s
        return None


@dataclass(frozen=True)
class PSConfig:
    max_ps: int
    ps_cpus: float
    theta: tuple[float, float, float, float]


@dataclass(frozen=True)
class Job:
    name: str
    arrival: float
    batch: float
    iterations: float
    samples_per_s: Mapping[str, float]
    comm_mb: float = 0.0
    sizes: tuple[int, ...] = (1,)
    job_class: str | None = None
    weight: float = 1.0
    model: str | None = None
    cpu_mem: CpuMem | None = None
    ps: PSConfig | None = None
    measured: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict)

    def can_use(self, gpu_type: str) -> bool:
        return self.samples_per_s.get(gpu_type, 0.0) > 0

    @property
    def level_choices(self) -> tuple[tuple[float | None, float | None], ...]:
        """The job's CPU/memory choices as (cpus_per_gpu, mem_gb_per_gpu): the fair share (None, None)
        first, then its ``cpu_mem`` levels; a job without a table has the fair share only."""
        table = () if self.cpu_mem is None else tuple((c, m) for c, m, _ in self.cpu_mem.levels)
        return ((None, None),) + table


@dataclass(frozen=True)
class Instance:
    name: str
    problem: str
    objective: str
    cluster: Cluster
    jobs: tuple[Job, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def job(self) -> dict[str, Job]:
        return {j.name: j for j in self.jobs}

    @cached_property
    def index(self) -> dict[str, int]:
        return {j.name: i for i, j in enumerate(self.jobs)}

    # -- JSON ---------------------------------------------------------------------------
    @staticmethod
    def from_dict(d: Any, source: str = "<instance>") -> "Instance":
        return _InstanceReader(source).read(d)

    def to_dict(self) -> dict[str, Any]:
        return instance_to_dict(self)

    def replace_jobs(self, jobs: tuple[Job, ...] | list[Job], **changes: Any) -> "Instance":
        return replace(self, jobs=tuple(jobs), **changes)


# --------------------------------------------------------------------------- schedule


# Allocation and Segment write their fields through the slots' own setters, not as a frozen dataclass's __init__
# does (object.__setattr__ by name, about 0.5 µs for four fields against 0.3): a simulation makes one of each per
# segment, a million on a non-sticky trace run. They stay frozen (assignment after __init__ raises);
# tests/test_model.py checks that each __init__ takes the fields in order with their defaults.


@dataclass(frozen=True, slots=True)
class Allocation:
    """What a job holds while it runs: GPUs, PS nodes and a CPU/memory level (None = fair share)."""

    gpus: tuple[str, ...]
    ps_nodes: tuple[str, ...] = ()
    cpus_per_gpu: float | None = None
    mem_gb_per_gpu: float | None = None

    def __init__(self, gpus: tuple[str, ...], ps_nodes: tuple[str, ...] = (), cpus_per_gpu: float | None = None,
                 mem_gb_per_gpu: float | None = None) -> None:
        _set_gpus(self, gpus)
        _set_ps_nodes(self, ps_nodes)
        _set_cpus_per_gpu(self, cpus_per_gpu)
        _set_mem_gb_per_gpu(self, mem_gb_per_gpu)


_set_gpus, _set_ps_nodes, _set_cpus_per_gpu, _set_mem_gb_per_gpu = (getattr(Allocation, f.name).__set__
                                                                    for f in fields(Allocation))


@dataclass(frozen=True, slots=True)
class Segment:
    job: str
    start: float
    end: float | None
    alloc: Allocation

    def __init__(self, job: str, start: float, end: float | None, alloc: Allocation) -> None:
        _set_job(self, job)
        _set_start(self, start)
        _set_end(self, end)
        _set_alloc(self, alloc)

    @property
    def gpus(self) -> tuple[str, ...]:
        return self.alloc.gpus


_set_job, _set_start, _set_end, _set_alloc = (getattr(Segment, f.name).__set__ for f in fields(Segment))


@dataclass(frozen=True)
class Claimed:
    objective: float | None = None
    lower_bound: float | None = None
    status: str = "feasible"
    runtime_s: float | None = None


@dataclass(frozen=True)
class Schedule:
    instance: str
    method: str
    segments: tuple[Segment, ...]
    claimed: Claimed | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_dict(d: Any, source: str = "<schedule>") -> "Schedule":
        return _ScheduleReader(source).read(d)

    def to_dict(self) -> dict[str, Any]:
        return schedule_to_dict(self)

    def with_claim(self, claimed: Claimed) -> "Schedule":
        return replace(self, claimed=claimed)


# --------------------------------------------------------------------------- readers


class _InstanceReader(FieldReader):
    KNOWN_TOP = {"format", "name", "problem", "objective", "cluster", "jobs"}
    KNOWN_CLUSTER = {"nodes", "intra_node_gbps", "inter_node_gbps", "locality_penalty", "split", "interference",
                     "restart_s", "qpi_factor", "pcie_interference"}
    KNOWN_NODE = {"name", "cpus", "mem_gb", "gpus"}
    KNOWN_GPU = {"type", "variability", "socket", "switch"}
    KNOWN_JOB = {
        "name", "model", "arrival", "batch", "iterations", "samples_per_s", "comm_mb", "sizes",
        "class", "weight", "cpu_mem", "ps", "measured",
    }

    def read(self, d: Any) -> Instance:
        d = self.obj(d, "(top level)")
        self.fmt(d, INSTANCE_FORMAT)
        name = self.str_(self.get(d, "name", ""), "name")
        problem = self.choice(self.get(d, "problem", ""), "problem", PROBLEMS)
        objective = self.choice(d.get("objective", "mean_jct"), "objective", OBJECTIVES)
        cluster = self.cluster(self.obj(self.get(d, "cluster", ""), "cluster"))
        jobs_raw = self.count(self.lst(self.get(d, "jobs", ""), "jobs"), "jobs", L.MAX_JOBS, "jobs")
        if not jobs_raw:
            raise self.fail("jobs", "an instance needs at least one job")
        jobs = tuple(self.job(j, f"jobs[{i}]", cluster) for i, j in enumerate(jobs_raw))
        seen: set[str] = set()
        for i, j in enumerate(jobs):
            if j.name in seen:
                raise self.fail(f"jobs[{i}].name", f"duplicate job name {j.name!r}")
            seen.add(j.name)
        if problem == "static" and any(j.arrival != 0 for j in jobs):
            i = next(i for i, j in enumerate(jobs) if j.arrival != 0)
            raise self.fail(f"jobs[{i}].arrival", "static instances have every arrival at 0")
        extra = self.extra(d, self.KNOWN_TOP, "")
        return Instance(name, problem, objective, cluster, jobs, extra)

    def cluster(self, c: dict) -> Cluster:
        nodes_raw = self.count(self.lst(self.get(c, "nodes", "cluster"), "cluster.nodes"), "cluster.nodes",
                               L.MAX_NODES, "nodes")
        if not nodes_raw:
            raise self.fail("cluster.nodes", "a cluster needs at least one node")
        nodes = []
        names: set[str] = set()
        total = 0
        for i, n in enumerate(nodes_raw):
            p = f"cluster.nodes[{i}]"
            n = self.obj(n, p)
            name = self.str_(self.get(n, "name", p), f"{p}.name")
            if name in names:
                raise self.fail(f"{p}.name", f"duplicate node name {name!r}")
            if ":" in name:
                raise self.fail(f"{p}.name", "node names may not contain ':'")
            names.add(name)
            cpus = self.num(n.get("cpus", 0), f"{p}.cpus", L.CPUS)
            mem = self.num(n.get("mem_gb", 0), f"{p}.mem_gb", L.MEM_GB)
            gpus = []
            gl = self.opt_lst(n.get("gpus"), f"{p}.gpus")
            total += len(gl)
            if total > L.MAX_GPUS:
                raise self.fail(f"{p}.gpus", f"the cluster has more than {L.MAX_GPUS} GPUs")
            for k, g in enumerate(gl):
                gp = f"{p}.gpus[{k}]"
                g = self.obj(g, gp)
                t = self.str_(self.get(g, "type", gp), f"{gp}.type")
                var = self.opt_obj(g.get("variability"), f"{gp}.variability")
                var = {str(cl): self.num(x, f"{gp}.variability.{cl}", L.VARIABILITY) for cl, x in var.items()}
                sock, sw = (None if g.get(f) is None else self.int_(g[f], f"{gp}.{f}", 0, _TOPOLOGY_MAX)
                            for f in ("socket", "switch"))
                gpus.append(GPU(name, k, t, var, sock, sw, self.extra(g, self.KNOWN_GPU, gp)))
            self.topology(gpus, p)
            nodes.append(Node(name, cpus, mem, tuple(gpus), self.extra(n, self.KNOWN_NODE, p)))
        if not any(n.gpus for n in nodes):
            raise self.fail("cluster.nodes", "the cluster has no GPU")
        inter = self.opt_obj(c.get("interference"), "cluster.interference")
        interference = {}
        for a, row in inter.items():
            row = self.obj(row, f"cluster.interference.{a}")
            interference[str(a)] = {
                str(b): self.num(x, f"cluster.interference.{a}.{b}", L.INTERFERENCE) for b, x in row.items()
            }
        return Cluster(
            nodes=tuple(nodes),
            intra_node_gbps=self.num(c.get("intra_node_gbps", 100.0), "cluster.intra_node_gbps", L.BANDWIDTH),
            inter_node_gbps=self.num(c.get("inter_node_gbps", 25.0), "cluster.inter_node_gbps", L.BANDWIDTH),
            locality_penalty=self.num(c.get("locality_penalty", 1.0), "cluster.locality_penalty", L.LOCALITY),
            split=self.choice(c.get("split", "proportional"), "cluster.split", SPLITS),
            interference=interference,
            restart_s=self.num(c.get("restart_s", 0.0), "cluster.restart_s", L.TIME),
            qpi_factor=self.num(c.get("qpi_factor", 1.0), "cluster.qpi_factor", L.LOCALITY),
            pcie_interference=self.num(c.get("pcie_interference", 0.0), "cluster.pcie_interference",
                                       L.INTERFERENCE),
            extra=self.extra(c, self.KNOWN_CLUSTER, "cluster"),
        )

    def topology(self, gpus: list[GPU], p: str) -> None:
        """A PCIe switch hangs off one CPU socket: its GPUs name the same socket (or none of them does)."""
        seen: dict[int, tuple[int | None, int]] = {}
        for g in gpus:
            if g.switch is None:
                continue
            first = seen.setdefault(g.switch, (g.socket, g.index))
            if first[0] != g.socket:
                raise self.fail(f"{p}.gpus[{g.index}].socket", f"switch {g.switch} also holds GPU {first[1]} "
                                f"on socket {first[0]}: a PCIe switch hangs off one socket")

    def job(self, j: Any, p: str, cluster: Cluster) -> Job:
        j = self.obj(j, p)
        name = self.str_(self.get(j, "name", p), f"{p}.name")
        sps_raw = self.obj(self.get(j, "samples_per_s", p), f"{p}.samples_per_s")
        sps = {str(t): self.num(x, f"{p}.samples_per_s.{t}", L.RATE) for t, x in sps_raw.items()}
        if not any(x > 0 for x in sps.values()):
            raise self.fail(f"{p}.samples_per_s", "no GPU type can host this job (all rates are 0)")
        sizes_raw = self.lst(j.get("sizes", [1]), f"{p}.sizes")
        if not sizes_raw:
            raise self.fail(f"{p}.sizes", "needs at least one allowed GPU count")
        sizes = tuple(sorted({self.int_(s, f"{p}.sizes[{i}]", 1) for i, s in enumerate(sizes_raw)}))
        total = len(cluster.gpus)
        if sizes[0] > total:
            raise self.fail(f"{p}.sizes", f"every size is larger than the cluster ({total} GPUs)")
        cls = j.get("class")
        if cls is not None:
            cls = self.str_(cls, f"{p}.class")
        model = j.get("model")
        if model is not None:
            model = self.str_(model, f"{p}.model")
        cpu_mem = None
        if j.get("cpu_mem") is not None:
            cm = self.obj(j["cpu_mem"], f"{p}.cpu_mem")
            self.extra(cm, {"levels"}, f"{p}.cpu_mem")
            lv = self.count(self.lst(self.get(cm, "levels", f"{p}.cpu_mem"), f"{p}.cpu_mem.levels"),
                            f"{p}.cpu_mem.levels", L.MAX_LEVELS, "levels")
            levels = []
            for i, row in enumerate(lv):
                rp = f"{p}.cpu_mem.levels[{i}]"
                row = self.lst(row, rp)
                if len(row) != 3:
                    raise self.fail(rp, "expected [cpus_per_gpu, mem_gb_per_gpu, speedup]")
                levels.append((self.num(row[0], rp + "[0]", L.CPUS), self.num(row[1], rp + "[1]", L.MEM_GB),
                               self.num(row[2], rp + "[2]", L.SPEEDUP)))
            if not levels:
                raise self.fail(f"{p}.cpu_mem.levels", "needs at least one level")
            cpu_mem = CpuMem(tuple(levels))
        ps = None
        if j.get("ps") is not None:
            pr = self.obj(j["ps"], f"{p}.ps")
            self.extra(pr, {"max_ps", "ps_cpus", "theta"}, f"{p}.ps")
            theta = self.lst(self.get(pr, "theta", f"{p}.ps"), f"{p}.ps.theta")
            if len(theta) != 4:
                raise self.fail(f"{p}.ps.theta", "expected four overhead terms [t1, t2, t3, t4]")
            ps = PSConfig(
                max_ps=self.int_(self.get(pr, "max_ps", f"{p}.ps"), f"{p}.ps.max_ps", 1, L.MAX_PS),
                ps_cpus=self.num(pr.get("ps_cpus", 0), f"{p}.ps.ps_cpus", L.CPUS),
                theta=tuple(self.num(t, f"{p}.ps.theta[{i}]", L.THETA) for i, t in enumerate(theta)),  # type: ignore[arg-type]
            )
            held = _ps_room(cluster, ps.ps_cpus)
            if ps.max_ps > held:
                raise self.fail(f"{p}.ps.max_ps", f"{ps.max_ps} parameter servers of {ps.ps_cpus:g} CPUs: the "
                                f"cluster's CPUs hold at most {held}")
        measured: dict[str, dict[int, float]] = {}
        for key, table in self.opt_obj(j.get("measured"), f"{p}.measured").items():
            mp = f"{p}.measured.{key}"
            table = self.obj(table, mp)
            row = {}
            for n, x in table.items():
                n = str(n)
                if not _COUNT_KEY.fullmatch(n) or not 1 <= int(n) <= L.MAX_GPUS:
                    raise self.fail(f"{mp}.{n[:40]}", f"GPU counts are integer keys in [1, {L.MAX_GPUS}]")
                row[int(n)] = self.num(x, f"{mp}.{n}", L.MEASURED)
            measured[str(key)] = row
        comm = j.get("comm_mb")
        extra = self.extra(j, self.KNOWN_JOB, p)
        return Job(
            name=name,
            arrival=self.num(self.get(j, "arrival", p), f"{p}.arrival", L.TIME),
            batch=self.num(self.get(j, "batch", p), f"{p}.batch", L.BATCH),
            iterations=self.num(self.get(j, "iterations", p), f"{p}.iterations", L.ITERATIONS),
            samples_per_s=sps,
            comm_mb=0.0 if comm is None else self.num(comm, f"{p}.comm_mb", L.COMM_MB),
            sizes=sizes,
            job_class=cls,
            weight=self.num(j.get("weight", 1.0), f"{p}.weight", L.WEIGHT),
            model=model,
            cpu_mem=cpu_mem,
            ps=ps,
            measured=measured,
            extra=extra,
        )


class _ScheduleReader(FieldReader):
    KNOWN_TOP = {"format", "instance", "method", "segments", "claimed"}
    KNOWN_SEGMENT = {"job", "start", "end", "gpus", "ps_nodes", "cpus_per_gpu", "mem_gb_per_gpu"}
    KNOWN_CLAIMED = {"objective", "lower_bound", "status", "runtime_s"}

    def read(self, d: Any) -> Schedule:
        d = self.obj(d, "(top level)")
        self.fmt(d, SCHEDULE_FORMAT)
        inst = self.str_(self.get(d, "instance", ""), "instance")
        method = self.str_(d.get("method", "unknown"), "method")
        segs = []
        seg_raw = self.count(self.lst(self.get(d, "segments", ""), "segments"), "segments", L.MAX_SEGMENTS, "segments")
        for i, s in enumerate(seg_raw):
            p = f"segments[{i}]"
            s = self.obj(s, p)
            start = self.num(self.get(s, "start", p), f"{p}.start", _SCHEDULE_TIME)
            end = s.get("end")
            end = None if end is None else self.num(end, f"{p}.end", _SCHEDULE_TIME)
            gpus = tuple(self.str_(g, f"{p}.gpus[{k}]") for k, g in enumerate(self.lst(self.get(s, "gpus", p), f"{p}.gpus")))
            psn = tuple(self.str_(n, f"{p}.ps_nodes[{k}]") for k, n in enumerate(self.opt_lst(s.get("ps_nodes"), f"{p}.ps_nodes")))
            cpg = s.get("cpus_per_gpu")
            mpg = s.get("mem_gb_per_gpu")
            cpg = None if cpg is None else self.num(cpg, f"{p}.cpus_per_gpu", L.CPUS)
            mpg = None if mpg is None else self.num(mpg, f"{p}.mem_gb_per_gpu", L.MEM_GB)
            self.extra(s, self.KNOWN_SEGMENT, p)   # unknown segment fields are not kept, but must be finite
            segs.append(Segment(self.str_(self.get(s, "job", p), f"{p}.job"), start, end, Allocation(gpus, psn, cpg, mpg)))
        claimed = None
        if d.get("claimed") is not None:
            c = self.obj(d["claimed"], "claimed")
            self.extra(c, self.KNOWN_CLAIMED, "claimed")
            obj = c.get("objective")
            lb = c.get("lower_bound")
            rt = c.get("runtime_s")
            claimed = Claimed(
                objective=None if obj is None else self.num(obj, "claimed.objective", _SCHEDULE_TIME),
                lower_bound=None if lb is None else self.num(lb, "claimed.lower_bound", _ANY),
                status=self.choice(c.get("status", "feasible"), "claimed.status", STATUSES),
                runtime_s=None if rt is None else self.num(rt, "claimed.runtime_s", L.RUNTIME),
            )
        extra = self.extra(d, self.KNOWN_TOP, "")
        return Schedule(inst, method, tuple(segs), claimed, extra)


_COUNT_KEY = re.compile(r"[0-9]{1,7}")
#: a schedule's times and objective: finite and >= 0 (no upper limit: a valid instance's jobs may run for
#: far longer than the 1e9 s of its arrivals, and every valid schedule of it must be writable)
_SCHEDULE_TIME = L.Range(0, math.inf)
_ANY = L.Range(-math.inf, math.inf)


def _ps_room(cluster: Cluster, ps_cpus: float) -> int:
    """How many parameter servers of ``ps_cpus`` CPUs the cluster's CPUs hold (at most MAX_PS)."""
    if ps_cpus <= 0:
        return L.MAX_PS
    # each node's count capped before int(): a subnormal ps_cpus (in range: > 0) makes the quotient inf
    return min(L.MAX_PS, sum(int(min(n.cpus / ps_cpus + 1e-9, L.MAX_PS)) for n in cluster.nodes))


# --------------------------------------------------------------------------- writers


def instance_to_dict(inst: Instance) -> dict[str, Any]:
    c = inst.cluster
    nodes = []
    for n in c.nodes:
        gpus = []
        for g in n.gpus:
            gd: dict[str, Any] = {"type": g.type}
            if g.variability:
                gd["variability"] = dict(g.variability)
            for f in ("socket", "switch"):
                if getattr(g, f) is not None:
                    gd[f] = getattr(g, f)
            gpus.append({**gd, **g.extra})
        nodes.append({"name": n.name, "cpus": n.cpus, "mem_gb": n.mem_gb, "gpus": gpus, **n.extra})
    jobs = []
    for j in inst.jobs:
        jd: dict[str, Any] = {"name": j.name}
        if j.model is not None:
            jd["model"] = j.model
        jd.update(
            arrival=j.arrival, batch=j.batch, iterations=j.iterations,
            samples_per_s=dict(j.samples_per_s), comm_mb=j.comm_mb, sizes=list(j.sizes),
            **{"class": j.job_class}, weight=j.weight,
            cpu_mem=None if j.cpu_mem is None else {"levels": [list(l) for l in j.cpu_mem.levels]},
            ps=None if j.ps is None else {"max_ps": j.ps.max_ps, "ps_cpus": j.ps.ps_cpus, "theta": list(j.ps.theta)},
        )
        if j.measured:
            jd["measured"] = {k: {str(n): x for n, x in row.items()} for k, row in j.measured.items()}
        jd.update(j.extra)
        jobs.append(jd)
    # v1.1 fields are written only when set, so a v1 file writes back as it was
    topology = {k: v for k, v, default in (("qpi_factor", c.qpi_factor, 1.0),
                                           ("pcie_interference", c.pcie_interference, 0.0)) if v != default}
    out: dict[str, Any] = {
        "format": INSTANCE_FORMAT, "name": inst.name, "problem": inst.problem,
        "objective": inst.objective,
        "cluster": {
            "nodes": nodes, "intra_node_gbps": c.intra_node_gbps, "inter_node_gbps": c.inter_node_gbps,
            "locality_penalty": c.locality_penalty, "split": c.split,
            "interference": {a: dict(r) for a, r in c.interference.items()}, "restart_s": c.restart_s,
            **topology,
            **c.extra,
        },
        "jobs": jobs,
    }
    out.update(inst.extra)
    return out


def schedule_to_dict(s: Schedule) -> dict[str, Any]:
    out: dict[str, Any] = {
        "format": SCHEDULE_FORMAT, "instance": s.instance, "method": s.method,
        "segments": [
            {"job": g.job, "start": g.start, "end": g.end, "gpus": list(g.alloc.gpus),
             "ps_nodes": list(g.alloc.ps_nodes), "cpus_per_gpu": g.alloc.cpus_per_gpu,
             "mem_gb_per_gpu": g.alloc.mem_gb_per_gpu}
            for g in s.segments
        ],
    }
    if s.claimed is not None:
        c = s.claimed
        out["claimed"] = {"objective": c.objective, "lower_bound": c.lower_bound, "status": c.status,
                          "runtime_s": c.runtime_s}
    out.update(s.extra)
    return out


# --------------------------------------------------------------------------- files


def read_json(path: str | os.PathLike) -> Any:
    """A JSON input file, size and nesting checked before it is parsed (:func:`jctlab.limits.read_json`)."""
    return L.read_json(path)


def load_instance(path: str | os.PathLike) -> Instance:
    return Instance.from_dict(read_json(path), source=str(path))


def load_schedule(path: str | os.PathLike) -> Schedule:
    return Schedule.from_dict(read_json(path), source=str(path))


def write_json_atomic(path: str | os.PathLike, data: Any) -> None:
    """Write via a temporary file and rename, so a failure never leaves half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, allow_nan=False)
            f.write("\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def save_instance(inst: Instance, path: str | os.PathLike) -> None:
    write_json_atomic(path, inst.to_dict())


def save_schedule(s: Schedule, path: str | os.PathLike) -> None:
    write_json_atomic(path, s.to_dict())
