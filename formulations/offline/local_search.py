"""List-scheduling local search: the offline oracles' incumbents on queues and where the models are large.

A schedule is a priority order and an allocation per job; :class:`formulations.offline.list_scheduling.SGS`
turns one into start times without the simulator, fast enough for thousands of moves a second. The search
space (:func:`search_options`) is every allocation of a complete instance, else every single-node allocation
plus concrete spread candidates (:func:`spread_candidates`), else the restricted concrete options. The best
order and allocations are re-timed by the simulator and replayed (:func:`improve`): local search finds
incumbents, never bounds.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

from jctlab.model import Allocation, Instance
from jctlab.speed import duration

from ..budget import Budget
from ..results import NO_INCUMBENT, Incumbent
from ..schedules import start_order
from .list_scheduling import SGS, SGSTrace
from .memo import fresh_lists
from .options import Option, capacities, demand_of, options_for_set, rho, undominated
from .retime import best_retime, fixed_chooser


@dataclass(frozen=True)
class SearchParams:
    """The local search's knobs."""

    iters: int = 4000                  # moves per call without a time limit (deterministic)
    option_setup_s: float = 1.5e-5     # s per option to set the list scheduler up (measured 9-17 µs)
    min_s: float = 0.15                # s of search at least beyond the set-up ...
    max_share: float = 0.15            # ... where that is at most this share of the time limit
    stall: int = 10                    # restart from a perturbed best after stall × n moves without a gain ...
    kick: int = 3                      # ... perturbed by this many random moves
    start_order_share: float = 0.5     # of the time (or moves) with the start-order rule; the rest fills gaps
    spread_candidates: int = 64        # most concrete spread sets per job and size in the search space
    spread_node_sets: int = 2000       # most node sets enumerated per job and size for them
    #: also every run of consecutive nodes in the job's speed ranking (:func:`spread_candidates`)
    spread_windows: bool = True


def spread_candidates(inst: Instance, j: int, params: SearchParams = SearchParams()) -> list[Option]:
    """Concrete spread allocations of job ``j`` for :class:`SGS` (incumbents only, never a bound).

    Per size n ≥ 2 that no single node hosts, sets of the fewest nodes k that together host n of the job's
    GPUs, each with its n fastest GPUs there (each node keeping ≥ 1): every such node set (among the job's
    fastest nodes when there are more than ``params.spread_node_sets`` of them), the ``spread_candidates``
    fastest; and with ``params.spread_windows`` the k consecutive nodes of each window of the job's nodes
    ranked by speed, the slowest included. Why the windows: the fastest sets all hold the fastest nodes, so two
    large jobs whose candidates are only those can never run side by side, though the cluster holds both (PAL
    workload 2 on 64 GPUs: a 32-GPU job of 121 h waited 106 h behind a 24-GPU one).
    """
    cl = inst.cluster
    job = inst.jobs[j]
    cap = capacities(inst)
    by = {nd.name: sorted((g for g in nd.gpus if job.can_use(g.type)), key=lambda g: (-rho(job, g), g.index))
          for nd in cl.nodes}
    by = {v: gl for v, gl in by.items() if gl}
    hosts = sorted((len(gl) for gl in by.values()), reverse=True)

    def gpu_set(S: Sequence[str], n: int) -> tuple[str, ...] | None:
        """One GPU on every node of S, then the fastest there: n GPUs (None where S holds fewer)."""
        if sum(len(by[v]) for v in S) < n:
            return None
        pick = [by[v][0] for v in S]
        rest = sorted((g for v in S for g in by[v][1:]), key=lambda g: (-rho(job, g), g.id))
        return tuple(sorted(g.id for g in pick + rest[:n - len(S)]))

    def options_on(sets: set[tuple[str, ...]]) -> list[Option]:
        """The undominated options of each GPU set (its PS placements, levels)."""
        return [o for gids in sorted(sets)
                for o in undominated(options_for_set(inst, j, gids, sorted({g.split(":", 1)[0] for g in gids}), cap).options)]

    out: list[Option] = []
    for n in job.sizes:
        if n < 2 or (hosts and hosts[0] >= n) or sum(hosts) < n:
            continue
        k = next(i for i in range(2, len(hosts) + 1) if sum(hosts[:i]) >= n)
        ranked = sorted(by, key=lambda v: (-sum(rho(job, g) for g in by[v][:n]), v))
        pool = list(ranked)
        while len(pool) > k and math.comb(len(pool), k) > params.spread_node_sets:
            pool.pop()
        sets = {gpu_set(S, n) for S in itertools.combinations(sorted(pool), k)} - {None}
        kept = sorted(options_on(sets), key=lambda o: (o.dur, o.alloc.gpus))[:params.spread_candidates]
        if params.spread_windows:
            held = {o.alloc.gpus for o in kept}
            windows = {gpu_set(ranked[i:i + k], n) for i in range(len(ranked) - k + 1)} - {None}
            kept += options_on(windows - held)
        out += kept
    return out


