#!/usr/bin/env python
"""Measure the evaluation harness's floors (issue 50) that are not benchmarks.

    python scripts/eval_floors.py resume [--trials 5] [--out runs/floors]   # 200-cell sweep killed, resumed
    python scripts/eval_floors.py ray [--address ADDR]                       # quick suite: Ray rows == local rows

``resume``: a clean run of 200 cells (the quick suite's 10 instances x 20 queue+placement policies, local
executor), then per trial the same command started in a new process group, killed (SIGKILL, driver and
workers) once a random number of cells (seeded, 1 to 199) is on disk, and started again to completion; the
trial passes when the resumed cells have every key of the clean run exactly once and the same rows but
for the timing columns. ``ray``: the quick suite with its default methods through ``--executor ray`` and
through the local executor: the rows must be equal but for timings, and the objectives of methods that
are not deterministic under a time limit (solvers that did not prove optimality) are reported apart.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from evaluation.cells import TIMING
from evaluation.store import read_rows

QUEUES = ("fifo", "sjf", "srtf", "las")
PLACEMENTS = ("packed-sticky", "packed-nonsticky", "random-sticky", "random-nonsticky", "pal")
METHODS = ",".join(f"{q}+{p}" for q in QUEUES for p in PLACEMENTS)     # 20 policies x 10 instances


def cmd(out: Path, methods: str | None, extra: list[str] = ()) -> list[str]:
    """``jctlab evaluate`` on the quick suite (its default methods when ``methods`` is None)."""
    m = [] if methods is None else ["--methods", methods]
    return [sys.executable, "-m", "jctlab.cli", "evaluate", "--suite", "quick", *m, "--out", str(out),
            "--no-progress", *extra]


def rows(out: Path) -> tuple[dict, int]:
    lines = (out / "cells.jsonl").read_text().splitlines()
    return {k: {c: v for c, v in r.items() if c not in TIMING} for k, r in read_rows(out / "cells.jsonl")}, len(lines)


def resume(a: argparse.Namespace) -> int:
    base = Path(a.out)
    shutil.rmtree(base, ignore_errors=True)
    t = time.perf_counter()
    subprocess.run(cmd(base / "clean", METHODS), check=True, capture_output=True)
    clean_s = time.perf_counter() - t
    clean, n = rows(base / "clean")
    print(f"clean run: {n} cells in {clean_s:.1f} s")
    rng = random.Random(a.seed)
    passed = 0
    for k in range(a.trials):
        out = base / f"trial{k}"
        p = subprocess.Popen(cmd(out, METHODS), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        target = rng.randint(1, len(clean) - 1)      # a random moment of the sweep: after `target` cells
        f = out / "cells.jsonl"
        t0 = time.perf_counter()
        while p.poll() is None and (not f.exists() or f.read_bytes().count(b"\n") < target):
            time.sleep(0.005)
        when = time.perf_counter() - t0
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        before = f.read_bytes().count(b"\n") if f.exists() else 0
        subprocess.run(cmd(out, METHODS), check=True, capture_output=True)
        got, lines = rows(out)
        ok = got == clean and lines == len(clean)
        passed += ok
        print(f"trial {k}: killed at {when:.1f} s (target {target} cells) with {before} cells written; resumed: {lines} lines, "
              f"{len(got)} keys, {'same rows' if got == clean else 'DIFFERENT rows'} -> {'pass' if ok else 'FAIL'}")
    print(f"{passed} of {a.trials} trials: 0 rows lost or duplicated")
    return 0 if passed == a.trials else 1


def time_limited(x: dict, y: dict) -> bool:
    """A solver cell that one side or both did not prove optimal: what it reached in its time limit
    depends on the machine's speed and load, not on the executor."""
    return x["kind"] == "solver" and (x["status"] != "optimal" or y.get("status") != "optimal")


def ray(a: argparse.Namespace) -> int:
    base = Path(a.out)
    shutil.rmtree(base, ignore_errors=True)
    extra = ["--address", a.address] if a.address else []
    timing = {}
    for name, ex in (("local", ["--executor", "local"]), ("ray", ["--executor", "ray", *extra])):
        t = time.perf_counter()
        r = subprocess.run(cmd(base / name, None, ex), capture_output=True, text=True)
        timing[name] = time.perf_counter() - t
        if r.returncode != 0:
            print(r.stderr[-3000:])
            return 1
    a_rows, _ = rows(base / "local")
    b_rows, _ = rows(base / "ray")
    same = a_rows == b_rows
    diff = [k for k in a_rows if a_rows[k] != b_rows.get(k)]
    unproven = [k for k in diff if time_limited(a_rows[k], b_rows.get(k, {}))]
    print(f"local {timing['local']:.1f} s, ray {timing['ray']:.1f} s; {len(a_rows)} cells; "
          f"{'same rows' if same else f'{len(a_rows) - len(diff)} rows identical, {len(diff)} differ'} "
          f"({len(unproven)} of them solver cells cut by their time limit on one side or both)")
    for k in diff:
        x, y = a_rows[k], b_rows.get(k, {})
        print(" ", x["instance"], x["method"], {c: (x[c], y.get(c)) for c in x if x[c] != y.get(c)})
    return 0 if same or len(unproven) == len(diff) else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("resume")
    r.add_argument("--trials", type=int, default=5)
    r.add_argument("--seed", type=int, default=10_000)
    r.add_argument("--out", default="runs/floors/resume")
    y = sub.add_parser("ray")
    y.add_argument("--address", default=None)
    y.add_argument("--out", default="runs/floors/ray")
    a = p.parse_args(argv)
    return resume(a) if a.what == "resume" else ray(a)


if __name__ == "__main__":
    sys.exit(main())
