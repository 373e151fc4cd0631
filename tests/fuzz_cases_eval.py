"""Hostile inputs for the verbs that ``jctlab.commands`` plug-ins add (issue 44's fuzz suite, extended):
``evaluate``, ``suite``, ``report``, ``plot``, ``leaderboard`` (:mod:`evaluation`) and ``train``
(:mod:`rl.train`), as :class:`~tests.fuzz_cases.Case` objects judged by :mod:`tests.fuzzing` on the same
properties as the core verbs.

Their inputs are a micro suite (one 2-job instance, its proven optimum, built once per process by
:func:`eval_files`), a run folder of it, instance and schedule files, demonstration folders, and every
option: numbers out of range or not numbers, names that are not there, output paths that cannot be
written. Each case stays well inside the 10 s a verb without a time limit may take: inline executor,
training budgets of a few dozen environment steps, behaviour cloning from one or two shipped
demonstrations.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from .fuzz_cases import BAD_NUMBER, Case, _out, bases, corrupted, instance_input, mutated, schedule_of

#: the core verbs' weights are in fuzz_cases.CORE_WEIGHTS; these verbs cost 0.1-2 s a case
EVAL_WEIGHTS = {"evaluate": 1, "suite": 1, "report": 1, "plot": 1, "leaderboard": 1, "train": 1}

MICRO = {
    "format": "jctlab.suite/1", "name": "micro", "version": 1, "description": "fuzz fixture", "requires_data": False,
    "evaluate": {"methods": ["fifo-firstfit"], "time_limit_s": 1, "threads": 1},
    "build": {"method": "auto", "time_limit_s": 2, "threads": 1, "seed": 0, "best_of": ["fifo-firstfit"],
              "keep": "all"},
    "families": [{"name": "off", "function": "jctlab.generators:offline_instance",
                  "kwargs": {"gpus": 2, "nodes": 1, "jobs": 2, "max_size": 2}, "seeds": [10000]}],
    "instances": [],
}
SUITE = "suite/micro.json"
RUN = "run"
RUN_METHODS = ("fifo-firstfit", "sjf+pal")


@lru_cache(maxsize=1)
def eval_files() -> dict[str, bytes]:
    """The micro suite (manifest, instance, reference schedule) under ``suite/`` and a run folder of it
    (two policies) under ``run/``, as file name -> content; built once per process, in a folder removed
    at exit. Building also warms up what the verbs import (pandas, the runner, the oracle)."""
    from evaluation.build import BuildOptions, build
    from evaluation.methods import resolve_all
    from evaluation.runner import RunConfig, evaluate
    from evaluation.suites import load_suite

    root = Path(tempfile.mkdtemp(prefix="jctlab-fuzz-eval-"))
    atexit.register(shutil.rmtree, root, True)
    (root / "suite").mkdir()
    (root / SUITE).write_text(json.dumps(MICRO))
    build(load_suite(str(root / SUITE)), BuildOptions(root / "work", executor="inline", progress=False))
    evaluate(RunConfig(load_suite(str(root / SUITE)), resolve_all(",".join(RUN_METHODS)), root / RUN,
                       executor="inline", progress=False))
    out = {}
    for sub in ("suite", RUN):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file() and not p.name.startswith(("report", ".")):
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _files(prefix: str) -> dict[str, bytes | None]:
    return {k: v for k, v in eval_files().items() if k.startswith(prefix + "/")}


def _json(name: str) -> Any:
    return json.loads(eval_files()[name])


def _pick(draw: Any, case: Case, flag: str, valid: tuple[str, ...], bad: tuple[str, ...], p: int = 3) -> None:
    """Maybe add ``flag`` (probability about ``p``/10): a valid value, or (one time in eight) a bad one."""
    r = draw(st.integers(0, 9))
    if r >= p:
        return
    if bad and draw(st.integers(0, 7)) == 0:
        v = draw(st.sampled_from(bad))
        case.expect = "bad"
    else:
        v = draw(st.sampled_from(valid))
    case.argv += [flag, v]
    case.notes.append(f"{flag}={v!r}")


NUMBER_BAD = BAD_NUMBER + ("0",)      # "0" is out of range for every count and limit below


@st.composite
def _suite_files(draw: Any, case: Case) -> str:
    """The micro suite's files, sometimes with a mutated or corrupt manifest, or a doctored instance file
    (``"instance"`` returned: whether that is bad input depends on the verb, the caller says)."""
    files = _files("suite")
    how = draw(st.sampled_from(("valid",) * 6 + ("mutated", "corrupt", "instance")))
    if how == "mutated":
        doc = draw(mutated(_json(SUITE), "suite"))
        files[SUITE] = doc.text()
        case.expect = "bad" if doc.bad else case.expect
        case.notes += ["manifest"] + doc.notes
    elif how == "corrupt":
        files[SUITE], what = draw(corrupted(files[SUITE]))
        case.expect = "bad"
        case.notes.append(f"manifest corrupt:{what}")
    elif how == "instance":
        # a valid instance that is not the one the references were computed on: its hash says so
        name = next(k for k in files if "/instances/" in k)
        d = json.loads(files[name])
        d["jobs"][0]["iterations"] *= 2
        files[name] = json.dumps(d).encode()
        case.notes.append("instance file doctored")
    case.files.update(files)
    return how


@st.composite
def _run_files(draw: Any, case: Case) -> None:
    """The run folder's files, sometimes with one of them mutated, corrupt or missing."""
    files = _files(RUN)
    how = draw(st.sampled_from(("valid", "valid", "row", "cells", "meta", "snapshot", "schedule", "missing")))
    cells = f"{RUN}/cells.jsonl"
    if how == "row":
        rows = files[cells].decode().splitlines()
        k = draw(st.integers(0, len(rows) - 1))
        doc = draw(mutated(json.loads(rows[k]), "row"))
        rows[k] = doc.text().decode()
        files[cells] = ("\n".join(rows) + "\n").encode()
        case.notes += [f"row {k}"] + doc.notes
    elif how == "cells":
        files[cells], what = draw(corrupted(files[cells]))     # a partial last line is skipped (resume)
        case.notes.append(f"cells corrupt:{what}")
    elif how in ("meta", "snapshot"):
        name = f"{RUN}/{'run' if how == 'meta' else 'suite'}.json"
        files[name], what = draw(corrupted(files[name]))
        if case.verb == "report":       # evaluate writes both anew; suite check reads only the cells
            case.expect = "bad"
        case.notes.append(f"{name} corrupt:{what}")
    elif how == "schedule":
        name = draw(st.sampled_from(sorted(k for k in files if "/schedules/" in k)))
        files[name], what = draw(corrupted(files[name]))
        case.notes.append(f"schedule corrupt:{what}")
    elif how == "missing":
        name = draw(st.sampled_from(sorted(files)))
        del files[name]
        case.notes.append(f"missing {name}")
        if name.endswith("/suite.json") and case.verb == "report":
            case.expect = "bad"
    case.files.update(files)


