"""Spread of a comparison: seeded bootstrap confidence intervals and per-method summaries.

One draw misleads (on PAL's workloads 7-8, PAL's improvement over Packed-Sticky ranges from 7 % to 68 %
across five variability seeds), so every mean comes with a percentile bootstrap interval over the
(instance, seed) cells, seeded so that the same rows give the same interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pandas as pd

BOOTSTRAP = 2000
CI_SEED = 20_240


@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float

    def fmt(self, pct: bool = True) -> str:
        if not np.isfinite(self.estimate):
            return "-"
        f = (lambda x: f"{100 * x:.2f}") if pct else (lambda x: f"{x:.4g}")
        return f"{f(self.estimate)} [{f(self.low)}, {f(self.high)}]"


def bootstrap(values: Sequence[float], stat: Callable[[np.ndarray], float] = np.mean, n: int = BOOTSTRAP,
              seed: int = CI_SEED, level: float = 0.95) -> Interval:
    """Percentile bootstrap interval of ``stat`` over ``values`` (resampled with replacement)."""
    x = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if len(x) == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    est = float(stat(x))
    if len(x) == 1:
        return Interval(est, est, est)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), size=(n, len(x)))
    boot = np.apply_along_axis(stat, 1, x[idx])
    a = (1 - level) / 2
    return Interval(est, float(np.quantile(boot, a)), float(np.quantile(boot, 1 - a)))


def geomean_ratio(ratios: np.ndarray) -> float:
    """Geometric mean of objective / reference (1.05 = 5 % above the reference on average)."""
    return float(np.exp(np.mean(np.log(ratios))))


def summarize(table: pd.DataFrame, baseline: str | None = None) -> pd.DataFrame:
    """One row per (suite, method): cells, OK count, reference kinds, mean / p90 / worst gap, bootstrap
    intervals of the mean gap and of the geomean ratio, win rate against the best baseline, runtime and
    decision latency."""
    rows = []
    best_base = baseline or best_baseline(table)
    for (suite, method), g in table.groupby(["suite", "method"], sort=False):
        # n/a: the method does not apply to these instances' class; bound_only: a bound, by design no schedule
        g = g[~g["status"].isin(("n/a", "bound_only"))]
        if g.empty:
            continue
        ok = g[g["valid"] == True]  # noqa: E712 - a column of True/False/None
        gaps = ok["gap"].dropna().to_numpy(dtype=float)
        kinds = sorted(set(ok.loc[ok["gap"].notna(), "ref_kind"]))
        ratios = 1.0 + gaps
        rows.append({
            "suite": suite, "method": method, "kind": g["kind"].iloc[0], "cells": len(g), "ok": len(ok),
            "not_ok": int(len(g) - len(ok)), "ref_kinds": "/".join(kinds) or "-",
            "mean_gap": float(gaps.mean()) if len(gaps) else np.nan,
            "mean_gap_ci": bootstrap(gaps) if len(gaps) else None,
            "geomean_ratio_ci": bootstrap(ratios, geomean_ratio) if len(gaps) and (ratios > 0).all() else None,
            "p90_gap": float(np.quantile(gaps, 0.9)) if len(gaps) else np.nan,
            "worst_gap": float(gaps.max()) if len(gaps) else np.nan,
            "lb_only": bool(kinds == ["lb"]),
            "win_rate": win_rate(table, method, best_base) if best_base and best_base != method else np.nan,
            "baseline": best_base,
            "runtime_median_s": float(g["runtime_s"].median()) if g["runtime_s"].notna().any() else np.nan,
            "latency_p50_ms": float(g["latency_p50_ms"].median()) if g["latency_p50_ms"].notna().any() else np.nan,
            "latency_p99_ms": float(g["latency_p99_ms"].max()) if g["latency_p99_ms"].notna().any() else np.nan,
        })
    return pd.DataFrame(rows)


def best_baseline(table: pd.DataFrame) -> str | None:
    """The registered policy (a user's module:factory is no baseline) with the lowest mean gap over the
    cells it ran well."""
    pol = table[(table["kind"] == "policy") & (table["source"] != "module") & (table["valid"] == True)  # noqa: E712
                & table["gap"].notna()]
    if pol.empty:
        return None
    return str(pol.groupby("method")["gap"].mean().idxmin())


def win_rate(table: pd.DataFrame, method: str, baseline: str) -> float:
    """Share of the (instance, seed) cells both ran validly where ``method`` has the lower objective
    (ties count one half)."""
    ok = table[table["valid"] == True]  # noqa: E712
    a = ok[ok["method"] == method].set_index(["instance", "seed"])["objective"]
    b = ok[ok["method"] == baseline].set_index(["instance", "seed"])["objective"]
    both = a.index.intersection(b.index)
    if len(both) == 0:
        return float("nan")
    x, y = a.loc[both].to_numpy(float), b.loc[both].to_numpy(float)
    tie = np.isclose(x, y, rtol=1e-9, atol=0)
    return float(((x < y) & ~tie).mean() + 0.5 * tie.mean())


def per_seed(table: pd.DataFrame) -> pd.DataFrame:
    """Mean gap per method and seed draw: the spread that a single draw hides."""
    ok = table[(table["valid"] == True) & table["gap"].notna()]  # noqa: E712
    if ok.empty:
        return pd.DataFrame()
    return ok.pivot_table(index="method", columns="draw", values="gap", aggfunc="mean", sort=False)
