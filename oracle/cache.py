"""A SQLite cache of oracle results (stdlib ``sqlite3``, WAL mode).

* Where: a path given by the caller; ``True`` or ``"default"`` means ``$JCTLAB_CACHE`` if set, else
  ``~/.cache/jctlab/oracle.sqlite``; ``None``/``False`` turns caching off.
* Key: SHA-256 of the canonical JSON of the instance, the method, its parameters (time limit,
  threads, seed, options), the hint schedule (if any), a cache format version and :func:`code_hash`: the
  source of every package that can shape a result and the solver libraries' versions, so that an entry
  made by other code is never returned.
* Safety: every write is one ``BEGIN IMMEDIATE`` transaction (concurrent writers serialise on
  SQLite's lock, with a busy timeout; a killed process leaves either the whole row or nothing);
  readers never block writers (WAL).
* Trust nothing (:func:`unverified`): only results with a schedule (``optimal``, ``feasible``) are stored;
  an entry is returned only if its digest matches, it parses, its schedule replays valid to the stored
  objective, its bound is at most that objective, and an ``optimal`` claim is backed by a bound that
  meets it. Anything else is deleted and recomputed. Results without a schedule (``infeasible``,
  ``bound_only``, ``timeout_no_solution``) cannot be checked by replay: they are recomputed every time.
* A file that is not a jctlab cache (random bytes, another schema, an older format) is moved aside to
  ``<file>.unusable-<time>`` with a warning (logger ``jctlab.cache``) and a new cache is built; a
  directory or a path that cannot be created is bad input (InputError).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sqlite3
import time
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any, Callable

from jctlab.errors import InputError
from jctlab.limits import json_safe
from jctlab.model import Instance, Schedule
from jctlab.replay import replay
from jctlab.result import Result, SolveStatus

CACHE_VERSION = 2
TIMEOUT_S = 60.0
COLUMNS = ("key", "method", "instance", "created", "payload", "digest")
#: the packages whose code can shape an oracle result (``auto`` runs baselines and matching for hints)
CODE_PACKAGES = ("jctlab", "formulations", "oracle", "matching", "samplers", "baselines")
LIBRARIES = ("ortools", "highspy", "pulp", "numpy", "scipy", "numba")
#: the tolerance of an ``optimal`` status (formulations.results.GAP_TOL), plus JSON round-off
OPTIMAL_RTOL = 1e-6

log = logging.getLogger("jctlab.cache")


@lru_cache(maxsize=1)
def code_hash() -> str:
    """SHA-256 of the source files of :data:`CODE_PACKAGES` and of the versions of :data:`LIBRARIES`
    (computed once per process, a few milliseconds)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for pkg in CODE_PACKAGES:
        base = root / pkg
        for f in sorted(base.rglob("*.py")):
            h.update(str(f.relative_to(root)).encode())
            h.update(f.read_bytes())
    for lib in LIBRARIES:
        try:
            h.update(f"{lib}=={metadata.version(lib)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{lib} absent".encode())
    return h.hexdigest()


