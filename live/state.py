"""The live state of a small GPU cluster, as typed values: nodes, queued and running jobs, plans.

Times are seconds on one clock (UNIX seconds when read from Slurm or ISO dates; any clock in hand-written
files). Work is what the speed model of SPEC §2 needs to price a job on any allocation; :mod:`live.instance`
turns a :class:`LiveState` into a jctlab :class:`~jctlab.model.Instance` with that model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from jctlab.model import GPU, Cluster, CpuMem, Node, PSConfig

#: synchronisation steps of a job whose work is given in seconds (its all-reduce cost counts per step)
DEFAULT_STEPS = 1000.0


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: its type, CPU socket (priced by the cluster's ``qpi_factor``, SPEC §2 v1.1) and per-class
    slowdowns (SPEC §1 ``variability``: job class -> factor, 1 when absent)."""

    index: int
    type: str
    socket: int | None = None
    variability: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    gpus: tuple[GpuSpec, ...]
    cpus: float = 0.0
    mem_gb: float = 0.0

    def gpu_id(self, index: int) -> str:
        return f"{self.name}:{index}"


@dataclass(frozen=True)
class ClusterSpec:
    """The cluster: nodes with typed GPUs, the network terms of SPEC §1, ``restart_s`` (what a preempted
    job loses when it resumes) and ``qpi_factor`` (a job whose GPUs on one node span its CPU sockets).
    Interference (class or PCIe co-location) is not a live notion: a lab has no measured co-location table,
    and plans without it stay valid (it only ever slows jobs down)."""

    name: str
    nodes: tuple[NodeSpec, ...]
    intra_node_gbps: float = 100.0
    inter_node_gbps: float = 25.0
    locality_penalty: float = 1.0
    restart_s: float = 0.0
    qpi_factor: float = 1.0

    @staticmethod
    def from_cluster(cluster: Cluster, name: str = "cluster") -> "ClusterSpec":
        """A jctlab cluster's nodes, network, sockets, per-GPU variability and restart time (its
        interference terms are not live notions, see the class docstring)."""
        nodes = tuple(NodeSpec(n.name, tuple(GpuSpec(g.index, g.type, g.socket, dict(g.variability)) for g in n.gpus),
                               n.cpus, n.mem_gb) for n in cluster.nodes)
        return ClusterSpec(name, nodes, cluster.intra_node_gbps, cluster.inter_node_gbps, cluster.locality_penalty,
                           cluster.restart_s, cluster.qpi_factor)

    def to_cluster(self) -> Cluster:
        nodes = tuple(Node(n.name, n.cpus, n.mem_gb, tuple(GPU(n.name, i, g.type, dict(g.variability), g.socket)
                                                           for i, g in enumerate(n.gpus)))
                      for n in self.nodes)
        return Cluster(nodes, self.intra_node_gbps, self.inter_node_gbps, self.locality_penalty, "proportional",
                       {}, self.restart_s, self.qpi_factor)

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        return tuple(n.gpu_id(i) for n in self.nodes for i in range(len(n.gpus)))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({g.type for n in self.nodes for g in n.gpus}))

    def to_dict(self) -> dict[str, Any]:
        def gpu(g: GpuSpec) -> dict[str, Any]:
            return {"type": g.type, "socket": g.socket, **({"variability": dict(g.variability)} if g.variability else {})}

        return {"name": self.name, "intra_node_gbps": self.intra_node_gbps, "inter_node_gbps": self.inter_node_gbps,
                "locality_penalty": self.locality_penalty, "restart_s": self.restart_s,
                **({"qpi_factor": self.qpi_factor} if self.qpi_factor != 1.0 else {}),
                "nodes": [{"name": n.name, "cpus": n.cpus, "mem_gb": n.mem_gb, "gpus": [gpu(g) for g in n.gpus]}
                          for n in self.nodes]}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "ClusterSpec":
        """The inverse of :meth:`to_dict` (for the store; user files go through :mod:`live.readers`).
        State files written before sockets were priced or variability was kept have neither key."""
        nodes = tuple(NodeSpec(n["name"], tuple(GpuSpec(i, g["type"], g.get("socket"),
                                                        {str(k): float(v) for k, v in g.get("variability", {}).items()})
                                                for i, g in enumerate(n["gpus"])),
                               float(n.get("cpus", 0.0)), float(n.get("mem_gb", 0.0))) for n in d["nodes"])
        return ClusterSpec(d["name"], nodes, float(d["intra_node_gbps"]), float(d["inter_node_gbps"]),
                           float(d["locality_penalty"]), float(d["restart_s"]), float(d.get("qpi_factor", 1.0)))