def with_allocations(inst: Instance, opts: list[list[Option]], allocs: dict[int, Allocation]) -> list[list[Option]]:
    """``opts`` where job j also has ``allocs[j]`` as a concrete option when it lacks it: so that :class:`SGS`
    can list-schedule a seed schedule with its own allocations (a dispatch rule spreads a job over the GPUs
    free at its start, which the search options need not hold) and never does worse than it."""
    out = fresh_lists(opts)
    for j, a in allocs.items():
        if all(o.alloc != a for o in out[j]):
            job = inst.jobs[j]
            out[j].append(Option(j, duration(job, a, inst.cluster), demand_of(inst, job, a), alloc=a))
    return out


def with_spread_candidates(inst: Instance, opts: list[list[Option]], params: SearchParams = SearchParams()
                           ) -> list[list[Option]]:
    """``opts`` where every job without a concrete option gets :func:`spread_candidates`, so that
    :class:`SGS` applies to instances whose jobs must spread."""
    return [ol if any(o.alloc is not None for o in ol) else ol + spread_candidates(inst, j, params)
            for j, ol in enumerate(opts)]


def search_options(inst: Instance, concrete: list[list[Option]], complete: bool,
                   mixed: list[list[Option]] | None = None, params: SearchParams = SearchParams()
                   ) -> list[list[Option]] | None:
    """The options list-scheduling local search runs over: every allocation of a ``complete`` instance,
    else the node-exact options ``mixed`` (:func:`node_complete_options`) with concrete spread candidates,
    else (too many of those) the restricted ``concrete`` options; None where there are none or :class:`SGS`
    does not apply (interference)."""
    if complete:
        opts = concrete
    elif mixed is not None:
        opts = with_spread_candidates(inst, mixed, params)
    else:
        opts = concrete if concrete and all(concrete) else None
    return opts if opts is not None and SGS.applicable(inst, opts) else None


def _start_order(start) -> list:
    """Job indices by start, ties by job: the order in which the local search records a state (its list
    schedule on the same allocations is no worse, :class:`SGS`)."""
    return sorted(range(len(start)), key=lambda j: (start[j], j))


def _move(tr: SGSTrace, arr, rnd):
    """A random swap or insertion on ``tr``'s order, as (new order, i, k), or None. A job is never moved
    ahead of jobs that start before it arrives (they would all wait for it): an insertion goes to the first
    position that starts no earlier than its arrival instead, and such a swap is not made."""
    n = len(tr.order)
    order = list(tr.order)
    i, k = rnd.randrange(n), rnd.randrange(n)
    swap = rnd.random() < 0.5
    if k < i:
        first = bisect.bisect_left(tr.order_starts, arr[order[i]], lo=k, hi=i)
        if swap and first > k:
            return None
        k = first
    elif swap and arr[order[k]] > tr.start[order[i]]:
        return None
    if i == k:
        return None
    if swap:
        order[i], order[k] = order[k], order[i]
    else:
        order.insert(k, order.pop(i))
    return order, i, k


