"""Compiled loops for the hot paths of matching and sampling (numba ``njit``, cached on disk).

The auction, the repair and the local searches are small loops over jobs × options that numpy can
only express as many tiny array calls; compiled, one call costs microseconds. ``NUMBA_DISABLE_JIT=1``
runs the same functions as plain Python (for debugging and coverage).
"""

from __future__ import annotations

import numba


def njit(fn):
    """Compile ``fn`` in nopython mode, caching the machine code next to its module."""
    return numba.njit(cache=True, nogil=True)(fn)