@dataclass(frozen=True)
class Work:
    """How much a job has to do, in one of two forms.

    * ``seconds``: per GPU type, its run time on one GPU of that type (GPU-seconds); on n GPUs it is split
      in proportion to their speeds, plus ``steps`` ring all-reduces of ``comm_mb`` when ``comm_mb`` > 0;
    * ``model`` (a job type of the shipped Gavel table, ``jctlab/tables/gavel_job_types.json``) and
      ``iterations``: Gavel's measured throughputs and fitted ``comm_mb``;
    * ``spec``: the speed fields of a SPEC §1 job (``batch``, ``iterations``, ``samples_per_s``, ``comm_mb``,
      ``measured``, ``model``), as a jctlab instance has them (the planner run inside the simulator).
    """

    seconds: Mapping[str, float] = field(default_factory=dict)
    model: str | None = None
    iterations: float | None = None
    comm_mb: float = 0.0
    steps: float = DEFAULT_STEPS
    spec: Mapping[str, Any] | None = None

    def scaled(self, share: float) -> "Work":
        """``share`` of this work (0 < share <= 1): what a job stopped part-way still has to do. Every form
        is linear in its amount (iterations, or seconds and steps together), so its run time on any
        allocation scales by ``share`` exactly."""
        if self.spec is not None:
            return Work(spec={**self.spec, "iterations": float(self.spec["iterations"]) * share})
        if self.model is not None:
            return Work(model=self.model, iterations=float(self.iterations or 0.0) * share)
        return Work({t: s * share for t, s in self.seconds.items()}, comm_mb=self.comm_mb, steps=self.steps * share)

    def to_dict(self) -> dict[str, Any]:
        if self.spec is not None:
            return {"spec": {**self.spec, "measured": {k: {str(n): x for n, x in row.items()}
                                                        for k, row in self.spec["measured"].items()}}}
        if self.model is not None:
            return {"model": self.model, "iterations": self.iterations}
        return {"seconds": dict(self.seconds), "comm_mb": self.comm_mb, "steps": self.steps}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Work":
        if d.get("spec") is not None:
            sp = d["spec"]
            return Work(spec={**sp, "measured": {k: {int(n): float(x) for n, x in row.items()}
                                                 for k, row in sp["measured"].items()}})
        if d.get("model") is not None:
            return Work(model=d["model"], iterations=float(d["iterations"]))
        return Work({str(k): float(v) for k, v in d["seconds"].items()}, comm_mb=float(d.get("comm_mb", 0.0)),
                    steps=float(d.get("steps", DEFAULT_STEPS)))


@dataclass(frozen=True)
class Traits:
    """What SPEC §1 says of a job besides its work, passed through to the instance: its ``job_class`` (which
    the GPUs' ``variability`` slows down), a Synergy-style ``cpu_mem`` table and a parameter-server
    configuration ``ps``. Live plans run every job at the fair CPU/memory share with one parameter server
    (:mod:`live.decode`); the oracle may pick other levels and servers."""

    job_class: str | None = None
    cpu_mem: CpuMem | None = None
    ps: PSConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.job_class is not None:
            out["class"] = self.job_class
        if self.cpu_mem is not None:
            out["cpu_mem"] = [list(lv) for lv in self.cpu_mem.levels]
        if self.ps is not None:
            out["ps"] = {"max_ps": self.ps.max_ps, "ps_cpus": self.ps.ps_cpus, "theta": list(self.ps.theta)}
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any] | None) -> "Traits":
        if not d:
            return NO_TRAITS
        cm, ps = d.get("cpu_mem"), d.get("ps")
        return Traits(d.get("class"), None if cm is None else CpuMem(tuple(tuple(float(x) for x in lv) for lv in cm)),
                      None if ps is None else PSConfig(int(ps["max_ps"]), float(ps["ps_cpus"]),
                                                       tuple(float(x) for x in ps["theta"])))  # type: ignore[arg-type]


NO_TRAITS = Traits()


@dataclass(frozen=True)
class QueuedJob:
    """A job waiting to start. ``preempted``: how many times it was stopped (with preemption allowed) — a
    job stopped at least once pays the cluster's ``restart_s`` when it starts again, and ``work`` is what it
    had left then."""

    name: str
    submit: float
    sizes: tuple[int, ...]
    work: Work
    weight: float = 1.0
    traits: Traits = NO_TRAITS
    preempted: int = 0

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "submit": self.submit, "sizes": list(self.sizes), "work": self.work.to_dict(),
               "weight": self.weight}
        if self.traits != NO_TRAITS:
            out["traits"] = self.traits.to_dict()
        if self.preempted:
            out["preempted"] = self.preempted
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "QueuedJob":
        return QueuedJob(d["name"], float(d["submit"]), tuple(int(s) for s in d["sizes"]), Work.from_dict(d["work"]),
                         float(d.get("weight", 1.0)), Traits.from_dict(d.get("traits")), int(d.get("preempted", 0)))


