"""Online policy ``sampling``: the matching policy whose per-event placement also draws ``samples``
importance-sampled size categories (seeded: ``seed`` + decision number) and keeps the best."""

from __future__ import annotations

from jctlab.argtypes import Count, Fairness
from jctlab.model import Instance
from matching.online import MatchingPolicy

from .methods import sample_best


class SamplingPolicy(MatchingPolicy):
    def propose(self, menu, lam):
        """The best of ``samples`` sampled choices, when the policy samples."""
        if self.samples <= 0:
            return None
        alt, _ = sample_best(menu, lam, self.samples, self.seed + self.calls, self.fairness)
        return alt


def sampling_policy(inst: Instance, seed: int = 0, samples: Count = 8, fairness: Fairness = 0.0, width: Count = 0,
                    max_jobs: Count = 64) -> SamplingPolicy:
    return SamplingPolicy(inst, seed=seed, samples=samples, fairness=fairness, width=width, max_jobs=max_jobs)
