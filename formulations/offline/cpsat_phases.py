"""The phases of the offline CP-SAT oracle (their order: :mod:`formulations.offline.cpsat`): its parameters and
state, the exact model of complete instances, and the class model and bounds of large ones (the improvement
rounds after the class model are in :mod:`formulations.offline.cpsat_rounds`).

Each phase is ``phase(state, share)`` on a :class:`CpsatState`; the ``when`` predicates next to them say
when they run. Shares are of the time left unless a docstring says "of the limit".
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field

from jctlab.model import Instance, Schedule

from ..results import Incumbent, gap_open
from ..schedules import job_weights
from . import latest_completions
from .classes import class_options, node_complete_options, p_min
from .cpsat_model import (NO_MODEL, SAT_PARAMS, CpsatRun, ModelHint, ModelSolution, solve_option_model,
                          time_unit)
from .decode import decode, last_model_time
from .hints import hint_assignment, model_hint
from .local_search import search_options
from .node_exact import assignment_of, assignment_of_schedule, node_decode
from .options import Option, binding_resources, capacities
from .pipeline import (OfflineParams, State, class_resources, free_gpus_applies, local_search, queued,
                       time_indexed_lb)


@dataclass(frozen=True)
class CpsatParams:
    """The offline CP-SAT oracle's knobs (shares of the time left unless "of the limit")."""

    offline: OfflineParams = OfflineParams()
    # complete instances
    exact_share: float = 0.6          # the exact model (with 2-3 threads: core_share of it with core workers)
    class_share: float = 0.4          # then, unproven: the class model if it is `coarser` times smaller ...
    coarser: int = 3
    # large instances
    node_complete: bool = True        # the node-exact model (every single-node allocation)
    relaxed_share: float = 0.5        # the class model
    core_share: float = 0.6           # of the class model's time: core-based workers where the default ones
    skip_core_without_solution: bool = True   # did not prove it (unless they found no solution at all)
    lp_share: float = 0.4             # the time-indexed LP after an unproven class model
    node_decode_share: float = 0.05   # of the limit: each exact decode of a node assignment
    deadline_share: float = 0.3       # of the limit, at most: latest completions from the incumbent ...
    deadline_s_per_job: float = 0.35  # ... where that share is at least this per job
    deadline_batch: int = 2           # latest-completion relaxations solved at once
    hybrid_rounds: int = 12           # lazy-variability rounds at most, each hybrid_share of the time left,
    hybrid_share: float = 0.3
    hybrid_add: int = 300             # ... adding at most this many options a round,
    hybrid_stop: float = 0.4          # ... none started after this share of the limit
    lns_share: float = 0.15           # large-neighbourhood search in the exact option model
    #: of the limit, at most: on a queue, the climb in which jobs choose their GPUs (:func:`.pipeline.free_gpus_phase`)
    #: before the node-exact model; 0: none
    free_gpus_share: float = 0.3
    rate_rounds: int = 12             # rate-band models at most after a proven node-exact model, none after
    rate_patience: int = 3            # this many in a row that raised neither bound nor incumbent,
    rate_min_s: float = 0.5           # none with less time left (s)
    fine_share: float = 1.0           # dense bands: each shortens a duration by at most this × the zero-gap tolerance


