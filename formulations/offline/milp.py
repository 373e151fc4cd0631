"""MILP oracle for the offline class (``backend`` "highs" or "cbc"): the model of
:mod:`formulations.offline.milp_model` inside the shared pipeline (:mod:`formulations.offline.pipeline`).

The bound is the largest of the MILP's own, Σ(a_j + p_j), the preemptive LP and the time-indexed LP over the
same options (all relaxations of the same problem). Where the greedy schedule is above ``queue`` × the
per-job bound (jobs wait; the big-M MILP's bound and incumbents are weak there), with a time limit, before
the MILP: the preemptive LP, list-scheduling local search whose schedule competes with the MILP's, and, if
the incumbent is still that far above the bound, the time-indexed LP. Otherwise the time-indexed LP runs
when the MILP stops unproven before its limit, with the time left. On a queue the solver gets
``queue_milp_share`` of the time left and the local search what is still left after it; on a queue whose option
model is a relaxation (not every allocation enumerated) the MILP is not solved and the local search gets it all
(:func:`milp_applies`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

from jctlab.lp import pulp
from jctlab.model import Instance, Schedule
from jctlab.result import Result

from .classes import class_options, node_complete_options
from .cpsat_model import ModelSolution
from .decode import decode, last_model_time
from .local_search import search_options
from .milp_model import MilpModelParams, build, run_solver, to_objective
from .options import Option, binding_resources, capacities
from .pipeline import (OfflineParams, Phase, Shared, State, check_offline, class_resources, class_search_applies,
                       class_search_phase, class_targets_apply, class_targets_phase, finish, free_gpus_applies,
                       free_gpus_phase, lagrangian_applies, lagrangian_phase, local_search, node_patterns_apply,
                       node_patterns_phase, queued, run_phases, start, stop_without_time, time_indexed_lb)

BOUND_SAFETY = 1e-7   # relative: the solvers' bounds are lowered by this much (their tolerances)


@dataclass(frozen=True)
class MilpParams:
    """The offline MILP oracle's knobs."""

    offline: OfflineParams = OfflineParams()
    model: MilpModelParams = MilpModelParams()
    class_level_limit: int = 6000     # most options of the class model split by CPU/memory level (where node
                                      # CPUs/memory can bind); beyond it the coarse classes
    ti_share: float = 0.25            # of the limit: the time-indexed LP before the MILP on a queue
    ti_min_time: float = 0.5          # s left after an unproven MILP: worth a time-indexed LP
    build_share: float = 0.3          # of the time left, at most, for adding capacity-set rows
    queue_milp_share: float = 0.8     # of the time left, for the solver on a queue; then the local search
    #: of the time left at that local search, where allocations are not all enumerated: the climb in which jobs
    #: choose their GPUs after it (:func:`.pipeline.free_gpus_phase`; PAL's workloads, development seed 9 000, the
    #: milp member alone at 27 s: mean certified gap 25.1 % without it, 21.4 % at 0.5, 20.2 % at 0.9); 0: none
    free_gpus_share: float = 0.9
    #: handing a built model to the solver, and its answer back, in units of the build's time (kept out of the
    #: solver's limit): HiGHS through highspy about 1×; CBC writes an MPS file, starts, presolves and writes a
    #: solution outside its own clock (1.3-1.6 s beyond its limit after a 1.16-s build at 128 GPUs with PS)
    handover: dict = field(default_factory=lambda: {"highs": 1.0, "cbc": 2.0}, hash=False)


@dataclass
class MilpState(State):
    milp: MilpParams = MilpParams()
    backend: str = "highs"
    search: list[list[Option]] | None = None     # the local search's options (on a queue)
    opts: list[list[Option]] = field(default_factory=list)
    res: set = field(default_factory=set)
    ti_res: set = field(default_factory=set)
    ti_done: bool = False

    def left(self) -> float:
        """Seconds left of the limit (only called with a time limit; negative once overrun)."""
        return self.budget.left()


