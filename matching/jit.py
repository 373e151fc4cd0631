"""Compiled loops for the hot paths of matching and sampling (numba ``njit``, cached on disk).

The auction, the repair and the local searches are small loops over jobs × options that numpy can
only express as many tiny array calls; compiled, one call costs microseconds. ``NUMBA_DISABLE_JIT=1``
runs the same functions as plain Python (for debugging and coverage).

Compiling them all takes ~9 s on the 2-core reference machine, once per checkout (then ~0.7 s to load
from the disk cache in each process). Paid inside a solver's time limit, that starves it: ``jctlab solve
--method auto --time-limit 10`` on a fresh checkout returned the matching heuristic with a 64 % certified
gap instead of the optimum it proves in 1 s. So the set-up (``make setup``) runs ``python -m matching.jit``,
which compiles every kernel (:func:`warm`) before any solver does.
"""

from __future__ import annotations

import os

import numba

#: every compiled kernel, in definition order (filled by :func:`njit` as the modules are imported)
KERNELS: list = []
#: the modules that define kernels
MODULES = ("matching.market", "matching.search", "samplers.core")


def njit(fn):
    """Compile ``fn`` in nopython mode, caching the machine code next to its module."""
    k = numba.njit(cache=True, nogil=True)(fn)
    KERNELS.append(k)
    return k


def warm(seed: int = 0) -> list[str]:
    """Compile (or load from the disk cache) every kernel by running the matching and sampling methods,
    and each search with and without fairness, on a small generated instance. Returns the names of
    kernels neither compiled nor in the disk cache (empty when all are ready, and under
    ``NUMBA_DISABLE_JIT=1``)."""
    import importlib

    import numpy as np

    from jctlab.generators import static_instance

    for m in MODULES:
        importlib.import_module(m)
    from matching.methods import market_choice, objective_menu
    from matching.search import beam, polish, reference
    from samplers.methods import sample_batch, sample_best

    inst = static_instance(gpus=8, nodes=2, jobs=5, variability=0.05, locality_penalty=1.2, seed=seed)
    menu = objective_menu(inst)
    lam, choice = market_choice(menu, 0.03)
    polish(menu, np.asarray(choice), fairness=0.0)
    polish(menu, np.asarray(choice), fairness=0.5, ref=reference(menu))
    beam(menu, lam, 4)
    sample_batch(menu, lam, 4, seed, 0.0, "importance", 0.05, None, 1)
    sample_best(menu, lam, 2, seed, 0.0, "importance", 0.05, 2, None, None)
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


if __name__ == "__main__":     # run as a script this module is ``__main__``: the kernels register in ``matching.jit``
    from matching import jit

    missing = jit.warm()
    print(f"matching.jit: {len(jit.KERNELS) - len(missing)} of {len(jit.KERNELS)} kernels ready"
          + (f"; not compiled: {', '.join(missing)}" if missing else ""))
    raise SystemExit(1 if missing else 0)
