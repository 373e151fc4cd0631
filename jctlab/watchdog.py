"""A wall-clock watchdog: interrupt the body of a ``with`` block after some seconds.

One definition for every place that must not hang on code it does not control: the evaluation harness (a
user's policy that never returns), the fuzz runner and the time-limit tests (a solver that overruns).
"""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def raise_after(seconds: float | None, exc: type[BaseException]) -> Iterator[None]:
    """Raise ``exc()`` in the body after ``seconds`` of wall-clock time (SIGALRM). Python code is stopped
    between two bytecodes; code inside a C library (a solver's search) only when it returns, which its own time
    limit bounds. A no-op without ``seconds``, off the main thread, or where there is no SIGALRM (the body then
    runs to its end). ``exc`` should derive from BaseException only, so that the body's ``except Exception``
    cannot swallow it."""
    if seconds is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def fire(signum, frame):
        raise exc()

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


__all__ = ["raise_after"]