def default_path() -> Path:
    env = os.environ.get("JCTLAB_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "jctlab" / "oracle.sqlite"


def resolve(cache: Any) -> Path | None:
    """The cache file that ``cache`` designates (None: no caching). InputError for a value that is not a
    path, a directory, or a path under a file."""
    if cache is None or cache is False:
        return None
    if cache is True or cache == "default":
        p = default_path()
    elif isinstance(cache, (str, os.PathLike)) and str(cache).strip():
        p = Path(cache).expanduser()
    else:
        raise InputError("cache", "", f"expected a file path, 'default', true or false, got {cache!r}")
    if p.is_dir():
        raise InputError(str(p), "", "is a directory, not a cache file")
    a = p.parent
    while not a.exists() and a != a.parent:
        a = a.parent
    if not a.is_dir():
        raise InputError(str(p), "", f"cannot create the cache: {a} is a file")
    if not os.access(a, os.W_OK | os.X_OK):
        raise InputError(str(p), "", f"cannot create the cache: no write permission in {a}")
    return p


def cache_key(inst: Instance, method: str, params: dict[str, Any], hint: Schedule | None = None) -> str:
    blob = json.dumps({"v": CACHE_VERSION, "code": code_hash(), "instance": inst.to_dict(), "method": method,
                       "params": params, "hint": None if hint is None else hint.to_dict()}, sort_keys=True,
                      default=str, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _digest(key: str, payload: str) -> str:
    return hashlib.sha256(f"{key}\n{payload}".encode()).hexdigest()


class _Unusable(Exception):
    """The file is not a cache of this format."""


def _open(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(str(path), timeout=TIMEOUT_S, isolation_level=None)
    deadline = time.monotonic() + TIMEOUT_S
    while True:  # switching to WAL / creating the table can meet a lock that busy_timeout does not wait on
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=NORMAL")
            con.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, method TEXT, instance TEXT, "
                        "created REAL, payload TEXT NOT NULL, digest TEXT NOT NULL)")
            cols = tuple(r[1] for r in con.execute("PRAGMA table_info(results)"))
            if cols != COLUMNS:
                raise _Unusable(f"its results table has columns {', '.join(cols)}")
            return con
        except sqlite3.OperationalError as e:
            if ("locked" in str(e) or "busy" in str(e)) and time.monotonic() <= deadline:
                time.sleep(0.02)
                continue
            con.close()
            raise
        except BaseException:
            con.close()
            raise


def _corrupt(e: BaseException) -> bool:
    """Whether ``e`` says the file is not a (sound) cache, rather than that it cannot be opened or is busy."""
    return isinstance(e, _Unusable) or (isinstance(e, sqlite3.DatabaseError)
                                        and not isinstance(e, sqlite3.OperationalError))


def _connect(path: Path) -> sqlite3.Connection:
    """A connection to the cache at ``path``; a file there that is not a cache of this format is moved aside
    (with a warning) and a new one is made; one that cannot be opened is bad input."""
    if path.is_dir():
        raise InputError(str(path), "", "is a directory, not a cache file")
    try:
        return _open(path)
    except (_Unusable, sqlite3.DatabaseError) as e:
        if not _corrupt(e):
            raise InputError(str(path), "", f"cannot open the cache: {e}") from None
        _move_aside(path, str(e) if isinstance(e, _Unusable) else f"{e.__class__.__name__}: {e}")
    return _open(path)


def _move_aside(path: Path, why: str) -> None:
    aside = path.with_name(f"{path.name}.unusable-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    try:
        os.replace(path, aside)
    except FileNotFoundError:      # another process moved it first
        pass
    except OSError as e:
        raise InputError(str(path), "", f"not a usable cache ({why}) and cannot be moved aside: {e.strerror}") from None
    for suffix in ("-wal", "-shm"):
        try:
            os.replace(f"{path}{suffix}", f"{aside}{suffix}")
        except OSError:
            pass
    log.warning("%s is not a usable jctlab cache (%s): moved aside to %s, starting a new one", path, why, aside.name)


def to_payload(r: Result) -> str:
    return json.dumps({
        "schedule": None if r.schedule is None else r.schedule.to_dict(),
        "objective": r.objective, "lower_bound": r.lower_bound, "status": r.status, "runtime_s": r.runtime_s,
        "solver": r.solver, "version": r.version, "params": json_safe(dict(r.params)),
    }, default=str, allow_nan=False)


def unverified(inst: Instance, r: Result) -> str | None:
    """Why the cache may not return ``r`` for ``inst`` (None: every claim checked). Only a schedule can be
    checked: it must replay valid to the stored objective (and the bound not exceed it, :func:`replay`),
    and an ``optimal`` status needs a bound within the optimality tolerance of that objective."""
    if r.status not in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE):
        return f"status {r.status} cannot be checked by replay"
    if r.schedule is None or r.objective is None:
        return f"status {r.status} without a schedule"
    if not math.isfinite(r.objective) or (r.lower_bound is not None and not math.isfinite(r.lower_bound)):
        return "non-finite objective or bound"
    rep = replay(inst, r.claimed_schedule(), with_metrics=False)  # type: ignore[arg-type]
    if not rep.valid:
        return f"does not replay: {rep.error}"
    if r.status == SolveStatus.OPTIMAL and (r.lower_bound is None
                                                  or r.objective - r.lower_bound > OPTIMAL_RTOL * abs(r.objective) + 1e-9):
        return "optimal without a bound that meets its objective"
    return None


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
        """The stored result under ``key`` if every claim of it checks out (:func:`unverified`); else None,
        and the entry is deleted."""
        con = _connect(self.path)
        try:
            row = con.execute("SELECT payload, digest FROM results WHERE key = ?", (key,)).fetchone()
        except sqlite3.DatabaseError as e:
            if not _corrupt(e):
                raise
            con.close()
            _move_aside(self.path, f"{e.__class__.__name__}: {e}")
            return None
        finally:
            con.close()
        if row is None:
            return None
        r = None
        if isinstance(row[0], str) and isinstance(row[1], str) and row[1] == _digest(key, row[0]):
            r = from_payload(inst, row[0])
            if r is not None and unverified(inst, r) is not None:
                r = None
        if r is None:
            self.delete(key)
        return r

    def put(self, inst: Instance, key: str, method: str, r: Result) -> None:
        payload = to_payload(r)
        con = _connect(self.path)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("INSERT OR REPLACE INTO results (key, method, instance, created, payload, digest) "
                        "VALUES (?,?,?,?,?,?)", (key, method, inst.name, time.time(), payload, _digest(key, payload)))
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
    """``compute()`` through the cache: a stored result whose claims all check out is returned (params gain
    ``"cache": "hit"``); otherwise the computed one is stored when it has a schedule (``optimal``,
    ``feasible``: the only claims a later read can check)."""
    path = resolve(cache)
    if path is None:
        return compute()
    c = Cache(path)
    key = cache_key(inst, method, params, hint)
    hit = c.get(inst, key)
    if hit is not None:
        return hit.with_(params={**hit.params, "cache": "hit"})
    r = compute()
    if r.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) and r.schedule is not None:
        try:
            c.put(inst, key, method, r)
        except (sqlite3.Error, OSError, InputError) as e:   # the result stands; only its copy is lost
            log.warning("could not store the result in %s (%s)", path, e)
    return r
