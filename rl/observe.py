"""What a learned policy sees at a decision point, and what each action index means.

:class:`Decision` reads a :class:`jctlab.simulate.Simulator` (the same state every online policy
reads) and builds the observation of :func:`observation_space`: padded tables with masks, so one
network runs on any number of jobs and nodes:

- ``jobs`` (W × F_JOB): the window of waiting jobs (the first W in arrival order): work left (as a
  run time on its best allocation alone and on its best candidate now), allowed sizes, relative speed
  per GPU type, class, PS flag, CPU/memory table flag, gradient size, time waited;
- ``running`` (R × F_RUN): running jobs: time left, time run, GPUs, class, nodes, sockets spanned;
- ``nodes`` (N × F_NODE): free GPUs per type, variability of the free GPUs, co-located classes, free
  CPUs and memory, whole free sockets and PCIe switches (topology);
- ``cand`` (W × K × F_CAND): for each window job, K = shapes × rules candidate starts
  (:mod:`rl.candidates`): size, type, servers, rule, run time, slowdown against the job's best
  candidate, nodes, sockets, switch sharing, interference;
- ``glob`` (F_GLOB): queue length, running jobs, free GPUs, time to the next completion;
- the masks ``job_mask``, ``run_mask``, ``node_mask``, ``cand_mask`` and ``action_mask``.

Actions (``Discrete(1 + R + W·K)``): 0 = no-op (start nothing more now; time moves to the next decision
point); 1..R = preempt running slot r (``preemptive`` only); 1 + R + (w·A + a)·P + p = start window job w
with shape a by placement rule p. Durations enter as log(1 + t / time_scale), so no feature depends on
the instance's time unit beyond that scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from gymnasium import spaces

from jctlab.metrics import ReferenceDurations, strip_variability
from jctlab.model import Instance
from jctlab.simulate import Action, Preempt, Simulator, Start

from .candidates import RULES, Candidate, Planner, PlannerCache

F_JOB, F_RUN, F_NODE, F_CAND, F_GLOB = 22, 12, 20, 21, 6
MAX_TYPES = 4          # per-type features (cluster types in name order; more are folded into the last)
CLASSES = 5            # job classes in name order (more are folded into the last), plus "none"
BOUND = 1e4            # Box bounds of every feature (features are clipped to them)


@dataclass(frozen=True)
class EnvConfig:
    """Sizes of the padded tables and scales (one definition for envs, policies and training)."""

    max_jobs: int = 16       # W: window of waiting jobs
    max_running: int = 16    # R: running jobs seen (and preemptable)
    max_nodes: int = 16      # N
    max_shapes: int = 8      # A: level-1 choices per job
    time_scale: float = 3600.0
    round_s: float = 360.0   # preemptive class: a decision point every round
    idle_wait: bool = True   # the no-op on an idle cluster where a job could start (and arrivals are to come)

    @property
    def rules(self) -> int:      # P: level-2 choices per shape
        return len(RULES)

    @property
    def per_job(self) -> int:    # K
        return self.max_shapes * self.rules

    @property
    def n_actions(self) -> int:
        return 1 + self.max_running + self.max_jobs * self.per_job

    def sized_for(self, inst: Instance) -> "EnvConfig":
        """The same config with tables large enough for ``inst`` (jobs up to 64, all its nodes)."""
        return replace(self, max_jobs=max(self.max_jobs, min(64, len(inst.jobs))),
                       max_running=max(self.max_running, min(64, len(inst.jobs))),
                       max_nodes=max(self.max_nodes, len(inst.cluster.nodes)))


def observation_space(cfg: EnvConfig) -> spaces.Dict:
    W, R, N, K = cfg.max_jobs, cfg.max_running, cfg.max_nodes, cfg.per_job

    def box(*shape: int) -> spaces.Box:
        return spaces.Box(-BOUND, BOUND, shape=shape, dtype=np.float32)

    def mask(*shape: int) -> spaces.Box:
        return spaces.Box(0, 1, shape=shape, dtype=np.int8)

    return spaces.Dict({
        "jobs": box(W, F_JOB), "job_mask": mask(W),
        "running": box(R, F_RUN), "run_mask": mask(R),
        "nodes": box(N, F_NODE), "node_mask": mask(N),
        "cand": box(W, K, F_CAND), "cand_mask": mask(W, K),
        "glob": box(F_GLOB),
        "action_mask": mask(cfg.n_actions),
    })


class InstanceInfo:
    """Per-instance constants the observation needs (computed once per episode)."""

    def __init__(self, inst: Instance):
        self.inst = inst
        cl = inst.cluster
        self.types = list(cl.gpu_types)
        self.type_index = {t: min(i, MAX_TYPES - 1) for i, t in enumerate(self.types)}
        classes = sorted({j.job_class for j in inst.jobs if j.job_class is not None})
        self.class_index = {c: min(i, CLASSES - 1) for i, c in enumerate(classes)}
        ref = ReferenceDurations(strip_variability(cl))
        # alone on its best homogeneous allocation; inf (the feature's clamp) for a job that fits on no single
        # type: the shipped checkpoints learned that signal, so the observation keeps it
        self.ref = [ref.homogeneous(j) for j in inst.jobs]
        self.gpn = max(len(nd.gpus) for nd in cl.nodes)
        self.node_index = {nd.name: i for i, nd in enumerate(cl.nodes)}
        self.planner_cache = PlannerCache(inst)      # the candidate planner's memo over the episode

    def class_slot(self, c: str | None) -> int:
        return CLASSES if c is None else self.class_index[c]


def _lt(x: float, scale: float) -> float:
    """log(1 + x / scale), the form every duration takes in the observation."""
    return math.log1p(max(0.0, x) / scale) if math.isfinite(x) else math.log1p(BOUND)


def _lg(n: float) -> float:
    return math.log2(max(1.0, n)) / 6.0


class Decision:
    """The observation at the simulator's current state and the action each index stands for."""

    def __init__(self, sim: Simulator, info: InstanceInfo, cfg: EnvConfig, started_now: set[int] | None = None,
                 stopped_now: set[int] | None = None):
        self.sim, self.info, self.cfg = sim, info, cfg
        inst, eng = sim.inst, sim.engine
        self.window = list(sim.waiting)[: cfg.max_jobs]
        self.run_slots = sorted(eng.running, key=lambda j: (eng.running[j].held_since, j))[: cfg.max_running]
        self.started_now = started_now or set()
        stopped_now = stopped_now or set()
        self.planner = Planner(inst, eng, cfg.max_shapes, sim.waiting, info.planner_cache)
        self.cands: list[list[list[Candidate | None]]] = [
            ([] if j in stopped_now else self.planner.candidates(j)) for j in self.window]
        self.obs = self._observe()

    # ------------------------------------------------------------------ actions
    def action(self, a: int) -> Action | None:
        """The Start/Preempt that index ``a`` stands for; None for the no-op or an invalid index."""
        cfg = self.cfg
        if a <= 0 or a >= cfg.n_actions or not self.obs["action_mask"][a]:
            return None
        if a <= cfg.max_running:
            return Preempt(self.run_slots[a - 1])
        w, k = divmod(a - 1 - cfg.max_running, cfg.per_job)
        s, p = divmod(k, cfg.rules)
        c = self.cands[w][s][p]
        assert c is not None
        return Start(c.job, c.alloc)

    def candidate(self, a: int) -> Candidate | None:
        cfg = self.cfg
        if a <= cfg.max_running or not self.obs["action_mask"][a]:
            return None
        w, k = divmod(a - 1 - cfg.max_running, cfg.per_job)
        return self.cands[w][k // cfg.rules][k % cfg.rules]

    def index_of(self, job: int, shape: int, rule: int) -> int:
        return 1 + self.cfg.max_running + (self.window.index(job) * self.cfg.max_shapes + shape) * self.cfg.rules + rule

    def trimmed(self) -> dict[str, np.ndarray]:
        """The observation cut to its occupied rows: the window's jobs, the running slots, the nodes. The
        networks have no parameter that depends on table sizes and mask the padding, so they score the
        cut tables as the full ones, for less work (their ``act`` maps the choice back to the full index)."""
        o, cfg = self.obs, self.cfg
        W, R = max(1, len(self.window)), max(1, len(self.run_slots))      # one padding row at least: no empty table
        N = min(cfg.max_nodes, len(self.sim.inst.cluster.nodes))
        am = o["action_mask"]
        return {"jobs": o["jobs"][:W], "job_mask": o["job_mask"][:W], "cand": o["cand"][:W],
                "cand_mask": o["cand_mask"][:W], "running": o["running"][:R], "run_mask": o["run_mask"][:R],
                "nodes": o["nodes"][:N], "node_mask": o["node_mask"][:N], "glob": o["glob"],
                "action_mask": np.concatenate([am[: 1 + R], am[1 + cfg.max_running: 1 + cfg.max_running + W * cfg.per_job]])}

    @property
    def only_noop(self) -> bool:
        return int(self.obs["action_mask"][1:].sum()) == 0

    def noop_allowed(self, can_start: bool) -> bool:
        """Waiting is allowed unless jobs wait on an idle cluster, one of them can start now, and no arrival
        is to come (or ``idle_wait`` is off: an online policy cannot know when the next job arrives, so it
        does not bet an idle cluster on one). A job stopped at this instant waits for the next round."""
        sim = self.sim
        idle = can_start and not sim.engine.running and bool(sim.waiting)
        return not (idle and (not sim.arrivals_left or not self.cfg.idle_wait))

    # ------------------------------------------------------------------ observation
    def _observe(self) -> dict[str, np.ndarray]:
        cfg, info, sim = self.cfg, self.info, self.sim
        inst, eng, now, ts = sim.inst, sim.engine, sim.now, cfg.time_scale
        W, R, N, A, P = cfg.max_jobs, cfg.max_running, cfg.max_nodes, cfg.max_shapes, cfg.rules
        jobs = np.zeros((W, F_JOB), np.float32)
        job_mask = np.zeros(W, np.int8)
        cand = np.zeros((W, A * P, F_CAND), np.float32)
        cand_mask = np.zeros((W, A * P), np.int8)
        free = max(1, self.planner.free_count)
        for w, j in enumerate(self.window):
            job = inst.jobs[j]
            left = eng.remaining(j) / job.iterations
            ref = info.ref[j] * left
            rows = self.cands[w]
            durs = [eng.remaining(j) * c.iter_time for row in rows for c in row if c is not None]
            best = min(durs) if durs else math.inf
            f = jobs[w]
            f[0] = 1.0
            f[1] = _lt(ref, ts)
            f[2] = _lt(best, ts)
            f[3] = min(best / ref, 10.0) if durs and ref > 0 else 10.0
            f[4] = _lt(now - job.arrival, ts)
            f[5], f[6], f[7] = _lg(min(job.sizes)), _lg(max(job.sizes)), len(job.sizes) / 4.0
            top = max(job.samples_per_s.values())
            for t, x in job.samples_per_s.items():
                if t in info.type_index:
                    f[8 + info.type_index[t]] = max(f[8 + info.type_index[t]], x / top)
            f[8 + MAX_TYPES + info.class_slot(job.job_class)] = 1.0       # 12..17
            f[18] = job.ps is not None
            f[19] = job.cpu_mem is not None
            f[20] = math.log1p(job.comm_mb / 100.0)
            f[21] = 1.0 - left                                             # preempted work done
            job_mask[w] = 1
            for a, row in enumerate(rows):
                for p, c in enumerate(row):
                    if c is None:
                        continue
                    d = eng.remaining(j) * c.iter_time
                    g = cand[w, a * P + p]
                    g[0] = 1.0
                    g[1] = _lg(c.shape.n)
                    for t in c.shape.types:
                        g[2 + info.type_index[t]] = 1.0
                    g[2 + MAX_TYPES] = len(c.shape.types) > 1
                    g[3 + MAX_TYPES] = c.shape.ps / 4.0
                    g[4 + MAX_TYPES + p] = 1.0                              # 8..11
                    g[12] = _lt(d, ts)
                    g[13] = min(d / best - 1.0, 10.0) if best > 0 else 0.0
                    g[14] = min(d / ref - 1.0, 10.0) if ref > 0 else 0.0
                    g[15] = c.nodes - 1
                    g[16] = c.spans_sockets
                    g[17] = c.switch_share
                    g[18] = c.colocation
                    g[19] = c.shape.n / free
                    g[20] = _lt(d * c.shape.n, ts * 8)
                    cand_mask[w, a * P + p] = 1
        running = np.zeros((R, F_RUN), np.float32)
        run_mask = np.zeros(R, np.int8)
        for r, j in enumerate(self.run_slots):
            run = eng.running[j]
            job = inst.jobs[j]
            f = running[r]
            f[0] = 1.0
            f[1] = _lt(eng.remaining(j) * run.base * run.factor, ts)
            f[2] = _lt(now - run.held_since, ts)
            f[3] = _lg(len(run.alloc.gpus))
            f[4 + info.class_slot(job.job_class)] = 1.0                     # 4..9
            f[10] = len(run.nodes) - 1
            f[11] = run.factor - 1.0
            run_mask[r] = 1
        nodes = np.zeros((N, F_NODE), np.float32)
        node_mask = np.zeros(N, np.int8)
        classes_present = sorted({inst.jobs[j].job_class for j in self.window} - {None})
        for i, nd in enumerate(inst.cluster.nodes[:N]):
            f = nodes[i]
            f[0] = 1.0
            free_ids = eng.free[nd.name]
            fg = [inst.cluster.gpu[g] for g in free_ids]
            for g in fg:
                f[1 + info.type_index[g.type]] += 1.0 / info.gpn
            f[1 + MAX_TYPES] = len(nd.gpus) / info.gpn
            if fg:
                fac = [g.factor(c) for g in fg for c in classes_present] or [1.0]
                f[2 + MAX_TYPES] = float(np.mean(fac)) - 1.0
                f[3 + MAX_TYPES] = min(fac) - 1.0
            for j in eng.node_jobs[nd.name]:
                f[4 + MAX_TYPES + info.class_slot(inst.jobs[j].job_class)] += 1.0    # 8..13
            f[14] = (nd.cpus - eng.cpu_used[nd.name]) / nd.cpus if nd.cpus > 0 else 0.0
            f[15] = (nd.mem_gb - eng.mem_used[nd.name]) / nd.mem_gb if nd.mem_gb > 0 else 0.0
            sockets: dict[int, list[bool]] = {}
            switches: dict[int, list[bool]] = {}
            for g in nd.gpus:
                if g.socket is not None:
                    sockets.setdefault(g.socket, []).append(g.id in free_ids)
                if g.switch is not None:
                    switches.setdefault(g.switch, []).append(g.id in free_ids)
            f[16] = sum(all(v) for v in sockets.values()) / 2.0
            f[17] = sum(all(v) for v in switches.values()) / 4.0
            f[18] = len(sockets) / 2.0
            f[19] = len(free_ids) / info.gpn
            node_mask[i] = 1
        glob = np.zeros(F_GLOB, np.float32)
        glob[0] = math.log1p(len(sim.waiting))
        glob[1] = math.log1p(len(eng.running))
        glob[2] = eng.free_total / len(inst.cluster.gpus)
        glob[3] = _lt(eng.next_completion() - now, ts)
        glob[4] = math.log1p(max(0, len(sim.waiting) - W))
        glob[5] = inst.problem == "preemptive"
        amask = np.zeros(cfg.n_actions, np.int8)
        amask[0] = self.noop_allowed(bool(cand_mask.any()))
        if inst.problem == "preemptive":
            for r, j in enumerate(self.run_slots):
                amask[1 + r] = j not in self.started_now
        amask[1 + R:] = cand_mask.reshape(-1)
        out = {"jobs": jobs, "job_mask": job_mask, "running": running, "run_mask": run_mask, "nodes": nodes,
               "node_mask": node_mask, "cand": cand, "cand_mask": cand_mask, "glob": glob, "action_mask": amask}
        for k in ("jobs", "running", "nodes", "cand", "glob"):
            np.clip(out[k], -BOUND, BOUND, out=out[k])
        return out
