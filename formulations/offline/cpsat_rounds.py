"""The improvement phases of the offline CP-SAT oracle on large instances, after the class model: hybrid
rounds (relaxed jobs made exact where the decoded schedule misses their class duration), the second local
search, large-neighbourhood search, the node-exact model, rate rounds and the restricted exact model. Each is
``phase(state, share)`` on a :class:`~formulations.offline.cpsat_phases.CpsatState`, in the order
:mod:`formulations.offline.cpsat` gives; the state, the parameters and the phases before these are in
:mod:`formulations.offline.cpsat_phases`.
"""

from __future__ import annotations

import random
import time

from jctlab.model import Instance
from jctlab.speed import duration

from ..results import GAP_TOL, Incumbent
from ..schedules import job_weights
from . import rates
from .classes import hybrid_node_options
from .cpsat_model import CpsatRun, ModelHint, ModelSolution, solve_option_model
from .cpsat_phases import CpsatState, exact_decode, exact_params, restrict_to_incumbent
from .decode import DecodeParams, decode, pin_gpus
from .hints import hint_assignment, model_hint
from .options import Option, binding_resources, capacities, single_node
from .pipeline import local_search


def _cheaters(s: CpsatState, opts: list[list[Option]], sol: ModelSolution) -> set[int]:
    """Jobs on a relaxed class option in ``sol`` whose fastest concrete realisation in the decoded
    schedule is slower than the class duration (heuristic choice of jobs to make exact)."""
    inst = s.inst
    sched = s.decode(opts, sol, pinned_until=False).schedule
    out = set()
    if sched is None:
        return {j for j, k in enumerate(sol.choice) if opts[j][k].alloc is None}
    for seg in sched.segments:
        j = inst.index[seg.job]
        o = opts[j][sol.choice[j]]
        if o.alloc is None and duration(inst.jobs[j], seg.alloc, inst.cluster) > o.dur * (1 + 1e-9) + 1e-9:
            out.add(j)
    return out


def hybrid_rounds(s: CpsatState, share: float | None) -> None:
    """Lazy variability: jobs whose relaxed class duration the decoded solution does not reach become exact on
    the node the model put them on (hybrid models), re-solved while each is proven: at most ``hybrid_rounds``,
    each ``share`` of what is left, none started after ``hybrid_stop`` of the limit, ≤ ``hybrid_add`` new
    options a round; each solution decoded, exactly per node, and searched from."""
    inst, p, mixed, classes = s.inst, s.cpsat, s.mixed, s.classes
    cnt = [sum(o.alloc is not None for o in ol) for ol in mixed]
    exact = {j for j in range(len(cnt)) if cnt[j] <= len(inst.cluster.nodes) + 1}
    exact_nodes: set = set()
    cnt_v: dict = {}
    for j, ol in enumerate(mixed):
        for o in ol:
            if o.alloc is not None:
                cnt_v[(j, single_node(o.alloc))] = cnt_v.get((j, single_node(o.alloc)), 0) + 1
    cur_opts, cur_sol = classes, s.model
    for rnd in range(p.hybrid_rounds):
        left = s.remaining()
        if not s.gap_open() or (left is not None and left < 0.5):
            break
        cheat = _cheaters(s, cur_opts, cur_sol) - exact
        # per node: the cheater becomes exact on the node the model put it on only
        pairs = set()
        for j in cheat:
            o = cur_opts[j][cur_sol.choice[j]]
            if o.cls is not None and o.cls[0] == "node" and (j, o.cls[1]) not in exact_nodes:
                pairs.add((j, o.cls[1]))
        if not pairs:
            break
        added = 0
        for j, v in sorted(pairs, key=lambda q: (cnt_v.get(q, 0), q)):
            if added and added + cnt_v.get((j, v), 0) > p.hybrid_add:
                break
            exact_nodes.add((j, v))
            added += cnt_v.get((j, v), 0)
        hyb = hybrid_node_options(mixed, classes, exact, exact_nodes)
        n_exact = f"{len(exact)}+{len(exact_nodes)} node"
        t_h = None if s.time_limit is None else min(s.remaining() * share,
                                                    p.hybrid_stop * s.time_limit - s.budget.elapsed())
        if t_h is not None and t_h < 0.5:
            break
        sol = solve_option_model(inst, hyb, s.res_all, s.run(t_h, s.loaded), model_hint(inst, hyb, s.incumbent),
                                 twins=s.offline.twins)
        s.model = sol
        s.raise_bound(sol.bound(inst))
        if sol.found:
            s.offer(s.decode(hyb, sol))
            exact_decode(s, hyb, sol)
            if s.use_ls:
                order = sorted(range(len(cnt)), key=lambda j: (sol.start[j], j))
                al = {j: hyb[j][k].alloc for j, k in enumerate(sol.choice) if hyb[j][k].alloc is not None}
                local_search(s, s.search, s.offline.ls_share / 2, s.seed + 2, extra=[(order, al), order])
        s.params["model"] = "relaxed+hybrid"
        s.record(f"hybrid{rnd}({n_exact} exact)", sol)
        if not sol.proven or not sol.found:
            break
        cur_opts, cur_sol = hyb, sol


