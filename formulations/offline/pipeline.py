"""The offline solve as a pipeline of phases: one driver, and the phases the CP-SAT and MILP oracles share.

A solve starts (:func:`start`) with what every back end needs: the concrete options (complete or
restricted), the proven infeasibility test, the per-job bound Σ(a_j + p_j) and a greedy incumbent (and the
caller's hint). Then :func:`run_phases` runs a list of :class:`Phase` in order. A phase reads and updates
the :class:`State`: it may raise the bound (every bound it adds comes from a relaxation of the offline
class, so the largest is valid), offer incumbents (replayed schedules; the best is kept), leave data for
later phases and append records to ``params["phases"]`` (per record: the model status, bound, best
objective and elapsed time). A phase's ``when`` says when it runs; its ``share`` is the part of the time
it takes (its docstring says of what: the limit, or what is left). The back ends' phase lists
(:func:`formulations.offline.cpsat.phases`, :func:`formulations.offline.milp.phases`) read top to bottom in
the order they run; a phase is added, removed or moved in one line there.

The result (:func:`finish`) is the best incumbent, its replayed objective, and the largest bound, with
the status rule of :mod:`formulations.results`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Sequence, TypeVar

from jctlab.errors import InputError
from jctlab.model import Instance, Schedule
from jctlab.result import Result, SolveStatus

from ..budget import Budget
from ..results import NO_INCUMBENT, Incumbent, gap_open, result_of_incumbent
from ..schedules import start_order
from . import class_search, free_gpus, lagrangian_bound, preemptive_bound, time_indexed_bound
from .classes import class_options, trivial_bound
from .concrete import ConcreteParams, concrete_options, job_infeasible, setup_until
from .cpsat_model import NO_MODEL, ModelSolution
from .decode import DecodeParams, decode
from .free_gpus import FreeGpuParams
from .greedy import greedy, greedy_until
from .lagrangian_bound import LagrangianParams
from .local_search import SearchParams, improve
from .options import Option, binding_resources, capacities


@dataclass(frozen=True)
class OfflineParams:
    """The knobs the offline pipelines share (CP-SAT and MILP)."""

    greedy_share: float = 0.05   # of the limit, at most: the greedy's dispatch rules
    ls_share: float = 0.05       # of the limit: each list-scheduling local search (0: none)
    queue: float = 1.05          # a schedule (or bound) above queue × Σ(a_j + p_j) means jobs queue for GPUs
    pre_share: float = 0.15      # of the limit, at most: the preemptive LP (its refinements stop within it)
    #: of the limit: the Lagrangian time-indexed bound where jobs queue (the preemptive LP above
    #: ``queue`` × Σ(a_j + p_j)); on 8-16-job queues it is 3-11 % above the preemptive LP in under a second
    lag_share: float = 0.1
    lag_min_s: float = 1.0       # s: ... but at least this, where it is at most lag_max_left of the time left
    lag_max_left: float = 0.3
    lagrangian: LagrangianParams = LagrangianParams()
    #: of the limit, at most half the time left: the same bound over node patterns after it, where every allocation
    #: is not priced (:func:`.lagrangian_bound.node_items`), on a coarser grid (a step costs about items × slots,
    #: and there are about ten times as many patterns as modes)
    lag_node_share: float = 0.35
    lag_nodes: LagrangianParams = LagrangianParams(fine_slots=500, max_slots=1000)
    #: the Lagrangian bound's order of completions is a start of the next local search (docs/oracle-offline.md)
    lag_start: bool = True
    #: of the limit, at most: the class model solved by the branch and bound (:mod:`.class_search`) where jobs queue,
    #: on instances of at most class_search_max_jobs jobs and class_search_max_options options of its pooled model
    #: (16 jobs tried, and the bound of its open nodes on larger instances: docs/history/oracle-offline-queues.md)
    class_search_share: float = 0.5
    class_search_max_jobs: int = 12
    class_search_max_options: int = 150
    #: of the limit, at most class_targets_max_left of the time left: where that search does not apply (more jobs
    #: or options, up to class_targets_max_*), the class search proves targets between the bound and the incumbent
    #: instead (:func:`.class_search.class_bound_by_targets`)
    class_targets_share: float = 0.35
    class_targets_max_left: float = 0.7
    class_targets_max_jobs: int = 24
    class_targets_max_options: int = 500
    twins: bool = True           # order identical nodes by their first job in the relaxations (symmetry)
    concrete: ConcreteParams = ConcreteParams()
    search: SearchParams = SearchParams()
    decode: DecodeParams = DecodeParams()
    free_gpus: FreeGpuParams = FreeGpuParams()     # the climb in which jobs choose their GPUs (:func:`free_gpus_phase`)


@dataclass(frozen=True)
class Shared:
    """Bounds of the same instance that another solver has already computed: ``auto`` hands its members the
    preemptive LP of its queue test, so that no member spends its own limit computing it again."""

    preemptive_lp: float | None = None


@dataclass(frozen=True)
class Start:
    """Where a local search climbs from besides the incumbent: a schedule, or a priority order of the jobs."""

    incumbent: Incumbent = NO_INCUMBENT
    order: tuple[int, ...] = ()


@dataclass
class State:
    """What the phases of one offline solve share. ``model`` holds the latest model solution of the
    phases that solve relaxations (the class and hybrid models), which later phases read."""

    inst: Instance
    budget: Budget
    threads: int
    seed: int
    solver: str
    version: str
    params: dict[str, Any]                    # Result.params: the phases' diagnostics
    concrete: list[list[Option]]
    complete: bool
    offline: OfflineParams
    incumbent: Incumbent = NO_INCUMBENT
    bound: float = -math.inf
    pre: float | None = None             # the preemptive LP bound, once computed
    shared: Shared = Shared()
    #: where the next local search also climbs from, each with a share of its own: the greedy's schedule where a
    #: better hint replaced it (a hint adds a start, it never takes the solver's own away), the Lagrangian bound's
    #: order of completions (:func:`local_search`)
    starts: list[Start] = field(default_factory=list)
    stopped: bool = False
    model: ModelSolution = NO_MODEL

    @property
    def time_limit(self) -> float | None:
        return self.budget.limit

    def remaining(self) -> float | None:
        """Seconds left (None without a limit, never negative)."""
        return self.budget.remaining()

    def phase_time(self, share: float | None, of_left: float = 1.0) -> float | None:
        """A phase's time: ``share`` of the limit, at most ``of_left`` of the time left; the time left where the
        share is None, None without a limit."""
        left = self.remaining()
        if left is None or self.time_limit is None or share is None:
            return left
        return min(left * of_left, share * self.time_limit)

    def gap_open(self) -> bool:
        return gap_open(self.incumbent.objective, self.bound)

    def preemptive_lp(self, share: float, threads: int = 1) -> float:
        """The preemptive LP bound: the shared one where given, else computed within ``share`` of the limit
        (:func:`preemptive_lb`)."""
        if self.shared.preemptive_lp is not None:
            return self.shared.preemptive_lp
        return preemptive_lb(self.inst, self.remaining(), self.time_limit, threads, share=share)

    def offer(self, incumbent: Incumbent) -> None:
        """Keep ``incumbent`` when it is better than the best so far."""
        self.incumbent = self.incumbent.better(incumbent)

    def raise_bound(self, bound: float) -> None:
        self.bound = max(self.bound, bound)

    def record(self, phase: str, sol: ModelSolution = NO_MODEL) -> None:
        """A phase record: the model's status ("-" for none), the bound and best objective so far, elapsed."""
        self.params.setdefault("phases", []).append(
            {"phase": phase, "status": sol.status, "bound": self.bound,
             "objective": self.incumbent.replay.objective if self.incumbent.replay is not None else None,
             "t": time.perf_counter() - self.budget.t0})


