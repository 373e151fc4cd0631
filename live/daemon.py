"""``jctlab schedule-daemon``: read events, re-plan at each one, write each decision to a log.

Events (:mod:`live.events`) come as JSON lines on standard input, or as files in a spool directory
(``--spool DIR``: ``*.json`` files, each one event or JSON lines, processed in name order and deleted
once committed; a file that cannot be read moves to ``DIR/rejected/``). For each event the daemon applies
it to the state, plans (:class:`live.planner.Planner`, the previous plan as warm start), starts the jobs
the plan starts now, and commits all of it in one SQLite transaction (:mod:`live.store`).

Outputs are derived from the committed decisions, in ``seq`` order: the decision log (JSON lines) and,
with ``--bindings-dir``, one Kubernetes ``List`` of Bindings per decision that starts jobs
(``<seq>.json``, :mod:`live.kube`). On start-up and after every commit the daemon appends to them every
decision the log does not have yet (a half-written last line, from a kill mid-write, is cut first), so
each decision is in the log exactly once, whatever instant the process was killed at. Input on standard
input is not durable until committed: after a restart the producer sends again what it is not sure of
(ids make that harmless); a spool file is deleted only after its events are committed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Iterable, TextIO

from jctlab import argtypes as A
from jctlab import jsonl
from jctlab import limits as L
from jctlab.errors import InputError
from jctlab.model import write_json_atomic

from . import events, kube
from .instance import LiveInstance
from .options import add_planner_arguments, check_method, check_policies, planner_config
from .planner import Planner, PlannerConfig
from .readers import read_cluster
from .slurm import read_sinfo
from .store import JobChange, Store


class Daemon:
    def __init__(self, store: Store, planner: Planner, log: str | Path, bindings_dir: str | Path | None = None,
                 namespace: str = "default", echo: TextIO | None = None):
        self.store = store
        self.planner = planner
        self.log = Path(log)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.bindings_dir = None if bindings_dir is None else Path(bindings_dir)
        self.namespace = namespace
        self.echo = echo
        self.state = store.state()
        self.plan = store.plan()
        self.sync_outputs()

    # ------------------------------------------------------------------ outputs (derived, exactly once)
    def _logged_seq(self) -> int:
        """The last seq in the log, after cutting a half-written last line."""
        rec = jsonl.last(self.log, repair=True)
        return int(rec["seq"]) if rec else 0

    def sync_outputs(self) -> None:
        last = self._logged_seq()
        with jsonl.Writer(self.log) as f:
            for seq, rec in self.store.decisions(after=last):
                if self.bindings_dir is not None and rec.get("start"):
                    write_json_atomic(self.bindings_dir / f"{seq:08d}.json", rec["bindings"])
                line = json.dumps({k: v for k, v in rec.items() if k != "bindings"}, allow_nan=False)
                f.write_json(line)
                if self.echo is not None:
                    print(line, file=self.echo, flush=True)

    # ------------------------------------------------------------------ one event
    def handle(self, obj: Any, source: str) -> bool:
        """Process one decoded event; False when it was skipped (already processed)."""
        ev = events.parse_event(obj, source)
        if self.store.seen(ev.id):
            return False
        t0 = time.perf_counter()
        try:
            state, changes = events.apply(self.state, ev)
        except InputError as e:   # contradicts the state: recorded as rejected, nothing changes
            self.store.commit_event(ev.id, ev.time, ev.kind, str(e), [],
                                    {"event": ev.id, "kind": ev.kind, "time": ev.time, "start": [], "error": str(e)},
                                    None, self.state.now)
            self.sync_outputs()
            return True
        plan = self.planner.plan(state, self.plan)
        stopped: list[JobChange] = []
        if plan.preempt_now:   # only with --preemption: queued again with the work they have left
            c = self.planner.config
            state, stopped = events.preempt(state, plan.preempt_now, LiveInstance(state, c.objective, c.floor_s))
        state, started = events.start(state, plan.start_now)
        decision = {"event": ev.id, "kind": ev.kind, "time": ev.time,
                    "start": [{"job": p.job, "gpus": list(p.gpus), "end": p.end} for p in plan.start_now],
                    "preempt": list(plan.preempt_now),
                    "error": None, "latency_s": time.perf_counter() - t0, "plan": plan.to_dict()}
        if plan.start_now:
            decision["bindings"] = kube.bindings(plan, state.cluster, self.namespace)
        samples = self.planner.model.take_fresh() if self.planner.model is not None else []
        self.store.commit_event(ev.id, ev.time, ev.kind, None, changes + stopped + started, decision, plan,
                                 state.now, samples)
        self.state, self.plan = state, plan
        self.sync_outputs()
        return True

    def handle_line(self, line: str, source: str) -> None:
        line = line.strip()
        if not line:
            return
        self.handle(L.loads(line, source), source)     # malformed, too deep, 5,000-digit numbers: InputError

    # ------------------------------------------------------------------ inputs
    def run_stream(self, stream: Iterable[str], name: str = "stdin") -> None:
        """JSON lines; a line that is not a valid event is reported on standard error and skipped."""
        for k, line in enumerate(stream, 1):
            try:
                self.handle_line(line, f"{name} line {k}")
            except InputError as e:
                print(f"jctlab: rejected: {e}", file=sys.stderr, flush=True)

    def run_spool(self, spool: str | Path, poll_s: float = 0.5, once: bool = False) -> None:
        spool = Path(spool)
        rejected = spool / "rejected"
        while True:
            files = sorted(p for p in spool.glob("*.json") if p.is_file())
            for p in files:
                try:
                    for k, line in enumerate(p.read_text().splitlines(), 1):
                        self.handle_line(line, f"{p} line {k}")
                except (InputError, OSError, UnicodeDecodeError) as e:
                    rejected.mkdir(exist_ok=True)
                    print(f"jctlab: rejected: {e}; moved to {rejected}", file=sys.stderr, flush=True)
                    os.replace(p, rejected / p.name)
                    continue
                p.unlink()   # only now: every event of the file is committed (or was already)
            if once:
                return
            time.sleep(poll_s)


def open_daemon(a: argparse.Namespace, config: PlannerConfig) -> Daemon:
    # the cluster file is read before the state file is opened: a bad one must not leave a new state behind
    given = read_cluster(a.cluster) if a.cluster else read_sinfo(a.slurm_nodes) if a.slurm_nodes else None
    if given is None and not Path(a.state).exists():
        raise InputError("command line", "--cluster", f"{a.state} is a new state file: give --cluster or --slurm-nodes")
    store = Store(a.state)
    try:
        kept = store.cluster()
        if kept is None:
            if given is None:
                raise InputError("command line", "--cluster", f"{a.state} holds no cluster: give --cluster or "
                                 "--slurm-nodes")
            store.init_cluster(given, 0.0)
        elif given is not None and given.to_dict() != kept.to_dict():
            raise InputError(a.cluster or a.slurm_nodes, "", f"differs from the cluster of {a.state} "
                             "(a state file keeps the cluster it was made with)")
    except BaseException:
        store.close()
        raise
    log = a.log or f"{a.state}.decisions.jsonl"
    planner = Planner(config)
    if planner.model is not None:   # a restarted daemon predicts from every job it had seen, as it had seen it
        planner.model.observe_records(store.records(), store.samples())
    return Daemon(store, planner, log, a.bindings_dir, a.namespace, sys.stdout if a.echo else None)


def serve(args: list[str], conn: Any) -> None:
    """``jctlab schedule-daemon ARGS`` embedded in another program: event lines arrive on ``conn`` (a
    ``multiprocessing`` connection; None ends the stream) instead of standard input."""
    p = argparse.ArgumentParser(prog="schedule-daemon")
    sub = p.add_subparsers(dest="verb", required=True)
    register(sub)
    a = p.parse_args(["schedule-daemon", *args])
    d = open_daemon(a, planner_config(a))
    try:
        d.run_stream(iter(conn.recv, None), "connection")
    finally:
        d.planner.close()
        d.store.close()


def cmd_daemon(a: argparse.Namespace) -> int:
    config = planner_config(a)
    check_method(config.method)
    check_policies(config.fallbacks)
    if a.spool and not Path(a.spool).is_dir():
        raise InputError("command line", "--spool", f"{a.spool} is not a directory")
    d = open_daemon(a, config)
    try:
        if a.spool:
            d.run_spool(a.spool, a.poll, a.once)
        else:
            d.run_stream(sys.stdin)
    finally:
        d.planner.close()
        d.store.close()
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser("schedule-daemon", help="re-plan at every event (stdin JSON lines or a spool directory); "
                       "state in SQLite, decisions in a log")
    # the files it writes are checked before the state file is opened: a bad one leaves nothing behind
    p.add_argument("--state", required=True, type=A.out_path, help="SQLite state file (created on first use)")
    p.add_argument("--cluster", help="cluster YAML (needed when the state file is new)")
    p.add_argument("--slurm-nodes", help="`sinfo --json` output (instead of --cluster)")
    p.add_argument("--spool", help="read events from *.json files in this directory instead of standard input")
    p.add_argument("--poll", type=A.number(L.Range(0, 3600, lo_open=True, unit="s")), default=0.5,
                   help="seconds between spool scans")
    p.add_argument("--once", action="store_true", help="with --spool: process the files there, then exit")
    p.add_argument("--log", type=A.out_path, help="decision log, JSON lines (default: STATE.decisions.jsonl)")
    p.add_argument("--bindings-dir", type=A.out_dir,
                   help="write each decision's Kubernetes Bindings here as <seq>.json")
    p.add_argument("--namespace", default="default")
    p.add_argument("--echo", action="store_true", help="also print each decision on standard output")
    add_planner_arguments(p)
    p.set_defaults(func=cmd_daemon)


__all__ = ["Daemon", "register", "serve"]
