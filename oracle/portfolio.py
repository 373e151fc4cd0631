"""The ``auto`` method: a portfolio that keeps the best replayed schedule and the largest proven bound.

Static and offline: a heuristic incumbent first (it becomes the hint of every member, hinting every
variable), then CP-SAT and the HiGHS MILP. Offline instances whose every allocation is enumerated
(:func:`exact_model_applies`: CP-SAT solves its exact model, the one that proves small queues), and with
``threads >= 2`` offline instances given at least ``race_max_s_per_job`` seconds per job, run CP-SAT first
with every thread and all of the time left, then HiGHS with what CP-SAT leaves unused: there CP-SAT with one
thread beside a HiGHS process proved less than CP-SAT alone, so ``auto``'s bound fell below its member's
(small queues of 8-16 jobs at 60 s). Otherwise, with ``threads >= 2`` and a limit of at least ``race_min_s``
(or none), static instances, and offline instances where jobs queue for GPUs (the preemptive LP bound
is above ``race`` × Σ(a_j + p_j)/n), run them at the same time in two processes, each with half the
threads, under one wall-clock deadline; a member that proves optimality (or infeasibility) ends the
other at once. Otherwise they run one after the other with every thread: CP-SAT (always, for the
bound) with 60 % of the time limit, 85 % on offline instances, then HiGHS with the rest, unless CP-SAT
proved optimality or less than ``member_min_s`` is left; HiGHS is hinted with the better schedule. On
an offline queue with one thread the order is reversed, HiGHS first with ``queue_milp_share`` (:class:`PortfolioParams`).
(Offline without a queue: CP-SAT with 2 threads proves what CP-SAT with 1 thread beside a HiGHS
process does not; on a queue neither proves, and HiGHS' list-scheduling incumbents and CP-SAT's LP bounds are
best combined.) The shared hint is the market matching (``matching.methods.matching``), else the greedy;
the queue test's preemptive LP is handed to the offline members (``Shared``), which then do not compute it again.
On a long queue whose run times depend on the GPUs alone (at least ``pooled_min_jobs`` jobs), a race starts with
the pooled step (every thread, ``pooled_share`` of the limit; its schedule becomes the hint where it is better),
and then, on a cluster of one GPU type, HiGHS races the free-GPU climb (:func:`_climb`) instead of CP-SAT
(``pooled_climb``).
Preemptive instances reach :mod:`oracle.preemptive` through the dispatcher (with ``auto`` as its offline
member); called directly, the portfolio hands them to its CP-SAT member.

The members are solved through a ``member`` function (:func:`oracle.dispatch.dispatch`, which the
caller passes in: the portfolio does not import the dispatcher that imports it).
"""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
import queue
import time
from dataclasses import dataclass
from typing import Any, Callable

from baselines.families import resolve
from formulations.budget import Budget
from formulations.offline import bnb as offline_bnb
from formulations.offline import free_gpus
from formulations.offline import pooled as offline_pooled
from formulations.offline.classes import trivial_bound
from formulations.offline.concrete import concrete_options, enumerable
from formulations.offline.greedy import offline_greedy
from formulations.offline.options import binding_resources
from formulations.offline.pipeline import OfflineParams, Shared, preemptive_lb
from formulations.results import (
    NO_INCUMBENT,
    checked_bound,
    result_of_incumbent,
    result_of_schedule,
    solver_versions,
)
from formulations.schedules import replay_objective, start_order, static_schedule
from formulations.special.bound import release_shift_bound
from formulations.static.candidates import enumerate_candidates
from formulations.static.greedy import static_greedy
from formulations.static.packing import build_packing
from formulations.static.pipeline import matching_allocations
from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus
from jctlab.simulate import PolicyError, simulate

from .cache import from_payload, to_payload

MEMBERS = ("cpsat", "milp")
#: the member that races beside HiGHS after the pooled step, in CP-SAT's place (:func:`_climb`)
CLIMB = "free-gpus"
#: imported once by the fork server, so that a race's members start in a fraction of a second, not ~1 s
PRELOAD = ("formulations.static.cpsat", "formulations.static.milp", "formulations.offline.cpsat",
           "formulations.offline.milp", "oracle.methods")