S = TypeVar("S", bound=State)


@dataclass(frozen=True)
class Phase(Generic[S]):
    """One step of a solve: ``run(state, share)`` when ``when(state)`` holds (always without one)."""

    name: str
    run: Callable[[S, float | None], None]
    share: float | None = None
    when: Callable[[S], bool] | None = field(default=None, compare=False)


def run_phases(state: S, phases: Sequence[Phase[S]]) -> None:
    """The driver: each phase in order, until one stops the solve."""
    for phase in phases:
        if state.stopped:
            return
        if phase.when is None or phase.when(state):
            phase.run(state, phase.share)


# ----------------------------------------------------------------------------- start and finish


def check_offline(inst: Instance, who: str) -> None:
    if inst.problem != "offline":
        raise InputError(inst.name, "problem", f"{who} solves offline instances, got {inst.problem!r}")


def start(inst: Instance, state_type: type[S], *, time_limit: float | None, threads: int, seed: int,
          hint: Schedule | None, warm: bool, solver: str, version: str, params: dict[str, Any],
          offline: OfflineParams, t0: float, **extra: Any) -> S | Result:
    """The state every pipeline starts from, or the Result of an instance that some job cannot run on
    (proven: no size fits its GPUs, CPUs or memory, or a complete enumeration found no option). The incumbent
    is the greedy's (``warm``) and the hint's, the bound Σ(a_j + p_j)."""
    concrete, complete = concrete_options(inst, offline.concrete, until=setup_until(t0, time_limit, offline.concrete))
    bad = job_infeasible(inst, concrete, complete)
    if bad is not None:
        return Result(None, None, None, SolveStatus.INFEASIBLE, time.perf_counter() - t0, solver, version,
                      {**params, "reason": f"job {inst.jobs[bad].name} fits no allocation"})
    state = state_type(inst=inst, budget=Budget(time_limit, t0), threads=threads, seed=seed, solver=solver,
                       version=version, params=params, concrete=concrete, complete=complete, offline=offline,
                       **extra)
    state.bound = trivial_bound(inst)
    if warm:
        state.incumbent = greedy(inst, solver, greedy_until(t0, time_limit, offline.greedy_share))
    if hint is not None:
        own = state.incumbent
        state.offer(Incumbent.of(inst, hint))
        if own is not state.incumbent and own.schedule is not None:
            state.starts.append(Start(incumbent=own))
    return state


