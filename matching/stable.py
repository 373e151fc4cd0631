"""Many-to-one stable matching of jobs and GPUs (Gale–Shapley deferred acceptance, jobs propose).

Job j has a quota q_j (its worker count in a size category) and ranks GPUs by how fast it trains on
them (ρ_jg = samples_per_s[type_g] / variability_g[class_j]); GPU g ranks jobs by their *comparative
advantage* on it (ρ_jg over j's speed on its slowest usable type), so a V100 prefers the jobs that
gain the most from a V100. The job-proposing outcome is stable (no blocking pair, checked by
:func:`blocking_pairs`) and job-optimal among stable matchings.
"""

from __future__ import annotations

from collections import deque
from typing import Sequence

import numpy as np

from jctlab.model import Instance


def gale_shapley(job_prefs: Sequence[Sequence[int]], gpu_rank: np.ndarray, quotas: Sequence[int]
                 ) -> list[list[int]]:
    """Job-proposing deferred acceptance. ``job_prefs[j]``: acceptable GPUs, best first;
    ``gpu_rank[g, j]``: rank of job j for GPU g (lower is better; inf = unacceptable).
    Returns the GPUs matched to each job."""
    nj = len(job_prefs)
    ng = gpu_rank.shape[0]
    held = np.full(ng, -1)
    nxt = [0] * nj
    have = [0] * nj
    free = deque(j for j in range(nj) if quotas[j] > 0)
    while free:
        j = free.popleft()
        prefs = job_prefs[j]
        while have[j] < quotas[j] and nxt[j] < len(prefs):
            g = prefs[nxt[j]]
            nxt[j] += 1
            if not np.isfinite(gpu_rank[g, j]):
                continue
            cur = held[g]
            if cur < 0:
                held[g] = j
                have[j] += 1
            elif gpu_rank[g, j] < gpu_rank[g, cur]:
                held[g] = j
                have[j] += 1
                have[cur] -= 1
                free.append(cur)
    out: list[list[int]] = [[] for _ in range(nj)]
    for g in range(ng):
        if held[g] >= 0:
            out[held[g]].append(g)
    return out


def blocking_pairs(job_prefs: Sequence[Sequence[int]], gpu_rank: np.ndarray, quotas: Sequence[int],
                   match: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """Pairs (j, g), mutually acceptable, not matched, where j has a free slot or prefers g to one of
    its GPUs, and g is free or prefers j to its holder."""
    ng = gpu_rank.shape[0]
    holder = np.full(ng, -1)
    for j, gs in enumerate(match):
        for g in gs:
            holder[g] = j
    out = []
    for j, prefs in enumerate(job_prefs):
        pos = {g: i for i, g in enumerate(prefs)}
        mine = set(match[j])
        worst = max((pos[g] for g in mine), default=-1)
        for g in prefs:
            if g in mine or not np.isfinite(gpu_rank[g, j]):
                continue
            wants = len(mine) < quotas[j] or pos[g] < worst
            if not wants:
                continue
            h = holder[g]
            if h < 0 or gpu_rank[g, j] < gpu_rank[g, h]:
                out.append((j, g))
    return out


def speed_preferences(inst: Instance, jobs: Sequence[int], gpus: Sequence[str]
                      ) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    """Preferences from speeds: (job_prefs, gpu_rank, rho[j, g])."""
    cl = inst.cluster
    rho = np.zeros((len(jobs), len(gpus)))
    for a, j in enumerate(jobs):
        job = inst.jobs[j]
        for k, gid in enumerate(gpus):
            g = cl.gpu[gid]
            r = job.samples_per_s.get(g.type, 0.0)
            f = g.factor(job.job_class)
            rho[a, k] = 0.0 if r <= 0 else (np.inf if f == 0 else r / f)
    job_prefs = []
    for a in range(len(jobs)):
        ok = [k for k in range(len(gpus)) if rho[a, k] > 0]
        ok.sort(key=lambda k: (-rho[a, k], k))
        job_prefs.append(ok)
    slowest = np.array([min((x for x in rho[a] if x > 0), default=1.0) for a in range(len(jobs))])
    adv = rho / slowest[:, None]
    gpu_rank = np.full((len(gpus), len(jobs)), np.inf)
    for k in range(len(gpus)):
        order = sorted((a for a in range(len(jobs)) if rho[a, k] > 0), key=lambda a: (-adv[a, k], a))
        for r, a in enumerate(order):
            gpu_rank[k, a] = r
    return job_prefs, gpu_rank, rho
