"""Static multi-job placement instances from Gavel's real throughputs (shipped table, no raw data).

Cluster: G GPUs of K80/P100/V100 (Gavel's types) on servers of ``gpus_per_server`` GPUs of one type
(:func:`jctlab.loaders.gavel.gavel_cluster`), the per-type counts drawn at random in multiples of
the server size. Jobs: Gavel job types drawn uniformly, ``sizes`` (job sizing, default 1/2/4/8),
iterations for a run of 0.5–8 h (log-uniform) on one V100. ``measured=False`` (default) drops Gavel's
whole-job measured tables so that every allocation uses the paper's model (proportional split + ring
all-reduce with the fitted comm_mb); ``measured=True`` keeps them (SPEC: they take precedence).
"""

from __future__ import annotations

import math

import numpy as np

from jctlab.loaders.gavel import gavel_cluster, gavel_job, job_types
from jctlab.model import Instance


def gavel_static(gpus: int = 32, jobs: int = 8, seed: int = 0, gpus_per_server: int = 4,
                 sizes: tuple[int, ...] = (1, 2, 4, 8), measured: bool = False,
                 hours: tuple[float, float] = (0.5, 8.0), name: str | None = None) -> Instance:
    rng = np.random.default_rng(seed)
    servers = max(1, gpus // gpus_per_server)
    # every type gets at least one server when there are three or more servers
    base = [1, 1, 1] if servers >= 3 else [0, 0, 0]
    extra = rng.multinomial(servers - sum(base), [1 / 3] * 3)
    counts = [int((b + e) * gpus_per_server) for b, e in zip(base, extra)]
    counts[0] += gpus - sum(counts)  # remainder (when gpus is not a multiple) to V100
    cl = gavel_cluster(":".join(map(str, counts)), str(gpus_per_server))
    types = job_types()
    names = sorted(types)
    jl = []
    for i in range(jobs):
        jt = names[int(rng.integers(len(names)))]
        h = math.exp(rng.uniform(math.log(hours[0]), math.log(hours[1])))
        t = types[jt]
        iters = max(1.0, round(h * 3600.0 * t["samples_per_s"]["v100"] / t["batch"]))
        d = gavel_job(f"j{i}", jt, arrival=0.0, iterations=iters, gpus=1, types=types)
        d["sizes"] = [s for s in sizes if s <= gpus]
        if not measured:
            d.pop("measured", None)
        jl.append(d)
    doc = {"format": "jctlab.instance/1", "name": name or f"gavel-static-g{gpus}-j{jobs}-s{seed}",
           "problem": "static", "objective": "mean_jct", "cluster": cl, "jobs": jl,
           "source": {"kind": "gavel_static", "counts_vpk": counts, "seed": seed, "measured": measured}}
    return Instance.from_dict(doc, "<gavel static>")


def suite(n: int = 60, seed: int = 0, measured: bool = False) -> list[Instance]:
    """``n`` instances: 8 to 64 GPUs, 4 to 16 jobs (at most one job per 2 GPUs... at least 1 per job)."""
    rng = np.random.default_rng(seed)
    out = []
    grid = [8, 16, 24, 32, 48, 64]
    for i in range(n):
        g = grid[i % len(grid)]
        j = int(rng.integers(4, min(16, g) + 1))
        out.append(gavel_static(gpus=g, jobs=j, seed=seed * 10_000 + i, measured=measured))
    return out


def large_suite(n: int = 6, seed: int = 0, measured: bool = False) -> list[Instance]:
    """``n`` larger instances: 64 to 128 GPUs, 16 to 32 jobs (where the CP-SAT oracle takes longer)."""
    rng = np.random.default_rng(seed + 7_919)
    out = []
    grid = [64, 96, 128]
    for i in range(n):
        g = grid[i % len(grid)]
        j = int(rng.integers(16, 33))
        out.append(gavel_static(gpus=g, jobs=j, seed=seed * 10_000 + 5_000 + i, measured=measured))
    return out
