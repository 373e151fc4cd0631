"""The planner's command-line options, shared by ``jctlab schedule`` and ``jctlab schedule-daemon``."""

from __future__ import annotations

import argparse

from jctlab import argtypes as A
from jctlab import registry
from jctlab.errors import InputError
from jctlab.limits import Range
from jctlab.model import OBJECTIVES

from .planner import PlannerConfig


def add_planner_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=A.TIME_LIMIT, default=10.0, help="seconds from the event to the decision (default 10)")
    p.add_argument("--method", default="cpsat",
                   help="oracle method (cpsat, milp, auto...; `none`: the heuristics alone)")
    p.add_argument("--objective", default="mean_jct", choices=OBJECTIVES)
    p.add_argument("--threads", type=A.THREADS, default=1)
    p.add_argument("--seed", type=A.SEED, default=0)
    p.add_argument("--fallbacks", default="srtf+packed-sticky,fifo+packed-sticky",
                   help="online policies whose plans compete (comma list of `jctlab simulate` names; '' for none)")
    p.add_argument("--max-oracle-jobs", type=A.integer(1, 10_000), default=16,
                   help="queued jobs the oracle sees (the head of the best heuristic plan)")
    p.add_argument("--solve-when-full", action="store_true",
                   help="solve even when no queued job fits the free GPUs (the decision is then empty anyway)")
    p.add_argument("--max-evaluations", type=A.integer(0, 10**9), default=None,
                   help="stop the local search after N plan evaluations (with a time limit that does not bind, "
                        "the decisions are then the same whatever the machine's load)")
    p.add_argument("--preemption", action="store_true",
                   help="allow stopping (and later resuming, or moving) running jobs whose work is known; "
                        "without it a running job never moves")
    p.add_argument("--arrivals", action="store_true",
                   help="predict arrivals from the jobs seen so far and hold a long job back when the short jobs "
                        "likely to arrive during its run gain more than it loses (mean JCT; docs/live.md)")
    p.add_argument("--preempt-gain", type=A.number(Range(0, 1)), default=0.01,
                   help="with --preemption: each stop must lower the plan's objective by this share (default 0.01)")


def planner_config(a: argparse.Namespace) -> PlannerConfig:
    fallbacks = tuple(s.strip() for s in a.fallbacks.split(",") if s.strip())
    return PlannerConfig(time_limit=a.time_limit, method=a.method, threads=a.threads, seed=a.seed,
                         objective=a.objective, fallbacks=fallbacks, max_oracle_jobs=a.max_oracle_jobs,
                         solve_when_full=a.solve_when_full, preemption=a.preemption, preempt_gain=a.preempt_gain,
                         max_evaluations=a.max_evaluations, arrivals=a.arrivals)


def check_method(method: str) -> None:
    """The oracle method must be one that ``oracle.methods.solve`` knows (or ``none``)."""
    if method == "none":
        return
    if method not in registry.names("jctlab.methods"):
        raise InputError("command line", "--method", f"unknown method {method!r} "
                         f"(known: none, {', '.join(registry.names('jctlab.methods'))})")


def check_policies(names: tuple[str, ...]) -> None:
    for n in names:
        if registry.policy_factory(n) is None:
            raise InputError("command line", "--fallbacks", f"unknown policy {n!r}")