@st.composite
def _out_dir(draw: Any, case: Case, flag: str, name: str) -> None:
    """An output folder: usually a fresh one, sometimes an existing file, a path under a file or empty."""
    how = draw(st.sampled_from(("fresh",) * 9 + ("file", "under-file", "empty")))
    if how == "fresh":
        case.out, case.out_kind = name, "folder"
        case.argv += [flag, "{dir}/" + name]
    elif how == "file":
        case.files["plain"] = b"x"
        case.argv += [flag, "{dir}/plain"]
        case.expect = "bad"
    elif how == "under-file":
        case.files["plain"] = b"x"
        case.argv += [flag, "{dir}/plain/" + name]
        case.expect = "bad"
    else:
        case.argv += [flag, ""]
        case.expect = "bad"
    case.notes.append(f"{flag}:{how}")


METHODS_VALID = ("fifo-firstfit", "sjf+pal", "fifo-firstfit,sjf+pal", "sampling[samples=4]", "auto",
                 "policy:matching", "matching[width=4]")
METHODS_BAD = ("bogus", "sampling[samples=abc]", "sampling[samples=1.5]", "sampling[bogus=1]", "fifo-firstfit[",
               ",", "fifo-firstfit,fifo-firstfit", "auto[time_limit=1]", "x:y", "", "sampling[fairness=nan]")


