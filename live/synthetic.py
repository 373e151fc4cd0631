"""Seeded synthetic live states (tests, benchmarks, demos): a homogeneous or mixed cluster, a queue of
Gavel-typed jobs and running jobs on disjoint GPUs."""

from __future__ import annotations

import numpy as np


from .instance import gavel_job_types, job_fields
from .state import ClusterSpec, GpuSpec, LiveState, NodeSpec, QueuedJob, RunningJob, Work

SIZES = (1, 1, 1, 2, 2, 4, 8)   # Philly-like: most jobs take one GPU


def cluster(nodes: int = 8, gpus_per_node: int = 8, types: tuple[str, ...] = ("v100",), name: str = "synthetic",
            cpus_per_gpu: float = 4.0, mem_gb_per_gpu: float = 32.0) -> ClusterSpec:
    """``nodes`` nodes of ``gpus_per_node`` GPUs, node k of type ``types[k % len(types)]``, two sockets."""
    out = []
    for k in range(nodes):
        t = types[k % len(types)]
        gpus = tuple(GpuSpec(i, t, 0 if i < gpus_per_node // 2 else 1) for i in range(gpus_per_node))
        out.append(NodeSpec(f"n{k}", gpus, cpus_per_gpu * gpus_per_node, mem_gb_per_gpu * gpus_per_node))
    return ClusterSpec(name, tuple(out))


def queued_job(rng: np.random.Generator, name: str, submit: float, max_gpus: int, gpu_types: tuple[str, ...],
               mean_s: float = 3600.0) -> QueuedJob:
    """A job of a random Gavel type (one that runs on some type of the cluster), Philly-like size, and a
    lognormal run time of mean about ``mean_s`` on its largest size."""
    types = gavel_job_types()
    names = sorted(t for t in types if any(types[t]["samples_per_s"].get(g, 0) > 0 for g in gpu_types))
    model = names[int(rng.integers(len(names)))]
    size = min(int(SIZES[int(rng.integers(len(SIZES)))]), max_gpus)
    sizes = tuple(s for s in (size // 2, size) if s >= 1) if size > 1 and rng.random() < 0.5 else (size,)
    f = job_fields(Work(model=model, iterations=1.0), gpu_types)
    t_gpu = max(types[model]["samples_per_s"].get(g, 0.0) for g in gpu_types)
    step_s = f["batch"] / (t_gpu * size)                      # compute only: a rough iteration time
    run_s = float(rng.lognormal(np.log(mean_s) - 0.5, 1.0))
    return QueuedJob(name, submit, sizes, Work(model=model, iterations=max(1.0, round(run_s / step_s))))


def state(seed: int, nodes: int = 8, gpus_per_node: int = 8, queued: int = 50, running: int = 20,
          types: tuple[str, ...] = ("v100",), now: float = 100_000.0) -> LiveState:
    """A live state with ``running`` jobs on disjoint GPUs (as many as fit) and ``queued`` waiting ones."""
    rng = np.random.default_rng(seed)
    cl = cluster(nodes, gpus_per_node, types)
    free = {n.name: list(range(len(n.gpus))) for n in cl.nodes}
    runs = []
    for k in range(running):
        size = int(SIZES[int(rng.integers(len(SIZES)))])
        node = next((n for n in rng.permutation(sorted(free)) if len(free[str(n)]) >= size), None)
        if node is None:
            continue
        node = str(node)
        idx, free[node] = free[node][:size], free[node][size:]
        sub = now - float(rng.uniform(600, 20_000))
        start = sub + float(rng.uniform(0, now - sub))
        q = queued_job(rng, f"r{k}", sub, size, cl.gpu_types)
        runs.append(RunningJob(f"r{k}", sub, start, tuple(f"{node}:{i}" for i in idx),
                               float(rng.lognormal(np.log(2400.0), 1.0)), now, q.work))
    jobs = [queued_job(rng, f"q{k}", now - float(rng.uniform(0, 7200)), nodes * gpus_per_node, cl.gpu_types)
            for k in range(queued)]
    jobs.sort(key=lambda q: (q.submit, q.name))
    return LiveState(cl, now, tuple(jobs), tuple(runs))