@dataclass
class CpsatState(State):
    """The CP-SAT pipeline's state: its parameters and what its phases hand on."""

    cpsat: CpsatParams = CpsatParams()
    # complete instances
    exact_res: set = field(default_factory=set)
    queue: bool = False                  # the preemptive LP above `queue` × Σ(a_j + p_j)
    # large instances
    mixed: list[list[Option]] | None = None      # node-exact options (restricted by latest completions)
    mixed_all: list[list[Option]] | None = None  # ... before any restriction
    res_all: set = field(default_factory=set)
    search: list[list[Option]] | None = None     # the local search's options
    classes: list[list[Option]] = field(default_factory=list)
    res_cls: set = field(default_factory=set)
    class_window: tuple[float | None, float] = (None, 0.0)   # (the class model's time, when it started)
    core: dict | None = None             # core-based SAT parameters for the class model (< 4 threads)
    loaded: dict | None = None           # ... once they proved it: also for the later relaxations
    skip_core: bool = False
    ls_rest: bool = False                # local search takes the rest of the time (no node-exact model)
    u_mix: float | None = None           # the node-exact model's time unit
    lower: list[float] | None = None     # per-job rest bounds for the latest completions
    latest: dict | None = None           # latest completions of a schedule as good as the incumbent ...
    cap: float = math.inf                # ... whose objective caps the bounds under them
    node_exact_done: bool = False
    node_exact_options: list[list[Option]] | None = None

    @property
    def use_ls(self) -> bool:
        return self.offline.ls_share > 0 and self.search is not None

    def run(self, time_limit: float | None, sat_params: dict | None = None) -> CpsatRun:
        return CpsatRun(time_limit, self.threads, self.seed, sat_params)

    def decode(self, opts: list[list[Option]], sol: ModelSolution, pinned_until: bool = True) -> Incumbent:
        """The solution's schedule (:func:`formulations.offline.decode.decode`); ``pinned_until``: its GPU
        pinning stops at the end of the limit."""
        return decode(self.inst, opts, sol, self.solver, self.budget.until if pinned_until else None,
                      self.offline.decode)

    def last_model_time(self) -> float | None:
        return last_model_time(self.time_limit, self.remaining(), self.offline.decode)


def core_params(threads: int) -> dict | None:
    """SAT parameters that put CP-SAT's core-based lower-bound search on the class model, or None where
    the default portfolio already runs it (≥ 4 workers). With 1-3 workers the default portfolio has no
    core worker; on loaded instances (jobs queue behind spread jobs) it is the one that proves the class
    model (16 GPUs / 10 jobs, seed 0: 5.7 s with [core, default_lp] against unproven in 30 s)."""
    if threads >= 4:
        return None
    if threads == 1:
        return {**SAT_PARAMS, "optimize_with_core": True}
    return {**SAT_PARAMS, "subsolvers": ["core", "default_lp"] + (["fixed"] if threads == 3 else [])}


def exact_params(threads: int, node_exact: bool = False, deadlines: bool = False) -> dict | None:
    """SAT parameters of the complete exact model and (``node_exact``) of the node-exact and banded models:
    with 2-3 workers a core-based worker and a default LP worker (``max_lp`` beside it on the node-exact
    models), both on the whole problem (no LNS worker: the pipeline's incumbent is hinted, complete), or None
    (the default portfolio: it has a core worker from 4 workers on; with 1 the core worker alone is far
    weaker). ``deadlines`` (node-exact and banded models under latest completions): ``max_lp`` and
    ``default_lp``, no core worker: there the LP workers close the bound faster.

    The node-exact model of the 30-job benchmark with 2 threads shows why both kinds of worker: the default
    workers prove seeds 0, 2 and 4 in 8-16 s but not seeds 1 and 3 in 420 s; the core worker proves seed 1 in
    80-86 s and seed 3 in 147 s, not seed 4 in 90 s; side by side they prove seed 1 and seed 4. Not
    ``core_minimization_level`` 0: it proves faster but certified optima above a replayed schedule."""
    if threads < 2 or threads >= 4:
        return None
    if node_exact and deadlines:
        workers = ["max_lp", "default_lp"]
    else:
        workers = ["core", "max_lp" if node_exact else "default_lp"]
    return {**SAT_PARAMS, "subsolvers": workers, "num_full_subsolvers": 2}


# ----------------------------------------------------------------------------- predicates


def limited_and_open(s: CpsatState) -> bool:
    return s.time_limit is not None and s.gap_open()


def on_a_queue(s: CpsatState) -> bool:
    return s.queue and s.offline.ls_share > 0 and search_options(s.inst, s.concrete, True) is not None


def uses_local_search(s: CpsatState) -> bool:
    return s.use_ls


def class_model_unproven(s: CpsatState) -> bool:
    return not s.model.proven


