"""``jctlab evaluate``: plan the cells of a suite x methods x seeds, run the missing ones, tabulate.

The driver: resolves the methods (a bad name fails before anything runs), writes each selected
instance to ``RUN_DIR/instances/`` and a snapshot of the suite to ``RUN_DIR/suite.json``, skips the
cells whose key is already in ``RUN_DIR/cells.jsonl`` (a resumed run), runs the others on the chosen
executor with a progress bar (cells done, running, ETA) and records each the moment it finishes. Then
the tidy table (``results.csv``) with gaps by SPEC §3.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm import tqdm

from jctlab import __version__
from jctlab.errors import InputError
from jctlab.model import load_instance, read_json, save_instance

from .cells import CellOutcome, CellTask, InstanceSource, cell_key
from .executors import make_executor
from .methods import MethodSpec
from .store import CELLS, CellStore, check_run, read_rows
from .suites import Suite, SuiteInstance, instance_hash, read_suite
from .table import tidy

RESULTS = "results.csv"
SUITE_SNAPSHOT = "suite.json"


@dataclass(frozen=True)
class RunConfig:
    suite: Suite
    methods: tuple[MethodSpec, ...]
    out: Path
    seeds: int | None = None
    time_limit: float | None = None
    threads: int = 1
    executor: str = "local"
    workers: int | None = None
    address: str | None = None
    data_dir: Path | None = None
    progress: bool = True
    sys_path: tuple[str, ...] = field(default_factory=tuple)
    #: method label -> the classes it runs on (the suite's per-class defaults); None: every class
    classes_of: dict[str, tuple[str, ...]] | None = None
    #: wall-clock seconds after which a cell is stopped and recorded as ``timeout`` (None: no limit)
    cell_timeout: float | None = None


class Bar:
    """tqdm bar: cells done (resumed ones counted from the start), running now, ETA."""

    def __init__(self, total: int, resumed: int, enabled: bool):
        tqdm.monitor_interval = 0   # no monitor thread in a process that starts workers
        self.bar = tqdm(total=total, initial=resumed, desc="cells", unit="cell", disable=not enabled,
                        file=sys.stderr, dynamic_ncols=True, smoothing=0.05)
        self.errors = 0

    def running(self, n: int) -> None:
        self.bar.set_postfix_str(f"running={n} errors={self.errors}", refresh=True)

    def finished(self, row: dict[str, Any]) -> None:
        self.errors += row.get("status") == "error"
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def materialize(cfg: RunConfig, instances: tuple[SuiteInstance, ...]) -> dict[str, InstanceSource]:
    """Each instance as a file in ``RUN_DIR/instances/`` (the suite's file or its generator's output,
    hash-checked): the workers read it, the report draws from it."""
    folder = cfg.out / "instances"
    made = {si.name: cfg.suite.load_instance(si, cfg.data_dir) for si in instances   # a refusal: before any write
            if not (folder / f"{si.name}.json").exists() or _sha_of_file(folder / f"{si.name}.json") != si.sha256}
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for si in instances:
        p = folder / f"{si.name}.json"
        if si.name in made:
            save_instance(made[si.name], p)
        out[si.name] = InstanceSource(si.sha256, str(p.resolve()))
        for ref in si.references:      # the report draws the reference schedules from the snapshot's folder
            if ref.schedule is not None and (cfg.suite.folder / ref.schedule).is_file():
                dst = cfg.out / cfg.suite.name / ref.schedule
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(cfg.suite.folder / ref.schedule, dst)
    return out


def _sha_of_file(p: Path) -> str | None:
    try:
        return instance_hash(load_instance(p))
    except InputError:
        return None


def plan(cfg: RunConfig) -> list[CellTask]:
    """The cells of a run, in a stable order: instance, then method (the seed is the draw's)."""
    if cfg.suite.requires_data and cfg.data_dir is None:
        raise InputError(cfg.suite.source, "requires_data",
                         f"suite {cfg.suite.name!r} needs the raw data: not found (../shared/data or $JCTLAB_DATA); "
                         "skipped")
    if not cfg.suite.instances:
        raise InputError(cfg.suite.source, "instances", "the suite is not built yet: run `jctlab suite build`")
    if cfg.seeds is not None and cfg.seeds > cfg.suite.max_draws():
        raise InputError("command line", "--seeds",
                         f"suite {cfg.suite.name!r} ships {cfg.suite.max_draws()} seed draws per family; "
                         f"asked for {cfg.seeds}")
    instances = cfg.suite.selected(cfg.seeds)
    sources = materialize(cfg, instances)
    tasks = []
    for si in instances:
        for m in cfg.methods:
            if cfg.classes_of is not None and si.problem not in cfg.classes_of.get(m.label, ()):
                continue
            key = cell_key(si.sha256, m, si.seed, cfg.time_limit, cfg.threads, cfg.cell_timeout)
            tasks.append(CellTask(key, si.name, sources[si.name], m, si.seed, cfg.time_limit, cfg.threads,
                                  cfg.sys_path, cfg.cell_timeout))
    return tasks


def _write_meta(cfg: RunConfig, keys: list[str]) -> None:
    """The suite snapshot and the run's settings, with its cells' keys in plan order (the report shows
    these cells, as results.csv does, not every cell the folder has ever held)."""
    cfg.suite.save(cfg.out / SUITE_SNAPSHOT)
    meta = {"suite": cfg.suite.name, "suite_version": cfg.suite.version, "methods": [m.label for m in cfg.methods],
            "seeds": cfg.seeds, "time_limit_s": cfg.time_limit, "threads": cfg.threads, "executor": cfg.executor,
            "jctlab_version": __version__, "cells": len(keys), "argv": sys.argv[1:], "keys": keys}
    tmp = cfg.out / "run.json.tmp"
    tmp.write_text(json.dumps(meta, indent=1))
    os.replace(tmp, cfg.out / "run.json")


def evaluate(cfg: RunConfig) -> pd.DataFrame:
    """Run the missing cells of ``cfg`` and return the tidy table of all its cells (also ``results.csv``)."""
    executor = make_executor(cfg.executor, cfg.workers, cfg.threads, cfg.address)   # bad options: before any file
    check_run(cfg.out)     # a resumed run's cells must read back: an edited row or schedule is refused before any write
    tasks = plan(cfg)
    _write_meta(cfg, [t.key for t in tasks])
    with CellStore(cfg.out) as store:
        todo = [t for t in tasks if not store.done(t.key)]
        if len(todo) < len(tasks) and cfg.progress:
            print(f"resuming: {len(tasks) - len(todo)} of {len(tasks)} cells already in {store.path}", file=sys.stderr)
        bar = Bar(len(tasks), len(tasks) - len(todo), cfg.progress)

        def record(outcome: CellOutcome) -> None:
            store.add(outcome.row, outcome.schedule)
            bar.finished(outcome.row)

        t0 = time.perf_counter()
        try:
            executor.run(todo, record, bar)
        finally:
            bar.close()
        rows = dict(store.rows)
    table = tidy(rows.values(), cfg.suite, [t.key for t in tasks])
    write_table(table, cfg.out)
    if cfg.progress and todo:
        print(f"{len(todo)} cells in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return table


def write_table(table: pd.DataFrame, out: Path) -> None:
    tmp = out / f".{RESULTS}.tmp"
    table.to_csv(tmp, index=False)
    os.replace(tmp, out / RESULTS)


def load_run(run_dir: str | os.PathLike) -> tuple[Suite, pd.DataFrame, dict[str, Any]]:
    """A run folder's suite snapshot, tidy table (rebuilt from its cells) and metadata."""
    d = Path(run_dir)
    snap = d / SUITE_SNAPSHOT
    if not snap.is_file():
        raise InputError(str(d), "", "not a run folder (no suite.json: run `jctlab evaluate --out` first)")
    suite = read_suite(read_json(snap), snap)
    meta = read_json(d / "run.json") if (d / "run.json").is_file() else {}
    keys = meta.get("keys") if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not (keys is None or (isinstance(keys, list)
                                                           and all(isinstance(k, str) for k in keys))):
        raise InputError(str(d / "run.json"), "keys", "expected an object with a list of cell keys (edited?)")
    rows = [r for _, r in read_rows(d / "cells.jsonl")]
    return suite, tidy(rows, suite, keys), meta
