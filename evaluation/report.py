"""``jctlab report RUN_DIR``: one self-contained HTML file (images embedded as PNG data) and Markdown
beside it (images as files in ``RUN_DIR/report/``).

Contents: per suite and method the mean / p90 / worst gap with the reference kind and bootstrap
intervals, win rate against the best baseline, runtime and decision latency; per-seed gaps; the
instance x method gap grid; plots of the gap distribution per method, the JCT CDF, gap against instance
size, solve or decision latency against size, and for one instance the Gantt charts of the reference
schedule and of each method's schedule side by side. The page has no script.
"""

from __future__ import annotations

import base64
import html
import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")   # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from jctlab.errors import InputError  # noqa: E402
from jctlab.model import load_instance, load_schedule  # noqa: E402

from .gantt import gantt_figure  # noqa: E402
from .runner import load_run  # noqa: E402
from .store import read_rows  # noqa: E402
from .suites import Suite  # noqa: E402
from .table import gap_grid_markdown, per_seed_markdown, summary_markdown  # noqa: E402

MAX_GANTTS = 8


@dataclass(frozen=True)
class Figure:
    name: str
    caption: str
    png: bytes


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=110)
    finally:
        plt.close(fig)
    return buf.getvalue()


def _scored(table: pd.DataFrame) -> pd.DataFrame:
    return table[(table["valid"] == True) & table["gap"].notna()]  # noqa: E712


def gap_distribution(table: pd.DataFrame) -> Figure | None:
    ok = _scored(table)
    if ok.empty:
        return None
    methods = list(dict.fromkeys(ok["method"]))
    data = [100 * ok.loc[ok["method"] == m, "gap"].to_numpy(float) for m in methods]
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(methods) + 2), 3.6))
    ax.boxplot(data, showfliers=False)
    rng = np.random.default_rng(0)
    for i, d in enumerate(data, start=1):
        ax.scatter(i + rng.uniform(-0.15, 0.15, len(d)), d, s=8, alpha=0.6, zorder=3)
    ax.set_xticks(range(1, len(methods) + 1))
    ax.set_xticklabels(methods, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("gap to reference (%)")
    ax.set_title("Gap per method (a box per method, a dot per cell; against lb: an upper bound)", fontsize=9)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return Figure("gap_distribution", "Gap distribution per method", _png(fig))


#: s: JCTs above this are drawn at it (no real job takes 10^200 s; a row may say so)
MAX_PLOTTED_S = 1e200


def jct_cdf(rows: list[dict[str, Any]], keys: set[str]) -> Figure | None:
    by_method: dict[str, list[float]] = {}
    for r in rows:
        if r["key"] in keys and r.get("valid") is True and r.get("jcts"):
            by_method.setdefault(r["method"], []).extend(r["jcts"])
    if not by_method:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for m, x in by_method.items():
        # the log axis pads its range by a factor: JCTs near the largest float would overflow it
        x = np.minimum(np.sort(np.asarray(x, float)), MAX_PLOTTED_S) / 3600.0
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=m, linewidth=1.2)
    ax.set_xscale("log")
    ax.set_xlabel("job completion time (h, log)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3)
    ax.set_title("JCT CDF (all jobs of all cells)", fontsize=9)
    fig.tight_layout()
    return Figure("jct_cdf", "JCT CDF per method", _png(fig))


def gap_vs_size(table: pd.DataFrame) -> Figure | None:
    ok = _scored(table)
    if ok.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for m, g in ok.groupby("method", sort=False):
        ax.scatter(g["jobs"], 100 * g["gap"], s=14, label=m, alpha=0.75)
    ax.set_xlabel("jobs in the instance")
    ax.set_ylabel("gap (%)")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3)
    ax.set_title("Gap against instance size", fontsize=9)
    fig.tight_layout()
    return Figure("gap_vs_size", "Gap against instance size", _png(fig))


def latency_vs_size(table: pd.DataFrame) -> Figure | None:
    t = table[table["status"] != "n/a"]
    solvers = t[(t["kind"] == "solver") & t["runtime_s"].notna()]
    pols = t[(t["kind"] == "policy") & t["latency_p50_ms"].notna()]
    if solvers.empty and pols.empty:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for m, g in solvers.groupby("method", sort=False):
        axes[0].scatter(g["jobs"], g["runtime_s"], s=14, label=m, alpha=0.75)
    axes[0].set_title("Solve time per cell (warm call in a worker)", fontsize=9)
    axes[0].set_ylabel("seconds (log)")
    for m, g in pols.groupby("method", sort=False):
        sc = axes[1].scatter(g["jobs"], g["latency_p50_ms"].astype(float), s=14, label=f"{m} p50", alpha=0.75)
        axes[1].scatter(g["jobs"], g["latency_p99_ms"].astype(float), s=14, marker="^", alpha=0.5,
                        color=sc.get_facecolor()[0])
    axes[1].set_title("Policy decision latency (dot p50, triangle p99)", fontsize=9)
    axes[1].set_ylabel("ms per decision (log)")
    for ax in axes:
        ax.set_yscale("log")
        ax.set_xlabel("jobs in the instance")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return Figure("latency_vs_size", "Solve and decision latency against size", _png(fig))


