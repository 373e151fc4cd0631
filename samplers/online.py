"""Online policy ``sampling``: the matching policy whose per-event placement also draws ``samples``
importance-sampled size categories (seeded: ``seed`` + decision number) and keeps the best."""

from __future__ import annotations

from jctlab.argtypes import Count, Fairness
from jctlab.model import Instance
from matching.online import MatchingPolicy


def sampling_policy(inst: Instance, seed: int = 0, samples: Count = 8, fairness: Fairness = 0.0, width: Count = 0,
                    max_jobs: Count = 64) -> MatchingPolicy:
    return MatchingPolicy(inst, seed=seed, samples=samples, fairness=fairness, width=width, max_jobs=max_jobs)
