"""The daemon's durable state: one SQLite file (WAL), one transaction per event.

Tables: ``meta`` (the cluster, the clock, the last plan), ``jobs`` (every job the daemon has seen, with its
status and record), ``events`` (the id of every event processed, and why one was rejected),
``decisions`` (one per event, numbered ``seq``) and ``samples`` (with ``--arrivals``: each job's work as the
arrival model first saw it, :mod:`live.arrivals`; a file made before this table gets it empty). An event's
effects — its row in ``events``, the jobs it and its decision change, the decision, the new plan and the
model's new samples — are written in one transaction, so a process
killed at any instant has either processed an event completely or not at all; an event id already in
``events`` is skipped, so an event sent again after a restart changes nothing. A job is started exactly
when the transaction of the decision that starts it commits.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from jctlab.errors import InputError

from .arrivals import Sample
from .state import ClusterSpec, LiveState, Plan, QueuedJob, RunningJob

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    name TEXT PRIMARY KEY,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'done', 'cancelled')),
    record TEXT NOT NULL,
    seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    time REAL,
    kind TEXT,
    error TEXT);
CREATE TABLE IF NOT EXISTS decisions (seq INTEGER PRIMARY KEY, event TEXT NOT NULL, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS samples (name TEXT PRIMARY KEY, record TEXT NOT NULL, seq INTEGER NOT NULL);
"""
FORMAT = "jctlab.live-state/1"


@dataclass(frozen=True)
class JobChange:
    """A job's new status and record (``record`` is its :class:`QueuedJob`/:class:`RunningJob` dict)."""

    name: str
    status: str
    record: dict[str, Any]


class Store:
    def __init__(self, path: str | Path):
        self.path = str(path)
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)    # as every file jctlab writes
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as e:
            raise InputError(self.path, "", f"not a jctlab state file ({e})") from None
        except OSError as e:
            raise InputError(self.path, "", f"cannot create its folder ({e.strerror})") from None
        fmt = self._meta("format")
        if fmt is None:
            self._set_meta_now("format", FORMAT)
        elif fmt != FORMAT:
            raise InputError(self.path, "format", f"unsupported state format {fmt!r} (this jctlab reads {FORMAT!r})")

    # ------------------------------------------------------------------ reads
    def _meta(self, key: str) -> Any | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def _set_meta_now(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, json.dumps(value)))

    def cluster(self) -> ClusterSpec | None:
        d = self._meta("cluster")
        return None if d is None else ClusterSpec.from_dict(d)

    def init_cluster(self, cluster: ClusterSpec, now: float) -> None:
        """Store the cluster of a new state file (in one transaction with the clock)."""
        with self.transaction():
            self._set_meta_now("cluster", cluster.to_dict())
            self._set_meta_now("now", now)

    def state(self) -> LiveState:
        cluster = self.cluster()
        if cluster is None:
            raise InputError(self.path, "cluster", "a new state file needs --cluster or --slurm-nodes")
        queued, running = [], []
        for status, rec in self.db.execute("SELECT status, record FROM jobs WHERE status IN ('queued', 'running') "
                                           "ORDER BY seq, name"):
            d = json.loads(rec)
            (queued.append(QueuedJob.from_dict(d)) if status == "queued" else running.append(RunningJob.from_dict(d)))
        return LiveState(cluster, float(self._meta("now") or 0.0), tuple(queued), tuple(running))

    def plan(self) -> Plan | None:
        d = self._meta("plan")
        return None if d is None else Plan.from_dict(d)

    def status(self, name: str) -> str | None:
        row = self.db.execute("SELECT status FROM jobs WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def seen(self, event_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM events WHERE id = ?", (event_id,)).fetchone() is not None

    def last_seq(self) -> int:
        return int(self.db.execute("SELECT COALESCE(MAX(seq), 0) FROM events").fetchone()[0])

    def decisions(self, after: int = 0) -> Iterator[tuple[int, dict[str, Any]]]:
        for seq, rec in self.db.execute("SELECT seq, record FROM decisions WHERE seq > ? ORDER BY seq", (after,)):
            yield int(seq), json.loads(rec)

    def records(self) -> list[dict[str, Any]]:
        """The last record of every job the daemon has seen, finished ones included."""
        return [json.loads(rec) for (rec,) in self.db.execute("SELECT record FROM jobs ORDER BY seq, name")]

    def samples(self) -> list[Sample]:
        """The arrival model's samples, in the order they were committed."""
        return [Sample.from_dict(json.loads(rec)) for (rec,) in self.db.execute("SELECT record FROM samples "
                                                                               "ORDER BY seq, name")]

    def jobs(self) -> dict[str, str]:
        """Every job the daemon has seen -> its status."""
        return dict(self.db.execute("SELECT name, status FROM jobs"))

    # ------------------------------------------------------------------ the one write per event
    def transaction(self) -> "_Tx":
        return _Tx(self.db)

    def commit_event(self, event_id: str, time: float | None, kind: str, error: str | None,
                     changes: list[JobChange], decision: dict[str, Any], plan: Plan | None, now: float,
                     samples: Iterable[Sample] = ()) -> int:
        """Record an event, its job changes, its decision, the new plan and the arrival model's new samples
        atomically; its ``seq``."""
        with self.transaction():
            if self.seen(event_id):   # a second writer on the same file got there first
                raise InputError(self.path, "events", f"event {event_id!r} was processed by another process")
            seq = self.last_seq() + 1
            self.db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (event_id, seq, time, kind, error))
            for c in changes:
                self.db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
                                "status = excluded.status, record = excluded.record, seq = excluded.seq",
                                (c.name, c.status, json.dumps(c.record), seq))
            self.db.execute("INSERT INTO decisions VALUES (?, ?, ?)",
                            (seq, event_id, json.dumps({"seq": seq, **decision}, allow_nan=False)))
            for s in samples:      # a job's first sample is kept
                self.db.execute("INSERT OR IGNORE INTO samples VALUES (?, ?, ?)",
                                (s.name, json.dumps(s.to_dict(), allow_nan=False), seq))
            if plan is not None:
                self._set_meta_now("plan", plan.to_dict())
            self._set_meta_now("now", now)
        return seq

    def close(self) -> None:
        self.db.close()


class _Tx:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type, exc, tb) -> None:
        self.db.execute("ROLLBACK" if exc_type else "COMMIT")
