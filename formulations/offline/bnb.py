"""Exact branch and bound for small offline instances (method ``bnb``).

Small clusters with queues (4 GPUs, 10 jobs arriving every 5 minutes) are where CP-SAT and the MILPs
struggle most: their relaxations see the GPUs but not the waiting, and 30 s do not prove a 10-job queue. This search enumerates schedules directly and proves them in
seconds. It applies to offline instances whose jobs all have few GPU subsets (every allocation is
enumerated: :func:`formulations.offline.concrete.concrete_options` is complete) and a ``mean_jct`` or
``weighted_jct`` objective with positive weights; :func:`not_applicable` says why not otherwise.

The search
----------
Depth-first over *start-ordered list schedules*: a node is a partial schedule whose jobs started at or
before ``t`` (the last start); a child places one more job j with one of its allocations (options) a at
the earliest time s ≥ max(arrival_j, t) at which a's GPUs are free and its node CPUs/memory fit. Since
every placed job started at or before t, from t on a GPU is just "busy until" and node usage only falls,
so s is exact and the new job never conflicts with a later one.

*Exactness.* Take an optimal schedule S* (every option of it kept: dropping a dominated option,
:func:`formulations.offline.options.undominated`, keeps an optimum) and list its jobs by start time. Place them in
that order: by induction each job gets a start s'_i ≤ S*_i (at every τ ≥ S*_i a placed job k active in
the partial schedule started at s'_k ≤ S*_k ≤ S*_i ≤ τ and ends no later than in S*, so it is active at τ
in S* too: what i needs from S*_i on is free). So the search reaches a schedule with every completion no
later than S*'s: an optimal one.

*The earliest-completion rule* (Giffler and Thompson's active schedules). Let c* be the earliest
completion over every unplaced (job, option) child. A child starting at s ≥ c* is never needed: in any
schedule below it the job k that completes at c* could instead run there (it ends by c* ≤ s, before
every later start, on resources free at its start), finishing strictly earlier; with positive weights
such a schedule is not optimal. So an optimal schedule, built as above, never passes such a child.

*Bounds.* A child's objective so far plus, over the jobs left, the larger of two bounds. First,
Σ_k max(A_k, B_k) (unit weights) or Σ_j w_j B_j (weighted): B are the jobs' earliest completions over
their options given the GPUs' free times and t (sorted for unit weights), A_k the earliest time by which
the GPUs, each available from its free time, hold the k smallest GPU areas (min over options of GPUs ×
duration): the k-th completion can be no earlier than either. Second, the *mean-busy-time* bound
Σ_j w_j (M_j + p_j/2), p_j the job's least duration, a_j its least area, M_j its mean busy time in
preemptive WSPT (highest w_j/a_j first) of the areas a_j on one machine whose speed at time τ is the number
of GPUs free by τ, from max(arrival_j, t) on. Proof: in any completion of the partial schedule, job j runs
on option o over [S_j, C_j] (S_j ≥ t); spreading a_j of area evenly over that interval (rate a_j/p_o, at
most the GPUs it holds) gives a fluid schedule within the free GPUs whose job j has mean busy time
S_j + p_o/2 = C_j − p_o/2 ≤ C_j − p_j/2; preemptive WSPT minimises Σ_j w_j M_j over all fluid schedules
with release dates and any capacity profile (exchanging area between a higher- and a lower-ratio job that
are both released never raises it; Goemans 1997), so Σ_j w_j C_j ≥ Σ_j w_j (M_j + p_j/2). On four equal
one-GPU jobs on two GPUs it is the optimum (6p), where the first gives 5.5p. It is computed only where the
first does not prune; on 4-GPU queues it cuts the nodes by 5-45 % (unit weights) and 40-66 % (weights 1-4)
and the time by 15-21 % and 42 %. *Weighted GPUs:* the argument holds with any positive weight σ_g per GPU, a
job's area then min over its options of duration × Σ_{g in o} σ_g and the GPUs free by τ supplying Σ σ_g per
second (spreading the weighted area evenly stays within the free GPUs' weight). Equal weights count a slow GPU
like a fast one; weights at each GPU's speed (:func:`_speeds`) count it for what it does and make each job's
area nearly the same on every GPU. The bound is the larger of the two weightings (on 4-GPU queues of V100s and
P100s 6-42 % fewer nodes; the first bound weighted too pruned a few % more but cost more time than it saved).
A partial schedule seen before (same jobs placed, same t, same free times and
node usage) with no larger objective prunes too.

*Node prices* (:mod:`.node_prices`, ``BnbParams``). Last, where the bounds above do not prune: the time-indexed
relaxation over every allocation with its capacity rows priced by the root's Lagrange multipliers
(:mod:`.lagrangian_bound`, a coarse grid, 300 subgradient steps steered by the hint's objective), the placed jobs
at their true completions and the jobs left from their child starts. The bounds above see capacity but not that
a multi-GPU job holds its GPUs for its whole run, and on 12-job queues on 6 GPUs of three types they are 30-40 %
below the optimum at the root; the priced relaxation is a few per cent below and tightens as jobs are placed.
There it cuts the nodes 20-50-fold: the search proves those queues in 3-35 s, most of which it did not prove
in 60 s without.
The root's bound is the larger of the two, so an unfinished search reports at least the multipliers' bound.

Interference is ignored in the search (it only slows jobs, SPEC §2: the search's optimum is a valid
bound); the best schedule is realised on the event engine and reported with its replayed objective, so
with interference the status is ``feasible`` unless it happens to reach the bound.

With a time limit an unfinished search returns its best schedule, status ``feasible``, and the bound of its
open nodes (:meth:`Search.open_bound`: the least over the children not yet tried of each node on its stack,
at least the root's; the usual dual bound of a branch and bound stopped early). Depth first, the stack's
lowest nodes have the weakest bounds, so on a tree far from finished it stays near the root's. The search is
deterministic (no random choices; ``seed`` is accepted and unused), but with a time limit where it stops
depends on the machine's speed.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from jctlab.model import Instance, Schedule
from jctlab.result import Result

from ..budget import Budget
from ..results import result_of_schedule
from ..schedules import objective_weights, replay_objective, timed_schedule
from . import lagrangian_bound
from .concrete import concrete_options, job_infeasible
from .greedy import greedy
from .lagrangian_bound import LagrangianParams
from .node_prices import NodePrices
from .options import EPS, Option, binding_resources, capacities
from .retime import realize
from .search_nodes import Children, Front, Left, Rows

SOLVER = "bnb"
VERSION = "1"
MAX_JOBS = 24          # beyond this the search is hopeless: not applicable
CHECK_EVERY = 256      # nodes between deadline checks
#: rows of the jobs left the search keeps, over every set of jobs placed it has seen (about 60 bytes each with
#: their fields; a set's rows are rebuilt in tens of microseconds)
LEFT_CACHE_ROWS = 1 << 19


@dataclass(frozen=True)
class BnbParams:
    """The node prices (:mod:`.node_prices`): the multipliers' grid and steps, coarser and fewer than the bound
    phase's (:class:`.lagrangian_bound.LagrangianParams`) since the search closes what they leave (on 12-job
    queues on 6 GPUs 0.2-0.4 s, against 2.5-4 s, for as many nodes within 10 %), and at most ``prices_share``
    of the limit for them; ``prices`` None: the search's own bounds alone. Without a hint the search starts from
    the greedy's schedule (a 12-job queue whose first branches are poor, training seed 4 of the small queues'
    12-job family: unproven in 60 s without it, 7 s with it)."""

    prices: LagrangianParams | None = LagrangianParams(fine_slots=500, max_slots=1000, steps=300)
    prices_share: float = 0.2
    greedy_share: float = 0.05    # without a hint: the greedy's dispatch rules (:mod:`.greedy`), this share at most

    def prices_time(self, time_limit: float | None) -> float | None:
        """The multipliers' time within a search's ``time_limit``."""
        return None if time_limit is None else self.prices_share * time_limit


def arrival_offset(inst: Instance) -> float:
    """Σ_j w_j a_j (normalised weights): a search value Σ_j w_j C_j minus this is the objective."""
    return sum(w * job.arrival for w, job in zip(objective_weights(inst), inst.jobs))


@dataclass(frozen=True)
class Choice:
    """One option of a job, as the search reads it."""

    dur: float
    gpus: tuple[int, ...]          # GPU indices
    use: tuple[float, ...]         # demand on each binding CPU/memory resource
    option: Option
    holds: bool = False            # any(use), kept: the search's innermost loop reads it
    index: int = 0                 # its place in the flat enumeration (jobs in order), for the node prices


def objective_not_searchable(inst: Instance) -> str | None:
    """Why the search's objective does not fit ``inst``'s (None: a sum with positive weights)."""
    if inst.objective not in ("mean_jct", "weighted_jct"):
        return "bnb needs a mean_jct or weighted_jct objective"
    if any(w <= 0 for w in objective_weights(inst)):
        return "bnb needs positive job weights"
    return None


def not_applicable(inst: Instance) -> str | None:
    """Why the search does not apply to ``inst`` (None: it does)."""
    if inst.problem != "offline":
        return "bnb covers the offline class only"
    if (why := objective_not_searchable(inst)) is not None:
        return why
    if len(inst.jobs) > MAX_JOBS:
        return f"bnb takes at most {MAX_JOBS} jobs"
    if not concrete_options(inst)[1]:
        return "bnb needs every allocation enumerated (a job has too many GPU subsets)"
    return None


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, params: BnbParams = BnbParams()) -> Result:
    """Exact search (see the module docstring). ``hint``: a valid schedule whose objective prunes from
    the start (on instances without interference, where its objective is a search value)."""
    t0 = time.perf_counter()
    run = Run.start(inst, hint, t0, time_limit, seed, params)
    if isinstance(run, Result):
        return run
    run.resume(Budget(time_limit, t0))
    return run.result()


class Run:
    """One search that can be resumed (the ``auto`` portfolio probes it, then continues it or not)."""

    def __init__(self, inst: Instance, search: "Search", offset: float, hint: Schedule | None,
                 hint_obj: float | None, t0: float, params: dict) -> None:
        self.inst, self.search, self.offset = inst, search, offset
        self.hint, self.hint_obj, self.t0, self.params = hint, hint_obj, t0, params
        self.done = False

    @classmethod
    def start(cls, inst: Instance, hint: Schedule | None, t0: float, time_limit: float | None = None,
              seed: int = 0, params: BnbParams = BnbParams()) -> "Run | Result":
        """A search ready to run, or a Result (error: not applicable; infeasible: a job fits nowhere)."""
        info: dict[str, Any] = {"time_limit": time_limit, "seed": seed,
                                "interference": "ignored in search, replayed"}
        why = not_applicable(inst)
        if why is not None:
            return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION, info, error=why)
        concrete, _ = concrete_options(inst)
        bad = job_infeasible(inst, concrete, True)
        if bad is not None:
            return result_of_schedule(inst, SOLVER, None, None, t0, SOLVER, VERSION,
                          {**info, "reason": f"job {inst.jobs[bad].name} fits no allocation"}, infeasible=True)
        run = cls(inst, Search(inst, concrete), arrival_offset(inst), None, None, t0, info)
        if hint is None:   # an incumbent from the start: the prices prune only below one
            hint = greedy(inst, SOLVER, None if time_limit is None else t0 + params.greedy_share * time_limit).schedule
        run.tighten(hint)
        if params.prices is not None:   # steered by the hint's objective
            run.search.prices = NodePrices.at_root(inst, lagrangian_bound.per_gpu_options(inst, concrete), run.hint_obj,
                                                   params.prices_time(time_limit), params.prices)
        return run

    def tighten(self, sched: Schedule | None) -> None:
        """Prune below a valid schedule's objective from now on (instances without interference only: there
        the replayed objective is a search value); it is returned if the search finds nothing better."""
        if sched is None or self.inst.cluster.has_interference:
            return
        obj = replay_objective(self.inst, sched.with_claim(None) if sched.claimed else sched)
        if obj is not None and (self.hint_obj is None or obj < self.hint_obj):
            self.hint, self.hint_obj = sched, obj
            self.search.value = min(self.search.value, (obj + self.offset) * (1 + 1e-12))

    def resume(self, dl: Budget) -> bool:
        """Search until done (True) or ``dl`` expires (False)."""
        self.done = self.search.resume(dl)
        return self.done

    def result(self) -> Result:
        s = self.search
        params = {**self.params, "nodes": s.nodes}
        if not self.done:
            params["progress"] = s.progress()
        if s.best is None:   # nothing below the hint's objective (or no time): the hint
            proven = self.done and self.hint_obj is not None
            bound = self.hint_obj if proven else s.open_bound() - self.offset
            return result_of_schedule(self.inst, SOLVER, self.hint if self.hint_obj is not None else None, bound, self.t0,
                          SOLVER, VERSION, params)
        starts = [st for st, _ in s.best]
        allocs = [o.alloc for _, o in s.best]
        if self.inst.cluster.has_interference:
            order = sorted(range(len(starts)), key=lambda j: (starts[j], j))
            starts = realize(self.inst, order, allocs, planned=starts) or starts
        bound = s.open_bound() - self.offset
        return result_of_schedule(self.inst, SOLVER, timed_schedule(self.inst, starts, allocs, SOLVER), bound, self.t0, SOLVER,
                      VERSION, params)


@dataclass
class Frame:
    """A node on the search stack: its last start, objective so far, placed jobs, children (earliest
    completion, start, job, choice) in the order tried, the next one to try, and how to undo the one
    being searched."""

    t: float
    val: float
    mask: int
    cand: list
    next: int = 0
    undo: tuple | None = None


class Search:
    """The depth-first search over start-ordered list schedules (module docstring)."""

    def __init__(self, inst: Instance, concrete: list[list[Option]], prices: NodePrices | None = None) -> None:
        cap = capacities(inst)
        bind = sorted(binding_resources(inst, concrete))
        index = {g.id: i for i, g in enumerate(inst.cluster.gpus)}
        first = np.cumsum([0] + [len(ol) for ol in concrete]).tolist()
        choices = [sorted((Choice(o.dur, tuple(index[g] for g in o.alloc.gpus), use, o, any(use), first[j] + k)
                           for k, o in enumerate(ol)
                           for use in [tuple(float(o.demand.get(b, 0.0)) for b in bind)]),
                          key=lambda c: c.dur) for j, ol in enumerate(concrete)]
        # the area bounds' GPU weights: every GPU alike, and each GPU at its speed (module docstring)
        sigma = [[1.0] * len(index), _speeds(choices, len(index))]
        areas = [[min(c.dur * sum(sig[g] for g in c.gpus) for c in cl) for cl in choices] for sig in sigma]
        self._setup(inst, choices, len(index), bind, [cap[b] + EPS * max(1.0, cap[b]) for b in bind],  # as fits_alone
                    sigma, areas, prices, [[c.gpus for c in cl] for cl in choices])

    def _setup(self, inst: Instance, choices: list[list[Any]], n_gpus: int, bind: list, caps: list[float],
               sigma: list[list[float]], areas: list[list[float]], prices: NodePrices | None,
               places: list[list[tuple[int, ...]]]) -> None:
        """The search's state: per job its choices (by duration), the binding CPU/memory resources and their
        capacities, the busy bound's GPU weights and each job's least weighted area under each; ``places``: per
        choice, the places in ``free`` whose latest is when its GPUs are free (:class:`.search_nodes.Rows`)."""
        self.bind, self.cap, self.choices = bind, caps, choices
        self.arrival = [job.arrival for job in inst.jobs]
        self.w = objective_weights(inst)
        self.unit = all(x == self.w[0] for x in self.w)
        self.sigma, self.sigma_area = sigma, areas
        self.area = self.sigma_area[0]      # GPUs × duration, the least over a job's options
        self.pmin = [cl[0].dur for cl in self.choices]
        self.free = [0.0] * n_gpus
        self.running: list[tuple[float, tuple[float, ...]]] = []   # (end, use) of jobs holding CPUs/memory
        self.best: list[tuple[float, Option]] | None = None
        self.value = math.inf     # the incumbent's search value Σ w_j C_j (or an upper bound)
        self.root_bound = -math.inf
        self.nodes = 0
        self._seen: dict[tuple, Front] = {}
        self._chosen: list[Any] = [None] * len(inst.jobs)
        self.left = set(range(len(inst.jobs)))
        self._stack: list[Frame] | None = None
        self.prices = prices
        self._occupied: list[tuple[int, int, int]] = []   # what the placed jobs occupy, for the prices
        self._rows = Rows.of(choices, places, self.arrival, n_gpus)
        self._lefts: dict[int, Left] = {}   # the rows of the jobs left, by the jobs placed
        self._left_rows = 0                 # how many rows they hold

    def resume(self, dl: Budget) -> bool:
        """Search (from where it stopped) until done (True) or ``dl`` expires (False)."""
        if self._stack is None:   # the root
            self._stack = []
            self.root_bound = self._child_bound(0.0, 0.0, math.inf, 0)
            self._push(0.0, 0.0, 0)
        stack = self._stack
        check = self.nodes     # the clock is read every CHECK_EVERY nodes (a frame may push many before the next check)
        while stack:
            if self.nodes >= check:
                if dl.expired():
                    return False
                check = self.nodes + CHECK_EVERY
            fr = stack[-1]
            if fr.undo is not None:
                self._undo(fr.undo)
                fr.undo = None
            while fr.next < len(fr.cand):
                c, s, j, ch = fr.cand[fr.next]
                fr.next += 1
                nv = fr.val + self.w[j] * c
                if nv >= self.value:
                    continue
                fr.undo = self._apply(j, s, c, ch)
                if self._push(s, nv, fr.mask | (1 << j)):
                    break
                self._undo(fr.undo)
                fr.undo = None
            else:
                stack.pop()
        return True

    def open_bound(self) -> float:
        """A bound on the search value of every schedule, valid where the search stopped unfinished: the least,
        over the children not yet tried of each node on the stack, of the child's value so far plus its bound
        (what :meth:`_push` would prune on), and the incumbent's value. Every schedule is below a child tried
        (searched to its end: none below the incumbent is left there), below a child not yet tried, or below the
        child being searched, which is the next node on the stack; the root's bound without a stack, the
        incumbent's value for a finished search. The search state is the same after the call (it can resume)."""
        stack = self._stack
        if stack is None:
            return self.root_bound
        if not stack:
            return self.value
        least = self.value
        redo = []
        for fr in reversed(stack):       # undo the placements top down: each node's own state in turn
            if fr.undo is not None:
                self._undo(fr.undo)
                redo.append(fr)
            for c, s, j, ch in fr.cand[fr.next:]:
                nv = fr.val + self.w[j] * c
                if nv >= least:
                    continue
                undo = self._apply(j, s, c, ch)
                child = (nv + self._child_bound(s, nv, least, fr.mask | (1 << j))) if self.left else nv    # a leaf
                least = min(least, child)
                self._undo(undo)
        for fr in reversed(redo):        # and back, bottom up
            c, s, j, ch = fr.cand[fr.next - 1]
            fr.undo = self._apply(j, s, c, ch)
        return min(self.value, max(least, self.root_bound))

    def _child_bound(self, t: float, val: float, enough: float, placed: int) -> float:
        """A bound on the rest of a node (jobs left) whose value so far is ``val``: the larger of the node prices'
        and :meth:`_bound`, the second not computed where the first reaches ``enough`` − ``val`` (what prunes, or
        does not lower :meth:`open_bound`'s least)."""
        return self._rest(t, val, enough, self._evaluate(t, placed))

    def _rest(self, t: float, val: float, enough: float, kids: Children) -> float:
        """:meth:`_child_bound` of the node's ``kids``."""
        rest = -math.inf
        if (p := self.prices) is not None:
            rest = p.bound(t, val, self._occupied, kids.left.index, kids.completion, kids.start,
                           kids.left.groups) - val
            if rest >= enough - val:
                return rest
        return max(rest, self._bound(kids.first_of(), t, enough - val))

    def progress(self) -> float:
        """Share of the search tree done (Knuth's estimate: each node's children weigh alike)."""
        done, weight = 0.0, 1.0
        for fr in self._stack or ():
            weight /= max(1, len(fr.cand))
            done += weight * (fr.next - (fr.undo is not None))
        return min(1.0, done)

    def _apply(self, j: int, s: float, c: float, ch: Choice) -> tuple:
        old = [self.free[g] for g in ch.gpus]
        for g in ch.gpus:
            self.free[g] = c
        holds = ch.holds
        if holds:
            self.running.append((c, ch.use))
        self._mark(j, s, ch)
        return j, ch, old, holds

    def _undo(self, undo: tuple) -> None:
        j, ch, old, holds = undo
        self._unmark(j)
        if holds:
            self.running.pop()
        for g, x in zip(ch.gpus, old):
            self.free[g] = x

    def _mark(self, j: int, s: float, ch: Any) -> None:
        """What a placement changes besides the GPUs: the jobs left, the choices, what the prices see occupied."""
        self.left.remove(j)
        self._chosen[j] = (s, ch.option)
        if self.prices is not None:
            self._occupied.append(self.prices.place(ch.index, s))

    def _unmark(self, j: int) -> None:
        self.left.add(j)
        if self.prices is not None:
            self._occupied.pop()   # placements are undone last first

    def _push(self, t: float, val: float, mask: int) -> bool:
        """Enter a node: a leaf updates the incumbent; a node not pruned goes on the stack (True)."""
        self.nodes += 1
        if not self.left:
            if val < self.value:
                self.value = val
                self.best = list(self._chosen)
            return False
        key = (mask, tuple(r for r in self.running if r[0] > t))
        front = self._seen.get(key)
        if front is None:
            front = self._seen[key] = Front(len(self.free) + 2)
        if not front.add([t, val] + [max(x, t) for x in self.free]):
            return False
        cand = self._expand(t, val, self.value * (1 - 1e-12), mask)     # a bound at or above this prunes
        if cand is None:
            return False
        self._stack.append(Frame(t, val, mask, cand))
        return True

    def _expand(self, t: float, val: float, enough: float, placed: int) -> list | None:
        """A node's children (completion, start, job, choice) in the order tried, those the earliest-completion rule
        keeps; None where the node prices or :meth:`_bound` reach ``enough`` (the node is pruned)."""
        kids = self._evaluate(t, placed)
        if self._rest(t, val, enough, kids) >= enough - val:
            return None
        keep = np.flatnonzero(kids.start < kids.first.min())
        left = kids.left
        order = keep[np.lexsort((left.dur[keep], left.job[keep], kids.completion[keep]))]
        choice = self._rows.choice
        return [(c, s, j, choice[r]) for c, s, j, r in zip(kids.completion[order].tolist(), kids.start[order].tolist(),
                                                           left.job[order].tolist(), left.rows[order].tolist())]

    def _fits_from(self, s: float, c: Choice) -> float:
        """The earliest time from ``s`` (its GPUs free) at which ``c``'s CPUs/memory fit beside the running jobs."""
        while True:
            for i, cap in enumerate(self.cap):
                if c.use[i] and c.use[i] + sum(u[i] for e, u in self.running if e > s) > cap:
                    break
            else:
                return s
            s = min(e for e, _ in self.running if e > s)

    def _evaluate(self, t: float, placed: int) -> Children:
        """Every child of the node at ``t`` whose placed jobs are the bit mask ``placed`` (a frame's ``mask``, the key
        of the jobs-left rows kept) as arrays, one per choice of each job left: its start is the earliest time
        from its job's arrival and ``t`` at which its GPUs are free (the latest free time of its places) and, for
        a choice that holds CPUs/memory beside running jobs, they fit. Arrays, not a loop over the children: on
        16-job queues a node has a hundred or more, and the class search runs 1.5-2 times faster so
        (docs/history/oracle-offline-queues.md, "Nodes as arrays")."""
        left = self._lefts.get(placed)
        if left is None:
            left = self._rows.left(sorted(self.left))
            if self._left_rows + len(left.rows) > LEFT_CACHE_ROWS:
                self._lefts.clear()
                self._left_rows = 0
            self._lefts[placed] = left
            self._left_rows += len(left.rows)
        free = np.array(self.free + [-math.inf])
        start = free[left.places].max(axis=1)
        np.maximum(start, left.arrival, out=start)
        np.maximum(start, t, out=start)
        if self.running:
            for i in left.holding:
                start[i] = self._fits_from(float(start[i]), self._rows.choice[left.rows[i]])
        completion = start + left.dur
        return Children(left, start, completion, np.minimum.reduceat(completion, left.groups))

    def _bound(self, first: dict[int, float], t: float, enough: float = math.inf) -> float:
        """Σ over the jobs left of a lower bound on w_j C_j (module docstring), given each one's earliest completion
        ``first``; the mean-busy-time bound only where the first is below ``enough`` (what would prune)."""
        f = sorted(max(x, t) for x in self.free)
        if not self.unit:
            cheap = sum(self.w[j] * first[j] for j in self.left)
            return cheap if cheap >= enough else max(cheap, self._busy_bound(t))
        b = sorted(first.values())
        n = len(f)
        total, need, k, held = 0.0, 0.0, 0, 0.0   # held: GPU time available by f[k]
        for i, a in enumerate(sorted(self.area[j] for j in self.left)):
            need += a
            while True:   # on [f[k], f[k+1]) the GPUs available hold held + (k+1)(T − f[k])
                at = f[k] + (need - held) / (k + 1)
                if k + 1 >= n or at <= f[k + 1]:
                    break
                held += (k + 1) * (f[k + 1] - f[k])
                k += 1
            total += max(at, b[i])
        cheap = self.w[0] * total
        return cheap if cheap >= enough else max(cheap, self._busy_bound(t))

    def _busy_bound(self, t: float) -> float:
        """The mean-busy-time bound (module docstring), the larger over the GPU weights ``sigma``."""
        return max(self._busy_bound_at(t, k) for k in range(len(self.sigma)))

    def _busy_bound_at(self, t: float, which: int) -> float:
        """Σ over the jobs left of w_j (M_j + p_j/2), M from preemptive WSPT of the jobs' least weighted areas
        a_j = min over options of duration × Σ σ_g on a machine whose speed at time τ is Σ σ_g over the GPUs
        free by τ (each from max(its free time, t)), σ = ``sigma[which]``; times relative to t for precision;
        reduced by 1e-9 relative for rounding."""
        sig, area = self.sigma[which], self.sigma_area[which]
        jobs = sorted(self.left, key=lambda j: (max(self.arrival[j], t), j))
        rel = [max(self.arrival[j], t) - t for j in jobs]
        prof = sorted((max(x, t) - t, sig[g]) for g, x in enumerate(self.free))
        n, g = len(jobs), len(prof)
        rem = {j: area[j] for j in jobs}
        moment = dict.fromkeys(jobs, 0.0)
        ready: list[tuple[float, int]] = []            # heap of (−w/a, job)
        now, k, i, speed = 0.0, 0, 0, 0.0                # k: GPUs free by now, of total weight speed; i: next release
        while rem:
            while i < n and rel[i] <= now:
                heapq.heappush(ready, (-self.w[jobs[i]] / area[jobs[i]], jobs[i]))
                i += 1
            while k < g and prof[k][0] <= now:
                speed += prof[k][1]
                k += 1
            nxt = min(rel[i] if i < n else math.inf, prof[k][0] if k < g else math.inf)
            if not ready or speed <= 0:
                now = nxt
                continue
            j = ready[0][1]
            end = now + rem[j] / speed
            if end <= nxt:
                moment[j] += speed * (end * end - now * now) / 2
                del rem[j]
                heapq.heappop(ready)
                now = end
            else:
                moment[j] += speed * (nxt * nxt - now * now) / 2
                rem[j] -= speed * (nxt - now)
                now = nxt
        total = sum(self.w[j] * (moment[j] / area[j] + t + self.pmin[j] / 2) for j in jobs)
        return total * (1 - 1e-9) if total > 0 else total * (1 + 1e-9)


def _speeds(choices: list[list[Choice]], n_gpus: int) -> list[float]:
    """Each GPU's weight for the mean-busy-time bound: the median over the jobs with a one-GPU option on it of
    their least duration over that option's (1 on the fastest GPU, less on slower ones); 1 where no job has
    one. Any positive weights give a valid bound; these make a job's weighted area nearly the same on every GPU,
    so that slow GPUs count for what they can do."""
    ratios: list[list[float]] = [[] for _ in range(n_gpus)]
    for cl in choices:
        least = cl[0].dur
        for c in cl:
            if len(c.gpus) == 1:
                ratios[c.gpus[0]].append(least / c.dur)
    return [sorted(r)[len(r) // 2] if r else 1.0 for r in ratios]
