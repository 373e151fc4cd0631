"""One cell of an evaluation: (instance, method, seed) -> a replayed result row.

:func:`run_cell` is what every executor runs, in whichever process: it loads the instance (cached per
process by content hash), runs the solver or the policy, replays the schedule with the core's
:func:`jctlab.replay.replay` and returns a :class:`CellOutcome` of plain data (the row and the schedule
as JSON values), so that the driver alone writes files. It never raises for a method's failure: an
exception, an invalid schedule or a policy error becomes a row with status ``error`` and the reason, and a
method still running after the cell's ``timeout_s`` (``--cell-timeout``) a row with status ``timeout``.

A policy's decision latency is measured around ``policy.decide`` by :class:`TimedPolicy`, which wraps
the policy (the simulator is not touched): per decision, ``time.perf_counter_ns`` before and after the
call, with a lazily produced action list materialised inside the measurement.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

import numpy as np

from jctlab import __version__
from jctlab.errors import InputError
from jctlab.model import Instance, Schedule, load_instance
from jctlab.replay import Replay, replay
from jctlab.simulate import simulate
from jctlab.watchdog import raise_after

from .methods import SOLVER, MethodSpec
from .suites import canonical_hash, finite

#: metric columns of every row (SPEC §6 metrics of the replay; missing ones are None)
METRICS = ("mean_jct", "weighted_jct", "p50_jct", "p95_jct", "p99_jct", "max_jct", "makespan", "utilization",
           "mean_queueing_delay", "preemptions", "jain_slowdown", "mean_slowdown", "ftf_rho_max", "ftf_rho_mean")
#: columns that measure time on the machine that ran the cell: they differ between runs and executors
TIMING = ("runtime_s", "cell_s", "latency_p50_ms", "latency_p99_ms", "latency_max_ms", "latency_mean_ms")


@dataclass(frozen=True)
class InstanceSource:
    """Where a worker gets the instance: a JSON file, or the instance's dict (Ray: from the object
    store, so that remote machines need no suite files)."""

    sha256: str
    path: str | None = None


@dataclass(frozen=True)
class CellTask:
    """Plain data for a worker: everything a cell needs, and its content-hash key."""

    key: str
    instance_name: str
    source: InstanceSource
    method: MethodSpec
    seed: int
    time_limit: float | None
    threads: int
    sys_path: tuple[str, ...] = ()
    timeout_s: float | None = None


@dataclass(frozen=True)
class CellOutcome:
    row: dict[str, Any]
    schedule: dict[str, Any] | None = field(default=None, repr=False)


def cell_key(instance_sha: str, method: MethodSpec, seed: int, time_limit: float | None, threads: int,
             timeout_s: float | None = None) -> str:
    """Content hash of a cell: instance content, method and options, seed, the jctlab version, for
    solvers the time limit and threads (a policy's result depends on neither), and the cell timeout when
    there is one (a cell cut by a shorter timeout runs again under a longer one)."""
    d: dict[str, Any] = {"instance": instance_sha, "method": method.key(), "seed": seed, "version": __version__}
    if method.kind == SOLVER:
        d.update(time_limit=time_limit, threads=threads)
    if timeout_s is not None:
        d["timeout_s"] = timeout_s
    return canonical_hash(d)[:24]


class CellTimeout(BaseException):
    """Raised in a cell's thread when its ``timeout_s`` passes. A BaseException, so that a method's own
    ``except Exception`` cannot swallow it."""


class TimedPolicy:
    """A policy wrapper recording the wall time of each ``decide`` call (ns); everything else (``round_s``,
    names...) is the wrapped policy's."""

    def __init__(self, policy: Any):
        self._policy = policy
        self.latencies_ns: list[int] = []

    def decide(self, sim: Any) -> Iterable[Any]:
        t = time.perf_counter_ns()
        actions = self._policy.decide(sim)
        if actions is not None and not isinstance(actions, (list, tuple)):
            actions = list(actions)          # a generator's work is part of the decision
        self.latencies_ns.append(time.perf_counter_ns() - t)
        return actions

    def __getattr__(self, name: str) -> Any:
        return getattr(self._policy, name)


def latency_summary(latencies_ns: list[int]) -> dict[str, float | None]:
    if not latencies_ns:
        return {"latency_p50_ms": None, "latency_p99_ms": None, "latency_max_ms": None, "latency_mean_ms": None}
    a = np.asarray(latencies_ns, dtype=float) / 1e6
    return {"latency_p50_ms": float(np.percentile(a, 50)), "latency_p99_ms": float(np.percentile(a, 99)),
            "latency_max_ms": float(a.max()), "latency_mean_ms": float(a.mean())}


@lru_cache(maxsize=8)
def _instance_from_file(path: str, sha256: str) -> Instance:
    return load_instance(path)


def _instance(task: CellTask, inst: Instance | dict | None) -> Instance:
    if isinstance(inst, Instance):
        return inst
    if isinstance(inst, dict):
        return _instance_from_dict(task.source.sha256, inst)
    if task.source.path is None:
        raise InputError(task.instance_name, "", "no instance file or data given to the worker")
    return _instance_from_file(task.source.path, task.source.sha256)


_DICT_CACHE: dict[str, Instance] = {}


def _instance_from_dict(sha: str, d: dict) -> Instance:
    if sha not in _DICT_CACHE:
        if len(_DICT_CACHE) >= 8:
            _DICT_CACHE.pop(next(iter(_DICT_CACHE)))
        _DICT_CACHE[sha] = Instance.from_dict(d, "<suite instance>")
    return _DICT_CACHE[sha]


def _base_row(task: CellTask) -> dict[str, Any]:
    return {"key": task.key, "instance": task.instance_name, "instance_sha256": task.source.sha256,
            "method": task.method.label, "kind": task.method.kind, "source": task.method.source, "seed": task.seed,
            "time_limit_s": task.time_limit if task.method.kind == SOLVER else None,
            "threads": task.threads if task.method.kind == SOLVER else 1, "jctlab_version": __version__,
            "status": "error", "valid": False, "objective": None, "lower_bound": None, "bound_class": None,
            "runtime_s": None, "decisions": None, **latency_summary([]), **{m: None for m in METRICS},
            "jcts": None, "error": None}


def _fill_replay(row: dict[str, Any], inst: Instance, rep: Replay) -> None:
    row["valid"] = bool(rep.valid)
    if not rep.valid:
        row["status"] = "error"
        row["error"] = f"invalid schedule: {rep.error}"
        return
    row["objective"] = finite(rep.objective)
    for m in METRICS:
        v = rep.metrics.get(m)
        row[m] = finite(v) if isinstance(v, float) else v
    row["jcts"] = [float(rep.completion[j.name]) - j.arrival for j in inst.jobs]


def _run_solver(task: CellTask, inst: Instance, fn: Any, row: dict[str, Any]) -> Schedule | None:
    t = time.perf_counter()
    res = fn(inst, time_limit=task.time_limit, threads=task.threads, seed=task.seed, hint=None,
             **dict(task.method.options))
    row["runtime_s"] = time.perf_counter() - t
    row["status"] = str(res.status)
    row["lower_bound"] = finite(res.lower_bound)
    if res.lower_bound is not None:
        row["bound_class"] = str(res.params.get("bound_class", inst.problem))
    if res.status == "error" and res.params.get("error"):
        row["error"] = str(res.params["error"])
    sched = res.claimed_schedule()
    row["valid"] = None      # no schedule: nothing to replay (a bound, an error, a timeout)
    if sched is None:
        return None
    rep = replay(inst, sched)
    _fill_replay(row, inst, rep)
    if rep.valid and res.objective is not None and abs(rep.objective - res.objective) > 1e-6 * abs(rep.objective):
        row["status"], row["valid"] = "error", False
        row["error"] = f"claimed objective {res.objective!r} differs from the replayed {rep.objective!r}"
    return sched


def _run_policy(task: CellTask, inst: Instance, factory: Any, row: dict[str, Any]) -> Schedule:
    t = time.perf_counter()
    policy = TimedPolicy(factory(inst, seed=task.seed, **dict(task.method.options)))
    sched, rep = simulate(inst, policy, round_s=None, method=task.method.label)
    row["runtime_s"] = time.perf_counter() - t
    row["status"] = "feasible"
    row["decisions"] = len(policy.latencies_ns)
    row.update(latency_summary(policy.latencies_ns))
    _fill_replay(row, inst, rep)
    return sched


def run_cell(task: CellTask, inst: Instance | dict | None = None) -> CellOutcome:
    """Run one cell; a method's failure is a row with status ``error``, never an exception."""
    t0 = time.perf_counter()
    for p in task.sys_path:          # a user's module:factory, importable where the driver found it
        if p not in sys.path:
            sys.path.append(p)
    row = _base_row(task)
    sched = None
    try:
        instance = _instance(task, inst)
        fn = task.method.load()
        with raise_after(task.timeout_s, CellTimeout):
            if task.method.kind == SOLVER:
                sched = _run_solver(task, instance, fn, row)
            else:
                sched = _run_policy(task, instance, fn, row)
    except CellTimeout:
        sched = None
        row.update(status="timeout", valid=False, objective=None, error=f"no result within the cell timeout of "
                   f"{task.timeout_s:g} s (--cell-timeout)")
    except InputError as e:
        # a method refusing the instance's class (field "problem") does not apply: n/a, not a failure
        row["status"] = "n/a" if e.field == "problem" else "error"
        row["valid"] = None if e.field == "problem" else False
        row["error"] = str(e)[:500]
    except Exception as e:  # noqa: BLE001 - a method's failure is a result of the cell, not of the run
        row["status"], row["valid"] = "error", False
        row["error"] = f"{type(e).__name__}: {e}".splitlines()[0][:500]
        if os.environ.get("JCTLAB_EVAL_TRACEBACK"):
            traceback.print_exc()
    row["cell_s"] = time.perf_counter() - t0
    return CellOutcome(row, None if sched is None else sched.to_dict())
