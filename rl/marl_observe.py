"""What each MAIFS-like agent sees and may claim at a decision point (the multi-agent view of the state).

Agents are nodes (or groups of consecutive nodes when a cluster has more than ``max_agents``:
:func:`agent_groups`). At a decision point every agent may *claim* one waiting job of a shared window
(:class:`MarlDecision`), choosing from a short list of :class:`Option` per job:

- ``max_counts`` GPU counts that fit on one of its nodes (the largest, the best within... see
  :meth:`MarlDecision._counts`) × ``max_levels`` CPU/memory levels from the job's ``cpu_mem`` table
  (Synergy's measured sensitivity; jobs without a table have the fair share only): slot 0 the fastest
  level that fits (fungible: it may take more than the GPU-proportional share), slot 1 the fastest within
  the node's fair share, slot 2 the cheapest level with speedup ≥ 1 (leaves CPUs and memory to others);
  levels are the Pareto frontier of the table (speedup against CPUs and memory), the fair share (SPEC's
  null level, speedup 1) included;
- one *joint* option when the job may use more GPUs than any of the agent's nodes has free: the agent
  offers its free GPUs toward a multi-node allocation of ``target`` GPUs (the smallest allowed size above
  what it holds), completed over the coordination graph (:mod:`rl.coordination`).

Every option is priced by the speed model (SPEC §2: measured tables, locality, variability, the
cross-socket factor, the class interference it would meet now, the level's speedup) from tables
computed once per instance (:class:`MarlInfo`).

The window: with more waiting jobs than ``max_jobs``, the oldest half and the shortest (remaining work
alone) of the rest, so neither old nor short jobs are hidden. Observation of agent i (padded tables,
:func:`observation_space`): ``jobs`` (W × F_JOB, the same for every agent), ``node`` (its own nodes),
``opts`` (W × O × F_OPT, its options), ``opt_mask``, ``glob``, ``action_mask`` (1 + W·O: 0 = claim nothing).
Durations enter as log(1 + t / time_scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from gymnasium import spaces

from jctlab.metrics import ReferenceDurations, strip_variability
from jctlab.model import GPU, Cluster, Instance, Job
from jctlab.simulate import Simulator
from jctlab.speed_tables import step_time_table

F_JOB, F_NODE, F_OPT, F_GLOB = 18, 17, 19, 8
MAX_TYPES = 4          # per-type features (cluster types in name order, more folded into the last)
BOUND = 1e4            # Box bound of every feature


@dataclass(frozen=True)
class MarlConfig:
    """Table sizes and scales of the multi-agent view (one definition for env, networks and policy)."""

    max_jobs: int = 16       # W: window of waiting jobs every agent sees
    max_agents: int = 16     # more nodes than this: agents are groups of consecutive nodes
    max_counts: int = 3      # GPU counts per (agent, job)
    max_levels: int = 3      # CPU/memory levels per count
    time_scale: float = 3600.0
    idle_wait: bool = True   # the no-op on an idle cluster where a job could start (arrivals are to come)

    @property
    def n_options(self) -> int:     # O: counts x levels, plus the joint option
        return self.max_counts * self.max_levels + 1

    @property
    def joint_slot(self) -> int:
        return self.max_counts * self.max_levels

    @property
    def n_actions(self) -> int:
        return 1 + self.max_jobs * self.n_options


def observation_space(cfg: MarlConfig) -> spaces.Dict:
    W, O = cfg.max_jobs, cfg.n_options

    def box(*shape: int) -> spaces.Box:
        return spaces.Box(-BOUND, BOUND, shape=shape, dtype=np.float32)

    def mask(*shape: int) -> spaces.Box:
        return spaces.Box(0, 1, shape=shape, dtype=np.int8)

    return spaces.Dict({"jobs": box(W, F_JOB), "node": box(F_NODE), "opts": box(W, O, F_OPT),
                        "opt_mask": mask(W, O), "glob": box(F_GLOB), "action_mask": mask(cfg.n_actions)})


def agent_groups(cluster: Cluster, max_agents: int) -> tuple[tuple[str, ...], ...]:
    """The nodes of each agent: one node each, or ``max_agents`` groups of consecutive nodes."""
    names = [n.name for n in cluster.nodes]
    if len(names) <= max_agents:
        return tuple((n,) for n in names)
    k, r = divmod(len(names), max_agents)
    out, i = [], 0
    for a in range(max_agents):
        size = k + (1 if a < r else 0)
        out.append(tuple(names[i: i + size]))
        i += size
    return tuple(out)


@dataclass(frozen=True)
class Level:
    """A CPU/memory choice: per-GPU CPUs and GB (None, None: the node's fair share) and its speedup."""

    cpus: float | None
    mem: float | None
    speedup: float

    def cost(self, fair_cpus: float, fair_mem: float) -> tuple[float, float]:
        return (fair_cpus if self.cpus is None else self.cpus, fair_mem if self.mem is None else self.mem)


FAIR = Level(None, None, 1.0)


def frontier(job: Job) -> tuple[Level, ...]:
    """The job's table levels not dominated by another (as fast or faster, no more CPUs, no more memory),
    fastest first; the fair share (null level) is always a choice."""
    if job.cpu_mem is None:
        return (FAIR,)
    lv = sorted({(c, m, s) for c, m, s in job.cpu_mem.levels}, key=lambda x: (-x[2], x[0], x[1]))
    keep: list[tuple[float, float, float]] = []
    for c, m, s in lv:
        if not any(s2 >= s and c2 <= c and m2 <= m for c2, m2, s2 in keep):
            keep.append((c, m, s))
    return tuple(Level(c, m, s) for c, m, s in keep) + (FAIR,)


@dataclass(frozen=True)
class Option:
    """A claim an agent may make: start ``job`` with ``n`` GPUs on ``node`` at ``level`` (a joint option:
    its ``n`` free GPUs over its nodes toward an allocation of ``target`` GPUs)."""

    job: int
    agent: int
    node: str
    n: int
    target: int
    level: Level
    joint: bool
    run_time: float      # estimated remaining run time on it (speed model, co-location met now)
    slot: int


class MarlInfo:
    """Per-instance constants: agents, reference run times, level frontiers and the step-time table."""

    def __init__(self, inst: Instance, cfg: MarlConfig):
        self.inst = inst
        cl = inst.cluster
        self.groups = agent_groups(cl, cfg.max_agents)
        self.types = list(cl.gpu_types)
        self.type_index = {t: min(i, MAX_TYPES - 1) for i, t in enumerate(self.types)}
        # homogeneous only, as rl.observe (the shipped checkpoint learned inf for a job no single type fits)
        self.ref = [ReferenceDurations(strip_variability(cl)).homogeneous(j) for j in inst.jobs]
        self.gpn = max(len(nd.gpus) for nd in cl.nodes)
        self.frontiers = [frontier(j) for j in inst.jobs]
        self.variability = any(g.variability for g in cl.gpus)
        self.topology = any(g.socket is not None for g in cl.gpus)
        sizes = sorted({n for j in inst.jobs for n in j.sizes})
        self._col = {}
        counts, spread = [], []
        for t_i, t in enumerate(self.types):
            for n in sizes:
                for sp in (False, True):
                    self._col[(t, n, sp)] = len(counts)
                    row = [0] * len(self.types)
                    row[t_i] = n
                    counts.append(row)
                    spread.append(sp)
        # alone on n GPUs of one type, one node or spread: SPEC §2 without variability or co-location
        self.table = step_time_table(inst.jobs, cl, self.types, np.array(counts), np.array(spread))
        classes = sorted({j.job_class for j in inst.jobs if j.job_class is not None})
        self.harm = {c: float(np.mean([cl.interference_of(d, c) for d in classes])) for c in classes}
        self.suffer = {c: float(np.mean([cl.interference_of(c, d) for d in classes])) for c in classes}
        self.sensitivity = [max(lv.speedup for lv in f) for f in self.frontiers]
        self.usable_types = [tuple(t for t in self.types if j.can_use(t)) for j in inst.jobs]
        # a job's rate on each type over its best rate
        self.rel_speed = [{t: j.samples_per_s.get(t, 0.0) / max(j.samples_per_s.values()) for t in self.types}
                          for j in inst.jobs]

    def step(self, j: int, t: str, n: int, spread: bool) -> float:
        return float(self.table[j, self._col[(t, n, spread)]])


def _lt(x: float, scale: float) -> float:
    return math.log1p(max(0.0, x) / scale) if math.isfinite(x) else math.log1p(BOUND)


def _lg(n: float) -> float:
    return math.log2(max(1.0, n)) / 6.0


class NodeState:
    """A node's free resources at one decision point (and its running jobs' classes)."""

    __slots__ = ("name", "node", "free", "_free_ids", "by_type", "cpu", "mem", "classes", "jobs")

    def __init__(self, sim: Simulator, name: str):
        cl, eng = sim.inst.cluster, sim.engine
        self.name = name
        self.node = cl.node[name]
        self.free = sorted((cl.gpu[g] for g in eng.free[name]), key=lambda g: g.index)
        self._free_ids = eng.free[name]
        self.by_type: dict[str, int] = {}
        for g in self.free:
            self.by_type[g.type] = self.by_type.get(g.type, 0) + 1
        self.cpu = self.node.cpus - eng.cpu_used[name]
        self.mem = self.node.mem_gb - eng.mem_used[name]
        self.jobs = eng.node_jobs[name]
        self.classes = [sim.inst.jobs[i].job_class for i in self.jobs]

    def whole_free(self, level: str) -> int:
        """How many CPU sockets (``level="socket"``) or PCIe switches (``"switch"``) have all their GPUs free."""
        busy = {getattr(g, level) for g in self.node.gpus if g.id not in self._free_ids}
        return len({getattr(g, level) for g in self.node.gpus if getattr(g, level) is not None} - busy)


def pick_gpus(free: list[GPU], job: Job, n: int, switch_jobs=None) -> list[GPU] | None:
    """``n`` free GPUs of one node for ``job``: the fastest for it (type rate over its variability), within
    one CPU socket when one holds them (the socket with the fewest such GPUs: best fit); GPUs under quiet
    PCIe switches first. None when fewer than ``n`` can host it."""
    cls = job.job_class
    ok = [g for g in free if job.samples_per_s.get(g.type, 0.0) > 0]
    if len(ok) < n:
        return None

    def rank(g: GPU):
        busy = len(switch_jobs.get((g.node, g.switch), ())) if switch_jobs and g.switch is not None else 0
        f = g.factor(cls)
        return (busy, -(job.samples_per_s[g.type] / f if f > 0 else math.inf), g.index)

    sockets: dict[int | None, list[GPU]] = {}
    for g in ok:
        sockets.setdefault(g.socket, []).append(g)
    if len(sockets) > 1:
        fits = [s for s, gl in sockets.items() if len(gl) >= n]
        if fits:
            s = min(fits, key=lambda s: (len(sockets[s]), -1 if s is None else s))
            return sorted(sorted(sockets[s], key=rank)[:n], key=lambda g: g.index)
    return sorted(sorted(ok, key=rank)[:n], key=lambda g: g.index)


class MarlDecision:
    """Options and observations of every agent at the simulator's current state."""

    def __init__(self, sim: Simulator, info: MarlInfo, cfg: MarlConfig, substep: int = 0):
        self.sim, self.info, self.cfg = sim, info, cfg
        self.substep = substep
        inst, eng = sim.inst, sim.engine
        self.window = self._window()
        self.states = {v: NodeState(sim, v) for grp in info.groups for v in grp}
        A, W, O = len(info.groups), cfg.max_jobs, cfg.n_options
        self.options: list[list[list[Option | None]]] = [[[None] * O for _ in range(W)] for _ in range(A)]
        total: dict[str, int] = {}
        for st in self.states.values():
            for t, k in st.by_type.items():
                total[t] = total.get(t, 0) + k
        self._usable_total = {j: sum(total.get(t, 0) for t in info.usable_types[j]) for j in self.window}
        self.has_options = [False] * A
        self.claimable = [0] * len(self.window)       # per window job: agents with an option for it
        for a, grp in enumerate(info.groups):
            if not any(self.states[v].free for v in grp):
                continue
            for w, j in enumerate(self.window):
                if self._job_options(a, grp, w, j):
                    self.has_options[a] = True
                    self.claimable[w] += 1
        self.best_run = [min((o.run_time for a in range(A) for o in self.options[a][w] if o is not None),
                             default=math.inf) for w in range(len(self.window))]
        self.forced = self._forced()
        self._speeds: dict[str, float] = {}
        self.obs = self._observe()

    # ------------------------------------------------------------------ the window and options
    def _window(self) -> list[int]:
        """The oldest half of the window, then the shortest (remaining work alone) of the other waiting jobs."""
        waiting = list(self.sim.waiting)
        W = self.cfg.max_jobs
        if len(waiting) <= W:
            return waiting
        old = waiting[: W // 2]
        eng, ref, jobs = self.sim.engine, self.info.ref, self.sim.inst.jobs
        rest = sorted(waiting[W // 2:], key=lambda j: (ref[j] * eng.remaining(j) / jobs[j].iterations, j))
        return old + rest[: W - len(old)]

    def _job_options(self, a: int, grp: tuple[str, ...], w: int, j: int) -> bool:
        """Fill agent a's options for window job w; whether it has any."""
        job = self.sim.inst.jobs[j]
        row = self.options[a][w]
        cfg = self.cfg
        types = self.info.usable_types[j]
        usable = {v: sum(self.states[v].by_type.get(t, 0) for t in types) for v in grp}
        most = max(usable.values())
        if most == 0:
            return False
        found = False
        for c, n in enumerate(self._counts(job, most)):
            # best fit: the node of the group with the fewest usable free GPUs that holds n
            v = min((v for v in grp if usable[v] >= n), key=lambda v: (usable[v], v))
            for slot, (lvl, rt) in enumerate(self._levels(j, job, self.states[v], n)):
                if lvl is not None:
                    row[c * cfg.max_levels + slot] = Option(j, a, v, n, n, lvl, False, rt, c * cfg.max_levels + slot)
                    found = True
        # joint: the job may use more GPUs than one node of the agent holds, and the cluster has them
        bigger = [s for s in job.sizes if s > most and s <= self._usable_total[j]]
        have = sum(usable.values())
        if bigger and have > 0:
            target = min(bigger)
            v = max(grp, key=lambda v: (usable[v], v))
            st = self.states[v]
            t = next((g.type for g in st.free if job.can_use(g.type)), None)
            lv = self._frugal(j, st, min(usable[v], target))
            if t is not None and lv is not None and self._joint_room(job, lv, target):
                step = self.info.step(j, t, target, True)
                if math.isfinite(step):
                    rt = self.sim.engine.remaining(j) * step * self._coloc(job, st) / lv.speedup
                    row[cfg.joint_slot] = Option(j, a, v, min(have, target), target, lv, True, rt, cfg.joint_slot)
                    found = True
        return found

    def _joint_room(self, job: Job, lv: Level, target: int) -> bool:
        """Whether the cluster's free GPUs, CPUs and memory hold ``target`` GPUs of the job at ``lv`` (and its
        parameter server): the joint claim can be completed."""
        k, spare = 0, 0.0
        for st in self.states.values():
            c, m = lv.cost(st.node.fair_cpus, st.node.fair_mem_gb)
            n = sum(st.by_type.get(t, 0) for t in self.info.usable_types[self.sim.inst.index[job.name]])
            if c > 0:
                n = min(n, int((st.cpu + 1e-9 * max(1.0, st.node.cpus)) // c))
            if m > 0:
                n = min(n, int((st.mem + 1e-9 * max(1.0, st.node.mem_gb)) // m))
            k += n
            spare = max(spare, st.cpu - c * n)
        ps = job.ps.ps_cpus if job.ps is not None else 0.0
        return k >= target and (ps <= 0 or spare >= ps or k > target)

    def _counts(self, job: Job, most: int) -> list[int]:
        """Up to ``max_counts`` allowed sizes that fit on one node: the largest, the smallest, and the one
        in the middle of those that fit."""
        fit = [n for n in sorted(job.sizes) if n <= most]
        if len(fit) <= self.cfg.max_counts:
            return fit[::-1]
        picks = [fit[-1], fit[len(fit) // 2], fit[0]]
        return list(dict.fromkeys(picks))[: self.cfg.max_counts]

    def _fits(self, lv: Level, st: NodeState, n: int, ps: float) -> bool:
        """Whether n GPUs at level ``lv`` fit the node's free CPUs and memory, and a parameter server of
        ``ps`` CPUs fits beside them or on another node."""
        c, m = lv.cost(st.node.fair_cpus, st.node.fair_mem_gb)
        tol = 1e-9 * max(1.0, st.node.cpus)
        if c * n > st.cpu + tol or m * n > st.mem + 1e-9 * max(1.0, st.node.mem_gb):
            return False
        return ps <= 0 or c * n + ps <= st.cpu + tol or self._ps_elsewhere(st.name, ps)

    def _ps_elsewhere(self, v: str, ps: float) -> bool:
        return any(x.cpu + 1e-9 * max(1.0, x.node.cpus) >= ps for name, x in self.states.items() if name != v)

    def _frugal(self, j: int, st: NodeState, n: int) -> Level | None:
        job = self.sim.inst.jobs[j]
        ps = job.ps.ps_cpus if job.ps is not None else 0.0
        ok = [lv for lv in self.info.frontiers[j] if self._fits(lv, st, n, ps)]
        good = [lv for lv in ok if lv.speedup >= 1.0 - 1e-9] or ok
        return min(good, key=lambda lv: self._share(lv, st, n)) if good else None

    def _share(self, lv: Level, st: NodeState, n: int) -> float:
        c, m = lv.cost(st.node.fair_cpus, st.node.fair_mem_gb)
        nd = st.node
        return max(c * n / nd.cpus if nd.cpus > 0 else 0.0, m * n / nd.mem_gb if nd.mem_gb > 0 else 0.0)

    def _levels(self, j: int, job: Job, st: NodeState, n: int) -> list[tuple[Level | None, float]]:
        """(level, run time) of the level slots on node ``st`` with ``n`` GPUs (None where none / duplicate)."""
        gpus = pick_gpus(st.free, job, n, self.sim.engine.switch_jobs if self.info.topology else None)
        if gpus is None:
            return []
        ps = job.ps.ps_cpus if job.ps is not None else 0.0
        ok = [lv for lv in self.info.frontiers[j] if self._fits(lv, st, n, ps)]
        if not ok:
            return []
        types = {g.type for g in gpus}
        t = min(types, key=lambda t: job.samples_per_s[t]) if len(types) > 1 else next(iter(types))
        step = self.info.step(j, t, n, False)
        if not math.isfinite(step):
            return []
        if self.info.variability:
            step *= max(g.factor(job.job_class) for g in gpus)
        cl = self.sim.inst.cluster
        if self.info.topology:
            if cl.qpi_factor != 1.0 and len({g.socket for g in gpus if g.socket is not None}) > 1:
                step *= cl.qpi_factor
            if cl.has_switch_interference:
                sw = self.sim.engine.switch_jobs
                on = set().union(*(sw.get((g.node, g.switch), set()) for g in gpus if g.switch is not None))
                step *= 1.0 + cl.pcie_interference * len(on)
        base = self.sim.engine.remaining(j) * step * self._coloc(job, st)
        fair = (st.node.fair_cpus, st.node.fair_mem_gb)
        best = ok[0]
        within = [lv for lv in ok if lv.cost(*fair)[0] <= fair[0] + 1e-9 and lv.cost(*fair)[1] <= fair[1] + 1e-9]
        good = [lv for lv in ok if lv.speedup >= 1.0 - 1e-9] or ok
        frugal = min(good, key=lambda lv: (self._share(lv, st, n), -lv.speedup))
        picks = [best, within[0] if within else None, frugal]
        out: list[tuple[Level | None, float]] = []
        seen: set[tuple] = set()
        for lv in picks[: self.cfg.max_levels]:
            key = None if lv is None else lv.cost(*fair)
            if lv is None or key in seen:
                out.append((None, math.inf))
                continue
            seen.add(key)
            out.append((lv, base / lv.speedup))
        return out

    def _coloc(self, job: Job, st: NodeState) -> float:
        cl = self.sim.inst.cluster
        if not cl.has_interference or not st.classes:
            return 1.0
        return 1.0 + sum(cl.interference_of(job.job_class, c) for c in st.classes)

    def _forced(self) -> bool:
        """Jobs wait on an idle cluster, one can start, and no arrival is to come (or ``idle_wait`` is off):
        every agent that can claim must claim."""
        sim = self.sim
        if sim.engine.running or not sim.waiting or not any(self.has_options):
            return False
        return not sim.arrivals_left or not self.cfg.idle_wait

    # ------------------------------------------------------------------ actions
    def option(self, agent: int, action: int) -> Option | None:
        """The option index ``action`` stands for (None: the no-op, or an invalid index)."""
        cfg = self.cfg
        if action <= 0 or action >= cfg.n_actions or agent >= len(self.options):
            return None
        w, o = divmod(action - 1, cfg.n_options)
        if w >= len(self.window):
            return None
        return self.options[agent][w][o]

    def index_of(self, opt: Option) -> int:
        return 1 + self.window.index(opt.job) * self.cfg.n_options + opt.slot

    @property
    def only_noop(self) -> bool:
        return not any(self.has_options)

    # ------------------------------------------------------------------ observation
    def _observe(self) -> dict[str, np.ndarray]:
        cfg, info, sim = self.cfg, self.info, self.sim
        inst, eng, now, ts = sim.inst, sim.engine, sim.now, cfg.time_scale
        A, W, O = len(info.groups), cfg.max_jobs, cfg.n_options
        jobs = np.zeros((W, F_JOB), np.float32)
        n_win = max(1, len(self.window))
        by_ref = {j: r for r, j in enumerate(sorted(self.window, key=lambda j: (info.ref[j], j)))}
        for w, j in enumerate(self.window):
            job = inst.jobs[j]
            left = eng.remaining(j) / job.iterations
            f = jobs[w]
            f[0] = 1.0
            f[1] = _lt(info.ref[j] * left, ts)
            f[2] = _lt(now - job.arrival, ts)
            f[3], f[4], f[5] = _lg(min(job.sizes)), _lg(max(job.sizes)), len(job.sizes) / 4.0
            f[6] = job.cpu_mem is not None
            f[7] = min(info.sensitivity[j] - 1.0, 4.0)
            lv = info.frontiers[j]
            f[8] = min((x.cpus for x in lv if x.cpus is not None and x.speedup >= 1.0 - 1e-9), default=3.0) / 3.0
            f[9] = job.ps is not None
            f[10] = math.log1p(job.comm_mb / 100.0)
            f[11] = info.suffer.get(job.job_class, 0.0)
            f[12] = info.harm.get(job.job_class, 0.0)
            f[13] = 1.0 - left
            f[14] = w / n_win
            f[15] = by_ref[j] / n_win
            f[16] = _lt(self.best_run[w], ts)
            f[17] = self.claimable[w] / A
        nodes = np.zeros((A, F_NODE), np.float32)
        for a, grp in enumerate(info.groups):
            self._node_row(nodes[a], grp)
        cpus = sum(nd.cpus for nd in inst.cluster.nodes)
        queue, beyond = len(sim.waiting), max(0, len(sim.waiting) - W)
        glob = np.array([math.log1p(queue), math.log1p(len(eng.running)), eng.free_total / len(inst.cluster.gpus),
                         _lt(eng.next_completion() - now, ts), math.log1p(beyond), float(sim.arrivals_left > 0),
                         math.log1p(self.substep),
                         sum(st.cpu for st in self.states.values()) / cpus if cpus > 0 else 0.0], np.float32)
        opts = np.zeros((A, W, O, F_OPT), np.float32)
        omask = np.zeros((A, W, O), np.int8)
        idx, rows = [], []
        for a in range(A):
            for w, j in enumerate(self.window):
                for o in self.options[a][w]:
                    if o is not None:
                        idx.append((a, w, o.slot))
                        rows.append(self._opt_row(o, w))
        if idx:
            ia = np.array(idx)
            opts[ia[:, 0], ia[:, 1], ia[:, 2]] = np.array(rows, np.float32)
            omask[ia[:, 0], ia[:, 1], ia[:, 2]] = 1
        amask = np.zeros((A, cfg.n_actions), np.int8)
        amask[:, 1:] = omask.reshape(A, -1)
        amask[:, 0] = 1
        if self.forced:
            amask[np.array(self.has_options), 0] = 0
        out = {"jobs": np.broadcast_to(jobs, (A, W, F_JOB)).copy(), "node": nodes, "opts": opts, "opt_mask": omask,
               "glob": np.broadcast_to(glob, (A, F_GLOB)).copy(), "action_mask": amask}
        for k in ("jobs", "node", "opts", "glob"):
            np.clip(out[k], -BOUND, BOUND, out=out[k])
        return out

    def _opt_row(self, o: Option, w: int) -> list[float]:
        st = self.states[o.node]
        nd = st.node
        ts = self.cfg.time_scale
        j = o.job
        c, m = o.level.cost(nd.fair_cpus, nd.fair_mem_gb)
        ref = self.info.ref[j] * self.sim.engine.remaining(j) / self.sim.inst.jobs[j].iterations
        best = self.best_run[w]
        level_slot = (o.slot % self.cfg.max_levels) if not o.joint else -1
        cls = self.sim.inst.jobs[j].job_class
        cl = self.sim.inst.cluster
        coloc = sum(cl.interference_of(cls, x) for x in st.classes)
        harm = sum(cl.interference_of(x, cls) for x in st.classes)
        free_n = max(1, len(st.free))
        return [1.0, _lg(o.target), float(o.joint),
                float(level_slot == 0), float(level_slot == 1), float(level_slot == 2),
                o.level.speedup, c / nd.fair_cpus if nd.fair_cpus > 0 else 1.0,
                m / nd.fair_mem_gb if nd.fair_mem_gb > 0 else 1.0,
                (st.cpu - c * o.n) / nd.cpus if nd.cpus > 0 else 0.0,
                (st.mem - m * o.n) / nd.mem_gb if nd.mem_gb > 0 else 0.0,
                _lt(o.run_time, ts), min(o.run_time / best - 1.0, 10.0) if best > 0 else 0.0,
                min(o.run_time / ref - 1.0, 10.0) if ref > 0 else 0.0, coloc, min(o.n / free_n, 1.0),
                self._speed_here(j, st), _lt(o.run_time * o.target, ts * 8), harm]

    def _speed_here(self, j: int, st: NodeState) -> float:
        """The job's rate on the node's first GPU type over its best rate (1: the node has its fastest type)."""
        return self.info.rel_speed[j][st.node.gpus[0].type]

    def _node_row(self, f: np.ndarray, grp: tuple[str, ...]) -> None:
        info, eng, now = self.info, self.sim.engine, self.sim.now
        sts = [self.states[v] for v in grp]
        gpn = info.gpn * len(grp)
        f[0] = 1.0
        f[1] = sum(len(st.free) for st in sts) / gpn
        for st in sts:
            for g in st.free:
                f[2 + info.type_index[g.type]] += 1.0 / gpn
        cpus = sum(st.node.cpus for st in sts)
        mem = sum(st.node.mem_gb for st in sts)
        f[6] = sum(st.cpu for st in sts) / cpus if cpus > 0 else 0.0
        f[7] = sum(st.mem for st in sts) / mem if mem > 0 else 0.0
        nfree = sum(len(st.free) for st in sts)
        fair_c = cpus / max(1, sum(len(st.node.gpus) for st in sts))
        fair_m = mem / max(1, sum(len(st.node.gpus) for st in sts))
        f[8] = min(sum(st.cpu for st in sts) / nfree / fair_c, 10.0) if nfree and fair_c > 0 else 0.0
        f[9] = min(sum(st.mem for st in sts) / nfree / fair_m, 10.0) if nfree and fair_m > 0 else 0.0
        running = set().union(*(st.jobs for st in sts))
        f[10] = math.log1p(len(running))
        f[11] = sum(eng.running[i].factor - 1.0 for i in running) / len(running) if running else 0.0
        left = [eng.remaining(i) * eng.running[i].base * eng.running[i].factor for i in running]
        f[12] = _lt(min(left), self.cfg.time_scale) if left else 0.0
        sockets = sum(st.whole_free("socket") for st in sts)
        switches = sum(st.whole_free("switch") for st in sts)
        f[13] = sockets / (2.0 * len(grp))
        f[14] = switches / (4.0 * len(grp))
        f[15] = len(grp) / 4.0
        f[16] = max(self._type_speed(st.node.gpus[0].type) for st in sts)

    def _type_speed(self, t: str) -> float:
        """The window jobs' mean rate on GPU type t over their best rates (cached per decision)."""
        if t not in self._speeds:
            rel = self.info.rel_speed
            self._speeds[t] = sum(rel[j][t] for j in self.window) / len(self.window) if self.window else 0.0
        return self._speeds[t]


def sized(cfg: MarlConfig, inst: Instance, max_jobs: int = 32) -> MarlConfig:
    """``cfg`` with a window large enough for ``inst`` (its waiting jobs, up to ``max_jobs``)."""
    return replace(cfg, max_jobs=max(cfg.max_jobs, min(max_jobs, len(inst.jobs))))