def _defer_pass(sg: SGS, cur: SGSTrace, until: float | None) -> SGSTrace:
    """Move jobs to the end of the order, largest least GPU area first, keeping each move that helps.

    A list schedule starts a job that arrives at idle GPUs at once; a job of many GPU-hours started early
    holds its GPUs while the jobs arriving after it wait. On PAL's 160-job workloads the best schedules
    found start such jobs (6-24 GPUs, 15-50 h) hours after their arrival, and random moves rarely pick
    them (PAL workload 3: 15 327 s → 12 116 s mean JCT from this pass alone)."""
    n = len(cur.order)
    area = [float((sg.dur[j] * sg.mask[j].sum(axis=1)).min()) for j in range(n)]
    slow = 0.0      # the longest step so far (as in :func:`_climb`)
    for j in sorted(range(n), key=lambda j: (-area[j], j)):
        t_step = time.perf_counter()
        if until is not None and t_step + slow >= until:
            break
        p = cur.order.index(j)
        if p == n - 1:
            continue
        order = cur.order[:p] + cur.order[p + 1:] + [j]
        fixed = dict(enumerate(cur.choice))
        fixed[j] = None
        # the others keep their GPUs, or every job re-chooses (earliest completion)
        tries = [sg.run(order, fixed, resume=(cur, p)), sg.run(order, None, resume=(cur, min(p, cur.ec_len)))]
        obj, ch, st = min(tries, key=lambda t: t[0])
        if obj < cur.objective - 1e-9:
            cur = sg.trace(_start_order(st), ch)
        slow = max(slow, time.perf_counter() - t_step)
    return cur


@dataclass(frozen=True)
class ListSchedule:
    """The best list schedule a search found: its objective (list-scheduling times; the caller re-times and
    replays it), start order and allocation per job."""

    objective: float
    order: list[int]
    allocs: dict[int, Allocation]


def local_search(inst: Instance, opts: list[list[Option]], seeds: list, until: float | None, rng_seed: int = 0,
                 max_iters: int | None = None, params: SearchParams = SearchParams()) -> ListSchedule | None:
    """Improve priority orders by list scheduling (:class:`SGS`) until ``until`` (``time.perf_counter()``).

    ``max_iters`` bounds the moves (deterministic when ``until`` is None).
    ``seeds``: start orders (lists of job indices) and/or (order, allocation dict) pairs. Moves: swap
    two jobs, move one job elsewhere; per state, both earliest-completion choice and the fixed
    allocations of the best state are tried; moves are :func:`_move`'s (none puts a job ahead of jobs that
    start before it arrives), after a first pass of :func:`_defer_pass`. A move re-schedules from its first
    changed position (:meth:`SGS.run` with ``resume``); an improving one becomes the current state in start
    order (ties by job). After ``params.stall`` × n moves without a gain it restarts from the best state
    perturbed by ``params.kick`` moves. The first ``params.start_order_share`` of the time (or moves)
    list-schedules by start order; the rest by the gap rule from the best state so far (no worse on the same
    order and allocations). Returns the best list schedule, or None.
    """
    sg = SGS(inst, opts)
    rnd = random.Random(rng_seed)
    best = None
    for sd in seeds:
        if best is not None and until is not None and time.perf_counter() >= until:
            break       # one seed's list schedule at least; the others only while time is left
        if isinstance(sd, tuple):
            order, alloc = sd
            idx = {}
            for j, a in alloc.items():
                idx[j] = next((k for k, o in enumerate(sg.opts[j]) if o.alloc == a), None)
            o1, c1, s1 = sg.run(order, idx)
            best = _better(best, (o1, _start_order(s1), c1))
        else:
            order = sd
        o2, c2, s2 = sg.run(order)
        best = _better(best, (o2, _start_order(s2), c2))
    if best is None or not math.isfinite(best[0]):
        return None
    start = time.perf_counter()
    share = min(max(params.start_order_share, 0.0), 1.0)
    for gaps, lo, hi in ((False, 0.0, share), (True, share, 1.0)):
        if hi <= lo:
            continue
        sg.gaps = gaps
        phase_until = None if until is None else start + hi * (until - start)
        if phase_until is not None and time.perf_counter() >= phase_until:
            continue        # no time for this phase (its first list schedule alone is a whole run)
        iters = None if max_iters is None else math.ceil((hi - lo) * max_iters)
        best = _better(best, _climb(sg, sg.trace(best[1], best[2]), phase_until, iters, rnd, params))
    return ListSchedule(best[0], best[1], sg.allocs(best[2]))


def _better(best, cand):
    return cand if best is None or cand[0] < best[0] - 1e-9 else best