def phases(p: MilpParams) -> list[Phase[MilpState]]:
    return [
        Phase("queue-test", queue_test, p.offline.pre_share),
        Phase("lagrangian", lagrangian_phase, p.offline.lag_share,
              when=lambda s: s.pre is not None and lagrangian_applies(s)),
        Phase("node-patterns", node_patterns_phase, p.offline.lag_node_share,
              when=lambda s: s.pre is not None and node_patterns_apply(s)),
        Phase("local-search", first_local_search, p.offline.ls_share, when=lambda s: s.search is not None),
        Phase("class-search", class_search_phase, p.offline.class_search_share,   # pruned at the searched incumbent
              when=lambda s: s.pre is not None and class_search_applies(s)),
        Phase("class-targets", class_targets_phase, p.offline.class_targets_share,
              when=lambda s: s.pre is not None and class_targets_apply(s)),
        Phase("no-time-left", stop_without_time),
        Phase("options", choose_options),
        Phase("time-indexed-lp", time_indexed_lp, p.ti_share, when=still_a_queue),
        Phase("milp", milp_model, p.queue_milp_share, when=milp_applies),
        Phase("time-indexed-lp", time_indexed_lp_after, when=lambda s: not s.ti_done and _worth_more(s)),
        Phase("local-search", last_local_search, 1.0, when=lambda s: s.search is not None and _worth_more(s)),
        Phase("free-gpus", free_gpus_phase, None, when=lambda s: s.search is not None and _worth_more(s)
              and s.milp.free_gpus_share > 0 and free_gpus_applies(s)),
    ]


def _worth_more(s: MilpState) -> bool:
    return s.time_limit is not None and s.left() > s.milp.ti_min_time and s.gap_open()


def milp_applies(s: MilpState) -> bool:
    """The MILP, except on a queue whose option model is a relaxation (not every allocation enumerated): there its
    big-M bound stays below the LP bounds' and its decoded schedules behind the local search's (on PAL's 160-job
    workloads at 30 s and the 8 × 12 and 16 × 16 rows at 10 s it changed neither,
    docs/history/oracle-offline-queues.md), so the local search after it gets its time."""
    return s.search is None or s.complete


def still_a_queue(s: MilpState) -> bool:
    return s.time_limit is not None and s.incumbent.objective > s.offline.queue * s.bound


def queue_test(s: MilpState, share: float | None) -> None:
    """Jobs wait (the greedy schedule is above ``queue`` × Σ(a_j + p_j)): the MILP's own bound on Σ C_j may stay
    near Σ(a_j + p_j) (its big-M LP is weak there), and so may its incumbents: the preemptive LP (at most
    ``share`` of the limit), and list-scheduling local search where durations are fixed."""
    if s.time_limit is not None and queued(s.inst, s.incumbent.objective, s.offline.queue):
        s.pre = s.preemptive_lp(share)
        s.raise_bound(s.pre)
        if s.offline.ls_share > 0:
            s.search = search_options(s.inst, s.concrete, s.complete,
                                      None if s.complete else node_complete_options(s.inst), s.offline.search)


def first_local_search(s: MilpState, share: float | None) -> None:
    local_search(s, s.search, share, s.seed)
    s.record("local-search")


def choose_options(s: MilpState, share: float | None) -> None:
    """Every allocation where the enumeration is complete; else the class options, split by CPU/memory level
    when there are at most ``class_level_limit`` of those."""
    inst = s.inst
    if s.complete:
        s.opts = s.concrete
        s.res = {r for r in capacities(inst) if r[0] == "g"} | binding_resources(inst, s.concrete)
        s.ti_res = s.res
    else:
        opts = class_options(inst, True)
        levels = sum(map(len, opts)) <= s.milp.class_level_limit
        s.opts = opts if levels else class_options(inst)
        s.res = {r for r in capacities(inst) if r[0] in ("n", "all")} | binding_resources(inst, s.opts)
        s.ti_res = class_resources(inst, levels)


