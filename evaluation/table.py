"""The tidy results table (one row per cell) and its plain-text renderings.

Columns: suite, suite_version, instance, family, draw, seed, class, jobs, gpus, nodes, gpu_types, method,
kind (solver or policy), source (registry or
module), status, valid, objective, lower_bound, the SPEC metrics, ref_kind, ref_value,
ref_class, gap, gap_text, violation, runtime_s, decisions, latency_p50_ms / p99 / max / mean, error, key,
schedule. Gaps are taken here, from the suite's references, never stored in the cells: rebuilding a
suite's references changes the gaps, not the cells.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .cells import METRICS
from .gaps import choose, gap
from .stats import per_seed, summarize
from .suites import Suite

COLUMNS = ("suite", "suite_version", "instance", "family", "draw", "seed", "class", "jobs", "gpus", "nodes",
           "gpu_types", "method", "kind", "source", "status", "valid", "objective", "lower_bound", *METRICS, "ref_kind",
           "ref_value", "ref_class", "gap", "gap_text", "violation", "runtime_s", "cell_s", "decisions",
           "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "latency_mean_ms", "threads", "time_limit_s",
           "jctlab_version", "error", "key", "schedule")


def tidy(rows: Iterable[dict[str, Any]], suite: Suite, order: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of finished cells (``order``: their keys in plan order) joined with the suite's instances."""
    by_name = {si.name: si for si in suite.instances}
    rows = list(rows)
    if order is not None:
        pos = {k: i for i, k in enumerate(order)}
        rows = sorted((r for r in rows if r["key"] in pos), key=lambda r: pos[r["key"]])
    out = []
    for r in rows:
        si = by_name.get(r["instance"])
        if si is None:
            continue
        ref = choose(si.references, si.problem)
        g = gap(r.get("objective") if r.get("valid") else None, ref)
        d = {"suite": suite.name, "suite_version": suite.version, "instance": si.name, "family": si.family,
             "draw": si.draw, "seed": r["seed"], "class": si.problem, "jobs": si.size.jobs, "gpus": si.size.gpus,
             "nodes": si.size.nodes, "gpu_types": ",".join(si.size.gpu_types), "ref_kind": g.kind,
             "ref_value": g.reference, "ref_class": None if ref is None else ref.problem_class, "gap": g.value,
             "gap_text": g.text, "violation": g.violation}
        for c in COLUMNS:
            if c not in d:
                d[c] = r.get(c)
        out.append(d)
    df = pd.DataFrame(out, columns=list(COLUMNS))
    for c in ("gap", "objective", "lower_bound", "ref_value", "runtime_s"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def _pct(x: Any) -> str:
    return "-" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{100 * x:.2f} %"


def summary_markdown(table: pd.DataFrame, baseline: str | None = None) -> str:
    """Per method: cells / OK, reference kinds, mean gap with its 95 % bootstrap interval, geomean ratio,
    p90 and worst gap, win rate against the best baseline, median runtime, decision latency."""
    s = summarize(table, baseline)
    if s.empty:
        return "(no cells)\n"
    base = s["baseline"].iloc[0]
    lines = [f"| method | kind | OK | ref | mean gap [95 % CI] | geomean obj/ref [95 % CI] | p90 gap | worst gap | "
             f"win rate vs {base or '-'} | median runtime (s) | decision p50 / p99 (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in s.itertuples(index=False):
        le = "≤ " if r.lb_only else ""
        ci = r.mean_gap_ci.fmt() + " %" if r.mean_gap_ci is not None else "-"
        gm = r.geomean_ratio_ci.fmt(pct=False) if r.geomean_ratio_ci is not None else "-"
        lat = "-" if not np.isfinite(r.latency_p50_ms) else f"{r.latency_p50_ms:.3f} / {r.latency_p99_ms:.3f}"
        win = "-" if not np.isfinite(r.win_rate) else f"{100 * r.win_rate:.0f} %"
        rt = "-" if not np.isfinite(r.runtime_median_s) else f"{r.runtime_median_s:.3f}"
        lines.append(f"| {r.method} | {r.kind} | {r.ok}/{r.cells} | {r.ref_kinds} | {le}{ci} | {gm} | "
                     f"{le}{_pct(r.p90_gap)} | {le}{_pct(r.worst_gap)} | {win} | {rt} | {lat} |")
    return "\n".join(lines) + "\n"


def gap_grid_markdown(table: pd.DataFrame, max_rows: int = 60) -> str:
    """Instance x method grid of gap texts (``≤`` for lower bounds), one row per (instance, seed)."""
    if table.empty:
        return ""
    methods = list(dict.fromkeys(table["method"]))
    keyed = table.set_index(["instance", "method"])
    insts = list(dict.fromkeys(table["instance"]))
    lines = ["| instance | class | jobs/GPUs | ref | " + " | ".join(methods) + " |",
             "|---|---|---|---|" + "---|" * len(methods)]
    for name in insts[:max_rows]:
        sub = table[table["instance"] == name].iloc[0]
        ref = "-" if sub["ref_kind"] is None else f"{sub['ref_kind']} {sub['ref_value']:.6g}"
        cells = []
        for m in methods:
            if (name, m) not in keyed.index:
                cells.append("")
                continue
            r = keyed.loc[(name, m)]
            r = r.iloc[0] if isinstance(r, pd.DataFrame) else r
            cells.append(r["gap_text"] if r["valid"] == True else r["status"])  # noqa: E712
        lines.append(f"| {name} | {sub['class']} | {sub['jobs']}/{sub['gpus']} | {ref} | " + " | ".join(cells) + " |")
    if len(insts) > max_rows:
        lines.append(f"| ... {len(insts) - max_rows} more instances in results.csv | | | |" + " |" * len(methods))
    return "\n".join(lines) + "\n"


def per_seed_markdown(table: pd.DataFrame) -> str:
    ps = per_seed(table)
    if ps.empty or len(ps.columns) < 2:
        return ""
    lines = ["| method | " + " | ".join(f"draw {d}" for d in ps.columns) + " | min..max |",
             "|---|" + "---|" * (len(ps.columns) + 1)]
    for m, r in ps.iterrows():
        vals = r.to_numpy(dtype=float)
        rng = f"{_pct(np.nanmin(vals))}..{_pct(np.nanmax(vals))}" if np.isfinite(vals).any() else "-"
        lines.append(f"| {m} | " + " | ".join(_pct(v) for v in vals) + f" | {rng} |")
    return "\n".join(lines) + "\n"
