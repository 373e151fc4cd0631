#!/usr/bin/env python
"""How each baseline's cost grows with the cluster: whole-process ``jctlab simulate`` runtime of every
registered policy on Philly-derived instances of growing size, and a log-log plot.

    python scripts/scaling.py --out results/scaling            # all sizes, all policies
    python scripts/scaling.py --out results/scaling --sizes 2000x512,8000x512 --policies 'fifo+*'
    python scripts/scaling.py --out results/scaling --no-run --plot docs/scaling.png --csv docs/scaling.csv

A size is JOBSxGPUS: the first JOBS jobs of the Philly trace (``jctlab make-instance philly``, seed 0,
360 s rounds for round-based policies) on GPUS/8 nodes of 8 V100s; ``82247x4096`` is the whole trace.
Each (size, policy) runs ``python -m jctlab.cli simulate`` in a fresh process, timed from outside
(wall and CPU seconds, load included), with ``--timeout`` seconds at most. The curve is capped: a
policy that timed out, or used more than ``--cap`` CPU seconds, at one size is not run at the larger
ones (recorded as ``skipped``); CPU seconds decide because the wall clock of a shared machine depends
on its load. Results are appended to ``OUT/scaling.jsonl``, so a
killed run resumes where it stopped. ``--versions label=PYTHONPATH,...`` runs every pair once per
version, interleaved (A, B, A, B...), for before/after comparisons on a busy machine: the old code is
a ``git archive`` of the old commit, put first on PYTHONPATH.

Needs the public data (``--data-dir``, default ../shared/data); without it, prints why and exits 0.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tqdm import tqdm

from baselines.families import PLACEMENTS, QUEUES
from baselines.gavel import POLICIES as GAVEL
from jctlab import jsonl
from jctlab.loaders import default_data_dir
from jctlab.registry import featured_policies, names
from rl.families import MAIFS_GREEDY

SIZES = ("2000x512", "8000x512", "20000x2048", "82247x4096")
FULL_TRACE = 82247
GPUS_PER_NODE = 8


def all_policies() -> list[str]:
    """Every registered policy: the plain ones, the members of the policy families, and the learned ones."""
    fam = [f"{q}+{p}" for q, p in itertools.product(QUEUES, PLACEMENTS)] + list(GAVEL)
    return sorted(names("jctlab.policies")) + fam + learned_policies()


def learned_policies() -> list[str]:
    """The shipped learned policies and the MAIFS-like policy's greedy variant."""
    return featured_policies() + [MAIFS_GREEDY]


