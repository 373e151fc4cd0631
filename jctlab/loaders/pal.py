"""PAL (Jain et al.; variability data Sinha et al., SC'22): Sia-Philly workloads and per-GPU variability.

Workloads (``pal_sia_philly_workloads/workload-N.csv``: job_id, num_gpus, submit_time, duration,
model) put 160 jobs on N nodes x G V100s. ``duration`` is an iteration count. PAL's simulator charges
``iterations x base time of the model x the largest factor among the job's GPUs for its class x λ if
it spans nodes``: SPEC §5's special case ``split = equal``, ``comm_mb = 0``, ``locality_penalty = λ``.

Encoding (exact under SPEC §2): ``batch = num_gpus`` and ``samples_per_s = {"v100": 1/base}``, so
``compute = batch / (n · min_g ρ_g) = base · max_g variability_g`` whatever n is (PAL's iteration
time does not shrink with n); jobs are rigid (``sizes = [num_gpus]``) and carry no ``measured``.

Variability (``variability`` argument), per GPU and class A..D (A = ResNet-50 profile, B and C =
BERT, D = PageRank, from PAL's profiles.json), values = perf / median over all runs of the profile:

- ``"pal"``: PAL's own sampler as its artifact ran it: ``random.seed(seed)``, then for every GPU in
  order and class A, B, C, D in turn ``random.choice`` over all runs of the class profile. With
  seed 42 and 64 GPUs this reproduces the artifact's ``perfvar_seed42_64gpus.csv`` exactly.
- ``"identity"``: every GPU is one measured physical GPU (drawn with a numpy generator from all GPUs
  measured on Longhorn) and keeps its worst-run value in every class where that GPU was measured;
  in a class where it was not, an independent draw from that class's measured GPUs.
- ``"artifact"``: the artifact's 64-GPU table (shipped; or read from ``artifact_csv``).
- ``"cluster32"``: PAL's 32-GPU cluster file (8 nodes x 4), cycled if the cluster is larger.
- ``"none"``: all 1.0.

``binned=True`` replaces each class's factors by PAL's k-means bin factors (what PAL's placement
sees, :func:`bin_factors`) instead of the raw per-GPU values PAL's simulator charges.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import InputError
from ..model import Instance
from ._common import check_numeric, load_table, read_csv, require_data_dir

BASE_ITER_S = {"BERT": 0.179, "DCGAN": 0.0469, "GPT2": 3.5714, "PointNet": 0.28125,
               "resnet50": 0.1754, "vgg19": 0.3006}
MODEL_CLASS = {"resnet50": "A", "vgg19": "C", "PointNet": "D", "GPT2": "B", "DCGAN": "B", "BERT": "B"}
CLASSES = ("A", "B", "C", "D")
COLUMNS = ("job_id", "num_gpus", "submit_time", "duration", "model")
VARIABILITY_MODES = ("pal", "identity", "artifact", "cluster32", "none")


def workload_path(workload: int | str, data_dir: str | os.PathLike | None = None) -> Path:
    return require_data_dir(data_dir, "PAL's Sia-Philly workloads") / "pal_sia_philly_workloads" / f"workload-{workload}.csv"


# ------------------------------------------------------------------ variability
def sample_variability(n_gpus: int, mode: str = "pal", seed: int = 42, *,
                       artifact_csv: str | os.PathLike | None = None) -> dict[str, list[float]]:
    """Per-class factor lists of length ``n_gpus`` (class -> [factor of GPU 0, 1, ...]); see module doc."""
    prof = load_table("pal_profiles.json")
    cp = prof["class_profile"]
    if mode == "none":
        return {c: [1.0] * n_gpus for c in CLASSES}
    if mode == "pal":
        rnd = random.Random(seed)
        pools = {c: prof["per_run"][cp[c]] for c in CLASSES}
        out: dict[str, list[float]] = {c: [] for c in CLASSES}
        for _ in range(n_gpus):
            for c in CLASSES:
                out[c].append(rnd.choice(pools[c]))
        return out
    if mode == "identity":
        rng = np.random.default_rng(seed)
        per_gpu = prof["per_gpu"]                          # profile -> {physical GPU: value}
        ids = sorted(set().union(*(set(v) for v in per_gpu.values())))
        pick = rng.integers(len(ids), size=n_gpus)
        by_prof: dict[str, list[float]] = {}
        for name in sorted(set(cp.values())):
            pool = list(per_gpu[name].values())
            fallback = rng.integers(len(pool), size=n_gpus)
            by_prof[name] = [per_gpu[name].get(ids[pick[g]], pool[fallback[g]]) for g in range(n_gpus)]
        return {c: list(by_prof[cp[c]]) for c in CLASSES}
    if mode == "artifact":
        if artifact_csv is not None:
            cols = ["GPU_ID"] + [f"PerfVar_class{c}" for c in CLASSES]
            df = read_csv(artifact_csv, cols)
            for col in cols[1:]:
                check_numeric(df, artifact_csv, col, nonneg=True)
            df = df.sort_values("GPU_ID")
            table = {c: [float(v) for v in df[f"PerfVar_class{c}"]] for c in CLASSES}
            src = str(artifact_csv)
        else:
            table = prof["artifact_seed42_64gpus"]["factors"]
            src = "pal_profiles.json: artifact_seed42_64gpus"
        if n_gpus > len(table["A"]):
            raise InputError(src, "", f"the artifact table has {len(table['A'])} GPUs, the cluster {n_gpus}")
        return {c: table[c][:n_gpus] for c in CLASSES}
    if mode == "cluster32":
        table = prof["cluster32"]["factors"]
        return {c: [table[c][g % len(table[c])] for g in range(n_gpus)] for c in CLASSES}
    raise InputError("variability", "", f"{mode!r}: one of {', '.join(VARIABILITY_MODES)}")


def kmeans_1d(x: np.ndarray, k: int, iters: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic 1-D k-means (Lloyd from quantile starts): (centres, label of each value)."""
    x = np.asarray(x, dtype=float)
    k = max(1, min(k, len(np.unique(x))))
    centres = np.quantile(x, (np.arange(k) + 0.5) / k)
    for _ in range(iters):
        labels = np.abs(x[:, None] - centres[None, :]).argmin(axis=1)
        new = np.array([x[labels == i].mean() if np.any(labels == i) else centres[i] for i in range(k)])
        if np.allclose(new, centres):
            break
        centres = new
    labels = np.abs(x[:, None] - centres[None, :]).argmin(axis=1)
    return centres, labels


