"""Alibaba PAI 2020 (Weng et al., NSDI'22): heterogeneous clusters shaped like PAI's machines.

The shipped table ``alibaba_pai_shapes.json`` lists machine shapes (GPU type, GPUs, CPUs, memory)
and how many of PAI's 1,897 machines have each. A cluster is M machines drawn from that
population (``sample="random"`` with ``seed``, or ``"proportional"``: largest-remainder shares),
optionally only from the ``top`` most common GPU shapes.

PAI's GPU types are kept as they are (``v100``, ``v100m32``, ``p100``, ``t4``, ``misc``). Jobs get
rates for them through ``type_map`` (PAI type -> measured type of the job, default v100/v100m32 ->
v100, p100 -> p100); types without a mapping are left out of the cluster, since no measured rate
exists for them (T4, unspecified "MISC"). Pass e.g. ``type_map={"t4": "k80", ...}`` to include them
under an explicit assumption.

``topology=True`` gives every machine two CPU sockets and PCIe switches of two GPUs
(:func:`jctlab.generators.node_topology`; on PAI's 8-GPU V100 machines, 96 CPUs on two sockets, the
DGX-1 layout), with the generators' default cross-socket and PCIe-sharing factors (SPEC v1.1).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InputError
from ..generators import with_topology
from ..model import Instance
from ._common import load_table

DEFAULT_TYPE_MAP = {"v100": "v100", "v100m32": "v100", "p100": "p100"}


def shapes(*, gpu_types: Sequence[str] | None = None, top: int | None = None) -> list[dict[str, Any]]:
    """GPU machine shapes, most common first, restricted to ``gpu_types`` and the ``top`` K."""
    out = [s for s in load_table("alibaba_pai_shapes.json")["shapes"] if s["gpus"] > 0]
    if gpu_types is not None:
        out = [s for s in out if s["gpu_type"] in set(gpu_types)]
    if top is not None:
        out = out[:top]
    if not out:
        raise InputError("gpu_types", "", "no PAI machine shape left to draw from")
    return out


def alibaba_nodes(machines: int = 16, *, seed: int = 0, sample: str = "random", top: int | None = None,
                  gpu_types: Sequence[str] | None = tuple(DEFAULT_TYPE_MAP)) -> list[dict[str, Any]]:
    """SPEC node dicts of ``machines`` PAI machines (named n0.., grouped by shape, common shapes first)."""
    if machines < 1:
        raise InputError("machines", "", "needs at least one machine")
    sh = shapes(gpu_types=gpu_types, top=top)
    counts = np.array([s["count"] for s in sh], dtype=float)
    if sample == "random":
        draw = np.random.default_rng(seed).choice(len(sh), size=machines, p=counts / counts.sum())
        per = np.bincount(draw, minlength=len(sh))
    elif sample == "proportional":
        share = counts / counts.sum() * machines
        per = np.floor(share).astype(int)
        rest = machines - per.sum()
        per[np.argsort(-(share - per), kind="stable")[:rest]] += 1
    else:
        raise InputError("sample", "", f"{sample!r}: 'random' or 'proportional'")
    nodes = []
    for s, k in zip(sh, per):
        for _ in range(int(k)):
            nodes.append({"name": f"n{len(nodes)}", "cpus": float(s["cpus"]), "mem_gb": float(s["mem_gb"]),
                          "gpus": [{"type": s["gpu_type"]} for _ in range(s["gpus"])]})
    return nodes


def rehost(instance: Instance, nodes: list[dict[str, Any]], *,
           type_map: Mapping[str, str] | None = None, name: str | None = None) -> Instance:
    """``instance``'s jobs on a new node list, their rates and measured tables renamed by ``type_map``.

    For every cluster GPU type X, ``samples_per_s[X] = samples_per_s[type_map[X]]`` and
    ``measured[X]`` / ``measured["X/spread"]`` likewise. Jobs larger than the new cluster are dropped
    (counted in ``source.dropped_too_large``).
    """
    tm = dict(type_map or DEFAULT_TYPE_MAP)
    ctypes = sorted({g["type"] for n in nodes for g in n["gpus"]})
    missing = [t for t in ctypes if t not in tm]
    if missing:
        raise InputError("type_map", missing[0], "GPU type of the cluster has no mapping to a measured type")
    total = sum(len(n["gpus"]) for n in nodes)
    d = instance.to_dict()
    d["cluster"]["nodes"] = nodes
    jobs = []
    for j in d["jobs"]:
        if min(j["sizes"]) > total:
            continue
        sps, meas = j["samples_per_s"], j.get("measured") or {}
        j["samples_per_s"] = {t: sps.get(tm[t], 0.0) for t in ctypes}
        new_meas = {}
        for t in ctypes:
            for suffix in ("", "/spread"):
                if tm[t] + suffix in meas:
                    new_meas[t + suffix] = meas[tm[t] + suffix]
        j["measured"] = new_meas
        if any(v > 0 for v in j["samples_per_s"].values()):
            jobs.append(j)
    if not jobs:
        raise InputError(instance.name, "jobs", "no job can run on the new cluster")
    src = dict(d.get("source") or {})
    src["dropped_too_large"] = src.get("dropped_too_large", 0) + len(d["jobs"]) - len(jobs)
    d.update(jobs=jobs, source=src)
    if name:
        d["name"] = name
    return Instance.from_dict(d, source=f"{instance.name} on PAI shapes")


def load_alibaba(base: Instance, machines: int = 16, *, seed: int = 0, sample: str = "random",
                 top: int | None = None, type_map: Mapping[str, str] | None = None,
                 name: str | None = None, topology: bool = False) -> Instance:
    """``base``'s jobs (e.g. from :func:`jctlab.loaders.philly.load_philly`) on a PAI-shaped cluster."""
    tm = dict(type_map or DEFAULT_TYPE_MAP)
    nodes = alibaba_nodes(machines, seed=seed, sample=sample, top=top, gpu_types=tuple(tm))
    topo = with_topology(nodes) if topology else {}
    inst = rehost(base, nodes, type_map=tm, name=name or f"{base.name}-pai{machines}-s{seed}")
    src = dict(inst.extra.get("source") or {})
    src.update(cluster="alibaba_pai", machines=machines, cluster_seed=seed, sample=sample)
    d = inst.to_dict()
    d["source"] = src
    d["cluster"].update(topo)
    return Instance.from_dict(d, source=inst.name)


__all__ = ["shapes", "alibaba_nodes", "rehost", "load_alibaba", "DEFAULT_TYPE_MAP"]
