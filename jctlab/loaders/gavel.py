"""Gavel (Narayanan et al., OSDI'20): job types, physical-cluster traces and Philly-VC traces.

Every job gets its job type's figures from the shipped table ``gavel_job_types.json``: ``batch``,
one-GPU ``samples_per_s`` per GPU type (steps/s x batch), Gavel's measured whole-job throughputs
as SPEC ``measured`` (``"v100"`` consolidated on one server, ``"v100/spread"`` over several) and a
fitted all-reduce ``comm_mb`` (used only for allocations the measured tables do not cover, e.g.
mixed GPU types). ``model`` and ``class`` are the Gavel job-type name, so the optional
co-location ``interference`` table (``gavel_interference.json``) can be keyed by class.

Cluster specs follow Gavel: ``"V:P:K"`` GPU counts of v100, p100, k80 (e.g. ``"4:4:4"``), with
``gpus_per_server`` GPUs per server per type (one number for all, or ``"V,P,K"``).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

from ..errors import InputError
from ..model import Instance
from ._common import check_numeric, load_table, node_dicts, parse_counts, read_csv, require_data_dir

GAVEL_TYPES = ("v100", "p100", "k80")          # order of Gavel's "V:P:K" cluster specs
TRACE_COLUMNS = ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
                 "total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time")
VC_COLUMNS = ("vc", "job_index", "job_type", "total_steps", "arrival_time_s", "scale_factor_gpus")


def job_types() -> dict[str, dict[str, Any]]:
    """The shipped Gavel job-type table: name -> {model, batch, samples_per_s, measured, comm_mb}."""
    return load_table("gavel_job_types.json")["job_types"]


def job_type_names() -> list[str]:
    return sorted(job_types())


def gavel_job(name: str, job_type: str, *, arrival: float, iterations: float, gpus: int,
              weight: float = 1.0, types: dict[str, dict] | None = None,
              gpu_types: Sequence[str] = GAVEL_TYPES, source: str = "<gavel>") -> dict[str, Any]:
    """A SPEC job dict of a Gavel job type (rigid: ``sizes = [gpus]``)."""
    types = types if types is not None else job_types()
    jt = types.get(job_type)
    if jt is None:
        raise InputError(source, "job_type", f"unknown Gavel job type {job_type!r}")
    return {
        "name": name, "model": job_type, "class": job_type, "arrival": float(arrival),
        "batch": jt["batch"], "iterations": float(iterations),
        "samples_per_s": {t: jt["samples_per_s"][t] for t in gpu_types if t in jt["samples_per_s"]},
        "comm_mb": jt["comm_mb"], "sizes": [int(gpus)], "weight": float(weight),
        "measured": {k: v for k, v in jt["measured"].items() if k.split("/")[0] in gpu_types},
    }


def gavel_cluster(cluster: str | Sequence[int] = "4:4:4", gpus_per_server: str | Sequence[int] = "4",
                  *, interference: bool = False, classes: Sequence[str] | None = None,
                  restart_s: float = 0.0, locality_penalty: float = 1.0) -> dict[str, Any]:
    """SPEC cluster dict of a Gavel spec ``V:P:K`` (GPU counts) with ``gpus_per_server`` per type.

    Intra/inter-node bandwidths are the ones ``comm_mb`` was fitted with. A count that is not a
    multiple of its server size gets a last, smaller server. ``interference=True`` attaches the
    co-location coefficients of ``classes`` (all job types when None).
    """
    counts = parse_counts(cluster, 3, "cluster")
    per = parse_counts(gpus_per_server, 3, "gpus_per_server")
    groups = []
    for t, c, p in zip(GAVEL_TYPES, counts, per):
        if c == 0:
            continue
        if p <= 0:
            raise InputError("gpus_per_server", "", f"{t}: a server holds at least one GPU")
        groups.append((t, c // p, p))
        if c % p:
            groups.append((t, 1, c % p))
    if not groups:
        raise InputError("cluster", "", f"{cluster!r}: the cluster has no GPU")
    tab = load_table("gavel_job_types.json")
    out: dict[str, Any] = {
        "nodes": node_dicts(groups), "intra_node_gbps": tab["intra_node_gbps"],
        "inter_node_gbps": tab["inter_node_gbps"], "locality_penalty": locality_penalty,
        "split": "proportional", "restart_s": restart_s,
    }
    if interference:
        out["interference"] = interference_table(classes)
    return out


def interference_table(classes: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """Gavel's pairwise co-location slowdowns (SPEC ``interference``), restricted to ``classes``."""
    full = load_table("gavel_interference.json")["interference"]
    keep = set(classes) if classes is not None else None
    return {a: {b: v for b, v in row.items() if keep is None or b in keep}
            for a, row in full.items() if keep is None or a in keep}


