#!/usr/bin/env python3
"""Derive jctlab's small shipped tables (jctlab/tables/*.json) from the raw public data.

Usage:  python scripts/derive_tables.py [--data-dir ../shared/data] [--out jctlab/tables]

The raw files are never copied into the repository; only the small figures below are written.
Sources, commits, licences and citations: jctlab/tables/SOURCES.md (kept by hand, figures quoted
there are printed by this script).

Tables:
  gavel_job_types.json    Gavel's 26 job types: batch, 1-GPU samples/s per GPU type, measured
                          whole-job iterations/s (SPEC `measured`), fitted all-reduce `comm_mb`.
  gavel_interference.json pairwise 1-GPU co-location slowdowns (SPEC `interference` coefficients).
  pal_profiles.json       PAL's per-run and per-GPU normalised variability values per class, PAL's
                          32-GPU cluster file and the PAL artifact's 64-GPU factor table.
  synergy_cpu_mem.json    Synergy CPU x memory sensitivity as SPEC `cpu_mem` levels.
  alibaba_pai_shapes.json Alibaba PAI 2020 machine shapes (GPU type, GPUs, CPUs, memory, count).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from jctlab.loaders.pal import PROFILE_FILE as PAL_CLASS_FILE, read_profiles

REPO = Path(__file__).resolve().parent.parent
GPU_TYPES = ("k80", "p100", "v100")
SIZES = (1, 2, 4, 8)

# All-reduce bandwidths used for the comm_mb fit (SPEC §2). Only their ratio changes the fit
# quality (comm_mb scales with the absolute values); see choose_bandwidths().
INTRA_GRID = (100.0,)
INTER_GRID = (10.0, 25.0, 40.0, 50.0, 100.0)


def _write(out: Path, name: str, obj) -> None:
    path = out / name
    path.write_text(json.dumps(obj, indent=1, sort_keys=False) + "\n")
    print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path} "
          f"({path.stat().st_size / 1024:.1f} KiB)")


def _job_type_meta(name: str) -> tuple[str, int]:
    """'ResNet-50 (batch size 64)' -> ('ResNet-50', 64); types without a batch get batch 1."""
    if "(batch size" in name:
        model, rest = name.split(" (batch size ")
        return model, int(rest.rstrip(")"))
    return name, 1


# ---------------------------------------------------------------- Gavel
def gavel_tables(data: Path) -> tuple[dict, dict]:
    iso = pd.read_csv(data / "gavel_throughputs" / "isolated_throughputs.csv")
    iso = iso[iso["source"] == "simulation"]
    types = sorted(iso["job_type"].unique())
    jt: dict[str, dict] = {}
    for name in types:
        model, batch = _job_type_meta(name)
        rows = iso[iso["job_type"] == name]
        measured: dict[str, dict[str, float]] = {}
        sps: dict[str, float] = {}
        for (gpu, cons), grp in rows.groupby(["gpu_type", "consolidated"]):
            key = gpu if cons == 1 else f"{gpu}/spread"
            tab = {}
            for sf, tput in zip(grp["scale_factor"], grp["throughput_steps_per_s"]):
                if tput > 0 and (cons == 1 or sf > 1):
                    tab[str(int(sf))] = float(tput)
            if tab:
                measured[key] = dict(sorted(tab.items(), key=lambda kv: int(kv[0])))
            if cons == 1:
                one = grp[grp["scale_factor"] == 1]["throughput_steps_per_s"]
                sps[gpu] = float(one.iloc[0]) * batch if len(one) else 0.0
        jt[name] = {"model": model, "batch": batch,
                    "samples_per_s": {g: sps.get(g, 0.0) for g in GPU_TYPES},
                    "measured": {k: measured[k] for k in sorted(measured)}}

    intra, inter, fit = choose_bandwidths(jt)
    for name, (comm, errs) in fit["per_type"].items():
        jt[name]["comm_mb"] = round(comm, 3)
        if len(errs) == 0:
            continue
        jt[name]["fit_rel_err"] = {"median": round(float(np.median(errs)), 4),
                                   "max": round(float(np.max(errs)), 4), "points": len(errs)}
    allerr = np.concatenate([e for _, e in fit["per_type"].values()])
    table = {
        "format": "jctlab.table/gavel_job_types/1",
        "source": "stanford-futuredata/gavel@c4fa40097339e9608ab71fd64c8bdea96a5e4a4c "
                  "scheduler/simulation_throughputs.json (MIT); Narayanan et al., OSDI'20",
        "units": {"samples_per_s": "samples/s of one GPU (steps/s x batch)",
                  "measured": "iterations/s of the whole job, per GPU type and GPU count",
                  "comm_mb": "MB all-reduced per iteration (SPEC §2), fitted"},
        "intra_node_gbps": intra, "inter_node_gbps": inter,
        "fit": {"model": "SPEC §2 proportional split + ring all-reduce, least squares on the "
                         "relative error of iteration time, 2/4/8 GPUs, consolidated and spread, "
                         "all GPU types with a measurement",
                "median_rel_err": round(float(np.median(allerr)), 4),
                "p90_rel_err": round(float(np.quantile(allerr, 0.9)), 4),
                "max_rel_err": round(float(np.max(allerr)), 4),
                "points": int(allerr.size)},
        "job_types": jt,
    }
    return table, gavel_interference(data, types)


def _fit_points(job: dict, intra: float, inter: float):
    """Rows (compute_s, comm_s_per_MB, measured_s) of one job type's multi-GPU measurements."""
    pts = []
    for key, tab in job["measured"].items():
        gpu, _, spread = key.partition("/")
        rho = job["samples_per_s"][gpu]
        if rho <= 0:
            continue
        bw = inter if spread else intra
        for n_s, tput in tab.items():
            n = int(n_s)
            if n < 2:
                continue
            compute = job["batch"] / (n * rho)
            per_mb = 2 * (n - 1) / n * 8 / 1000 / bw
            pts.append((compute, per_mb, 1.0 / tput))
    return np.array(pts)


