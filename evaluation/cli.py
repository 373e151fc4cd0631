"""The harness's verbs, added to ``jctlab`` through the ``jctlab.commands`` entry point:

    jctlab evaluate --suite NAME [--methods a,b,c] [--seeds K] [--time-limit S] [--out RUN_DIR]
                    [--executor local|ray|inline] [--address ADDR] [--workers N] [--report]
    jctlab suite list | build NAME | check NAME [--runs RUN_DIR ...] [--reprove]
    jctlab report RUN_DIR [--instance NAME] [--baseline METHOD]
    jctlab plot INSTANCE SCHEDULE --out FILE.png|svg
    jctlab leaderboard [--suites a,b] [--out LEADERBOARD.md]

Every ``jctlab`` command builds its parser with these verbs, so this module imports only what the
parser needs; each verb imports its machinery (pandas, matplotlib, the runner) when it runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from jctlab import argtypes as T
from jctlab.errors import InputError

#: seed draws per family that --seeds may ask for (a suite ships a few)
SEED_DRAWS = T.integer(1, 10_000)
WORKERS = T.integer(1, 1_024)


def _data_dir(a: argparse.Namespace) -> Path | None:
    # the loaders' module is light (no pandas): the default data folder (../shared/data or $JCTLAB_DATA)
    from jctlab.loaders import default_data_dir

    if a.data_dir:
        p = Path(a.data_dir)
        if not p.is_dir():
            raise InputError("command line", "--data-dir", f"{a.data_dir}: no such folder")
        return p
    return default_data_dir()


def cmd_evaluate(a: argparse.Namespace) -> int:
    # heavy imports (pandas, the runner) only when the verb runs: every `jctlab` call builds this parser
    from .methods import registered, resolve_all
    from .runner import RunConfig, evaluate
    from .suites import load_suite
    from .table import gap_grid_markdown, per_seed_markdown, summary_markdown

    suite = load_suite(a.suite)
    methods_text = a.methods or ",".join(suite.evaluate.methods)
    if methods_text == "all":
        methods_text = registered()
    if not methods_text:
        raise InputError("command line", "--methods", f"suite {suite.name!r} names no default methods: give --methods")
    methods = resolve_all(methods_text)
    if a.baseline is not None and a.baseline not in {m.label for m in methods}:
        raise InputError("command line", "--baseline", f"{a.baseline!r} is not among the methods evaluated")
    out = Path(a.out or f"runs/{suite.name}")
    tl = a.time_limit if a.time_limit is not None else suite.evaluate.time_limit_s
    threads = a.threads or suite.evaluate.threads
    cfg = RunConfig(suite, methods, out, a.seeds, tl, threads, a.executor, a.workers, a.address, _data_dir(a),
                    not a.no_progress, tuple(p for p in sys.path if p and Path(p).is_dir()),
                    None if a.methods else suite.evaluate.classes_of(), a.cell_timeout)
    table = evaluate(cfg)
    print(f"# {suite.name} v{suite.version}: {table['instance'].nunique()} instances x {len(methods)} methods, "
          f"time limit {tl} s, {threads} thread(s) per solver\n")
    print(summary_markdown(table, a.baseline))
    print(gap_grid_markdown(table))
    ps = per_seed_markdown(table)
    if ps:
        print("Mean gap per seed draw:\n\n" + ps)
    print(f"results: {out / 'results.csv'} (cells: {out / 'cells.jsonl'})")
    if a.report:
        from .report import write_report

        html, _ = write_report(out)
        print(f"report: {html}")
    bad = table[table["violation"] == True]  # noqa: E712
    for r in bad.itertuples(index=False):
        print(f"jctlab: error: {r.instance}: {r.method} scheduled {r.objective:.10g} below the proven "
              f"{r.ref_kind} {r.ref_value:.10g}", file=sys.stderr)
    return 1 if len(bad) else 0


def cmd_suite(a: argparse.Namespace) -> int:
    from .suites import available, load_suite

    if a.action == "list":
        return _suite_list(available())
    if not a.name:
        raise InputError("command line", "NAME", f"suite {a.action} needs a suite name")
    suite = load_suite(a.name)
    if a.action == "build":
        from .build import BuildOptions, build

        opts = BuildOptions(Path(a.work or f"runs/suite-build/{suite.name}"), _data_dir(a), a.executor, a.workers,
                            a.address, a.time_limit, a.threads, not a.no_progress)
        new = build(suite, opts)
        kinds = [i.references[0].kind for i in new.instances]
        print(f"{new.name} v{new.version}: {len(new.instances)} instances "
              f"({', '.join(f'{kinds.count(k)} {k}' for k in ('opt', 'lb', 'best') if k in kinds)}) -> {new.path}")
        return 0
    from .build import check

    findings = check(suite, _data_dir(a), [Path(r) for r in a.runs or []], a.reprove)
    bad = [f for f in findings if not f.ok]
    for f in findings:
        if not f.ok or a.verbose:
            print(f"{'ok  ' if f.ok else 'FAIL'} {f.instance}: {f.message}")
    skipped = [f for f in findings if f.instance == "*"]
    if skipped:
        print(skipped[0].message)
        return 0
    print(f"{suite.name} v{suite.version}: {len(findings) - len(bad)} checks passed, {len(bad)} failed "
          f"({len(suite.instances)} instances)")
    return 1 if bad else 0


def _suite_list(names: list[str]) -> int:
    from jctlab.loaders import default_data_dir

    from .suites import load_suite

    have_data = default_data_dir() is not None
    print("| suite | version | instances | classes | references | difficulty | needs data |")
    print("|---|---|---|---|---|---|---|")
    for n in names:
        s = load_suite(n)
        kinds = [i.references[0].kind for i in s.instances if i.references]
        diff = [i.difficulty for i in s.instances]
        classes = sorted({i.problem for i in s.instances}, key=("static", "offline", "preemptive").index)
        data = "no" if not s.requires_data else ("yes (found)" if have_data else "yes (absent: skipped)")
        print(f"| {s.name} | {s.version} | {len(s.instances)} | {', '.join(classes) or '-'} | "
              f"{', '.join(f'{kinds.count(k)} {k}' for k in ('opt', 'lb', 'best') if k in kinds) or 'not built'} | "
              f"{', '.join(f'{diff.count(k)} {k}' for k in ('easy', 'medium', 'hard', 'open') if k in diff) or '-'} "
              f"| {data} |")
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from .report import write_report

    html, md = write_report(Path(a.run_dir), instance=a.instance, baseline=a.baseline)
    print(f"report: {html}\nmarkdown: {md}")
    return 0


def cmd_plot(a: argparse.Namespace) -> int:
    from jctlab.model import load_instance, load_schedule
    from jctlab.replay import replay

    from .gantt import save_gantt

    if Path(a.out).suffix.lower() not in (".png", ".svg"):
        raise InputError("command line", "--out", "must end in .png or .svg")
    inst = load_instance(a.instance)
    sched = load_schedule(a.schedule)
    rep = replay(inst, sched, source=a.schedule, with_metrics=False)   # names the instance's jobs and GPUs
    if not rep.valid:         # a chart of an invalid schedule would draw what never runs
        raise InputError(a.schedule, "", f"does not replay on {a.instance}: {rep.error}")
    save_gantt(inst, sched, a.out, title=a.title)
    print(f"wrote {a.out}", file=sys.stderr)
    return 0


def cmd_leaderboard(a: argparse.Namespace) -> int:
    from .leaderboard import LeaderboardOptions, leaderboard

    path = leaderboard(LeaderboardOptions(
        suites=tuple(a.suites or ()), out=Path(a.out), runs=Path(a.runs),
        methods=a.methods, seeds=a.seeds, executor=a.executor, workers=a.workers, data_dir=_data_dir(a),
        progress=not a.no_progress))
    print(f"wrote {path}")
    return 0


def _run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="local", choices=["local", "ray", "inline"],
                   help="local worker processes (default), Ray tasks, or this process")
    p.add_argument("--address", type=T.text, default=None, help="Ray cluster address (default: start a local one)")
    p.add_argument("--workers", type=WORKERS, default=None, help="local processes (default: cores // threads)")
    p.add_argument("--data-dir", type=T.text, default=None,
                   help="raw data folder (default: $JCTLAB_DATA or ../shared/data)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def register(sub: Any) -> None:
    """``jctlab.commands`` entry point: add evaluate, suite, report, plot and leaderboard."""
    e = sub.add_parser("evaluate", help="score methods on a suite (every cell replayed, resumable)")
    e.add_argument("--suite", required=True, type=T.text, help="suite name (jctlab suite list) or manifest path")
    e.add_argument("--methods", type=T.text, default=None,
                   help="comma list: registered solvers/policies, NAME[key=value,...], module:factory, or all "
                        "(default: the suite's)")
    e.add_argument("--seeds", type=SEED_DRAWS, default=None, help="first K seed draws of every family (default: all)")
    e.add_argument("--time-limit", type=T.TIME_LIMIT, default=None,
                   help="seconds per solver cell (default: the suite's)")
    e.add_argument("--threads", type=T.THREADS, default=None, help="solver threads per cell (default: the suite's)")
    e.add_argument("--cell-timeout", type=T.TIME_LIMIT, default=None,
                   help="wall-clock seconds after which a cell is stopped and recorded as `timeout` (default: none)")
    e.add_argument("--out", type=T.out_dir, default=None, help="run folder (default runs/SUITE); rerun to resume")
    e.add_argument("--baseline", type=T.text, default=None, help="method for the win rate (default: the best policy)")
    e.add_argument("--report", action="store_true", help="write the HTML report at the end")
    _run_args(e)
    e.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("suite", help="list, build or check evaluation suites",
                       description="build computes a suite's references and keeps any previous reference of the "
                                   "same instance that is better (a higher bound, a schedule that replays better); "
                                   "check verifies a manifest without trusting it.")
    s.add_argument("action", choices=["list", "build", "check"])
    s.add_argument("name", nargs="?", default=None)
    s.add_argument("--time-limit", type=T.TIME_LIMIT, default=None,
                   help="build: the oracle's limit (default: the suite's)")
    s.add_argument("--threads", type=T.THREADS, default=None, help="build: the oracle's threads (default: the suite's)")
    s.add_argument("--work", type=T.out_dir, default=None,
                   help="build: cells folder (default runs/suite-build/NAME); resumable")
    s.add_argument("--runs", type=T.text, action="append", default=None,
                   help="check: run folders whose schedules lb must not exceed")
    s.add_argument("--reprove", action="store_true", help="check: prove every opt again with its method")
    s.add_argument("--verbose", action="store_true", help="check: print passed checks too")
    _run_args(s)
    s.set_defaults(func=cmd_suite)

    r = sub.add_parser("report", help="HTML (self-contained) and Markdown report of a run folder")
    r.add_argument("run_dir")
    r.add_argument("--instance", type=T.text, default=None,
                   help="instance whose Gantt charts are drawn (default: chosen)")
    r.add_argument("--baseline", type=T.text, default=None, help="method for the win rate (default: the best policy)")
    r.set_defaults(func=cmd_report)

    p = sub.add_parser("plot", help="Gantt chart of a schedule (one row per GPU)")
    p.add_argument("instance")
    p.add_argument("schedule")
    p.add_argument("--out", required=True, type=T.out_path, help="FILE.png or FILE.svg")
    p.add_argument("--title", default=None)
    p.set_defaults(func=cmd_plot)

    lb = sub.add_parser("leaderboard", help="evaluate every method on the standard suites, write LEADERBOARD.md")
    lb.add_argument("--suites", type=T.names, default=None, help="comma list (default: the standard suites)")
    lb.add_argument("--methods", type=T.text, default=None, help="comma list (default: the leaderboard's methods)")
    lb.add_argument("--seeds", type=SEED_DRAWS, default=None)
    lb.add_argument("--runs", type=T.out_dir, default="runs/leaderboard",
                    help="folder of the suites' run folders (resumable)")
    lb.add_argument("--out", type=T.out_path, default="LEADERBOARD.md")
    _run_args(lb)
    lb.set_defaults(func=cmd_leaderboard)

