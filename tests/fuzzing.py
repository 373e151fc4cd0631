"""Fuzzing jctlab as a hostile user would (issue 44): run a :class:`~tests.fuzz_cases.Case` and judge it.

:func:`run_in_process` calls ``jctlab.cli.main(argv)`` (fast: no interpreter start, the solver stack warmed
up once by :func:`warm_up`); :func:`run_subprocess` runs the installed command. :func:`judge` checks the
properties of the issue: no traceback, exit code in {0, 1, 2} with its documented meaning (1 only from
``replay``, an invalid schedule, from ``evaluate``, a schedule below a proven bound, and from ``suite check``,
a failed check; 2 for every "bad" case, 0 for every "good" one), one line naming the file or flag on stderr for exit 2, no numpy
``RuntimeWarning``, nothing written on error (no output, no input file changed), a written file that loads (a
written schedule also replays valid, claims included, on the case's instance),
what the case's own ``check`` finds wrong in its output (a live plan: every job once, no GPU held twice...),
and no run past its time limit + 2 s (10 s for verbs without a limit).

Used by ``tests/test_fuzz.py`` (a CI-sized, derandomized run) and ``scripts/fuzz.py`` (``make fuzz``: a
long run that prints the count of each outcome).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from jctlab.model import load_instance, load_schedule
from jctlab.replay import replay
from jctlab.watchdog import raise_after

from .fuzz_cases import CORE_WEIGHTS, METHODS, Case, bases, core_strategies, extreme, ps_heavy, schedule_of
from .fuzz_cases_eval import EVAL_WEIGHTS, eval_files, eval_strategies
from .fuzz_cases_live import LIVE_WEIGHTS, live_strategies

NO_LIMIT_S = 10.0      # a run of a verb without a time limit may take this long
SLACK_S = 2.0          # a run with a time limit may take this much longer
#: the verbs whose exit code 1 has a documented meaning (invalid schedule; below a proven bound; failed check)
EXIT_1_VERBS = ("replay", "evaluate", "suite")
ALL_WEIGHTS = {**CORE_WEIGHTS, **EVAL_WEIGHTS, **LIVE_WEIGHTS}


def cases(weights: dict[str, int] | None = None) -> st.SearchStrategy[Case]:
    """Cases of the verbs of ``weights`` (verb -> relative weight; default: every verb, ALL_WEIGHTS)."""
    w = weights or ALL_WEIGHTS
    strat = {**core_strategies(), **eval_strategies(), **live_strategies()}
    return st.one_of(*[strat[v] for v, k in w.items() for _ in range(k)])

# ----------------------------------------------------------------------------- running and judging


@dataclass
class Outcome:
    code: int | None            # None: an exception escaped main
    stdout: str
    stderr: str
    seconds: float
    error: str | None = None    # the traceback that escaped
    warnings: list[str] = field(default_factory=list)


def materialize(case: Case, root: Path) -> list[str]:
    for name, data in case.files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if data is None:
            p.mkdir(exist_ok=True)
        else:
            p.write_bytes(data)
    return [a.replace("{dir}", str(root)) for a in case.argv]


class Overrun(BaseException):
    """Raised by the watchdog in a case that runs far past its limit (so that a fuzz run never hangs)."""


WATCHDOG_S = 30.0      # beyond its limit (or NO_LIMIT_S), a case is stopped


def watchdog(seconds: float):
    """:class:`Overrun` after ``seconds`` (:func:`jctlab.watchdog.raise_after`), so that a fuzz run never hangs."""
    return raise_after(seconds, Overrun)


def run_in_process(case: Case, root: Path) -> Outcome:
    from jctlab.cli import main

    argv = materialize(case, root)
    out, err = io.StringIO(), io.StringIO()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        warnings.simplefilter("always")
        try:
            with watchdog((case.limit_s or NO_LIMIT_S) + WATCHDOG_S):
                code: int | None = main(argv)
            tb = None
        except Overrun:
            code, tb = -1, None
        except SystemExit as e:   # argparse's --help / --version
            code, tb = (e.code if isinstance(e.code, int) else 0), None
        except BaseException:     # noqa: BLE001 - a traceback is what the fuzzer looks for
            code, tb = None, traceback.format_exc()
    return Outcome(code, out.getvalue(), err.getvalue(), time.perf_counter() - t0, tb,
                   [f"{w.category.__name__}: {w.message}" for w in caught
                    if issubclass(w.category, (RuntimeWarning, UserWarning))])


def run_subprocess(case: Case, root: Path, timeout: float = 60.0, env: dict | None = None) -> Outcome:
    argv = materialize(case, root)
    exe = shutil.which("jctlab", path=str(Path(sys.executable).parent)) or "jctlab"
    t0 = time.perf_counter()
    try:
        p = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=timeout,
                           env={**os.environ, **(env or {})})
        code, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        code, out, err = None, str(e.stdout or ""), str(e.stderr or "") + "\n(timed out)"
    return Outcome(code, out, err, time.perf_counter() - t0,
                   err if "Traceback" in err else None)


#: a progress bar's line (tqdm: "40%|####  |", "12step [00:01, 9.8step/s]"), not a message
_PROGRESS = re.compile(r"\d+%\||\w/s\]")


def _error_lines(stderr: str) -> list[str]:
    # tqdm moves the cursor up (ESC [A) after a nested bar (in-process, under the fuzz run's own bar): what
    # follows starts a line of its own on the terminal
    text = stderr.replace("\x1b[A", "\n")
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("jctlab: warning:")
            and not _PROGRESS.search(ln)]


def judge(case: Case, o: Outcome, root: Path) -> list[str]:
    """Every property the case breaks (empty: it passed)."""
    bad: list[str] = []
    if o.code == -1:
        return ["over-time", "stopped-by-watchdog"]
    if o.error is not None or o.code is None:
        return ["traceback"]
    if "Traceback" in o.stderr:
        bad.append("traceback")
    if o.code not in (0, 1, 2):
        bad.append("exit-code")
    if o.code == 1 and case.verb not in EXIT_1_VERBS:
        bad.append("exit-1-outside-replay")
    if case.expect == "bad" and o.code != 2:
        bad.append("accepted-nonsense")
    if case.expect == "good" and o.code != 0:
        bad.append("refused-valid-input")
    limit = (case.limit_s + SLACK_S) if case.limit_s is not None else NO_LIMIT_S
    if o.seconds > limit:
        bad.append("over-time")
    if o.warnings or "RuntimeWarning" in o.stderr:
        bad.append("runtime-warning")
    lines = _error_lines(o.stderr)
    if o.code == 2:
        if len(lines) != 1 or not lines[0].startswith("jctlab: error: "):
            bad.append("stderr-not-one-line")
        if o.stdout:
            bad.append("stdout-on-error")
    elif o.code == 0:
        # the daemon reports an event it rejects and goes on (docs/live.md): that is not an error
        ok = [ln for ln in lines if not ln.startswith("wrote ")
              and not (case.verb == "schedule-daemon" and ln.startswith("jctlab: rejected: "))]
        if ok:
            bad.append("stderr-on-success")
    out = root / case.out if case.out else None
    if o.code != 0:
        if out is not None and out.exists():
            bad.append("written-on-error")
        if any(p.name.endswith(".tmp") for p in root.rglob("*")):
            bad.append("temp-left")
        if any(data is not None and (not (root / n).is_file() or (root / n).read_bytes() != data)
               for n, data in case.files.items()):
            bad.append("input-changed-on-error")
    elif out is not None and out.exists():
        if not _output_ok(case, out, root):
            bad.append("unreadable-output")
        elif case.check is not None:
            bad += case.check(out)
    elif out is not None and case.expect == "good":
        bad.append("no-output")
    return bad


def _output_ok(case: Case, out: Path, root: Path) -> bool:
    """Whether the output written on success is what it should be (an instance that loads, a schedule that loads and
    replays valid on the case's instance, an image, a non-empty text, a folder)."""
    kind = case.out_kind or ("instance" if case.verb == "make-instance" else "schedule")
    try:
        if kind == "instance":
            load_instance(out)
            return True
        if kind == "schedule":
            sched = load_schedule(out)
            # a schedule written on success replays valid on the instance it was made for, its claims included
            inst = root / "inst.json"
            return not (sched.segments and inst.is_file()) or replay(load_instance(inst), sched).valid
    except Exception:  # noqa: BLE001 - the file written does not load back
        return False
    if kind == "image":
        head = out.read_bytes()[:256]
        return head.startswith(b"\x89PNG") or b"<svg" in head or head.startswith(b"<?xml")
    if kind == "text":
        return out.is_file() and out.stat().st_size > 0
    return out.is_dir()


def outcome_name(case: Case, o: Outcome, failures: list[str]) -> str:
    """The bucket a case falls into, for the counts of ``make fuzz``."""
    if failures:
        return "FAIL:" + ",".join(sorted(set(failures)))
    return f"ok:exit-{o.code}" + (":nonsense-refused" if case.expect == "bad" else "")


@lru_cache(maxsize=1)
def warm_up() -> None:
    """Import the solver stack and run each method once, untimed: a process pays 1-3 s (10+ s under load)
    once for imports and compiled kernels, which would otherwise land on the first case of each verb and
    say nothing about how a verb honours its limit. (``run_subprocess`` cases pay it every time.)"""
    import importlib

    for m in ("formulations.static.cpsat", "formulations.static.milp", "formulations.offline.cpsat",
              "formulations.offline.milp", "formulations.offline.bnb", "formulations.brute", "oracle.portfolio",
              "matching.methods", "samplers.methods", "baselines.families", "baselines.gavel", "evaluation.report",
              "rl.train", "live.planner"):
        importlib.import_module(m)
    eval_files()          # builds the micro suite and a run of it: the harness's imports and first calls
    root = Path(tempfile.mkdtemp(prefix="jctlab-fuzz-warm-"))
    try:
        for base, verbs in (("static", METHODS), ("offline", ("cpsat", "milp", "auto", "bnb"))):
            f = root / f"{base}.json"
            f.write_text(json.dumps(bases()[base]))
            for m in verbs:
                run_in_process(Case("solve", ["solve", str(f), "--method", m, "--time-limit", "0.5"]), root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run_and_judge(case: Case, in_process: bool = True) -> tuple[Outcome, list[str]]:
    if in_process:
        warm_up()
    root = Path(tempfile.mkdtemp(prefix="jctlab-fuzz-"))
    try:
        o = run_in_process(case, root) if in_process else run_subprocess(case, root)
        return o, judge(case, o, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


__all__ = ["Case", "Outcome", "cases", "ALL_WEIGHTS", "CORE_WEIGHTS", "EVAL_WEIGHTS", "LIVE_WEIGHTS",
           "run_and_judge", "run_in_process", "run_subprocess", "judge", "outcome_name",
           "bases", "schedule_of", "ps_heavy", "extreme", "warm_up", "materialize"]
