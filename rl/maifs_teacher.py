"""A decentralized greedy rule over the MAIFS-like agents' options: the teacher behaviour cloning starts from.

Each agent, alone, scores every option it has and claims the lowest-scoring one (ties: lower index):

    score = run_time × dominant_share ** pressure

``run_time`` is the speed model's estimate of the job's remaining run time on the option (level speedup
and co-location included); ``dominant_share`` the largest of the option's shares of the cluster's GPUs,
CPUs and memory; ``pressure`` = min(1, waiting jobs / free GPUs). With no queue an agent takes the fastest
option (more GPUs, the fastest level), under a queue the least resource-time (few GPUs, frugal levels):
shortest-remaining-time order between jobs either way. It never waits while it can claim.

Conflicting claims (every agent sees the same queue) are resolved by the coordination graph like any
other policy's. As a policy of its own it is ``maifs-greedy`` (:mod:`rl.maifs_policy`): the baseline that
shows what learning adds.
"""

from __future__ import annotations

import numpy as np

from .marl_observe import MarlDecision, Option


def _share(d: MarlDecision, o: Option) -> float:
    cl = d.sim.inst.cluster
    nd = cl.node[o.node]
    c, m = o.level.cost(nd.fair_cpus, nd.fair_mem_gb)
    g = len(cl.gpus)
    cpus = sum(n.cpus for n in cl.nodes) or 1.0
    mem = sum(n.mem_gb for n in cl.nodes) or 1.0
    return max(o.target / g, c * o.target / cpus, m * o.target / mem)


def greedy_actions(d: MarlDecision) -> np.ndarray:
    """The teacher's action of every agent (0: nothing to claim)."""
    free = max(1, d.sim.engine.free_total)
    pressure = min(1.0, len(d.sim.waiting) / free)
    out = np.zeros(len(d.options), dtype=np.int64)
    for a, rows in enumerate(d.options):
        best = None
        for w, row in enumerate(rows):
            for o in row:
                if o is None:
                    continue
                s = o.run_time * _share(d, o) ** pressure
                if best is None or s < best[0]:
                    best = (s, 1 + w * d.cfg.n_options + o.slot)
        if best is not None:
            out[a] = best[1]
    return out
