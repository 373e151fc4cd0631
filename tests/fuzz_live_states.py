"""Valid live states a lab could have, drawn at random, and what every plan of them must be.

The example files (``examples/small-lab``), doctored, test how bad input is refused; they do not test a
state the example does not look like: one node or six, GPU types the shipped table lacks (``a100``), jobs
priced by ``work_<type>`` columns on some types only, an empty queue, every GPU held, weights and
communication, ISO and epoch times. :func:`live_state` draws such states (each file valid by docs/live.md),
so ``schedule`` must answer them with exit 0, and :func:`plan_problems` checks the plan it writes, from the
user's side: every queued job planned once, on GPUs that exist, of a type it can use, at a size it allows;
no GPU holds two jobs at once; running jobs kept where they are unless ``--preemption``; nothing starts
before now.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

GAVEL_TYPES = ("v100", "p100", "k80")
#: models of the shipped table with a throughput on each of GAVEL_TYPES
MODELS = ("A3C", "CycleGAN", "ResNet-50 (batch size 64)", "LM (batch size 20)", "Transformer (batch size 64)")
EPOCH = 1_748_850_000          # 2025-06-02, about when the example's jobs are submitted
TOL = 1e-4   # seconds: plan times are epoch seconds (a float's step there is 2.4e-7 s); jobs may last 0.1 s


@dataclass
class LiveState:
    """The files of one drawn state and what a plan of it is checked against."""

    files: dict[str, bytes]
    gpu_type: dict[str, str]                  # GPU id -> type
    queued: dict[str, tuple[set[int], set[str]]] = field(default_factory=dict)   # name -> (sizes, usable types)
    running: dict[str, tuple[str, ...]] = field(default_factory=dict)           # name -> GPUs held
    now: float = 0.0


def _when(draw: Any, t: float) -> str:
    """``t`` as epoch seconds or as an ISO date in UTC (both are valid)."""
    if draw(st.booleans()):
        return f"{t:g}" if t != int(t) else str(int(t))
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _csv(rows: list[dict[str, str]], columns: list[str]) -> bytes:
    lines = [",".join(columns)] + [",".join(r.get(c, "") for c in columns) for r in rows]
    return ("\n".join(lines) + "\n").encode()


@st.composite
def _cluster(draw: Any) -> tuple[bytes, dict[str, str]]:
    nodes, gpu_type, out = draw(st.integers(1, 5)), {}, ["name: drawn-lab"]
    for key in ("restart_s", "locality_penalty", "qpi_factor"):
        if draw(st.booleans()):
            out.append(f"{key}: {draw(st.sampled_from(('0', '1', '1.3', '30')) if key == 'restart_s' else st.sampled_from(('1', '1.2', '2')))}")
    out.append("nodes:")
    for n in range(nodes):
        name = f"node-{n}"
        out += [f"  - name: {name}", f"    cpus: {draw(st.sampled_from((8, 24, 64)))}",
                f"    mem_gb: {draw(st.sampled_from((32, 128, 512)))}", "    gpus:"]
        k = 0
        for _ in range(draw(st.integers(1, 2))):
            typ = draw(st.sampled_from(GAVEL_TYPES + ("a100",)))
            count = draw(st.integers(1, 4))
            sock = draw(st.sampled_from(("", ", socket: 0", ", socket: 1")))
            out.append(f"      - {{type: {typ}, count: {count}{sock}}}")
            for _ in range(count):
                gpu_type[f"{name}:{k}"] = typ
                k += 1
    return ("\n".join(out) + "\n").encode(), gpu_type


@st.composite
def live_state(draw: Any) -> LiveState:
    """A valid state: a cluster, a queue (maybe empty), running jobs on GPUs none shares."""
    cluster, gpu_type = draw(_cluster())
    s = LiveState({"cluster.yaml": cluster}, gpu_type)
    types = sorted(set(gpu_type.values()))
    free = list(gpu_type)
    rows, columns = [], ["name", "submit", "start", "gpus", "remaining_s"]
    latest = -math.inf       # the default --now: the latest submission or start in the files
    for i in range(draw(st.integers(0, min(3, len(free))))):
        take = draw(st.lists(st.sampled_from(free), min_size=1, max_size=min(4, len(free)), unique=True))
        free = [g for g in free if g not in take]
        submit = EPOCH - draw(st.integers(60, 7200))
        start = submit + draw(st.integers(0, 3000))
        latest = max(latest, start)
        row = {"name": f"run-{i}", "submit": _when(draw, submit), "start": _when(draw, start), "gpus": "|".join(take),
               "remaining_s": str(draw(st.sampled_from((1, 60, 600.5, 5400, 86400))))}
        if draw(st.booleans()) and all(gpu_type[g] in GAVEL_TYPES for g in take):   # a known model: preemptible
            row["model"], row["iterations"] = draw(st.sampled_from(MODELS)), str(draw(st.integers(100, 90000)))
            columns += [c for c in ("model", "iterations") if c not in columns]
        rows.append(row)
        s.running[row["name"]] = tuple(take)
        if not free:
            break
    s.files["running.csv"] = _csv(rows, columns)
    rows, columns = [], ["name", "submit", "sizes"]
    for i in range(draw(st.integers(0, 12))):
        submit = EPOCH + draw(st.integers(0, 3600))
        latest = max(latest, submit)
        row = {"name": f"job-{i}", "submit": _when(draw, submit)}
        if draw(st.booleans()):
            row["model"], row["iterations"] = draw(st.sampled_from(MODELS)), str(draw(st.integers(1, 100000)))
            usable = set(GAVEL_TYPES) & set(types)
        else:
            usable = set(draw(st.lists(st.sampled_from(types), min_size=1, unique=True)))
            for t in usable:
                row[f"work_{t}"] = str(draw(st.sampled_from((1, 30, 1800, 14400.5, 200000))))
        if not usable:      # the only types are a100 and the job wants a model: price it by work instead
            usable = set(types)
            row.pop("model"), row.pop("iterations")
            row.update({f"work_{t}": "600" for t in usable})
        room = sum(1 for g in gpu_type.values() if g in usable)
        sizes = set(draw(st.lists(st.sampled_from((1, 2, 3, 4, 8)), min_size=1, max_size=3, unique=True)))
        sizes.add(draw(st.integers(1, min(room, 4))))          # at least one size fits
        row["sizes"] = "|".join(map(str, sorted(sizes)))
        for key, values in (("weight", ("0.5", "1", "4")), ("comm_mb", ("0", "50", "500")), ("steps", ("1", "1000"))):
            if draw(st.integers(0, 3)) == 0:
                row[key] = draw(st.sampled_from(values))
        columns += [c for c in row if c not in columns]
        rows.append(row)
        s.queued[row["name"]] = (sizes, usable)
    s.files["queue.csv"] = _csv(rows, columns)
    s.now = float(latest) if latest > -math.inf else float(EPOCH)   # no row: the case gives --now
    return s


def _queue_record(header: list[str], row: list[str]) -> dict[str, Any]:
    """A queue or running CSV row as the record of a daemon event (blank cells left out)."""
    return {k: v for k, v in zip(header, row) if v != ""}


@st.composite
def live_events(draw: Any, s: LiveState) -> dict[str, bytes]:
    """The state as the daemon's spool (``spool/NNN.json``): its running jobs and submissions in time order, then
    completions, revised estimates and ticks, some of jobs the daemon will have started itself."""
    events: list[tuple[float, dict[str, Any]]] = []
    for name in ("running.csv", "queue.csv"):
        header, *rows = [ln.split(",") for ln in s.files[name].decode().splitlines()]
        for row in rows:
            rec = _queue_record(header, row)
            kind = "running" if name == "running.csv" else "submit"
            t = _seconds(rec["start" if kind == "running" else "submit"])
            events.append((t, {"type": kind, "job": rec}))
    events.sort(key=lambda e: e[0])
    t = events[-1][0] if events else float(EPOCH)
    names = sorted(s.queued) + sorted(s.running)
    for _ in range(draw(st.integers(0, 4))):
        t += draw(st.sampled_from((0, 1, 300, 3600)))
        kind = draw(st.sampled_from(("complete", "cancel", "revise", "tick")))
        ev: dict[str, Any] = {"type": kind}
        if kind != "tick" and names:
            ev["job"] = draw(st.sampled_from(names))
            if kind == "revise":
                if ev["job"] in s.running:
                    ev["remaining_s"] = draw(st.sampled_from((1, 600, 7200)))
                else:
                    ev["sizes"] = "1"
        elif kind != "tick":
            ev = {"type": "tick"}
        events.append((t, ev))
    out = {}
    for i, (when, ev) in enumerate(events):
        out[f"spool/{i:03d}.json"] = json.dumps({"id": str(i + 1), "time": when, **ev}).encode()
    return out


def _seconds(v: str) -> float:
    try:
        return float(v)
    except ValueError:
        return dt.datetime.strptime(v, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=dt.UTC).timestamp()


def _overlaps(now: float, items: list[tuple[str, dict]], kept: dict[str, dict], gpu_type: dict[str, str]
              ) -> list[str]:
    """What a plan's placements break regardless of the jobs: each starts at or after now (those of
    ``start_now`` at now) and ends after it starts, on distinct GPUs that exist, none held by two at once."""
    bad = []
    busy: dict[str, list[tuple[float, float]]] = {}
    for x in kept.values():
        busy.update({g: [(now, float(x["end"]))] for g in x["gpus"]})
    for kind, x in items:
        start, end, gpus = float(x["start"]), float(x["end"]), list(x["gpus"])
        tol = TOL
        if (kind == "start_now" and abs(start - now) > tol) or start < now - tol or not end > start:
            bad.append(f"plan-times:{x['job']}")
        if any(g not in gpu_type for g in gpus) or len(set(gpus)) != len(gpus):
            bad.append(f"plan-gpus:{x['job']}")
            continue
        for g in gpus:
            if any(start < e - tol and b < end - tol for b, e in busy.get(g, ())):
                bad.append(f"plan-gpu-twice:{g}")
            busy.setdefault(g, []).append((start, end))
    return bad


def _placements(p: dict) -> tuple[list[tuple[str, dict]], dict[str, dict], list[str]]:
    items = [("start_now", x) for x in p["start_now"]] + [("later", x) for x in p["later"]]
    return items, {x["job"]: x for x in p["running"]}, list(p["preempt_now"])


def plan_problems(path: Path, s: LiveState, preemption: bool) -> list[str]:
    """What the plan written at ``path`` breaks (empty: nothing)."""
    try:
        p = json.loads(path.read_text())
        now = float(p["now"])
        items, kept, stopped = _placements(p)
        bad = _overlaps(now, items, kept, s.gpu_type)
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"plan-unreadable:{type(e).__name__}"]
    if abs(now - s.now) > TOL:
        bad.append("plan-now")
    planned = [x["job"] for _, x in items]
    resumed = [j for j in planned if j in s.running]
    if sorted(j for j in planned if j not in s.running) != sorted(s.queued) or len(set(resumed)) != len(resumed):
        bad.append("plan-jobs")
    if sorted([*kept, *stopped]) != sorted(s.running):
        bad.append("plan-running")
    if not preemption and (stopped or resumed or any(tuple(kept[j]["gpus"]) != s.running[j] for j in kept)):
        bad.append("plan-moved-a-running-job")
    if any(j not in stopped for j in resumed):
        bad.append("plan-resumed-a-running-job")
    for _, x in items:
        if x["job"] in s.queued:
            sizes, usable = s.queued[x["job"]]
            if len(x["gpus"]) not in sizes or any(s.gpu_type.get(g) not in usable for g in x["gpus"]):
                bad.append(f"plan-allocation:{x['job']}")
    return sorted(set(bad))


def log_problems(path: Path, s: LiveState, preemption: bool, events: int) -> list[str]:
    """What the daemon's decisions (its ``--log`` beside ``path``, the state file) break: one logged decision
    or rejection per event at least, each plan's placements (as :func:`plan_problems` checks them), and no job
    started twice unless stopped in between."""
    bad: list[str] = []
    started: set[str] = set()
    log = path.parent / "decisions.jsonl"
    if not log.exists() or len(log.read_text().splitlines()) < events:
        return ["daemon-decisions-missing"] if events else []
    try:
        for line in log.read_text().splitlines():
            d = json.loads(line)
            if d.get("plan") is None:
                continue
            items, kept, stopped = _placements(d["plan"])
            bad += _overlaps(float(d["plan"]["now"]), items, kept, s.gpu_type)
            if stopped and not preemption:
                bad.append("daemon-stopped-a-job")
            started -= set(stopped)
            for x in d["start"]:
                if x["job"] in started:
                    bad.append(f"daemon-started-twice:{x['job']}")
                started.add(x["job"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return [f"log-unreadable:{type(e).__name__}"]
    return sorted(set(bad))


__all__ = ["LiveState", "live_events", "live_state", "log_problems", "plan_problems"]
