"""``jctlab leaderboard``: evaluate the methods on the standard suites and write ``LEADERBOARD.md``.

Per suite: every method's cells (OK / run), reference kinds, mean gap with its bootstrap interval and
worst gap (``≤`` where the reference is a lower bound), median runtime, decision latency, and the jctlab
and suite versions. Methods: each suite's own defaults plus every registered policy (``jctlab.policies``,
so RL policies registered by entry point join by themselves) on the suite's non-static classes, or the
``--methods`` given (``all``: every registered solver and policy). Each suite's cells live in
``RUNS/SUITE`` and are reused: a rerun computes only new methods or versions. Suites whose raw data is
absent, or that are not built, are listed as skipped.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jctlab import __version__, registry
from jctlab.errors import InputError

from .methods import registered, resolve_all
from .runner import RunConfig, evaluate
from .stats import summarize
from .suites import CLASSES, load_suite

STANDARD = ("quick", "static-hetero", "offline-small", "queue-small", "offline-medium", "preemptive-pal",
            "philly-large")


@dataclass(frozen=True)
class LeaderboardOptions:
    suites: tuple[str, ...] = ()
    out: Path = Path("LEADERBOARD.md")
    runs: Path = Path("runs/leaderboard")
    methods: str | None = None
    seeds: int | None = None
    executor: str = "local"
    workers: int | None = None
    data_dir: Path | None = None
    progress: bool = True


def default_methods(suite, text: str | None) -> tuple[tuple, dict[str, tuple[str, ...]] | None]:
    if text:
        return resolve_all(registered() if text == "all" else text), None
    classes = suite.evaluate.classes_of() or {m: CLASSES for m in suite.evaluate.methods}
    online = tuple(c for c in CLASSES if c != "static")
    for p in registry.names("jctlab.policies"):
        label = p if registry.method(p) is None else f"policy:{p}"
        classes.setdefault(label, online)
    for p in registry.featured_policies():      # e.g. the learned policies of rl/
        classes.setdefault(p, online)
    return resolve_all(list(classes)), classes


def _fmt(x: float, lb: bool) -> str:
    return "-" if not np.isfinite(x) else f"{'≤ ' if lb else ''}{100 * x:.2f} %"


def suite_section(name: str, version: int, s: pd.DataFrame, tl, instances: int) -> list[str]:
    lines = [f"## {name} (v{version}, {instances} instances, time limit {tl} s per solver cell)", "",
             "| method | kind | OK | reference | mean gap [95 % CI] | worst gap | median runtime (s) | decision p50 / p99 (ms) |",
             "|---|---|---|---|---|---|---|---|"]
    s = s.sort_values("mean_gap", na_position="last")
    for r in s.itertuples(index=False):
        ci = r.mean_gap_ci.fmt() + " %" if r.mean_gap_ci is not None else "-"
        lat = "-" if not np.isfinite(r.latency_p50_ms) else f"{r.latency_p50_ms:.3f} / {r.latency_p99_ms:.3f}"
        rt = "-" if not np.isfinite(r.runtime_median_s) else f"{r.runtime_median_s:.3g}"
        lines.append(f"| {r.method} | {r.kind} | {r.ok}/{r.cells} | {r.ref_kinds} | {'≤ ' if r.lb_only else ''}{ci} "
                     f"| {_fmt(r.worst_gap, r.lb_only)} | {rt} | {lat} |")
    return lines + [""]


def leaderboard(opts: LeaderboardOptions) -> Path:
    names = opts.suites or STANDARD
    out = [f"# jctlab leaderboard (jctlab {__version__})", "",
           "Gap = (objective − reference) / reference over every (instance, seed) cell of a suite, each schedule "
           "replayed (SPEC §3): against `opt` a true gap, against `lb` an upper bound on it (shown `≤`), against "
           "`best` no guarantee. Mean with a 95 % bootstrap interval over cells; worst = the largest cell gap. "
           "Regenerate: `jctlab leaderboard` (cells are cached under runs/leaderboard).", ""]
    skipped = []
    for n in names:
        suite = load_suite(n)
        if suite.requires_data and opts.data_dir is None:
            skipped.append(f"{n} (needs the raw data, absent)")
            continue
        if not suite.instances:
            skipped.append(f"{n} (not built)")
            continue
        methods, classes = default_methods(suite, opts.methods)
        if opts.progress:
            print(f"leaderboard: {n}", file=sys.stderr)
        cfg = RunConfig(suite, methods, opts.runs / suite.name, opts.seeds, suite.evaluate.time_limit_s,
                        suite.evaluate.threads, opts.executor, opts.workers, None, opts.data_dir, opts.progress,
                        classes_of=classes)
        try:
            table = evaluate(cfg)
        except InputError as e:
            skipped.append(f"{n} ({e})")
            continue
        out += suite_section(suite.name, suite.version, summarize(table), suite.evaluate.time_limit_s,
                             table["instance"].nunique())
    if skipped:
        out += ["Skipped: " + "; ".join(skipped) + ".", ""]
    tmp = opts.out.with_name(f".{opts.out.name}.tmp")
    tmp.write_text("\n".join(out))
    tmp.replace(opts.out)
    return opts.out