def bins(values: Sequence[float], clusters: int = 2, outlier_sigma: float = 3.0) -> tuple[list[float], list[int]]:
    """PAL's k-means bins of one class: (bin factors, bin of each value).

    As in PAL's placement (and its artifact run): ``clusters`` bins for the values at most
    mean + ``outlier_sigma``·σ, plus one bin per outlier above that; a bin's factor is its centre
    divided by the median of all bin centres (so the median bin factor is 1.0).
    """
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return [], []
    sd = x.std(ddof=1) if x.size > 1 else 0.0
    out = x > x.mean() + outlier_sigma * sd
    centres_in, labels = kmeans_1d(x[~out], clusters) if (~out).any() else (np.zeros(0), np.zeros(0, int))
    centres = np.concatenate([centres_in, x[out]])
    assign = np.empty(x.size, dtype=int)
    assign[~out] = labels
    assign[out] = len(centres_in) + np.arange(out.sum())
    med = float(np.median(centres))
    return [float(c / med) for c in centres], [int(a) for a in assign]


def bin_factors(values: Sequence[float], clusters: int = 2, outlier_sigma: float = 3.0) -> list[float]:
    """Each value replaced by its PAL bin factor (see :func:`bins`): what PAL's placement sees."""
    factors, assign = bins(values, clusters, outlier_sigma)
    return [factors[a] for a in assign]


