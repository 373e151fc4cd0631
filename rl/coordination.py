"""The dynamic coordination graph of the MAIFS-like policy: agents' claims linked and resolved, never dropped.

At each decision step every agent makes at most one claim (:class:`Claim`: one of its
:class:`rl.marl_observe.Option`). :func:`resolve` builds the graph of this step (its vertices are the
agents; an edge links two agents whose claims interact) and resolves it:

- ``same_job``: two agents claim the same job (only one allocation can start it);
- ``joint``: two agents offer their GPUs toward one multi-node allocation of the same job;
- ``recruited``: a joint allocation took GPUs of an agent that did not claim that job;
- ``shared_node``: an allocation took GPUs, CPUs or memory on a node whose own claim then no longer fit
  (a resource conflict), or two allocations started on one node;
- ``interference``: two allocations started on one node whose job classes interfere (SPEC §2).

**Resolution** is a sequential pass in priority order over jobs (the job whose best claim finishes soonest,
by the speed model's estimate, first: a shortest-remaining-time order). For one job, its candidate
allocations (each single-node claim; the joint claims together as one multi-node allocation) are tried
fastest first against what earlier allocations of the pass left free: the first that fits starts the job.
A joint allocation takes the GPUs its claimants offer, then completes the target size from other nodes
(nodes whose agents made no claim first, then the most free GPUs: fewest nodes), each node giving only
what its free CPUs and memory hold at the claimed level. Every claim gets exactly one
:data:`OUTCOMES` entry:

``granted`` (started as claimed), ``joint`` (started as part of a multi-node allocation),
``level_adjusted`` (started at another CPU/memory level: the claimed one no longer fit every node),
``lost_job`` (another claim on its job was faster), ``lost_resources`` (an earlier allocation took its
GPUs, CPUs or memory), ``joint_incomplete`` (the joint claim could not gather an allowed size).

A deferred claim (the last three) is not dropped: the environment stays at the same instant and the agent
claims again with the state the granted allocations left (:mod:`rl.marl_env`); the counts go to the
step's ``info`` and the training log. Invariants (tested): one outcome per claim, no job started twice, no
GPU given twice, every start within the node CPU/memory capacities the engine checks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jctlab.model import Allocation, GPU, Job
from jctlab.resources import node_demand
from jctlab.simulate import Simulator, Start

from .marl_observe import Level, MarlInfo, Option, frontier, pick_gpus

GRANTED, JOINT, ADJUSTED = "granted", "joint", "level_adjusted"
LOST_JOB, LOST_RESOURCES, INCOMPLETE = "lost_job", "lost_resources", "joint_incomplete"
OUTCOMES = (GRANTED, JOINT, ADJUSTED, LOST_JOB, LOST_RESOURCES, INCOMPLETE)
DEFERRED = (LOST_JOB, LOST_RESOURCES, INCOMPLETE)
EDGE_KINDS = ("same_job", "joint", "recruited", "shared_node", "interference")
EPS = 1e-9


@dataclass(frozen=True)
class Claim:
    agent: int
    option: Option


@dataclass(frozen=True)
class Edge:
    a: int
    b: int
    kind: str


@dataclass
class Resolution:
    """What a step's claims became: the starts, one outcome per claiming agent, the graph's edges."""

    starts: list[Start] = field(default_factory=list)
    outcomes: dict[int, str] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    recruited: dict[int, tuple[int, ...]] = field(default_factory=dict)   # job -> agents whose GPUs it took
    primary: dict[int, int] = field(default_factory=dict)                 # agent -> job it started (its claim's)

    @property
    def conflicts(self) -> int:
        """Claims deferred because another claim got their job or their resources first."""
        return sum(1 for o in self.outcomes.values() if o in (LOST_JOB, LOST_RESOURCES))

    def groups(self) -> int:
        """Connected components of the graph with two or more agents (interacting claims)."""
        parent: dict[int, int] = {}

        def find(x: int) -> int:
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for e in self.edges:
            parent[find(e.a)] = find(e.b)
        roots: dict[int, int] = {}
        for x in list(parent):
            roots[find(x)] = roots.get(find(x), 0) + 1
        return sum(1 for k in roots.values() if k >= 2)

    def counts(self) -> dict[str, int]:
        """Per-step log: claims, each outcome, edges per kind, conflicts, interacting groups, recruited agents."""
        out = {"claims": len(self.outcomes)}
        for o in OUTCOMES:
            out[o] = sum(1 for x in self.outcomes.values() if x == o)
        for k in EDGE_KINDS:
            out[f"edges_{k}"] = sum(1 for e in self.edges if e.kind == k)
        out["conflicts"] = self.conflicts
        out["groups"] = self.groups()
        out["recruited"] = sum(len(v) for v in self.recruited.values())
        return out


class _Free:
    """Tentative free GPUs, CPUs and memory per node during the pass."""

    def __init__(self, sim: Simulator):
        cl, eng = sim.inst.cluster, sim.engine
        self.cl = cl
        self.gpus: dict[str, list[GPU]] = {v: sorted((cl.gpu[g] for g in ids), key=lambda g: g.index)
                                           for v, ids in eng.free.items()}
        self.cpu = {n.name: n.cpus - eng.cpu_used[n.name] for n in cl.nodes}
        self.mem = {n.name: n.mem_gb - eng.mem_used[n.name] for n in cl.nodes}

    def room(self, job: Job, v: str, lv: Level, ps: float = 0.0) -> int:
        """GPUs of node v the job may take at level ``lv`` (usable, free, CPUs and memory for them)."""
        nd = self.cl.node[v]
        c, m = lv.cost(nd.fair_cpus, nd.fair_mem_gb)
        k = sum(1 for g in self.gpus[v] if job.can_use(g.type))
        if c > 0:
            k = min(k, int((self.cpu[v] - ps + EPS * max(1.0, nd.cpus)) // c))
        if m > 0:
            k = min(k, int((self.mem[v] + EPS * max(1.0, nd.mem_gb)) // m))
        return max(0, k)

    def fits(self, job: Job, alloc: Allocation) -> bool:
        cpu, mem = node_demand(job, alloc, self.cl)
        for v, c in cpu.items():
            nd = self.cl.node[v]
            if c > self.cpu[v] + EPS * max(1.0, nd.cpus) or mem.get(v, 0.0) > self.mem[v] + EPS * max(1.0, nd.mem_gb):
                return False
        return all(g in {x.id for x in self.gpus[g.split(":", 1)[0]]} for g in alloc.gpus)

    def take(self, job: Job, alloc: Allocation) -> None:
        cpu, mem = node_demand(job, alloc, self.cl)
        for v, c in cpu.items():
            self.cpu[v] -= c
            self.mem[v] -= mem.get(v, 0.0)
        ids = set(alloc.gpus)
        for v in {g.split(":", 1)[0] for g in ids}:
            self.gpus[v] = [g for g in self.gpus[v] if g.id not in ids]


def _alloc(gpus: list[GPU], lv: Level, ps_nodes: tuple[str, ...] = ()) -> Allocation:
    return Allocation(tuple(g.id for g in sorted(gpus, key=lambda g: (g.node, g.index))), ps_nodes, lv.cpus, lv.mem)


def _ps_nodes(job: Job, gpus: list[GPU], lv: Level, free: _Free) -> tuple[str, ...] | None:
    """One parameter server for a PS job: on the node of the job holding most of its GPUs with CPU room
    beside them, else on any node with room; ``()`` without PS; None when no node has room."""
    if job.ps is None:
        return ()
    on: dict[str, int] = {}
    for g in gpus:
        on[g.node] = on.get(g.node, 0) + 1
    cl = free.cl
    for v in sorted(on, key=lambda v: (-on[v], v)) + [n.name for n in cl.nodes if n.name not in on]:
        nd = cl.node[v]
        c = lv.cost(nd.fair_cpus, nd.fair_mem_gb)[0] * on.get(v, 0)
        if c + job.ps.ps_cpus <= free.cpu[v] + EPS * max(1.0, nd.cpus):
            return (v,)
    return None


def resolve(sim: Simulator, info: MarlInfo, claims: list[Claim]) -> Resolution:
    """Resolve one step's claims over the coordination graph (see the module docstring)."""
    res = Resolution()
    inst = sim.inst
    node_agent = {v: a for a, grp in enumerate(info.groups) for v in grp}
    by_job: dict[int, list[Claim]] = {}
    for c in claims:
        by_job.setdefault(c.option.job, []).append(c)
    for j, cs in by_job.items():
        for x in range(len(cs)):
            for y in range(x + 1, len(cs)):
                kind = "joint" if cs[x].option.joint and cs[y].option.joint else "same_job"
                res.edges.append(Edge(cs[x].agent, cs[y].agent, kind))
    free = _Free(sim)
    pending = {c.agent for c in claims}
    taken_by: dict[str, int] = {}            # node -> primary agent of the last allocation that used it
    order = sorted(by_job, key=lambda j: (min(c.option.run_time for c in by_job[j]), j))
    for j in order:
        job = inst.jobs[j]
        cs = sorted(by_job[j], key=lambda c: (c.option.run_time, c.agent))
        joint = [c for c in cs if c.option.joint]
        candidates: list[tuple[float, list[Claim]]] = [(c.option.run_time, [c]) for c in cs if not c.option.joint]
        if joint:
            candidates.append((joint[0].option.run_time, joint))
        candidates.sort(key=lambda x: (x[0], x[1][0].agent))
        started = False
        for _, group in candidates:
            if started:
                for c in group:
                    res.outcomes[c.agent] = LOST_JOB
                continue
            if group[0].option.joint:
                got = _joint(sim, info, job, j, group, free, pending, node_agent, res)
            else:
                got = _single(job, group[0], free, res)
            if got is None:
                for c in group:
                    if c.agent not in res.outcomes:
                        res.outcomes[c.agent] = INCOMPLETE if c.option.joint else LOST_RESOURCES
                    nodes = info.groups[c.agent]
                    for v in nodes:
                        if v in taken_by and taken_by[v] != c.agent:
                            res.edges.append(Edge(taken_by[v], c.agent, "shared_node"))
                continue
            alloc, primary = got
            started = True
            res.starts.append(Start(j, alloc))
            for v in {g.split(":", 1)[0] for g in alloc.gpus} | set(alloc.ps_nodes):
                if v in taken_by and taken_by[v] != primary:
                    other = taken_by[v]
                    res.edges.append(Edge(other, primary, "shared_node"))
                    o_cls = inst.jobs[res.primary[other]].job_class
                    if max(inst.cluster.interference_of(job.job_class, o_cls),
                           inst.cluster.interference_of(o_cls, job.job_class)) > 0:
                        res.edges.append(Edge(other, primary, "interference"))
                taken_by[v] = primary
        for c in cs:
            pending.discard(c.agent)
    return res