def second_local_search(s: CpsatState, share: float | None) -> None:
    """Local search again, from the last relaxation's start order too. Without the node-exact model (too many
    options, or no class solution) it takes the rest of the time: CP-SAT's presolve of the restricted exact
    model alone takes seconds at 64 GPUs / 50 jobs with PS, for no better incumbent."""
    share = (share if not s.ls_rest or s.time_limit is None else s.last_model_time() / s.time_limit)
    extra = [sorted(range(len(s.inst.jobs)), key=lambda j: (s.model.start[j], j))] if s.model.start else None
    local_search(s, s.search, share, s.seed + 1, extra=extra)
    s.record("local-search")


def lns(inst: Instance, opts: list[list[Option]], best: Incumbent, res: set, until: float | None, threads: int,
        seed: int, method: str, window: int = 8, rounds: int = 20,
        decode_params: DecodeParams = DecodeParams()) -> Incumbent:
    """Large-neighbourhood search in the exact option model ``opts`` (incumbents only, never a bound).

    Jobs outside a window of ``window`` consecutive jobs (incumbent start order) keep the incumbent's
    option (one option each), window jobs get all theirs; CP-SAT re-solves that restricted model
    (hinted with the incumbent, ≤ 3 s) and its solution is decoded, re-timed and replayed. Returns the
    best incumbent (``best`` or better)."""
    rnd = random.Random(seed)
    n = len(inst.jobs)
    for _ in range(rounds):
        if until is not None and time.perf_counter() > until - 0.2:
            break
        hint = hint_assignment(inst, opts, best.schedule)
        if hint is None or len(hint) < n or any(k is None for k, _ in hint.values()):
            break
        order = sorted(range(n), key=lambda j: (hint[j][1], j))
        w = min(window, n)
        i0 = rnd.randrange(n - w + 1)
        free = set(order[i0:i0 + w])
        sub = [opts[j] if j in free else [opts[j][hint[j][0]]] for j in range(n)]
        sub_hint = {j: ((k if j in free else 0), st) for j, (k, st) in hint.items()}
        tl = 3.0 if until is None else max(0.05, min(3.0, until - time.perf_counter()))
        sol = solve_option_model(inst, sub, res, CpsatRun(tl, threads, seed), ModelHint(sub_hint))
        if sol.found:
            best = best.better(decode(inst, sub, sol, method, None, decode_params))
    return best


def large_neighbourhood_search(s: CpsatState, share: float | None) -> None:
    """LNS (:func:`lns`) in the node-exact options, ``share`` of what is left; not under latest completions:
    there the node-exact model's decode and the rate rounds find the better schedules."""
    s.incumbent = lns(s.inst, s.mixed, s.incumbent, s.res_all,
                      None if s.time_limit is None else time.perf_counter() + s.remaining() * share,
                      s.threads, s.seed, s.solver, decode_params=s.offline.decode)
    s.record("lns")


def decode_incumbent(s: CpsatState, share: float | None) -> None:
    if s.mixed is not None and s.incumbent.schedule is not None and s.gap_open():
        exact_decode(s)
        s.record("node-decode")


# ----------------------------------------------------------------------------- large instances: the last models


