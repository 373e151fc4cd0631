"""A SQLite cache of oracle results (stdlib ``sqlite3``, WAL mode).

* Where: a path given by the caller; ``True`` or ``"default"`` means ``$JCTLAB_CACHE`` if set, else
  ``~/.cache/jctlab/oracle.sqlite``; ``None``/``False`` turns caching off.
* Key: SHA-256 of the canonical JSON of the instance, the method, its parameters (time limit,
  threads, seed, options), the hint schedule (if any) and a cache format version.
* Safety: every write is one ``BEGIN IMMEDIATE`` transaction (concurrent writers serialise on
  SQLite's lock, with a busy timeout; a killed process leaves either the whole row or nothing);
  readers never block writers (WAL).
* Trust nothing: a stored entry is used only if it parses and, when it has a schedule, that schedule
  replays valid with the stored objective and bound. A corrupted entry is deleted and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable

from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

CACHE_VERSION = 1
TIMEOUT_S = 60.0


def default_path() -> Path:
    env = os.environ.get("JCTLAB_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "jctlab" / "oracle.sqlite"


def resolve(cache: Any) -> Path | None:
    """The cache file that ``cache`` designates (None: no caching)."""
    if cache is None or cache is False:
        return None
    if cache is True or cache == "default":
        return default_path()
    return Path(cache).expanduser()


def cache_key(inst: Instance, method: str, params: dict[str, Any], hint: Schedule | None = None) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "instance": inst.to_dict(), "method": method, "params": params,
                       "hint": None if hint is None else hint.to_dict()}, sort_keys=True, default=str,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), timeout=TIMEOUT_S, isolation_level=None)
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # switching to WAL / creating the table can meet a lock that busy_timeout does not wait on
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, method TEXT, instance TEXT, "
                        "created REAL, payload TEXT NOT NULL)")
            return con
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e) or time.monotonic() > deadline:
                con.close()
                raise
            time.sleep(0.02)


def to_payload(r: Result) -> str:
    return json.dumps({
        "schedule": None if r.schedule is None else r.schedule.to_dict(),
        "objective": r.objective, "lower_bound": r.lower_bound, "status": r.status, "runtime_s": r.runtime_s,
        "solver": r.solver, "version": r.version, "params": dict(r.params),
    }, default=str, allow_nan=False)


def from_payload(inst: Instance, text: str) -> Result | None:
    """The stored Result, or None when the entry is corrupted or does not replay as claimed."""
    try:
        d = json.loads(text)
        sched = None if d["schedule"] is None else Schedule.from_dict(d["schedule"], "<cache>")
        r = Result(sched, d["objective"], d["lower_bound"], str(d["status"]), float(d["runtime_s"]), str(d["solver"]),
                   str(d.get("version", "")), dict(d.get("params") or {}))
        if sched is not None:
            rep = replay(inst, r.claimed_schedule())  # type: ignore[arg-type]
            if not rep.valid:
                return None
        elif r.objective is not None:
            return None
        return r
    except Exception:
        return None


class Cache:
    """A cache file; ``get``/``put``/``delete`` are each one transaction."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)

    def get(self, inst: Instance, key: str) -> Result | None:
        con = _connect(self.path)
        try:
            row = con.execute("SELECT payload FROM results WHERE key = ?", (key,)).fetchone()
        finally:
            con.close()
        if row is None:
            return None
        r = from_payload(inst, row[0])
        if r is None:
            self.delete(key)
        return r

    def put(self, inst: Instance, key: str, method: str, r: Result) -> None:
        payload = to_payload(r)
        con = _connect(self.path)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT OR REPLACE INTO results (key, method, instance, created, payload) VALUES (?,?,?,?,?)",
                        (key, method, inst.name, time.time(), payload))
            con.execute("COMMIT")
        except BaseException:
            try:
                con.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            raise
        finally:
            con.close()

    def delete(self, key: str) -> None:
        con = _connect(self.path)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("DELETE FROM results WHERE key = ?", (key,))
            con.execute("COMMIT")
        finally:
            con.close()

    def __len__(self) -> int:
        con = _connect(self.path)
        try:
            return int(con.execute("SELECT COUNT(*) FROM results").fetchone()[0])
        finally:
            con.close()


def cached_call(cache: Any, inst: Instance, method: str, params: dict[str, Any], hint: Schedule | None,
                compute: Callable[[], Result]) -> Result:
    """``compute()`` through the cache: a valid stored result is returned (params gain
    ``"cache": "hit"``); otherwise the computed one is stored (unless its status is ``error``)."""
    path = resolve(cache)
    if path is None:
        return compute()
    c = Cache(path)
    key = cache_key(inst, method, params, hint)
    hit = c.get(inst, key)
    if hit is not None:
        return hit.with_(params={**hit.params, "cache": "hit"})
    r = compute()
    if r.status != SolveStatus.ERROR:
        c.put(inst, key, method, r)
    return r
