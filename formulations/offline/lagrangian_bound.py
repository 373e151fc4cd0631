"""A non-preemptive lower bound for long queues: the time-indexed model's capacities relaxed by Lagrange.

Why. On long queues (PAL's 160-job workloads: arrivals over 5 h, jobs of 18 s to 50 h) the preemptive LP
(:mod:`.preemptive_bound`) lets a job run in pieces, and the time-indexed LP over options
(:mod:`.time_indexed_bound`) needs slots far shorter than most jobs, which at 160 jobs and a horizon of days is an
LP of millions of columns. Relaxing the capacity rows with multipliers leaves one tiny problem per job (when
to start, in which mode) that a prefix sum solves exactly for every start slot at once, so a grid of thousands of
slots costs milliseconds per step. Its best value is the time-indexed LP's over the same grid.

Model. Modes m of job j as in the preemptive LP (:func:`.preemptive_bound.job_modes`): on any allocation mapped
onto m the job holds n_m GPUs, at least c_{m,τ} of type τ, and runs for at least d_m. Slots [τ_q, τ_{q+1}),
q < T, over increasing boundaries from the first arrival (fine during the arrivals, then growing). A schedule's
job j that starts at s in slot t (s ≥ a_j, so t ≥ the slot of a_j) in mode m *occupies* every slot q with
t ≤ q and τ_{q+1} ≤ τ_t + d_m: it runs at the instant τ_{q+1} − ε (it started before τ_{q+1} and ends at
s + d ≥ τ_t + d_m ≥ τ_{q+1}). So the jobs occupying slot q run together then, and for every capacity row r
(all GPUs: n_m on M; type τ: c_{m,τ} on M_τ; and a dual feasible function φ of either, :mod:`.dff`, weights on 1)
Σ_j coef_r(j)·occ_{j,q} ≤ cap_r. Its cost is at least w_j·(max(a_j, τ_t) + d_m − a_j); a start at or after τ_T
costs at least w_j·(max(a_j, τ_T) + d_m − a_j) and occupies nothing (no row after τ_T). Every non-preemptive
schedule (offline or static; interference and restarts only lengthen runs) thus maps to a choice per job that
meets every row at no more than its objective Σ_j w_j (C_j − a_j).

Bound. For multipliers λ_{r,q} ≥ 0, L(λ) = Σ_j min_{m,t} [cost_j(m,t) + Σ_r coef_r(j,m)·Σ_{q occupied} λ_{r,q}]
− Σ_{r,q} cap_r·λ_{r,q} is at most the least cost of any choice meeting the rows (weak duality: the penalty of
a choice that meets them is ≤ Σ cap·λ), hence at most every schedule's objective. Each job's minimum is exact
(every mode, every start slot, from prefix sums of the prices). The multipliers come from subgradient steps
(Polyak's step towards a target, halved when the bound stalls); any λ gives a valid bound, the best is kept, and
it is lowered by 1e-7 relative for floating point. Mean and weighted JCT only.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from jctlab.model import Allocation, Instance
from jctlab.speed import duration

from ..schedules import job_weights
from .dff import DffParams, dff_rows
from .options import Option, binding_resources, capacities, rho
from .preemptive_bound import Mode, job_modes

MIN_TIME = 0.05   # s: below this, no bound is tried (setting up the choices alone takes about that at 160 jobs)


@dataclass(frozen=True)
class LagrangianParams:
    """The grid and the subgradient steps (a budget in steps: the same instance gives the same bound)."""

    fine_slots: int = 2000       # uniform slots from the first arrival to the last one plus a long job
    fine_tail_q: float = 0.9     # "a long job": this quantile of the jobs' shortest durations
    max_slots: int = 4000        # then slots growing by ``growth`` each, the last one stretched to the horizon
    growth: float = 1.003
    steps: int = 1000
    stall: int = 50              # steps without a better bound before the step size halves
    min_theta: float = 1e-4      # stop once the step size has halved below this
    dff: DffParams | None = DffParams()
    #: the pipelines price every allocation (per-GPU rows) where the enumeration is complete and has at most this
    #: many options (a step costs about options × slots), else the modes
    max_exact_options: int = 600
    #: ... and then also the node patterns (:func:`node_items`) where there are at most this many
    max_node_items: int = 1500


def grid(inst: Instance, items: list[list[Item]], params: LagrangianParams = LagrangianParams()) -> np.ndarray:
    """Slot boundaries τ_0 < … < τ_T: ``fine_slots`` uniform ones over the arrivals and a long job after the last,
    then growing to a horizon no schedule without idle time needs to pass (any boundaries keep the bound valid;
    finer ones where jobs are short and crowded make it tighter)."""
    arr = [j.arrival for j in inst.jobs]
    a0, amax = min(arr), max(arr)
    pm = sorted(min(it.dur for it in its) for its in items)
    tail = pm[min(len(pm) - 1, int(params.fine_tail_q * len(pm)))]
    area = sum(min(it.demand.get(ALL, 0) * it.dur for it in its) for its in items)
    end = amax + pm[-1] + 2.0 * area / max(len(inst.cluster.gpus), 1)
    fine_end = min(end, amax + tail)
    if fine_end <= a0:
        fine_end = a0 + max(pm[-1], 1.0)
    tau = list(np.linspace(a0, fine_end, params.fine_slots + 1))
    dt = tau[1] - tau[0]
    while tau[-1] < end and len(tau) < params.max_slots:
        dt *= params.growth
        tau.append(tau[-1] + dt)
    if tau[-1] < end:
        tau[-1] = end
    return np.array(tau)


@dataclass(frozen=True)
class Item:
    """One way a job may run, as the bound sees it: at least ``dur`` seconds holding ``demand`` (resource ->
    amount, capacities in the caller's dict)."""
    dur: float
    demand: dict


@dataclass(frozen=True)
class Items:
    """What a relaxation prices: per job its items, and the capacity of each row's resource."""
    per_job: list[list[Item]]
    caps: dict


ALL = ("all",)
#: a capacity row: its capacity, and an item's coefficient in it
Row = tuple[float, Callable[[Item], float]]


def mode_items(inst: Instance, modes: list[list[Mode]]) -> Items:
    """The preemptive LP's modes as items over the cluster's GPUs and each type's (where there are several)."""
    cap: dict = {ALL: len(inst.cluster.gpus)}
    for t in inst.cluster.gpu_types:
        cnt = sum(1 for g in inst.cluster.gpus if g.type == t)
        if cnt < cap[ALL]:          # a single type's row is the all-GPU row
            cap[("type", t)] = cnt
    items = [[Item(m.dur, {ALL: m.gpus, **{("type", t): c for t, c in m.by_type if ("type", t) in cap}})
              for m in ms] for ms in modes]
    return Items(items, cap)


def node_items(inst: Instance, max_items: int) -> Items | None:
    """Per job, one item per node pattern (how many of its GPUs on each node, for each size it may take): the
    pattern's GPUs and rows per node and per group of nodes with the same GPU types (:func:`.options.capacities`),
    at the run time of its best allocation (on each node the GPUs fastest for the job). None where that is not a lower bound
    of the pattern's allocations (parameter servers, CPU/memory levels, measured throughputs, CPU sockets priced)
    or there are more than ``max_items``.

    Why. The modes count a job's GPUs per type as "at least": an 8-GPU job at the slowest type's speed holds at
    least one GPU of that type. On nodes of 4 GPUs it holds two whole nodes, so at least four; per-node rows see
    that, and which node a job that fits on one is on. *Validity:* an allocation holds, on each node, as many
    GPUs as its pattern says, and runs no faster than the pattern's best allocation (the speed model's step time
    falls as any GPU is replaced by a faster one, with the same GPUs per node: the batch over the sum of the GPUs'
    rates, or over n times the least, and a communication term of the node count); so every schedule maps to a choice
    of items that meets every row at no more than its objective, as with the modes."""
    cl = inst.cluster
    if cl.qpi_factor != 1.0 or any(j.ps is not None or j.cpu_mem is not None or j.measured for j in inst.jobs):
        return None
    # the rows a pattern's GPUs per node fix; per type they do not, on a node of two types
    caps = {r: c for r, c in capacities(inst).items() if r[0] in ("all", "n", "set")}
    groups = [(r, set(r[1])) for r in caps if r[0] == "set"]
    items: list[list[Item]] = []
    count = 0
    for job in inst.jobs:
        per_node = [sorted((g for g in nd.gpus if job.can_use(g.type)), key=lambda g: -rho(job, g)) for nd in cl.nodes]
        its = []
        for n in job.sizes:
            pats = _patterns([len(gs) for gs in per_node], n, max_items - count - len(its))
            if pats is None:
                return None
            for pat in pats:
                gpus = [g for gs, c in zip(per_node, pat) for g in gs[:c]]
                d = duration(job, Allocation(tuple(g.id for g in gpus)), cl)
                if not math.isfinite(d):
                    continue
                demand = {ALL: n, **{("n", nd.name): c for nd, c in zip(cl.nodes, pat) if c}}
                for r, members in groups:
                    if k := sum(c for nd, c in zip(cl.nodes, pat) if nd.name in members):
                        demand[r] = k
                its.append(Item(d, demand))
        count += len(its)
        if count > max_items:
            return None
        items.append(its)
    return Items(items, caps)


def _patterns(caps: list[int], n: int, most: int) -> list[tuple[int, ...]] | None:
    """The ways to take ``n`` GPUs from nodes with ``caps`` free (counts per node); None where there are more than
    ``most``."""
    out: list[tuple[int, ...]] = []
    room = [sum(caps[i:]) for i in range(len(caps))] + [0]

    def rec(i: int, left: int, pat: tuple[int, ...]) -> bool:
        if i == len(caps):
            out.append(pat)
            return len(out) <= most
        for c in range(max(0, left - room[i + 1]), min(caps[i], left) + 1):
            if not rec(i + 1, left - c, pat + (c,)):
                return False
        return True

    return out if rec(0, n, ()) else None


def option_items(inst: Instance, opts: list[list[Option]], resources: set) -> Items:
    """An option model's options (:mod:`.options`) as items over ``resources`` (the time-indexed LP's
    relaxation, :mod:`.time_indexed_bound`, over a finer grid)."""
    cap = {r: c for r, c in capacities(inst).items() if r in resources}
    items = [[Item(o.dur, {r: v for r, v in o.demand.items() if r in cap}) for o in ol] for ol in opts]
    return Items(items, cap)


def per_gpu_options(inst: Instance, concrete: list[list[Option]]) -> tuple[list[list[Option]], set]:
    """Every allocation (a complete enumeration, :func:`.concrete.concrete_options`) priced per GPU, per node and
    over the cluster, with the CPU/memory some option could overload: the ``options`` argument that prices exactly
    what the branch and bound enumerates (0.4-1 % above the modes on 10-job queues on 4 GPUs)."""
    res = {r for r in capacities(inst) if r[0] in ("g", "n", "all")}
    return concrete, res | binding_resources(inst, concrete)


@dataclass(frozen=True)
class StartChoice:
    """One (job, mode): its start slots, their costs and the slot after each one's occupancy."""
    job: int
    key: int          # index of its coefficient vector over the rows
    starts: np.ndarray
    cost: np.ndarray
    ends: np.ndarray


@dataclass(frozen=True)
class Relaxation:
    """The relaxed problem of one instance: the grid ``tau``, the rows' capacities ``cap`` and the coefficient
    vectors ``coef`` (keys × rows), each (job, item)'s start choices, the jobs' weights."""

    tau: np.ndarray
    cap: np.ndarray
    coef: np.ndarray
    choices: list[StartChoice]
    w: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        """The multipliers' shape: rows × slots."""
        return len(self.cap), len(self.tau) - 1

    def evaluate(self, lam: np.ndarray) -> tuple[float, list[tuple[int, int, int]]]:
        """L(λ), and each job's minimising (key, first slot, slot after its occupancy)."""
        val, pick, _ = self._minima(lam)
        return float(val.sum() - (self.cap[:, None] * lam).sum()), pick

    def flows(self, lam: np.ndarray) -> np.ndarray:
        """Each job's C_j − a_j in its minimising choice at ``lam`` (its cheapest start slot and mode)."""
        return self._minima(lam)[2]

    def _minima(self, lam: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]], np.ndarray]:
        """Per job: its least priced cost, its minimising (key, first slot, slot after its occupancy), its flow time."""
        T = len(self.tau) - 1
        prefix = np.zeros((len(self.coef), T + 1))
        np.cumsum(self.coef @ lam, axis=1, out=prefix[:, 1:])
        val = np.full(len(self.w), math.inf)
        flow = np.zeros(len(self.w))
        pick: list[tuple[int, int, int]] = [(0, 0, 0)] * len(self.w)
        for c in self.choices:
            p = prefix[c.key]
            v = c.cost + p[c.ends] - p[c.starts]
            k = int(np.argmin(v))
            if v[k] < val[c.job]:
                val[c.job] = v[k]
                flow[c.job] = c.cost[k] / self.w[c.job]
                pick[c.job] = (c.key, int(c.starts[k]), int(c.ends[k]))
        return val, pick, flow

    def priced(self, lam: np.ndarray) -> Multipliers:
        """What ``lam`` (≥ 0, of :attr:`shape`) prices."""
        return Multipliers(self.evaluate(lam)[0], lam, self)