def _state(tr: SGSTrace) -> tuple:
    """(objective, start order, choices) of a recorded list schedule: its own start order, which the gap rule
    need not follow, so that list scheduling that order re-creates it (or better)."""
    return tr.objective, _start_order(tr.start), tr.choice


def _climb(sg: SGS, cur: SGSTrace, until: float | None, max_iters: int | None, rnd: random.Random,
           params: SearchParams):
    """Hill climbing with restarts from ``cur`` (see :func:`local_search`); the best (objective, start
    order, choices)."""
    n = len(cur.order)
    best = _state(cur)
    cur = _defer_pass(sg, cur, until)
    best = _better(best, _state(cur))
    best_tr = cur
    stall = 0
    it = 0
    slow = 0.0      # the longest step so far: a step starts only if one as long ends in time
    t_step = time.perf_counter()
    while (n > 1 and (until is None or t_step + slow < until)
           and (max_iters is None or it < max_iters)):
        mv = _move(cur, sg.arr, rnd)
        if mv is None:
            continue
        it += 1
        order, i, k = mv
        if rnd.random() < 0.5:
            # re-choose the moved jobs (earliest completion), keep the others' allocations
            fixed = {j: c for j, c in enumerate(cur.choice)}
            for j in (cur.order[i], cur.order[k]):
                fixed[j] = None
            p = min(i, k)
        else:
            fixed, p = None, min(i, k, cur.ec_len)
        obj, ch, st = sg.run(order, fixed, resume=(cur, p))
        if obj < cur.objective - 1e-9:
            cur = sg.trace(_start_order(st), ch)
            if cur.objective < best[0] - 1e-9:
                best, best_tr = _state(cur), cur
            stall = 0
        else:
            stall += 1
            if stall > params.stall * n:        # restart from a perturbed best
                kicked = best_tr
                for _ in range(params.kick):
                    if (mv := _move(kicked, sg.arr, rnd)) is not None:
                        o, c, st = sg.run(mv[0])
                        if math.isfinite(o):
                            kicked = sg.trace(_start_order(st), c)
                cur = kicked
                stall = 0
        now = time.perf_counter()
        slow, t_step = max(slow, now - t_step), now
    return best


def improve(inst: Instance, opts: list[list[Option]], best: Incumbent, budget: Budget, share: float, seed: int,
            method: str, extra: list | None = None, params: SearchParams = SearchParams()) -> Incumbent:
    """Local search (:func:`local_search`) from the incumbent's start order and allocations and from the
    arrival order, ``share`` of the time limit (at least ``params.min_s`` beyond its set-up where
    ``params.max_share`` of the limit allows; ``params.iters`` moves without a limit); the result is re-timed
    by the simulator and replayed (objective = replayed)."""
    n = len(inst.jobs)
    seeds: list = [sorted(range(n), key=lambda j: (inst.jobs[j].arrival, j))]
    if best.schedule is not None:
        order = start_order(inst, best.schedule)
        if order is not None:
            segs = {inst.index[sg.job]: sg for sg in best.schedule.segments}
            seeds.insert(0, (order, {j: sg.alloc for j, sg in segs.items()}))
            seeds.insert(1, order)
    seeds += extra or []
    for sd in seeds:
        if isinstance(sd, tuple):       # the seed's own allocations, so its list schedule is no worse than it
            opts = with_allocations(inst, opts, sd[1])
    # a short share still buys some search beyond the set-up: at 4 s a 40-job queue on 16 GPUs whose 0.2-s share
    # was below the set-up estimate got none and ended far behind the same search at 5 s
    setup = params.option_setup_s * sum(map(len, opts)) + 0.05
    time_limit = budget.limit
    until = None
    if time_limit is not None:
        seconds = min(budget.remaining(), max(share * time_limit, min(setup + params.min_s,
                                                                      params.max_share * time_limit)))
        until = time.perf_counter() + seconds
    if until is not None and until - time.perf_counter() < setup:
        return NO_INCUMBENT         # not even time to set the list scheduler up (256 GPUs with PS: 1.3 s)
    r = local_search(inst, opts, seeds, until, rng_seed=seed, max_iters=params.iters if time_limit is None else None,
                     params=params)
    if r is None:
        return NO_INCUMBENT
    return best_retime(inst, r.order, lambda: fixed_chooser(r.allocs), method)