def finish(state: State) -> Result:
    return result_of_incumbent(state.incumbent, state.bound, state.budget.t0, state.solver, state.version,
                               state.params)


# ----------------------------------------------------------------------------- shared phases and helpers


def stop_without_time(state: State, _share: float | None = None) -> None:
    """The incumbent and the bounds took the limit (a large instance at a short limit): no model."""
    if state.time_limit is not None and state.remaining() <= 0:
        state.params["model"] = "none (no time left)"
        state.stopped = True


def queued(inst: Instance, objective: float, queue: float) -> bool:
    """Jobs wait for GPUs (a queue): ``objective`` (a schedule's, or a bound) is above ``queue`` ×
    Σ(a_j + p_j). There the job-level models' bounds stay near Σ(a_j + p_j) and their first incumbents
    are poor: the LP bounds and list scheduling do the work."""
    return objective > queue * trivial_bound(inst)


def preemptive_lb(inst: Instance, time_left: float | None, time_limit: float | None = None, threads: int = 1,
                  share: float = OfflineParams.pre_share) -> float:
    """The preemptive LP bound (:mod:`formulations.offline.preemptive_bound`) within ``time_left``, and at most
    ``share`` of ``time_limit`` when given; −inf if it fails: it is an extra, the other bounds stay valid."""
    if time_left is not None and time_limit is not None:
        time_left = min(time_left, share * time_limit)
    try:
        return preemptive_bound.lower_bound(inst, time_limit=time_left, threads=threads)
    except Exception:
        return -math.inf


def lagrangian_applies(state: State) -> bool:
    """Jobs queue (the preemptive LP, where computed, else the incumbent, above ``queue`` × Σ(a_j + p_j)), the gap
    is open and the objective is a sum (:mod:`formulations.offline.lagrangian_bound`)."""
    seen = state.pre if state.pre is not None and math.isfinite(state.pre) else state.incumbent.objective
    return (state.inst.objective != "makespan" and state.gap_open() and state.offline.lag_share > 0
            and queued(state.inst, seen, state.offline.queue))


