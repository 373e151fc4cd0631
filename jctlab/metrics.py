"""Objectives and metrics of a replayed schedule (SPEC §1 objectives, SPEC §6 metrics)."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .model import Allocation, Cluster, Instance, Job
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
    exists, else the GPUs of that type spread over nodes. Used for slowdowns and Themis' ρ.
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
        best = math.inf
        for t, groups in self.groups.items():
            if not job.can_use(t):
                continue
            for n in job.sizes:
                ids = next((grp[:n] for grp in groups if len(grp) >= n), None)
                if ids is None:
                    flat = [g for grp in groups for g in grp][:n]
                    if len(flat) < n:
                        continue
                    ids = flat
                ps = (ids[0].split(":", 1)[0],) if job.ps is not None else ()
                try:
                    t_it = base_iteration_time(job, Allocation(tuple(ids), ps), self.cluster)
                except SpeedError:
                    continue
                best = min(best, job.iterations * t_it)
        return best


def strip_variability(cluster: Cluster) -> Cluster:
    """The same cluster with every GPU at its nominal speed (its topology kept)."""
    from dataclasses import replace

    from .model import Node

    nodes = tuple(Node(n.name, n.cpus, n.mem_gb, tuple(replace(g, variability={}) for g in n.gpus))
                  for n in cluster.nodes)
    return replace(cluster, nodes=nodes)


def jain(x: Sequence[float]) -> float:
    """Jain's index (Σx)² / (n·Σx²), computed on x / max|x| (it is scale-free), so that no square overflows."""
    a = np.asarray(x, dtype=float)
    if len(a) == 0 or not np.all(np.isfinite(a)):
        return float("nan")
    top = float(np.max(np.abs(a)))
    if top == 0:
        return 1.0
    a = a / top
    return float(np.sum(a) ** 2 / (len(a) * float(np.sum(a * a))))


def compute_metrics(inst: Instance, completion: Sequence[float], first_start: Sequence[float],
                    gpu_seconds: Sequence[float], preemptions: int,
                    with_fairness: bool = True) -> dict[str, float]:
    # times near the float maximum (a valid schedule may start a job at 1e300 s) make sums and products of
    # them inf: the metric is then inf (null in JSON), without a floating-point warning on stderr
    with np.errstate(over="ignore", invalid="ignore"):
        return _metrics(inst, completion, first_start, gpu_seconds, preemptions, with_fairness)


def _metrics(inst: Instance, completion: Sequence[float], first_start: Sequence[float],
             gpu_seconds: Sequence[float], preemptions: int, with_fairness: bool) -> dict[str, float]:
    jobs = inst.jobs
    arr = np.array([j.arrival for j in jobs])
    comp = np.asarray(completion, dtype=float)
    jct = comp - arr
    w = np.array([j.weight for j in jobs])
    t0, t1 = float(arr.min()), float(comp.max())
    total_gpus = len(inst.cluster.gpus)
    span = t1 - t0
    m = {
        "mean_jct": float(jct.mean()),
        "weighted_jct": float((w * jct).sum() / w.sum()),
        "p50_jct": float(np.percentile(jct, 50)),
        "p95_jct": float(np.percentile(jct, 95)),
        "p99_jct": float(np.percentile(jct, 99)),
        "max_jct": float(jct.max()),
        "makespan": span,
        "utilization": float(sum(gpu_seconds) / (total_gpus * span)) if span > 0 else 0.0,
        "mean_queueing_delay": float(np.mean(np.asarray(first_start) - arr)),
        "preemptions": int(preemptions),
    }
    if with_fairness:
        ref_of = ReferenceDurations(strip_variability(inst.cluster))
        ref = np.array([ref_of(j) for j in jobs])
        slow = jct / ref
        m["jain_slowdown"] = jain(slow)
        m["mean_slowdown"] = float(np.mean(slow))
        rho = slow / _mean_contention(arr, comp)
        m["ftf_rho_max"] = float(rho.max())
        m["ftf_rho_mean"] = float(rho.mean())
    return m


def _mean_contention(arr: np.ndarray, comp: np.ndarray) -> np.ndarray:
    """Average number of jobs in the system (arrived, unfinished) over each job's lifetime.

    Themis' finish-time fairness compares a job's JCT with running alone on 1/N of the cluster,
    N the number of contending jobs; we take N as this average (at least 1).
    """
    times = np.concatenate([arr, comp])
    delta = np.concatenate([np.ones_like(arr), -np.ones_like(comp)])
    order = np.lexsort((delta, times))  # ends before starts at equal times
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # jobs present just after each event
    # integral of the level from times[0] up to each event time
    widths = np.diff(times)
    area = np.concatenate([[0.0], np.cumsum(level[:-1] * widths)])

    def integral(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(times, t, side="right") - 1
        k = np.clip(k, 0, len(times) - 1)
        return area[k] + level[k] * (t - times[k])

    life = comp - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        n = (integral(comp) - integral(arr)) / life
    n = np.where(life > 0, n, 1.0)
    return np.maximum(n, 1.0)