def time_indexed_lp(s: MilpState, share: float | None) -> None:
    """Still a queue after the preemptive LP: the time-indexed LP (``share`` of the limit) is the stronger
    bound there. At most the time left: the phases before it may have spent more than the rest of the limit."""
    s.raise_bound(time_indexed_lb(s.inst, s.opts, s.ti_res, s.incumbent, s.phase_time(share)))
    s.ti_done = True
    s.record("time-indexed-lp")


def milp_model(s: MilpState, share: float | None) -> None:
    """Build (capacity-set rows for at most ``build_share`` of the time left) and solve the MILP; on a queue the
    solver gets ``share`` of what is left. The bound (less ``BOUND_SAFETY``) and the decoded schedule count."""
    inst, t0, time_limit = s.inst, s.budget.t0, s.time_limit
    tb = time.perf_counter()
    u = s.incumbent.objective      # windows from it (a hair above: the incumbent itself stays in the model)
    model = build(inst, s.opts, s.res, s.milp.model,
                  until=None if time_limit is None else tb + s.milp.build_share * s.left(),
                  incumbent=u * (1 + 1e-9) if math.isfinite(u) else None, twins=s.offline.twins)
    s.params["model"] = ("exact" if s.complete else "relaxed") + ("" if model.exact else "+budget")
    # handing the model to the solver (highspy calls, or an MPS file for CBC) costs about as much as
    # building it (CBC twice that), outside the solver's own clock: keep that time out of its limit
    now = time.perf_counter()
    left = last_model_time(time_limit, None if time_limit is None else
                           time_limit - (now - t0) - s.milp.handover[s.backend] * (now - tb), s.offline.decode)
    if left is not None and s.search is not None:
        left *= share      # on a queue the local search keeps the rest (its schedules beat the MILP's)
    ans = run_solver(model.prob, s.backend, left, s.threads, s.seed)
    if ans.bound is not None and math.isfinite(ans.bound):
        b = to_objective(inst, ans.bound)
        s.raise_bound(b - BOUND_SAFETY * abs(b) - 1e-9)
    if ans.has_solution:
        choice = [max(range(len(xj)), key=lambda k: xj[k].value() or 0.0) for xj in model.x]
        start = [v.value() for v in model.s]
        s.offer(decode(inst, s.opts, ModelSolution("-", 1.0, -math.inf, choice, start), s.solver, s.budget.until,
                       s.offline.decode))
    s.record("milp")


def time_indexed_lp_after(s: MilpState, share: float | None) -> None:
    """The MILP stopped unproven before its limit: the time-indexed LP with the time left."""
    s.raise_bound(time_indexed_lb(s.inst, s.opts, s.ti_res, s.incumbent, s.left()))
    s.record("time-indexed-lp")


def last_local_search(s: MilpState, share: float | None) -> None:
    """The rest of the limit (``queue_milp_share`` kept it, or the MILP proved its own model early), less the
    share of it that the free-GPU climb after it takes."""
    if s.time_limit is not None and s.milp.free_gpus_share > 0 and free_gpus_applies(s):
        share = (s.remaining() or 0.0) * (1 - s.milp.free_gpus_share) / s.time_limit
    local_search(s, s.search, share, s.seed + 1)
    s.record("local-search")


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, backend: str = "highs", warm: bool = True,
          params: MilpParams = MilpParams(), shared: Shared = Shared()) -> Result:
    """Offline oracle by MILP (``backend`` "highs" or "cbc"; see the module docstring). ``shared``: bounds another
    solver already computed (``auto``'s preemptive LP)."""
    t0 = time.perf_counter()
    check_offline(inst, "offline_milp")
    if backend not in ("highs", "cbc"):
        raise ValueError(f"unknown backend {backend!r}")
    solver = f"milp-{backend}"
    state = start(inst, MilpState, time_limit=time_limit, threads=threads, seed=seed, hint=hint, warm=warm,
                  solver=solver, version=pulp.__version__,
                  params={"time_limit": time_limit, "threads": threads, "seed": seed, "backend": backend},
                  offline=params.offline, t0=t0, milp=params, backend=backend, shared=shared)
    if isinstance(state, Result):
        return state
    run_phases(state, phases(params))
    return finish(state)