def instance(work: Path, size: str, data: Path) -> Path:
    jobs, gpus = (int(x) for x in size.split("x"))
    path = work / f"philly-{jobs}x{gpus}.json"
    if not path.exists():
        cmd = [sys.executable, "-m", "jctlab.cli", "make-instance", "philly", "--data-dir", str(data),
               "--nodes", str(gpus // GPUS_PER_NODE), "--gpus-per-node", str(GPUS_PER_NODE), "--out", str(path)]
        if jobs < FULL_TRACE:
            cmd += ["--max-jobs", str(jobs)]
        subprocess.run(cmd, check=True, capture_output=True)
    return path


def run(inst: Path, policy: str, timeout: float, pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    # -P: no current directory first on sys.path, so that a version's PYTHONPATH is the code that runs
    cmd = [sys.executable, "-P", "-m", "jctlab.cli", "simulate", str(inst), "--policy", policy, "--json"]
    t = time.perf_counter()
    c0 = os.times()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "wall_s": time.perf_counter() - t, "cpu_s": None}
    wall = time.perf_counter() - t
    c1 = os.times()
    cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    if p.returncode != 0:
        return {"status": "error", "wall_s": wall, "cpu_s": cpu, "error": p.stderr.strip().splitlines()[-1:]}
    try:
        out = json.loads(p.stdout)
        obj, pre = out.get("objective"), out.get("metrics", {}).get("preemptions")
    except (ValueError, AttributeError):
        obj = pre = None
    # preemptions + jobs = the schedule's segments: the output a policy's run must emit and replay
    return {"status": "ok", "wall_s": wall, "cpu_s": cpu, "objective": obj, "preemptions": pre}


def load(path: Path) -> list[dict]:
    return jsonl.read_all(path, repair=True)


def measure(a, data: Path) -> None:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    res_path = out / "scaling.jsonl"
    done = load(res_path)
    seen = {(r["size"], r["policy"], r["version"], r.get("rep", 0)) for r in done}
    def over(r):
        return r["status"] == "timeout" or r["status"] == "ok" and r["cpu_s"] is not None and r["cpu_s"] > a.cap

    timed_out = {(r["policy"], r["version"]) for r in done if over(r)}
    versions = [v.split("=", 1) for v in a.versions.split(",")] if a.versions else [["current", ""]]
    pols = [p for p in all_policies() if any(fnmatch.fnmatch(p, g) for g in a.policies.split(","))]
    sizes = a.sizes.split(",")
    todo = [(s, p, r, lab, pp) for s in sizes for p in pols for r in range(a.repeat) for lab, pp in versions]
    todo = [t for t in todo if (t[0], t[1], t[3], t[2]) not in seen]
    with tqdm(todo, unit="run", file=sys.stderr) as bar:
        for size, pol, rep, lab, pp in bar:
            bar.set_postfix_str(f"{size} {pol} {lab}")
            if (pol, lab) in timed_out:
                r = {"status": "skipped", "wall_s": None, "cpu_s": None}
            else:
                r = run(instance(out, size, data), pol, a.timeout, pp or None)
                if over(r):
                    timed_out.add((pol, lab))
            rec = {"size": size, "policy": pol, "version": lab, "rep": rep, "timeout_s": a.timeout, "cap_s": a.cap,
                   "load1": os.getloadavg()[0], **r}
            jsonl.append(res_path, rec)


def best(rows: list[dict]) -> dict[tuple[str, str, str], dict]:
    """(size, policy, version) -> the run with the least wall time (a timeout where every run was one)."""
    out: dict[tuple[str, str, str], dict] = {}
    for r in rows:
        k = (r["size"], r["policy"], r["version"])
        cur = out.get(k)
        if cur is None or (r["status"] == "ok" and (cur["status"] != "ok" or r["wall_s"] < cur["wall_s"])):
            out[k] = r
    return out


def cell(r: dict | None, key: str) -> str:
    if r is None:
        return ""
    if r["status"] == "ok":
        return f"{r[key]:.1f}" if r[key] is not None else ""
    if r["status"] == "timeout":
        return f"> {r['timeout_s']:.0f}"
    return r["status"]


def table(rows: list[dict]) -> str:
    b = best(rows)
    sizes = [s for s in SIZES if any(k[0] == s for k in b)] + sorted({k[0] for k in b} - set(SIZES))
    versions = sorted({k[2] for k in b})
    pols = [p for p in all_policies() if any(k[1] == p for k in b)]
    head = [f"{s.replace('x', ' jobs / ')} GPUs" + (f" ({v})" if len(versions) > 1 else "")
            for s in sizes for v in versions]
    lines = ["| policy | " + " | ".join(head) + " |", "|---" * (len(head) + 1) + "|"]
    for p in pols:
        cells = [f"{cell(b.get((s, p, v)), 'wall_s')} ({cell(b.get((s, p, v)), 'cpu_s')})" for s in sizes for v in versions]
        lines.append(f"| {p} | " + " | ".join(c if c != " ()" else "" for c in cells) + " |")
    return "\n".join(lines)


def write_csv(rows: list[dict], path: Path) -> None:
    """One row per (size, policy, version): the best run (see :func:`best`)."""
    b = best(rows)
    order = {p: i for i, p in enumerate(all_policies())}
    keys = sorted(b, key=lambda k: (int(k[0].split("x")[0]), order.get(k[1], len(order)), k[1], k[2]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["jobs", "gpus", "policy", "version", "status", "wall_s", "cpu_s", "load1", "timeout_s"])
        for k in keys:
            r = b[k]
            jobs, gpus = k[0].split("x")
            w.writerow([jobs, gpus, k[1], k[2], r["status"],
                        "" if r["wall_s"] is None else f"{r['wall_s']:.2f}",
                        "" if r["cpu_s"] is None else f"{r['cpu_s']:.2f}", f"{r['load1']:.1f}", r["timeout_s"]])


def plot(rows: list[dict], path: Path, version: str | None) -> None:
    import matplotlib          # only the plotting step needs it
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    b = best(rows)
    versions = sorted({k[2] for k in b})
    version = version or versions[-1]
    groups = {
        "packed and random placements": [f"{q}+{p}" for p in PLACEMENTS if p.startswith(("packed", "random"))
                                         for q in QUEUES],
        "PM-First and PAL": [f"{q}+{p}" for p in ("pm-first", "pal") for q in QUEUES],
        "Gavel": list(GAVEL),
        "other registered policies": sorted(names("jctlab.policies")) + learned_policies(),
    }
    sizes = sorted({k[0] for k in b}, key=lambda s: int(s.split("x")[0]))
    fig, axes = plt.subplots(2, 2, figsize=(12, 9), sharex=True, sharey=True)
    for ax, (title, pols) in zip(axes.flat, groups.items()):
        for p in pols:
            xs, ys, cut = [], [], None
            for s in sizes:
                r = b.get((s, p, version))
                if r is None:
                    continue
                if r["status"] == "ok":
                    xs.append(int(s.split("x")[0]))
                    ys.append(r["cpu_s"])
                elif r["status"] == "timeout" and cut is None:
                    cut = (int(s.split("x")[0]), r["timeout_s"])
            if not xs and cut is None:
                continue
            line, = ax.plot(xs, ys, marker="o", ms=3, lw=1, label=p)
            if cut is not None:
                ax.plot([cut[0]], [cut[1]], marker="^", color=line.get_color(), ms=7)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    for ax in axes[1]:
        ax.set_xlabel("jobs (Philly prefix; 512, 512, 2,048, 4,096 GPUs)")
    for ax in axes[:, 0]:
        ax.set_ylabel("whole-process CPU seconds (user + system)")
    fig.suptitle(f"jctlab simulate on Philly instances ({version}); ▲ = ran out of wall time at that size; "
                 "a line that stops went past the CPU cap", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the instances and scaling.jsonl")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--sizes", default=",".join(SIZES))
    ap.add_argument("--policies", default="*", help="globs, comma list")
    ap.add_argument("--timeout", type=float, default=600.0, help="wall seconds per run at most")
    ap.add_argument("--cap", type=float, default=60.0,
                    help="CPU seconds: a policy above it at one size is skipped at the larger ones")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--versions", default="", help="label=PYTHONPATH,... (interleaved); default: this checkout")
    ap.add_argument("--plot", type=Path, default=None, help="write the log-log plot here")
    ap.add_argument("--plot-version", default=None)
    ap.add_argument("--csv", type=Path, default=None, help="write the best run of each point here")
    ap.add_argument("--table", action="store_true", help="print the markdown table of OUT/scaling.jsonl")
    ap.add_argument("--no-run", action="store_true", help="only plot / print what OUT holds")
    a = ap.parse_args(argv)
    if not a.no_run:
        data = a.data_dir or default_data_dir()
        if data is None:
            print("no data directory (JCTLAB_DATA or ../shared/data): the Philly trace is needed; nothing run")
            return 0
        measure(a, Path(data))
    rows = load(Path(a.out) / "scaling.jsonl")
    if a.plot is not None and rows:
        plot(rows, a.plot, a.plot_version)
    if a.csv is not None and rows:
        write_csv(rows, a.csv)
    if a.table and rows:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