#: solves one member: (method, instance, time limit, threads, seed, hint, options) -> Result
Member = Callable[[str, Instance, "float | None", int, int, "Schedule | None", dict], Result]


@dataclass(frozen=True)
class PortfolioParams:
    """The portfolio's knobs."""

    cpsat_share: float = 0.6          # static, in turn: CP-SAT's share of the limit (HiGHS gets the rest)
    #: offline instances without a queue run the members one after the other with every thread, CP-SAT first
    #: with this share: there its offline oracle beats the MILP and needs its threads
    offline_cpsat_share: float = 0.85
    race: float = 1.01                # offline: the preemptive LP above race × Σ(a_j + p_j)/n: a queue, the members race
    queue_milp_share: float = 0.9     # on a queue with one thread: HiGHS first with this share
    #: offline instances whose every allocation is enumerated (``exact_first``), or with ≥ 2 threads and at least
    #: ``race_max_s_per_job`` s of the limit per job: CP-SAT first with every thread and this share of the time left
    #: (HiGHS gets what it leaves), never a race. Its exact model, and with the time its core-based workers on the
    #: class and node-exact models, are what prove small queues; both need both threads. Measured: the race wins
    #: on 8 × 12 queues at 10 s (0.8 s per job), CP-SAT alone on 16-job queues on 8 GPUs at 60 s (3.75 s per job)
    cpsat_first_share: float = 1.0
    exact_first: bool = True          # False: enumerated instances take the rules below like any other
    race_max_s_per_job: float = 2.0
    #: racing on a long queue (at least ``pooled_min_jobs`` jobs) where jobs may choose their GPUs: first, with every
    #: thread and this share of the limit, CP-SAT on the pooled problem, whose order list-scheduled by the free-GPU
    #: rule becomes the members' hint where it is better (:mod:`formulations.offline.pooled`; measured on PAL's
    #: 160-job workloads, docs/history/oracle-offline-queues.md)
    pooled_share: float = 0.25
    pooled_min_jobs: int = 100
    #: ... and then, on a cluster of one GPU type, the race is HiGHS beside the free-GPU climb (:func:`_climb`)
    #: instead of CP-SAT: there the two offline members compute the same Lagrangian bound, and every schedule they
    #: gain comes from the climb, which CP-SAT's pipeline gives 2 s of its limit. With several types the rule's
    #: climb ends above the local search, and CP-SAT's bound was the higher one (docs/history/oracle-offline-queues.md,
    #: "The climb as a member")
    pooled_climb: bool = True
    #: small offline instances (:func:`_bnb_applies`): the exact branch and bound runs first with bnb_probe of the
    #: limit (it proves 10-job queues on 4 GPUs in seconds where the models prove none in 30 s); unfinished, the
    #: members get their share of the rest (hinted with its schedule), and it resumes with the last bnb_resume of
    #: it, pruning below their best schedule. The members' bound there gains little from more time, while the
    #: search's proof is all or nothing: so the search gets most of it (measured in
    #: docs/history/oracle-offline-queues.md)
    bnb_probe: float = 0.3
    bnb_resume: float = 0.75
    #: ... on instances with at most this many jobs and options over all jobs, and no binding CPU/memory (more
    #: jobs, or the options that parameter servers and CPU/memory levels multiply, and the search rarely ends:
    #: the members, given less time, then certify less)
    bnb_max_jobs: int = 12
    bnb_max_options: int = 300
    race_min_s: float = 5.0     # s: below this limit the members run in turn (starting two processes costs 0.3-1 s)
    member_min_s: float = 0.5   # s: a later member needs this much of the limit (its set-up costs 0.3-1 s)
    handback_s: float = 0.3     # s of the limit kept for the members' hand-back and the parent's replay
    poll_s: float = 0.2         # s between checks that the racing members are still alive