@dataclass(frozen=True)
class Multipliers:
    """Multipliers λ (``lam``, rows × slots) of a relaxation and L(λ), their ``value`` (Σ_j w_j (C_j − a_j) units,
    the jobs' weights not normalised). Any λ ≥ 0 gives a bound: :mod:`.node_prices` prices the branch and bound's
    nodes with them."""

    value: float
    lam: np.ndarray
    relaxation: Relaxation

    @property
    def prices(self) -> np.ndarray:
        """``prices[k, q]`` = Σ_r coef_r(key k)·λ_{r,q}: what occupying slot q costs an item of coefficient vector k."""
        return self.relaxation.coef @ self.lam

    @property
    def cap_prices(self) -> np.ndarray:
        """Σ_r cap_r·λ_{r,q} per slot q."""
        return self.relaxation.cap @ self.lam

    @property
    def bound(self) -> float:
        """The bound on the objective (mean or weighted JCT): ``value`` over the weights, lowered by 1e-7 relative
        for floating point."""
        lb = self.value / float(self.relaxation.w.sum())
        return lb - (1e-7 * abs(lb) + 1e-9)

    def completion_order(self, inst: Instance) -> list[int]:
        """The jobs by their completion in the relaxed problem at these multipliers (each job's cheapest start and
        mode), ties by arrival: a priority order for list scheduling (the Lagrangian heuristic), which on long
        queues leads the local search to other schedules than the dispatch rules' (docs/oracle-offline.md)."""
        flow = self.relaxation.flows(self.lam)
        arr = [j.arrival for j in inst.jobs]
        return sorted(range(len(arr)), key=lambda j: (arr[j] + flow[j], arr[j], j))