@st.composite
def evaluate_case(draw: Any) -> Case:
    case = Case("evaluate", ["evaluate", "--suite", "{dir}/" + SUITE, "--no-progress"], notes=[])
    doctored = draw(_suite_files(case)) == "instance"
    which = draw(st.integers(0, 19))
    if which == 0:
        case.argv[2] = draw(st.sampled_from(("bogus", "{dir}/nothing.json", "", "{dir}/suite")))
        case.expect = "bad"
        case.notes.append(f"--suite {case.argv[2]!r}")
    if draw(st.integers(0, 9)) == 0:
        case.argv += ["--executor", "local", "--workers", draw(st.sampled_from(NUMBER_BAD + ("100000",)))]
        case.expect = "bad"
        case.notes.append("local workers bad")
    else:
        case.argv += ["--executor", "inline"]
    _pick(draw, case, "--methods", METHODS_VALID, METHODS_BAD, p=5)
    _pick(draw, case, "--seeds", ("1",), NUMBER_BAD + ("2", "1.5"))
    _pick(draw, case, "--time-limit", ("0.5", "1"), NUMBER_BAD + ("1e7",))
    _pick(draw, case, "--threads", ("1",), NUMBER_BAD + ("2000",))
    _pick(draw, case, "--data-dir", ("{dir}/suite",), ("", "{dir}/nothing"), p=1)
    if "--methods" in case.argv:
        m = case.argv[case.argv.index("--methods") + 1]
        if m in METHODS_VALID:
            _pick(draw, case, "--baseline", tuple(m.split(",")), ("bogus", ""), p=2)
    if draw(st.booleans()):
        draw(_out_dir(case, "--out", "runout"))
    elif draw(st.booleans()):     # resume into the fixture's run folder (its cells maybe doctored)
        draw(_run_files(case))
        case.argv += ["--out", "{dir}/" + RUN]
        doctored = False          # the run folder's copy of the instance (checked by its hash) is used
    else:
        case.argv += ["--out", "{dir}/runout"]
        case.out, case.out_kind = "runout", "folder"
    if draw(st.integers(0, 9)) == 0:
        case.argv.append("--report")
    if doctored:                  # the references are not this instance's: refused
        case.expect = "bad"
    return case


@st.composite
def suite_case(draw: Any) -> Case:
    action = draw(st.sampled_from(("list",) + ("check",) * 4 + ("build",) * 3 + ("bogus",)))
    case = Case("suite", ["suite", action], expect="bad" if action == "bogus" else "any", notes=[action])
    if action == "list":
        return case
    draw(_suite_files(case))
    if draw(st.integers(0, 9)):
        case.argv.append("{dir}/" + SUITE)
    elif action != "bogus":
        case.expect = "bad"       # no suite named
    if action == "build":
        case.argv += ["--executor", "inline", "--no-progress"]
        _pick(draw, case, "--time-limit", ("0.5", "1"), NUMBER_BAD, p=5)
        _pick(draw, case, "--threads", ("1",), NUMBER_BAD)
        if draw(st.booleans()):
            draw(_out_dir(case, "--work", "work"))
    else:
        if draw(st.booleans()):
            draw(_run_files(case))
            case.argv += ["--runs", "{dir}/" + RUN]
        _pick(draw, case, "--runs", ("{dir}/nothing",), ("",), p=1)
        if draw(st.integers(0, 3)) == 0:
            case.argv.append("--verbose")
    return case