def pick_instance(table: pd.DataFrame) -> str | None:
    """The instance with a reference schedule and the most methods with valid schedules (ties: the largest)."""
    ok = table[table["valid"] == True]  # noqa: E712
    if ok.empty:
        return None
    score = ok.groupby("instance").agg(n=("method", "nunique"), jobs=("jobs", "first"),
                                       opt=("ref_kind", lambda s: (s == "opt").any()))
    score = score.sort_values(["opt", "n", "jobs"], ascending=False)
    return str(score.index[0])


def gantts(run_dir: Path, suite: Suite, table: pd.DataFrame, name: str) -> list[Figure]:
    inst_path = run_dir / "instances" / f"{name}.json"
    if not inst_path.is_file():
        return []
    inst = load_instance(inst_path)
    out = []
    si = next((i for i in suite.instances if i.name == name), None)
    for ref in (si.references if si else ()):
        p = suite.folder / ref.schedule if ref.schedule else None
        if p is not None and p.is_file():
            fig = gantt_figure(inst, load_schedule(p), f"reference ({ref.kind}, {ref.method}): {ref.value:.6g}")
            out.append(Figure(f"gantt_reference_{ref.kind}", f"{name}: reference {ref.kind}", _png(fig)))
    rows = table[(table["instance"] == name) & (table["valid"] == True) & table["schedule"].notna()]  # noqa: E712
    for i, r in enumerate(rows.head(MAX_GANTTS).itertuples(index=False)):
        fig = gantt_figure(inst, load_schedule(run_dir / r.schedule),
                           f"{r.method}: {r.objective:.6g} ({r.gap_text} vs {r.ref_kind or '-'})")
        out.append(Figure(f"gantt_{i}", f"{name}: {r.method}", _png(fig)))
    return out


def _md_table_to_html(md: str) -> str:
    lines = [l for l in md.strip().splitlines() if l.startswith("|")]
    if len(lines) < 2:
        return ""
    cells = [[c.strip() for c in l.strip("|").split("|")] for l in lines]
    head, body = cells[0], cells[2:]
    out = ["<table><thead><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr></thead><tbody>"]
    for row in body:
        out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
    return "\n".join(out) + "</tbody></table>"


CSS = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;font-size:12px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}figure{margin:1em 0}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(520px,1fr));gap:1em}img{max-width:100%}
figcaption{font-size:12px;color:#555}"""


def write_report(run_dir: str | os.PathLike, instance: str | None = None,
                 baseline: str | None = None) -> tuple[Path, Path]:
    d = Path(run_dir)
    suite, table, meta = load_run(d)
    rows = [r for _, r in read_rows(d / "cells.jsonl")]
    keys = set(table["key"])
    if instance is not None and instance not in set(table["instance"]):
        raise InputError("command line", "--instance", f"{instance!r} is not in this run")
    if baseline is not None and baseline not in set(table["method"]):
        raise InputError("command line", "--baseline", f"{baseline!r} is not a method of this run")
    figs = [f for f in (gap_distribution(table), jct_cdf(rows, keys), gap_vs_size(table), latency_vs_size(table))
            if f is not None]
    chosen = instance or pick_instance(table)
    gfigs = gantts(d, suite, table, chosen) if chosen else []
    summary = summary_markdown(table, baseline)
    seeds = per_seed_markdown(table)
    grid = gap_grid_markdown(table)
    title = f"jctlab report: {suite.name} v{suite.version}"
    info = (f"{table['instance'].nunique()} instances, {table['method'].nunique()} methods, {len(table)} cells; "
            f"time limit {meta.get('time_limit_s')} s, {meta.get('threads')} thread(s) per solver; "
            f"jctlab {meta.get('jctlab_version')}. Gaps follow SPEC §3: against opt (proven optimum), "
            f"≤ against lb (proven bound: an upper bound on the true gap), or against best (no guarantee).")
    rep_dir = d / "report"
    rep_dir.mkdir(exist_ok=True)
    for f in figs + gfigs:
        (rep_dir / f"{f.name}.png").write_bytes(f.png)

    def img(f: Figure) -> str:
        b64 = base64.b64encode(f.png).decode()
        return (f'<figure><img alt="{html.escape(f.caption)}" src="data:image/png;base64,{b64}">'
                f"<figcaption>{html.escape(f.caption)}</figcaption></figure>")

    body = [f"<h1>{html.escape(title)}</h1>", f"<p>{html.escape(info)}</p>",
            "<h2>Per method</h2>", _md_table_to_html(summary)]
    if seeds:
        body += ["<h2>Mean gap per seed draw</h2>", _md_table_to_html(seeds)]
    body += ["<h2>Plots</h2>", '<div class="grid">', *map(img, figs), "</div>"]
    if gfigs:
        body += [f"<h2>Schedules of {html.escape(chosen)}</h2>", '<div class="grid">', *map(img, gfigs), "</div>"]
    body += ["<h2>Gap per instance</h2>", _md_table_to_html(grid)]
    page = (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
    html_path, md_path = d / "report.html", d / "report.md"
    tmp = d / ".report.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, html_path)
    md = [f"# {title}", "", info, "", "## Per method", "", summary]
    if seeds:
        md += ["## Mean gap per seed draw", "", seeds]
    md += ["## Plots", ""] + [f"![{f.caption}](report/{f.name}.png)" for f in figs]
    if gfigs:
        md += ["", f"## Schedules of {chosen}", ""] + [f"![{f.caption}](report/{f.name}.png)" for f in gfigs]
    md += ["", "## Gap per instance", "", grid]
    md_path.write_text("\n".join(md) + "\n", encoding="utf-8")
    return html_path, md_path