def node_exact_model(s: CpsatState, share: float | None) -> None:
    """Every single-node allocation exactly, spread ones relaxed, for the rest of the time: still a valid
    bound, and exact (variability included) for schedules without spread jobs. Under latest completions
    (tightened first with the incumbent of the moment) its bound is capped at that incumbent's objective."""
    restrict_to_incumbent(s)
    mixed = s.mixed if s.cpsat.node_complete and s.gap_open() and not s.ls_rest else None
    left = s.remaining()
    if mixed is None or not (left is None or left > 0.05):
        return
    sol = solve_option_model(s.inst, mixed, s.res_all,
                             s.run(s.last_model_time(), exact_params(s.threads, True, s.latest is not None)),
                             model_hint(s.inst, mixed, s.incumbent), twins=s.offline.twins, latest_end=s.latest)
    s.raise_bound(min(s.cap, sol.bound(s.inst)))
    if sol.found:
        s.offer(s.decode(mixed, sol))
    s.params["model"] = "relaxed+node-exact"
    s.record("node-exact", sol)
    s.model = sol
    s.node_exact_done = True
    s.node_exact_options = mixed


def rate_rounds(s: CpsatState, share: float | None) -> None:
    """Rate bands (:mod:`formulations.offline.rates`) for a proven node-exact model whose bound leaves a gap:
    the spread patterns split at the rate sums that cut its solution off (the incumbent's, the relaxed jobs'
    GPUs around the concrete sets, the middle of each chosen band; and dense bands, ``fine_share`` of the
    zero-gap tolerance apart, from the incumbent's rate sum to the top of its pattern), solved again with the
    incumbent hinted, while each model is proven, the gap open and time left. Each model gets the latest
    completions of the best incumbent of the moment (a better one keeps fewer options and completions) and its
    bound is capped at that incumbent's objective. Each model is a relaxation, so every bound holds."""
    inst, p = s.inst, s.cpsat
    ths: dict = {}
    fine: dict = {}          # (job, pattern) → dense thresholds around the incumbents' spread allocations
    w = job_weights(inst)
    cur = s.node_exact_options
    sol = s.model
    stats = s.params["rate_bands"] = {"rounds": 0, "proven": 0}
    stale = 0         # rounds in a row that raised neither bound nor incumbent
    while (sol.proven and s.gap_open() and stats["rounds"] < p.rate_rounds
           and stale < p.rate_patience and (s.remaining() is None or s.remaining() > p.rate_min_s)):
        pinned = pin_gpus(inst, cur, sol, keep_concrete=True, wall=s.remaining(), params=s.offline.decode)
        new = rates.next_thresholds(inst, cur, sol, [s.incumbent.schedule], pinned)
        merged = {j: ths.get(j, set()) | new.get(j, set()) for j in set(ths) | set(new)}
        if merged == ths:
            break
        ths = merged
        restrict_to_incumbent(s)     # the last model's decode may have found a better incumbent
        base, latest, cap = s.mixed, s.latest, s.cap
        step = p.fine_share * GAP_TOL * s.incumbent.objective * sum(w) / max(w)
        for key, ts in rates.fine_thresholds(inst, base, s.incumbent.schedule, step).items():
            fine[key] = fine.get(key, set()) | ts
        cur = rates.banded(inst, base, ths, fine)
        sol = solve_option_model(inst, cur, s.res_all,
                                 s.run(s.last_model_time(), exact_params(s.threads, True, latest is not None)),
                                 model_hint(inst, cur, s.incumbent, gpus=True), twins=s.offline.twins,
                                 latest_end=latest)
        before = (s.bound, s.incumbent.objective)
        s.raise_bound(min(cap, sol.bound(inst)))
        if sol.found:
            s.offer(s.decode(cur, sol))
        gain = s.bound - before[0] + before[1] - s.incumbent.objective
        stale = 0 if gain > GAP_TOL * s.bound else stale + 1
        stats["rounds"] += 1
        stats["proven"] += sol.proven
        stats["thresholds"] = sum(map(len, ths.values()))
        s.record("rate-bands", sol)


def restricted_exact_model(s: CpsatState, share: float | None) -> None:
    """Where neither the node-exact model nor local search applies (interference): the exact model over the
    restricted concrete options for the rest of the time, for a better incumbent."""
    res = {r for r in capacities(s.inst) if r[0] in ("g", "n", "all")} | binding_resources(s.inst, s.concrete)
    sol2 = solve_option_model(s.inst, s.concrete, res, s.run(s.last_model_time()),
                              model_hint(s.inst, s.concrete, s.incumbent))
    if sol2.found:
        s.offer(s.decode(s.concrete, sol2))
    s.record("restricted-exact", sol2)