@st.composite
def report_case(draw: Any) -> Case:
    case = Case("report", ["report", "{dir}/" + RUN], notes=[])
    draw(_run_files(case))
    if draw(st.integers(0, 19)) == 0:
        case.argv[1] = draw(st.sampled_from(("{dir}/nothing", "", "{dir}/" + RUN + "/cells.jsonl")))
        case.expect = "bad"
    inst = next(k for k in eval_files() if k.startswith(f"{RUN}/instances/")).rsplit("/", 1)[1][:-5]
    _pick(draw, case, "--instance", (inst,), ("bogus", ""))
    _pick(draw, case, "--baseline", RUN_METHODS, ("bogus", ""))
    case.out, case.out_kind = f"{RUN}/report.html", "text"
    return case


@st.composite
def plot_case(draw: Any) -> Case:
    base = draw(st.sampled_from([b for b in sorted(bases()) if schedule_of(b) is not None]))
    inst, bad, notes, _ = draw(instance_input(base))
    sched = json.dumps(schedule_of(base)).encode()
    case = Case("plot", ["plot", "{dir}/inst.json", "{dir}/sched.json"], {"inst.json": inst},
                "bad" if bad else "any", notes=notes)
    how = draw(st.sampled_from(("valid",) * 5 + ("mutated", "corrupt", "other")))
    if how == "mutated":
        doc = draw(mutated(schedule_of(base), "schedule"))
        sched = doc.text()
        case.expect = "bad" if doc.bad else case.expect
        case.notes += ["schedule"] + doc.notes
    elif how == "corrupt":
        sched, what = draw(corrupted(sched))
        case.expect = "bad"
        case.notes.append(f"schedule corrupt:{what}")
    elif how == "other":
        sched = json.dumps(dict(schedule_of(base), instance="someone-else")).encode()
        case.expect = "bad"
        case.notes.append("schedule of another instance")
    case.files["sched.json"] = sched
    ext = draw(st.sampled_from((".png", ".svg", ".png", ".svg", ".png", ".svg", ".png", ".txt")))
    if ext == ".txt":
        case.expect = "bad"
    draw(_out(case))
    if case.out is not None:          # a file name _out chose: give it the extension drawn
        case.out = case.out[:-5] + ext
        case.argv[-1] = case.argv[-1][:-5] + ext
        case.out_kind = "image"
    if draw(st.booleans()):
        case.argv += ["--title", draw(st.sampled_from(("", "x", "ü" * 300, "$\\frac{a}{", "%s %d")))]
    return case


@st.composite
def leaderboard_case(draw: Any) -> Case:
    case = Case("leaderboard", ["leaderboard", "--executor", "inline", "--no-progress"], notes=[])
    draw(_suite_files(case))
    suites = draw(st.sampled_from(("{dir}/" + SUITE,) * 12 + ("bogus", "", ",", "{dir}/nothing.json")))
    case.argv += ["--suites", suites]
    if suites != "{dir}/" + SUITE:
        case.expect = "bad"
    _pick(draw, case, "--methods", METHODS_VALID[:3], METHODS_BAD, p=5)
    _pick(draw, case, "--seeds", ("1",), NUMBER_BAD)
    draw(_out_dir(case, "--runs", "lbruns"))
    case.out, case.out_kind = "LB.md", "text"
    how = draw(st.sampled_from(("file",) * 6 + ("dir", "empty")))
    if how == "file":
        case.argv += ["--out", "{dir}/LB.md"]
    else:
        case.files["LBdir"] = None
        case.argv += ["--out", "{dir}/LBdir" if how == "dir" else ""]
        case.expect = "bad"
    case.notes.append(f"--out:{how}")
    return case


GENERATORS_VALID = ("gpus=4/8,jobs=3", "gpus=4,nodes=1,jobs=2", "gpus=8,nodes=1,jobs=3,topology=true",
                    "gpus=4,jobs=2/3,interarrival_s=300,elastic=0.5")
GENERATORS_BAD = ("gpus=abc", "bogus=1", "gpus=1000", "jobs=0", "gpus", "gpus=nan", "types=", "interarrival_s=-1",
                  "gpus=4,gpus=8", "ps=maybe", "jobs=1e400", "gpus=4/,jobs=2")


