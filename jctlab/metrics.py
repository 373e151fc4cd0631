"""Objectives and metrics of a replayed schedule (SPEC §1 objectives, SPEC §6 metrics).

Plain Python, so that replaying a schedule (``jctlab replay``, ``jctlab simulate``) loads no numerical library.
Sums, means and percentiles are computed the way numpy computes them (:func:`fsum_pairwise`,
:func:`percentile`), so the figures are the same to the last bit as numpy's (a tested law).
"""

from __future__ import annotations

import bisect
import itertools
import math
from dataclasses import replace
from typing import Sequence

from .model import Allocation, Cluster, Instance, Job, Node
from .speed import SpeedError, base_iteration_time


def objective_value(inst: Instance, completion: Sequence[float]) -> float:
    jobs = inst.jobs
    if inst.objective == "makespan":
        return max(completion) - min(j.arrival for j in jobs)
    if inst.objective == "weighted_jct":
        w = sum(j.weight for j in jobs)
        return sum(j.weight * (c - j.arrival) for j, c in zip(jobs, completion)) / w
    return sum(c - j.arrival for j, c in zip(jobs, completion)) / len(jobs)


class ReferenceDurations:
    """A job's run time alone on its best homogeneous allocation of ``cluster``.

    For each allowed size and GPU type: one node holding that many GPUs of the type when one
    exists, else the GPUs of that type spread over nodes. A job none of whose sizes fits on the GPUs
    of one type (8 GPUs on a cluster of 4 V100 and 4 K80) spans types: for each order of the types it
    may use, the GPUs of the first type, then the next (each type's nodes largest first), the best
    of those. Finite for every job that fits the cluster. Used for slowdowns, Themis' ρ and the work
    estimates of SJF/SRTF.
    """

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        by_type: dict[str, list[list[str]]] = {}
        for node in cluster.nodes:
            per: dict[str, list[str]] = {}
            for g in node.gpus:
                per.setdefault(g.type, []).append(g.id)
            for t, ids in per.items():
                by_type.setdefault(t, []).append(ids)
        self.groups = {t: sorted(gs, key=len, reverse=True) for t, gs in by_type.items()}

    def __call__(self, job: Job) -> float:
        best = self.homogeneous(job)
        if best == math.inf:     # no size fits on one type: span types
            for order in itertools.permutations([t for t in self.groups if job.can_use(t)]):
                flat = [g for t in order for grp in self.groups[t] for g in grp]
                for n in job.sizes:
                    best = min(best, self._time(job, flat[:n], n))
        return best

    def homogeneous(self, job: Job) -> float:
        """The best homogeneous allocation's run time alone; inf when no size fits on one type."""
        best = math.inf
        for t, groups in self.groups.items():
            if not job.can_use(t):
                continue
            for n in job.sizes:
                ids = next((grp[:n] for grp in groups if len(grp) >= n), None)
                if ids is None:
                    ids = [g for grp in groups for g in grp][:n]
                best = min(best, self._time(job, ids, n))
        return best

    def _time(self, job: Job, ids: list[str], n: int) -> float:
        """The job's run time alone on ``ids`` (inf when they are fewer than ``n`` or the model refuses them)."""
        if len(ids) < n:
            return math.inf
        ps = (ids[0].split(":", 1)[0],) if job.ps is not None else ()
        try:
            return job.iterations * base_iteration_time(job, Allocation(tuple(ids), ps), self.cluster)
        except SpeedError:
            return math.inf


def strip_variability(cluster: Cluster) -> Cluster:
    """The same cluster with every GPU at its nominal speed (its topology kept)."""
    nodes = tuple(Node(n.name, n.cpus, n.mem_gb, tuple(replace(g, variability={}) for g in n.gpus))
                  for n in cluster.nodes)
    return replace(cluster, nodes=nodes)


def fsum_pairwise(x: Sequence[float]) -> float:
    """The sum of ``x`` in numpy's order (``np.add.reduce`` of a contiguous float64 array: pairwise
    summation over blocks of 128 with eight accumulators), so the result is numpy's to the last bit."""
    return _pairwise(x, 0, len(x))


def _pairwise(a: Sequence[float], lo: int, n: int) -> float:
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    if n <= 128:
        r = [float(a[lo + k]) for k in range(8)]
        i = 8
        while i < n - n % 8:
            for k in range(8):
                r[k] += a[lo + i + k]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        for i in range(i, n):
            res += a[lo + i]
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, lo, n2) + _pairwise(a, lo + n2, n - n2)