def lagrangian_phase(state: State, share: float | None) -> None:
    """The Lagrangian time-indexed bound (``share`` of the limit, or ``lag_min_s``, at most ``lag_max_left`` of the
    time left), steered by the incumbent; an extra bound: a failure leaves the others."""
    left = state.remaining()
    if left is not None and state.time_limit is not None and share is not None:
        # at least lag_min_s where the time left allows: members of ``auto`` get a fraction of the limit, and
        # their share alone cut the bound short (10-job queues at 10 s: 1-2 % lower)
        left = min(left * state.offline.lag_max_left,
                   max(share * state.time_limit, state.offline.lag_min_s), left)
    options = lagrangian_bound.per_gpu_options(state.inst, state.concrete) if prices_every_allocation(state) else None
    try:
        m = lagrangian_bound.multipliers(state.inst, left, target=state.incumbent.objective,
                                         params=state.offline.lagrangian, options=options)
    except Exception:
        m = None
    if m is not None:
        state.raise_bound(m.bound)
        if state.offline.lag_start:
            state.starts.append(Start(order=tuple(m.completion_order(state.inst))))
    state.record("lagrangian")


def prices_every_allocation(state: State) -> bool:
    """The Lagrangian bound prices every allocation (per-GPU rows): the enumeration is complete and small enough."""
    return state.complete and sum(map(len, state.concrete)) <= state.offline.lagrangian.max_exact_options


def node_patterns_apply(state: State) -> bool:
    """The gap is open, the objective is a sum and the Lagrangian bound does not price every allocation (where it
    does, that is stronger); with or without a queue: on nodes of a few GPUs, jobs that span them bind there too."""
    return (state.inst.objective != "makespan" and state.gap_open() and state.offline.lag_node_share > 0
            and not prices_every_allocation(state))


def node_patterns_phase(state: State, share: float | None) -> None:
    """The Lagrangian bound over node patterns (:func:`.lagrangian_bound.node_items`; ``share`` of the limit, at
    most half the time left); an extra bound."""
    o = state.offline
    left = state.phase_time(share, of_left=0.5)
    try:
        nodes = lagrangian_bound.node_items(state.inst, o.lagrangian.max_node_items)
        m = None if nodes is None else lagrangian_bound.multipliers(
            state.inst, left, target=state.incumbent.objective, params=o.lag_nodes, nodes=nodes)
    except Exception:
        m = None
    if m is not None:
        state.raise_bound(m.bound)
    state.record("node-patterns")


def pooled_option_count(inst: Instance) -> int:
    """How many options the class searches' pooled model has (:func:`.class_search.pooled_model`)."""
    return sum(map(len, class_search.pooled_model(inst, class_options(inst)).options))


def class_search_applies(state: State, options: int | None = None) -> bool:
    """A queue (as for the Lagrangian bound) on an instance small enough for the class model's search; ``options``:
    the pooled model's option count where already known."""
    o = state.offline
    return (lagrangian_applies(state) and len(state.inst.jobs) <= o.class_search_max_jobs
            and (pooled_option_count(state.inst) if options is None else options) <= o.class_search_max_options)


def class_search_phase(state: State, share: float | None) -> None:
    """The class model's optimum by the branch and bound (:mod:`.class_search`), pruned at the incumbent, within
    ``share`` of the limit; an extra bound (the class optimum where it finishes, else the least over its open
    nodes), and its class schedule, decoded onto real GPUs, an incumbent where it found one below the incumbent."""
    left = state.phase_time(share)
    r = class_search.class_bound(state.inst, state.incumbent.objective, left)
    if r is not None:
        _offer_class_schedule(state, r)
        state.raise_bound(r.bound)
    state.record("class-search")


def class_targets_apply(state: State) -> bool:
    """A time limit, an open gap, a sum objective, and an instance above the class search's limits but within
    the targets' (:class:`OfflineParams`); with or without a queue, as the node patterns."""
    o = state.offline
    if (state.time_limit is None or state.inst.objective == "makespan" or not state.gap_open()
            or o.class_targets_share <= 0 or len(state.inst.jobs) > o.class_targets_max_jobs):
        return False
    options = pooled_option_count(state.inst)
    return options <= o.class_targets_max_options and not class_search_applies(state, options)


