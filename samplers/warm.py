"""Compile every numba kernel of matching and sampling (``python -m samplers.warm``, run by ``make setup``).

Compiled on first use instead, the kernels would take seconds of the first solver's time limit (see
:mod:`matching.jit`). This runs the matching methods and the samplers once on a small generated instance, which
compiles each kernel or loads it from numba's disk cache, and exits 1 if one is neither.
"""

from __future__ import annotations

from jctlab.generators import static_instance
from matching import jit
from matching.methods import market_choice, objective_menu
from matching.search import repair
from matching.warm import warm_matching

from .methods import sample_batch, sample_best


def warm(seed: int = 0) -> list[str]:
    """Compile (or load) every kernel; the names of those that are not ready."""
    inst = static_instance(gpus=8, nodes=2, jobs=5, variability=0.05, locality_penalty=1.2, seed=seed)
    warm_matching(inst)
    menu = objective_menu(inst)
    lam, choice = market_choice(menu, 0.03)
    # called from Python too: compiled here, whatever the cached callers (an edit that moves it in its file
    # leaves them valid and it without a cache entry of its own)
    repair(menu, choice)
    sample_batch(menu, lam, 4, seed, 0.0, "importance", 0.05, None, 1)
    sample_best(menu, lam, 2, seed, 0.0, "importance", 0.05, 2, None, None)
    return jit.missing()


if __name__ == "__main__":
    not_ready = warm()
    print(f"samplers.warm: {len(jit.KERNELS) - len(not_ready)} of {len(jit.KERNELS)} kernels ready"
          + (f"; not compiled: {', '.join(not_ready)}" if not_ready else ""))
    raise SystemExit(1 if not_ready else 0)
