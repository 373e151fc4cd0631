"""The learned policy families' entry points (``jctlab.policy_families``): ``rl`` (``ppo``, ``hrl``) and
``maifs`` (``maifs``, ``maifs-greedy``), with or without ``:CHECKPOINT``.

:func:`jctlab.registry.policy_factory` asks every family in turn until one knows the name, so a process that
runs a baseline (``jctlab simulate INST --policy fifo+pal``) loads these resolvers too. They read the name
first and import the networks (torch: about a second of start-up) only for their own names.
"""

from __future__ import annotations

from typing import Callable

#: the single-agent learned policies (checkpoints ``rl/checkpoints/NAME.pt``)
RL_POLICIES = ("ppo", "hrl")
MAIFS = "maifs"
MAIFS_GREEDY = "maifs-greedy"


def resolve_rl(name: str) -> Callable | None:
    """``ppo`` / ``hrl`` (shipped checkpoints) or ``ppo:PATH`` / ``hrl:PATH``; None for any other name."""
    if not isinstance(name, str):
        return None
    policy, _, path = name.partition(":")
    if policy not in RL_POLICIES:
        return None
    from . import policy as learned   # torch, only for these names (module docstring)

    return learned.factory_for(policy, path or None)


def resolve_maifs(name: str) -> Callable | None:
    """``maifs`` (shipped checkpoint), ``maifs:PATH``, ``maifs-greedy``; None for any other name."""
    if not isinstance(name, str):
        return None
    policy, _, path = name.partition(":")
    if name != MAIFS_GREEDY and policy != MAIFS:
        return None
    from . import maifs_policy   # torch, only for these names (module docstring)

    return maifs_policy.greedy if name == MAIFS_GREEDY else maifs_policy.factory_for(path or None)


resolve_rl.pattern = "ppo|hrl[:CHECKPOINT] (learned policies, rl/)"
resolve_rl.featured = ("hrl", "ppo")         # the shipped checkpoints, on the leaderboard
resolve_maifs.pattern = "maifs[:CHECKPOINT] | maifs-greedy (MAIFS-like multi-agent policy, rl/)"
resolve_maifs.featured = (MAIFS,)

__all__ = ["RL_POLICIES", "resolve_maifs", "resolve_rl"]