def fit_comm_mb(job: dict, intra: float, inter: float) -> tuple[float, np.ndarray]:
    """Least-squares comm_mb ≥ 0 minimising Σ((compute + x·comm_mb − t)/t)²; returns (comm_mb, |rel err|)."""
    p = _fit_points(job, intra, inter)
    if p.size == 0:                                        # 1-GPU-only job types (A3C, CycleGAN)
        return 0.0, np.zeros(0)
    c, x, t = p[:, 0], p[:, 1], p[:, 2]
    a, b = x / t, 1.0 - c / t
    comm = max(0.0, float(a @ b / (a @ a)))
    return comm, np.abs((c + x * comm - t) / t)


def choose_bandwidths(jt: dict) -> tuple[float, float, dict]:
    best = None
    for intra in INTRA_GRID:
        for inter in INTER_GRID:
            per = {n: fit_comm_mb(j, intra, inter) for n, j in jt.items()}
            err = np.concatenate([e for _, e in per.values()])
            score = float(np.mean(err ** 2))
            print(f"  fit intra={intra} inter={inter}: rms rel err {math.sqrt(score):.4f}, "
                  f"median {np.median(err):.4f}")
            if best is None or score < best[0]:
                best = (score, intra, inter, per)
    _, intra, inter, per = best
    return intra, inter, {"per_type": per}


