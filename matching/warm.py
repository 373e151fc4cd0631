"""Compile (or load from numba's disk cache) the matching kernels (:mod:`matching.jit`)."""

from __future__ import annotations

import numpy as np

from jctlab.model import Instance

from .methods import market_choice, objective_menu
from .search import beam, polish, reference


def warm_matching(inst: Instance) -> None:
    """Run the market, the beam search and the polish, with and without fairness, on ``inst``: every matching
    kernel is then compiled or loaded."""
    menu = objective_menu(inst)
    lam, choice = market_choice(menu, 0.03)
    polish(menu, np.asarray(choice), fairness=0.0)
    polish(menu, np.asarray(choice), fairness=0.5, ref=reference(menu))
    beam(menu, lam, 4)