def _member(member: Member, name: str, inst: Instance, time_limit: float | None, threads: int, seed: int,
            hint: Schedule | None, warm: bool, pre_lb: float | None = None) -> Result:
    """One member's result; ``pre_lb``: the queue test's preemptive LP, handed to offline members so that they do
    not compute it again."""
    if name == CLIMB:
        return _climb(inst, time_limit, seed, hint)
    options: dict[str, Any] = {} if warm else {"warm": False}
    if pre_lb is not None and math.isfinite(pre_lb):
        options["shared"] = Shared(preemptive_lp=pre_lb)
    return member(name, inst, time_limit, threads, seed, hint, options)


def _climb(inst: Instance, time_limit: float | None, seed: int, hint: Schedule | None) -> Result:
    """The free-GPU climb with restarts (:func:`.free_gpus.climb`) from the hint's start order for the whole limit,
    as a member: a schedule and no bound. Its moves draw from ``seed + 1``, not the stream of the MILP member's own
    climb (its last phase, from ``seed``), so that the two climbs do not retrace each other."""
    t0 = time.perf_counter()
    order = None if hint is None else start_order(inst, hint)
    until = None if time_limit is None else t0 + time_limit
    best = NO_INCUMBENT if order is None else free_gpus.climb(inst, order, until, CLIMB, seed + 1, restart=True)
    return result_of_incumbent(best, None, t0, CLIMB, "", {})     # already replayed by the climb


def _member_proc(member: Member, name: str, inst_d: dict, time_limit: float | None, threads: int, seed: int,
                 hint_d: dict | None, warm: bool, pre_lb: float | None = None) -> str:
    """Process entry point: plain data in, a cache payload (JSON) out."""
    inst = Instance.from_dict(inst_d)
    hint = None if hint_d is None else Schedule.from_dict(hint_d)
    return to_payload(_member(member, name, inst, time_limit, threads, seed, hint, warm, pre_lb))


def _member_queue(member: Member, q: Any, name: str, inst_d: dict, deadline: float | None, threads: int, seed: int,
                  hint_d: dict | None, warm: bool, pre_lb: float | None = None) -> None:
    """Process entry point of the parallel portfolio: puts (name, payload, error) on ``q``. ``deadline``
    (wall clock, ``time.time()``): the member's limit is what is left of it once its modules are
    imported (process start-up and imports cost a second or more of a short limit)."""
    try:
        for module in PRELOAD:   # already there when forked from the server; spawned: import them first
            importlib.import_module(module)
        tl = None if deadline is None else max(0.1, deadline - time.time())
        q.put((name, _member_proc(member, name, inst_d, tl, threads, seed, hint_d, warm, pre_lb), None))
    except Exception as e:  # noqa: BLE001 - reported to the parent, which keeps the other members
        q.put((name, None, repr(e)))


def _context() -> Any:
    """The members' process context: a fork server that has imported the solvers (POSIX), else spawn.
    Never plain fork: the parent may hold solver threads."""
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


def _heuristic(inst: Instance, seed: int, time_limit: float | None) -> Schedule | None:
    """The members' shared hint: static, the market matching, else the greedy; offline, the best of the
    baselines' schedules and the earliest-finish greedy's."""
    dl = Budget(None if time_limit is None else 0.1 * time_limit)
    if inst.problem == "static":
        # market matching (fast, within a few % of the optimum); the greedy when it does not apply
        cands: list[Schedule] = []
        m = matching_allocations(inst, seed)
        if m is not None:
            # the members run the greedy themselves (warm): the matching is enough as the shared hint
            return static_schedule(inst, m, "heuristic")
        model = build_packing(inst, enumerate_candidates(inst, budget=dl))
        if not any(not g for g in model.groups):
            a = static_greedy(inst, model, seed=seed, budget=dl)
            if a is not None:
                cands.append(static_schedule(inst, a, "heuristic"))
        return cands[0] if cands else None
    if inst.problem == "offline":
        scored = _baseline_schedules(inst, dl)
        if (s := offline_greedy(inst, "heuristic", dl)) is not None:
            if (rep := replay(inst, s)).valid:
                scored.append((rep.objective, s))
        return min(scored, key=lambda x: x[0])[1] if scored else None
    return None


#: non-preemptive baselines (``jctlab simulate --policy``) whose schedules compete for an offline hint, so that
#: ``auto`` never returns worse than them (on PAL's 160-job workloads they beat the list-scheduling heuristics)
BASELINE_HINTS = ("sjf+packed-sticky", "sjf+pal")