def _instance(name: str, problem: str, objective: str, cluster: dict, jobs: list[dict],
              source: str, extra: dict[str, Any]) -> Instance:
    total = sum(len(n["gpus"]) for n in cluster["nodes"])
    kept = [j for j in jobs if j["sizes"][0] <= total]
    if not kept:
        raise InputError(source, "", f"no job fits the cluster ({total} GPUs)")
    if problem == "static":
        for j in kept:
            j["arrival"] = 0.0
    d = {"format": "jctlab.instance/1", "name": name, "problem": problem, "objective": objective,
         "cluster": cluster, "jobs": kept,
         "source": dict(extra, dropped_too_large=len(jobs) - len(kept))}
    return Instance.from_dict(d, source=source)


def load_trace(path: str | os.PathLike, cluster: str | Sequence[int] = "4:4:4",
               gpus_per_server: str | Sequence[int] = "4", *, problem: str = "preemptive",
               objective: str = "mean_jct", interference: bool = False, restart_s: float = 0.0,
               max_jobs: int | None = None, name: str | None = None) -> Instance:
    """Instance of a Gavel physical-cluster trace (``gavel_traces/*.trace``, 10 tab-separated columns).

    Job j<i> = line i: Gavel job type, ``total_steps`` iterations, ``scale_factor`` GPUs (rigid),
    ``priority_weight`` as weight, ``arrival_time`` as arrival. Jobs larger than the cluster are
    dropped (counted in the instance's ``source.dropped_too_large``).
    """
    p = Path(path)
    df = read_csv(p, (), sep="\t", header=None, names=list(TRACE_COLUMNS), quoting=3,
                  dtype={"job_type": str})
    if df.shape[0] == 0:
        raise InputError(str(p), "", "empty trace")
    if df["arrival_time"].isna().any():
        raise InputError(str(p), "arrival_time", "expected 10 tab-separated columns per line")
    for col, kw in (("total_steps", {"positive": True}), ("scale_factor", {"positive": True}),
                    ("priority_weight", {"positive": True}), ("arrival_time", {"nonneg": True})):
        check_numeric(df, p, col, **kw)
    if max_jobs is not None:
        df = df.iloc[:max_jobs]
    types = job_types()
    jobs = [gavel_job(f"j{i}", jt, arrival=a, iterations=s, gpus=int(sf), weight=w, types=types,
                      source=f"{p}: line {i + 1}")
            for i, (jt, s, sf, w, a) in enumerate(zip(df["job_type"], df["total_steps"], df["scale_factor"],
                                                      df["priority_weight"], df["arrival_time"]))]
    cl = gavel_cluster(cluster, gpus_per_server, interference=interference,
                       classes=sorted(set(df["job_type"])), restart_s=restart_s)
    nm = name or f"gavel-{p.stem}-{':'.join(map(str, parse_counts(cluster, 3, 'cluster')))}"
    return _instance(nm, problem, objective, cl, jobs, str(p),
                     {"kind": "gavel_trace", "file": p.name})


def philly_vc_path(data_dir: str | os.PathLike | None = None) -> Path:
    return require_data_dir(data_dir, "Gavel's Philly-VC traces") / "gavel_philly_vc_traces" / "philly_vc_traces_seed0.csv"


