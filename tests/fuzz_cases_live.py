"""Hostile inputs for the live scheduler's verbs, ``schedule`` and ``schedule-daemon`` (:mod:`live`), as
:class:`~tests.fuzz_cases.Case` objects judged by :mod:`tests.fuzzing` on the same properties as the other
verbs: exit 0 or 2, one line on error, nothing written on error, the time limit honoured.

Their inputs are the shipped examples (``examples/small-lab``: cluster YAML, queue and running CSVs, events;
``examples/slurm``: ``sinfo --json`` and ``squeue --json`` output) with one line cut, a field replaced by
nonsense or an absurd number, a row duplicated or dropped, or the whole file corrupted; and the planner's
options, valid or not. The daemon reads its events from a spool folder (``--once``); a bad event is logged and
skipped, not fatal, so only a bad cluster file or option must make it exit 2, and then without leaving a state
file behind. Besides, valid states of other shapes (:mod:`tests.fuzz_live_states`: drawn clusters, queues and
running jobs, and for the daemon the same as events) with every valid option: they must be planned (exit 0),
and the plans written, or the daemon's logged decisions, must be sound (:func:`plan_problems`,
:func:`log_problems`).
"""

from __future__ import annotations

from functools import lru_cache, partial
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from .fuzz_cases import BAD_NUMBER, Case, corrupted
from .fuzz_live_states import (
    EPOCH,
    live_events,
    live_state,
    log_problems,
    plan_problems,
)

LIVE_WEIGHTS = {"schedule": 1, "schedule-daemon": 1}
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE = EXAMPLES / "small-lab"
FILES = ("cluster.yaml", "queue.csv", "running.csv")
SLURM = ("sinfo.json", "squeue.json")

#: replacements for one field of a line: nonsense, absurd numbers, references to nothing
NONSENSE = BAD_NUMBER + ("0", "-0", "1.5", "1e30", "400000", "9" * 5000, "gpu99:0", "gpu01:0|gpu01:0", "x|y",
                         "2025-13-45T99:00:00", "[" * 300, "{a: 1}", "&a [*a]", "~", "true")


@lru_cache(maxsize=1)
def example_files() -> dict[str, bytes]:
    """The example's files, and its events as one spool file each (``spool/NNN.json``)."""
    files = {n: (EXAMPLE / n).read_bytes() for n in FILES}
    files.update({n: (EXAMPLES / "slurm" / n).read_bytes() for n in SLURM})
    for i, line in enumerate((EXAMPLE / "events.jsonl").read_bytes().splitlines()):
        files[f"spool/{i:03d}.json"] = line
    return files


@st.composite
def _doctored(draw: Any, text: bytes) -> tuple[bytes, str]:
    """``text`` with one line-level change (the result may still be valid: a dropped queue row is)."""
    lines = text.decode().splitlines()
    how = draw(st.sampled_from(("cut", "field", "field", "duplicate", "drop", "number")))
    i = draw(st.integers(0, len(lines) - 1))
    if how == "cut":
        lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
    elif how == "field":
        sep = "," if "," in lines[i] else ":"
        toks = lines[i].split(sep)
        toks[draw(st.integers(0, len(toks) - 1))] = " " + draw(st.sampled_from(NONSENSE))
        lines[i] = sep.join(toks)
    elif how == "duplicate":
        lines.insert(i, lines[i])
    elif how == "drop" and len(lines) > 1:
        del lines[i]
    else:
        lines[i] = lines[i].replace("4", draw(st.sampled_from(("400000", "-4", "4.5", "1e30", "99999999999"))))
    return ("\n".join(lines) + "\n").encode(), f"{how}@{i}"


@st.composite
def _inputs(draw: Any, case: Case, names: tuple[str, ...]) -> None:
    """The example's files, one of ``names`` maybe doctored or corrupt (corrupt: certainly bad input)."""
    case.files.update({k: v for k, v in example_files().items() if k in names or k.startswith("spool/")})
    how = draw(st.sampled_from(("valid", "valid", "doctored", "doctored", "doctored", "corrupt")))
    if how == "valid":
        return
    name = draw(st.sampled_from(names))
    if how == "corrupt" and name != "queue.csv":   # an empty queue file may be a header-less empty queue
        case.files[name], what = draw(corrupted(case.files[name]))
        # a YAML or CSV file cut short may still be a whole one (a cluster of its first nodes: fuzz seed 5507)
        if what != "truncate" or name.endswith(".json"):
            case.expect = "bad"
    else:
        case.files[name], what = draw(_doctored(case.files[name]))
    case.notes.append(f"{name} {how}:{what}")