def gavel_interference(data: Path, types: list[str]) -> dict:
    """interference[a][b] = mean over GPU types of (isolated_a / colocated_a − 1), 1-GPU pairs."""
    co = pd.read_csv(data / "gavel_throughputs" / "colocated_throughputs_simulation.csv")
    iso = pd.read_csv(data / "gavel_throughputs" / "isolated_throughputs.csv")
    iso = iso[(iso["source"] == "simulation") & (iso["consolidated"] == 1) & (iso["scale_factor"] == 1)]
    iso_t = {(g, j): t for g, j, t in zip(iso["gpu_type"], iso["job_type"], iso["throughput_steps_per_s"])}
    co = co[(co["consolidated"] == 1) & (co["scale_factor_a"] == 1) & (co["scale_factor_b"] == 1)]
    co = co[co["throughput_a_steps_per_s"] > 0]
    co = co.assign(iso_a=[iso_t.get((g, j), 0.0) for g, j in zip(co["gpu_type"], co["job_type_a"])])
    co = co[co["iso_a"] > 0]
    co = co.assign(extra=(co["iso_a"] / co["throughput_a_steps_per_s"] - 1.0).clip(lower=0.0))
    mean = co.groupby(["job_type_a", "job_type_b"])["extra"].mean()
    inter: dict[str, dict[str, float]] = {}
    for (a, b), v in mean.items():
        inter.setdefault(a, {})[b] = round(float(v), 4)
    vals = np.array([v for row in inter.values() for v in row.values()])
    print(f"  interference: {vals.size} pairs, median {np.median(vals):.3f}, max {vals.max():.3f}")
    return {
        "format": "jctlab.table/gavel_interference/1",
        "source": "stanford-futuredata/gavel@c4fa40097339e9608ab71fd64c8bdea96a5e4a4c "
                  "scheduler/simulation_throughputs.json (MIT); Narayanan et al., OSDI'20",
        "definition": "interference[a][b] = mean over k80/p100/v100 of isolated_a/colocated_a - 1 "
                      "(clipped at 0) for two 1-GPU jobs space-sharing one GPU; pairs Gavel marks "
                      "infeasible (throughput 0) are absent. Measured for GPU sharing, so it "
                      "overstates the node-sharing slowdown SPEC applies it to.",
        "interference": {a: dict(sorted(inter[a].items())) for a in sorted(inter)},
    }


# ---------------------------------------------------------------- PAL


def pal_tables(data: Path) -> dict:
    root = data / "pal_gpu_variability"
    pools = read_profiles(root)
    per_run, per_gpu = pools["per_run"], pools["per_gpu"]
    c32 = pd.read_csv(root / "32gpu-variability.csv")
    art_path = data / "pal_sia_philly_workloads" / "artifact_inputs" / "perfvar_seed42_64gpus.csv"
    art = pd.read_csv(art_path)
    cols = [f"PerfVar_class{c}" for c in "ABCD"]
    return {
        "format": "jctlab.table/pal_profiles/1",
        "source": "hal-uw/blox-pal@da726cabd3113ff50cb9860b040b479fa7114221 aggregated_data/sim/*-longhorn-agg.csv, "
                  "32gpu-variability.csv, profiles.json (MIT); Sinha et al. SC'22; PAL (Jain et al.)",
        "class_profile": PAL_CLASS_FILE,
        "definition": "values are perf / median(perf) over all runs of the profile file (time metric: "
                      ">1 = slower). per_run: every run in file order (PAL draws random.choice from "
                      "this list); per_gpu: worst run per physical GPU keyed cabinet-node-device.",
        "per_run": per_run,
        "per_gpu": per_gpu,
        "cluster32": {"gpus_per_node": 4, "node": [int(v) for v in c32["Node_ID"]],
                      "factors": {c: [float(v) for v in c32[f"PerfVar_class{c}"]] for c in "ABCD"}},
        "artifact_seed42_64gpus": {
            "note": "PAL artifact (blox-pal branch artifact, tag artifact-v1.4) A1 run's factor table; "
                    "equals random.seed(42) then, per GPU 0..63, random.choice(per_run[class profile]) "
                    "for classes A, B, C, D in turn",
            "gpus_per_node": 4,
            "factors": {c: [float(v) for v in art[col]] for c, col in zip("ABCD", cols)}},
    }