def load_philly_vc(vc: str | None = None, cluster: str | Sequence[int] = "64:0:0",
                   gpus_per_server: str | Sequence[int] = "8", *, path: str | os.PathLike | None = None,
                   data_dir: str | os.PathLike | None = None, max_jobs: int | None = None,
                   problem: str = "preemptive", objective: str = "mean_jct", interference: bool = False,
                   restart_s: float = 0.0, name: str | None = None) -> Instance:
    """Instance of one virtual cluster of Gavel's Philly-VC traces (seed 0).

    ``vc`` is required when the file holds several VCs (the error lists them); ``max_jobs`` keeps
    the first N by arrival. Gavel's own cluster specs for these traces are 500:0:0 and 300:300:300
    (``cluster_specs*.json``); the default here is a smaller 64-V100 cluster of 8-GPU servers.
    Jobs with more GPUs than the cluster (Philly has 16..64-GPU jobs) are dropped and counted.
    """
    p = Path(path) if path is not None else philly_vc_path(data_dir)
    df = read_csv(p, VC_COLUMNS, dtype={"vc": str, "job_type": str})
    vcs = sorted(df["vc"].unique())
    if vc is None:
        if len(vcs) != 1:
            raise InputError(str(p), "vc", f"choose a virtual cluster: one of {', '.join(vcs)}")
        vc = vcs[0]
    df = df[df["vc"] == vc]
    if df.empty:
        raise InputError(str(p), "vc", f"no jobs of virtual cluster {vc!r}; known: {', '.join(vcs)}")
    for col, kw in (("total_steps", {"positive": True}), ("scale_factor_gpus", {"positive": True}),
                    ("arrival_time_s", {"nonneg": True})):
        check_numeric(df, p, col, **kw)
    df = df.sort_values(["arrival_time_s", "job_index"], kind="stable")
    if max_jobs is not None:
        df = df.iloc[:max_jobs]
    types = job_types()
    jobs = [gavel_job(f"j{int(i)}", jt, arrival=a, iterations=s, gpus=int(sf), types=types,
                      source=f"{p}: job {i}")
            for i, jt, s, a, sf in zip(df["job_index"], df["job_type"], df["total_steps"],
                                       df["arrival_time_s"], df["scale_factor_gpus"])]
    a0 = min(j["arrival"] for j in jobs)
    for j in jobs:
        j["arrival"] -= a0
    cl = gavel_cluster(cluster, gpus_per_server, interference=interference,
                       classes=sorted(set(df["job_type"])), restart_s=restart_s)
    nm = name or f"gavel-philly-{vc}-{len(jobs)}"
    return _instance(nm, problem, objective, cl, jobs, str(p),
                     {"kind": "gavel_philly_vc", "vc": vc})


def reference_iteration_time(job_type: str, n: int, gpu_type: str = "v100", gpus_per_node: int = 8,
                             *, locality_penalty: float = 1.0, types: dict[str, dict] | None = None,
                             intra_gbps: float | None = None, inter_gbps: float | None = None) -> float:
    """SPEC §2 iteration time of a Gavel job type on n GPUs of one type, packed on ⌈n/gpus_per_node⌉ nodes.

    Measured tables first (consolidated when one node, spread otherwise, else consolidated x
    locality penalty), else proportional split + ring all-reduce with the table's bandwidths.
    Returns inf when the type cannot host the job.
    """
    types = types if types is not None else job_types()
    jt = types[job_type]
    if intra_gbps is None or inter_gbps is None:
        tab = load_table("gavel_job_types.json")
        intra_gbps, inter_gbps = tab["intra_node_gbps"], tab["inter_node_gbps"]
    k = math.ceil(n / gpus_per_node)
    meas = jt["measured"].get(gpu_type, {})
    spread = jt["measured"].get(f"{gpu_type}/spread", {})
    if k == 1 and str(n) in meas:
        return 1.0 / meas[str(n)]
    if k > 1 and str(n) in spread:
        return 1.0 / spread[str(n)]
    if k > 1 and str(n) in meas:
        return locality_penalty / meas[str(n)]
    rho = jt["samples_per_s"].get(gpu_type, 0.0)
    if rho <= 0:
        return math.inf
    comm = 0.0 if n == 1 else 2 * (n - 1) / n * jt["comm_mb"] * 8 / 1000 / (intra_gbps if k == 1 else inter_gbps)
    return (jt["batch"] / (n * rho) + comm) * (locality_penalty if k > 1 else 1.0)


def fit_report() -> dict[str, Any]:
    """The comm_mb fit summary recorded in the shipped table."""
    tab = load_table("gavel_job_types.json")
    return {"intra_node_gbps": tab["intra_node_gbps"], "inter_node_gbps": tab["inter_node_gbps"], **tab["fit"]}


def predicted_vs_measured() -> list[tuple[str, str, int, float, float]]:
    """(job type, measured key, n, predicted s/iter by the all-reduce model, measured s/iter) for n ≥ 2."""
    tab = load_table("gavel_job_types.json")
    out = []
    for name, jt in tab["job_types"].items():
        for key, row in jt["measured"].items():
            gpu, _, spread = key.partition("/")
            rho = jt["samples_per_s"][gpu]
            bw = tab["inter_node_gbps"] if spread else tab["intra_node_gbps"]
            for n_s, tput in row.items():
                n = int(n_s)
                if n < 2 or rho <= 0:
                    continue
                pred = jt["batch"] / (n * rho) + 2 * (n - 1) / n * jt["comm_mb"] * 8 / 1000 / bw
                out.append((name, key, n, pred, 1.0 / tput))
    return out


__all__ = ["job_types", "job_type_names", "gavel_job", "gavel_cluster", "interference_table",
           "load_trace", "load_philly_vc", "philly_vc_path", "reference_iteration_time", "fit_report",
           "predicted_vs_measured"]

