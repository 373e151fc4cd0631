"""A lower bound from a partition of the jobs: the sum of the optima of the parts, each solved exactly.

The LP bounds of a queue (:mod:`.preemptive_bound`, :mod:`.time_indexed_bound`) see every job at once but
relax integrality; this one keeps integrality (each part is solved by the exact branch and bound,
:mod:`.bnb`) and gives up the interaction between the parts. Superadditivity of the optimum over a partition
is the classic decomposition bound of total-completion-time scheduling.

**Theorem.** Let the objective be Σ_j w_j (C_j − a_j) (mean JCT: w_j = 1; weighted JCT: the job weights; the
normalisation by Σ_j w_j is applied at the end) and J = G_1 ∪ … ∪ G_k a partition of the jobs. For a part G
let I[G] be the instance with the same cluster and only the jobs G, and V(G) the optimum of
Σ_{j∈G} w_j (C_j − a_j) over the offline schedules of I[G]. Then every offline schedule S of the instance has

    Σ_j w_j (C_j(S) − a_j) ≥ Σ_g V(G_g),

and V(G) may be replaced by any proven lower bound L(G) ≤ V(G).

*Proof.* Restrict S to the jobs of G: the same starts and allocations. Every capacity (GPUs, node CPUs and
memory, parameter servers) holds with fewer jobs. A job's speed depends on its own allocation, and on the other
jobs only through the interference factors of SPEC §2, which are ≥ 1 and present only when the other job runs
beside it; so in the restriction no job of G runs slower and each completes no later than in S (it runs
without preemption from the same start, at a speed at least as high at every instant). The restriction is a
schedule of I[G] (starts ≥ releases, capacities hold), so Σ_{j∈G} w_j (C_j(S) − a_j) ≥ V(G). Sum over the
parts: the left sides add up to S's objective. ∎

The parts are contiguous in arrival order (jobs that arrive together are the ones that compete), at most
``max_part`` jobs each, chosen by dynamic programming to maximise Σ_g L(G_g) over every such partition:
best[k] = max_{k − max_part ≤ i < k} best[i] + L(jobs i..k−1). L is the branch and bound's bound (its optimum
when it finishes; the root bound when its share of the time runs out; it ignores interference, which only
slows jobs, so it bounds V), or Σ_{j∈G} w_j p_j where the search does not apply to the part. Every L is a
valid bound whatever the time, so the bound is valid at any time limit; the time only decides how many parts
are solved to their end. Not defined for makespan (there max_g V(G) ≤ the optimum, which the other bounds
dominate).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from jctlab.model import Instance

from ..budget import Budget
from ..schedules import job_weights
from . import bnb
from .classes import p_min


@dataclass(frozen=True)
class PartitionParams:
    """The partition bound's knobs."""

    max_part: int = 6          # jobs in a part at most (the branch and bound proves 6 queued jobs in ms-s)
    #: a part's search gets spread × (the time left / the parts left to solve): the long parts, solved last, get
    #: what the short ones did not use
    spread: float = 2.0


def lower_bound(inst: Instance, budget: Budget | None = None, params: PartitionParams = PartitionParams()) -> float | None:
    """The bound of the theorem, in the instance's objective (None for makespan or no jobs)."""
    if inst.objective == "makespan" or not inst.jobs:
        return None
    budget = budget or Budget(None)
    w = job_weights(inst)
    pm = p_min(inst)
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    n = len(order)
    best = [0.0] + [-math.inf] * n
    parts = [(i, k) for k in range(1, n + 1) for i in range(k - 1, max(0, k - params.max_part) - 1, -1)]
    for c, (i, k) in enumerate(parts):
        best[k] = max(best[k], best[i] + _part_bound(inst, order[i:k], w, pm, budget.left() * params.spread
                                                     / (len(parts) - c)))
    return best[n] / float(sum(w))


def _part_bound(inst: Instance, part: list[int], w: list[float], pm: list[float], time_limit: float) -> float:
    """L(G) of the module docstring, Σ_{j∈G} w_j (C_j − a_j) form, the search given ``time_limit`` (inf: none)."""
    trivial = sum(w[j] * pm[j] for j in part)
    if len(part) < 2 or time_limit <= 0:
        return trivial
    sub = inst.replace_jobs([inst.jobs[j] for j in part])
    if bnb.not_applicable(sub) is not None:
        return trivial
    r = bnb.solve(sub, time_limit=None if time_limit == math.inf else max(0.01, time_limit))
    if r.lower_bound is None or not math.isfinite(r.lower_bound):
        return trivial
    return max(trivial, r.lower_bound * sum(w[j] for j in part))