def core_workers_apply(s: CpsatState) -> bool:
    return s.core is not None and not s.model.proven and not s.skip_core


def class_model_unproven_and_open(s: CpsatState) -> bool:
    return not s.model.proven and s.time_limit is not None and s.gap_open()


def deadlines_apply(s: CpsatState) -> bool:
    return (s.mixed is not None and s.time_limit is not None and s.model.proven and s.gap_open()
            and min(s.cpsat.deadline_share * s.time_limit, 0.5 * s.remaining())
            >= s.cpsat.deadline_s_per_job * len(s.inst.jobs))


def hybrid_rounds_apply(s: CpsatState) -> bool:
    return s.mixed is not None and bool(s.cpsat.hybrid_rounds) and s.model.proven and s.latest is None


def second_search_applies(s: CpsatState) -> bool:
    return s.use_ls and s.gap_open() and (s.ls_rest or s.latest is None)


def lns_applies(s: CpsatState) -> bool:
    return (s.use_ls and s.mixed is not None and s.cpsat.lns_share > 0 and s.gap_open()
            and (s.remaining() is None or s.remaining() > 1) and s.latest is None)


def free_gpus_climb_applies(s: CpsatState) -> bool:
    """Where the local search runs, on a queue (the preemptive LP above ``queue`` × Σ(a_j + p_j)) whose allocations
    are not all enumerated (:func:`.pipeline.free_gpus_applies`)."""
    return (s.use_ls and s.cpsat.free_gpus_share > 0 and s.pre is not None and queued(s.inst, s.pre, s.offline.queue)
            and free_gpus_applies(s))


def rate_bands_apply(s: CpsatState) -> bool:
    return s.node_exact_done and bool(s.cpsat.rate_rounds)


def restricted_exact_applies(s: CpsatState) -> bool:
    left = s.remaining()
    return (not s.node_exact_done and s.gap_open() and all(s.concrete)
            and (left is None or left > 0.05 and not s.use_ls))


# ----------------------------------------------------------------------------- complete instances


def queue_test(s: CpsatState, share: float | None) -> None:
    """The preemptive LP (at most ``share`` of the limit) where the greedy schedule is above ``queue`` ×
    Σ(a_j + p_j) (the LP cannot be where the greedy is not: LP ≤ greedy); a queue when the LP is too."""
    s.exact_res = {r for r in capacities(s.inst) if r[0] in ("g", "n", "all")} | binding_resources(s.inst,
                                                                                                    s.concrete)
    if s.time_limit is not None and queued(s.inst, s.incumbent.objective, s.offline.queue):
        s.pre = s.preemptive_lp(share)
        s.raise_bound(s.pre)
    s.queue = s.pre is not None and queued(s.inst, s.pre, s.offline.queue)


def queue_local_search(s: CpsatState, share: float | None) -> None:
    """On a queue CP-SAT's first incumbents are poor; list scheduling finds good ones in milliseconds."""
    local_search(s, s.concrete, share, s.seed)
    s.record("local-search")


def exact_model(s: CpsatState, share: float | None) -> None:
    """The exact model, ``share`` of what is left. With 2-3 threads first the core-based and default LP
    workers (:func:`exact_params`) for ``core_share`` of that time, then, if unproven, the default ones
    (their LNS finds better schedules)."""
    t_exact = None if s.time_limit is None else s.remaining() * share
    sp = exact_params(s.threads)
    rounds = [(sp, t_exact)]
    if sp is not None:
        s.params["exact_subsolvers"] = list(sp["subsolvers"])
        if t_exact is not None:
            rounds = [(sp, t_exact * s.cpsat.core_share), (None, t_exact * (1 - s.cpsat.core_share))]
    sol = NO_MODEL
    for k, (sat, t_round) in enumerate(rounds):
        if k:
            if sol.status in ("OPTIMAL", "INFEASIBLE") or not s.gap_open():
                break
            s.record("exact-core", sol)
        sol = solve_option_model(s.inst, s.concrete, s.exact_res, s.run(t_round, sat),
                                 model_hint(s.inst, s.concrete, s.incumbent), twins=s.offline.twins)
        s.raise_bound(sol.bound(s.inst))
        if sol.found:
            s.offer(s.decode(s.concrete, sol))
    s.params["model"] = "exact"