# ------------------------------------------------------------------ instance
def load_pal(workload: int | str = 1, *, path: str | os.PathLike | None = None,
             data_dir: str | os.PathLike | None = None, nodes: int = 16, gpus_per_node: int = 4,
             locality_penalty: float = 1.7, variability: str = "pal", seed: int = 42,
             binned: bool = False, artifact_csv: str | os.PathLike | None = None,
             background: bool = False, problem: str = "preemptive", objective: str = "mean_jct",
             restart_s: float = 0.0, max_jobs: int | None = None, name: str | None = None) -> Instance:
    """Instance of PAL's Sia-Philly workload N on ``nodes`` x ``gpus_per_node`` V100s (default 16 x 4).

    ``background=True`` also adds the artifact's untracked background jobs
    (``artifact_inputs/workload-N-background.csv``, copies of trace jobs) named ``bg<job_id>`` with
    the optional job field ``"tracked": false`` (SPEC extension, default true): they compete for
    GPUs, but PAL's mean JCT counts only the tracked jobs.
    """
    p = Path(path) if path is not None else workload_path(workload, data_dir)
    df = read_csv(p, COLUMNS, dtype={"model": str})
    for col, kw in (("num_gpus", {"positive": True}), ("submit_time", {"nonneg": True}),
                    ("duration", {"positive": True})):
        check_numeric(df, p, col, **kw)
    bad = sorted(set(df["model"]) - set(BASE_ITER_S))
    if bad:
        raise InputError(str(p), "model", f"unknown model {bad[0]!r}; known: {', '.join(sorted(BASE_ITER_S))}")
    if max_jobs is not None:
        df = df.iloc[:max_jobs]
    n_gpus = nodes * gpus_per_node
    if nodes < 1 or gpus_per_node < 1:
        raise InputError("nodes", "", "the cluster needs at least one node with one GPU")
    big = df[df["num_gpus"] > n_gpus]
    if len(big):
        raise InputError(str(p), "num_gpus", f"job {big['job_id'].iloc[0]} needs {big['num_gpus'].iloc[0]} "
                         f"GPUs, the cluster has {n_gpus}")

    def job(jname: str, r: Any, tracked: bool) -> dict[str, Any]:
        n = int(r.num_gpus)
        return {"name": jname, "model": r.model, "class": MODEL_CLASS[r.model],
                "arrival": 0.0 if problem == "static" else float(r.submit_time),
                "batch": n, "iterations": float(r.duration),
                "samples_per_s": {"v100": 1.0 / BASE_ITER_S[r.model]}, "comm_mb": 0.0,
                "sizes": [n], **({} if tracked else {"tracked": False})}

    jobs = [job(f"j{int(r.job_id)}", r, True) for r in df.itertuples(index=False)]
    if background:
        bp = p.parent / "artifact_inputs" / f"{p.stem}-background.csv"
        bg = read_csv(bp, ("job_id", "copy_of_job_id", "submit_time"))
        check_numeric(bg, bp, "submit_time", nonneg=True)
        by_id = {int(r.job_id): r for r in df.itertuples(index=False)}
        for r in bg.itertuples(index=False):
            src = by_id.get(int(r.copy_of_job_id))
            if src is None:
                raise InputError(str(bp), "copy_of_job_id", f"job {r.copy_of_job_id} is not in {p.name}")
            jobs.append(job(f"bg{int(r.job_id)}", src._replace(submit_time=r.submit_time), False))

    factors = sample_variability(n_gpus, variability, seed, artifact_csv=artifact_csv)
    if binned:
        factors = {c: bin_factors(v) for c, v in factors.items()}
    nodes_d = []
    for k in range(nodes):
        gpus = []
        for g in range(k * gpus_per_node, (k + 1) * gpus_per_node):
            gpus.append({"type": "v100", "variability": {c: factors[c][g] for c in CLASSES}})
        nodes_d.append({"name": f"n{k}", "cpus": 3.0 * gpus_per_node, "mem_gb": 62.5 * gpus_per_node, "gpus": gpus})
    d = {
        "format": "jctlab.instance/1",
        "name": name or f"pal-w{workload if path is None else p.stem}-{nodes}x{gpus_per_node}-{variability}{'-binned' if binned else ''}-s{seed}",
        "problem": problem, "objective": objective,
        "cluster": {"nodes": nodes_d, "intra_node_gbps": 100.0, "inter_node_gbps": 25.0,
                    "locality_penalty": locality_penalty, "split": "equal", "restart_s": restart_s},
        "jobs": jobs,
        "source": {"kind": "pal", "file": p.name, "variability": variability, "seed": seed,
                   "binned": binned, "background_jobs": len(jobs) - len(df)},
    }
    return Instance.from_dict(d, source=str(p))


__all__ = ["load_pal", "sample_variability", "bins", "bin_factors", "kmeans_1d", "workload_path",
           "BASE_ITER_S", "MODEL_CLASS", "VARIABILITY_MODES"]