def _single(job: Job, c: Claim, free: _Free, res: Resolution) -> tuple[Allocation, int] | None:
    o = c.option
    gpus = pick_gpus(free.gpus[o.node], job, o.n)
    if gpus is None:
        return None
    levels = [o.level] + [lv for lv in frontier(job) if lv != o.level]
    for k, lv in enumerate(levels):
        ps = _ps_nodes(job, gpus, lv, free)
        if ps is None:
            continue
        alloc = _alloc(gpus, lv, ps)
        if free.fits(job, alloc):
            free.take(job, alloc)
            res.outcomes[c.agent] = GRANTED if k == 0 else ADJUSTED
            res.primary[c.agent] = o.job
            return alloc, c.agent
    return None


def _joint(sim: Simulator, info: MarlInfo, job: Job, j: int, group: list[Claim], free: _Free, pending: set[int],
           node_agent: dict[str, int], res: Resolution) -> tuple[Allocation, int] | None:
    primary = group[0]
    target = primary.option.target
    claimants = {c.agent for c in group}
    own = [v for c in group for v in info.groups[c.agent]]
    others = [n.name for n in sim.inst.cluster.nodes if n.name not in set(own)]
    ps = job.ps.ps_cpus if job.ps is not None else 0.0
    tried: list[Level] = [primary.option.level]
    nd = sim.inst.cluster.node[primary.option.node]
    cheapest = min(frontier(job), key=lambda lv: (*lv.cost(nd.fair_cpus, nd.fair_mem_gb), -lv.speedup))
    if cheapest != primary.option.level:
        tried.append(cheapest)
    for k, lv in enumerate(tried):
        rooms = {v: free.room(job, v, lv) for v in own + others}
        # recruit from agents without a claim first, then the most free GPUs (fewest nodes)
        rest = sorted(others, key=lambda v: (node_agent[v] in pending, -rooms[v], v))
        take: list[GPU] = []
        recruited: set[int] = set()
        for v in own + rest:
            need = target - len(take)
            if need <= 0:
                break
            if rooms[v] <= 0:
                continue
            got = pick_gpus(free.gpus[v], job, min(need, rooms[v]))
            if got is None:
                continue
            take.extend(got)
            if node_agent[v] not in claimants:
                recruited.add(node_agent[v])
        if len(take) != target:
            continue
        # a parameter server needs CPUs beside the GPUs on its node
        ps_nodes = _ps_nodes(job, take, lv, free) if ps else ()
        if ps_nodes is None:
            continue
        alloc = _alloc(take, lv, ps_nodes)
        if not free.fits(job, alloc):
            continue
        free.take(job, alloc)
        for c in group:
            res.outcomes[c.agent] = JOINT if k == 0 else ADJUSTED
        for a in sorted(recruited):
            res.edges.append(Edge(primary.agent, a, "recruited"))
        res.recruited[j] = tuple(sorted(recruited))
        res.primary[primary.agent] = j
        return alloc, primary.agent
    return None