def bounds_after_exact(s: CpsatState, share: float | None) -> None:
    """More bounds for an exact model CP-SAT did not prove: the preemptive LP (if not yet); unless it showed a
    queue, and if the class model is ``coarser`` times smaller (CPU/memory levels, PS), the class model
    (``share`` of the time left; CP-SAT often proves it in a fraction of a second) and its split by level;
    then the time-indexed LP over the exact options (on a queue CP-SAT's bound may still be Σ(a_j + p_j))."""
    if s.pre is None:
        s.pre = s.preemptive_lp(s.offline.pre_share)
        s.raise_bound(s.pre)
    classes = class_options(s.inst)
    if (not s.queue and sum(map(len, s.concrete)) >= s.cpsat.coarser * sum(map(len, classes))
            and s.gap_open()):
        t_cls, t1 = s.remaining() * share, time.perf_counter()
        sol = _solve_classes(s, classes, class_resources(s.inst), t_cls)
        s.record("relaxed", sol)
        _refine_levels(s, sol, classes, t_cls - (time.perf_counter() - t1), None)
    if s.gap_open():
        s.raise_bound(time_indexed_lb(s.inst, s.concrete, {r for r in s.exact_res if r[0] not in ("n", "all")},
                                      s.incumbent, s.remaining()))
    s.record("lp-bounds")


# ----------------------------------------------------------------------------- large instances: the class model


def large_setup(s: CpsatState, share: float | None) -> None:
    """The option sets of the large-instance phases: node-exact options (where they are few enough), the
    resources of the models over them, and the local search's options (None where it does not apply)."""
    s.mixed = node_complete_options(s.inst) if s.cpsat.node_complete else None
    s.mixed_all = s.mixed
    s.res_all = {r for r in capacities(s.inst) if r[0] in ("g", "n", "all", "set")} | (
        binding_resources(s.inst, s.mixed) if s.mixed is not None else set())
    s.search = search_options(s.inst, s.concrete, False, s.mixed, s.offline.search)


def first_local_search(s: CpsatState, share: float | None) -> None:
    local_search(s, s.search, share, s.seed)
    s.record("local-search")


def _solve_classes(s: CpsatState, classes: list[list[Option]], res_cls: set, time_limit: float | None,
                   sat_params: dict | None = None) -> ModelSolution:
    """A class model (a relaxation) hinted with the incumbent: its proven bound raises the bound and its
    decoded solution competes with the incumbent."""
    sol = solve_option_model(s.inst, classes, res_cls, s.run(time_limit, sat_params),
                             model_hint(s.inst, classes, s.incumbent), twins=s.offline.twins)
    s.raise_bound(sol.bound(s.inst))
    if sol.found:
        s.offer(s.decode(classes, sol, pinned_until=False))
    return sol


def class_model(s: CpsatState, share: float | None) -> None:
    """The class model, ``share`` of what is left; with a limit and < 4 threads, ``1 − core_share`` of that
    with the default workers (the core-based ones may take the rest, :func:`core_class_model`)."""
    s.classes = class_options(s.inst)
    t_rel = None if s.time_limit is None else s.remaining() * share
    s.class_window = (t_rel, time.perf_counter())
    s.res_cls = class_resources(s.inst)
    s.core = core_params(s.threads) if t_rel is not None else None
    t_default = None if t_rel is None else t_rel * (1 - s.cpsat.core_share if s.core else 1)
    s.model = _solve_classes(s, s.classes, s.res_cls, t_default)
    s.params["model"] = "relaxed"
    s.record("relaxed", s.model)
    # no class solution at all from the default workers (a long loaded queue): the core-based ones do not
    # prove such a model either (PAL's 160-job workloads), so local search takes their time
    s.skip_core = s.cpsat.skip_core_without_solution and s.use_ls and not s.model.found