def _baseline_schedules(inst: Instance, dl: Budget) -> list[tuple[float, Schedule]]:
    """(replayed objective, schedule) of each valid ``BASELINE_HINTS`` schedule, while ``dl`` allows."""
    out = []
    for name in BASELINE_HINTS:
        if dl.left() <= 0:
            break
        try:
            sched, rep = simulate(inst, resolve(name)(inst, seed=0), method=name)
        except PolicyError:          # the policy cannot place some job (a shape it does not handle)
            continue
        if rep.valid:
            out.append((rep.objective, sched))
    return out


def portfolio(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
              hint: Schedule | None = None, warm: bool = True, member: Member,
              params: PortfolioParams = PortfolioParams()) -> Result:
    """The ``auto`` method (see the module docstring); ``member`` solves one member."""
    p_ = params
    t0 = time.perf_counter()
    dl = Budget(time_limit, t0)
    if inst.problem == "preemptive":
        r = _member(member, "cpsat", inst, time_limit, threads, seed, hint, warm)
        return r.with_(solver=f"auto/{r.solver}")
    # a race needs ≥ 2 threads and a limit that pays for two processes; offline, also a queue
    long_enough = dl.left() >= p_.race_min_s
    search = None
    if inst.problem == "offline" and _bnb_applies(inst, p_):
        if hint is None and warm:
            hint = _heuristic(inst, seed, time_limit)
        run = offline_bnb.Run.start(inst, hint, time.perf_counter(), time_limit, seed)
        left = dl.left()
        if not isinstance(run, Result) and run.resume(Budget(None if left == float("inf") else left * p_.bnb_probe)):
            run = run.result()
        if isinstance(run, Result):   # proven (or infeasible): the members cannot do better
            return result_of_schedule(inst, "auto", run.schedule, run.lower_bound, t0, "auto", "",
                          {"members": ["bnb"], "time_limit": time_limit, "threads": threads, "seed": seed,
                           "versions": solver_versions(), "member_status": {run.solver: run.status}},
                          infeasible=run.status == SolveStatus.INFEASIBLE, error=run.params.get("error"))
        search = run
        r = run.result()
        if r.schedule is not None and (hint is None or _better_than_hint(inst, r, hint)):
            hint = r.schedule
        # the members get their share, then the search resumes with the rest (and their best schedule)
        dl = Budget(dl.left() * (1 - p_.bnb_resume))
    # every allocation enumerated, or time for CP-SAT's proofs: CP-SAT first with every thread, no queue test,
    # no race
    roomy = threads >= 2 and dl.left() >= p_.race_max_s_per_job * len(inst.jobs)
    cpsat_first = inst.problem == "offline" and ((p_.exact_first and exact_model_applies(inst)) or roomy)
    pre_lb = _preemptive_lb(inst, dl) if inst.problem == "offline" and long_enough and not cpsat_first else None
    on_queue = None if pre_lb is None else _queued(inst, pre_lb, p_.race)
    # a daemonic process (a worker of a multiprocessing pool) may not start processes: members in turn
    parallel = (threads >= 2 and long_enough and not mp.current_process().daemon and not cpsat_first
                and (inst.problem != "offline" or bool(on_queue)))
    pooled_step = parallel and inst.problem == "offline" and _pooled_applies(inst, dl, p_)
    climb = pooled_step and p_.pooled_climb and len(inst.cluster.gpu_types) == 1
    # in turn on a queue: HiGHS first (its list-scheduling incumbents and class MILP beat CP-SAT there)
    members = ("milp", CLIMB) if climb else MEMBERS[::-1] if on_queue else MEMBERS
    info: dict[str, Any] = {"members": ["bnb"] * (search is not None) + list(members), "time_limit": time_limit,
                            "threads": threads, "seed": seed, "versions": solver_versions(), "parallel": parallel}
    if inst.problem == "offline":
        info["queue"] = on_queue   # None: not tested (a limit under race_min_s, or none, or CP-SAT first)
        info["cpsat_first"] = cpsat_first
    if hint is None and warm:
        hint = _heuristic(inst, seed, time_limit)
    if pooled_step:
        pooled = offline_pooled.incumbent(inst, hint, dl.left() * p_.pooled_share, threads, seed, "auto")
        info["pooled"] = pooled.objective if pooled.schedule is not None else None
        if pooled.schedule is not None and (hint is None or pooled.objective < (replay_objective(inst, hint)
                                                                                or math.inf)):
            hint = pooled.schedule
    results: list[Result] = []
    if parallel:
        left = dl.left()
        tl = None if left == float("inf") else max(0.1, left - p_.handback_s)
        deadline = None if tl is None else time.time() + tl
        per = max(1, threads // 2)
        ctx = _context()
        q = ctx.Queue()
        procs = [ctx.Process(target=_member_queue, args=(member, q, m, inst.to_dict(), deadline, per, seed,
                                                          None if hint is None else hint.to_dict(), warm, pre_lb),
                             daemon=True) for m in members]
        for p in procs:
            p.start()
        pending = len(procs)
        try:
            while pending:
                # members respect their limit; the margin covers process start-up and the hand-back
                give_up = None if tl is None else time.perf_counter() + max(1.0, dl.left() + 5.0)
                answer = _next_answer(q, procs, give_up, p_.poll_s)
                if answer is None:
                    info.setdefault("member_errors", []).append(
                        "a member ended without an answer" if not any(p.is_alive() for p in procs)
                        else "no answer before the limit")
                    break
                name, payload, err = answer
                pending -= 1
                if err is not None:  # a member crashed: keep the others
                    info.setdefault("member_errors", []).append(f"{name}: {err}")
                    continue
                try:
                    r = from_payload(inst, payload)
                except Exception as e:  # noqa: BLE001
                    info.setdefault("member_errors", []).append(f"{name}: {e!r}")
                    continue
                if r is None:
                    continue
                results.append(r)
                if r.status.proven:
                    info["stopped_early"] = r.solver  # the other member cannot improve on a proof
                    break
        finally:
            for p in procs:  # only the member processes started above
                if p.is_alive():
                    p.terminate()
            for p in procs:
                p.join(timeout=2.0)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=1.0)
            q.close()
    else:
        share = (p_.cpsat_first_share if cpsat_first else p_.queue_milp_share if on_queue
                 else p_.offline_cpsat_share if inst.problem == "offline" else p_.cpsat_share)
        for k, m in enumerate(members):
            left = dl.left()
            if k and left <= p_.member_min_s:
                break
            # the first member always runs (briefly, if the heuristic took the limit): it gives the bound; the
            # hand-back margin is kept where it takes all of the time left
            first = left * share if share < 1 else left - p_.handback_s
            tl = None if left == float("inf") else max(0.05, first if k == 0 else left)
            r = _member(member, m, inst, tl, threads, seed, hint, warm, pre_lb)
            results.append(r)
            if r.status.proven:
                break
            if r.schedule is not None and (hint is None or _better_than_hint(inst, r, hint)):
                hint = r.schedule
    if search is not None and not any(r.status.proven for r in results):
        for r in results:
            search.tighten(r.schedule)
        left = Budget(time_limit, t0).left()
        search.resume(Budget(None if left == float("inf") else max(0.0, left - p_.handback_s)))
        results.insert(0, search.result())
    info["member_status"] = {r.solver: r.status for r in results}
    extra = [pre_lb]                # the queue test's LP: a bound even where no member returned one
    if inst.problem == "offline":   # the textbook bound with releases shifted (members lift theirs; bnb does not)
        extra.append(release_shift_bound(inst))
    best = combine(inst, results, hint, extra, info)
    errors = [r.params.get("error") for r in results if r.status == SolveStatus.ERROR]
    if best.schedule is None and not best.infeasible and results and len(errors) == len(results):
        return result_of_schedule(inst, "auto", None, None, t0, "auto", "", info, error="; ".join(map(str, errors)))
    return result_of_schedule(inst, "auto", best.schedule, best.bound, t0, "auto", "", info,
                              infeasible=best.infeasible)