@lru_cache(maxsize=None)
def _demo_files(first_seed: int, count: int) -> dict[str, bytes]:
    """The shipped demonstrations of training seeds first_seed.. (``rl/data/demos``), as ``demos/demos/...``."""
    from rl.suites import family
    from rl.bc import DATA as DEMOS

    names = ("small", "queue")
    out = {}
    for i in range(count):
        name = family(names[i % 2]).make(first_seed + i).name
        p = DEMOS / "demos" / f"{name}.json"
        if p.is_file():
            out[f"demos/demos/{name}.json"] = p.read_bytes()
    return out


@st.composite
def train_case(draw: Any) -> Case:
    policy = draw(st.sampled_from(("ppo", "hrl") * 5 + ("bogus",)))
    case = Case("train", ["train", "--policy", policy, "--bc-time-limit", "0.5"],
                expect="bad" if policy == "bogus" else "any", notes=[policy])
    steps = draw(st.sampled_from(("8", "16", "32") * 3 + ("0",)))
    case.argv += ["--steps", steps, "--num-envs", draw(st.sampled_from(("1", "2"))),
                  "--rollout-steps", draw(st.sampled_from(("8", "16")))]
    bc = draw(st.sampled_from(("0", "0", "1")))
    case.argv += ["--bc-epochs", bc]
    if steps == "0" and bc == "0":
        case.expect = "bad"                     # nothing to train
    if bc != "0":
        count = draw(st.integers(1, 2))
        demos = dict(_demo_files(100, count))
        # without the shipped DAgger episodes (thousands of states): cloning stays within a case's 10 s
        case.argv += ["--bc-instances", str(count), "--bc-first-seed", "100", "--demos", "{dir}/demos",
                      "--suite", "small,queue", "--dagger", "none"]
        how = draw(st.sampled_from(("valid", "valid", "corrupt", "other")))
        name = sorted(demos)[0]
        if how == "corrupt":
            demos[name], what = draw(corrupted(demos[name]))
            case.expect = "bad"
            case.notes.append(f"demo corrupt:{what}")
        elif how == "other":                    # another instance's schedule under this name
            demos[name] = json.dumps(schedule_of("offline")).encode()
            case.expect = "bad"
            case.notes.append("demo of another instance")
        case.files.update(demos)
    else:
        if draw(st.booleans()):
            _pick(draw, case, "--generator", GENERATORS_VALID, GENERATORS_BAD, p=10)
        else:
            _pick(draw, case, "--suite", ("small", "queue", "topology", "small,topology"),
                  ("bogus", ",", "", "small,,queue"), p=10)
    # preemptive episodes of the suites' families run a decision every round (hundreds of steps: rollouts
    # are whole episodes): the small generated instances only, to stay within a case's 10 s
    _pick(draw, case, "--problem", ("offline", "preemptive") if "--generator" in case.argv else ("offline",),
          ("static", ""), p=2)
    _pick(draw, case, "--seed", ("0", "3"), ("-1", "nan", "2147483648"))
    _pick(draw, case, "--threads", ("1",), NUMBER_BAD)
    if bc == "0":       # with behaviour cloning the demonstrations' seeds are fixed above
        _pick(draw, case, "--bc-first-seed", ("0", "500"), ("-1", "10000", "abc"), p=1)
    if draw(st.integers(0, 9)) == 0:
        k = draw(st.sampled_from(("--steps", "--num-envs", "--rollout-steps", "--bc-epochs", "--bc-instances",
                                  "--bc-time-limit")))
        v = draw(st.sampled_from(BAD_NUMBER))
        case.argv += [k, v]                     # argparse keeps the last: the bad value wins
        case.expect = "bad"
        case.notes.append(f"{k}={v!r}")
    draw(_out_dir(case, "--out", "ckpt"))
    return case


def eval_strategies() -> dict[str, st.SearchStrategy[Case]]:
    return {"evaluate": evaluate_case(), "suite": suite_case(), "report": report_case(), "plot": plot_case(),
            "leaderboard": leaderboard_case(), "train": train_case()}
