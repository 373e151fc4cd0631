"""The class model solved by the branch and bound: a lower bound for queues whose allocations are too many to enumerate.

Why. On queues of 8-16 jobs on 8-16 GPUs (the 10-s queue rows: 8 GPUs on two nodes, jobs of up to 8 GPUs) a job
has up to a hundred GPU subsets, so :mod:`.bnb` does not apply, and the bound left is the time-indexed
relaxation's, 8-13 % below the best schedules. The class model (:func:`.classes.class_options`: "n GPUs on node
v", or a pattern of counts over several nodes, each with a duration no longer than any of its allocations') is
tight there (on one 8 × 12 queue its optimum is within 0.02 % of the best schedule) and small (50-60 options for
12 jobs on two nodes), but CP-SAT does not prove it in seconds. The search of :mod:`.bnb` does, with the GPUs of a
pool interchangeable.

The pooled model. The nodes are grouped by their GPU types (:func:`.options.node_groups`); each group is one pool
of GPUs (a node whose types no other node has is a pool of its own). A class option holds, on each pool, its count
there: "n on node v" holds n of v's pool; a spread pattern holds its count on each group. Nodes of one group
share a pool, so the model does not see which of them a job's GPUs are on: a relaxation of the class model, and
where every group is one node, the class model itself. Without pools of several nodes, a spread pattern over
identical nodes names no node count and the search would not apply; every cluster of identical nodes is such
a case.

Validity. Every schedule S of the instance maps onto the pooled model: each job's allocation onto its class (a
single-node set onto "n on that node", a multi-node one onto the pattern of its counts per group), no longer,
holding the same GPU count on each pool; so S's objective is at least the pooled model's optimum with per-pool
GPU counts as the only capacities (interference, CPUs/memory and parameter servers only add constraints or
time). In one pool, jobs that hold counts of interchangeable GPUs fit a cumulative count exactly when they fit
the GPUs: started in order, each finds enough GPUs free. So the search's list schedules over the pools (the
:mod:`.bnb` exactness argument, with each child taking the earliest-free GPUs of each pool it needs: every GPU
free by its start is free for every later start, so which ones it takes does not matter) reach the pooled
model's optimum. The node prices price the pools' and the cluster's GPU counts only, the rows every schedule of
the search keeps (a CPU row it does not keep could price a node above the optimum). Finished, the search proves
min(pooled optimum, incumbent) ≤ the instance's optimum. Where some class holds GPUs that no pool count names
(a bare spread class: too many patterns), the model does not apply.

Tests: ``tests/test_class_search.py`` (the bound never above brute force, with or without prices, on mixed
clusters, on identical nodes and with parameter servers; equal to the brute-force optimum on one node of identical
GPUs, where the class model is exact, and for single-GPU jobs on identical nodes, where the pooled model is).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jctlab.model import Instance

from ..budget import Budget
from .bnb import BnbParams, Search, arrival_offset, objective_not_searchable
from .classes import class_options
from .cpsat_model import ModelSolution
from .node_prices import NodePrices
from .options import Option, capacities, node_groups


@dataclass(frozen=True)
class ClassChoice:
    """One class option of a job as the search reads it: ``counts`` (pool index, GPUs) it holds; ``option`` the
    class option it stands for."""

    dur: float
    counts: tuple[tuple[int, int], ...]
    option: Option
    index: int                  # its place in the flat enumeration (jobs in order), for the node prices
    size: int
    holds: bool = False         # no CPUs/memory: the pooled model leaves them out
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class PooledModel:
    """The class model with one pool of GPUs per node group (:func:`.options.node_groups`): ``pools`` the pools'
    resources (``("n", v)`` for a group of one node, ``("set", T)`` for a group of several) and ``sizes`` their
    GPU counts; per job, ``options`` its undominated pooled options (demands: GPUs on each pool and on the
    cluster, nothing else) and ``origin`` the class option each stands for."""

    pools: list[tuple]
    sizes: dict[tuple, int]
    options: list[list[Option]]
    origin: list[list[Option]]

    @property
    def resources(self) -> set:
        """The capacities the search keeps, so the only ones its node prices may price."""
        return {*self.pools, ("all",)}

    def applies(self) -> bool:
        """Every option holds its GPUs on named pools (no bare spread class) and every job has one."""
        return all(ol for ol in self.options) and all(
            sum(o.demand.get(r, 0) for r in self.pools) == o.demand[("all",)] for ol in self.options for o in ol)


def pooled_model(inst: Instance, opts: list[list[Option]]) -> PooledModel:
    """``opts`` (class options) on pools: a class option's count on a pool is its group count (a spread
    pattern's ``("set", T)``) or the sum of its node counts there. Per job, of the options with the same counts
    the shortest is kept (the others are no shorter and hold no less)."""
    cap = capacities(inst)
    groups = node_groups(inst)
    pools = [("n", T[0]) if len(T) == 1 else ("set", T) for T in groups]
    options, origin = [], []
    for ol in opts:
        best: dict[tuple, tuple[Option, Option]] = {}
        for o in ol:
            dem = {("all",): o.demand.get(("all",), 0)}
            for T, r in zip(groups, pools):
                k = o.demand.get(("set", T), sum(o.demand.get(("n", v), 0) for v in T))
                if k > 0:
                    dem[r] = k
            key = tuple(sorted(dem.items()))
            if key not in best or o.dur < best[key][0].dur:
                best[key] = (Option(o.job, o.dur, dem, cls=o.cls), o)
        options.append([p for p, _ in best.values()])
        origin.append([o for _, o in best.values()])
    return PooledModel(pools, {r: int(cap[r]) for r in pools}, options, origin)


class ClassSearch(Search):
    """:class:`.bnb.Search` over pools of interchangeable GPUs, one per node group (module docstring). ``free``
    keeps each pool's GPUs' free times sorted, so equal pools compare equal in the dominance fronts."""

    def __init__(self, inst: Instance, model: PooledModel, prices: NodePrices | None = None) -> None:
        where = {r: k for k, r in enumerate(model.pools)}
        self.lo = [0] * (len(model.pools) + 1)          # pool k's GPUs are free[lo[k]:lo[k + 1]]
        for k, r in enumerate(model.pools):
            self.lo[k + 1] = self.lo[k] + model.sizes[r]
        flat = 0
        choices = []
        for pl, ol in zip(model.options, model.origin):
            cl = []
            for p, o in zip(pl, ol):
                counts = tuple((where[r], int(round(v))) for r, v in p.demand.items() if r in where and v > 0)
                cl.append(ClassChoice(p.dur, counts, o, flat, sum(k for _, k in counts)))
                flat += 1
            choices.append(sorted(cl, key=lambda c: c.dur))
        n = self.lo[-1]
        # a choice's GPUs are free when the k-th earliest-free GPU of each pool it needs is (pools kept sorted)
        places = [[tuple(self.lo[v] + k - 1 for v, k in c.counts) for c in cl] for cl in choices]
        self._setup(inst, choices, n, [], [], [[1.0] * n], [[min(c.dur * c.size for c in cl) for cl in choices]],
                    prices, places)

    def _apply(self, j: int, s: float, c: float, ch: ClassChoice) -> tuple:
        free, lo = self.free, self.lo
        old = []
        for v, k in ch.counts:
            seg = free[lo[v]:lo[v + 1]]
            old.append((lo[v], seg))
            free[lo[v]:lo[v + 1]] = sorted([c] * k + seg[k:])
        self._mark(j, s, ch)
        return j, ch, old, False

    def _undo(self, undo: tuple) -> None:
        j, _, old, _ = undo
        self._unmark(j)
        for at, seg in old:
            self.free[at:at + len(seg)] = seg


def applies(inst: Instance, opts: list[list[Option]]) -> bool:
    """The pooled model of ``opts`` applies (:meth:`PooledModel.applies`) and the objective is a sum with
    positive weights."""
    return objective_not_searchable(inst) is None and pooled_model(inst, opts).applies()


@dataclass(frozen=True)
class ClassResult:
    """A search's ``bound`` (finished: min(class optimum, incumbent); else the least over its open nodes; lowered for
    rounding), and the class schedule below the incumbent it found, if any (each job's start and class option of
    ``opts``)."""

    bound: float
    schedule: list[tuple[float, Option]] | None
    opts: list[list[Option]]

    def solution(self) -> ModelSolution | None:
        """The class schedule as a model solution (each job's option index and start in seconds) for
        :func:`.decode.decode`, which list-schedules real GPUs in its order."""
        if self.schedule is None:
            return None
        choice = [next(k for k, o in enumerate(ol) if o is opt) for ol, (_, opt) in zip(self.opts, self.schedule)]
        return ModelSolution("FEASIBLE", 1.0, -math.inf, choice, [start for start, _ in self.schedule])


@dataclass(frozen=True)
class TargetParams:
    """Destructive lower bounding (:func:`class_bound_by_targets`): the first target ``first_step`` of the gap
    above the bound; each attempt gets at most ``attempt_share`` of the time left (and at least ``min_attempt_s``);
    the targets stop once their step is below ``min_step`` of the bound."""

    first_step: float = 1 / 8
    attempt_share: float = 1 / 3
    min_attempt_s: float = 0.2
    min_step: float = 1e-4


@dataclass(frozen=True)
class _Setup:
    """What every search of one instance shares: the class options, their pooled model and the node prices."""

    opts: list[list[Option]]
    model: PooledModel
    prices: NodePrices | None


def _prepared(inst: Instance, incumbent: float, time_limit: float | None, params: BnbParams) -> _Setup | None:
    """The searches' set-up, the node prices steered by ``incumbent``; None where the search does not apply."""
    opts = class_options(inst)
    model = pooled_model(inst, opts)
    if objective_not_searchable(inst) is not None or not model.applies():
        return None
    prices = None if params.prices is None else NodePrices.at_root(
        inst, (model.options, model.resources), incumbent, params.prices_time(time_limit), params.prices)
    return _Setup(opts, model, prices)


def _lowered(x: float) -> float:
    """A proven value lowered for the rounding of the search's sums."""
    return x - (1e-9 * abs(x) + 1e-9)


def class_bound(inst: Instance, incumbent: float, time_limit: float | None,
                params: BnbParams = BnbParams()) -> ClassResult | None:
    """The pooled class model solved to its end (module docstring), pruning at the objective ``incumbent`` some
    schedule reaches; None when it does not apply. Unfinished within ``time_limit`` (of which the node prices take
    at most ``params.prices_share``), the bound is the least over its open nodes (:meth:`.bnb.Search.open_bound`)."""
    budget = Budget(time_limit)
    setup = _prepared(inst, incumbent, time_limit, params)
    if setup is None:
        return None
    search = ClassSearch(inst, setup.model, setup.prices)
    offset = arrival_offset(inst)
    if math.isfinite(incumbent):
        search.value = (incumbent + offset) * (1 + 1e-9)
    search.resume(budget)
    return ClassResult(_lowered(min(search.open_bound() - offset, incumbent)), search.best, setup.opts)


def class_bound_by_targets(inst: Instance, lower: float, incumbent: float, time_limit: float,
                           params: BnbParams = BnbParams(), targets: TargetParams = TargetParams()
                           ) -> ClassResult | None:
    """Destructive lower bounding with the class search: a bound between ``lower`` (one already proven) and
    ``incumbent`` (a schedule's objective), where solving the class model to its end takes too long.

    Why. A search pruned at a target T below the optimum proves only "no class schedule below T", and prunes far
    more than one pruned at the incumbent: on 16-job queues on 16 GPUs it often finishes in a fraction of a second
    where the full search does not finish in a minute. Each attempt is such a search (a fresh one: a higher target
    prunes less); a finished attempt that found nothing raises the bound to T (every class schedule, hence every
    schedule, is at least T), one that found a class schedule has solved the class model (its optimum, below T:
    no higher target can succeed), an unfinished one halves the step. The first target is ``targets.first_step`` of
    the gap above ``lower``; the next one the same step higher after a success, half of it after a failure. On
    16 × 16 queues the targets proven lie a few eighths of the gap up, and an attempt near the class optimum costs
    the most, so the climb starts low (docs/history/oracle-offline-queues.md). Within ``time_limit``, of which the
    node prices take at most ``params.prices_share``; None where the search does not apply."""
    budget = Budget(time_limit)
    setup = _prepared(inst, incumbent, time_limit, params)
    if setup is None:
        return None
    offset = arrival_offset(inst)
    best = lower
    step = targets.first_step * (incumbent - lower)
    while step > targets.min_step * abs(best) and budget.left() >= targets.min_attempt_s:
        target = best + step
        search = ClassSearch(inst, setup.model, setup.prices)
        search.value = target + offset
        attempt = Budget(max(targets.min_attempt_s, targets.attempt_share * budget.left()))
        if not search.resume(attempt):
            step /= 2
        elif search.best is not None:     # the class model's optimum, below the target
            return ClassResult(max(lower, _lowered(search.value - offset)), search.best, setup.opts)
        else:
            best = target
    return ClassResult(max(lower, _lowered(best)), None, setup.opts)