@dataclass(frozen=True)
class Combined:
    """What the portfolio returns of its members' results: the best replayed schedule, the largest bound."""

    schedule: Schedule | None
    objective: float | None
    bound: float | None
    infeasible: bool


def combine(inst: Instance, results: list[Result], hint: Schedule | None, extra_bounds: list[float | None],
            info: dict) -> Combined:
    """The portfolio's answer from its members' ``results``, the shared ``hint`` and bounds computed beside the
    members (``extra_bounds``, None where absent): the schedule of least replayed objective among every member's
    and the hint, and the largest proven bound of any member or extra, so that ``auto`` is never worse than any
    of its members, in either. A bound above the best replayed schedule is a wrong proof: it is dropped
    (:func:`formulations.results.checked_bound`, recorded in ``info``), never allowed to cut another member's
    schedule. Infeasible when a member proved it (then no bound)."""
    best_sched, best_obj = None, None
    for r in results:
        if r.objective is not None and r.schedule is not None and (best_obj is None or r.objective < best_obj):
            best_sched, best_obj = r.schedule, r.objective
    if hint is not None:
        v = replay_objective(inst, hint)
        if v is not None and (best_obj is None or v < best_obj):
            best_sched, best_obj = hint, v
    infeasible = any(r.status == SolveStatus.INFEASIBLE for r in results)
    if infeasible:
        return Combined(best_sched, best_obj, None, True)
    bounds = [b for b in [r.lower_bound for r in results] + list(extra_bounds) if b is not None and math.isfinite(b)]
    if best_obj is not None:
        bounds = [b for b in bounds if checked_bound(b, best_obj, info) is not None]
    return Combined(best_sched, best_obj, max(bounds) if bounds else None, False)