def _class_time_left(s: CpsatState) -> float | None:
    t_rel, t1 = s.class_window
    return None if t_rel is None else t_rel - (time.perf_counter() - t1)


def preemptive_lp_for_unproven_classes(s: CpsatState, share: float | None) -> None:
    """The preemptive LP where the default workers leave the class model unproven, within the class model's
    time (below every proven class bound measured, and seconds of set-up where the class model is proven)."""
    s.pre = s.preemptive_lp(share, s.threads)
    s.raise_bound(s.pre)


def core_class_model(s: CpsatState, share: float | None) -> None:
    """Not proven by the default workers: the core-based ones for the rest of the class model's time; once
    they prove it, they also solve the later relaxations."""
    sol2 = _solve_classes(s, s.classes, s.res_cls, _class_time_left(s), s.core)
    if sol2.found:
        s.model = sol2
    s.loaded = s.core if sol2.proven else None
    s.record("relaxed-core", sol2)


def _refine_levels(s: CpsatState, sol: ModelSolution, classes: list[list[Option]], time_limit: float | None,
                   sat_params: dict | None) -> tuple[ModelSolution, list[list[Option]]]:
    """After a proven class model, where node CPUs or memory can bind: the class model split by CPU/memory
    level (:func:`formulations.offline.classes.class_options` with ``levels``), a tighter relaxation (the
    coarse one gives a class the fastest level's speed and the cheapest level's CPUs) that CP-SAT may need much
    longer for (64 GPUs / 50 jobs with levels: unproven after 30 s, the coarse one proven in 1.7 s). Its bound
    and decoded schedule count either way; when it is proven it replaces the coarse model for what
    follows. Returns (solution, classes)."""
    fine = class_options(s.inst, levels=True)
    if (not sol.proven or not any(o.level is not None for ol in fine for o in ol)
            or not s.gap_open() or (time_limit is not None and time_limit < 0.2)):
        return sol, classes
    sol_f = _solve_classes(s, fine, class_resources(s.inst, True), time_limit, sat_params)
    s.record("relaxed-levels", sol_f)
    return (sol_f, fine) if sol_f.proven else (sol, classes)


def class_model_by_level(s: CpsatState, share: float | None) -> None:
    """The class model split by CPU/memory level with what is left of the class model's time
    (:func:`_refine_levels`); then whether the node-exact model can follow (else local search takes the rest)."""
    s.model, s.classes = _refine_levels(s, s.model, s.classes, _class_time_left(s), s.loaded)
    s.res_cls = class_resources(s.inst, any(o.level is not None for ol in s.classes for o in ol))
    # no class solution in its time (a long queue: 160 jobs on 32 GPUs): the node-exact model, far larger,
    # finds none either; local search takes the rest of the time
    s.ls_rest = s.use_ls and (s.mixed is None or not s.model.found)


def time_indexed_lp(s: CpsatState, share: float | None) -> None:
    """The time-indexed LP over the class options, ``share`` of what is left."""
    s.raise_bound(time_indexed_lb(s.inst, s.classes, s.res_cls, s.incumbent, s.remaining() * share))
    s.record("time-indexed-lp")


# ----------------------------------------------------------------------------- large instances: incumbents


def exact_decode(s: CpsatState, opts: list[list[Option]] | None = None, sol: ModelSolution | None = None) -> None:
    """Exact decode (every single-node GPU set, per node, :func:`formulations.offline.node_exact.node_decode`) of
    the node assignment of a model solution (``opts``, ``sol``), or without one of the incumbent's schedule;
    ``node_decode_share`` of the limit."""
    best = s.incumbent
    if not s.cpsat.node_decode_share or s.u_mix is None or not gap_open(best.objective, s.bound):
        return
    if sol is not None:
        a, key = assignment_of(s.inst, opts, sol, s.u_mix)
    elif best.schedule is not None:
        a, key = assignment_of_schedule(s.inst, best.schedule, s.u_mix)
    else:
        return
    until = None if s.time_limit is None else time.perf_counter() + min(s.remaining(),
                                                                        s.cpsat.node_decode_share * s.time_limit)
    s.offer(node_decode(s.inst, s.mixed, a, key, s.u_mix, until=until, threads=s.threads, seed=s.seed,
                        method=s.solver, hint=best.schedule, per_node=None if s.time_limit is None else 3.0))