def relaxation(inst: Instance, params: LagrangianParams = LagrangianParams(),
               options: tuple[list[list[Option]], set] | None = None,
               nodes: Items | None = None) -> Relaxation | None:
    """The relaxation over the modes (or ``options``: an option model and its capacities; or ``nodes``:
    :func:`node_items`); None when a job has no item."""
    if nodes is None:
        nodes = mode_items(inst, job_modes(inst)) if options is None else option_items(inst, *options)
    items, caps = nodes.per_job, nodes.caps
    if any(not its for its in items):
        return None
    w = np.array(job_weights(inst), dtype=float)
    tau = grid(inst, items, params)
    rows = _rows(items, caps, params.dff)
    keys, choices = _choices(inst, items, rows, w, tau)
    return Relaxation(tau, np.array([c for c, _ in rows], dtype=float), np.array(keys), choices, w)


def multipliers(inst: Instance, time_limit: float | None = None, *, target: float | None = None,
                params: LagrangianParams = LagrangianParams(),
                options: tuple[list[list[Option]], set] | None = None,
                nodes: Items | None = None) -> Multipliers | None:
    """The subgradient search of the module docstring, its best multipliers; None for the makespan, no jobs, too
    little time or a job no item hosts. Arguments as :func:`lower_bound`."""
    if inst.objective == "makespan" or not inst.jobs or (time_limit is not None and time_limit < MIN_TIME):
        return None
    t0 = time.perf_counter()
    rel = relaxation(inst, params, options, nodes)
    if rel is None:
        return None
    T = len(rel.tau) - 1
    cap, coef = rel.cap, rel.coef
    lam = np.zeros(rel.shape)
    best, best_lam = -math.inf, lam
    theta, stall = 1.0, 0
    goal = None if target is None or not math.isfinite(target) else target * float(rel.w.sum())
    for _ in range(params.steps):
        if time_limit is not None and time.perf_counter() - t0 >= time_limit:
            break
        L, pick = rel.evaluate(lam)
        if L > best:
            best, best_lam, stall = L, lam, 0
        else:
            stall += 1
            if stall >= params.stall:
                theta, stall = theta / 2, 0
                if theta < params.min_theta:
                    break
        occ = np.zeros((len(coef), T + 1))
        for key, s, e in pick:
            if e > s:
                occ[key, s] += 1.0
                occ[key, e] -= 1.0
        g = coef.T @ np.cumsum(occ, axis=1)[:, :T] - cap[:, None]
        norm = float((g * g).sum())
        if norm <= 0.0:
            break
        aim = goal if goal is not None and goal > best else 1.1 * abs(best) + 1.0
        if goal is not None and best >= goal:
            break
        lam = np.maximum(0.0, lam + theta * (aim - L) / norm * g)
    if not math.isfinite(best):
        return None
    return Multipliers(best, best_lam, rel)