def _next_answer(q: Any, procs: list, give_up: float | None, poll_s: float) -> tuple | None:
    """The next (name, payload, error) a member put on ``q``; None at ``give_up`` (``perf_counter``) or
    once every member process has ended with nothing more on ``q`` (one killed by the system or crashed
    in native code never answers: the race does not wait for the limit then)."""
    while True:
        try:
            return q.get(timeout=poll_s)
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                try:
                    return q.get(timeout=poll_s)     # an answer still in the pipe of a member that ended
                except queue.Empty:
                    return None
            if give_up is not None and time.perf_counter() >= give_up:
                return None


def _better_than_hint(inst: Instance, r: Result, hint: Schedule) -> bool:
    v = replay_objective(inst, hint)
    return v is None or (r.objective is not None and r.objective < v)


def _pooled_applies(inst: Instance, dl: Budget, p: PortfolioParams) -> bool:
    """A long queue under a time limit, where run times depend on the GPUs alone (:func:`.free_gpus.applies`)."""
    return (p.pooled_share > 0 and len(inst.jobs) >= p.pooled_min_jobs and dl.left() != math.inf
            and free_gpus.applies(inst))


def _bnb_applies(inst: Instance, p: PortfolioParams) -> bool:
    if len(inst.jobs) > p.bnb_max_jobs or offline_bnb.not_applicable(inst) is not None:
        return False
    opts = concrete_options(inst)[0]
    return sum(map(len, opts)) <= p.bnb_max_options and not binding_resources(inst, opts)


def exact_model_applies(inst: Instance) -> bool:
    """An offline instance whose every allocation is enumerated (:func:`concrete_options` complete), where the
    CP-SAT member solves its exact model. The subset count is checked first: it is cheap, the enumeration of a
    large instance is not."""
    return inst.problem == "offline" and enumerable(inst) and concrete_options(inst)[1]


def _preemptive_lb(inst: Instance, dl: Budget) -> float | None:
    """The preemptive LP bound with at most the members' share of the time left (``OfflineParams.pre_share``: they
    are handed it and do not compute it again); None without a time limit (the members then run one after the
    other to their proofs)."""
    left = dl.left()
    return None if left == float("inf") else preemptive_lb(inst, OfflineParams.pre_share * left)


def _queued(inst: Instance, pre_lb: float, race: float) -> bool:
    """Jobs queue for GPUs: the preemptive LP bound is above ``race`` × Σ(a_j + p_j)/n."""
    return pre_lb > race * trivial_bound(inst)

