"""Compiled loops for the hot paths of matching and sampling (numba ``njit``, cached on disk).

The auction, the repair and the local searches are small loops over jobs × options that numpy can
only express as many tiny array calls; compiled, one call costs microseconds. ``NUMBA_DISABLE_JIT=1``
runs the same functions as plain Python (for debugging and coverage).

Compiling them all takes seconds, once per checkout (then ~0.7 s to load
from the disk cache in each process). Paid inside a solver's time limit, that starves it: ``jctlab solve
--method auto --time-limit 10`` on a fresh checkout returned the matching heuristic with a 64 % certified
gap instead of the optimum it proves in 1 s. So the set-up (``make setup``) runs ``python -m samplers.warm``,
which compiles every kernel of both packages before any solver does.
"""

from __future__ import annotations

import os

import numba

#: every compiled kernel, in definition order (filled by :func:`njit` as the modules are imported)
KERNELS: list = []


def njit(fn):
    """Compile ``fn`` in nopython mode, caching the machine code next to its module."""
    k = numba.njit(cache=True, nogil=True)(fn)
    KERNELS.append(k)
    return k


def missing() -> list[str]:
    """The names of the registered kernels neither compiled nor in the disk cache (empty when all are ready,
    and under ``NUMBA_DISABLE_JIT=1``)."""
    return [getattr(k, "py_func", k).__qualname__ for k in KERNELS if not _ready(k)]


def _ready(kernel) -> bool:
    """Compiled in this process, or in numba's disk cache (a kernel called only from other kernels is
    loaded as part of their cached code, so it has no signature of its own then)."""
    if not hasattr(kernel, "signatures") or kernel.signatures:   # NUMBA_DISABLE_JIT=1: plain Python
        return True
    try:
        return os.path.exists(kernel._cache._cache_file._index_path)   # numba's cache index of the kernel
    except AttributeError:      # another numba layout: trust the signatures only
        return False
