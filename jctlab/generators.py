"""Seeded synthetic instance generators (``jctlab make-instance static|offline``).

Clusters: ``gpus`` GPUs over ``nodes`` nodes, each node homogeneous, GPU types assigned to nodes
round-robin. Jobs: per-type throughputs with the heterogeneity seen in Gavel's measurements (a V100
is 1.5-2.2× a P100 and 3-10× a K80, depending on the model), gradient sizes of 10-500 MB.
Same arguments and seed → the same instance. ``topology=True`` gives every node SPEC v1.1's
intra-node topology (:func:`node_topology`: two CPU sockets, PCIe switches of two GPUs, the layout of
an 8-GPU DGX-1-class server) with ``qpi_factor`` and ``pcie_interference``; it draws no random number,
so the rest of the instance is the one without it.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .model import Instance

#: relative speed ranges of each type against a V100, per job (drawn uniformly)
TYPE_SPEED = {"v100": (1.0, 1.0), "p100": (0.45, 0.67), "k80": (0.1, 0.33), "t4": (0.3, 0.5), "a100": (1.6, 2.4)}
CLASSES = ("A", "B", "C", "D")

#: Default topology factors (assumptions, not measurements of one system): a cross-socket job runs
#: 1.2x slower, and a job loses 10 % per other job on one of its PCIe switches. Amaral et al.
#: (SC'17, topology-aware GPU placement) report slowdowns up to ~30 % from both effects.
QPI_FACTOR = 1.2
PCIE_INTERFERENCE = 0.1


def node_topology(gpus: int, sockets: int = 2, per_switch: int = 2) -> list[tuple[int, int]]:
    """(socket, switch) of each GPU of a node: the GPUs split in ``sockets`` contiguous groups, each
    cut into PCIe switches of ``per_switch`` GPUs. With 8 GPUs: the DGX-1 layout (two CPU sockets,
    four PCIe switches of two GPUs, two switches per socket; NVIDIA's DGX-1 architecture whitepaper)."""
    sockets = max(1, min(sockets, gpus))
    out: list[tuple[int, int]] = []
    switch, on_switch, prev = -1, 0, None
    for i in range(gpus):
        s = i * sockets // gpus
        if s != prev or on_switch == per_switch:      # a new socket or a full switch: the next switch
            switch, on_switch = switch + 1, 0
        prev, on_switch = s, on_switch + 1
        out.append((s, switch))
    return out


def with_topology(nodes: list[dict[str, Any]], qpi_factor: float = QPI_FACTOR,
                  pcie_interference: float = PCIE_INTERFERENCE) -> dict[str, Any]:
    """Write :func:`node_topology` into SPEC node dicts (in place); the cluster fields to add."""
    for nd in nodes:
        for g, (s, w) in zip(nd["gpus"], node_topology(len(nd["gpus"]))):
            g["socket"], g["switch"] = s, w
    return {"qpi_factor": qpi_factor, "pcie_interference": pcie_interference}


def _cluster(rng: np.random.Generator, gpus: int, nodes: int, types: Sequence[str], variability: float,
             locality_penalty: float, cpus_per_gpu: float, mem_gb_per_gpu: float, split: str,
             restart_s: float, interference: float, topology: bool = False) -> dict[str, Any]:
    if gpus < 1 or nodes < 1 or gpus < nodes:
        raise ValueError("need gpus >= nodes >= 1")
    per = [gpus // nodes + (1 if i < gpus % nodes else 0) for i in range(nodes)]
    node_list = []
    for i, k in enumerate(per):
        t = types[i % len(types)]
        gl = []
        for _ in range(k):
            g: dict[str, Any] = {"type": t}
            if variability > 0:
                g["variability"] = {c: round(float(1.0 + abs(rng.normal(0.0, variability))), 4) for c in CLASSES}
            gl.append(g)
        node_list.append({"name": f"n{i}", "cpus": cpus_per_gpu * k, "mem_gb": mem_gb_per_gpu * k, "gpus": gl})
    inter = {}
    if interference > 0:
        inter = {a: {b: round(float(rng.uniform(0, interference)), 4) for b in CLASSES} for a in CLASSES}
    out = {"nodes": node_list, "intra_node_gbps": 100.0, "inter_node_gbps": 25.0,
           "locality_penalty": locality_penalty, "split": split, "interference": inter, "restart_s": restart_s}
    if topology:
        out.update(with_topology(node_list))
    return out


def _job(rng: np.random.Generator, name: str, arrival: float, types: Sequence[str], duration_s: float,
         sizes: Sequence[int], cpu_mem: bool, ps: bool) -> dict[str, Any]:
    v100 = float(rng.uniform(100.0, 1000.0))
    sps = {t: round(v100 * float(rng.uniform(*TYPE_SPEED.get(t, (0.3, 1.0)))), 3) for t in types}
    batch = int(rng.choice([32, 64, 128]))
    fastest = max(sps.values())
    iterations = max(1.0, round(duration_s * fastest / batch))
    job: dict[str, Any] = {
        "name": name, "model": "synthetic", "arrival": round(arrival, 3), "batch": batch,
        "iterations": iterations, "samples_per_s": sps, "comm_mb": round(float(rng.uniform(10.0, 500.0)), 2),
        "sizes": list(sizes), "class": str(rng.choice(CLASSES)), "weight": 1.0, "cpu_mem": None, "ps": None,
    }
    if cpu_mem:
        # fair share (4 cpus, 32 GB per GPU on generated nodes) has speedup 1.0
        gain = float(rng.uniform(0.0, 0.4))
        job["cpu_mem"] = {"levels": [[2.0, 16.0, round(1.0 - gain / 2, 4)], [4.0, 32.0, 1.0],
                                     [6.0, 48.0, round(1.0 + gain, 4)]]}
    if ps:
        job["ps"] = {"max_ps": 2, "ps_cpus": 2.0,
                     "theta": [0.0, round(float(rng.uniform(0.002, 0.02)), 5), round(float(rng.uniform(0.0, 0.002)), 5), 0.001]}
    return job


def static_instance(gpus: int = 16, nodes: int = 4, jobs: int = 8, types: Sequence[str] = ("v100", "p100", "k80"),
                    sizes: Sequence[int] = (1, 2, 4), seed: int = 0, variability: float = 0.0,
                    locality_penalty: float = 1.0, cpu_mem: bool = False, ps: bool = False,
                    interference: float = 0.0, duration_h: tuple[float, float] = (0.5, 4.0),
                    objective: str = "mean_jct", name: str | None = None, topology: bool = False) -> Instance:
    """Heterogeneous multi-job placement: every job starts at 0 on its own GPUs."""
    rng = np.random.default_rng(seed)
    cluster = _cluster(rng, gpus, nodes, types, variability, locality_penalty, 4.0, 32.0, "proportional", 0.0,
                       interference, topology)
    jl = [_job(rng, f"j{i}", 0.0, types, float(rng.uniform(*duration_h)) * 3600.0, sizes, cpu_mem, ps and i % 2 == 1)
          for i in range(jobs)]
    d = {"format": "jctlab.instance/1", "name": name or f"static-k{gpus}-s{jobs}-seed{seed}", "problem": "static",
         "objective": objective, "cluster": cluster, "jobs": jl}
    return Instance.from_dict(d, "<generated static>")


def offline_instance(gpus: int = 32, nodes: int = 4, jobs: int = 20, types: Sequence[str] = ("v100", "p100", "k80"),
                     interarrival_s: float = 900.0, duration_h: tuple[float, float] = (0.1, 2.0),
                     max_size: int = 8, elastic: float = 0.5, seed: int = 0, variability: float = 0.0,
                     locality_penalty: float = 1.0, cpu_mem: bool = False, ps: bool = False,
                     interference: float = 0.0, restart_s: float = 30.0, problem: str = "offline",
                     objective: str = "mean_jct", name: str | None = None, topology: bool = False) -> Instance:
    """Poisson arrivals; rigid jobs (one size) and elastic ones (every power of two up to theirs)."""
    rng = np.random.default_rng(seed)
    cluster = _cluster(rng, gpus, nodes, types, variability, locality_penalty, 4.0, 32.0, "proportional",
                       restart_s, interference, topology)
    pow2 = [s for s in (1, 2, 4, 8, 16, 32, 64) if s <= min(max_size, gpus)]
    t = 0.0
    jl = []
    for i in range(jobs):
        if i:
            t += float(rng.exponential(interarrival_s))
        top = int(rng.choice(pow2))
        sizes = [s for s in pow2 if s <= top] if rng.random() < elastic else [top]
        jl.append(_job(rng, f"j{i}", t, types, float(rng.uniform(*duration_h)) * 3600.0, sizes, cpu_mem,
                       ps and i % 2 == 1))
    d = {"format": "jctlab.instance/1", "name": name or f"{problem}-k{gpus}-n{jobs}-seed{seed}", "problem": problem,
         "objective": objective, "cluster": cluster, "jobs": jl}
    return Instance.from_dict(d, "<generated offline>")
