"""Online policy ``sampling``: the matching policy whose per-event placement also draws ``samples``
importance-sampled size categories (seeded: ``seed`` + decision number) and keeps the best."""

from __future__ import annotations

from jctlab.model import Instance
from matching.online import MatchingPolicy


def sampling_policy(inst: Instance, seed: int = 0, samples: int = 8, fairness: float = 0.0, width: int = 0,
                    **opts) -> MatchingPolicy:
    return MatchingPolicy(inst, seed=seed, samples=samples, fairness=fairness, width=width, **opts)