def class_targets_phase(state: State, share: float | None) -> None:
    """Destructive lower bounding by the class search (:func:`.class_search.class_bound_by_targets`) between the
    bound and the incumbent, within ``share`` of the limit (at most ``class_targets_max_left`` of the time left);
    an extra bound, and the class model's schedule, decoded onto real GPUs, an incumbent where an attempt solved
    it."""
    left = state.phase_time(share, of_left=state.offline.class_targets_max_left)
    if left is not None and math.isfinite(state.bound):
        r = class_search.class_bound_by_targets(state.inst, state.bound, state.incumbent.objective, left)
        if r is not None:
            _offer_class_schedule(state, r)
            state.raise_bound(r.bound)
    state.record("class-targets")


def _offer_class_schedule(state: State, r: class_search.ClassResult) -> None:
    """A class schedule the search found below the incumbent, decoded onto real GPUs in its order, as an
    incumbent."""
    if (sol := r.solution()) is not None:
        until = None if state.time_limit is None else time.perf_counter() + min(state.remaining(), 1.0)
        state.offer(decode(state.inst, r.opts, sol, state.solver, until))


def free_gpus_applies(state: State) -> bool:
    """Where the free-GPU climb can find what the local search cannot: its options do not enumerate every allocation
    (a job that spreads has the fixed sets of :func:`.local_search.spread_candidates`), the gap is open, and run times
    depend on the GPUs alone. The callers run it only where jobs queue."""
    return not state.complete and state.gap_open() and free_gpus.applies(state.inst)


def free_gpus_phase(state: State, share: float | None) -> None:
    """The climb of :func:`.free_gpus.climb` from the incumbent's start order: orders list-scheduled with each job on
    the GPUs that let it finish first, any of them for a job that spreads (on PAL's workloads 2.5-8.5 % below
    `auto`'s 30-s schedules in 10 s). With a ``share``: that share of the limit and at most half the time left,
    ending sooner at a local optimum, so that a model after it keeps its time (CP-SAT's node-exact model, which
    proves 16-job queues). Without one (the last phase): the rest of the limit, restarting from kicks of the best
    order at each local optimum."""
    order = None if state.incumbent.schedule is None else start_order(state.inst, state.incumbent.schedule)
    if order is not None:
        left = state.phase_time(share, of_left=1.0 if share is None else 0.5)
        until = None if left is None else time.perf_counter() + left
        state.offer(free_gpus.climb(state.inst, order, until, state.solver, state.seed, state.offline.free_gpus,
                                    restart=share is None))
    state.record("free-gpus")


def time_indexed_lb(inst: Instance, opts: list[list[Option]], res: set, best: Incumbent,
                    time_limit: float | None) -> float:
    """The time-indexed LP bound of the option model ``opts`` (:mod:`formulations.offline.time_indexed_bound`)
    with the incumbent ``best`` for its horizon and slots (most of them before its last completion); −inf when
    not solved in ``time_limit``."""
    last = max(best.replay.completion.values()) if best.replay is not None and best.replay.completion else None
    return time_indexed_bound.lower_bound(inst, opts, res, incumbent=best.objective, time_limit=time_limit,
                                          focus=last)


def class_resources(inst: Instance, levels: bool = False) -> set:
    """The capacities of a class model: node and cluster GPU counts, node-group cumulatives (no GPU identity),
    and the node CPUs/memory that class options can overload (parameter servers kept on the node, CPU/memory
    levels when the classes are split by ``levels``)."""
    return {r for r in capacities(inst) if r[0] in ("n", "all", "set")} | binding_resources(
        inst, class_options(inst, levels))


def local_search(state: State, opts: list[list[Option]], share: float, seed: int, extra: list | None = None) -> None:
    """List-scheduling local search (:func:`formulations.offline.local_search.improve`) from the incumbent and the
    ``extra`` seeds, and from each of the state's ``starts`` alone with a ``share`` of its own (then spent): on
    long queues where the climb ends depends on where it starts, and a hint better than the greedy's schedule can
    lead it to a worse local optimum
    (docs/history/oracle-offline-queues.md, "A hint adds a start", "The Lagrangian order")."""
    starts, state.starts = state.starts, []
    state.offer(improve(state.inst, opts, state.incumbent, state.budget, share, seed, state.solver, extra,
                        state.offline.search))
    for st in starts:     # the extra seeds were searched with the incumbent: not again
        state.offer(improve(state.inst, opts, st.incumbent, state.budget, share, seed, state.solver,
                            [list(st.order)] if st.order else None, state.offline.search))