@dataclass(frozen=True)
class RunningJob:
    """A job that holds ``gpus`` since ``start``; ``remaining_s`` is the estimated time it still needs on
    them, as of ``estimated_at``. ``work`` (optional) describes the job — all of it, or what it had left at
    its last start — and prices it elsewhere, which only preemption needs (a job without it is never
    preempted). ``ps_nodes``: where its parameter servers run (PS jobs); ``preempted``: times stopped so far."""

    name: str
    submit: float
    start: float
    gpus: tuple[str, ...]
    remaining_s: float
    estimated_at: float
    work: Work | None = None
    weight: float = 1.0
    traits: Traits = NO_TRAITS
    preempted: int = 0
    ps_nodes: tuple[str, ...] = ()

    def remaining_at(self, now: float, floor_s: float) -> float:
        """Estimated time left at ``now``: the estimate minus the time since it was made, at least
        ``floor_s`` (a job past its estimate is expected to end soon, not to have ended)."""
        return max(floor_s, self.remaining_s - max(0.0, now - self.estimated_at))

    def past_estimate(self, now: float, floor_s: float) -> bool:
        """Whether the estimate has run out (the job is held at ``floor_s``: about to end, never preempted)."""
        return self.remaining_s - max(0.0, now - self.estimated_at) <= floor_s

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "submit": self.submit, "start": self.start, "gpus": list(self.gpus),
               "remaining_s": self.remaining_s, "estimated_at": self.estimated_at,
               "work": None if self.work is None else self.work.to_dict(), "weight": self.weight}
        if self.traits != NO_TRAITS:
            out["traits"] = self.traits.to_dict()
        if self.preempted:
            out["preempted"] = self.preempted
        if self.ps_nodes:
            out["ps_nodes"] = list(self.ps_nodes)
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "RunningJob":
        w = d.get("work")
        return RunningJob(d["name"], float(d["submit"]), float(d["start"]), tuple(d["gpus"]), float(d["remaining_s"]),
                          float(d["estimated_at"]), None if w is None else Work.from_dict(w),
                          float(d.get("weight", 1.0)), Traits.from_dict(d.get("traits")), int(d.get("preempted", 0)),
                          tuple(d.get("ps_nodes", ())))


@dataclass(frozen=True)
class LiveState:
    cluster: ClusterSpec
    now: float
    queued: tuple[QueuedJob, ...] = ()
    running: tuple[RunningJob, ...] = ()

    def at(self, now: float) -> "LiveState":
        return replace(self, now=now)

    @property
    def busy_gpus(self) -> frozenset[str]:
        return frozenset(g for r in self.running for g in r.gpus)


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Placement:
    """One job of a plan: where it runs, when it starts and when it is predicted to complete (absolute)."""

    job: str
    gpus: tuple[str, ...]
    start: float
    end: float
    ps_nodes: tuple[str, ...] = ()   # a parameter-server job's servers

    def to_dict(self) -> dict[str, Any]:
        out = {"job": self.job, "gpus": list(self.gpus), "start": self.start, "end": self.end}
        if self.ps_nodes:
            out["ps_nodes"] = list(self.ps_nodes)
        return out

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Placement":
        return Placement(d["job"], tuple(d["gpus"]), float(d["start"]), float(d["end"]), tuple(d.get("ps_nodes", ())))


@dataclass(frozen=True)
class Plan:
    """A decision and the plan behind it.

    ``start_now``: the jobs to start at ``now`` (the decision; a job preempted now and started again now on
    other GPUs is a migration); ``preempt_now``: running jobs to stop now (only with preemption allowed),
    before the starts; ``later``: the planned starts of the other queued jobs;
    ``running``: the running jobs kept, with their predicted completions. ``objective`` is the plan's
    objective on the live instance (times from ``now``, :mod:`live.instance`), ``lower_bound`` the oracle's
    bound on it (None without one), ``source`` the candidate that won (``"cpsat"``, ``"srtf+packed"``...).
    """

    now: float
    start_now: tuple[Placement, ...]
    later: tuple[Placement, ...]
    running: tuple[Placement, ...]
    preempt_now: tuple[str, ...]
    objective: float
    lower_bound: float | None
    source: str
    status: str
    latency_s: float
    mean_jct: float        # predicted mean JCT from submission, over the jobs in the plan
    candidates: Mapping[str, float] = field(default_factory=dict)   # candidate -> objective

    @property
    def order(self) -> tuple[Placement, ...]:
        """Every queued job's placement in planned start order (the warm start of the next plan)."""
        return tuple(sorted(self.start_now + self.later, key=lambda p: (p.start, p.job)))

    def to_dict(self) -> dict[str, Any]:
        return {"now": self.now, "start_now": [p.to_dict() for p in self.start_now],
                "preempt_now": list(self.preempt_now), "later": [p.to_dict() for p in self.later],
                "running": [p.to_dict() for p in self.running], "objective": self.objective,
                "lower_bound": self.lower_bound, "source": self.source, "status": self.status,
                "latency_s": self.latency_s, "mean_jct": self.mean_jct, "candidates": dict(self.candidates)}

    @staticmethod
    def from_dict(d: Mapping[str, Any]) -> "Plan":
        pl = lambda k: tuple(Placement.from_dict(p) for p in d[k])  # noqa: E731
        return Plan(float(d["now"]), pl("start_now"), pl("later"), pl("running"), tuple(d["preempt_now"]),
                    float(d["objective"]), None if d["lower_bound"] is None else float(d["lower_bound"]),
                    d["source"], d["status"], float(d["latency_s"]), float(d["mean_jct"]),
                    dict(d.get("candidates", {})))