def decode_class_solution(s: CpsatState, share: float | None) -> None:
    s.u_mix = time_unit(s.inst, s.mixed) if s.mixed is not None else None
    if s.model.found:
        exact_decode(s, s.classes, s.model)
        s.record("node-decode")


def restrict_to_incumbent(s: CpsatState, incumbent: Incumbent | None = None) -> None:
    """The node-exact options and latest completions of the schedules at least as good as ``incumbent`` (the
    best one by default): every such schedule completes job j by a_j + (U − L_j)/w_j
    (:mod:`formulations.offline.latest_completions`); the later models keep only those, their bounds capped at U."""
    if s.lower is None:
        return
    u_obj = (s.incumbent if incumbent is None else incumbent).objective
    dl = latest_completions.latest(s.inst, u_obj * sum(job_weights(s.inst)), s.lower)
    m_r = latest_completions.restrict(s.inst, s.mixed_all, dl)
    if m_r is not None:
        s.latest, s.cap, s.mixed = dl, u_obj, m_r
        s.params["deadlines"]["options"] = [sum(map(len, s.mixed_all)), sum(map(len, m_r))]


def _class_rest_bound(inst: Instance, classes: list[list[Option]], res_cls: set, sched: Schedule | None,
                      threads: int, seed: int, twins: bool) -> latest_completions.LowerBound:
    """The class model as :data:`formulations.offline.latest_completions.LowerBound`: a lower bound on
    Σ w (C − a) of a job subset, its jobs held to their latest completions, hinted with the incumbent's
    restriction."""
    w = job_weights(inst)

    def bound(S: list[int], latest: dict[int, float], t: float) -> float:
        sub = inst.replace_jobs([inst.jobs[k] for k in S])
        lat = {i: latest[k] for i, k in enumerate(S)}
        sopts = latest_completions.restrict(sub, [classes[k] for k in S], lat)
        if sopts is None:
            return -math.inf
        names = {inst.jobs[k].name for k in S}
        sb = None if sched is None else dataclasses.replace(
            sched, segments=tuple(x for x in sched.segments if x.job in names))
        hint = hint_assignment(sub, sopts, sb)
        sol = solve_option_model(sub, sopts, res_cls, CpsatRun(t, threads, seed), None if hint is None else
                                 ModelHint(hint), twins=twins, latest_end=lat)
        b = sol.bound(sub)
        return b * sum(w[k] for k in S) if math.isfinite(b) else -math.inf

    return bound


def restrict_by_latest_completions(s: CpsatState, share: float | None) -> None:
    """Latest completions: lower bounds L_j on the other jobs' Σ w (C − a) from class-model relaxations (at
    most ``share`` of the limit, ``deadline_batch`` at a time), then the node-exact options restricted to the
    schedules at least as good as the incumbent."""
    inst = s.inst
    if inst.objective != "makespan" and s.incumbent.schedule is not None:
        left = s.remaining()
        t1 = time.perf_counter()
        w = job_weights(inst)
        stats: dict = {}
        batch = max(1, min(s.cpsat.deadline_batch, s.threads))
        s.lower = latest_completions.rest_bounds(
            inst, s.incumbent.objective * sum(w), [x * p for x, p in zip(w, p_min(inst))],
            _class_rest_bound(inst, s.classes, s.res_cls, s.incumbent.schedule, max(1, s.threads // batch),
                              s.seed, s.offline.twins),
            until=t1 + min(share * s.time_limit, 0.5 * left), batch=batch, stats=stats)
        s.params["deadlines"] = {**stats, "t": round(time.perf_counter() - t1, 2)}
    restrict_to_incumbent(s)
    s.record("deadlines")