def lower_bound(inst: Instance, time_limit: float | None = None, *, target: float | None = None,
                params: LagrangianParams = LagrangianParams(),
                options: tuple[list[list[Option]], set] | None = None,
                nodes: Items | None = None) -> float | None:
    """The Lagrangian bound of the module docstring on the objective (mean or weighted JCT; None for the
    makespan, or a job no allocation hosts). ``target``: an objective some schedule reaches (the incumbent),
    which steers the step size; without one, 10 % above the best bound so far. ``options``: an option model and
    its capacities to price instead of the modes (node rows see which node a job's GPUs are on); ``nodes``: the
    node patterns (:func:`node_items`) to price instead."""
    m = multipliers(inst, time_limit, target=target, params=params, options=options, nodes=nodes)
    return None if m is None else m.bound


#: resources whose capacity counts GPUs (integer demands), where dual feasible functions apply
GPU_COUNTS = ("all", "n", "set", "type")


def _rows(items: list[list[Item]], caps: dict, dff: DffParams | None) -> list[Row]:
    """The capacity rows: (capacity, coefficient of an item) per resource, and per DFF row of each GPU count."""
    rows: list[Row] = [(float(c), lambda it, r=r: float(it.demand.get(r, 0))) for r, c in caps.items()]
    if dff is None:
        return rows
    for r, c in caps.items():
        if r[0] not in GPU_COUNTS or c < 2:
            continue
        sizes = {int(round(it.demand.get(r, 0))) for its in items for it in its} - {0}
        for phi in dff_rows(sizes, int(c), dff):
            rows.append((1.0, lambda it, r=r, phi=phi: phi.get(int(round(it.demand.get(r, 0))), 0.0)))
    return rows


def _choices(inst: Instance, items: list[list[Item]], rows: list[Row], w: np.ndarray, tau: np.ndarray
             ) -> tuple[list[tuple], list[StartChoice]]:
    """The distinct coefficient vectors over the rows, and per (job, item) its start slots with their costs and
    occupancy ends."""
    keys: list[tuple] = []
    index: dict[tuple, int] = {}
    T = len(tau) - 1
    choices = []
    for j, (job, its) in enumerate(zip(inst.jobs, items)):
        s0 = max(0, int(np.searchsorted(tau, job.arrival, side="right")) - 1)
        starts = np.arange(s0, T + 1)
        at = tau[starts]
        for it in its:
            sig = tuple(f(it) for _, f in rows)
            if sig not in index:
                index[sig] = len(keys)
                keys.append(sig)
            cost = w[j] * (np.maximum(job.arrival, at) + it.dur - job.arrival)
            ends = np.searchsorted(tau, at + it.dur, side="right") - 1
            ends = np.clip(ends, starts, T)
            ends[-1] = T                                   # a start at or after τ_T occupies nothing
            choices.append(StartChoice(j, index[sig], starts, cost, ends))
    return keys, choices
