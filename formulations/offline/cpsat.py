"""CP-SAT oracle for the offline class (SPEC §3): non-preemptive jobs arriving over time.

Models (all :func:`formulations.offline.cpsat_model.solve_option_model`, over different option sets):

* **exact model** (every allocation, :mod:`formulations.offline.concrete`): on small instances whose
  enumeration is complete; its bound is a bound of the offline class.
* **class model** (:func:`formulations.offline.classes.class_options`): "n GPUs on node v" / "n GPUs spread"
  with lower-bound durations; a relaxation whatever the size of the instance. Decoded into concrete GPUs by
  list scheduling (:mod:`formulations.offline.decode`).
* **hybrid models** (:func:`formulations.offline.classes.hybrid_node_options`): jobs the class solution
  cheats on get every single-node GPU set on the node it put them on (lazy variability); relaxations.
* **node-exact model**: every single-node allocation, spread ones relaxed; exact for schedules without
  spread jobs; then **rate bands** (:mod:`formulations.offline.rates`) where its spread jobs leave a gap.

The phases and their order are in :func:`phases` (complete instances) and :func:`large_phases`; each
phase is in :mod:`formulations.offline.cpsat_phases` (the improvement rounds of large instances in
:mod:`formulations.offline.cpsat_rounds`). Bounds: the largest of the proven bounds of the
relaxations, the preemptive and time-indexed LPs and Σ(a_j + p_j). Incumbents are re-timed and replayed.

Status: ``optimal`` when the replayed objective and the proven bound agree within the replay tolerance
(relative 1e-6, which covers the rounding unit); ``feasible`` with the bound otherwise; ``infeasible``
when some job fits no allocation; ``timeout_no_solution`` with the bound.
"""

from __future__ import annotations

import time

from ortools import __version__ as ORTOOLS_VERSION

from jctlab.model import Instance, Schedule
from jctlab.result import Result

from . import cpsat_phases as ph
from . import cpsat_rounds as rounds
from .cpsat_phases import CpsatParams, CpsatState
from .pipeline import (Phase, Shared, check_offline, class_search_applies, class_search_phase, class_targets_apply,
                       class_targets_phase, finish, free_gpus_phase, lagrangian_applies, lagrangian_phase,
                       node_patterns_apply, node_patterns_phase, run_phases, start, stop_without_time)

SOLVER = "cpsat"

__all__ = ["CpsatParams", "SOLVER", "complete_phases", "large_phases", "solve"]


def complete_phases(p: CpsatParams) -> list[Phase[CpsatState]]:
    """Small instances whose every allocation is enumerated: the exact model, then more bounds."""
    return [
        Phase("queue-test", ph.queue_test, p.offline.pre_share),
        Phase("lagrangian", lagrangian_phase, p.offline.lag_share, when=lambda s: s.queue and lagrangian_applies(s)),
        Phase("local-search", ph.queue_local_search, p.offline.ls_share, when=ph.on_a_queue),
        Phase("exact", ph.exact_model, p.exact_share),
        Phase("bounds-after-exact", ph.bounds_after_exact, p.class_share, when=ph.limited_and_open),
    ]


def large_phases(p: CpsatParams) -> list[Phase[CpsatState]]:
    """Every other instance: relaxations for the bound, and incumbents from their decodes and searches."""
    return [
        Phase("options", ph.large_setup),
        Phase("local-search", ph.first_local_search, p.offline.ls_share, when=ph.uses_local_search),
        Phase("no-time-left", stop_without_time),
        Phase("relaxed", ph.class_model, p.relaxed_share),
        Phase("preemptive-lp", ph.preemptive_lp_for_unproven_classes, p.offline.pre_share,
              when=ph.class_model_unproven),
        Phase("lagrangian", lagrangian_phase, p.offline.lag_share,
              when=lambda s: s.pre is not None and lagrangian_applies(s)),
        Phase("node-patterns", node_patterns_phase, p.offline.lag_node_share,
              when=lambda s: s.pre is not None and node_patterns_apply(s)),
        Phase("class-search", class_search_phase, p.offline.class_search_share,
              when=lambda s: s.pre is not None and class_search_applies(s)),
        Phase("class-targets", class_targets_phase, p.offline.class_targets_share,
              when=lambda s: s.pre is not None and class_targets_apply(s)),
        Phase("relaxed-core", ph.core_class_model, p.core_share, when=ph.core_workers_apply),
        Phase("relaxed-levels", ph.class_model_by_level, None),
        Phase("time-indexed-lp", ph.time_indexed_lp, p.lp_share, when=ph.class_model_unproven_and_open),
        Phase("node-decode", ph.decode_class_solution, p.node_decode_share),
        Phase("deadlines", ph.restrict_by_latest_completions, p.deadline_share, when=ph.deadlines_apply),
        Phase("hybrid", rounds.hybrid_rounds, p.hybrid_share, when=ph.hybrid_rounds_apply),
        Phase("local-search", rounds.second_local_search, p.offline.ls_share, when=ph.second_search_applies),
        Phase("lns", rounds.large_neighbourhood_search, p.lns_share, when=ph.lns_applies),
        Phase("node-decode", rounds.decode_incumbent, p.node_decode_share),
        Phase("free-gpus", free_gpus_phase, p.free_gpus_share, when=ph.free_gpus_climb_applies),
        Phase("node-exact", rounds.node_exact_model, None),
        Phase("rate-bands", rounds.rate_rounds, None, when=ph.rate_bands_apply),
        Phase("restricted-exact", rounds.restricted_exact_model, None, when=ph.restricted_exact_applies),
    ]


def solve(inst: Instance, *, time_limit: float | None = None, threads: int = 1, seed: int = 0,
          hint: Schedule | None = None, warm: bool = True, params: CpsatParams = CpsatParams(),
          shared: Shared = Shared()) -> Result:
    """Offline oracle by CP-SAT (see the module docstring, and :class:`CpsatParams` for the knobs). ``shared``:
    bounds another solver already computed (``auto``'s preemptive LP).

    Without a time limit every model is solved to its end (one CP-SAT worker and a fixed seed: the same
    result every time). ``Result.params["phases"]`` lists per phase the CP-SAT status, bound, best
    objective and elapsed time."""
    t0 = time.perf_counter()
    check_offline(inst, "offline_cpsat")
    state = start(inst, CpsatState, time_limit=time_limit, threads=threads, seed=seed, hint=hint, warm=warm,
                  solver=SOLVER, version=ORTOOLS_VERSION,
                  params={"time_limit": time_limit, "threads": threads, "seed": seed}, offline=params.offline,
                  t0=t0, cpsat=params, shared=shared)
    if isinstance(state, Result):
        return state
    run_phases(state, complete_phases(params) if state.complete else large_phases(params))
    return finish(state)