@st.composite
def _planner_flags(draw: Any, case: Case) -> None:
    """The planner's options: a short time limit, fast methods; one in five cases a value that is nonsense."""
    limit = draw(st.sampled_from(("1", "2", "0.5")))
    method = draw(st.sampled_from(("none", "none", "cpsat", "auto")))
    case.argv += ["--time-limit", limit, "--method", method]
    case.limit_s = float(limit)
    case.notes.append(f"--time-limit {limit} --method {method}")
    if draw(st.integers(0, 4)) == 0:
        flag = draw(st.sampled_from(("--time-limit", "--threads", "--seed", "--max-oracle-jobs", "--method",
                                     "--fallbacks", "--objective")))
        value = draw(st.sampled_from(BAD_NUMBER + ("0", "bogus", "fifo-firstfit,bogus", ",")))
        if flag in ("--seed",) and value == "0":
            value = "-1"
        case.argv += [flag, value]
        # no policy named (``''``, ``','``) is an empty list of fallbacks: the planner's own plans alone
        if not (flag == "--fallbacks" and not value.strip(", ")):
            case.expect = "bad"
        case.limit_s = None if flag == "--time-limit" else case.limit_s
        case.notes.append(f"{flag}={value!r}")


@st.composite
def _options(draw: Any, case: Case, bindings: tuple[str, str]) -> bool:
    """Valid options of the planner beyond the time limit and method; whether preemption is allowed."""
    preemption = draw(st.booleans())
    opts = ["--preemption"] * preemption + ["--arrivals"] * draw(st.booleans())
    opts += ["--objective", draw(st.sampled_from(("mean_jct", "weighted_jct", "makespan")))]
    if draw(st.booleans()):
        opts += ["--max-evaluations", draw(st.sampled_from(("1", "50", "2000")))]
    if draw(st.booleans()):
        opts += list(bindings)
    case.argv += opts
    case.notes.append(" ".join(opts))
    return preemption


@st.composite
def schedule_case(draw: Any) -> Case:
    source = draw(st.sampled_from(("example", "example", "drawn", "slurm")))
    if source == "slurm":
        case = Case("schedule", ["schedule", "--slurm-nodes", "{dir}/sinfo.json", "--slurm-queue",
                                 "{dir}/squeue.json", "--out", "{dir}/plan.json"], notes=["slurm"])
        draw(_inputs(case, SLURM))
    elif source == "drawn":   # a valid state of another shape than the example's: it must be planned
        state = draw(live_state())
        case = Case("schedule", ["schedule", "--cluster", "{dir}/cluster.yaml", "--queue", "{dir}/queue.csv",
                                 "--running", "{dir}/running.csv", "--out", "{dir}/plan.json"], dict(state.files),
                    expect="good", notes=["drawn state"])
        if not (state.queued or state.running) or draw(st.booleans()):
            state.now = float(EPOCH + draw(st.sampled_from((0, 3600, 7200))) if not (state.queued or state.running)
                              else state.now + draw(st.sampled_from((0, 1, 900))))
            case.argv += ["--now", str(state.now)]
        preemption = draw(_options(case, ("--bindings", "{dir}/bindings.json")))
        case.check = partial(plan_problems, s=state, preemption=preemption)
    else:
        case = Case("schedule", ["schedule", "--cluster", "{dir}/cluster.yaml", "--queue", "{dir}/queue.csv",
                                 "--running", "{dir}/running.csv", "--out", "{dir}/plan.json"], notes=[])
        draw(_inputs(case, FILES))
    draw(_planner_flags(case))
    case.out, case.out_kind = "plan.json", "text"
    if draw(st.integers(0, 9)) == 0:      # an --out that cannot be written (its value: the planner's flags follow it)
        spool = ("{dir}/spool",) if any(n.startswith("spool/") for n in case.files) else ()   # a folder there
        under = "{dir}/" + next(n for n in case.files if "/" not in n) + "/plan.json"         # under a file
        case.argv[case.argv.index("--out") + 1] = draw(st.sampled_from((under, "", *spool)))
        case.expect = "bad"
        case.out = None
        case.check = None
    return case


@st.composite
def daemon_case(draw: Any) -> Case:
    case = Case("schedule-daemon", ["schedule-daemon", "--state", "{dir}/state.db", "--cluster",
                                    "{dir}/cluster.yaml", "--spool", "{dir}/spool", "--once"], notes=[])
    if draw(st.integers(0, 2)) == 0:      # a valid state of another shape than the example's, as events
        state = draw(live_state())
        events = draw(live_events(state))
        case.files.update({"cluster.yaml": state.files["cluster.yaml"], "spool": None, **events})
        case.argv += ["--log", "{dir}/decisions.jsonl"]
        case.expect, case.notes = "good", ["drawn state"]
        preemption = draw(_options(case, ("--bindings-dir", "{dir}/bindings")))
        case.check = partial(log_problems, s=state, preemption=preemption, events=len(events))
    else:
        draw(_inputs(case, ("cluster.yaml",)))
    if case.expect != "good" and draw(st.integers(0, 2)) == 0:   # one event made nonsense: logged, skipped, not fatal
        k = draw(st.sampled_from(sorted(n for n in case.files if n.startswith("spool/"))))
        case.files[k], what = draw(_doctored(case.files[k]))
        case.notes.append(f"{k} {what}")
    draw(_planner_flags(case))
    if case.limit_s is not None:          # every event is a decision within the limit
        case.limit_s *= sum(1 for n in case.files if n.startswith("spool/"))
    case.out, case.out_kind = "state.db", "text"
    return case


def live_strategies() -> dict[str, st.SearchStrategy[Case]]:
    return {"schedule": schedule_case(), "schedule-daemon": daemon_case()}


__all__ = ["LIVE_WEIGHTS", "example_files", "live_strategies"]
