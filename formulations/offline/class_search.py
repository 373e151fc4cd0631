"""The class model solved by the branch and bound: a lower bound for queues whose allocations are too many to enumerate.

Why. On queues of 8-16 jobs on 8-16 GPUs (the 10-s queue rows: 8 GPUs on two nodes, jobs of up to 8 GPUs) a job
has up to a hundred GPU subsets, so :mod:`.bnb` does not apply, and the bound left is the time-indexed
relaxation's, 8-13 % below the best schedules. The class model (:func:`.classes.class_options`: "n GPUs on node
v", or a pattern of counts over several nodes, each with a duration no longer than any of its allocations') is
tight there (on one 8 × 12 queue its optimum is within 0.02 % of the best schedule) and small (50-60 options for
12 jobs on two nodes), but CP-SAT does not prove it in seconds. The search of :mod:`.bnb` does, with the GPUs of a
node interchangeable.

Validity. Every schedule S of the instance maps onto the class model: each job's allocation onto its class (a
single-node set onto "n on that node", a multi-node one onto the pattern of its counts), no longer and holding
the same GPU count on each node; so S's objective is at least the class model's optimum with per-node GPU counts
as the only capacities (interference, CPUs/memory and parameter servers only add constraints or time). On one
node, jobs that hold counts of interchangeable GPUs fit a cumulative count exactly when they fit the GPUs: started
in order, each finds enough GPUs free. So the search's list schedules over per-node pools of interchangeable GPUs
(the :mod:`.bnb` exactness argument, with each child taking the earliest-free GPUs of each node it needs: every GPU
free by its start is free for every later start, so which ones it takes does not matter) reach the class optimum.
Finished, the search proves min(class optimum, incumbent) ≤ the instance's optimum. Where some class holds GPUs
that no node count names (a bare spread class), the model does not apply.

Tests: ``tests/test_class_search.py`` (the bound never above brute force, with or without prices; equal to the
brute-force optimum on one node of identical GPUs, where the class model is exact).
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
from .options import Option


@dataclass(frozen=True)
class ClassChoice:
    """One class option of a job as the search reads it: ``counts`` (node index, GPUs) it holds."""

    dur: float
    counts: tuple[tuple[int, int], ...]
    option: Option
    index: int                  # its place in the flat enumeration (jobs in order), for the node prices
    size: int
    holds: bool = False         # no CPUs/memory: the class model leaves them out
    gpus: tuple[int, ...] = ()


class ClassSearch(Search):
    """:class:`.bnb.Search` over per-node pools of interchangeable GPUs (module docstring). ``free`` keeps each
    node's GPUs' free times sorted, so equal pools compare equal in the dominance fronts."""

    def __init__(self, inst: Instance, opts: list[list[Option]], prices: NodePrices | None = None) -> None:
        nodes = [nd.name for nd in inst.cluster.nodes]
        where = {name: k for k, name in enumerate(nodes)}
        self.lo = [0] * (len(nodes) + 1)          # node k's GPUs are free[lo[k]:lo[k + 1]]
        for k, nd in enumerate(inst.cluster.nodes):
            self.lo[k + 1] = self.lo[k] + len(nd.gpus)
        flat = 0
        choices = []
        for ol in opts:
            cl = []
            for o in ol:
                counts = tuple((where[r[1]], int(round(v))) for r, v in o.demand.items() if r[0] == "n" and v > 0)
                cl.append(ClassChoice(o.dur, counts, o, flat, sum(k for _, k in counts)))
                flat += 1
            choices.append(sorted(cl, key=lambda c: c.dur))
        n = self.lo[-1]
        self._setup(inst, choices, n, [], [], [[1.0] * n], [[min(c.dur * c.size for c in cl) for cl in choices]],
                    prices)

    def _children(self, t: float) -> tuple[list[tuple[float, float, int, ClassChoice]], dict[int, float]]:
        out, first = [], {}
        free, lo = self.free, self.lo
        for j in self.left:
            base = max(self.arrival[j], t)
            least = math.inf
            for c in self.choices[j]:
                s = base    # when the k-th earliest-free GPU of each node it needs is free
                for v, k in c.counts:
                    x = free[lo[v] + k - 1]
                    if x > s:
                        s = x
                out.append((s + c.dur, s, j, c))
                if s + c.dur < least:
                    least = s + c.dur
            first[j] = least
        return out, first

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
    """Every class names the GPUs it holds on each node (no bare spread class) and the objective is a sum with
    positive weights."""
    if objective_not_searchable(inst) is not None:
        return False
    return all(sum(v for r, v in o.demand.items() if r[0] == "n") == o.demand.get(("all",), -1)
               for ol in opts for o in ol) and all(opts)


@dataclass(frozen=True)
class ClassResult:
    """A finished search: ``bound`` (min(class optimum, incumbent), lowered for rounding), and the class
    schedule below the incumbent it found, if any (each job's start and class option of ``opts``)."""

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


def class_bound(inst: Instance, incumbent: float, time_limit: float | None, resources: set,
                params: BnbParams = BnbParams()) -> ClassResult | None:
    """The class model solved to its end (module docstring), pruning at the objective ``incumbent`` some schedule
    reaches; None when it does not apply or does not finish within ``time_limit`` (of which the node prices take
    at most ``params.prices_share``). ``resources``: the class model's capacities for the prices' rows."""
    budget = Budget(time_limit)
    opts = class_options(inst)
    if not applies(inst, opts):
        return None
    prices = None if params.prices is None else NodePrices.at_root(inst, (opts, resources), incumbent,
                                                                   params.prices_time(time_limit), params.prices)
    search = ClassSearch(inst, opts, prices)
    offset = arrival_offset(inst)
    if math.isfinite(incumbent):
        search.value = (incumbent + offset) * (1 + 1e-9)
    if not search.resume(budget):
        return None
    found = min(search.value - offset, incumbent)
    return ClassResult(found - (1e-9 * abs(found) + 1e-9), search.best, opts)
