"""``jctlab schedule`` (one decision from files) and ``jctlab schedule-daemon`` (the rolling-horizon loop).

Registered through the ``jctlab.commands`` entry point; bad input is an InputError (one line, exit 2) raised
before anything is written.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from jctlab import argtypes as A
from jctlab.errors import InputError
from jctlab.model import write_json_atomic

from . import daemon, kube
from .options import add_planner_arguments, check_method, check_policies, planner_config
from .planner import Planner
from .readers import Where, check_disjoint, parse_time, read_cluster, read_queue, read_running
from .slurm import read_sinfo, read_squeue
from .state import LiveState, Plan


#: the last second a calendar date can show (9999-12-31 23:59:59 UTC); later predictions are printed in seconds
LAST_DATE_S = 253402300799.0


def fmt_time(t: float) -> str:
    """Absolute times: ISO (UTC) on a UNIX clock, plain seconds on a hand-made one or past the calendar's end (a
    prediction from an estimate of years of work)."""
    if 1e9 < t <= LAST_DATE_S:
        return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return f"{t:.0f}"


def render(plan: Plan, state: LiveState) -> str:
    busy = len(state.busy_gpus)
    total = len(state.cluster.gpu_ids)
    lines = [f"{state.cluster.name} at {fmt_time(plan.now)}: {len(state.queued)} queued, {len(state.running)} running, "
             f"{busy}/{total} GPUs busy"]
    gap = ""
    if plan.lower_bound is not None and plan.lower_bound > 0:
        gap = f", bound {plan.lower_bound:.1f} (gap {(plan.objective - plan.lower_bound) / plan.lower_bound:.2%})"
    lines.append(f"plan from {plan.source} ({plan.status}): objective {plan.objective:.1f} s from now{gap}; "
                 f"predicted mean JCT {plan.mean_jct:.0f} s; decided in {plan.latency_s:.2f} s")

    def table(title: str, rows: list[tuple[str, ...]], head: tuple[str, ...]) -> None:
        lines.append("")
        lines.append(title)
        if not rows:
            lines.append("  (none)")
            return
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        for r in (head, *rows):
            lines.append("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())

    if plan.preempt_now:
        table("PREEMPT NOW (stop; queued again with the work they have left)", [(n,) for n in plan.preempt_now],
              ("job",))
    table("START NOW", [(p.job, " ".join(p.gpus), fmt_time(p.end)) for p in plan.start_now],
          ("job", "gpus", "predicted end"))
    table("NEXT (planned)", [(p.job, fmt_time(p.start), " ".join(p.gpus), fmt_time(p.end)) for p in plan.later],
          ("job", "start", "gpus", "predicted end"))
    table("RUNNING (kept on their GPUs)", [(p.job, " ".join(p.gpus), fmt_time(p.end)) for p in plan.running],
          ("job", "gpus", "predicted end"))
    return "\n".join(lines)


def plan_json(plan: Plan, state: LiveState) -> dict[str, Any]:
    return {"format": "jctlab.live-plan/1", "cluster": state.cluster.name, "queued": len(state.queued),
            "running_jobs": len(state.running), **plan.to_dict()}


def read_state(a: argparse.Namespace) -> LiveState:
    """The live state from the files named on the command line (every check before anything is written)."""
    now = None if a.now in (None, "now") else parse_time(a.now, Where("command line"), "--now")
    if a.now == "now":
        now = time.time()
    if a.slurm_nodes or a.slurm_queue:
        if not (a.slurm_nodes and a.slurm_queue) or a.cluster or a.queue or a.running:
            raise InputError("command line", "--slurm-queue", "give --slurm-nodes and --slurm-queue together, "
                             "instead of --cluster/--queue/--running")
        cluster = read_sinfo(a.slurm_nodes)
        queued, running, t = read_squeue(a.slurm_queue, cluster, now)
        check_disjoint(queued, running, a.slurm_queue)
        return LiveState(cluster, t, queued, running)
    if not (a.cluster and a.queue):
        raise InputError("command line", "--cluster", "give --cluster and --queue (or --slurm-nodes and --slurm-queue)")
    cluster = read_cluster(a.cluster)
    queued = read_queue(a.queue, cluster)
    running = read_running(a.running, cluster, now) if a.running else ()
    check_disjoint(queued, running, a.running or a.queue)
    if now is None:
        now = max([q.submit for q in queued] + [r.start for r in running], default=0.0)
        running = tuple(replace(r, estimated_at=now) for r in running)
    return LiveState(cluster, now, queued, running)


def cmd_schedule(a: argparse.Namespace) -> int:
    config = planner_config(a)
    check_method(config.method)
    check_policies(config.fallbacks)
    state = read_state(a)
    with Planner(config) as planner:
        plan = planner.plan(state)
    out = plan_json(plan, state)
    if a.out:
        write_json_atomic(a.out, out)
    if a.bindings:
        write_json_atomic(a.bindings, kube.bindings(plan, state.cluster, a.namespace))
    print(json.dumps(out) if a.json else render(plan, state))
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("schedule", help="decide what to start now on a live cluster (rolling-horizon planner)")
    p.add_argument("--cluster", help="cluster YAML (docs/live.md)")
    p.add_argument("--queue", help="queued jobs CSV")
    p.add_argument("--running", help="running jobs CSV")
    p.add_argument("--slurm-nodes", help="`sinfo --json` output file (instead of --cluster)")
    p.add_argument("--slurm-queue", help="`squeue --json` output file (instead of --queue/--running)")
    p.add_argument("--now", default=None, help="the decision's time: seconds, ISO date, or `now` "
                   "(default: the latest submission/start in the files)")
    add_planner_arguments(p)
    p.add_argument("--out", type=A.out_path, help="write the plan as JSON here")
    p.add_argument("--bindings", type=A.out_path, help="write Kubernetes Binding objects of the jobs to start now here")
    p.add_argument("--namespace", default="default", help="namespace of the pods in --bindings")
    p.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    p.set_defaults(func=cmd_schedule)
    daemon.register(sub)


__all__ = ["register", "render", "plan_json"]

