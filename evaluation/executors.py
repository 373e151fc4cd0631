"""Where cells run: in this process (``inline``), in local worker processes (``local``, the default) or
as Ray tasks (``ray``). Each calls ``on_result(outcome)`` in the driver as each cell finishes, in the
order they finish; the driver writes it at once.

``local``: a process pool of ``workers`` processes (forkserver where the platform has it: workers fork
from a clean server that has imported the methods, never from a driver holding threads), so that
``workers x threads`` never exceeds the cores. ``ray``: one task per cell (``num_cpus`` = the cell's
solver threads) on an existing cluster (``address``) or a local one, results consumed with
``ray.wait`` as they come; instances travel through the object store, so remote machines need no
suite files.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, Callable, Protocol, Sequence

from jctlab.errors import InputError
from jctlab.model import read_json

from .cells import CellOutcome, CellTask, run_cell

OnResult = Callable[[CellOutcome], None]
#: imported once by the fork server, so that each worker starts without re-importing the core
PRELOAD = ("jctlab.replay", "jctlab.simulate", "evaluation.cells")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Progress(Protocol):
    def running(self, n: int) -> None: ...


class Executor(Protocol):
    def run(self, tasks: Sequence[CellTask], on_result: OnResult, progress: Progress) -> None: ...


class InlineExecutor:
    """One cell at a time in this process (debugging, tests, benchmarks of the harness itself)."""

    def run(self, tasks: Sequence[CellTask], on_result: OnResult, progress: Progress) -> None:
        for t in tasks:
            progress.running(1)
            on_result(run_cell(t))
        progress.running(0)


def max_workers(threads: int) -> int:
    return max(1, cores() // max(1, threads))


class LocalExecutor:
    def __init__(self, workers: int | None, threads: int):
        if threads > cores():
            raise InputError("command line", "--threads", f"{threads} solver threads exceed the {cores()} cores")
        top = max_workers(threads)
        if workers is not None and (workers < 1 or workers * threads > cores()):
            raise InputError("command line", "--workers",
                             f"{workers} workers x {threads} solver threads exceeds the {cores()} cores "
                             f"(at most {top} workers)")
        self.workers = workers or top

    def run(self, tasks: Sequence[CellTask], on_result: OnResult, progress: Progress) -> None:
        if not tasks:
            return
        ctx = _context()
        todo = list(tasks)
        with ProcessPoolExecutor(max_workers=min(self.workers, len(todo)), mp_context=ctx) as pool:
            pending: set[Future] = set()
            try:
                # at most one queued cell per worker beyond the running ones: a kill loses only those
                while todo or pending:
                    while todo and len(pending) < 2 * self.workers:
                        pending.add(pool.submit(run_cell, todo.pop(0)))
                    progress.running(min(len(pending), self.workers))
                    done, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in done:
                        on_result(f.result())
            except BaseException:
                for f in pending:
                    f.cancel()
                raise
        progress.running(0)


def _context() -> Any:
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(list(PRELOAD))
        return ctx
    return mp.get_context("spawn")


class RayExecutor:
    def __init__(self, address: str | None, threads: int):
        try:
            import ray  # optional extra `ray`: only this executor needs it
        except ImportError:
            raise InputError("command line", "--executor", "ray is not installed (pip install 'jctlab[ray]')") from None
        self.ray = ray
        self.address = address
        self.threads = threads

    def run(self, tasks: Sequence[CellTask], on_result: OnResult, progress: Progress) -> None:
        if not tasks:
            return
        ray = self.ray
        started_here = not ray.is_initialized()
        if started_here:
            kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if self.address:
                kw["address"] = self.address
            else:
                kw["num_cpus"] = cores()
            try:
                ray.init(**kw)
            except (ConnectionError, ValueError, RuntimeError) as e:
                raise InputError("command line", "--address", f"cannot reach the Ray cluster: {e}") from None
        try:
            remote = ray.remote(num_cpus=self.threads, max_retries=0)(_ray_cell)
            # one object per instance in the object store, shared by its cells
            refs: dict[str, Any] = {}
            for t in tasks:
                if t.source.sha256 not in refs:
                    refs[t.source.sha256] = ray.put(_instance_dict(t))
            pending = [remote.remote(t, refs[t.source.sha256]) for t in tasks]
            slots = max(1, int(ray.cluster_resources().get("CPU", 1)) // self.threads)
            while pending:
                progress.running(min(len(pending), slots))
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    on_result(ray.get(ref))
        finally:
            if started_here:
                ray.shutdown()
        progress.running(0)


def _instance_dict(task: CellTask) -> dict[str, Any]:
    if task.source.path is None:
        raise InputError(task.instance_name, "", "no instance file")
    return read_json(task.source.path)


def _ray_cell(task: CellTask, inst: dict[str, Any]) -> CellOutcome:
    return run_cell(task, inst)


def make_executor(name: str, workers: int | None, threads: int, address: str | None) -> Executor:
    if name == "inline":
        return InlineExecutor()
    if name == "local":
        return LocalExecutor(workers, threads)
    if name == "ray":
        return RayExecutor(address, threads)
    raise InputError("command line", "--executor", f"unknown executor {name!r} (local, ray, inline)")
