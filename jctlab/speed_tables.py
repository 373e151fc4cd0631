"""The speed model (SPEC §2) over many allocations at once, with numpy: the step time of every option of a
menu in one call (matching and sampling price their menus this way). Every entry equals what
:func:`jctlab.speed.step_time` gives the allocation alone (a tested law).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .model import Cluster, Job


def step_times_by_counts(job: Job, cluster: Cluster, types: Sequence[str], counts: np.ndarray,
                         spread: np.ndarray) -> np.ndarray:
    """:func:`jctlab.speed.step_time` of many allocations at once, each given by its GPU count per type
    (``counts[m, t]`` GPUs of ``types[t]``) and whether it spans several nodes (``spread[m]``).

    The same SPEC §2 rules as :func:`jctlab.speed.step_time`, for allocations whose GPUs have no variability
    for the job's class (factor 1, so a duration depends on nothing else) and, for a PS job, one
    parameter server on a node of its GPUs. ``nan`` where :func:`jctlab.speed.step_time` raises
    :class:`jctlab.speed.SpeedError` (no GPU, or a type the job cannot use). Tests check it against
    :func:`jctlab.speed.step_time` on concrete allocations. It knows no topology: with a ``qpi_factor`` it
    prices an allocation as if it stayed within one socket per node, which no real allocation beats.
    """
    return step_time_table([job], cluster, types, counts, spread)[0]


def step_time_table(jobs: Sequence[Job], cluster: Cluster, types: Sequence[str], counts: np.ndarray,
                    spread: np.ndarray) -> np.ndarray:
    """:func:`step_times_by_counts` of several jobs on the same allocations: ``out[p, m]`` is the step
    time of ``jobs[p]`` on allocation m, every entry the value that pricing the job alone gives."""
    c = np.asarray(counts, dtype=float).reshape(-1, len(types))
    spread = np.asarray(spread, dtype=bool).reshape(-1)
    rate = np.array([[job.samples_per_s.get(t, 0.0) for t in types] for job in jobs], dtype=float)
    batch, comm_mb = np.array([[job.batch, job.comm_mb] for job in jobs], dtype=float).T[:, :, None]   # (P, 1)
    n = c.sum(axis=1)
    used = c > 0
    bad = (n == 0) | ((rate <= 0) @ used.T)                           # no GPU, or one the job cannot use
    with np.errstate(divide="ignore", invalid="ignore"):
        if cluster.split == "proportional":
            compute = batch / np.array([c @ r for r in rate])          # one product per job, as alone
        else:
            compute = batch / (n * np.where(used, rate[:, None, :], np.inf).min(axis=2))
        gbps = np.where(spread, cluster.inter_node_gbps, cluster.intra_node_gbps)
        comm = np.where((n <= 1) | (comm_mb <= 0), 0.0, 2.0 * (n - 1) / n * comm_mb * 8.0 / 1000.0 / gbps)
        ps = [p for p, job in enumerate(jobs) if job.ps is not None]
        if ps:
            t1, t2, t3, t4 = np.array([jobs[p].ps.theta for p in ps], dtype=float).T[:, :, None]
            comm[ps] = t1 + t2 * n + t3 * n + t4                        # ps_overhead_s with p = 1
        out = (compute + comm) * np.where(spread, cluster.locality_penalty, 1.0)
    for p, job in enumerate(jobs):
        if job.ps is None and job.measured:
            _measured_step_times(job, cluster, types, used, n, spread, out[p], bad[p])
    out[bad] = np.nan
    return out


def _measured_step_times(job: Job, cluster: Cluster, types: Sequence[str], used: np.ndarray, n: np.ndarray,
                         spread: np.ndarray, out: np.ndarray, bad: np.ndarray) -> None:
    """Overwrite ``out`` (and clear ``bad``) where one of the job's measured whole-job tables prices a
    single-type allocation: ``t`` on one node; ``t/spread``, else ``t`` times the locality penalty,
    on several."""
    single = used.sum(axis=1) == 1
    for i, t in enumerate(types):
        rows = single & used[:, i]
        for key, rows_k, factor in ((t, rows & spread, cluster.locality_penalty),
                                    (f"{t}/spread", rows & spread, None), (t, rows & ~spread, None)):
            for k, v in job.measured.get(key, {}).items():
                hit = rows_k & (n == k)
                out[hit] = 1.0 / v if factor is None else 1.0 / v * factor
                bad[hit] = False