def mean(x: Sequence[float]) -> float:
    """numpy's mean of ``x`` (see :func:`fsum_pairwise`)."""
    return fsum_pairwise(x) / len(x)


def percentile(x: Sequence[float], q: float) -> float:
    """numpy's ``percentile(x, q)`` with its default linear interpolation, to the last bit."""
    s = sorted(x)
    vi = (len(s) - 1) * (q / 100)
    if vi >= len(s) - 1:
        return float(s[-1])
    k = math.floor(vi)
    a, b, t = s[k], s[k + 1], vi - k
    d = b - a
    return float(b - d * (1 - t) if t >= 0.5 else a + d * t)


def jain(x: Sequence[float]) -> float:
    """Jain's index (Σx)² / (n·Σx²), computed on x / max|x| (it is scale-free), so that no square overflows."""
    a = [float(v) for v in x]
    if len(a) == 0 or not all(math.isfinite(v) for v in a):
        return float("nan")
    top = max(abs(v) for v in a)
    if top == 0:
        return 1.0
    a = [v / top for v in a]
    return fsum_pairwise(a) ** 2 / (len(a) * fsum_pairwise([v * v for v in a]))


def compute_metrics(inst: Instance, completion: Sequence[float], first_start: Sequence[float],
                    gpu_seconds: Sequence[float], preemptions: int,
                    with_fairness: bool = True) -> dict[str, float]:
    # times near the float maximum (a valid schedule may start a job at 1e300 s) make sums and products of
    # them inf: Python's float arithmetic gives inf (null in JSON) without a warning; no ``**`` or math
    # function here sees such a value (jain scales first)
    jobs = inst.jobs
    arr = [float(j.arrival) for j in jobs]
    comp = [float(c) for c in completion]
    jct = [c - a for c, a in zip(comp, arr)]
    w = [float(j.weight) for j in jobs]
    t0, t1 = min(arr), max(comp)
    total_gpus = len(inst.cluster.gpus)
    span = t1 - t0
    m = {
        "mean_jct": mean(jct),
        "weighted_jct": fsum_pairwise([wi * x for wi, x in zip(w, jct)]) / fsum_pairwise(w),
        "p50_jct": percentile(jct, 50),
        "p95_jct": percentile(jct, 95),
        "p99_jct": percentile(jct, 99),
        "max_jct": max(jct),
        "makespan": span,
        "utilization": float(sum(gpu_seconds) / (total_gpus * span)) if span > 0 else 0.0,
        "mean_queueing_delay": mean([float(s) - a for s, a in zip(first_start, arr)]),
        "preemptions": int(preemptions),
    }
    if with_fairness:
        ref_of = ReferenceDurations(strip_variability(inst.cluster))
        slow = [x / ref_of(j) for x, j in zip(jct, jobs)]
        m["jain_slowdown"] = jain(slow)
        m["mean_slowdown"] = mean(slow)
        rho = [x / n for x, n in zip(slow, _mean_contention(arr, comp))]
        m["ftf_rho_max"] = max(rho)
        m["ftf_rho_mean"] = mean(rho)
    return m


def _mean_contention(arr: Sequence[float], comp: Sequence[float]) -> list[float]:
    """Average number of jobs in the system (arrived, unfinished) over each job's lifetime.

    Themis' finish-time fairness compares a job's JCT with running alone on 1/N of the cluster,
    N the number of contending jobs; we take N as this average (at least 1).
    """
    events = [(t, 1.0) for t in arr] + [(t, -1.0) for t in comp]
    order = sorted(range(len(events)), key=lambda i: (events[i][0], events[i][1], i))   # ends before starts
    times = [events[i][0] for i in order]
    level: list[float] = []      # jobs present just after each event
    total = 0.0
    for i in order:
        total += events[i][1]
        level.append(total)
    # integral of the level from times[0] up to each event time
    area = [0.0]
    for k in range(len(times) - 1):
        area.append(area[-1] + level[k] * (times[k + 1] - times[k]))

    def integral(t: float) -> float:
        k = min(max(bisect.bisect_right(times, t) - 1, 0), len(times) - 1)
        return area[k] + level[k] * (t - times[k])

    out = []
    for a, c in zip(arr, comp):
        life = c - a
        n = (integral(c) - integral(a)) / life if life > 0 else 1.0
        out.append(max(n, 1.0))
    return out
