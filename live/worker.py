"""The oracle in a child process that is killed at the deadline.

``oracle.methods.solve`` keeps its time limit closely but not exactly (model building, phases, the final
replay); a live decision must not wait for it. :class:`OracleRunner` sends the instance to a persistent
worker process and waits until the deadline; if no answer has come by then, it kills the worker (the next
request starts a fresh one) and the planner keeps its heuristic plan. The worker is forked from a fork
server that has imported the solvers once, so a restart costs a fork, not the imports (POSIX; elsewhere
it is spawned). ``isolate=False`` calls the oracle in this process instead (no guarantee on the deadline).
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass
from typing import Any

from jctlab.model import Instance, Schedule

#: imported once by the fork server so that a new worker starts in a fraction of a second; a name that no
#: longer exists is skipped by the fork server (the worker then imports what it needs itself)
PRELOAD = ("jctlab.model", "oracle.methods", "formulations.offline.cpsat")


@dataclass(frozen=True)
class Answer:
    status: str
    objective: float | None
    lower_bound: float | None
    schedule: Schedule | None
    runtime_s: float
    error: str | None = None


def _solve(inst: Instance, hint: Schedule | None, method: str, time_limit: float, threads: int,
           seed: int) -> Answer:
    from oracle.methods import solve   # heavy (OR-Tools): only the process that solves imports it

    t0 = time.perf_counter()
    res = solve(inst, method=method, time_limit=time_limit, threads=threads, seed=seed, hint=hint)
    err = res.params.get("error") if res.status == "error" else None
    return Answer(res.status, res.objective, res.lower_bound, res.schedule, time.perf_counter() - t0,
                  None if err is None else str(err))


def _serve(conn: Any) -> None:
    """Worker loop: (instance, hint, method, time_limit, threads, seed) in, an :class:`Answer` out."""
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg is None:
            return
        try:
            out = _solve(*msg)
        except Exception as e:  # noqa: BLE001 - reported to the planner, which keeps its heuristic plan
            out = Answer("error", None, None, None, 0.0, f"{e.__class__.__name__}: {e}")
        conn.send(out)


def _context() -> Any:
    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(list(PRELOAD))
    return ctx


class OracleRunner:
    def __init__(self, method: str = "cpsat", threads: int = 1, seed: int = 0, isolate: bool = True):
        self.method, self.threads, self.seed, self.isolate = method, threads, seed, isolate
        self._proc: Any = None
        self._conn: Any = None
        self._pending: Answer | bool | None = None
        self.kills = 0

    def start(self) -> None:
        """Start the worker now (it imports while the caller does other work)."""
        if not self.isolate or (self._proc is not None and self._proc.is_alive()):
            return
        ctx = _context()
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child,), daemon=True, name="jctlab-live-oracle")
        self._proc.start()
        child.close()
        self._conn = parent

    def submit(self, inst: Instance, hint: Schedule | None, time_limit: float) -> None:
        """Start solving (in the worker: the caller goes on while it solves; in process: now)."""
        if not self.isolate:
            self._pending = _solve(inst, hint, self.method, time_limit, self.threads, self.seed)
            return
        self.start()
        try:
            self._conn.send((inst, hint, self.method, time_limit, self.threads, self.seed))
            self._pending = True
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._kill()

    def collect(self, deadline: float) -> Answer | None:
        """The answer to the last :meth:`submit`, or None when it has none by ``deadline``
        (``time.perf_counter()`` clock): the worker is then killed, the next request starts a new one."""
        pending, self._pending = self._pending, None
        if pending is None or isinstance(pending, Answer):
            return pending
        try:
            if self._conn.poll(max(0.0, deadline - time.perf_counter())):
                return self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            pass
        self._kill()
        return None

    def _kill(self) -> None:
        self.kills += 1
        if self._proc is not None:
            self._proc.kill()
            self._proc.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        self._proc = self._conn = None

    def close(self) -> None:
        if self._proc is None:
            return
        try:
            self._conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self._proc.join(timeout=2)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5)
        self._conn.close()
        self._proc = self._conn = None

    def __enter__(self) -> "OracleRunner":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