# ---------------------------------------------------------------- Synergy
def synergy_table(data: Path) -> dict:
    root = data / "synergy_resource_sensitivity"
    d = pd.read_csv(root / "cpu_mem_throughput_matrix_long.csv")
    summ = pd.read_csv(root / "model_summary.csv")
    models = {}
    for variant in sorted(d["variant"].unique()):
        sub = d[(d["variant"] == variant) & (d["profile_gpus"] == 1)]
        out = {}
        for model, grp in sub.groupby("model"):
            grp = grp.sort_values(["cpus_per_gpu", "mem_gb_per_gpu"])
            fair = grp[(grp["cpus_per_gpu"] == 3) & (grp["mem_gb_per_gpu"] == 62.5)]["norm_throughput"]
            f = float(fair.iloc[0])
            levels = [[int(c), float(m), round(float(t) / f, 4)]
                      for c, m, t in zip(grp["cpus_per_gpu"], grp["mem_gb_per_gpu"], grp["norm_throughput"])]
            s = summ[(summ["variant"] == variant) & (summ["model"] == model) & (summ["profile_gpus"] == 1)]
            out[model] = {"batch": int(s["batch_size"].iloc[0]), "iter_time_s": float(s["iter_time_s"].iloc[0]),
                          "cpu_mem": {"levels": levels}}
        models[variant] = out
    return {
        "format": "jctlab.table/synergy_cpu_mem/1",
        "source": "msr-fiddle/synergy@1bb2bed6edc9c5f953d0b7f0a40e4fdad053489c simulator/models*/<model>_1.py (MIT); "
                  "Mohan et al., OSDI'22",
        "fair_share": {"cpus_per_gpu": 3, "mem_gb_per_gpu": 62.5,
                       "server": {"gpus": 8, "cpus": 24, "mem_gb": 500}},
        "definition": "levels [cpus_per_gpu, mem_gb_per_gpu, speedup]; speedup = throughput / throughput at "
                      "the fair share (3 CPUs, 62.5 GB per GPU: a 24-CPU, 500-GB, 8-GPU server split "
                      "evenly), so that level is 1.0. From the 1-GPU profiles (Synergy's simulator uses "
                      "them for every GPU count). variant 'models' is the default; models-4/5/6 go with "
                      "Synergy's configs/cluster_4/5/6.ini.",
        "models": models,
    }


# ---------------------------------------------------------------- Alibaba
def alibaba_table(data: Path) -> dict:
    d = pd.read_csv(data / "alibaba_pai_gpu_v2020" / "pai_machine_spec.csv", header=None,
                    names=["machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu"])
    g = (d.groupby(["gpu_type", "cap_gpu", "cap_cpu", "cap_mem"]).size().reset_index(name="count")
         .sort_values(["count", "gpu_type"], ascending=[False, True]))
    shapes = [{"gpu_type": t.lower(), "gpus": int(n), "cpus": int(c), "mem_gb": float(m), "count": int(k)}
              for t, n, c, m, k in zip(g["gpu_type"], g["cap_gpu"], g["cap_cpu"], g["cap_mem"], g["count"])]
    return {
        "format": "jctlab.table/alibaba_pai_shapes/1",
        "source": "alibaba/clusterdata cluster-trace-gpu-v2020 pai_machine_spec (via "
                  "qzweng/clusterdata-cluster-trace-gpu-v2020-data@e60d925), CC BY 4.0; Weng et al., NSDI'22",
        "definition": "machine shapes and how many of the 1,897 machines have each; gpu_type lower-cased "
                      "('misc' = unspecified type, 'cpu' = no GPU)",
        "machines": int(len(d)), "gpus": int(d["cap_gpu"].sum()),
        "shapes": shapes,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    ap.add_argument("--out", type=Path, default=REPO / "jctlab" / "tables")
    args = ap.parse_args(argv)
    if not args.data_dir.is_dir():
        print(f"{args.data_dir}: no such data directory", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    gavel, interf = gavel_tables(args.data_dir)
    f = gavel["fit"]
    print(f"  gavel comm_mb fit: intra {gavel['intra_node_gbps']} / inter {gavel['inter_node_gbps']} Gbps, "
          f"median rel err {f['median_rel_err']}, p90 {f['p90_rel_err']}, max {f['max_rel_err']} "
          f"over {f['points']} points")
    _write(args.out, "gavel_job_types.json", gavel)
    _write(args.out, "gavel_interference.json", interf)
    _write(args.out, "pal_profiles.json", pal_tables(args.data_dir))
    _write(args.out, "synergy_cpu_mem.json", synergy_table(args.data_dir))
    _write(args.out, "alibaba_pai_shapes.json", alibaba_table(args.data_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
